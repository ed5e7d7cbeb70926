//! A core rebuilt from the store (after a shard's panic or failed write)
//! while the old core's attempts still run.

use super::*;

/// A rebuilt core counts on from the old one's outcome counters, so the
/// shard's counters (and a `tick` waiting for rows to settle) never go back
/// after a rebuild.
#[test]
fn a_rebuilt_core_keeps_the_outcome_counters() {
    let config = config_with(vec![source("a", "t", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["x"], 0);
    }
    let mut results = [
        Ok(()),
        fail(FailureClass::Permanent),
        fail(FailureClass::Transient),
    ]
    .into_iter();
    settle_at(&mut c, &mut m, 0, &mut |_| results.next().unwrap_or(Ok(())));
    let before = c.stats();
    assert_eq!((before.delivered, before.dead, before.retried), (1, 1, 1));
    assert_eq!(c.rebuilt(10).stats().dead_by_reason, before.dead_by_reason);
    let rebuilt = c.rebuilt(10).stats();
    assert_eq!(
        (
            rebuilt.delivered,
            rebuilt.dead,
            rebuilt.retried,
            rebuilt.timed_out,
            rebuilt.parked
        ),
        (1, 1, 1, 0, 0)
    );
    assert_eq!(rebuilt.settled(), before.settled());
}

/// A core rebuilt while its predecessor's attempts still run (after a
/// panic or a failed store write) takes them on as its own: they hold the
/// key's `sink_concurrency` slots and their rows' claims, a result settles
/// its row as any attempt's would, and a deadline that passes fails the
/// attempt as `attempt_timeout`.
#[test]
fn a_rebuilt_core_takes_on_the_old_attempts_and_settles_them_by_their_results() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.sink_concurrency = 2;
    config.dispatch.attempt_timeout_ms = 1_000;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..4 {
        m.add("t", "a", &["x"], 0);
    }
    c.handle_scan(5, &mut m);
    let _ = m.apply(&mut c);
    let old: Vec<Job> = std::iter::from_fn(|| c.poll_job(5)).collect();
    assert_eq!(old.len(), 2, "the key's two slots");
    let running = c.running_attempts();
    let mut c = c.rebuilt(10);
    // The store after the rebuild: the queued rows due again, the running
    // ones held in flight and adopted.
    let running_rows: Vec<RowId> = old.iter().map(|j| j.row).collect();
    for row in m.rows.keys().filter(|r| !running_rows.contains(r)) {
        m.due.insert((Arc::from("t"), 10, *row), 10);
    }
    for attempt in running {
        c.adopt_straggler(attempt);
    }
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!((c.running(), c.stats().claimed.rows), (2, 4));
    assert!(c.poll_job(10).is_none(), "both slots are the old attempts'");

    c.handle_outcome(20, old[0].id, Ok(()), TOOK);
    assert_eq!(
        m.apply(&mut c),
        [StoreOp::Delivered {
            row: old[0].row,
            replay: None,
            lane: None
        }]
    );
    assert_eq!(c.stats().delivered, 1);
    let next = c.poll_job(20).expect("a slot is free");
    assert!(!running_rows.contains(&next.row), "a queued row starts");
    assert!(
        c.poll_job(20).is_none(),
        "one slot is still the old attempt's"
    );

    c.handle_timers(1_005);
    assert_eq!(
        c.poll_abandoned(),
        Some(old[1].id),
        "its worker may be stuck"
    );
    assert_eq!(
        m.apply(&mut c),
        [StoreOp::Reschedule {
            row: old[1].row,
            fields: RowFields {
                tenant: "t".into(),
                sink_type: "x".into(),
                attempts: 1,
                first_attempt_at_ms: 5,
                size_bytes: 10,
                replay: None,
                lane: None,
            },
            due_at_ms: 1_105,
            error: Some("attempt_timeout: no result after 1000 ms".into()),
        }]
    );
    assert_eq!(c.stats().timed_out, 1);
    c.handle_outcome(1_006, old[1].id, Ok(()), TOOK);
    assert!(m.apply(&mut c).is_empty(), "a late result changes nothing");
}
