//! What the HTTP front did with its connections, for `/metrics`: the loop
//! counts, the metrics route reads.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct FrontCounts {
    /// Client connections open now.
    pub open: AtomicU64,
    /// Client connections taken since the node started.
    pub accepted: AtomicU64,
    /// Connections refused at `http.max_connections`.
    pub refused_at_cap: AtomicU64,
    /// Connections refused with no file descriptor left.
    pub refused_without_fds: AtomicU64,
    /// Requests that did not arrive within `http.read_timeout_ms` (408).
    pub read_timeouts: AtomicU64,
    /// Bytes of `http.max_buffered_bytes` the requests being read and
    /// committed hold now.
    pub buffered_bytes: AtomicU64,
    /// Requests that waited for room in `http.max_buffered_bytes`.
    pub budget_waits: AtomicU64,
    /// Requests to an admin API without a token that a browser sent
    /// (`Origin`, 403 `browser_request`; see `node::open_admin`).
    pub browser_requests_refused: AtomicU64,
    /// Requests to such an API addressed to a DNS name (403 `bad_host`).
    pub rebound_hosts_refused: AtomicU64,
}

impl FrontCounts {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
