//! Ordering lanes end to end: a real engine on a real LMDB directory
//! delivering over HTTP to receivers on loopback. A sink entry with
//! `ordered = true` delivers the hooks of one lane one at a time in commit
//! order; `ordering_key = "header:<name>"` gives each value of that header
//! its own lane. (The reference's scenario list has no stored test for
//! lanes; these derive from the behaviour it describes.)

mod common;

use common::*;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::store::DeadFilter;
use goad::{Config, Engine, NewHook, SinkConfig};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// An ordered HTTP sink to `url`, one lane per `x-customer` value.
fn ordered_by_customer(url: String) -> SinkConfig {
    SinkConfig {
        ordered: true,
        ordering_key: Some("header:x-customer".into()),
        ..SinkConfig::http(url)
    }
}

fn one_ordered_source(dir: &std::path::Path, sink: SinkConfig) -> Config {
    let mut c = config(dir);
    c.sources.push(source("s", "t", vec![sink]));
    c
}

fn hook_for(customer: &str, body: &str) -> NewHook {
    NewHook {
        headers: vec![("x-customer".into(), customer.into())],
        ..NewHook::new("s", body)
    }
}

fn body_of(r: &Received) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Each customer's lane gets its hooks one at a time in commit order, its
/// retries included, while the other lanes go on: customer 1's third hook
/// is answered 503 with `Retry-After: 1` once, and every hook of customers
/// 0 and 2 arrives before customer 1's lane moves past it.
#[test]
fn each_lane_delivers_in_commit_order_one_at_a_time_and_a_retry_blocks_only_its_lane() {
    let dir = tempfile::tempdir().unwrap();
    // Requests in flight per customer now, and the most seen at once.
    let in_flight: Arc<Mutex<HashMap<String, (u32, u32)>>> = Arc::default();
    let seen = in_flight.clone();
    let failed_once = Arc::new(Mutex::new(false));
    let receiver = Receiver::start(move |r| {
        let customer = r.header("x-customer").unwrap_or("").to_string();
        {
            let mut all = seen.lock();
            let (now, most) = all.entry(customer.clone()).or_default();
            *now += 1;
            *most = (*most).max(*now);
        }
        // A sink that takes a moment, so lanes overlap if they can.
        std::thread::sleep(Duration::from_millis(2));
        seen.lock().get_mut(&customer).expect("counted").0 -= 1;
        let mut failed = failed_once.lock();
        if body_of(r) == "c1-2" && !*failed {
            *failed = true;
            return Reply::status(503).header("retry-after", "1");
        }
        Reply::status(200)
    })
    .unwrap();
    let engine = Engine::open(one_ordered_source(
        dir.path(),
        ordered_by_customer(receiver.url("/")),
    ))
    .unwrap();
    for i in 0..10 {
        for c in 0..3 {
            engine
                .commit(hook_for(&format!("c{c}"), &format!("c{c}-{i}")))
                .unwrap();
        }
    }
    assert!(
        receiver.wait_for(31, Duration::from_secs(20)),
        "31 requests"
    );
    engine.tick().unwrap();

    let received = receiver.received();
    let bodies: Vec<String> = received.iter().map(body_of).collect();
    let per_customer = |c: usize| -> Vec<String> {
        let prefix = format!("c{c}-");
        bodies
            .iter()
            .filter(|b| b.starts_with(&prefix))
            .cloned()
            .collect()
    };
    let in_order = |c: usize| -> Vec<String> { (0..10).map(|i| format!("c{c}-{i}")).collect() };
    assert_eq!(per_customer(0), in_order(0));
    assert_eq!(per_customer(2), in_order(2));
    let mut with_retry = in_order(1);
    with_retry.insert(2, "c1-2".into());
    assert_eq!(per_customer(1), with_retry, "the failed hook held its lane");
    let position = |body: &str| bodies.iter().rposition(|b| b == body).unwrap();
    assert!(
        position("c0-9") < position("c1-3") && position("c2-9") < position("c1-3"),
        "the other lanes went on while c1's waited: {bodies:?}"
    );
    let most: Vec<u32> = (0..3)
        .map(|c| in_flight.lock()[&format!("c{c}")].1)
        .collect();
    assert_eq!(most, [1, 1, 1], "one request at a time per lane");
    assert_eq!(engine.hook_count().unwrap(), 0);
    assert_eq!(engine.lane_member_counts().unwrap(), [0]);
}

/// A head dead-lettered for a permanent answer releases its lane in the
/// same batch: the hooks behind it are delivered, in order, and the poison
/// hook is a dead letter. Replayed while the lane's head waits out a
/// `Retry-After`, it queues behind that head in its lane again.
#[test]
fn a_poison_hook_is_dead_lettered_and_its_lane_moves_on_and_a_replay_rejoins_the_lane() {
    let dir = tempfile::tempdir().unwrap();
    let poison_ok = Arc::new(Mutex::new(false));
    let ok = poison_ok.clone();
    let waited = Arc::new(Mutex::new(false));
    let receiver = Receiver::start(move |r| match body_of(r).as_str() {
        "poison" if !*ok.lock() => Reply::status(410),
        "held" if !std::mem::replace(&mut *waited.lock(), true) => {
            Reply::status(503).header("retry-after", "1")
        }
        _ => Reply::status(200),
    })
    .unwrap();
    let sink = SinkConfig {
        ordered: true,
        ..SinkConfig::http(receiver.url("/"))
    };
    let engine = Engine::open(one_ordered_source(dir.path(), sink)).unwrap();
    for body in ["a", "poison", "b", "c"] {
        engine.commit(NewHook::new("s", body)).unwrap();
    }
    engine.tick().unwrap();
    let bodies =
        |receiver: &Receiver| -> Vec<String> { receiver.received().iter().map(body_of).collect() };
    assert_eq!(bodies(&receiver), ["a", "poison", "b", "c"]);
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].record.error.as_deref().unwrap().contains("410"),
        "{:?}",
        dead[0].record.error
    );

    // "held" heads the lane and waits out its Retry-After; the replayed
    // poison hook (an older seq) queues behind it.
    engine.commit(NewHook::new("s", "held")).unwrap();
    assert!(receiver.wait_for(5, Duration::from_secs(10)));
    *poison_ok.lock() = true;
    let replayed = engine.replay(&DeadFilter::default()).unwrap();
    assert_eq!(replayed.moved, 1);
    assert_eq!(engine.lane_member_counts().unwrap(), [1]);
    assert!(receiver.wait_for(7, Duration::from_secs(20)));
    engine.tick().unwrap();
    assert_eq!(
        bodies(&receiver),
        ["a", "poison", "b", "c", "held", "held", "poison"]
    );
    assert!(common::dead(&engine).is_empty());
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// Dead-lettering a source's backlog takes the hooks waiting in its lanes
/// with their heads; the store is sound after.
#[test]
fn dead_lettering_a_source_takes_the_hooks_waiting_in_its_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(503).header("retry-after", "3600")).unwrap();
    let c = one_ordered_source(dir.path(), ordered_by_customer(receiver.url("/")));
    let engine = Engine::open(c).unwrap();
    for i in 0..6 {
        let customer = if i < 4 { "c0" } else { "c1" };
        engine.commit(hook_for(customer, &format!("{i}"))).unwrap();
    }
    // Each lane's head was tried once and now waits an hour.
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
    engine.tick().unwrap();
    assert_eq!(engine.lane_member_counts().unwrap(), [4]);
    assert_eq!(engine.dead_letter_source("s").unwrap(), 6);
    assert_eq!(engine.lane_member_counts().unwrap(), [0]);
    let dead = dead(&engine);
    assert_eq!(dead.len(), 6);
    assert!(dead
        .iter()
        .all(|r| r.record.error.as_deref() == Some("source_gone: s")));
    assert_eq!(receiver.count(), 2, "only the heads were tried");
    engine.shutdown();
    drop(engine);
    let verified = goad::store::verify_data_dir(dir.path(), 1).unwrap();
    assert_eq!(verified[0].problems, Vec::<String>::new());
    assert_eq!((verified[0].dead, verified[0].lanes), (6, 0));
}
