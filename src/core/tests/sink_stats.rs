//! Per-sink outcomes: each key counts what its own attempts came to, keeps
//! its latest failure and shows its breaker, and a rebuilt core keeps them.

use super::*;
use crate::latency::LatencyCounts;

/// The counts of attempts that took these times.
fn durations(took: &[Duration]) -> LatencyCounts {
    let mut counts = LatencyCounts::default();
    for t in took {
        counts.record(*t);
    }
    counts
}

/// One row dead of a permanent answer.
fn refused_once() -> DeadCounts {
    let mut counts = DeadCounts::default();
    counts.add(DeadReasonKind::Permanent);
    counts
}

#[test]
fn each_sink_counts_its_own_outcomes_and_shows_its_breaker() {
    let mut config = config_with(vec![
        source("a", "t", &["x", "y"]),
        source("b", "u", &["x"]),
    ]);
    config.dispatch.breaker_failures = 2;
    config.dispatch.breaker_open_ms = 1_000;
    config.dispatch.attempt_timeout_ms = 1_000;
    config.retry.base_ms = 0;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 0);
    m.add("u", "b", &["x"], 0);
    let jobs = start_all(&mut c, &mut m, 0);
    let job = |source: &str, index: u16| {
        let found = jobs
            .iter()
            .find(|j| &*j.key.source_id == source && j.key.sink_index == index);
        found.expect("a job of each sink").id
    };
    c.handle_outcome(5, job("a", 0), Ok(()), TOOK);
    c.handle_outcome(6, job("a", 1), fail(FailureClass::Transient), TOOK);
    c.handle_outcome(7, job("b", 0), fail(FailureClass::Permanent), TOOK);
    let _ = m.apply(&mut c);
    // a/1 is due again at once (base 0): it starts, and times out.
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!(c.poll_job(10).map(|j| j.key.sink_index), Some(1));
    c.handle_timers(1_010);
    let _ = m.apply(&mut c);

    let key = |tenant: &str, source: &str, sink_index: u16, sink_type: &str| SinkKey {
        tenant: tenant.into(),
        source_id: source.into(),
        sink_index,
        sink_type: sink_type.into(),
    };
    let expected = vec![
        SinkStats {
            outcomes: SinkOutcomes {
                delivered: 1,
                last_delivered_at_ms: Some(5),
                durations: durations(&[TOOK]),
                // Received at 0, delivered at 5.
                delivery_latency: durations(&[Duration::from_millis(5)]),
                ..SinkOutcomes::default()
            },
            ..SinkStats::unseen(key("t", "a", 0, "x"))
        },
        SinkStats {
            outcomes: SinkOutcomes {
                retried: 2,
                timed_out: 1,
                last_failure: Some(LastFailure {
                    at_ms: 1_010,
                    error: "attempt_timeout: no result after 1000 ms".into(),
                }),
                // The attempt that timed out counts as taking its timeout.
                durations: durations(&[TOOK, Duration::from_secs(1)]),
                ..SinkOutcomes::default()
            },
            breaker: BreakerState::Open { until_ms: 2_010 },
            consecutive_failures: 2,
            ..SinkStats::unseen(key("t", "a", 1, "y"))
        },
        SinkStats {
            outcomes: SinkOutcomes {
                dead: 1,
                dead_by_reason: refused_once(),
                last_failure: Some(LastFailure {
                    at_ms: 7,
                    error: "permanent: down".into(),
                }),
                durations: durations(&[TOOK]),
                ..SinkOutcomes::default()
            },
            ..SinkStats::unseen(key("u", "b", 0, "x"))
        },
    ];
    assert_eq!(c.sink_stats(), expected);
    // The one row dead-lettered by its sink's answer, for the shell's log,
    // taken once.
    assert_eq!(
        c.take_unlogged_dead(),
        vec![UnloggedDead {
            key: key("u", "b", 0, "x"),
            rows: 1,
            latest_failure: Some("permanent: down".into()),
        }]
    );
    assert_eq!(c.take_unlogged_dead(), vec![]);

    // A rebuilt core keeps the outcomes; its breakers come back from the
    // store (`restore_breakers`), as at any open.
    let mut rebuilt = c.rebuilt(1_020);
    let open = kept_open(&rebuilt, key("t", "a", 1, "y"), 2_010, 1);
    rebuilt.restore_breakers(vec![open]);
    let mut kept = expected;
    kept[1].consecutive_failures = 0;
    assert_eq!(rebuilt.sink_stats(), kept);
}

#[test]
fn rows_past_their_horizon_in_the_queue_are_the_sinks_dead() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.max_elapsed_ms = 1_000;
    config.retry.base_ms = 0;
    let (mut c, mut m) = breaker_setup(config, 2);
    // Time starts at 1: a first attempt at 0 would read as none yet.
    c.handle_scan(1, &mut m);
    let _ = m.apply(&mut c);
    let first = c.poll_job(1).expect("one slot");
    c.handle_outcome(2, first.id, fail(FailureClass::Transient), TOOK);
    let _ = m.apply(&mut c);
    let second = c.poll_job(2).expect("the slot is free");
    // The first row, due again, is claimed and queues behind the second
    // until after its horizon (first attempt at 1 + 1,000 ms).
    c.handle_scan(2, &mut m);
    let _ = m.apply(&mut c);
    c.handle_outcome(2_000, second.id, Ok(()), TOOK);
    assert!(
        c.poll_job(2_000).is_none(),
        "the queued row is past its horizon"
    );
    let ops = m.apply(&mut c);
    assert!(
        matches!(ops.last(), Some(StoreOp::Dead { row, .. }) if *row == first.row),
        "{ops:?}"
    );
    let outcomes = &c.sink_stats()[0].outcomes;
    assert_eq!(
        (outcomes.delivered, outcomes.retried, outcomes.dead),
        (1, 1, 1)
    );
    assert_eq!(
        outcomes.durations,
        durations(&[TOOK, TOOK]),
        "two attempts ran"
    );
}

/// A sink's delivery latency runs from its hook's receipt to the attempt
/// that delivered it, so it holds the failed attempts and the waits between
/// them; a replayed row, received long before it was dead-lettered, is not
/// counted.
#[test]
fn delivery_latency_runs_from_receipt_through_retries_and_skips_replays() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.base_ms = 0;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let retried = m.add("t", "a", &["x"], 100);
    let replayed = m.add("t", "a", &["x"], 100);
    let replayed_row = RowId {
        seq: replayed,
        sink_index: 0,
    };
    m.rows.get_mut(&replayed_row).unwrap().0.replay = Some("r1".into());
    c.handle_scan(100, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(100)).collect();
    let job_of = |seq: u64| jobs.iter().find(|j| j.row.seq == seq).unwrap().id;
    c.handle_outcome(150, job_of(retried), fail(FailureClass::Transient), TOOK);
    c.handle_outcome(300, job_of(replayed), Ok(()), TOOK);
    let _ = m.apply(&mut c);
    c.handle_scan(200, &mut m);
    let _ = m.apply(&mut c);
    let again = c.poll_job(200).expect("the failed row, due again at once");
    assert_eq!(again.row.seq, retried);
    c.handle_outcome(2_600, again.id, Ok(()), TOOK);
    let outcomes = &c.sink_stats()[0].outcomes;
    assert_eq!((outcomes.delivered, outcomes.retried), (2, 1));
    assert_eq!(
        outcomes.delivery_latency,
        durations(&[Duration::from_millis(2_500)]),
        "received at 100, delivered at 2,600; the replayed row not counted"
    );
}
