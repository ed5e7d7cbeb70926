//! goad's messages on SQS queues: FIFO and standard queues, message groups
//! and deduplication ids, batches, retries of a missing queue, and what is
//! refused before sending.

use super::*;

/// Scenario 37: a hook reaches a FIFO queue as goad's message, with its
/// attributes, the group `<tenant>/<source>` and the hook id as the
/// deduplication id. Scenario 24: a body under the sink's threshold is
/// carried inline, and nothing is checked in to the claim check.
#[test]
fn a_hook_reaches_a_fifo_queue_as_goads_message() {
    let moto = Moto::start();
    let queue_url = moto.create_queue("hooks.fifo");
    let dir = tempfile::tempdir().unwrap();
    let config = stripe_to(dir.path(), sqs_sink(&queue_url));
    let claim_dir = config.claim_dir();
    let engine = Engine::open(config).unwrap();
    let hook = NewHook {
        content_type: Some("application/json".into()),
        dedupe_key: Some("evt_1".into()),
        headers: vec![
            ("x-stripe-event".into(), "charge.succeeded".into()),
            ("authorization".into(), "never forwarded".into()),
        ],
        ..NewHook::new("stripe", r#"{"amount":100}"#)
    };
    let id = engine.commit(hook).unwrap();
    engine.tick().unwrap();
    assert_eq!(engine.stats()[0].core.delivered, 1);

    let messages = moto.receive(&queue_url);
    assert_eq!(messages.len(), 1, "{messages:?}");
    let message = &messages[0];
    let body: Value = serde_json::from_str(message["Body"].as_str().unwrap()).unwrap();
    assert_eq!(body["v"], 1);
    assert_eq!(body["id"], id.as_str());
    assert_eq!(
        (body["source_id"].clone(), body["tenant_id"].clone()),
        ("stripe".into(), "acme".into())
    );
    assert_eq!(body["content_type"], "application/json");
    assert_eq!(
        (body["size"].clone(), body["dedupe_key"].clone()),
        (14.into(), "evt_1".into())
    );
    assert_eq!(body["replay_id"], Value::Null);
    assert_eq!(body["idempotency_key"], "acme:stripe:evt_1");
    assert_eq!(
        body["headers"],
        json!({"x-stripe-event": "charge.succeeded"})
    );
    let inline = base64::engine::general_purpose::STANDARD
        .decode(body["body_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(inline, br#"{"amount":100}"#);
    assert_eq!(body["claim"], Value::Null);
    let claims = std::fs::read_dir(&claim_dir).map_or(0, |d| d.count());
    assert_eq!(claims, 0, "nothing checked in");
    assert_eq!(body["sha256"].as_str().unwrap().len(), 64);
    for (name, value) in [
        ("goad_id", id.as_str()),
        ("goad_source_id", "stripe"),
        ("goad_tenant_id", "acme"),
        ("goad_message_version", "1"),
        ("goad_idempotency_key", "acme:stripe:evt_1"),
        ("content_type", "application/json"),
        ("goad_dedupe_key", "evt_1"),
    ] {
        assert_eq!(
            string_attribute(message, name).as_deref(),
            Some(value),
            "{name}"
        );
    }
    assert_eq!(message["Attributes"]["MessageGroupId"], "acme/stripe");
    assert_eq!(message["Attributes"]["MessageDeduplicationId"], id.as_str());
}

/// Scenario 39: a standard queue gets no group and no deduplication id.
/// A hook whose dedupe key is empty has none (and SQS's attribute values
/// may not be empty): its idempotency key is its id.
#[test]
fn a_standard_queue_gets_neither_group_nor_deduplication_id() {
    let moto = Moto::start();
    let queue_url = moto.create_queue("hooks");
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(stripe_to(dir.path(), sqs_sink(&queue_url))).unwrap();
    let hook = NewHook {
        dedupe_key: Some(String::new()),
        ..NewHook::new("stripe", "x")
    };
    let id = engine.commit(hook).unwrap();
    engine.tick().unwrap();
    let messages = moto.receive(&queue_url);
    assert_eq!(messages.len(), 1, "{:?}", dead(&engine));
    for name in ["goad_id", "goad_idempotency_key"] {
        assert_eq!(
            string_attribute(&messages[0], name).as_deref(),
            Some(id.as_str())
        );
    }
    assert_eq!(messages[0]["Attributes"]["MessageGroupId"], Value::Null);
    assert_eq!(
        messages[0]["Attributes"]["MessageDeduplicationId"],
        Value::Null
    );
    assert_eq!(string_attribute(&messages[0], "goad_dedupe_key"), None);
}

/// Scenario 43: a queue that does not exist is a transient failure (it may
/// be created): the row is retried until its attempts run out.
#[test]
fn a_queue_that_does_not_exist_is_retried_until_the_attempts_run_out() {
    let moto = Moto::start();
    let missing = format!("{}/123456789012/nope", moto.url);
    let dir = tempfile::tempdir().unwrap();
    let row = dead_letter_of_one_hook(stripe_to(dir.path(), sqs_sink(&missing)), 3);
    assert_eq!(row.record.attempts, 3, "transient: every attempt spent");
    let reason = row.record.error.as_deref().unwrap();
    assert!(
        reason.contains("SQS error QueueDoesNotExist (HTTP status 400)"),
        "{reason}"
    );
}

/// A backlog goes in batches: 25 rows dead-lettered while their queue did
/// not exist are replayed once it does, come due at once, and go as
/// `SendMessageBatch`es of 10, 10 and 5 that moto takes: every hook
/// arrives, once.
#[test]
fn a_replayed_backlog_reaches_the_queue_in_batches() {
    let moto = Moto::start();
    let queue_url = format!("{}/123456789012/later", moto.url);
    let dir = tempfile::tempdir().unwrap();
    let mut c = stripe_to(dir.path(), sqs_sink(&queue_url));
    c.retry.max_attempts = 1;
    let engine = Engine::open(c).unwrap();
    let mut ids = commit_refused(&engine, "stripe", 25);
    assert_eq!(moto.create_queue("later"), queue_url);
    moto.start_recording();
    replay_until_delivered(&engine, 25);
    let mut arrived = Vec::new();
    while arrived.len() < 25 {
        let messages = moto.receive(&queue_url);
        assert!(!messages.is_empty(), "only {} arrived", arrived.len());
        arrived.extend(
            messages
                .iter()
                .map(|m| string_attribute(m, "goad_id").unwrap()),
        );
    }
    ids.sort();
    arrived.sort();
    assert_eq!(arrived, ids);
    assert_eq!(moto.recorded_batch_sizes(), [5, 10, 10]);
}

/// What a loopback SQS stand-in does with each message of a
/// `SendMessageBatch`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Successful, with the MD5 of the message body it got.
    Stored,
    /// Successful, with an MD5 of zeros.
    WrongMd5,
    /// Failed: `InvalidParameterValue`.
    Invalid,
    /// Successful, and then 64 KiB of spaces: longer than any answer of
    /// SQS's.
    Oversized,
}

fn sqs_reply(r: &Received, answer: Answer) -> Reply {
    let request: Value = serde_json::from_slice(&r.body).unwrap();
    let (mut successful, mut failed) = (Vec::new(), Vec::new());
    for entry in request["Entries"].as_array().unwrap() {
        let id = entry["Id"].clone();
        let message_body = entry["MessageBody"].as_str().unwrap();
        let md5 = hex::encode(Md5::digest(message_body.as_bytes()));
        match answer {
            Answer::Stored | Answer::Oversized => {
                successful.push(json!({"Id": id, "MessageId": "m", "MD5OfMessageBody": md5}))
            }
            Answer::WrongMd5 => successful
                .push(json!({"Id": id, "MessageId": "m", "MD5OfMessageBody": "0".repeat(32)})),
            Answer::Invalid => failed.push(json!({
                "Id": id, "SenderFault": true, "Code": "InvalidParameterValue", "Message": "bad"
            })),
        }
    }
    let mut body = json!({"Successful": successful, "Failed": failed}).to_string();
    if answer == Answer::Oversized {
        body.push_str(&" ".repeat(64 * 1024));
    }
    Reply::status(200)
        .header("content-type", "application/x-amz-json-1.0")
        .with_body(body)
}

/// Scenarios 38, 41, 42, 44: the request is a signed `SendMessageBatch`
/// (the session token sent and signed); an MD5 that is not the body's is
/// retried; an invalid parameter is permanent; replayed, the row's message
/// names its replay and gets a deduplication id of its own.
#[test]
fn send_message_batch_is_signed_answers_are_checked_and_a_replay_gets_its_own_dedup_id() {
    let answer = Arc::new(parking_lot::Mutex::new(Answer::WrongMd5));
    let current = answer.clone();
    let receiver = Receiver::start(move |r| sqs_reply(r, *current.lock())).unwrap();
    let queue_url = receiver.url("/123456789012/hooks.fifo");
    let dir = tempfile::tempdir().unwrap();
    let mut c = stripe_to(dir.path(), sqs_sink(&queue_url));
    c.retry.max_attempts = 10;
    let engine = Engine::open(c).unwrap();
    let id = engine.commit(NewHook::new("stripe", "x")).unwrap();
    // A wrong MD5 is retried; then the queue refuses the message for good.
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
    *answer.lock() = Answer::Invalid;
    wait_until("the row dead-lettered", Duration::from_secs(20), || {
        engine.tick().unwrap();
        dead(&engine).len() == 1
    });
    let row = &dead(&engine)[0];
    let reason = row.record.error.as_deref().unwrap();
    assert_eq!(
        reason,
        "sink sqs: permanent: SQS refused the message: InvalidParameterValue: bad"
    );
    let first = &receiver.received()[0];
    assert_eq!(first.path, "/");
    assert_eq!(
        first.header("x-amz-target"),
        Some("AmazonSQS.SendMessageBatch")
    );
    assert_eq!(
        first.header("content-type"),
        Some("application/x-amz-json-1.0")
    );
    assert_eq!(first.header("x-amz-security-token"), Some("session-token"));
    let authorization = first.header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
            && authorization.contains("/us-east-1/sqs/aws4_request, SignedHeaders=")
            && authorization.contains("x-amz-security-token")
            && authorization.contains("x-amz-target"),
        "{authorization}"
    );
    assert!(first.header("x-amz-date").is_some());

    *answer.lock() = Answer::Stored;
    let replayed = engine.replay(&DeadFilter::default()).unwrap();
    assert_eq!(replayed.moved, 1);
    engine.tick().unwrap();
    assert!(dead(&engine).is_empty());
    let last = receiver.received().pop().unwrap();
    let request: Value = serde_json::from_slice(&last.body).unwrap();
    let entries = request["Entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let request = &entries[0];
    let replay_id = replayed.replay_id.as_str();
    assert_eq!(
        request["MessageDeduplicationId"],
        format!("{id}:replay:{replay_id}").as_str()
    );
    assert_eq!(request["MessageGroupId"], "acme/stripe");
    assert_eq!(
        request["MessageAttributes"]["goad_replay_id"]["StringValue"],
        replay_id
    );
    let message: Value = serde_json::from_str(request["MessageBody"].as_str().unwrap()).unwrap();
    assert_eq!(message["replay_id"], replay_id);
}

/// Scenario 39: a sink's `message_group_id` is every message's group, on a
/// standard queue (still without a deduplication id) and on a FIFO queue
/// (with one).
#[test]
fn a_configured_message_group_is_sent_on_standard_and_fifo_queues() {
    let receiver = Receiver::start(|r| sqs_reply(r, Answer::Stored)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let grouped = |queue: &str| SinkConfig {
        message_group_id: Some("payments".into()),
        ..sqs_sink(&receiver.url(queue))
    };
    let mut c = stripe_to(dir.path(), grouped("/1/standard"));
    c.sources
        .push(source("fifo", "acme", vec![grouped("/1/hooks.fifo")]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    engine.tick().unwrap();
    let id = engine.commit(NewHook::new("fifo", "y")).unwrap();
    engine.tick().unwrap();
    let entries: Vec<Value> = receiver
        .received()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["Entries"][0].clone())
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["MessageGroupId"], "payments");
    assert_eq!(entries[0]["MessageDeduplicationId"], Value::Null);
    assert_eq!(entries[1]["MessageGroupId"], "payments");
    assert_eq!(entries[1]["MessageDeduplicationId"], id.as_str());
}

/// Scenario 45: a message over `max_message_bytes` is dead-lettered at
/// once and nothing is sent; missing credentials are retried (the
/// environment may be fixed) and nothing is sent either.
#[test]
fn a_message_too_large_or_missing_credentials_send_nothing() {
    let sent = Arc::new(AtomicBool::new(false));
    let flag = sent.clone();
    let receiver = Receiver::start(move |r| {
        flag.store(true, Ordering::SeqCst);
        sqs_reply(r, Answer::Stored)
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let small = SinkConfig {
        max_message_bytes: Some(100),
        ..sqs_sink(&receiver.url("/1/q"))
    };
    let unset = SinkConfig {
        access_key_id_env: Some("GOAD_TEST_SQS_UNSET".into()),
        ..sqs_sink(&receiver.url("/1/q"))
    };
    let reasons = dead_within_two_attempts(dir.path(), small, unset);
    assert_too_large_and_missing_credentials(
        &reasons,
        "no AWS credentials: GOAD_TEST_SQS_UNSET is not set",
    );
    assert!(!sent.load(Ordering::SeqCst), "nothing was sent");
}

/// An answer longer than any of SQS's is not read on: its messages are
/// retried (whether the queue took them is not known), and the failure
/// says why.
#[test]
fn an_answer_longer_than_any_of_sqss_is_a_failure_that_says_so() {
    let receiver = Receiver::start(|r| sqs_reply(r, Answer::Oversized)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = stripe_to(dir.path(), sqs_sink(&receiver.url("/1/q")));
    let row = dead_letter_of_one_hook(c, 2).record;
    assert_eq!(
        (row.attempts, row.error.as_deref()),
        (
            2,
            Some(
                "sink sqs: the answer (HTTP status 200) could not be read: \
                 it is over 64 KiB, longer than any answer of a queue's"
            )
        )
    );
    assert_eq!(receiver.received().len(), 2);
}

/// A queue slower than the attempt's deadline, though within the sink's
/// timeout in each phase of the request: the request is cut off by the
/// deadline, and its worker is not left stuck.
#[test]
fn a_queue_slower_than_the_attempts_deadline_is_cut_off_by_it() {
    raw::assert_a_dripping_receiver_is_cut_off_by_the_deadline(
        |url, _| sqs_sink(&format!("{url}/123456789012/hooks")),
        raw::ANSWER_CUT_OFF,
    );
}
