//! A paused sink: its rows are held (due at `HELD_DUE_MS`, attempts
//! unchanged, no scan reaches them) while the tenant's other sinks run,
//! and a pass over the held rows, in steps at the end of scans, wakes
//! them once the sink is resumed or gone.

use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// The rows a batch of ops held for a paused sink.
fn held(ops: &[StoreOp]) -> Vec<RowId> {
    ops.iter()
        .filter_map(|op| match op {
            StoreOp::Hold { row, error, .. } if *error == PAUSED_ERROR => Some(*row),
            _ => None,
        })
        .collect()
}

/// The rows a batch of ops made due, with when.
fn made_due(ops: &[StoreOp]) -> Vec<(RowId, u64)> {
    ops.iter()
        .filter_map(|op| match op {
            StoreOp::Reschedule { row, due_at_ms, .. } => Some((*row, *due_at_ms)),
            _ => None,
        })
        .collect()
}

fn row(seq: u64, sink_index: u16) -> RowId {
    RowId { seq, sink_index }
}

#[test]
fn a_paused_sinks_rows_are_held_and_woken_once_it_is_resumed() {
    // Source `a`'s hooks have rows for `x` and `y`; `y` is paused.
    let mut config = config_with(vec![source("a", "t", &["x", "y"])]);
    config.sources[0].sinks[1].paused = true;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let (h1, h2) = (
        m.add("t", "a", &["x", "y"], 0),
        m.add("t", "a", &["x", "y"], 0),
    );
    c.handle_scan(0, &mut m);
    let ops = m.apply(&mut c);
    assert_eq!(held(&ops), [row(h1, 1), row(h2, 1)]);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    let started: Vec<RowId> = jobs.iter().map(|j| j.row).collect();
    assert_eq!(started, [row(h1, 0), row(h2, 0)], "only x runs");
    // No scan reaches them, however late; a reconfiguration that leaves
    // the sink paused starts no pass.
    c.handle_scan(1 << 50, &mut m);
    assert!(m.apply(&mut c).is_empty());
    reconfigure(&mut c, 1 << 50, &config);
    assert!(!c.is_waking());
    // Resumed: the next scan's pass makes them due now, attempts
    // unchanged, and the scan after claims them.
    config.sources[0].sinks[1].paused = false;
    reconfigure(&mut c, 1 << 50, &config);
    assert!(c.is_waking() && c.wants_scan(2_000));
    c.handle_scan(2_000, &mut m);
    assert!(!c.is_waking());
    let ops = m.apply(&mut c);
    assert_eq!(made_due(&ops), [(row(h1, 1), 2_000), (row(h2, 1), 2_000)]);
    assert!(c.wants_scan(2_000));
    c.handle_scan(2_000, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(2_000)).collect();
    let started: Vec<(RowId, u32)> = jobs.iter().map(|j| (j.row, j.attempt)).collect();
    assert_eq!(started, [(row(h1, 1), 1), (row(h2, 1), 1)]);
    assert_eq!((c.stats().held, c.stats().parked), (2, 0));
}

/// Rows already queued on their key when the pause is applied are held at
/// their turn instead of starting; a running attempt runs on.
#[test]
fn rows_queued_when_a_sink_is_paused_are_held_instead_of_starting() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let seqs: Vec<u64> = (0..3).map(|_| m.add("t", "a", &["x"], 0)).collect();
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let running = c.poll_job(0).expect("one slot");
    assert!(c.poll_job(0).is_none(), "the other two queue");
    config.sources[0].sinks[0].paused = true;
    reconfigure(&mut c, 0, &config);
    c.handle_outcome(10, running.id, Ok(()), TOOK);
    assert!(c.poll_job(10).is_none());
    let ops = m.apply(&mut c);
    assert_eq!(held(&ops), [row(seqs[1], 0), row(seqs[2], 0)]);
    assert_eq!((c.stats().delivered, c.running()), (1, 0));
}

/// A held row whose sink left the config is woken too, and the scan
/// dead-letters it as it would any row of a sink gone; a held row of
/// another source still paused stays held.
#[test]
fn held_rows_of_a_removed_sink_are_woken_and_dead_lettered() {
    let mut config = config_with(vec![source("a", "t", &["x"]), source("b", "t", &["x"])]);
    config.sources[0].sinks[0].paused = true;
    config.sources[1].sinks[0].paused = true;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let (a, b) = (m.add("t", "a", &["x"], 0), m.add("t", "b", &["x"], 0));
    c.handle_scan(0, &mut m);
    assert_eq!(held(&m.apply(&mut c)), [row(a, 0), row(b, 0)]);
    config.sources.remove(0);
    reconfigure(&mut c, 0, &config);
    c.handle_scan(5, &mut m);
    assert_eq!(made_due(&m.apply(&mut c)), [(row(a, 0), 5)]);
    c.handle_scan(5, &mut m);
    let ops = m.apply(&mut c);
    let dead: Vec<(RowId, &str)> = ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::Dead { row, reason, .. } => Some((*row, reason.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(dead, [(row(a, 0), "source_gone: a")]);
    assert!(m
        .due
        .contains_key(&(Arc::from("t"), HELD_DUE_MS, row(b, 0))));
}

/// A pass reads at most `WAKE_STEP_ROWS` held rows a scan, tenant by
/// tenant, so a large held backlog is read over several scans while the
/// shard goes on; it starts a wake of each key it frees, which makes its
/// rows due a window at a time (see `key_wake`). A new core starts a pass
/// of its own.
#[test]
fn a_pass_reads_held_rows_a_bounded_step_at_a_time() {
    let mut config = config_with(vec![source("a", "t", &["x"]), source("b", "u", &["x"])]);
    config.sources[0].sinks[0].paused = true;
    config.sources[1].sinks[0].paused = true;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let held_rows = WAKE_STEP_ROWS + 10;
    for _ in 0..held_rows {
        m.add("t", "a", &["x"], 0);
    }
    let u_row = row(m.add("u", "b", &["x"], 0), 0);
    while c.wants_scan(0) {
        c.handle_scan(0, &mut m);
        let _ = m.apply(&mut c);
    }
    assert_eq!(c.stats().held, held_rows as u64 + 1);
    config.sources[0].sinks[0].paused = false;
    config.sources[1].sinks[0].paused = false;
    // A new core over the same rows: its pass reads t's first
    // WAKE_STEP_ROWS, and t's wake makes its window due (4 calls for
    // each of the 8 slots).
    let mut c = core(&config, BIG);
    assert!(c.is_waking());
    c.handle_scan(10, &mut m);
    let woken = made_due(&m.apply(&mut c));
    assert_eq!(woken.len(), 32);
    assert!(woken.iter().all(|(r, at)| r.seq <= 32 && *at == 10));
    // The next scan claims them; the pass reads t's last 10 and u's row,
    // whose wake makes it due; t's window is full of its queued rows.
    c.handle_scan(10, &mut m);
    assert_eq!(made_due(&m.apply(&mut c)), [(u_row, 10)]);
    assert_eq!(c.stats().queued, 32);
    assert!(c.is_waking(), "t's wake goes on as its rows start");
    let mut delivered = HashSet::new();
    settle_at(&mut c, &mut m, 10, &mut |job| {
        assert!(delivered.insert(job.row), "{:?} twice", job.row);
        Ok(())
    });
    assert_eq!(delivered.len(), held_rows + 1);
    assert!(!c.is_waking());
}
