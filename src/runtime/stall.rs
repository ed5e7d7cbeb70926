//! Stalls of the whole process: spans in which none of its threads ran —
//! a SIGSTOP, a frozen cgroup or paused container, a VM its host held for
//! a snapshot or a migration, a machine starved of CPU. Attempts running
//! across one fail by their own timeouts though their receivers answered
//! in time (the answer waits unread while the clock runs on), and would
//! open healthy sinks' breakers; the shards tell their cores of each
//! stall, which do not hold such failures against the sinks (see
//! `core::stall`).
//!
//! A thread of its own (one a process, however many engines it runs)
//! wakes every `STALL_TICK_MS`; a gap of `STALL_MIN_MS` or more past its
//! tick is a stall. A shard may run before it after the process is let
//! go again, so a watcher that has not ticked for that long is a stall
//! under way.

use crate::limits::{STALL_MIN_MS, STALL_TICK_MS};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What the watcher saw.
pub(crate) struct StallWatch {
    /// The instant the times below count from.
    base: Instant,
    /// When the watcher last ticked (ns since `base`).
    last_tick_ns: AtomicU64,
    /// Whether its thread runs (it could not be started otherwise).
    ticking: AtomicBool,
    /// The latest stall it saw, from and to (ns since `base`).
    latest: Mutex<Option<(u64, u64)>>,
}

/// The process's watcher, its thread started at the first call.
pub(crate) fn watch() -> &'static StallWatch {
    static WATCH: OnceLock<&'static StallWatch> = OnceLock::new();
    WATCH.get_or_init(|| {
        let watch: &'static StallWatch = Box::leak(Box::new(StallWatch::new(Instant::now())));
        let started = std::thread::Builder::new()
            .name("goad-stall-watch".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(STALL_TICK_MS));
                watch.tick(Instant::now());
            });
        match started {
            Ok(_) => watch.ticking.store(true, Ordering::Release),
            Err(e) => crate::log::warn(
                "cannot start the thread that watches for stalls of the process; attempts cut \
                 short by one count against their sinks' breakers",
                &[("error", &e)],
            ),
        }
        watch
    })
}

impl StallWatch {
    fn new(base: Instant) -> StallWatch {
        StallWatch {
            base,
            last_tick_ns: AtomicU64::new(0),
            ticking: AtomicBool::new(false),
            latest: Mutex::new(None),
        }
    }

    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn instant(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    /// The span a tick at `now_ns` after one at `last_ns` says the
    /// process did not run, if it is a stall.
    fn gap(last_ns: u64, now_ns: u64) -> Option<(u64, u64)> {
        let tick_ns = STALL_TICK_MS * 1_000_000;
        let late_ns = now_ns.saturating_sub(last_ns + tick_ns);
        (late_ns >= STALL_MIN_MS * 1_000_000).then_some((last_ns + tick_ns, now_ns))
    }

    /// The watcher woke at `now`.
    fn tick(&self, now: Instant) {
        let now_ns = self.ns(now);
        let last_ns = self.last_tick_ns.swap(now_ns, Ordering::AcqRel);
        if let Some(stall) = StallWatch::gap(last_ns, now_ns) {
            *self.latest.lock() = Some(stall);
        }
    }

    /// The latest stall as of `now`: one under way (the watcher has not
    /// ticked for a stall's length past its tick), or the last it saw.
    pub(crate) fn latest(&self, now: Instant) -> Option<(Instant, Instant)> {
        let last_ns = self.last_tick_ns.load(Ordering::Acquire);
        let under_way = self.ticking.load(Ordering::Acquire);
        let stall = match under_way
            .then(|| StallWatch::gap(last_ns, self.ns(now)))
            .flatten()
        {
            Some(stall) => Some(stall),
            None => *self.latest.lock(),
        };
        stall.map(|(from, to)| (self.instant(from), self.instant(to)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_late_by_a_stall_s_length_notes_it_and_a_silent_watcher_is_one_under_way() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let watch = StallWatch::new(t0);
        watch.ticking.store(true, Ordering::Release);
        watch.tick(at(100));
        watch.tick(at(230));
        assert_eq!(watch.latest(at(250)), None, "late by 30 ms: no stall");
        // Stopped after the tick at 230 ms, let go at 5,230 ms: a shard
        // that runs before the watcher sees the stall under way...
        let under_way = watch.latest(at(5_230));
        assert_eq!(under_way, Some((at(330), at(5_230))));
        // ...and the watcher notes it when it ticks.
        watch.tick(at(5_240));
        assert_eq!(watch.latest(at(5_250)), Some((at(330), at(5_240))));
        watch.tick(at(5_340));
        assert_eq!(watch.latest(at(5_400)), Some((at(330), at(5_240))), "kept");
    }
}
