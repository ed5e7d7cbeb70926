//! The process's open-files limit (`RLIMIT_NOFILE`): every connection the
//! node serves, every connection to a sink and each store file takes a
//! descriptor. Many systems start a service with a soft limit of 1,024,
//! below what `http.max_connections` (1,024 by default) and the rest need,
//! while allowing far more: `goad serve` raises its soft limit to the hard
//! one at start, as a Go program does, and the node warns when even that
//! is short. A node out of descriptors still answers new connections (see
//! `http::spare_fd`).

use crate::config::Config;
use crate::limits::REFUSALS_LINGERING;

/// The soft limit now (`None` when it cannot be read, or is unlimited).
pub(crate) fn soft_limit() -> Option<u64> {
    limits()
        .map(|l| l.rlim_cur)
        .filter(|&n| n != libc::RLIM_INFINITY)
}

/// Raises the soft limit to the hard limit, and logs it. For a program of
/// its own, such as `goad serve`: the limit is the whole process's, which
/// a host embedding goad decides for itself.
pub fn raise_soft_limit() {
    let Some(mut l) = limits().filter(|l| l.rlim_cur < l.rlim_max) else {
        return;
    };
    let from = l.rlim_cur;
    l.rlim_cur = l.rlim_max;
    // SAFETY: `l` is a valid rlimit, which setrlimit only reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } == 0 {
        let to = soft_limit().map_or("unlimited".into(), |n| n.to_string());
        crate::log::info("open-files limit raised", &[("from", &from), ("to", &to)]);
    }
}

/// Descriptors the node holds whatever its config: its listener, event
/// loop, signal pipe, log, and the spare (18 in all measured, with 2
/// shards, less the shards' 6).
const NODE_FDS: u64 = 16;

/// Descriptors a shard holds: LMDB opens its data file twice and its lock
/// file once (3 measured), and one more to spare.
const SHARD_FDS: u64 = 4;

/// The most descriptors `config` can take at once: every connection it
/// may serve, and those refused at its cap closing in stages
/// (`REFUSALS_LINGERING`), a sink connection per attempt running, the sinks' pools of
/// idle connections (`sink_connections`, what they can keep: see
/// `SinkRegistry::connections_bound`), and the node's own.
pub(crate) fn needed(config: &Config, sink_connections: usize) -> u64 {
    let served = (config.http.max_connections + REFUSALS_LINGERING) as u64;
    let running = u64::from(config.dispatch.concurrency);
    let own = NODE_FDS + SHARD_FDS * config.shard_count() as u64;
    served + running + sink_connections as u64 + own
}

/// Logs a warning when the soft limit is below what `config`, whose sinks
/// can keep `sink_connections`, can take (as the node's engine opens, and
/// after each reload: more sources, sinks or concurrency take more).
pub(crate) fn warn_if_short(config: &Config, sink_connections: usize) {
    let Some(limit) = soft_limit() else {
        return;
    };
    let needed = needed(config, sink_connections);
    if limit < needed {
        crate::log::warn(
            "the open-files limit is below what http.max_connections, dispatch.concurrency and the sinks' kept-alive connections can take: past it, new connections are refused with 503 (raise LimitNOFILE or ulimit -n, or lower http.max_connections)",
            &[
                ("open_files_limit", &limit),
                ("needed", &needed),
                ("http.max_connections", &config.http.max_connections),
                ("dispatch.concurrency", &config.dispatch.concurrency),
            ],
        );
    }
}

fn limits() -> Option<libc::rlimit> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid rlimit for getrlimit to fill.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) };
    (read == 0).then_some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_needs_its_connections_its_sinks_and_its_own() {
        let mut config = Config::default();
        config.http.max_connections = 1_000;
        config.dispatch.concurrency = 50;
        config.shards = 3;
        assert_eq!(
            needed(&config, 70),
            1_000 + 64 + 50 + 70 + NODE_FDS + 3 * SHARD_FDS
        );
    }
}
