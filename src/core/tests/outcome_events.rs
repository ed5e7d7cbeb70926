//! Outcome events: an observed core reports every settled attempt — its
//! row, attempt number, time and what it came to — in the order handled;
//! an unobserved one builds none.

use super::*;

#[test]
fn an_observed_core_reports_each_attempts_outcome_in_order() {
    let mut config = config_with(vec![source("a", "t", &["x", "y"])]);
    config.retry.base_ms = 0;
    config.retry.jitter = false;
    let mut c = core(&config, BIG);
    c.observe_outcomes(true);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 0);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    let job_of = |index: u16| jobs.iter().find(|j| j.row.sink_index == index).unwrap().id;
    c.handle_outcome(5, job_of(0), fail(FailureClass::Transient), TOOK);
    c.handle_outcome(6, job_of(1), fail(FailureClass::Permanent), TOOK);
    let ops = m.apply(&mut c);
    // The event's reason is the dead letter's.
    assert!(ops.iter().any(
        |op| matches!(op, StoreOp::Dead { reason, .. } if reason == "sink y: permanent: down")
    ));
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    let again = c.poll_job(10).expect("sink x's row, due again at once");
    c.handle_outcome(12, again.id, Ok(()), TOOK);

    let event =
        |sink_index: u16, sink_type: &str, attempt: u32, at_ms: u64, outcome| OutcomeEvent {
            hook_id: "h1".into(),
            tenant: "t".into(),
            source_id: "a".into(),
            sink_index,
            sink_type: sink_type.into(),
            attempt,
            at_ms,
            outcome,
        };
    let events: Vec<OutcomeEvent> = std::iter::from_fn(|| c.poll_outcome_event()).collect();
    assert_eq!(
        events,
        vec![
            event(
                0,
                "x",
                1,
                5,
                Outcome::Retrying {
                    due_at_ms: 5,
                    error: "down".into()
                }
            ),
            event(
                1,
                "y",
                1,
                6,
                Outcome::Dead {
                    reason: "sink y: permanent: down".into()
                }
            ),
            event(0, "x", 2, 12, Outcome::Delivered),
        ]
    );
}

#[test]
fn an_unobserved_core_builds_no_events() {
    let (mut c, mut m) = breaker_setup(config_with(vec![source("a", "t", &["x"])]), 1);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let job = c.poll_job(0).expect("one row");
    c.handle_outcome(1, job.id, Ok(()), TOOK);
    assert_eq!(c.poll_outcome_event(), None);
}

/// Rows the config no longer delivers (their source or sink gone) are no
/// sink's outcome but are reported, under the sink they were written for
/// and their attempts so far (none here).
#[test]
fn rows_dead_for_the_config_are_reported_with_the_attempts_they_had() {
    let config = config_with(vec![source("a", "t", &["x"])]);
    let mut c = core(&config, BIG);
    c.observe_outcomes(true);
    let mut m = Model::default();
    m.add("t", "gone", &["x"], 0);
    m.add("t", "a", &["y"], 0);
    c.handle_scan(3, &mut m);
    let _ = m.apply(&mut c);
    let reported: Vec<(String, String, u16, String, u32, Outcome)> =
        std::iter::from_fn(|| c.poll_outcome_event())
            .map(|e| {
                let (source, sink_type) = (e.source_id.to_string(), e.sink_type.to_string());
                (
                    e.hook_id,
                    source,
                    e.sink_index,
                    sink_type,
                    e.attempt,
                    e.outcome,
                )
            })
            .collect();
    let row = |hook: &str, source: &str, sink_type: &str, reason: &str| {
        let dead = Outcome::Dead {
            reason: reason.into(),
        };
        (hook.into(), source.into(), 0, sink_type.into(), 0, dead)
    };
    assert_eq!(
        reported,
        vec![
            row("h1", "gone", "x", "source_gone: gone"),
            row("h2", "a", "y", "sink_gone: index 0, type y"),
        ]
    );
}
