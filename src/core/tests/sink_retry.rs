//! A sink's own `retry` keys: its rows follow them, other sinks' rows
//! follow `[retry]`.

use super::*;
use crate::config::SinkRetryConfig;

#[test]
fn a_sinks_own_retry_keys_replace_the_nodes_for_its_rows_only() {
    // Source `a` has two sinks of one hook: `x` by `[retry]` (base 100 ms,
    // 5 attempts), `y` with its own base (1 s) and 2 attempts.
    let mut a = source("a", "t", &["x", "y"]);
    a.sinks[1].retry = Some(SinkRetryConfig {
        base_ms: Some(1_000),
        max_attempts: Some(2),
        ..SinkRetryConfig::default()
    });
    let mut config = config_with(vec![a]);
    config.retry.base_ms = 100;
    config.retry.max_attempts = 5;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 0);
    let transient = || {
        Err(AttemptFailure {
            class: FailureClass::Transient,
            message: "boom".into(),
        })
    };
    // Attempt 1 of each fails: x is due again 100 ms later, y 1 s later.
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    for job in &jobs {
        c.handle_outcome(0, job.id, transient(), TOOK);
    }
    let due: Vec<(u16, u64)> = m
        .apply(&mut c)
        .iter()
        .filter_map(|op| match op {
            StoreOp::Reschedule { row, due_at_ms, .. } => Some((row.sink_index, *due_at_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(due, [(0, 100), (1, 1_000)]);
    // Attempt 2 of y is its last: dead; x goes on.
    c.handle_scan(1_000, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(1_000)).collect();
    assert_eq!(jobs.len(), 2);
    for job in &jobs {
        c.handle_outcome(1_000, job.id, transient(), TOOK);
    }
    let ops = m.apply(&mut c);
    let settled: Vec<(u16, &str)> = ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::Reschedule { row, .. } => Some((row.sink_index, "retried")),
            StoreOp::Dead { row, .. } => Some((row.sink_index, "dead")),
            _ => None,
        })
        .collect();
    assert_eq!(settled, [(0, "retried"), (1, "dead")]);
}

#[test]
fn a_sinks_own_horizon_bounds_its_rows_retries_only() {
    // `y`'s horizon is 500 ms from its first attempt; `x` keeps `[retry]`'s.
    let mut a = source("a", "t", &["x", "y"]);
    a.sinks[1].retry = Some(SinkRetryConfig {
        max_elapsed_ms: Some(500),
        ..SinkRetryConfig::default()
    });
    let mut config = config_with(vec![a]);
    config.retry.base_ms = 1_000;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 1_000);
    let fail_all = |c: &mut Core, m: &mut Model, now_ms: u64| {
        c.handle_scan(now_ms, m);
        let _ = m.apply(c);
        let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(now_ms)).collect();
        for job in &jobs {
            let failed = Err(AttemptFailure {
                class: FailureClass::Transient,
                message: "boom".into(),
            });
            c.handle_outcome(now_ms + 10, job.id, failed, TOOK);
        }
        m.apply(c)
            .into_iter()
            .filter_map(|op| match op {
                StoreOp::Reschedule { row, due_at_ms, .. } => {
                    Some((row.sink_index, format!("due at {due_at_ms}")))
                }
                StoreOp::Dead { row, reason, .. } => Some((row.sink_index, reason.to_string())),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // 1 s on for x; for y no later than its horizon, where it gets a last try.
    assert_eq!(
        fail_all(&mut c, &mut m, 1_000),
        [
            (0, "due at 2010".to_string()),
            (1, "due at 1500".to_string())
        ]
    );
    assert_eq!(
        fail_all(&mut c, &mut m, 1_500),
        [(1, "retry_horizon: y".to_string())]
    );
}

/// A reconfigured `[retry]` decides the failures after it, and a
/// reconfigured attempt timeout the attempts that start after it: row A,
/// allowed five attempts, fails once; row B starts under the old 1,000 ms
/// timeout; then two attempts are allowed and 300 ms. B times out after
/// the 1,000 ms it started with and is due again (its first attempt); A's
/// second attempt gets the new timeout, and its failure dead-letters it.
#[test]
fn a_reconfigured_retry_policy_and_timeout_apply_from_then_on() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.base_ms = 0;
    config.retry.max_attempts = 5;
    config.dispatch.attempt_timeout_ms = 1_000;
    let (mut c, mut m) = breaker_setup(config.clone(), 2);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let a = c.poll_job(0).expect("row A");
    c.handle_outcome(1, a.id, fail(FailureClass::Transient), TOOK);
    let b = c.poll_job(1).expect("row B, in A's slot");
    assert_eq!(b.deadline_at_ms, 1_001);
    let _ = m.apply(&mut c);

    let mut changed = config.clone();
    changed.retry.max_attempts = 2;
    changed.dispatch.attempt_timeout_ms = 300;
    reconfigure(&mut c, 1, &changed);

    c.handle_timers(1_001);
    let ops = m.apply(&mut c);
    assert!(
        matches!(&ops[..], [StoreOp::Reschedule { row, fields, error: Some(error), .. }]
            if *row == b.row && fields.attempts == 1
                && error == "attempt_timeout: no result after 1000 ms"),
        "{ops:?}"
    );
    c.handle_scan(1_001, &mut m);
    let _ = m.apply(&mut c);
    let a_again = c.poll_job(1_001).expect("a row again");
    assert_eq!(a_again.row, a.row, "A was due first");
    assert_eq!(a_again.deadline_at_ms, 1_301, "the new timeout");
    c.handle_outcome(1_002, a_again.id, fail(FailureClass::Transient), TOOK);
    let ops = m.apply(&mut c);
    assert!(
        matches!(&ops[..], [StoreOp::Dead { row, fields, .. }] if *row == a.row && fields.attempts == 2),
        "two attempts now: {ops:?}"
    );
}
