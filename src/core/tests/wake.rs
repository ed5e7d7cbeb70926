//! Waking a sink: its rows waiting out a backoff or an open breaker are
//! due now, with their attempts kept; no other sink's row moves.

use super::*;

/// Each row's (source, sink index, due time), in due order.
fn due_rows(m: &Model) -> Vec<(String, u16, u64)> {
    let mut due: Vec<_> = (m.due.keys())
        .map(|(_, at, row)| (m.rows[row].1.source_id.to_string(), row.sink_index, *at))
        .collect();
    due.sort_by_key(|&(_, _, at)| at);
    due
}

#[test]
fn waking_a_sink_makes_its_rows_waiting_out_a_backoff_due_now_and_moves_no_other_row() {
    let config = config_with(vec![
        source("a", "t", &["x", "y"]),
        source("b", "t", &["x"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 5_000);
    m.add("t", "b", &["x"], 6_000);
    m.add("t", "a", &["x"], 500);
    let tried_twice = RowId {
        seq: 1,
        sink_index: 0,
    };
    m.rows.get_mut(&tried_twice).unwrap().0.attempts = 2;
    m.rows.get_mut(&tried_twice).unwrap().0.first_attempt_at_ms = 100;

    let step = c.handle_wake_sink(1_000, &key_of("a", 0, "x"), None, usize::MAX, &mut m);
    assert_eq!(
        step,
        WakeStep {
            woken: 1,
            breaker_closed: false,
            next: None,
        }
    );
    let rescheduled: Vec<(RowId, u64, u32, u64)> = (m.apply(&mut c).iter())
        .filter_map(|op| match op {
            StoreOp::Reschedule {
                row,
                due_at_ms,
                fields,
                ..
            } => Some((
                *row,
                *due_at_ms,
                fields.attempts,
                fields.first_attempt_at_ms,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(rescheduled, [(tried_twice, 1_000, 2, 100)]);
    let due = |source: &str, sink_index, at_ms| (source.to_string(), sink_index, at_ms);
    assert_eq!(
        due_rows(&m),
        [
            due("a", 0, 500),
            due("a", 0, 1_000),
            due("a", 1, 5_000),
            due("b", 0, 6_000)
        ],
        "the row due already and the other sinks' rows are where they were"
    );
    assert!(c.wants_scan(1_000), "the woken row is claimed by a scan");
}

/// A long backlog is woken in steps of at most their entries, each going
/// on after the last entry the one before read; every row of the sink is
/// woken once.
#[test]
fn waking_a_sink_goes_in_steps_of_at_most_their_entries() {
    let config = config_with(vec![source("a", "t", &["x"]), source("b", "t", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for at_ms in [2_000, 2_002, 2_004, 2_006, 2_008] {
        m.add("t", "a", &["x"], at_ms);
    }
    for at_ms in [2_001, 2_003, 2_005] {
        m.add("t", "b", &["x"], at_ms);
    }
    let key = key_of("a", 0, "x");
    let (mut steps, mut after, mut now_ms) = (Vec::new(), None, 1_000);
    loop {
        let step = c.handle_wake_sink(now_ms, &key, after, 3, &mut m);
        let _ = m.apply(&mut c);
        steps.push((step.woken, step.next.as_ref().map(|e| e.due_at_ms)));
        now_ms += 1;
        after = step.next;
        if after.is_none() {
            break;
        }
    }
    assert_eq!(steps, [(2, Some(2_002)), (1, Some(2_005)), (2, None)]);
    let a_due: Vec<u64> = (due_rows(&m).into_iter())
        .filter(|(source, _, _)| source == "a")
        .map(|(_, _, at)| at)
        .collect();
    assert_eq!(a_due, [1_000, 1_000, 1_001, 1_002, 1_002]);
}

/// Waking a sink whose breaker is open closes it (reported closed) and
/// makes every row behind it due: those parked to the end of its period
/// and those held until it closes. All five start at once and are
/// delivered once.
#[test]
fn waking_a_sink_closes_its_open_breaker_and_its_parked_and_held_rows_start_at_once() {
    let (mut c, mut m) = breaker_setup(breaker_config(1, 10_000, 10_000), 5);
    let t = 1_000;
    settle_at(&mut c, &mut m, t, &mut |_| fail(FailureClass::Transient));
    let at = |m: &Model, at_ms| m.due.keys().filter(|(_, at, _)| *at == at_ms).count();
    assert_eq!((at(&m, t + 10_000), at(&m, HELD_DUE_MS)), (2, 3));
    let _ = breaker_events(&mut c);

    let key = key_of("a", 0, "x");
    let step = c.handle_wake_sink(t + 1, &key, None, usize::MAX, &mut m);
    assert_eq!((step.woken, step.breaker_closed), (2, true));
    assert_eq!(breaker_events(&mut c), [BreakerEvent::Closed { key }]);
    let mut delivered = HashSet::new();
    settle_at(&mut c, &mut m, t + 1, &mut |job| {
        assert!(delivered.insert(job.row), "{:?} delivered twice", job.row);
        Ok(())
    });
    assert_eq!(delivered.len(), 5);
    assert!(m.rows.is_empty());
    assert_eq!(c.stats().breakers_open, 0);
}
