//! A crash at any instant loses no acknowledged hook: a child process
//! commits hooks and delivers them to a receiver on loopback, is killed with
//! SIGKILL mid-flight — five times, each child opening what the last one
//! left, some killed just after their open, while the rows it left in
//! flight are being delivered again — and a new engine on the same data
//! directory delivers every hook the children had acknowledged, at least
//! once, to each sink; the ordered sink's lanes get their hooks' first
//! deliveries in commit order.

mod common;

use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Engine, SinkConfig};
use std::collections::HashSet;
use std::time::Duration;

const CHILD_DIR: &str = "GOAD_CRASH_CHILD_DIR";
const CHILD_URL: &str = "GOAD_CRASH_CHILD_URL";
/// The number of a child's first hook per thread: each child's hooks
/// follow the last one's in every lane.
const CHILD_FROM: &str = "GOAD_CRASH_CHILD_FROM";

/// How many acknowledgements each child prints before it is killed: the
/// first runs long enough for deliveries to be under way, later ones die at
/// once (while the rows the last one left in flight are delivered again)
/// or later.
const KILL_AFTER_ACKS: [usize; 5] = [2_000, 10, 600, 50, 1_200];

/// Lanes per source of the ordered sink (values of `x-key`).
const KEYS: u64 = 4;

/// Four sources of four tenants, each with an unordered sink (`/hooks`)
/// and one ordered by the `x-key` header (`/ordered`) on the receiver at
/// `base_url`.
fn crash_config(dir: &std::path::Path, base_url: &str) -> goad::Config {
    let mut c = config(dir);
    c.shards = 2;
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    c.retry.max_attempts = 1_000;
    let ordered = SinkConfig {
        ordered: true,
        ordering_key: Some("header:x-key".into()),
        ..SinkConfig::http(format!("{base_url}/ordered"))
    };
    for t in 0..4 {
        c.sources.push(source(
            &format!("s{t}"),
            &format!("tenant-{t}"),
            vec![
                SinkConfig::http(format!("{base_url}/hooks")),
                ordered.clone(),
            ],
        ));
    }
    c
}

/// The child's role: commit hooks from four threads forever, thread `t`
/// to source `s{t}`, hook `i` (from `CHILD_FROM` on) with body `t-i-…` in
/// lane `x-key: i % KEYS`, printing `ACK <id> <t> <i>` for each. Runs only
/// when the parent test starts this binary.
#[test]
fn crash_child_role() {
    let (Ok(dir), Ok(url), Ok(from)) = (
        std::env::var(CHILD_DIR),
        std::env::var(CHILD_URL),
        std::env::var(CHILD_FROM),
    ) else {
        return;
    };
    let from: u64 = from.parse().unwrap();
    let engine = Engine::open(crash_config(std::path::Path::new(&dir), &url)).unwrap();
    commit_and_ack_forever(&engine, 4, from, KEYS, Duration::ZERO, |t, i| {
        format!("{t}-{i}-{:x<500}", "").into_bytes()
    });
}

#[test]
fn every_acknowledged_hook_is_delivered_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    // A flaky receiver: every third request fails, so rows are mid-retry too.
    let n = std::sync::atomic::AtomicU64::new(0);
    let receiver = Receiver::start(move |_| {
        if n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 3 == 2 {
            Reply::status(503)
        } else {
            Reply::status(200)
        }
    })
    .unwrap();
    let url = receiver.url("");
    let mut acked: HashSet<String> = HashSet::new();
    for (generation, &acks) in KILL_AFTER_ACKS.iter().enumerate() {
        let from = generation as u64 * 1_000_000;
        let child_env = [
            (CHILD_DIR, dir.path().display().to_string()),
            (CHILD_URL, url.clone()),
            (CHILD_FROM, from.to_string()),
        ];
        let acks = acks_until_killed("crash_child_role", &child_env, |n| n >= acks);
        // Each `<id> <thread> <number>`.
        acked.extend(
            acks.iter()
                .map(|ack| ack.split(' ').next().unwrap().to_string()),
        );
        if generation == 0 {
            assert!(
                receiver.ok_count() > 0,
                "deliveries were under way when the first child was killed"
            );
        }
    }
    let delivered_before_kill = receiver.ok_count();
    // What the kill left is sound: every row in exactly one index, every
    // record readable, some rows in flight.
    let left = goad::store::verify_data_dir(dir.path(), 2).unwrap();
    for shard in &left {
        assert_eq!(shard.problems, Vec::<String>::new());
    }
    let rows_left: u64 = left
        .iter()
        .map(|s| s.due + s.in_flight + s.lane_members + s.dead)
        .sum();
    assert!(rows_left > 0, "the kill left rows to recover");
    let engine = Engine::open(crash_config(dir.path(), &url)).unwrap();
    // The hooks a sink answered 200 for.
    let delivered_to = |path: &str| -> HashSet<String> {
        receiver
            .received()
            .iter()
            .filter(|r| r.status == 200 && r.path == path)
            .filter_map(|r| r.header("webhook-id").map(str::to_string))
            .collect()
    };
    wait_until(
        "every acknowledged hook delivered to both sinks",
        Duration::from_secs(60),
        || {
            // Counting first keeps the poll cheap: each acknowledged hook
            // needs at least two 200s before the ids are worth comparing.
            receiver.ok_count() >= 2 * acked.len() as u64 && {
                let (hooks, ordered) = (delivered_to("/hooks"), delivered_to("/ordered"));
                acked
                    .iter()
                    .all(|id| hooks.contains(id) && ordered.contains(id))
            }
        },
    );
    // In each lane (thread t's hooks with one x-key), first deliveries come
    // in commit order: thread t committed hook i after hook i - 1.
    let received = receiver.received();
    let ordered = received
        .iter()
        .filter(|r| r.status == 200 && r.path == "/ordered")
        .map(|r| (r.header("webhook-id").unwrap(), r.body.as_slice()));
    assert_eq!(
        assert_lanes_first_in_commit_order(ordered, KEYS),
        4 * KEYS,
        "every lane delivered"
    );
    // Rows committed but not yet acknowledged when the child died are
    // delivered too; then nothing is left pending or dead.
    wait_until("an empty store", Duration::from_secs(60), || {
        rows(&engine).is_empty()
    });
    let recovered: u64 = engine.stats().iter().map(|s| s.recovered).sum();
    eprintln!("{} acknowledged, {delivered_before_kill} deliveries before the last kill, {recovered} rows recovered from in flight", acked.len());
}
