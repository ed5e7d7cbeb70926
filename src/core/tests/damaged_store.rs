//! Rows a damaged store gives the core: a corrupt row or hook, and a
//! duplicate due key.

use super::*;

/// A row whose record does not decode is quarantined and one whose hook
/// does not is dead-lettered, both at claim; the rest of the page runs.
#[test]
fn corrupt_rows_and_hooks_are_settled_at_claim() {
    let c = config_with(vec![source("s", "t", &["http"])]);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "s", &["http"], 0);
    }
    let row = |seq| RowId { seq, sink_index: 0 };
    m.corrupt_rows.insert(row(1));
    m.corrupt_hooks.insert(2);
    let mut core = core(&c, BIG);
    core.handle_scan(5, &mut m);
    let t: TenantId = Arc::from("t");
    let claim = |seq| StoreOp::Claim {
        row: row(seq),
        tenant: t.clone(),
        due_at_ms: 0,
        size_bytes: 10,
    };
    let fields = RowFields {
        tenant: t.clone(),
        sink_type: Arc::from("http"),
        attempts: 0,
        first_attempt_at_ms: 0,
        size_bytes: 10,
        replay: None,
        lane: None,
    };
    assert_eq!(
        m.apply(&mut core),
        vec![
            claim(1),
            StoreOp::Quarantine {
                row: row(1),
                tenant: t.clone(),
                dead_at_ms: 5,
            },
            claim(2),
            StoreOp::Dead {
                row: row(2),
                fields,
                dead_at_ms: 5,
                reason: "undecodable hook record".into(),
            },
            claim(3),
        ]
    );
    assert_eq!((core.stats().dead, core.stats().claimed.rows), (2, 1));
    assert_eq!(core.poll_job(5).map(|j| j.row), Some(row(3)));
}

/// A row with a second due key (a broken index) is claimed once: the
/// second key is dropped, and one attempt starts.
#[test]
fn a_duplicate_due_key_is_dropped_and_its_row_runs_once() {
    let c = config_with(vec![source("s", "t", &["http"])]);
    let mut m = Model::default();
    m.add("t", "s", &["http"], 0);
    let row = RowId {
        seq: 1,
        sink_index: 0,
    };
    let t: TenantId = Arc::from("t");
    m.due.insert((t.clone(), 3, row), 10);
    let mut core = core(&c, BIG);
    core.handle_scan(5, &mut m);
    let claim = |due_at_ms| StoreOp::Claim {
        row,
        tenant: t.clone(),
        due_at_ms,
        size_bytes: 10,
    };
    assert_eq!(m.apply(&mut core), vec![claim(0), claim(3)]);
    assert!(m.due.is_empty());
    assert_eq!(core.stats().claimed.rows, 1);
    assert_eq!(core.poll_job(5).map(|j| j.row), Some(row));
    assert!(core.poll_job(5).is_none());
}
