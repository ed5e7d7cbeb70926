//! Circuit breakers, one per sink key (the key carries the tenant, so a
//! breaker is per tenant).
//!
//! `dispatch.breaker_failures` consecutive failures open a breaker (0
//! disables breakers; a permanent error does not count). It stays open for
//! `breaker_open_ms`, doubling per consecutive open up to
//! `breaker_max_open_ms`; then one attempt runs as a probe: success closes it,
//! failure opens it again for longer, and a permanent answer to the probe
//! closes it too (the sink answered). Only the probe closes it: an attempt
//! that started before the breaker opened and succeeds after is no word
//! on the sink since (the reference let it close the breaker, which then
//! flapped — open, closed by a straggler, open again five failures later —
//! on a sink that fails some of its attempts, and its open period never
//! grew). While a breaker is open its key's rows
//! are parked — written back due at the end of the open period with their
//! attempt count unchanged. Rows claimed with the probe (due at the
//! period's end too) wait queued for its answer, and then start or park;
//! rows claimed by a later scan while it runs are parked for
//! `breaker_open_ms`. A row never attempted has no retry horizon to keep,
//! so only the first of an open period parks until its end, to be the
//! probe; the others wait with the held rows, past every due time, until
//! the breaker closes and the key's wake makes them due, a window at a
//! time (see `Core::park` and `key_wake`): a backlog behind a sink that
//! stays down is written once, not again every period, and one behind a
//! sink that fails often is not written again at every turn. An open
//! breaker is kept in the store (see `store::breakers`): a restart within
//! its open period keeps it open, so the key's first attempt after it is
//! a probe, not a wave. A reload that sets `breaker_failures` to 0, or
//! removes the key's sink, closes its breaker at once (see
//! `Core::keeps_breaker`), as does an open that finds the store's breaker
//! so, and unparks the rows it parked (see `unpark`).

use super::retry::FailureClass;
use super::types::{JobId, SinkKey, SinkSpot, HELD_DUE_MS};

/// A breaker's change of state, for the shell to log and count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerEvent {
    /// Opened by consecutive failures, or again by a failed probe: the
    /// key's rows are parked until `until_ms`.
    Opened {
        key: SinkKey,
        until_ms: u64,
        /// Consecutive opens, this one included (the period doubles with each).
        opens: u32,
    },
    /// Closed by an answer after it was open.
    Closed { key: SinkKey },
    /// Still open, now at `to`: a reload moved its sink from `from` to
    /// another index (the sink's health did not change).
    Moved { from: SinkKey, to: SinkKey },
}

/// An open breaker as the store keeps it over a restart: its key, the end
/// of its open period, its opens in a row, and its sink's spot (`None` in
/// an entry written before 2026-12-07), which finds the sink again where
/// the restart's config put it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenBreaker {
    pub key: SinkKey,
    pub until_ms: u64,
    pub opens: u32,
    pub spot: Option<SinkSpot>,
}

/// The breaker settings (from `[dispatch]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    pub failures: u32,
    pub open_ms: u64,
    pub max_open_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open { until_ms: u64 },
    HalfOpen { probe: Option<JobId> },
}

/// A breaker's state, as reports show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    /// Rows park until `until_ms`; then one attempt runs as a probe.
    Open {
        until_ms: u64,
    },
    /// Its open period is over: a probe runs or is next.
    HalfOpen,
}

/// One key's breaker. A closed breaker with no failures is not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breaker {
    state: State,
    failures: u32,
    opens: u32,
    /// The end of the open period a row was parked until to be its probe.
    probe_row_until_ms: Option<u64>,
    /// Rows of the key wait with the held rows for it to close.
    holds_rows: bool,
}

/// Whether a row of the key may start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Start it; `probe` when it is the half-open breaker's one attempt.
    Pass { probe: bool },
    /// Park it until then.
    Park { until_ms: u64 },
    /// Hold it until its sink is not paused (never the breaker's answer).
    Hold,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            state: State::Closed,
            failures: 0,
            opens: 0,
            probe_row_until_ms: None,
            holds_rows: false,
        }
    }
}

impl Breaker {
    /// A breaker open until `until_ms`, its `opens`th open in a row (as the
    /// store kept it).
    pub fn reopened(until_ms: u64, opens: u32) -> Breaker {
        Breaker {
            state: State::Open { until_ms },
            failures: 0,
            opens,
            // Its rows may have been held before the restart (the store
            // keeps them held); its probe row may not have been parked yet.
            probe_row_until_ms: None,
            holds_rows: true,
        }
    }

    /// When a never-attempted row of the key, parked by the answer
    /// `Park { until_ms }`, is due: the first of an open period at its
    /// end, to be the next probe; the others (and those claimed while a
    /// probe runs) never, until the breaker closes.
    pub fn parked_due_ms(&mut self, until_ms: u64) -> u64 {
        if self.probing() || self.probe_row_until_ms == Some(until_ms) {
            self.holds_rows = true;
            HELD_DUE_MS
        } else {
            self.probe_row_until_ms = Some(until_ms);
            until_ms
        }
    }

    /// Whether its probe runs: the key's queued rows wait for its answer.
    pub fn probing(&self) -> bool {
        matches!(self.state, State::HalfOpen { probe: Some(_) })
    }

    /// Whether rows of the key wait with the held rows for it to close.
    pub fn holds_rows(&self) -> bool {
        self.holds_rows
    }

    /// Rows of the key wait with the held rows for it to close: a wake of
    /// them was under way when it opened.
    pub fn hold_rows(&mut self) {
        self.holds_rows = true;
    }

    /// Whether the rows it holds wait on: it holds rows, and it is open
    /// or its probe runs. After an open period that ended with no probe
    /// started (the core checks for that a while after), the key's wake
    /// makes them due, and one of them is then the probe.
    pub fn keeps_rows_held(&self, now_ms: u64) -> bool {
        self.holds_rows
            && match self.state {
                State::Open { until_ms } => now_ms < until_ms,
                State::HalfOpen { probe } => probe.is_some(),
                State::Closed => false,
            }
    }

    /// Whether its open period ended and no probe runs: none was admitted
    /// yet, or the row admitted to be one never started (it was
    /// dead-lettered, paced or taken back first).
    pub fn awaits_probe(&self, now_ms: u64) -> bool {
        match self.state {
            State::Open { until_ms } => until_ms <= now_ms,
            State::HalfOpen { probe } => probe.is_none(),
            State::Closed => false,
        }
    }

    /// The end of its open period, while it is open.
    pub fn open_until_ms(&self) -> Option<u64> {
        match self.state {
            State::Open { until_ms } => Some(until_ms),
            _ => None,
        }
    }

    /// Whether a row may start now; an open breaker whose period ended turns
    /// half-open and lets one attempt through as its probe.
    pub fn admit(&mut self, now_ms: u64, config: BreakerConfig) -> Admit {
        match self.state {
            State::Closed => Admit::Pass { probe: false },
            State::Open { until_ms } if now_ms < until_ms => Admit::Park { until_ms },
            State::Open { .. } | State::HalfOpen { probe: None } => {
                self.state = State::HalfOpen { probe: None };
                Admit::Pass { probe: true }
            }
            State::HalfOpen { probe: Some(_) } => Admit::Park {
                until_ms: now_ms + config.open_ms,
            },
        }
    }

    /// The probe started as `job`.
    pub fn probe_started(&mut self, job: JobId) {
        assert_eq!(
            self.state,
            State::HalfOpen { probe: None },
            "a probe starts only from half-open with none running"
        );
        self.state = State::HalfOpen { probe: Some(job) };
    }

    /// An attempt of the key ended saying nothing of its sink (cut short
    /// by a stall of the process: see `core::stall`): not counted; a probe
    /// so ended lets the next attempt probe.
    pub fn excuse(&mut self, job: JobId) {
        if self.state == (State::HalfOpen { probe: Some(job) }) {
            self.state = State::HalfOpen { probe: None };
        }
    }

    /// An attempt of the key ended. Returns the end of the open period when
    /// this outcome opened the breaker.
    pub fn record(
        &mut self,
        now_ms: u64,
        config: BreakerConfig,
        job: JobId,
        failure: Option<FailureClass>,
    ) -> Option<u64> {
        let was_probe = self.state == State::HalfOpen { probe: Some(job) };
        match failure {
            None | Some(FailureClass::Permanent) if was_probe => {
                *self = Breaker::default();
                None
            }
            None if self.state == State::Closed => {
                *self = Breaker::default();
                None
            }
            // An answer of an attempt that started before the breaker
            // opened tells of the sink before the failures that opened it:
            // only the probe closes an open breaker.
            None | Some(FailureClass::Permanent) => None,
            Some(_) if config.failures == 0 => None,
            Some(_) => {
                self.failures += 1;
                let closed_and_over =
                    self.state == State::Closed && self.failures >= config.failures;
                if !(was_probe || closed_and_over) {
                    return None;
                }
                self.opens += 1;
                let period_ms = config
                    .open_ms
                    .saturating_mul(1u64 << (self.opens - 1).min(32))
                    .min(config.max_open_ms);
                let until_ms = now_ms + period_ms;
                self.state = State::Open { until_ms };
                Some(until_ms)
            }
        }
    }

    /// Closed with no failures: nothing worth keeping.
    pub fn is_idle(&self) -> bool {
        *self == Breaker::default()
    }

    /// Consecutive opens so far (0 once closed).
    pub fn opens(&self) -> u32 {
        self.opens
    }

    /// Open or half-open.
    pub fn is_open(&self) -> bool {
        self.state != State::Closed
    }

    pub fn state(&self) -> BreakerState {
        match self.state {
            State::Closed => BreakerState::Closed,
            State::Open { until_ms } => BreakerState::Open { until_ms },
            State::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Failures (not permanent errors) since the key's last answer that closed it.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: BreakerConfig = BreakerConfig {
        failures: 3,
        open_ms: 500,
        max_open_ms: 1_000,
    };
    const FAIL: Option<FailureClass> = Some(FailureClass::Transient);

    #[test]
    fn opens_after_consecutive_failures_and_doubles_up_to_the_cap() {
        let mut b = Breaker::default();
        assert_eq!(b.record(0, CONFIG, JobId(1), FAIL), None);
        assert_eq!(b.record(0, CONFIG, JobId(2), FAIL), None);
        assert_eq!(b.record(10, CONFIG, JobId(3), FAIL), Some(510));
        assert_eq!(b.admit(509, CONFIG), Admit::Park { until_ms: 510 });
        assert_eq!(b.admit(510, CONFIG), Admit::Pass { probe: true });
        b.probe_started(JobId(4));
        assert_eq!(
            b.admit(520, CONFIG),
            Admit::Park { until_ms: 1_020 },
            "claimed while the probe runs"
        );
        assert_eq!(
            b.record(600, CONFIG, JobId(4), FAIL),
            Some(1_600),
            "the probe failed: open for 1,000 ms"
        );
        assert_eq!(b.admit(1_600, CONFIG), Admit::Pass { probe: true });
        b.probe_started(JobId(5));
        assert_eq!(
            b.record(1_700, CONFIG, JobId(5), FAIL),
            Some(2_700),
            "capped at breaker_max_open_ms"
        );
        assert_eq!(b.admit(2_700, CONFIG), Admit::Pass { probe: true });
        b.probe_started(JobId(6));
        assert_eq!(b.record(2_800, CONFIG, JobId(6), None), None);
        assert!(b.is_idle(), "success closes and forgets");
    }

    #[test]
    fn permanent_errors_do_not_count_but_a_permanent_probe_answer_closes() {
        let mut b = Breaker::default();
        for j in 0..10 {
            assert_eq!(
                b.record(0, CONFIG, JobId(j), Some(FailureClass::Permanent)),
                None
            );
        }
        assert!(b.is_idle());
        for j in 0..3 {
            b.record(0, CONFIG, JobId(j), FAIL);
        }
        assert!(b.is_open());
        assert_eq!(b.admit(500, CONFIG), Admit::Pass { probe: true });
        b.probe_started(JobId(9));
        assert_eq!(
            b.record(510, CONFIG, JobId(9), Some(FailureClass::Permanent)),
            None
        );
        assert!(b.is_idle());
    }

    #[test]
    fn zero_failures_disables_the_breaker() {
        let mut b = Breaker::default();
        let off = BreakerConfig {
            failures: 0,
            ..CONFIG
        };
        for j in 0..100 {
            assert_eq!(b.record(0, off, JobId(j), FAIL), None);
        }
        assert_eq!(b.admit(0, off), Admit::Pass { probe: false });
    }

    #[test]
    fn only_the_probe_closes_an_open_breaker() {
        let mut b = Breaker::default();
        for j in 0..3 {
            b.record(0, CONFIG, JobId(j), FAIL);
        }
        // Attempts started before the breaker opened succeed late.
        assert_eq!(b.record(100, CONFIG, JobId(7), None), None);
        assert_eq!(b.admit(499, CONFIG), Admit::Park { until_ms: 500 });
        assert_eq!(b.admit(500, CONFIG), Admit::Pass { probe: true });
        b.probe_started(JobId(9));
        assert_eq!(b.record(510, CONFIG, JobId(8), None), None);
        assert_eq!(b.state(), BreakerState::HalfOpen, "still probing");
        assert_eq!(
            b.record(520, CONFIG, JobId(9), FAIL),
            Some(1_520),
            "the probe failed: open for 1,000 ms, the second open in a row"
        );
        assert_eq!(b.opens(), 2);
    }

    #[test]
    fn a_success_while_closed_forgets_the_failures_before_it() {
        let mut b = Breaker::default();
        b.record(0, CONFIG, JobId(1), FAIL);
        b.record(0, CONFIG, JobId(2), FAIL);
        assert_eq!(b.record(0, CONFIG, JobId(3), None), None);
        assert!(b.is_idle());
        assert_eq!(
            b.record(0, CONFIG, JobId(4), FAIL),
            None,
            "one failure in a row"
        );
    }

    #[test]
    fn a_non_probe_failure_while_open_only_counts() {
        let mut b = Breaker::default();
        for j in 0..3 {
            b.record(0, CONFIG, JobId(j), FAIL);
        }
        // An attempt started before the breaker opened fails late.
        assert_eq!(b.record(100, CONFIG, JobId(7), FAIL), None);
        assert_eq!(b.admit(499, CONFIG), Admit::Park { until_ms: 500 });
    }
}
