//! Circuit breakers: a failing key parked, probed and closed; permanent
//! answers neither open one nor keep it open; a park never outlives its
//! row's retry horizon.

use super::*;

fn breaker_config(failures: u32, open_ms: u64, max_open_ms: u64) -> Config {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.breaker_failures = failures;
    config.dispatch.breaker_open_ms = open_ms;
    config.dispatch.breaker_max_open_ms = max_open_ms;
    config.retry.base_ms = 0;
    config.retry.max_attempts = 10;
    config
}

fn attempts_and_due(m: &Model) -> (u32, Vec<u32>, Vec<u64>) {
    let mut attempts: Vec<u32> = m.rows.values().map(|(s, _)| s.attempts).collect();
    attempts.sort_unstable();
    (
        attempts.iter().sum(),
        attempts,
        m.due.keys().map(|(_, at, _)| *at).collect(),
    )
}

/// The breaker changes the core reported since the last call.
fn breaker_events(c: &mut Core) -> Vec<BreakerEvent> {
    std::iter::from_fn(|| c.poll_breaker_event()).collect()
}

/// The one sink key of `breaker_config`'s source.
fn breaker_key() -> SinkKey {
    SinkKey {
        tenant: Arc::from("t"),
        source_id: Arc::from("a"),
        sink_index: 0,
        sink_type: Arc::from("x"),
    }
}

/// Reference scenario 17: three failures open the breaker; the other rows
/// park without spending attempts; a failed probe reopens it for longer;
/// once the sink recovers the probe closes it and every row is delivered
/// once. Each change of the breaker is reported once, in order.
#[test]
fn a_breaker_parks_a_failing_key_probes_and_closes() {
    let (mut c, mut m) = breaker_setup(breaker_config(3, 500, 1_000), 10);
    let t = 1_000;
    settle_at(&mut c, &mut m, t, &mut |_| fail(FailureClass::Transient));
    let (sum, attempts, due) = attempts_and_due(&m);
    assert_eq!(sum, 3);
    assert_eq!(attempts, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
    assert!(due.iter().all(|&at| at == t + 500), "{due:?}");
    assert_eq!(c.stats().breakers_open, 1);
    let opened = |until_ms, opens| BreakerEvent::Opened {
        key: breaker_key(),
        until_ms,
        opens,
    };
    assert_eq!(breaker_events(&mut c), [opened(t + 500, 1)]);
    assert_eq!(
        c.poll_deadline(t),
        Some(t + 500),
        "woken at the end of the open period"
    );

    settle_at(&mut c, &mut m, t + 600, &mut |_| {
        fail(FailureClass::Transient)
    });
    let (sum, _, due) = attempts_and_due(&m);
    assert_eq!(sum, 4, "one probe, which failed");
    assert!(
        due.iter().all(|&at| at == t + 1_600),
        "reopened for 1,000 ms: {due:?}"
    );
    assert_eq!(breaker_events(&mut c), [opened(t + 1_600, 2)]);

    let mut delivered = Vec::new();
    settle_at(&mut c, &mut m, t + 1_600, &mut |job| {
        delivered.push(job.row);
        Ok(())
    });
    delivered.sort();
    delivered.dedup();
    assert_eq!(delivered.len(), 10, "each row delivered exactly once");
    assert!(m.rows.is_empty());
    assert_eq!(c.stats().breakers_open, 0);
    assert_eq!(
        breaker_events(&mut c),
        [BreakerEvent::Closed { key: breaker_key() }]
    );
}

/// An attempt that started before the breaker opened and succeeds after
/// it does not close it: the queued rows stay parked for the open period
/// and the key's next attempt is the probe.
#[test]
fn a_late_success_of_an_attempt_started_before_the_open_leaves_the_breaker_open() {
    let config = breaker_config(3, 500, 1_000);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("t", "a", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(jobs.len(), 8, "sink_concurrency");
    for job in &jobs[..3] {
        c.handle_outcome(10, job.id, fail(FailureClass::Transient), TOOK);
    }
    c.handle_outcome(20, jobs[3].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(c.stats().breakers_open, 1);
    assert_eq!(
        breaker_events(&mut c),
        [BreakerEvent::Opened {
            key: breaker_key(),
            until_ms: 510,
            opens: 1
        }],
        "opened once, not closed by the late success"
    );
    assert_eq!(m.rows.len(), 9, "the late success is delivered");
    assert!(c.poll_job(20).is_none(), "nothing starts while open");
    assert_eq!(c.stats().parked, 2, "the two queued rows parked");
    for job in &jobs[4..] {
        c.handle_outcome(30, job.id, Ok(()), TOOK);
    }
    let _ = m.apply(&mut c);
    assert_eq!(c.stats().breakers_open, 1);
    assert_eq!(breaker_events(&mut c), []);
}

/// Reference scenario 19: permanent errors never open a breaker.
#[test]
fn permanent_errors_dead_letter_without_opening_the_breaker() {
    let (mut c, mut m) = breaker_setup(breaker_config(2, 500, 1_000), 5);
    settle_at(&mut c, &mut m, 0, &mut |_| fail(FailureClass::Permanent));
    assert!(m.rows.is_empty());
    assert_eq!(
        (c.stats().dead, c.stats().parked, c.stats().breakers_open),
        (5, 0, 0)
    );
}

/// Reference scenario 20: while open, the rows park; when the probe's
/// answer is permanent the breaker closes and every row is dead-lettered.
#[test]
fn a_permanent_answer_to_the_probe_closes_the_breaker() {
    let (mut c, mut m) = breaker_setup(breaker_config(2, 300, 300), 5);
    settle_at(&mut c, &mut m, 0, &mut |_| fail(FailureClass::Transient));
    let (_, attempts, _) = attempts_and_due(&m);
    assert_eq!(attempts, [0, 0, 0, 1, 1], "three rows parked at 0 attempts");
    settle_at(&mut c, &mut m, 350, &mut |_| fail(FailureClass::Permanent));
    settle_at(&mut c, &mut m, 700, &mut |_| fail(FailureClass::Permanent));
    assert!(m.rows.is_empty(), "all five dead-lettered");
    assert_eq!((c.stats().dead, c.stats().breakers_open), (5, 0));
}

/// The retry horizon ends a park: a parked row comes due at its horizon,
/// and parked again at or past it, it is dead-lettered as `retry_horizon`.
#[test]
fn a_park_never_outlives_the_rows_retry_horizon() {
    let mut config = breaker_config(1, 60_000, 60_000);
    config.retry.max_elapsed_ms = 1_000;
    let mut c = core(
        &config,
        Grant {
            concurrency: 1,
            ..BIG
        },
    );
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    m.add("t", "a", &["x"], 0);
    // The first row fails at 100 and opens the breaker for a minute; both park.
    settle_at(&mut c, &mut m, 100, &mut |_| fail(FailureClass::Transient));
    let due: Vec<u64> = m.due.keys().map(|(_, at, _)| *at).collect();
    assert_eq!(
        due,
        [1_100, 60_100],
        "the tried row comes due at its horizon, the untried one when the breaker reopens"
    );
    let dead_before = c.stats().dead;
    settle_at(&mut c, &mut m, 1_100, &mut |_| Ok(()));
    assert_eq!(c.stats().dead, dead_before + 1);
    assert_eq!(m.rows.len(), 1, "only the never-tried row is left, parked");
}
