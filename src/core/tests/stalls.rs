//! Attempts cut short by a stall of the process (see `core::stall`): not
//! held against their sink's breaker, due again at once, the attempt
//! counted; a failure of an attempt started after the stall, or a
//! permanent answer, counts as ever.

use super::*;

/// Two failures open the breaker; a retry waits 10 s.
fn two_failures_open(rows: usize) -> (Core, Model) {
    let mut config = breaker_config(2, 30_000, 60_000);
    config.retry.base_ms = 10_000;
    config.retry.jitter = false;
    let c = core(&config, calls_at_once(rows as u64));
    let mut m = Model::default();
    for _ in 0..rows {
        m.add("t", "a", &["x"], 0);
    }
    (c, m)
}

/// The rows' attempts and due times, sorted.
fn attempts_and_due(m: &Model) -> Vec<(u32, u64)> {
    let mut rows: Vec<(u32, u64)> = m
        .due
        .keys()
        .map(|(_, at, row)| (m.rows[row].0.attempts, *at))
        .collect();
    rows.sort_unstable();
    rows
}

#[test]
fn transient_failures_of_attempts_running_across_a_stall_are_not_held_against_the_sink() {
    let (mut c, mut m) = two_failures_open(4);
    let jobs = start_all(&mut c, &mut m, 1_000);
    assert_eq!(jobs.len(), 4);
    c.note_stall(2_000, 9_000);
    c.handle_outcome(9_100, jobs[3].id, fail(FailureClass::Permanent), TOOK);
    for job in &jobs[..3] {
        c.handle_outcome(9_100, job.id, fail(FailureClass::Transient), TOOK);
    }
    let ops = m.apply(&mut c);
    assert_eq!(dead_reasons(ops), [("sink x: permanent: down".into(), 1)]);
    assert_eq!(breaker_events(&mut c), [], "three failures, none counted");
    assert_eq!(
        attempts_and_due(&m),
        [(1, 9_100); 3],
        "due again at once, the attempt counted"
    );
    let stats = c.sink_stats();
    let last = stats[0].outcomes.last_failure.as_ref().unwrap();
    assert_eq!(
        last.error,
        "down (cut short by a stall of this process: it did not run for 7000 ms — stopped, \
         frozen or starved of CPU — so not held against the sink; retried at once)"
    );
    assert_eq!(stats[0].consecutive_failures, 0);

    // Started after the stall: their failures count, and open the breaker.
    let jobs = start_all(&mut c, &mut m, 9_100);
    assert_eq!(jobs.len(), 3);
    for job in &jobs[..2] {
        c.handle_outcome(9_200, job.id, fail(FailureClass::Transient), TOOK);
    }
    let _ = m.apply(&mut c);
    let opened = BreakerEvent::Opened {
        key: key_of("a", 0, "x"),
        until_ms: 39_200,
        opens: 1,
    };
    assert_eq!(breaker_events(&mut c), [opened]);
}

#[test]
fn a_probe_cut_by_a_stall_lets_the_next_attempt_probe() {
    let (mut c, mut m) = two_failures_open(2);
    let failing = start_all(&mut c, &mut m, 1_000);
    for job in &failing {
        c.handle_outcome(1_100, job.id, fail(FailureClass::Transient), TOOK);
    }
    let _ = m.apply(&mut c);
    assert_eq!(breaker_events(&mut c).len(), 1, "opened until 31,100");
    // The period ends: one row probes, and the process stalls under it.
    let probe = start_all(&mut c, &mut m, 31_100);
    assert_eq!(probe.len(), 1);
    c.note_stall(31_200, 40_000);
    c.handle_outcome(40_100, probe[0].id, fail(FailureClass::Transient), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(breaker_events(&mut c), [], "not opened again");
    // The next attempt probes, and closes the breaker: both rows delivered.
    let mut delivered = 0;
    settle_at(&mut c, &mut m, 40_100, &mut |_| {
        delivered += 1;
        Ok(())
    });
    let closed = BreakerEvent::Closed {
        key: key_of("a", 0, "x"),
    };
    assert_eq!(breaker_events(&mut c), [closed]);
    assert_eq!((delivered, m.rows.len()), (2, 0));
}
