//! What a shard thread does when its loop panics (a bug in goad, since a
//! sink's panic is a failed attempt and a host callback's is caught where it
//! runs): it logs the panic, answers the commits of the failed iteration
//! with [`CommitError::ShardRestarting`](super::CommitError::ShardRestarting),
//! and rebuilds its state from its store, as a process restart would (rows
//! claimed are due again; the write transaction of the failed iteration is
//! dropped, so nothing half-written is stored). Attempts still running are
//! taken on by the rebuilt core (see `core::stragglers`).
//!
//! A shard that panics for the first time (or after a healthy run) serves
//! again at once. One that panics again soon after its restart refuses
//! commits for a delay that doubles per repeat, so a panic that recurs on
//! every iteration costs a log line per delay, not a busy loop, and commits
//! fail fast instead of waiting for a shard that cannot answer.

use crate::limits::{SHARD_HEALTHY_RUN_MS, SHARD_MAX_RESTART_DELAY_MS, SHARD_RESTART_DELAY_MS};

/// A shard's restarts so far.
#[derive(Debug, Default)]
pub struct Restarts {
    /// Restarts since the shard opened.
    pub count: u64,
    /// Panics in a row, each within `SHARD_HEALTHY_RUN_MS` of the last restart.
    in_a_row: u32,
    /// When the shard last started serving.
    serving_since_ms: u64,
}

impl Restarts {
    /// A panic at `now_ms`: counts it and returns how long the shard
    /// refuses commits before it serves again.
    pub fn record(&mut self, now_ms: u64) -> u64 {
        self.count += 1;
        let healthy = self.count == 1 || now_ms >= self.serving_since_ms + SHARD_HEALTHY_RUN_MS;
        self.in_a_row = if healthy { 1 } else { self.in_a_row + 1 };
        let delay_ms = restart_delay_ms(self.in_a_row);
        self.serving_since_ms = now_ms + delay_ms;
        delay_ms
    }
}

/// The refusal before serving again after the `in_a_row`-th quick panic:
/// none for the first, then 1 s, 2 s, 4 s, … up to a minute.
fn restart_delay_ms(in_a_row: u32) -> u64 {
    match in_a_row {
        0 | 1 => 0,
        n => SHARD_RESTART_DELAY_MS
            .saturating_mul(1u64 << (n - 2).min(16))
            .min(SHARD_MAX_RESTART_DELAY_MS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SinkConfig;
    use crate::runtime::{CommitError, Engine, NewHook};
    use crate::sink::{Delivery, Sink, SinkError};
    use crate::test_support::{one_source, wait_until};
    use parking_lot::{Condvar, Mutex};
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A host sink that holds every attempt until it is opened, lists the
    /// bodies it was given, and counts how many attempts of a body ever ran
    /// at once.
    #[derive(Default)]
    struct Gate {
        open: Mutex<bool>,
        opened: Condvar,
        arrivals: Mutex<Vec<String>>,
        /// Per body: attempts running now, and the most ever at once.
        overlap: Mutex<HashMap<String, (usize, usize)>>,
    }

    impl Sink for Gate {
        fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
            let body = String::from_utf8_lossy(&delivery.hook.body).into_owned();
            self.arrivals.lock().push(body.clone());
            {
                let mut overlap = self.overlap.lock();
                let (now, most) = overlap.entry(body.clone()).or_default();
                *now += 1;
                *most = (*most).max(*now);
            }
            let mut open = self.open.lock();
            while !*open {
                self.opened.wait(&mut open);
            }
            drop(open);
            self.overlap.lock().get_mut(&body).expect("counted").0 -= 1;
            Ok(())
        }
    }

    impl Gate {
        fn count(&self, body: &str) -> usize {
            self.arrivals.lock().iter().filter(|b| *b == body).count()
        }
    }

    /// An engine over `dir` whose source `s` delivers to the host sink `sink`.
    fn engine_with(dir: &std::path::Path, sink: Arc<dyn Sink>) -> Engine {
        let config = one_source(dir, SinkConfig::of_kind("host"));
        Engine::builder(config).sink("host", sink).open().unwrap()
    }

    /// A panic in a shard's loop is a restart from its store: the attempts
    /// under way go on, their rows held, and their results settle them
    /// (delivered once, never run twice at once), commits go on, and a second panic soon after refuses commits for a
    /// second with an error saying why, instead of leaving them waiting on
    /// a dead thread.
    #[test]
    fn a_shard_that_panics_restarts_from_its_store_and_loses_no_hook() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Gate::default());
        let engine = engine_with(dir.path(), gate.clone());
        engine.commit(NewHook::new("s", "a")).unwrap();
        wait_until("a's first attempt", || gate.count("a") == 1);

        engine.panic_shard(0);
        wait_until("the restart", || engine.stats()[0].restarts == 1);
        assert!(
            !engine.stats()[0].restarting,
            "a first panic restarts at once"
        );
        // The attempt under way when the shard panicked is the old core's:
        // it still runs, and the new core counts it as running.
        engine.commit(NewHook::new("s", "b")).unwrap();
        wait_until("b's attempt", || gate.count("b") == 1);
        // (The gauges are published after the iteration that started b,
        // which its worker may outrun.)
        wait_until("a's old attempt and b's counted running", || {
            engine.stats()[0].core.running == 2
        });

        engine.panic_shard(0);
        wait_until("the second restart", || engine.stats()[0].restarts == 2);
        assert!(
            engine.stats()[0].restarting,
            "a quick repeat refuses commits"
        );
        assert!(matches!(
            engine.commit(NewHook::new("s", "refused")),
            Err(CommitError::ShardRestarting)
        ));
        *gate.open.lock() = true;
        gate.opened.notify_all();
        wait_until("the refusal to end", || !engine.stats()[0].restarting);
        engine.commit(NewHook::new("s", "c")).unwrap();
        engine.tick().unwrap();

        // Every committed hook delivered once: the attempts that ran
        // through a restart settled their rows; the refused hook was never
        // stored.
        assert_eq!(
            ["a", "b", "c", "refused"].map(|body| gate.count(body)),
            [1, 1, 1, 0]
        );
        let overlap = gate.overlap.lock();
        assert!(
            overlap.values().all(|(_, most)| *most == 1),
            "a row ran twice at once: {overlap:?}"
        );
        assert_eq!(engine.hook_count().unwrap(), 0);
        engine.shutdown();
    }

    #[test]
    fn a_first_panic_restarts_at_once_and_quick_repeats_back_off_to_a_minute() {
        let mut restarts = Restarts::default();
        assert_eq!(restarts.record(1_000), 0);
        // Again 10 s later: within a healthy run of the restart.
        assert_eq!(restarts.record(11_000), 1_000);
        // Counted from when it served again (12 s).
        assert_eq!(restarts.record(12_500), 2_000);
        assert_eq!(restarts.record(14_500), 4_000);
        let mut now_ms = 18_500;
        let mut delays = Vec::new();
        for _ in 0..5 {
            let delay_ms = restarts.record(now_ms);
            delays.push(delay_ms);
            now_ms += delay_ms;
        }
        assert_eq!(delays, [8_000, 16_000, 32_000, 60_000, 60_000]);
        // A minute of serving since the last restart: the next panic is a first again.
        assert_eq!(restarts.record(now_ms + SHARD_HEALTHY_RUN_MS), 0);
        assert_eq!(restarts.count, 10);
    }

    /// Counts the hook ids it is given, and takes each at once.
    #[derive(Default)]
    struct Tally(Mutex<HashSet<String>>);

    impl Sink for Tally {
        fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
            self.0.lock().insert(delivery.hook.id.clone());
            Ok(())
        }
    }

    /// Panics while eight threads commit and the shard delivers: every
    /// commit is answered (acknowledged, or refused with `ShardRestarting`,
    /// never left to time out), and every acknowledged hook is delivered.
    #[test]
    fn panics_under_load_lose_no_acknowledged_hook_and_leave_no_commit_unanswered() {
        let dir = tempfile::tempdir().unwrap();
        let tally = Arc::new(Tally::default());
        let engine = engine_with(dir.path(), tally.clone());
        let stop = AtomicBool::new(false);
        let acked = Mutex::new(Vec::new());
        let refused = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        match engine.commit(NewHook::new("s", "x")) {
                            Ok(id) => acked.lock().push(id),
                            Err(CommitError::ShardRestarting) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                                // As a client would: back off before trying again.
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            Err(e) => panic!("a commit failed otherwise: {e}"),
                        }
                    }
                });
            }
            for restarts in 1..=3 {
                let before = acked.lock().len();
                wait_until("more commits", || acked.lock().len() >= before + 200);
                engine.panic_shard(0);
                wait_until("the restart", || engine.stats()[0].restarts == restarts);
            }
            wait_until("commits after the last restart", || {
                !engine.stats()[0].restarting && acked.lock().len() >= 800
            });
            stop.store(true, Ordering::Relaxed);
        });
        engine.tick().unwrap();
        let delivered = tally.0.lock();
        let acked = acked.lock();
        let lost = acked.iter().filter(|id| !delivered.contains(*id)).count();
        assert_eq!(lost, 0, "of {} acknowledged", acked.len());
        assert_eq!(engine.hook_count().unwrap(), 0);
        eprintln!(
            "{} acknowledged, {} refused while restarting, all delivered",
            acked.len(),
            refused.load(Ordering::Relaxed)
        );
    }
}
