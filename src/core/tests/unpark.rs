//! Rows parked behind a breaker a reload drops run at once, attempts
//! kept, rather than at the end of an open period nothing keeps; rows
//! behind a breaker that stays open, and rows waiting out a backoff, wait.

use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// Breakers that open at the first failure for a minute.
const OPEN_MS: u64 = 60_000;

/// Sources `a` and `b` of tenant `t` (one sink of type `x` each) and `c`
/// of tenant `u`, three rows each; at `t_ms` all nine start and fail,
/// which opens each key's breaker and parks its rows, attempted once,
/// until `t_ms + OPEN_MS`.
fn parked_behind_three_breakers(t_ms: u64) -> (Config, Core, Model) {
    let mut config = breaker_config(1, OPEN_MS, OPEN_MS);
    config.sources = vec![source("a", "t", &["x"]), source("b", "t", &["x"])].into();
    config.sources.push(source("c", "u", &["x"]));
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for (tenant, source) in [("t", "a"), ("t", "b"), ("u", "c")] {
        for _ in 0..3 {
            m.add(tenant, source, &["x"], 0);
        }
    }
    assert_eq!(fail_every_row_and_park(&mut c, &mut m, t_ms), 9);
    let due: Vec<u64> = m.due.keys().map(|(_, at, _)| *at).collect();
    assert_eq!(due, [t_ms + OPEN_MS; 9], "every row parked for the period");
    assert!(m.rows.values().all(|(state, _)| state.parked));
    assert_eq!(c.stats().breakers_open, 3);
    let _ = breaker_events(&mut c);
    (config, c, m)
}

/// `parked_behind_three_breakers(t_ms)`, then a reload that turns
/// breakers off.
fn breakers_turned_off(t_ms: u64) -> (Core, Model) {
    let (mut config, mut c, m) = parked_behind_three_breakers(t_ms);
    config.dispatch.breaker_failures = 0;
    reconfigure(&mut c, t_ms, &config);
    (c, m)
}

/// Source `a`'s three rows dead-lettered as `sink_gone`, the six of `b`
/// and `c` still parked to the end of their breakers' period.
fn a_dead_and_the_others_parked(c: &Core, m: &Model, t_ms: u64) {
    let sink_gone = c.stats().dead_by_reason.get(DeadReasonKind::SinkGone);
    assert_eq!((c.stats().dead, sink_gone), (3, 3));
    let parked: Vec<(String, u64)> = ["b", "b", "b", "c", "c", "c"]
        .iter()
        .map(|s| (s.to_string(), t_ms + OPEN_MS))
        .collect();
    assert_eq!(due_rows(m), parked);
}

/// A reload that turns breakers off runs every parked row at once, each
/// as its second attempt. Before, they waited out the minute the
/// breakers would have been open.
#[test]
fn turning_breakers_off_runs_the_parked_rows_at_once() {
    let t = 1_000;
    let (mut c, mut m) = breakers_turned_off(t);
    assert_eq!(breaker_events(&mut c).len(), 3, "each reported closed");
    let mut attempts = Vec::new();
    settle_at(&mut c, &mut m, t + 10, &mut |job| {
        attempts.push(job.attempt);
        Ok(())
    });
    assert_eq!(attempts, [2; 9]);
    assert!(m.rows.is_empty());
    assert!(!c.is_unparking());
}

/// A reload that removes one source's sink unparks that key's parked
/// rows, which the scan dead-letters as `sink_gone` at once; the rows
/// parked behind the other keys' breakers, still open, stay parked.
#[test]
fn removing_a_sink_unparks_only_its_rows() {
    let t = 1_000;
    let (mut config, mut c, mut m) = parked_behind_three_breakers(t);
    config.sources[0] = source("a", "t", &["y"]);
    reconfigure(&mut c, t, &config);
    let closed = BreakerEvent::Closed {
        key: key_of("a", 0, "x"),
    };
    assert_eq!(breaker_events(&mut c), [closed]);
    settle_at(&mut c, &mut m, t + 10, &mut |job| {
        panic!("nothing starts while the others are open: {job:?}")
    });
    a_dead_and_the_others_parked(&c, &m, t);
    assert_eq!(c.stats().breakers_open, 2);
}

/// A row waiting out a backoff is not parked: turning breakers off leaves
/// it due when its backoff ends.
#[test]
fn a_row_waiting_out_a_backoff_keeps_its_due_time() {
    let mut config = breaker_config(5, OPEN_MS, OPEN_MS);
    config.retry.base_ms = 10_000;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    settle_at(&mut c, &mut m, 0, &mut |_| fail(FailureClass::Transient));
    assert_eq!(due_rows(&m), [("a".to_string(), 10_000)]);
    assert_eq!(c.stats().breakers_open, 0, "one failure of five");
    config.dispatch.breaker_failures = 0;
    reconfigure(&mut c, 0, &config);
    settle_at(&mut c, &mut m, 10, &mut |job| {
        panic!("{job:?} started early")
    });
    assert!(!c.is_unparking());
    assert_eq!(due_rows(&m), [("a".to_string(), 10_000)]);
}

/// A new core that closes a breaker its store kept (its sink is gone by
/// then) unparks the rows it parked, dead-lettered as `sink_gone` at
/// once; the breakers it keeps hold theirs.
#[test]
fn a_kept_breaker_closed_at_open_unparks_its_rows() {
    let t = 1_000;
    let (mut config, _, mut m) = parked_behind_three_breakers(t);
    config.sources[0] = source("a", "t", &["y"]);
    let mut c = core(&config, BIG);
    for (source, tenant) in [("a", "t"), ("b", "t"), ("c", "u")] {
        let key = SinkKey {
            tenant: Arc::from(tenant),
            ..key_of(source, 0, "x")
        };
        c.restore_breakers(vec![kept_open(&c, key, t + OPEN_MS, 1)]);
    }
    settle_at(&mut c, &mut m, t + 10, &mut |job| {
        panic!("nothing starts while the others are open: {job:?}")
    });
    a_dead_and_the_others_parked(&c, &m, t);
}

/// The store is told that unparking is under way with the reload that
/// starts it, and that it ended with the step that made its last rows
/// due, after them; as the pass walked every tenant with breakers off,
/// that no row is parked, last.
#[test]
fn the_store_keeps_unparking_under_way_until_its_last_step() {
    let t = 1_000;
    let (mut c, mut m) = breakers_turned_off(t);
    let started = m.apply(&mut c);
    assert_eq!(unparking_ops(&started), [true]);
    c.handle_scan(t + 10, &mut m);
    let step = m.apply(&mut c);
    let due_now =
        |op: &StoreOp| matches!(op, StoreOp::Reschedule { due_at_ms, .. } if *due_at_ms == t + 10);
    assert_eq!(step.iter().filter(|op| due_now(op)).count(), 9);
    let end = [StoreOp::Unparking { under_way: false }, StoreOp::NoneParked];
    assert!(step.ends_with(&end), "{:?}", &step[step.len() - 2..]);
}

/// A pass over one tenant does not tell the store that no row is
/// parked, even with breakers off: other tenants' rows may be. Here a new
/// core with breakers off closes the one breaker its store kept, `u`'s,
/// and unparks `u`'s rows; `t`'s stay parked.
#[test]
fn unparking_one_tenant_leaves_the_store_saying_rows_may_be_parked() {
    let t = 1_000;
    let (mut config, _, mut m) = parked_behind_three_breakers(t);
    config.dispatch.breaker_failures = 0;
    let mut c = core(&config, BIG);
    let key = SinkKey {
        tenant: Arc::from("u"),
        ..key_of("c", 0, "x")
    };
    c.restore_breakers(vec![kept_open(&c, key, t + OPEN_MS, 1)]);
    c.handle_scan(t + 10, &mut m);
    let ops = m.apply(&mut c);
    assert!(!c.is_unparking());
    assert_eq!(unparking_ops(&ops), [true, false]);
    assert!(!ops.contains(&StoreOp::NoneParked));
}

/// A new core whose store says rows may be parked unparks every tenant
/// when breakers are off — a reload turned them off and the start of its
/// pass was lost — and leaves them parked when breakers are on.
#[test]
fn a_new_core_with_breakers_off_unparks_what_its_store_says_may_be_parked() {
    let t = 1_000;
    let (mut config, _, mut m) = parked_behind_three_breakers(t);
    let mut c = core(&config, BIG);
    c.resume_unparking(false, true);
    assert!(!c.is_unparking(), "breakers on: the parks stand");
    config.dispatch.breaker_failures = 0;
    let mut c = core(&config, BIG);
    c.resume_unparking(false, false);
    assert!(!c.is_unparking(), "nothing parked");
    c.resume_unparking(false, true);
    let mut attempts = Vec::new();
    settle_at(&mut c, &mut m, t + 10, &mut |job| {
        attempts.push(job.attempt);
        Ok(())
    });
    assert_eq!(attempts, [2; 9]);
}

/// Whether each `StoreOp::Unparking` among `ops` said under way.
fn unparking_ops(ops: &[StoreOp]) -> Vec<bool> {
    (ops.iter())
        .filter_map(|op| match op {
            StoreOp::Unparking { under_way } => Some(*under_way),
            _ => None,
        })
        .collect()
}

/// A step of unparking or of the pass over held rows reads at most
/// `WAKE_STEP_ROWS` tenants' pages even when they have nothing to read:
/// over more tenants than that, neither pass ends in its first scan (the
/// store keeps unparking under way), and both in the second.
#[test]
fn a_step_reads_a_bounded_number_of_tenants() {
    let mut m = Model::default();
    for i in 0..=WAKE_STEP_ROWS {
        m.add(&format!("t{i}"), "a", &["x"], 0);
    }
    let mut c = core(&config_with(vec![]), BIG);
    c.unpark_every_tenant();
    c.handle_scan(0, &mut m);
    assert!(c.is_unparking() && c.is_waking());
    assert_eq!(unparking_ops(&m.apply(&mut c)), [true]);
    c.handle_scan(0, &mut m);
    assert!(!c.is_unparking() && !c.is_waking());
    assert_eq!(unparking_ops(&m.apply(&mut c)), [false]);
}
