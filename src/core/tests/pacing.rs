//! A backlog behind a sink's `max_calls_per_s` waits in the store for its
//! turns, not claimed in the windows (see `pacing`).

use super::*;

/// Tenant `t`'s source `a` has one sink at `rate` calls per second with
/// `backlog` rows due at 0; tenant `u`'s source `b`, one sink of no rate.
/// The shard's window holds `window` rows.
fn paced_core(rate: u32, backlog: usize, window: u64) -> (Core, Model) {
    let config = config_with(vec![
        rated_source("a", "t", Some(rate)),
        source("b", "u", &["x"]),
    ]);
    let grant = Grant {
        max_inflight: window,
        ..BIG
    };
    let c = core(&config, grant);
    let mut m = Model::default();
    for _ in 0..backlog {
        m.add("t", "a", &["x"], 0);
    }
    (c, m)
}

/// Runs the scans and starts of `now_ms`, answering each call ok; the
/// sources of the calls started.
fn run_at(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<String> {
    let mut started = Vec::new();
    settle_at(c, m, now_ms, &mut |job| {
        started.push(job.key.source_id.to_string());
        Ok(())
    });
    started
}

/// A key queues the rows its next second of turns starts; the rest of
/// its backlog is written back due one turn apart after them, each
/// claimed at its turn and started then — so the window holds a
/// second's worth of the backlog while it drains at the rate.
#[test]
fn a_backlog_behind_a_rate_waits_for_its_turns_in_the_store() {
    let (mut c, mut m) = paced_core(4, 10, 1_000);
    assert_eq!(run_at(&mut c, &mut m, 0), ["a"]);
    assert_eq!(c.stats().claimed.rows, 3, "the turns at 250, 500, 750");
    let paced: Vec<u64> = due_rows(&m).into_iter().map(|(_, at)| at).collect();
    assert_eq!(paced, [1_000, 1_250, 1_500, 1_750, 2_000, 2_250]);
    for turn_ms in (250..=2_250).step_by(250) {
        assert!(run_at(&mut c, &mut m, turn_ms - 1).is_empty(), "{turn_ms}");
        assert_eq!(run_at(&mut c, &mut m, turn_ms), ["a"], "{turn_ms}");
    }
    assert!(m.due.is_empty() && c.claims.is_empty(), "all ten started");
}

/// The fairness this is for: tenant `t`'s backlog of 5,000 rows behind a
/// rate of 2 a second does not hold the shard's window of 64 rows, so
/// tenant `u`'s 50 rows, due a moment later, start at once rather than
/// as `t`'s turns free room one at a time.
#[test]
fn a_backlog_behind_a_rate_leaves_the_window_to_other_tenants() {
    let (mut c, mut m) = paced_core(2, 5_000, 64);
    assert_eq!(run_at(&mut c, &mut m, 0), ["a"]);
    for _ in 0..50 {
        m.add("u", "b", &["x"], 10);
    }
    c.handle_committed_for(&Arc::from("u"), 10);
    assert_eq!(run_at(&mut c, &mut m, 10), vec!["b"; 50]);
    assert_eq!(run_at(&mut c, &mut m, 500), ["a"]);
    let last_turn = (due_rows(&m).iter()).map(|(_, at)| *at).max();
    assert_eq!(
        last_turn,
        Some(2_499_000),
        "5,000 turns half a second apart"
    );
}

/// A row retried behind a rate is paced no later than its retry
/// horizon, and dead-lettered when taken there: rate 2 a second, a
/// horizon of 1.2 s. Of four rows due at 1,000, two queue and two are
/// paced (2,000, 2,500); the first fails at 1,000 and is due again at
/// 1,100, when a fresh row has filled the queue again, so its turn
/// (3,000) is past its horizon (2,200).
#[test]
fn a_retried_row_is_paced_no_later_than_its_horizon() {
    let mut config = config_with(vec![rated_source("a", "t", Some(2))]);
    config.retry.max_elapsed_ms = 1_200;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let retried = RowId {
        seq: m.add("t", "a", &["x"], 1_000),
        sink_index: 0,
    };
    for _ in 0..3 {
        m.add("t", "a", &["x"], 1_000);
    }
    let mut first = true;
    settle_at(&mut c, &mut m, 1_000, &mut |_| {
        if std::mem::take(&mut first) {
            fail(FailureClass::Transient)
        } else {
            Ok(())
        }
    });
    let due_times = |m: &Model| m.due.keys().map(|(_, at, _)| *at).collect::<Vec<_>>();
    assert_eq!(due_times(&m), [1_100, 2_000, 2_500]);
    m.add("t", "a", &["x"], 1_050);
    c.handle_committed_for(&Arc::from("t"), 1_050);
    assert!(
        run_at(&mut c, &mut m, 1_100).is_empty(),
        "the turn is at 1,500"
    );
    let due_of = |m: &Model| {
        (m.due.keys())
            .find(|(_, _, r)| *r == retried)
            .map(|(_, at, _)| *at)
    };
    assert_eq!(
        due_of(&m),
        Some(2_200),
        "paced to its horizon, not to 3,000"
    );
    let mut started = 0;
    for turn_ms in (1_500..=4_000).step_by(500) {
        started += run_at(&mut c, &mut m, turn_ms).len();
    }
    let dead = c.stats().dead_by_reason.get(DeadReasonKind::RetryHorizon);
    assert_eq!((started, dead), (4, 1), "the other four delivered");
    assert!(m.due.is_empty() && c.claims.is_empty());
}

/// A key's paced turns go on from the last one given until its rows are
/// made due again, or its rate changes: a wake of the sink makes its
/// backlog due, and what its queue does not take is paced again from the
/// queue's end (not after the turns it had); after a reload that raises
/// the rate, rows claimed beyond the queue are paced from its end at the
/// new rate, while those written back before keep their turns.
#[test]
fn paced_turns_start_again_after_a_wake_or_a_new_rate() {
    let (mut c, mut m) = paced_core(1, 6, 1_000);
    assert_eq!(run_at(&mut c, &mut m, 1), ["a"]);
    let turns = |m: &Model| {
        due_rows(m)
            .into_iter()
            .map(|(_, at)| at)
            .collect::<Vec<_>>()
    };
    assert_eq!(turns(&m), [1_001, 2_001, 3_001, 4_001, 5_001]);

    let key = SinkKey {
        tenant: Arc::from("t"),
        ..key_of("a", 0, "x")
    };
    let step = c.handle_wake_sink(100, &key, None, usize::MAX, &mut m);
    assert_eq!((step.woken, step.next), (5, None));
    assert!(
        run_at(&mut c, &mut m, 100).is_empty(),
        "the turn is at 1,001"
    );
    assert_eq!(turns(&m), [2_001, 3_001, 4_001, 5_001], "not after 5,001");

    let config = config_with(vec![
        rated_source("a", "t", Some(4)),
        source("b", "u", &["x"]),
    ]);
    reconfigure(&mut c, 0, &config);
    for _ in 0..5 {
        m.add("t", "a", &["x"], 200);
    }
    c.handle_committed_for(&Arc::from("t"), 200);
    assert!(run_at(&mut c, &mut m, 200).is_empty());
    // Four queue for the turns from 1,001 on, 250 ms apart; two more are
    // paced after them, not after 5,001.
    assert_eq!(c.stats().claimed.rows, 4);
    assert_eq!(turns(&m), [2_001, 2_001, 2_251, 3_001, 4_001, 5_001]);
}
