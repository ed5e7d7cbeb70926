//! A key's held rows made due at the pace the key takes them: never more
//! than its window due or queued, and so no more than that held again
//! when its breaker opens again.

use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// 4 calls (`WAKE_CALLS_PER_SLOT`) for each of the default 8 slots.
const WINDOW: usize = 32;

/// One iteration of the shell at `now_ms`: the ops so far written, a scan
/// when one is wanted (its ops written), then every call it offers
/// started and answered at once by `answer`. Returns the ops written, and
/// whether there was anything to do.
fn iterate(
    c: &mut Core,
    m: &mut Model,
    now_ms: u64,
    answer: &mut dyn FnMut(&Job) -> AttemptResult,
) -> (Vec<StoreOp>, bool) {
    let mut ops = m.apply(c);
    let scanned = c.wants_scan(now_ms);
    if scanned {
        c.handle_scan(now_ms, m);
        ops.extend(m.apply(c));
    }
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(now_ms)).collect();
    for job in &jobs {
        let result = answer(job);
        c.handle_outcome(now_ms, job.id, result, TOOK);
    }
    (ops, scanned || !jobs.is_empty())
}

/// Rows due by `now_ms` in the model.
fn due_by(m: &Model, now_ms: u64) -> usize {
    m.due.keys().filter(|(_, at, _)| *at <= now_ms).count()
}

/// The rows ops set aside with the held rows (held, or parked past every
/// due time).
fn held_again(ops: &[StoreOp]) -> usize {
    let held = |op: &&StoreOp| match op {
        StoreOp::Hold { .. } => true,
        StoreOp::Park { due_at_ms, .. } => *due_at_ms == HELD_DUE_MS,
        _ => false,
    };
    ops.iter().filter(held).count()
}

/// A resumed sink's backlog is made due a window at a time as its rows
/// start: at no point are more than the window's rows due or queued, yet
/// every row is delivered once.
#[test]
fn a_resumed_sinks_backlog_is_made_due_a_window_at_a_time() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.sources[0].sinks[0].paused = true;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..1_000 {
        m.add("t", "a", &["x"], 0);
    }
    settle_at(&mut c, &mut m, 0, &mut |_| panic!("paused"));
    assert_eq!(due_by(&m, HELD_DUE_MS - 1), 0, "all held");
    config.sources[0].sinks[0].paused = false;
    reconfigure(&mut c, 0, &config);
    let mut delivered = HashSet::new();
    let mut most_ahead = 0;
    let mut answer = |job: &Job| {
        assert!(delivered.insert(job.row), "{:?} twice", job.row);
        Ok(())
    };
    while iterate(&mut c, &mut m, 10, &mut answer).1 {
        let ahead = due_by(&m, 10) + c.stats().queued as usize;
        most_ahead = most_ahead.max(ahead);
        assert!(ahead <= WINDOW, "{ahead} rows due or queued");
    }
    assert_eq!(delivered.len(), 1_000);
    assert_eq!(most_ahead, WINDOW, "the window is kept full");
    assert!(m.rows.is_empty() && !c.is_waking());
}

/// A receiver that fails three attempts in a row out of every ten: the
/// breaker (three failures) opens again a few attempts after each close.
/// Each close wakes the backlog a window at a time, so each open holds
/// again no more than the window, not the backlog, and the backlog
/// drains. (Before, each close made the whole backlog due and the next
/// open held it all again: two writes a backlog row per turn.)
#[test]
fn a_flaky_receivers_breaker_holds_again_no_more_than_the_window() {
    let (mut c, mut m) = breaker_setup(breaker_config(3, 100, 100), 2_000);
    let mut attempts = 0u64;
    let mut delivered = HashSet::new();
    let mut answer = |job: &Job| {
        attempts += 1;
        if attempts % 10 >= 7 {
            return fail(FailureClass::Transient);
        }
        delivered.insert(job.row);
        Ok(())
    };
    // Rows held again in each open period (the first holds the backlog).
    let (mut now_ms, mut held_per_open) = (0, Vec::<usize>::new());
    while !m.rows.is_empty() {
        let (ops, busy) = iterate(&mut c, &mut m, now_ms, &mut answer);
        for event in breaker_events(&mut c) {
            if matches!(event, BreakerEvent::Opened { .. }) {
                held_per_open.push(0);
            }
        }
        if let Some(held) = held_per_open.last_mut() {
            *held += held_again(&ops);
        }
        if !busy {
            now_ms = c.poll_deadline(now_ms).expect("rows left to deliver");
        }
    }
    assert_eq!(delivered.len(), 2_000);
    assert!(held_per_open.len() > 100, "{} opens", held_per_open.len());
    assert!(held_per_open[0] > 1_900, "{held_per_open:?}");
    let most = held_per_open[1..].iter().max().copied();
    assert!(most <= Some(WINDOW), "{held_per_open:?}");
}

/// A breaker that opens while its key's wake is under way stops the wake,
/// and the rows it had not reached yet wait for the breaker as rows it
/// holds: the probe that closes it wakes them. Here the wake is still
/// reading past another sink's held rows when a new row of the key fails.
#[test]
fn rows_a_wake_had_not_reached_when_its_breaker_opened_wake_at_the_close() {
    let mut config = config_with(vec![source("a", "t", &["x"]), source("b", "t", &["y"])]);
    config.dispatch.breaker_failures = 1;
    config.dispatch.breaker_open_ms = 100;
    config.retry.base_ms = 0;
    config.sources[0].sinks[0].paused = true;
    config.sources[1].sinks[0].paused = true;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..2 * WAKE_STEP_ROWS + 10 {
        m.add("t", "b", &["y"], 0);
    }
    for _ in 0..10 {
        m.add("t", "a", &["x"], 0);
    }
    settle_at(&mut c, &mut m, 0, &mut |_| panic!("paused"));
    config.sources[0].sinks[0].paused = false;
    reconfigure(&mut c, 0, &config);
    // The pass reads b's rows for two scans and finds a's in the third,
    // whose wake then reads b's first WAKE_STEP_ROWS.
    for _ in 0..3 {
        c.handle_scan(10, &mut m);
        assert_eq!(held_again(&m.apply(&mut c)), 0);
    }
    assert_eq!(due_by(&m, 10), 0, "none of a's rows reached yet");
    let failing = m.add("t", "a", &["x"], 10);
    c.handle_committed_for(&Arc::from("t"), 10);
    let (mut failed, mut delivered) = (false, HashSet::new());
    let mut answer = |job: &Job| {
        if job.row.seq == failing && !failed {
            failed = true;
            return fail(FailureClass::Transient);
        }
        delivered.insert(job.row);
        Ok(())
    };
    let mut now_ms = 10;
    for _ in 0..10_000 {
        if !iterate(&mut c, &mut m, now_ms, &mut answer).1 {
            match c.poll_deadline(now_ms) {
                Some(at_ms) => now_ms = at_ms,
                None => break,
            }
        }
    }
    assert!(failed);
    assert_eq!(delivered.len(), 11, "a's rows, the failed one again too");
    assert_eq!(c.stats().breakers_open, 0);
}

/// A wake under way walks past rows that its running probe then holds
/// again (claimed while the probe runs, they wait for its answer). A
/// reload that turns breakers off drops that breaker, and its rows wake
/// afresh from the first: every row is delivered. (The wake went on from
/// where it stood, and those rows stayed held: seed 30,600,032.)
#[test]
fn rows_held_again_behind_a_wake_wake_when_a_reload_drops_their_breaker() {
    const ROWS: usize = 40;
    let mut config = breaker_config(1, 100, 100);
    // A scan claims one row: all but the first after the probe started.
    config.dispatch.batch = 1;
    let mut m = rows_held(ROWS);
    // A new core over a breaker the store kept open until 50: at its
    // probe check (150) no probe has started, so its key's rows wake.
    let mut c = core(&config, BIG);
    c.restore_breakers(vec![kept_open(&c, key_of("a", 0, "x"), 50, 1)]);
    settle_at(&mut c, &mut m, 0, &mut |_| {
        panic!("nothing starts while open")
    });
    c.handle_scan(150, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!(due_by(&m, 150), WINDOW, "the wake's first window");
    // The first of them is the probe, left running; the others, claimed
    // while it runs, are held again behind the wake.
    c.handle_scan(150, &mut m);
    let _ = m.apply(&mut c);
    let probe = c.poll_job(150).expect("the probe");
    let mut held = 0;
    for _ in 1..WINDOW {
        c.handle_scan(150, &mut m);
        held += held_again(&m.apply(&mut c));
    }
    assert_eq!((held, due_by(&m, 150)), (WINDOW - 1, 0));
    config.dispatch.breaker_failures = 0;
    reconfigure(&mut c, 150, &config);
    c.handle_outcome(150, probe.id, Ok(()), TOOK);
    let mut delivered = 1;
    settle_at(&mut c, &mut m, 150, &mut |_| {
        delivered += 1;
        Ok(())
    });
    assert_eq!(delivered, ROWS);
    assert!(m.rows.is_empty() && !c.is_waking());
}

/// Two sinks of one type, both resumed, so each key's wake walks the
/// tenant's held rows: the first index's wake passes every row of the
/// second sink on its way to the first sink's and stops a window into
/// those, while the second index's wake stops a window into the second
/// sink's rows. A reload then swaps the two sinks: the second sink's
/// rows its wake had not reached bind to the first index now, whose wake
/// has passed them, and the second index's wake looks for the first
/// sink's rows. A wake of a source whose sinks' places changed starts
/// again from the first held row, so those rows wake too. (Seed
/// 51,144,859: they stayed held until the key's breaker next closed or
/// the node restarted, as the keys had no state for the reload to find
/// their wakes by: all their rows were held.)
#[test]
fn a_reload_that_swaps_two_sinks_leaves_no_row_behind_their_wakes() {
    const HOOKS: usize = 2 * WINDOW;
    let mut config = posting_to(&["https://one/", "https://two/"]);
    let places = places_of(&config);
    let mut m = Model::default();
    // Hooks for the second sink, then as many for the first: one row each.
    for only in [1, 0] {
        for _ in 0..HOOKS {
            m.add_placed("t", "a", &["x", "x"], &places);
            let other = RowId {
                seq: m.next_seq,
                sink_index: 1 - only,
            };
            m.rows.remove(&other);
            m.due.remove(&(Arc::from("t"), 0, other));
        }
    }
    for sink in &mut config.sources[0].sinks {
        sink.paused = true;
    }
    let mut c = core(&config, BIG);
    settle_at(&mut c, &mut m, 0, &mut |_| panic!("paused"));
    assert_eq!(due_by(&m, HELD_DUE_MS - 1), 0, "all held");
    for sink in &mut config.sources[0].sinks {
        sink.paused = false;
    }
    reconfigure(&mut c, 0, &config);
    // A scan: each wake makes a window of its key's rows due, which no
    // scan has claimed yet (the keys have no state).
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!(due_by(&m, 0), 2 * WINDOW);
    let mut swapped = posting_to(&["https://two/", "https://one/"]);
    swapped.dispatch = config.dispatch.clone();
    reconfigure(&mut c, 0, &swapped);
    let mut delivered = HashSet::new();
    settle_at(&mut c, &mut m, 0, &mut |job| {
        assert!(delivered.insert(job.row), "{:?} twice", job.row);
        Ok(())
    });
    assert_eq!(delivered.len(), 2 * HOOKS, "every row delivered");
    assert!(m.rows.is_empty() && !c.is_waking());
}
