//! Sinks with `max_calls_per_s`: a key's calls start one interval apart,
//! the wake-up names the next turn, and an idle key saves up no burst.

use super::*;

/// A core whose tenant `t` has source `a` with one sink of type `x` at
/// `rate` calls per second, and source `b` with one of no rate; `rows`
/// rows of each are due at 0.
fn rated_core(rate: u32, rows: usize) -> (Core, Model) {
    let mut limited = source("a", "t", &["x"]);
    limited.sinks[0].max_calls_per_s = Some(rate);
    let config = config_with(vec![limited, source("b", "t", &["x"])]);
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

/// The sources of the calls that start at `now_ms`, in order.
fn starts(c: &mut Core, now_ms: u64) -> Vec<String> {
    std::iter::from_fn(|| c.poll_job(now_ms))
        .map(|job| job.key.source_id.to_string())
        .collect()
}

#[test]
fn a_keys_calls_start_one_interval_apart_and_the_wake_up_names_the_next_turn() {
    // 4 calls per second: one every 250 ms. The key without a rate goes on.
    let (mut c, _m) = rated_core(4, 5);
    assert_eq!(starts(&mut c, 0), ["a", "b", "b", "b", "b", "b"]);
    assert_eq!(c.poll_deadline(0), Some(250));
    assert!(starts(&mut c, 249).is_empty());
    assert_eq!(c.poll_deadline(249), Some(250));
    assert_eq!(starts(&mut c, 250), ["a"]);
    // Late: the next turn counts from this start, not from the missed turn.
    assert_eq!(starts(&mut c, 900), ["a"]);
    assert_eq!(c.poll_deadline(900), Some(1_150));
    assert!(starts(&mut c, 1_149).is_empty());
    // Idle for long, the key saves up no burst: one call, then one interval.
    assert_eq!(starts(&mut c, 5_000), ["a"]);
    assert!(starts(&mut c, 5_249).is_empty());
    assert_eq!(starts(&mut c, 5_250), ["a"]);
    assert!(starts(&mut c, 10_000).is_empty(), "all five started");
}

#[test]
fn a_rate_over_one_per_millisecond_starts_several_calls_in_one() {
    // 2,500 per second: one every 400 µs, so 3 calls in ms 0 (at 0, 400
    // and 800 µs) and 2 in ms 1 (1,200 and 1,600 µs), on the ms clock.
    let (mut c, _m) = rated_core(2_500, 10);
    let first: Vec<String> = starts(&mut c, 0).into_iter().filter(|s| s == "a").collect();
    assert_eq!(first.len(), 3);
    assert_eq!(c.poll_deadline(0), Some(1));
    assert_eq!(starts(&mut c, 1), ["a", "a"]);
    assert_eq!(starts(&mut c, 2), ["a", "a", "a"]);
}

#[test]
fn a_rate_waits_behind_the_keys_concurrency_and_both_hold() {
    // One call at a time and 10 per second: a freed slot waits for the turn.
    let mut limited = source("a", "t", &["x"]);
    limited.sinks[0].max_calls_per_s = Some(10);
    let mut config = config_with(vec![limited]);
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
