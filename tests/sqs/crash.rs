//! A crash loses no acknowledged hook of a queue sink either: a child
//! process commits to SQS sinks, a standard queue's and a FIFO queue's
//! ordered by a header, whose large bodies go to an S3 claim check (all
//! moto's), and is killed with SIGKILL mid-flight three times, each child
//! opening what the last one left; an engine reopened on the data
//! directory then delivers the rest. Every acknowledged hook reaches both
//! queues at least once, its body inline or in the claim its message names,
//! and each lane's hooks reach the FIFO queue first in commit order.

use super::*;
use sha2::Sha256;
use std::collections::HashMap;

const CHILD_DIR: &str = "GOAD_SQS_CRASH_CHILD_DIR";
const CHILD_MOTO: &str = "GOAD_SQS_CRASH_CHILD_MOTO";
const CHILD_QUEUE: &str = "GOAD_SQS_CRASH_CHILD_QUEUE";
const CHILD_FIFO: &str = "GOAD_SQS_CRASH_CHILD_FIFO";
/// The number of a child's first hook per thread, apart from the last one's.
const CHILD_FROM: &str = "GOAD_SQS_CRASH_CHILD_FROM";

/// Bodies over this go to the claim check.
const INLINE_MAX_BYTES: u64 = 1_024;

/// Lanes per source of the ordered sink (values of `x-key`).
const KEYS: u64 = 4;

/// Thread `t`'s hook `i`: every third one too large to go inline.
fn body_of(t: u64, i: u64) -> Vec<u8> {
    let size = if i.is_multiple_of(3) { 3_000 } else { 300 };
    format!("{t}-{i}-{:y<size$}", "").into_bytes()
}

/// Sources `s0` and `s1` of two tenants, each with an SQS sink to the
/// standard queue `queues[0]` and one to the FIFO queue `queues[1]` ordered
/// by the header `x-key`; claims in moto's bucket `claims`; retries every
/// 10 ms.
fn crash_config(dir: &std::path::Path, moto_url: &str, queues: [&str; 2]) -> Config {
    let mut c = config(dir);
    c.shards = 2;
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    c.retry.max_attempts = 1_000;
    let sink = SinkConfig {
        inline_max_bytes: Some(INLINE_MAX_BYTES),
        ..sqs_sink(queues[0])
    };
    let ordered = SinkConfig {
        inline_max_bytes: Some(INLINE_MAX_BYTES),
        ordered: true,
        ordering_key: Some("header:x-key".into()),
        ..sqs_sink(queues[1])
    };
    for t in 0..2 {
        c.sources.push(source(
            &format!("s{t}"),
            &format!("tenant-{t}"),
            vec![sink.clone(), ordered.clone()],
        ));
    }
    c.claim_check = s3_claims(moto_url, "claims", [KEY_ENV, SECRET_ENV, TOKEN_ENV]);
    c
}

/// The child's role: commit from two threads, thread `t` to source `s{t}`,
/// hook `i` with body `body_of(t, i)` in lane `x-key: i % KEYS`, printing
/// `ACK <id> <t> <i>` for each (`commit_and_ack_forever`). Runs only when
/// the parent test starts this binary.
#[test]
fn sqs_crash_child_role() {
    let (Ok(dir), Ok(moto_url), Ok(queue), Ok(fifo), Ok(from)) = (
        std::env::var(CHILD_DIR),
        std::env::var(CHILD_MOTO),
        std::env::var(CHILD_QUEUE),
        std::env::var(CHILD_FIFO),
        std::env::var(CHILD_FROM),
    ) else {
        return;
    };
    let from: u64 = from.parse().unwrap();
    let c = crash_config(std::path::Path::new(&dir), &moto_url, [&queue, &fifo]);
    let engine = Engine::open(c).unwrap();
    // Paced, so the sinks' calls are under way at a kill.
    commit_and_ack_forever(&engine, 2, from, KEYS, Duration::from_millis(2), body_of);
}

#[test]
fn every_acknowledged_hook_reaches_the_queues_after_sigkill() {
    let moto = Moto::start();
    let queues = [moto.create_queue("crash"), moto.create_queue("crash.fifo")];
    assert_eq!(moto.s3("PUT", "/claims").0, 200, "bucket created");
    let dir = tempfile::tempdir().unwrap();
    let mut acked: HashMap<String, Vec<u8>> = HashMap::new();
    for generation in 0..3u64 {
        let child_env = [
            (CHILD_DIR, dir.path().display().to_string()),
            (CHILD_MOTO, moto.url.clone()),
            (CHILD_QUEUE, queues[0].clone()),
            (CHILD_FIFO, queues[1].clone()),
            (CHILD_FROM, (generation * 1_000_000).to_string()),
        ];
        // The first child dies once messages have reached the queue (or
        // after 3,000 hooks, failing below), the second at once (while the
        // rows the first left in flight are sent again), the third later.
        let kill_at = |n: usize| match generation {
            0 => {
                n >= 100
                    && n.is_multiple_of(20)
                    && (n >= 3_000 || messages_in(&moto, &queues[0]) > 0)
            }
            1 => n >= 10,
            _ => n >= 200,
        };
        for ack in acks_until_killed("crash::sqs_crash_child_role", &child_env, kill_at) {
            let [id, t, i]: [&str; 3] = ack.split(' ').collect::<Vec<_>>().try_into().unwrap();
            acked.insert(id.into(), body_of(t.parse().unwrap(), i.parse().unwrap()));
        }
        if generation == 0 {
            assert!(
                messages_in(&moto, &queues[0]) > 0,
                "deliveries were under way when the first child was killed"
            );
        }
    }
    for shard in goad::store::verify_data_dir(dir.path(), 2).unwrap() {
        assert_eq!(shard.problems, Vec::<String>::new());
    }
    let c = crash_config(dir.path(), &moto.url, [&queues[0], &queues[1]]);
    let engine = Engine::open(c).unwrap();
    // The ordered sink's lanes send one message at a time to moto: 643
    // rows left took 44 s here with one core busy (2026-12-07), and over
    // 60 s in CI beside the other SQS tests.
    wait_until("every row delivered", Duration::from_secs(180), || {
        rows(&engine).is_empty()
    });
    assert_eq!(dead(&engine).len(), 0);
    let claimed = acked
        .values()
        .filter(|b| b.len() > INLINE_MAX_BYTES as usize)
        .count();
    assert!(
        claimed > 0,
        "some acknowledged bodies went to the claim check"
    );
    let [queued, in_order] = [0, 1].map(|q| received(&moto, &queues[q]));
    for messages in [&queued, &in_order] {
        let bodies: HashMap<&String, &Vec<u8>> = messages.iter().map(|(id, b)| (id, b)).collect();
        for (id, body) in &acked {
            assert_eq!(bodies.get(id), Some(&body), "hook {id} in the queue");
        }
    }
    // In each lane (thread t's hooks with one x-key), first messages come
    // in commit order: thread t committed hook i after hook i - 1.
    let ordered = in_order.iter().map(|(id, b)| (id.as_str(), b.as_slice()));
    assert_eq!(
        assert_lanes_first_in_commit_order(ordered, KEYS),
        2 * KEYS,
        "every lane delivered"
    );
    eprintln!(
        "{} acknowledged ({claimed} through the claim check); {} and {} messages received",
        acked.len(),
        queued.len(),
        in_order.len()
    );
}

/// Messages SQS says `queue_url` holds.
fn messages_in(moto: &Moto, queue_url: &str) -> u64 {
    let request = json!({"QueueUrl": queue_url, "AttributeNames": ["ApproximateNumberOfMessages"]});
    let attributes = moto.call("GetQueueAttributes", request);
    attributes["Attributes"]["ApproximateNumberOfMessages"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Every message in `queue_url`, in the order received (and deleted,
/// as a FIFO queue gives a group's next message only then) until none is
/// left: each hook's id and body, read from its message or from the claim
/// it names, checked against the `sha256` its message carries.
fn received(moto: &Moto, queue_url: &str) -> Vec<(String, Vec<u8>)> {
    let mut received = Vec::new();
    loop {
        let messages = moto.receive(queue_url);
        if messages.is_empty() {
            return received;
        }
        let handles: Vec<Value> = (0..messages.len())
            .map(|n| json!({"Id": n.to_string(), "ReceiptHandle": messages[n]["ReceiptHandle"]}))
            .collect();
        for message in messages {
            let envelope: Value = serde_json::from_str(message["Body"].as_str().unwrap()).unwrap();
            let body = match envelope["body_base64"].as_str() {
                Some(inline) => base64::engine::general_purpose::STANDARD
                    .decode(inline)
                    .unwrap(),
                None => redeem(moto, envelope["claim"].as_str().unwrap()),
            };
            assert_eq!(
                hex::encode(Sha256::digest(&body)),
                envelope["sha256"].as_str().unwrap(),
                "{envelope}"
            );
            received.push((envelope["id"].as_str().unwrap().to_string(), body));
        }
        let request = json!({"QueueUrl": queue_url, "Entries": handles});
        moto.call("DeleteMessageBatch", request);
    }
}

/// The body a claim (`urn:goad:claim:v1:<tenant>:<sha256>`) names, from the bucket.
fn redeem(moto: &Moto, claim: &str) -> Vec<u8> {
    let name = claim.strip_prefix("urn:goad:claim:v1:").unwrap();
    let (status, body) = moto.s3("GET", &format!("/claims/{}", name.replace(':', "/")));
    assert_eq!(status, 200, "claim {claim} in the bucket");
    body
}
