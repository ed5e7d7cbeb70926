//! Sinks with `max_calls_per_s`: a key's calls start one interval apart,
//! the wake-up names the next turn, and an idle key saves up no burst.

use super::*;

/// A core whose tenant `t` has source `a` with one sink of type `x` at
/// `rate` calls per second, and source `b` with one of no rate; `rows`
/// rows of each are due at 0.
fn rated_core(rate: u32, rows: usize) -> (Core, Model) {
    let config = config_with(vec![
        rated_source("a", "t", Some(rate)),
        source("b", "t", &["x"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..rows {
        m.add("t", "a", &["x"], 0);
        m.add("t", "b", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    (c, m)
}

/// The sources of the calls that start at `now_ms`, in order, the rows
/// due by then claimed first.
fn starts(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<String> {
    claim_all(c, m, now_ms);
    std::iter::from_fn(|| c.poll_job(now_ms))
        .map(|job| job.key.source_id.to_string())
        .collect()
}

#[test]
fn a_keys_calls_start_one_interval_apart_and_the_wake_up_names_the_next_turn() {
    // 4 calls per second: one every 250 ms. The key without a rate goes on.
    let (mut c, mut m) = rated_core(4, 5);
    assert_eq!(starts(&mut c, &mut m, 0), ["a", "b", "b", "b", "b", "b"]);
    assert_eq!(c.poll_deadline(0), Some(250));
    assert!(starts(&mut c, &mut m, 249).is_empty());
    assert_eq!(c.poll_deadline(249), Some(250));
    assert_eq!(starts(&mut c, &mut m, 250), ["a"]);
    // Late: the next turn counts from this start, not from the missed turn.
    assert_eq!(starts(&mut c, &mut m, 900), ["a"]);
    // The fifth row waited in the store, paced to come due after the four
    // queued rows' turns (see `pacing`), and is claimed then.
    assert_eq!(c.poll_deadline(900), Some(1_000));
    assert!(starts(&mut c, &mut m, 1_000).is_empty());
    assert_eq!(c.poll_deadline(1_000), Some(1_150));
    assert!(starts(&mut c, &mut m, 1_149).is_empty());
    // Idle for long, the key saves up no burst: one call, then one interval.
    assert_eq!(starts(&mut c, &mut m, 5_000), ["a"]);
    assert!(starts(&mut c, &mut m, 5_249).is_empty());
    assert_eq!(starts(&mut c, &mut m, 5_250), ["a"]);
    assert!(
        starts(&mut c, &mut m, 10_000).is_empty(),
        "all five started"
    );
}

#[test]
fn a_rate_over_one_per_millisecond_starts_several_calls_in_one() {
    // 2,500 per second: one every 400 µs, so 3 calls in ms 0 (at 0, 400
    // and 800 µs) and 2 in ms 1 (1,200 and 1,600 µs), on the ms clock.
    let (mut c, mut m) = rated_core(2_500, 10);
    let first: Vec<String> = starts(&mut c, &mut m, 0)
        .into_iter()
        .filter(|s| s == "a")
        .collect();
    assert_eq!(first.len(), 3);
    assert_eq!(c.poll_deadline(0), Some(1));
    assert_eq!(starts(&mut c, &mut m, 1), ["a", "a"]);
    assert_eq!(starts(&mut c, &mut m, 2), ["a", "a", "a"]);
}

#[test]
fn a_rate_waits_behind_the_keys_concurrency_and_both_hold() {
    // One call at a time and 10 per second: a freed slot waits for the turn.
    let mut config = config_with(vec![rated_source("a", "t", Some(10))]);
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let first = c.poll_job(0).expect("the first call");
    assert!(c.poll_job(0).is_none());
    // No slot: the wake-up is the attempt's deadline, not the turn at 100.
    assert!(c.poll_deadline(0) > Some(100), "{:?}", c.poll_deadline(0));
    c.handle_outcome(40, first.id, Ok(()), TOOK);
    assert!(
        c.poll_job(40).is_none(),
        "the slot is free, the turn is not"
    );
    assert_eq!(c.poll_deadline(40), Some(100));
    let second = c.poll_job(100).expect("the turn");
    assert!(
        c.poll_job(300).is_none(),
        "the turn is there, the slot is not"
    );
    c.handle_outcome(301, second.id, Ok(()), TOOK);
    assert!(c.poll_job(301).is_some());
}

/// A reload holds a key waiting for its turn to its sink's new rate from
/// its last call: one whose rate is lowered waits one new interval after
/// it (a receiver that asked for fewer calls gets none sooner), one whose
/// rate is raised takes its turn sooner, and one that loses its rate
/// starts its calls at once.
#[test]
fn a_reload_holds_a_waiting_key_to_its_sinks_new_rate() {
    let (mut c, mut m) = rated_core(4, 5);
    assert_eq!(starts(&mut c, &mut m, 0), ["a", "b", "b", "b", "b", "b"]);
    assert!(starts(&mut c, &mut m, 10).is_empty(), "the turn is at 250");
    let with_rate = |rate: Option<u32>| {
        config_with(vec![rated_source("a", "t", rate), source("b", "t", &["x"])])
    };
    reconfigure(&mut c, 10, &with_rate(Some(2)));
    assert!(
        starts(&mut c, &mut m, 499).is_empty(),
        "500 ms after the last call"
    );
    assert_eq!(starts(&mut c, &mut m, 500), ["a"]);
    reconfigure(&mut c, 600, &with_rate(Some(5)));
    assert!(
        starts(&mut c, &mut m, 699).is_empty(),
        "200 ms after the last call"
    );
    assert_eq!(starts(&mut c, &mut m, 700), ["a"]);
    assert!(starts(&mut c, &mut m, 899).is_empty());
    assert_eq!(starts(&mut c, &mut m, 900), ["a"]);
    reconfigure(&mut c, 910, &with_rate(None));
    assert_eq!(starts(&mut c, &mut m, 910), ["a"], "no rate: at once");
}

/// A sink a reload removed and the next put back waits out its rate's
/// interval from its last call: its key, idle, is kept until its turn
/// comes.
#[test]
fn a_sink_removed_and_put_back_waits_for_the_turn_it_had() {
    let (mut c, mut m) = rated_core(1, 1);
    assert_eq!(answered_starts(&mut c, &mut m, 0), ["a", "b"]);
    let with_a = config_with(vec![
        rated_source("a", "t", Some(1)),
        source("b", "t", &["x"]),
    ]);
    let without_a = config_with(vec![source("b", "t", &["x"])]);
    reconfigure(&mut c, 10, &without_a);
    reconfigure(&mut c, 20, &with_a);
    m.add("t", "a", &["x"], 20);
    c.handle_committed_for(&Arc::from("t"), 20);
    assert!(starts(&mut c, &mut m, 20).is_empty(), "the turn is at 1000");
    assert_eq!(starts(&mut c, &mut m, 1_000), ["a"]);
}

/// A sink a reload moves to another index takes its turn with it: an
/// HTTP sink at one call a second, called at 0, then moved behind another
/// sink inserted first, takes its next call at 1,000, not at once (as
/// its key at index 1, which had no calls, would).
#[test]
fn a_sink_a_reload_moves_takes_its_turn_with_it() {
    let http = |path: &str, rate| SinkConfig {
        max_calls_per_s: rate,
        ..SinkConfig::http(format!("http://r/{path}"))
    };
    let config = |sinks| config_with(vec![SourceConfig::new("a", "t", sinks)]);
    let mut c = core(&config(vec![http("rated", Some(1))]), BIG);
    let mut m = Model::default();
    m.add("t", "a", &["http"], 0);
    assert_eq!(answered_jobs(&mut c, &mut m, 0), [0]);
    reconfigure(
        &mut c,
        10,
        &config(vec![http("new", None), http("rated", Some(1))]),
    );
    for _ in 0..2 {
        m.add("t", "a", &["http", "http"], 10);
    }
    c.handle_committed_for(&Arc::from("t"), 10);
    assert_eq!(answered_jobs(&mut c, &mut m, 10), [0, 0], "the new sink's");
    assert!(answered_jobs(&mut c, &mut m, 999).is_empty());
    assert_eq!(answered_jobs(&mut c, &mut m, 1_000), [1]);
    assert_eq!(answered_jobs(&mut c, &mut m, 2_000), [1]);
}

/// Keys that wait for their turn leave the rings until it comes, so the
/// pass looking for the next call does not walk them: 500 tenants
/// whose sinks take two calls a second, each with a row waiting, leave
/// only the tenant that may start a call in the ring. Their rows start
/// at their turn; a key whose rows are written back while it waits
/// (here, a drain) leaves the waits.
#[test]
fn keys_waiting_for_their_turn_leave_the_rings_until_it_comes() {
    let tenants = 500;
    let mut sources: Vec<_> = (0..tenants)
        .map(|i| rated_source(&format!("s{i}"), &format!("t{i}"), Some(2)))
        .collect();
    sources.push(source("fast", "f", &["x"]));
    let mut c = core(&config_with(sources), BIG);
    let mut m = Model::default();
    for i in 0..tenants {
        for _ in 0..2 {
            m.add(&format!("t{i}"), &format!("s{i}"), &["x"], 0);
        }
    }
    claim_all(&mut c, &mut m, 0);
    assert_eq!(
        answered_starts(&mut c, &mut m, 0).len(),
        tenants,
        "each key's first call"
    );
    assert!(c.tenant_ring.is_empty(), "{} tenants", c.tenant_ring.len());
    assert_eq!(c.rate_waits.len(), tenants);
    assert_eq!(c.poll_deadline(0), Some(500));

    for _ in 0..3 {
        m.add("f", "fast", &["x"], 10);
    }
    c.handle_committed_for(&Arc::from("f"), 10);
    claim_all(&mut c, &mut m, 10);
    assert_eq!(
        answered_starts(&mut c, &mut m, 10),
        ["fast", "fast", "fast"]
    );
    assert!(answered_starts(&mut c, &mut m, 499).is_empty());
    assert_eq!(
        answered_starts(&mut c, &mut m, 500).len(),
        tenants,
        "each key's turn"
    );
    assert!(c.rate_waits.is_empty() && c.tenant_ring.is_empty());

    for i in 0..tenants {
        m.add(&format!("t{i}"), &format!("s{i}"), &["x"], 500);
        c.handle_committed_for(&Arc::from(format!("t{i}")), 500);
    }
    claim_all(&mut c, &mut m, 500);
    assert!(
        answered_starts(&mut c, &mut m, 500).is_empty(),
        "the next turn is at 1,000"
    );
    assert_eq!(c.rate_waits.len(), tenants);
    c.handle_drain();
    assert!(c.rate_waits.is_empty(), "the drain wrote the rows back");
    assert_eq!(c.stats().queued, 0);
}

/// The sources of the calls that start at `now_ms`, each answered ok.
fn answered_starts(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<String> {
    let jobs = answered(c, m, now_ms);
    jobs.iter()
        .map(|job| job.key.source_id.to_string())
        .collect()
}

/// The sink indexes of the calls that start at `now_ms`, each answered
/// at once.
fn answered_jobs(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<u16> {
    let jobs = answered(c, m, now_ms);
    jobs.iter().map(|job| job.key.sink_index).collect()
}

/// The calls that start at `now_ms`, the rows due by then claimed first,
/// each answered at once.
fn answered(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<Job> {
    claim_all(c, m, now_ms);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(now_ms)).collect();
    for job in &jobs {
        c.handle_outcome(now_ms, job.id, Ok(()), TOOK);
    }
    jobs
}
