//! An attempt's end: the retry schedule and a permanent error, the
//! attempt deadline, a source or sink gone, and draining.

use super::*;

#[test]
fn a_failure_reschedules_by_the_policy_and_a_permanent_error_dead_letters_with_its_attempt() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.base_ms = 100;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    m.add("t", "a", &["x"], 0);
    c.handle_scan(1_000, &mut m);
    let _ = m.apply(&mut c);
    let (j1, j2) = (c.poll_job(1_000).unwrap(), c.poll_job(1_000).unwrap());
    assert_eq!((j1.attempt, j1.deadline_at_ms), (1, 31_000));
    c.handle_outcome(
        1_010,
        j1.id,
        Err(AttemptFailure {
            class: FailureClass::Transient,
            message: "boom".into(),
        }),
        TOOK,
    );
    c.handle_outcome(
        1_020,
        j2.id,
        Err(AttemptFailure {
            class: FailureClass::Permanent,
            message: "gone".into(),
        }),
        TOOK,
    );
    let ops = m.apply(&mut c);
    assert_eq!(
        ops[0],
        StoreOp::Reschedule {
            row: j1.row,
            fields: RowFields {
                tenant: "t".into(),
                sink_type: "x".into(),
                attempts: 1,
                first_attempt_at_ms: 1_000,
                replay: None,
                size_bytes: 10,
                lane: None,
            },
            due_at_ms: 1_110,
            error: Some("boom".into())
        }
    );
    assert_eq!(
        ops[1],
        StoreOp::Dead {
            row: j2.row,
            fields: RowFields {
                tenant: "t".into(),
                sink_type: "x".into(),
                attempts: 1,
                first_attempt_at_ms: 1_000,
                replay: None,
                size_bytes: 10,
                lane: None,
            },
            dead_at_ms: 1_020,
            reason: "sink x: gone".into()
        }
    );
    assert_eq!(c.poll_deadline(1_020), Some(1_110), "woken for the retry");
    c.handle_scan(1_110, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!(
        c.poll_job(1_110).map(|j| (j.row, j.attempt)),
        Some((j1.row, 2))
    );
}

/// A failure's text is kept to `MAX_ERROR_TEXT_BYTES`, cut before the
/// character the limit falls in.
#[test]
fn a_long_error_is_kept_to_its_limit_cut_at_a_character() {
    let config = config_with(vec![source("a", "t", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    let job = start_all(&mut c, &mut m, 1_000).remove(0);
    // Two-byte characters from byte 1: byte 1,024 is inside one.
    let message = format!("x{}", "é".repeat(1_000));
    let failure = AttemptFailure {
        class: FailureClass::Transient,
        message,
    };
    c.handle_outcome(1_010, job.id, Err(failure), TOOK);
    let ops = m.apply(&mut c);
    let StoreOp::Reschedule { error, .. } = &ops[0] else {
        panic!("not rescheduled: {ops:?}");
    };
    let kept = format!("x{}", "é".repeat(511));
    assert_eq!(kept.len(), crate::limits::MAX_ERROR_TEXT_BYTES - 1);
    assert_eq!(error.as_deref(), Some(kept.as_str()));
}

#[test]
fn an_attempt_past_its_deadline_fails_as_attempt_timeout_and_its_late_result_is_discarded() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.attempt_timeout_ms = 100;
    config.retry.max_attempts = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let job = c.poll_job(0).unwrap();
    c.handle_timers(99);
    assert_eq!(c.poll_abandoned(), None);
    c.handle_timers(100);
    assert_eq!(c.poll_abandoned(), Some(job.id));
    let ops = m.apply(&mut c);
    assert!(
        matches!(&ops[..], [StoreOp::Dead { reason, fields: RowFields { attempts: 1, .. }, .. }] if reason == "sink x: attempt_timeout: no result after 100 ms"),
        "{ops:?}"
    );
    c.handle_outcome(150, job.id, Ok(()), TOOK);
    assert!(
        m.apply(&mut c).is_empty(),
        "the late result changes nothing"
    );
    assert!(c.is_idle(150));
}

#[test]
fn rows_of_a_deleted_source_or_an_unbindable_sink_are_dead_lettered_with_attempts_unchanged() {
    let config = config_with(vec![source("a", "t", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "gone", &["x"], 0);
    m.add("t", "a", &["y"], 0);
    c.handle_scan(0, &mut m);
    let dead = dead_reasons(m.apply(&mut c));
    assert_eq!(
        dead,
        vec![
            ("source_gone: gone".to_string(), 0),
            ("sink_gone: index 0, type y".to_string(), 0)
        ]
    );
    assert_eq!(c.stats().claimed, Usage::default());
    assert!(c.is_idle(0));
}

#[test]
fn draining_writes_queued_rows_back_as_they_were_and_claims_nothing_more() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 7);
    m.add("t", "a", &["x"], 7);
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    let running = c.poll_job(10).unwrap();
    c.handle_drain();
    let ops = m.apply(&mut c);
    assert!(
        matches!(
            &ops[..],
            [StoreOp::Reschedule {
                due_at_ms: 7,
                fields: RowFields { attempts: 0, .. },
                error: None,
                ..
            }]
        ),
        "{ops:?}"
    );
    assert!(!c.wants_scan(10));
    assert!(c.poll_job(10).is_none());
    c.handle_outcome(11, running.id, Ok(()), TOOK);
    assert_eq!(c.running(), 0);
}
