//! A reload while rows are claimed: a row waits for its own sink, never
//! for whatever the new config put at its old index.

use super::*;
use crate::config::SinkRetryConfig;

/// Source `a`'s two sinks swap places in a reload while rows of both are
/// queued on their keys: each queued row goes back to the index and is
/// bound again, so it starts on its own sink at its new index, and every
/// row is delivered once.
#[test]
fn rows_queued_across_a_reload_that_swaps_two_sinks_start_on_their_own_sink() {
    let config = config_with(vec![source("a", "t", &["x", "y"])]);
    let swapped = config_with(vec![source("a", "t", &["y", "x"])]);
    let add = |m: &mut Model| {
        m.add("t", "a", &["x", "y"], 0);
    };
    let started = started_across_a_swap(&config, &swapped, add);
    assert_eq!(
        started,
        swapped_rows(),
        "each row on its own sink's new index"
    );
}

/// The same with two sinks of one type, told apart by their places only:
/// the keys of both are still the config's after the swap, but each is
/// now the other sink's, so the rows queued on them go back to the index
/// and start on their own sink at its new index.
#[test]
fn rows_queued_across_a_reload_that_swaps_two_sinks_of_one_type_start_on_their_own_sink() {
    let config = posting_to(&["https://one/", "https://two/"]);
    let swapped = posting_to(&["https://two/", "https://one/"]);
    let places = places_of(&config);
    let add = |m: &mut Model| m.add_placed("t", "a", &["x", "x"], &places);
    let started = started_across_a_swap(&config, &swapped, add);
    assert_eq!(
        started,
        swapped_rows(),
        "each row on its own sink's new index"
    );
}

/// Three hooks of source `a` (each `add`ed), committed under `config`
/// with one call a key at once, and a reload to `swapped` while four of
/// their rows are queued (each of the two running ends after it): every
/// row that started after the reload, with its key's index, in row order.
fn started_across_a_swap(
    config: &Config,
    swapped: &Config,
    add: impl Fn(&mut Model),
) -> Vec<(RowId, u16)> {
    let mut config = config.clone();
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        add(&mut m);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let running: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(running.len(), 2, "one of each key; four rows queued");

    let swapped = Config {
        dispatch: config.dispatch.clone(),
        ..swapped.clone()
    };
    reconfigure(&mut c, 0, &swapped);
    let written_back = m.apply(&mut c).len();
    assert_eq!(written_back, 4, "the queued rows go back to the index");
    for job in &running {
        c.handle_outcome(1, job.id, Ok(()), TOOK);
    }
    let mut started = Vec::new();
    settle_at(&mut c, &mut m, 1, &mut |job| {
        started.push((job.row, job.key.sink_index));
        Ok(())
    });
    assert!(m.rows.is_empty());
    started.sort();
    started
}

/// Rows 0 and 1 of hooks 2 and 3 with the index of their sinks swapped.
fn swapped_rows() -> Vec<(RowId, u16)> {
    (2..=3)
        .flat_map(|seq| {
            let row = |sink_index| RowId { seq, sink_index };
            [(row(0), 1), (row(1), 0)]
        })
        .collect()
}

/// A reload swaps sinks `x` and `y` (whose own retry keys allow one
/// attempt) while an attempt of each runs: `y`'s failure is
/// decided by `y`'s keys (dead), not by those of `x`, the sink now at the
/// row's old index (`[retry]`: due again).
#[test]
fn an_attempt_running_across_a_reload_that_moves_its_sink_fails_by_its_own_sinks_retry_keys() {
    let one_attempt = SinkRetryConfig {
        max_attempts: Some(1),
        ..SinkRetryConfig::default()
    };
    let mut a = source("a", "t", &["x", "y"]);
    a.sinks[1].retry = Some(one_attempt);
    let config = config_with(vec![a]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 0);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    let keys: Vec<(u16, &str)> = (jobs.iter())
        .map(|job| (job.key.sink_index, &*job.key.sink_type))
        .collect();
    assert_eq!(keys, [(0, "x"), (1, "y")]);

    let mut swapped = config.clone();
    let mut moved = source("a", "t", &["y", "x"]);
    moved.sinks[0].retry = Some(one_attempt);
    swapped.sources = vec![moved].into();
    reconfigure(&mut c, 0, &swapped);
    c.handle_outcome(1, jobs[0].id, Ok(()), TOOK);
    c.handle_outcome(1, jobs[1].id, fail(FailureClass::Transient), TOOK);
    let settled: Vec<&str> = m
        .apply(&mut c)
        .iter()
        .filter_map(|op| match op {
            StoreOp::Reschedule { .. } => Some("retried"),
            StoreOp::Dead { .. } => Some("dead"),
            _ => None,
        })
        .collect();
    assert_eq!(settled, ["dead"]);
}

/// A reload that inserts sink `y` before `x` while two calls of `x` run
/// (its `sink_concurrency`): they count against `x` at its new index, so
/// `x` starts no third call until one ends, while `y` takes its two at
/// once; and each sink's counts are its own. (Before, they stayed on the
/// key of index 0: `x` started two more at once, four calls at a receiver
/// that asked for two, and `y` waited for `x`'s to end.)
#[test]
fn calls_running_when_a_reload_moves_their_sink_count_against_it_at_its_new_index() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.sink_concurrency = 2;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..4 {
        m.add("t", "a", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let running: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(running.len(), 2);

    let mut inserted = config.clone();
    inserted.sources = vec![source("a", "t", &["y", "x"])].into();
    reconfigure(&mut c, 0, &inserted);
    for _ in 0..2 {
        m.add("t", "a", &["y", "x"], 0);
    }
    c.handle_committed();
    let _ = m.apply(&mut c);
    c.handle_scan(1, &mut m);
    let _ = m.apply(&mut c);
    let started: Vec<u16> = std::iter::from_fn(|| c.poll_job(1))
        .map(|job| job.key.sink_index)
        .collect();
    assert_eq!(started, [0, 0], "y's two; x has its two running");
    assert_eq!(c.stats().calls, 4);

    for job in &running {
        c.handle_outcome(2, job.id, Ok(()), TOOK);
    }
    let mut started = Vec::new();
    settle_at(&mut c, &mut m, 2, &mut |job| {
        started.push(job.key.sink_index);
        Ok(())
    });
    assert_eq!(started, [1; 4], "x's other rows, once its calls ended");
    let delivered: Vec<(u16, u64)> = (c.sink_stats().into_iter())
        .map(|s| (s.key.sink_index, s.outcomes.delivered))
        .collect();
    assert_eq!(delivered, [(0, 0), (1, 6)], "y's two are still running");
}

/// A reload gives sink `x` another destination while two calls to its old
/// one run (its `sink_concurrency`), and both fail: they were the old
/// receiver's, so the new one has both its slots at once (its two rows
/// queued start) and its breaker (at two failures) stays closed; the
/// index's counts take them. (Before, they counted on the sink's key:
/// nothing started until they ended, and their failures opened the new
/// destination's breaker.)
#[test]
fn calls_running_when_a_reload_gives_their_sink_another_destination_are_not_the_new_ones() {
    let mut config = posting_to(&["https://old/"]);
    config.dispatch.sink_concurrency = 2;
    config.dispatch.breaker_failures = 2;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..4 {
        m.add_placed("t", "a", &["x"], &places_of(&config));
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let running: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(running.len(), 2);

    let mut moved = posting_to(&["https://new/"]);
    moved.dispatch = config.dispatch.clone();
    reconfigure(&mut c, 0, &moved);
    let _ = m.apply(&mut c);
    c.handle_scan(1, &mut m);
    let _ = m.apply(&mut c);
    let started: Vec<Job> = std::iter::from_fn(|| c.poll_job(1)).collect();
    assert_eq!(started.len(), 2, "the new destination's two rows");
    assert_eq!(
        c.stats().calls,
        4,
        "the old calls still count for the shard"
    );

    for job in &running {
        c.handle_outcome(2, job.id, fail(FailureClass::Transient), TOOK);
    }
    let _ = m.apply(&mut c);
    assert_eq!(breaker_events(&mut c), []);
    let stats = c.sink_stats();
    let counts: Vec<_> = (stats.iter())
        .map(|s| {
            (
                s.key.sink_index,
                s.breaker,
                s.consecutive_failures,
                s.outcomes.retried,
            )
        })
        .collect();
    assert_eq!(counts, [(0, BreakerState::Closed, 0, 2)]);
    assert_eq!((stats[0].running, c.stats().calls), (2, 2));
}

/// A reload removes the first of two sinks of type `x` while two calls of
/// each run (their `sink_concurrency`): the second moves to index 0, its
/// calls with it, and the first's calls there are no sink's. Once one of
/// its own ends, the second starts its queued row; the first's failures
/// leave its breaker closed. (Before, the four counted on index 0's key.)
#[test]
fn calls_running_when_a_reload_removes_their_sink_leave_its_index_to_the_sink_moved_there() {
    let mut config = posting_to(&["https://one/", "https://two/"]);
    config.dispatch.sink_concurrency = 2;
    config.dispatch.breaker_failures = 2;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add_placed("t", "a", &["x", "x"], &places_of(&config));
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let (gone, own): (Vec<Job>, Vec<Job>) =
        (std::iter::from_fn(|| c.poll_job(0))).partition(|job| job.key.sink_index == 0);
    assert_eq!((gone.len(), own.len()), (2, 2));

    let mut removed = posting_to(&["https://two/"]);
    removed.dispatch = config.dispatch.clone();
    reconfigure(&mut c, 0, &removed);
    c.handle_outcome(1, own[0].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    c.handle_scan(1, &mut m);
    let _ = m.apply(&mut c);
    let started: Vec<RowId> = std::iter::from_fn(|| c.poll_job(1))
        .map(|job| job.row)
        .collect();
    assert_eq!(
        started,
        [RowId {
            seq: 3,
            sink_index: 1
        }]
    );

    for job in &gone {
        c.handle_outcome(2, job.id, fail(FailureClass::Transient), TOOK);
    }
    let _ = m.apply(&mut c);
    assert_eq!(breaker_events(&mut c), []);
    let stats = c.sink_stats();
    let own_key: Vec<_> = (stats.iter())
        .map(|s| (s.key.sink_index, s.consecutive_failures, s.running))
        .collect();
    assert_eq!(own_key, [(0, 0, 2)]);
}

/// A reload that removes sinks forgets their keys once nothing of theirs
/// runs: source `b`'s key, idle, at once; `a`'s second sink, whose attempt
/// runs across the reload, at the next reload after that attempt ended.
#[test]
fn a_reload_forgets_the_keys_of_removed_sinks_once_they_are_idle() {
    let config = config_with(vec![
        source("a", "t", &["x", "y"]),
        source("b", "u", &["x"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x", "y"], 0);
    m.add("u", "b", &["x"], 0);
    let (running, done): (Vec<Job>, Vec<Job>) = start_all(&mut c, &mut m, 0)
        .into_iter()
        .partition(|job| job.key.sink_type.as_ref() == "y");
    for job in &done {
        c.handle_outcome(1, job.id, Ok(()), TOOK);
    }
    let _ = m.apply(&mut c);
    let keys = |c: &Core| -> Vec<(String, u16)> {
        let stats = c.sink_stats();
        (stats.iter())
            .map(|s| (s.key.source_id.to_string(), s.key.sink_index))
            .collect()
    };
    let key = |source: &str, index| (source.to_string(), index);
    assert_eq!(keys(&c), [key("a", 0), key("a", 1), key("b", 0)]);

    let mut fewer = config.clone();
    fewer.sources = vec![source("a", "t", &["x"])].into();
    reconfigure(&mut c, 1, &fewer);
    assert_eq!(keys(&c), [key("a", 0), key("a", 1)], "a's y still runs");
    c.handle_outcome(2, running[0].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(keys(&c), [key("a", 0), key("a", 1)]);
    reconfigure(&mut c, 2, &fewer);
    assert_eq!(keys(&c), [key("a", 0)]);
    assert!(m.rows.is_empty(), "every row delivered");
}

/// Tenants `u` and `v` lose their only sources in a reload while `v`'s
/// row still runs: `u` is forgotten at once, `v` at the first reload
/// after its call ended, and `u`, given a source again, starts afresh.
#[test]
fn a_reload_forgets_the_tenants_it_removed_once_they_are_idle() {
    let config = config_with(vec![
        source("a", "t", &["x"]),
        source("b", "u", &["x"]),
        source("d", "v", &["x"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for (tenant, source_id) in [("t", "a"), ("u", "b"), ("v", "d")] {
        m.add(tenant, source_id, &["x"], 0);
    }
    let (running, done): (Vec<Job>, Vec<Job>) = start_all(&mut c, &mut m, 0)
        .into_iter()
        .partition(|job| &*job.key.tenant == "v");
    for job in &done {
        c.handle_outcome(1, job.id, Ok(()), TOOK);
    }
    let _ = m.apply(&mut c);
    let tenants = |c: &Core| -> Vec<String> {
        (c.tenant_stats().iter())
            .map(|t| t.tenant.to_string())
            .collect()
    };
    assert_eq!(tenants(&c), ["t", "u", "v"]);

    let mut fewer = config.clone();
    fewer.sources = vec![source("a", "t", &["x"])].into();
    reconfigure(&mut c, 1, &fewer);
    assert_eq!(tenants(&c), ["t", "v"], "v's call still runs");
    c.handle_outcome(2, running[0].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    reconfigure(&mut c, 2, &fewer);
    assert_eq!(tenants(&c), ["t"]);

    reconfigure(&mut c, 3, &config);
    m.add("u", "b", &["x"], 3);
    c.handle_committed_for(&Arc::from("u"), 3);
    let again = start_all(&mut c, &mut m, 3);
    assert_eq!(again.len(), 1);
    c.handle_outcome(4, again[0].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(tenants(&c), ["t", "u"]);
    let u = &c.tenant_stats()[1];
    assert_eq!((u.claimed_rows, u.running), (0, 0));
    assert!(m.rows.is_empty(), "every row delivered");
}

/// A reload that removes one of tenant `t`'s two sources and tenant
/// `u`'s only one while rows of all three queue (the shard runs one call
/// at a time, one a key): their queued rows go back to the index, and their keys
/// leave the round robin — `u` with them, so the calls left to start are
/// `b`'s alone, one after another.
#[test]
fn a_reload_takes_the_removed_keys_out_of_the_round_robin_and_leaves_the_rest() {
    let mut config = config_with(vec![
        source("a", "t", &["x"]),
        source("b", "t", &["x"]),
        source("d", "u", &["x"]),
    ]);
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, calls_at_once(1));
    let mut m = Model::default();
    for (tenant, source_id) in [("t", "a"), ("t", "b"), ("u", "d")] {
        for _ in 0..3 {
            m.add(tenant, source_id, &["x"], 0);
        }
    }
    let running = start_all(&mut c, &mut m, 0);
    assert_eq!(running.len(), 1, "eight rows queue behind it");
    assert_eq!(&*running[0].key.source_id, "a");
    assert_eq!(c.wanted_calls(), 3, "a's call, and one each of b's and d's");

    let mut fewer = config.clone();
    fewer.sources = vec![source("b", "t", &["x"])].into();
    let written_back = reload_writing_back(&mut c, &mut m, 1, &fewer);
    assert_eq!(written_back, 2 + 3, "a's two queued rows and d's three");
    assert_eq!(c.wanted_calls(), 2, "a's call, and one of b's");
    c.handle_outcome(2, running[0].id, Ok(()), TOOK);
    assert!(!c.short_of_calls(0), "b's key has the free slot");
    let mut started = Vec::new();
    for now_ms in 3..6 {
        let job = c.poll_job(now_ms).expect("b's next row");
        started.push(job.key.source_id.to_string());
        assert!(c.poll_job(now_ms).is_none(), "one call at a time");
        c.handle_outcome(now_ms, job.id, Ok(()), TOOK);
    }
    assert_eq!(started, ["b", "b", "b"]);
    assert!(c.poll_job(6).is_none() && c.wanted_calls() == 0);
}

/// Sources `a` and `b` move from tenant `t` to `u` in one reload and are
/// removed in the next. The rows of `t`'s hooks stay on `t`'s keys while
/// the sinks are there: `a`'s, claimed before the move, and `b`'s, claimed
/// after it. The removal takes their queued rows back to the index, to be
/// dead-lettered as `source_gone`, and forgets both keys once `a`'s call
/// has ended — though the catalogs since the move owned neither key.
#[test]
fn a_reload_removing_sources_that_changed_tenants_takes_their_old_tenants_keys_too() {
    let mut config = config_with(vec![source("a", "t", &["x"]), source("b", "t", &["x"])]);
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, calls_at_once(1));
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["x"], 0);
    }
    let running = start_all(&mut c, &mut m, 0);
    assert_eq!(running.len(), 1, "two rows queue behind it");

    let mut moved = config.clone();
    moved.sources = vec![source("a", "u", &["x"]), source("b", "u", &["x"])].into();
    reconfigure(&mut c, 1, &moved);
    assert!(m.apply(&mut c).is_empty(), "the sinks are still there");
    for _ in 0..3 {
        m.add("t", "b", &["x"], 1);
    }
    c.handle_committed_for(&Arc::from("t"), 1);
    assert!(start_all(&mut c, &mut m, 1).is_empty(), "a's call runs");
    let mut removed = config.clone();
    removed.sources = vec![source("d", "u", &["x"])].into();
    let written_back = reload_writing_back(&mut c, &mut m, 2, &removed);
    assert_eq!(written_back, 2 + 3, "the rows queued on t's keys");

    c.handle_outcome(3, running[0].id, Ok(()), TOOK);
    c.handle_scan(3, &mut m);
    let mut dead = dead_reasons(m.apply(&mut c));
    dead.sort();
    let gone = |source| (format!("source_gone: {source}"), 0);
    assert_eq!(
        dead,
        [gone("a"), gone("a"), gone("b"), gone("b"), gone("b")]
    );
    reconfigure(&mut c, 4, &removed);
    let sources: Vec<String> = (c.sink_stats().iter())
        .map(|s| s.key.source_id.to_string())
        .collect();
    assert!(sources.is_empty(), "both keys forgotten: {sources:?}");
    assert!(m.rows.is_empty(), "one row delivered, five dead");
}

/// Reloads `config` at `now_ms`: the rows it writes back to the index.
fn reload_writing_back(c: &mut Core, m: &mut Model, now_ms: u64, config: &Config) -> usize {
    reconfigure(c, now_ms, config);
    (m.apply(c).iter())
        .filter(|op| matches!(op, StoreOp::Reschedule { .. }))
        .count()
}
