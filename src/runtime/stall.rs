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
//!
//! Its clock is `CLOCK_BOOTTIME` ([`stall_clock_ns`]): monotonic, and
//! running while the machine or VM is suspended, when `CLOCK_MONOTONIC`
//! (`Instant`'s) stands still — yet the wall clock, and so the shards'
//! (see `clock`), jumps by the suspend's length on resume, which times
//! out every attempt running. So a suspend is a stall too.

use crate::limits::{STALL_MIN_MS, STALL_TICK_MS};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// What the watcher saw, in nanoseconds of [`stall_clock_ns`].
pub(crate) struct StallWatch {
    /// When the watcher last ticked.
    last_tick_ns: AtomicU64,
    /// Whether its thread runs (it could not be started otherwise).
    ticking: AtomicBool,
    /// The latest stall it saw, from and to.
    latest: Mutex<Option<(u64, u64)>>,
}

/// The watcher's clock now (ns): `CLOCK_BOOTTIME` (see the module docs),
/// or `CLOCK_MONOTONIC` where the system has none.
pub(crate) fn stall_clock_ns() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let id = libc::CLOCK_BOOTTIME;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let id = libc::CLOCK_MONOTONIC;
    super::clock_ns(id)
}

/// The process's watcher, its thread started at the first call.
pub(crate) fn watch() -> &'static StallWatch {
    static WATCH: OnceLock<&'static StallWatch> = OnceLock::new();
    WATCH.get_or_init(|| {
        let watch: &'static StallWatch = Box::leak(Box::new(StallWatch::new(stall_clock_ns())));
        let started = std::thread::Builder::new()
            .name("goad-stall-watch".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(STALL_TICK_MS));
                watch.tick(stall_clock_ns());
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
    /// A watcher that starts at `now_ns`.
    fn new(now_ns: u64) -> StallWatch {
        StallWatch {
            last_tick_ns: AtomicU64::new(now_ns),
            ticking: AtomicBool::new(false),
            latest: Mutex::new(None),
        }
    }

    /// The span a tick at `now_ns` after one at `last_ns` says the
    /// process did not run, if it is a stall.
    fn gap(last_ns: u64, now_ns: u64) -> Option<(u64, u64)> {
        let tick_ns = STALL_TICK_MS * 1_000_000;
        let late_ns = now_ns.saturating_sub(last_ns + tick_ns);
        (late_ns >= STALL_MIN_MS * 1_000_000).then_some((last_ns + tick_ns, now_ns))
    }

    /// The watcher woke at `now_ns`.
    fn tick(&self, now_ns: u64) {
        let last_ns = self.last_tick_ns.swap(now_ns, Ordering::AcqRel);
        if let Some(stall) = StallWatch::gap(last_ns, now_ns) {
            *self.latest.lock() = Some(stall);
        }
    }

    /// The latest stall as of `now_ns`, from and to: one under way (the
    /// watcher has not ticked for a stall's length past its tick), or the
    /// last it saw.
    pub(crate) fn latest(&self, now_ns: u64) -> Option<(u64, u64)> {
        let last_ns = self.last_tick_ns.load(Ordering::Acquire);
        let under_way = self.ticking.load(Ordering::Acquire);
        let stall = under_way.then(|| StallWatch::gap(last_ns, now_ns));
        stall.flatten().or_else(|| *self.latest.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_late_by_a_stall_s_length_notes_it_and_a_silent_watcher_is_one_under_way() {
        let at = |ms: u64| 7_000_000_000 + ms * 1_000_000;
        let watch = StallWatch::new(at(0));
        watch.ticking.store(true, Ordering::Release);
        watch.tick(at(100));
        watch.tick(at(230));
        assert_eq!(watch.latest(at(250)), None, "late by 30 ms: no stall");
        // Stopped (or suspended) after the tick at 230 ms, let go at
        // 5,230 ms: a shard that runs before the watcher sees the stall
        // under way...
        let under_way = watch.latest(at(5_230));
        assert_eq!(under_way, Some((at(330), at(5_230))));
        // ...and the watcher notes it when it ticks.
        watch.tick(at(5_240));
        assert_eq!(watch.latest(at(5_250)), Some((at(330), at(5_240))));
        watch.tick(at(5_340));
        assert_eq!(watch.latest(at(5_400)), Some((at(330), at(5_240))), "kept");
    }
}
