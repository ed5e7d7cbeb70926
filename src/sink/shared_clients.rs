//! The HTTP clients of a registry's HTTP sinks, shared: sinks whose
//! requests go to one scheme, host and port with the same timeouts, pool
//! size, TLS and egress rule (the same [`Connections`]) hold one client,
//! and so one keep-alive pool. A hundred sources posting to one host
//! (Slack's, Zapier's incoming webhooks) keep the connections they need
//! between them, warm, rather than a pool each that mostly holds expired
//! ones, each new delivery paying for a TLS handshake. A registry a
//! reload builds takes the clients of the one it replaces, so a sink
//! rebuilt for another change (a header, a secret, the URL's path) goes
//! on over the connections it had.
//!
//! A shared pool keeps as many of a host's connections idle as the node
//! runs attempts at once (`dispatch.concurrency`; a sink's own
//! `idle_connections`, if more): as many as its sinks may use at once, so
//! none is closed for want of room while they come and go. A connection
//! is idle only after it was in use, so a pool holds no more than its
//! sinks ever ran at once.

use super::http::Connections;
use std::collections::HashMap;

/// The clients so far, by origin (`scheme://host:port`), each with the
/// connections it was built for.
pub(super) struct SharedClients {
    by_origin: HashMap<String, Vec<(Connections, ureq::Agent)>>,
    /// The idle connections a new client keeps, at least.
    pool_connections: usize,
}

impl SharedClients {
    /// None held yet; a new client keeps at least `pool_connections` idle.
    pub(super) fn new(pool_connections: usize) -> SharedClients {
        SharedClients {
            by_origin: HashMap::new(),
            pool_connections,
        }
    }

    /// Holds `client`, built for `connections`, for the sinks of the same
    /// connections to come.
    pub(super) fn hold(&mut self, connections: Connections, client: ureq::Agent) {
        let Some(origin) = connections.origin.clone() else {
            return;
        };
        let held = self.by_origin.entry(origin).or_default();
        if !held.iter().any(|(c, _)| c.same_as(&connections)) {
            held.push((connections, client));
        }
    }

    /// The client held for the same `connections`, else a new one, held
    /// from now on (one without an origin is held by nobody).
    pub(super) fn client(&mut self, connections: Connections) -> ureq::Agent {
        let idle_connections = connections.idle_connections().max(self.pool_connections);
        let Some(origin) = connections.origin.clone() else {
            return connections.client(idle_connections);
        };
        let held = self.by_origin.entry(origin).or_default();
        if let Some((_, client)) = held.iter().find(|(c, _)| c.same_as(&connections)) {
            return client.clone();
        }
        let client = connections.client(idle_connections);
        held.push((connections, client.clone()));
        client
    }
}
