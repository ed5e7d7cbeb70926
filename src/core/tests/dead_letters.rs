//! Dead letters: a source's backlog dead-lettered in steps, and dead rows
//! counted by their kind of reason.

use super::*;

#[test]
fn dead_letter_source_takes_only_that_sources_pending_rows_with_attempts_unchanged() {
    let config = config_with(vec![
        source("keep", "t", &["x"]),
        source("drop", "t", &["x", "y"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "keep", &["x"], 5);
    m.add("t", "drop", &["x", "y"], 5);
    m.add("u", "drop", &["x", "y"], 9_999);
    let (count, next) = c.handle_dead_letter_source(10, "drop", FROM_START, ALL, &mut m);
    assert_eq!(count, 4, "due later counts too: every pending row");
    assert_eq!(next, None);
    let reasons = dead_reasons(m.apply(&mut c));
    assert_eq!(reasons, vec![("source_gone: drop".to_string(), 0); 4]);
    assert_eq!(m.rows.len(), 1, "the kept source's row is untouched");
    assert_eq!(c.stats().dead, 4);
}

/// Dead-lettering a backlog in steps: each walks at most its entries (a
/// tenant with none due counts one) and the next goes on where it stopped,
/// so the steps take each of the source's rows once, and rows behind the
/// last step's place are left.
#[test]
fn dead_letter_source_goes_in_steps_of_at_most_its_entries() {
    let config = config_with(vec![
        source("keep", "t", &["x"]),
        source("drop", "u", &["x", "y"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for at in [5, 6, 7] {
        m.add("t", "keep", &["x"], at);
        m.add("u", "drop", &["x", "y"], at);
    }
    m.tenants.push(Arc::from("idle"));
    let mut steps = Vec::new();
    let mut from = Some(FROM_START);
    while let Some(at) = from {
        let (dead, next) = c.handle_dead_letter_source(10, "drop", at, 4, &mut m);
        let _ = m.apply(&mut c);
        steps.push((
            dead,
            next.as_ref()
                .map(|n| (n.tenant, n.after.clone().map(|e| e.row.seq))),
        ));
        from = next;
    }
    // t's 3 rows kept and its end (4 entries); u's first 4 rows; u's last
    // 2, its end and the idle tenant.
    assert_eq!(
        steps,
        vec![(0, Some((1, None))), (4, Some((1, Some(4)))), (2, None)]
    );
    assert_eq!(c.stats().dead, 6);
    assert_eq!(m.rows.len(), 3, "the kept source's rows are untouched");
}

/// Dead rows are counted by their kind of reason, as their stored reason
/// reads: a sink's permanent answer, attempts used up, a source gone, a
/// sink gone, and a record that does not decode.
#[test]
fn dead_rows_are_counted_by_their_kind_of_reason() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.max_attempts = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["x"], 0);
    }
    m.add("t", "gone", &["x"], 0);
    m.add("t", "a", &["y"], 0);
    m.add("t", "a", &["x"], 0);
    m.corrupt_rows.insert(RowId {
        seq: 6,
        sink_index: 0,
    });
    let permanent = AttemptFailure {
        class: FailureClass::Permanent,
        message: "permanent: HTTP status 410".into(),
    };
    let mut results = [
        Err(permanent.clone()),
        Err(permanent),
        fail(FailureClass::Transient),
    ]
    .into_iter();
    settle_at(&mut c, &mut m, 0, &mut |_| results.next().unwrap_or(Ok(())));
    let counted = c.stats().dead_by_reason;
    let kinds: Vec<(DeadReasonKind, u64)> = counted.iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(
        kinds,
        [
            (DeadReasonKind::Permanent, 2),
            (DeadReasonKind::MaxAttempts, 1),
            (DeadReasonKind::SourceGone, 1),
            (DeadReasonKind::SinkGone, 1),
            (DeadReasonKind::Undecodable, 1),
        ]
    );
    assert_eq!(c.stats().dead, 6);
}
