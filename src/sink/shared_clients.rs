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
//! sinks ever ran at once. A reload that raises `dispatch.concurrency`
//! gives the sinks a client with a pool that large (their connections
//! start anew); one that lowers it leaves them theirs.

use super::http::Connections;
use std::collections::HashMap;

/// A client and the idle connections its pool keeps.
#[derive(Clone)]
pub(super) struct PooledClient {
    pub(super) agent: ureq::Agent,
    pub(super) idle_connections: usize,
}

/// Values kept per set of connections: by origin (`scheme://host:port`),
/// then by [`Connections::same_as`].
struct ByConnections<T> {
    by_origin: HashMap<String, Vec<(Connections, T)>>,
}

impl<T> Default for ByConnections<T> {
    fn default() -> ByConnections<T> {
        ByConnections {
            by_origin: HashMap::new(),
        }
    }
}

impl<T> ByConnections<T> {
    /// The connections kept like `connections` and their value, which
    /// `new` makes if none are; `None` for connections without an origin,
    /// which are like no others.
    fn entry(
        &mut self,
        connections: Connections,
        new: impl FnOnce(&Connections) -> T,
    ) -> Option<(&Connections, &mut T)> {
        let held = self
            .by_origin
            .entry(connections.origin.clone()?)
            .or_default();
        let at = match held.iter().position(|(c, _)| c.same_as(&connections)) {
            Some(at) => at,
            None => {
                let value = new(&connections);
                held.push((connections, value));
                held.len() - 1
            }
        };
        let (kept, value) = &mut held[at];
        Some((&*kept, value))
    }

    fn into_values(self) -> impl Iterator<Item = T> {
        self.by_origin
            .into_values()
            .flatten()
            .map(|(_, value)| value)
    }
}

/// The clients so far, each with the connections it was built for.
pub(super) struct SharedClients {
    clients: ByConnections<PooledClient>,
    /// The idle connections a client keeps, at least.
    pool_connections: usize,
}

impl SharedClients {
    /// None held yet; a client keeps at least `pool_connections` idle.
    pub(super) fn new(pool_connections: usize) -> SharedClients {
        SharedClients {
            clients: ByConnections::default(),
            pool_connections,
        }
    }

    /// Holds `client`, built for `connections`, for the sinks of the same
    /// connections to come (of two such, the one with the larger pool).
    pub(super) fn hold(&mut self, connections: Connections, client: PooledClient) {
        if let Some((_, kept)) = self.clients.entry(connections, |_| client.clone()) {
            if kept.idle_connections < client.idle_connections {
                *kept = client;
            }
        }
    }

    /// The client held for the same `connections` if its pool is large
    /// enough, else a new one, held from now on (one without an origin is
    /// held by nobody).
    pub(super) fn client(&mut self, connections: Connections) -> PooledClient {
        let idle_connections = connections.idle_connections().max(self.pool_connections);
        let new = |connections: &Connections| PooledClient {
            agent: connections.client(idle_connections),
            idle_connections,
        };
        if connections.origin.is_none() {
            return new(&connections);
        }
        let (held_for, kept) = (self.clients.entry(connections, new)).expect("an origin");
        if kept.idle_connections < idle_connections {
            *kept = new(held_for);
        }
        kept.clone()
    }
}

/// The pools of these clients, each once: the idle connections it keeps
/// and how many of the clients (one a sink) share it. A client whose
/// connections have no origin has a pool of its own.
pub(super) fn pools(
    clients: impl IntoIterator<Item = (Connections, usize)>,
) -> Vec<(usize, usize)> {
    let mut shared = ByConnections::default();
    let mut own = Vec::new();
    for (connections, idle_connections) in clients {
        match shared.entry(connections, |_| (0, 0)) {
            Some((_, (idle, sinks))) => {
                *idle = idle_connections.max(*idle);
                *sinks += 1;
            }
            None => own.push((idle_connections, 1)),
        }
    }
    own.extend(shared.into_values());
    own
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::http::HttpSinkOptions;

    /// A client is shared by the sinks of one host while its pool is as
    /// large as the node's concurrency asks: a reload that raises it
    /// builds one with a larger pool, shared from then on; one that
    /// lowers it keeps the larger.
    #[test]
    fn a_held_client_serves_while_its_pool_is_large_enough() {
        let connections = || HttpSinkOptions::new("https://hooks.example/a").connections();
        let sink_pool = connections().idle_connections();
        let mut first = SharedClients::new(sink_pool + 8);
        let client = first.client(connections());
        assert_eq!(client.idle_connections, sink_pool + 8);

        let mut raised = SharedClients::new(sink_pool + 56);
        raised.hold(connections(), client.clone());
        let larger = raised.client(connections());
        assert_eq!(larger.idle_connections, sink_pool + 56);
        assert_eq!(
            raised.client(connections()).idle_connections,
            sink_pool + 56
        );
        raised.hold(connections(), client);
        assert_eq!(
            raised.client(connections()).idle_connections,
            sink_pool + 56,
            "the larger pool held"
        );

        let mut lowered = SharedClients::new(1);
        lowered.hold(connections(), larger);
        assert_eq!(
            lowered.client(connections()).idle_connections,
            sink_pool + 56
        );
        let unheld = SharedClients::new(1).client(connections());
        assert_eq!(unheld.idle_connections, sink_pool, "at least a sink's own");
    }
}
