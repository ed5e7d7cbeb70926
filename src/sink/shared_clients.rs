//! The HTTP clients of a registry's HTTP sinks, shared: sinks whose
//! requests go to one scheme, host and port with the same timeouts, pool
//! size, TLS and egress rule (see [`HttpSinkOptions::same_connections`])
//! hold one client, and so one keep-alive pool. A hundred sources posting
//! to one host (Slack's, Zapier's incoming webhooks) keep the connections
//! they need between them, warm, rather than a pool each that mostly
//! holds expired ones, each new delivery paying for a TLS handshake. A
//! registry a reload builds takes the clients of the one it replaces, so a
//! sink rebuilt for another change (a header, a secret, the URL's path)
//! goes on over the connections it had.
//!
//! A shared pool keeps as many of a host's connections idle as the node
//! runs attempts at once (`dispatch.concurrency`; a sink's own
//! `idle_connections`, if more): as many as its sinks may use at once, so
//! none is closed for want of room while they come and go. A connection
//! is idle only after it was in use, so a pool holds no more than its
//! sinks ever ran at once.

use super::http::{origin, HttpSinkOptions};
use std::collections::HashMap;

/// The clients so far, by origin (`scheme://host:port`), each with the
/// options it was built for.
pub(super) struct SharedClients {
    by_origin: HashMap<String, Vec<(HttpSinkOptions, ureq::Agent)>>,
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

    /// Holds `client`, built for `options`, for the sinks of the same
    /// connections to come.
    pub(super) fn hold(&mut self, options: &HttpSinkOptions, client: &ureq::Agent) {
        let Some(origin) = origin(&options.url) else {
            return;
        };
        let held = self.by_origin.entry(origin).or_default();
        if !held.iter().any(|(o, _)| o.same_connections(options)) {
            held.push((options.clone(), client.clone()));
        }
    }

    /// The client held for options of the same connections as `options`,
    /// else a new one, held from now on.
    pub(super) fn client(&mut self, options: &HttpSinkOptions) -> ureq::Agent {
        let held = origin(&options.url).and_then(|origin| self.by_origin.get(&origin));
        let same = held.and_then(|held| held.iter().find(|(o, _)| o.same_connections(options)));
        if let Some((_, client)) = same {
            return client.clone();
        }
        let idle_connections = options.idle_connections.max(self.pool_connections);
        let pooled = HttpSinkOptions {
            idle_connections,
            ..options.clone()
        };
        let client = pooled.client();
        self.hold(options, &client);
        client
    }
}
