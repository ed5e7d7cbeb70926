//! The SQS sink against a real SQS-compatible server (moto's, from PyPI,
//! `python3 -m moto.server`, started per test on a free port) and, for answers moto does not give,
//! against a loopback receiver that speaks SQS's JSON protocol. Ports the
//! reference's SQS scenarios (37–45) in goad's words.

mod common;

use base64::Engine as _;
use common::*;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::store::DeadFilter;
use goad::{Config, Engine, NewHook, SinkConfig};
use md5::{Digest, Md5};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The environment variables the test sinks read their credentials from
/// (set once, the same in every test).
const KEY_ENV: &str = "GOAD_TEST_SQS_KEY_ID";
const SECRET_ENV: &str = "GOAD_TEST_SQS_SECRET";
const TOKEN_ENV: &str = "GOAD_TEST_SQS_TOKEN";

fn set_credentials() {
    std::env::set_var(KEY_ENV, "AKIDEXAMPLE");
    std::env::set_var(SECRET_ENV, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
    std::env::set_var(TOKEN_ENV, "session-token");
}

/// An SQS sink for `queue_url` signing for us-east-1 with the test credentials.
fn sqs_sink(queue_url: &str) -> SinkConfig {
    set_credentials();
    SinkConfig {
        region: Some("us-east-1".into()),
        access_key_id_env: Some(KEY_ENV.into()),
        secret_access_key_env: Some(SECRET_ENV.into()),
        session_token_env: Some(TOKEN_ENV.into()),
        ..SinkConfig::sqs(queue_url)
    }
}

/// Source `stripe` of tenant `acme` delivering to `sink`.
fn stripe_to(dir: &std::path::Path, sink: SinkConfig) -> Config {
    let mut c = config(dir);
    c.sources.push(source("stripe", "acme", vec![sink]));
    c
}

/// A moto server on a free loopback port, killed when dropped.
struct Moto {
    child: Child,
    url: String,
    /// Where it writes what it records (its own file: moto's default is
    /// one in the working directory).
    _recording: tempfile::TempDir,
}

impl Moto {
    fn start() -> Moto {
        Moto::start_checking_signatures_after(None)
    }

    /// With `Some(n)`, moto takes the first `n` requests unsigned and then
    /// checks every request's signature against its IAM users' keys.
    fn start_checking_signatures_after(unsigned_requests: Option<u32>) -> Moto {
        // One start at a time: a port picked free and released must be
        // taken by this test's server before another test picks one.
        static STARTING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        let _starting = STARTING.lock();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new("python3");
        command
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Tests point goad's credential sources at AWS variables (a
        // profile, a role); moto's own boto must not follow them.
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("AWS_")) {
            command.env_remove(name);
        }
        let recording = tempfile::tempdir().unwrap();
        command.env("MOTO_RECORDER_FILEPATH", recording.path().join("recording"));
        if let Some(n) = unsigned_requests {
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", n.to_string());
        }
        let child = command
            .spawn()
            .expect("python3 runs (tools/test installs moto: pip install 'moto[server]')");
        let mut moto = Moto {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _recording: recording,
        };
        wait_until("moto's server listens", Duration::from_secs(30), || {
            let exited = moto.child.try_wait().unwrap();
            assert!(
                exited.is_none(),
                "moto's server exited ({exited:?}): tools/test installs it (pip install 'moto[server]')"
            );
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        moto
    }

    /// One SQS JSON-protocol call (moto does not check signatures).
    fn call(&self, target: &str, body: Value) -> Value {
        let auth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0";
        let request = ureq::http::Request::post(format!("{}/", self.url))
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", format!("AmazonSQS.{target}"))
            .header("authorization", auth)
            .body(body.to_string())
            .unwrap();
        let (status, answer) = self.run(request);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        assert_eq!(status, 200, "{target}: {answer}");
        serde_json::from_str(&answer).unwrap()
    }

    /// A request to moto: the status and the body.
    fn run(&self, request: ureq::http::Request<impl ureq::AsSendBody>) -> (u16, Vec<u8>) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent.run(request).unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_vec().unwrap())
    }

    fn create_queue(&self, name: &str) -> String {
        let mut request = json!({"QueueName": name});
        if name.ends_with(".fifo") {
            request["Attributes"] = json!({"FifoQueue": "true"});
        }
        let created = self.call("CreateQueue", request);
        created["QueueUrl"].as_str().unwrap().to_string()
    }

    /// An IAM request (query protocol); the answer's XML.
    fn iam(&self, params: &str) -> String {
        let auth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0";
        let request = ureq::http::Request::post(format!("{}/", self.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("authorization", auth)
            .body(format!("{params}&Version=2010-05-08"))
            .unwrap();
        let (status, answer) = self.run(request);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        assert_eq!(status, 200, "{params}: {answer}");
        answer
    }

    /// An S3 request (moto does not check signatures; the scope names the service).
    fn s3(&self, method: &str, path: &str) -> (u16, Vec<u8>) {
        let auth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0";
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url))
            .header("authorization", auth)
            .body(Vec::new())
            .unwrap();
        self.run(request)
    }

    /// From now on moto records every request it gets.
    fn start_recording(&self) {
        let url = format!("{}/moto-api/recorder/start-recording", self.url);
        let request = ureq::http::Request::post(url).body(Vec::new()).unwrap();
        assert_eq!(self.run(request).0, 200);
    }

    /// Every request recorded since `start_recording`, in order.
    fn recorded(&self) -> Vec<Value> {
        let url = format!("{}/moto-api/recorder/download-recording", self.url);
        let request = ureq::http::Request::get(url).body(Vec::new()).unwrap();
        let (status, recording) = self.run(request);
        assert_eq!(status, 200);
        // One JSON document per request, not always a line each.
        serde_json::Deserializer::from_slice(&recording)
            .into_iter::<Value>()
            .map(Result::unwrap)
            .collect()
    }

    /// The `SendMessageBatch` requests recorded.
    fn recorded_sends(&self) -> Vec<Value> {
        let mut sends = self.recorded();
        sends.retain(|r| r["headers"]["X-Amz-Target"] == "AmazonSQS.SendMessageBatch");
        sends
    }

    /// The number of entries of each `SendMessageBatch` recorded, sorted.
    fn recorded_batch_sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = self
            .recorded_sends()
            .iter()
            .map(|r| {
                let request: Value = serde_json::from_slice(&recorded_body(r)).unwrap();
                request["Entries"].as_array().unwrap().len()
            })
            .collect();
        sizes.sort();
        sizes
    }

    /// The messages waiting in a queue, with every attribute.
    fn receive(&self, queue_url: &str) -> Vec<Value> {
        let request = json!({
            "QueueUrl": queue_url,
            "MaxNumberOfMessages": 10,
            "MessageAttributeNames": ["All"],
            "MessageSystemAttributeNames": ["All"],
            "AttributeNames": ["All"],
        });
        let received = self.call("ReceiveMessage", request);
        received["Messages"].as_array().cloned().unwrap_or_default()
    }
}

/// The body of a request moto recorded.
fn recorded_body(request: &Value) -> Vec<u8> {
    let body = request["body"].as_str().unwrap_or_default();
    if request["body_encoded"] == true {
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    } else {
        body.as_bytes().to_vec()
    }
}

/// The path of a request moto recorded.
fn recorded_path(request: &Value) -> String {
    let url: ureq::http::Uri = request["url"].as_str().unwrap().parse().unwrap();
    url.path().to_string()
}

/// The access key id a recorded request was signed with, and its session token.
fn signed_with(request: &Value) -> (String, String) {
    let authorization = request["headers"]["Authorization"].as_str().unwrap();
    let credential = authorization.split("Credential=").nth(1).unwrap();
    let key_id = credential.split('/').next().unwrap().to_string();
    let token = request["headers"]["X-Amz-Security-Token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (key_id, token)
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn string_attribute(message: &Value, name: &str) -> Option<String> {
    message["MessageAttributes"][name]["StringValue"]
        .as_str()
        .map(str::to_string)
}

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
    assert_eq!(engine.stats()[0].delivered, 1);

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
#[test]
fn a_standard_queue_gets_neither_group_nor_deduplication_id() {
    let moto = Moto::start();
    let queue_url = moto.create_queue("hooks");
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(stripe_to(dir.path(), sqs_sink(&queue_url))).unwrap();
    let id = engine.commit(NewHook::new("stripe", "x")).unwrap();
    engine.tick().unwrap();
    let messages = moto.receive(&queue_url);
    assert_eq!(messages.len(), 1);
    assert_eq!(
        string_attribute(&messages[0], "goad_id").as_deref(),
        Some(id.as_str())
    );
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
    let mut c = stripe_to(dir.path(), sqs_sink(&missing));
    c.retry.max_attempts = 3;
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    wait_until("the row dead-lettered", Duration::from_secs(20), || {
        engine.tick().unwrap();
        dead(&engine).len() == 1
    });
    let row = &dead(&engine)[0];
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
}

fn sqs_reply(r: &Received, answer: Answer) -> Reply {
    let request: Value = serde_json::from_slice(&r.body).unwrap();
    let (mut successful, mut failed) = (Vec::new(), Vec::new());
    for entry in request["Entries"].as_array().unwrap() {
        let id = entry["Id"].clone();
        let message_body = entry["MessageBody"].as_str().unwrap();
        let md5 = hex::encode(Md5::digest(message_body.as_bytes()));
        match answer {
            Answer::Stored => {
                successful.push(json!({"Id": id, "MessageId": "m", "MD5OfMessageBody": md5}))
            }
            Answer::WrongMd5 => successful
                .push(json!({"Id": id, "MessageId": "m", "MD5OfMessageBody": "0".repeat(32)})),
            Answer::Invalid => failed.push(json!({
                "Id": id, "SenderFault": true, "Code": "InvalidParameterValue", "Message": "bad"
            })),
        }
    }
    let body = json!({"Successful": successful, "Failed": failed});
    Reply::status(200)
        .header("content-type", "application/x-amz-json-1.0")
        .with_body(body.to_string())
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

/// Source `stripe` of tenant `acme` with two sinks sending to `queue_url`
/// that take 100 bytes inline.
fn two_claiming_sinks(dir: &std::path::Path, queue_url: &str) -> Config {
    let claimed = SinkConfig {
        inline_max_bytes: Some(100),
        ..sqs_sink(queue_url)
    };
    let mut c = config(dir);
    c.sources
        .push(source("stripe", "acme", vec![claimed.clone(), claimed]));
    c
}

/// Commits `body` and delivers it; the envelopes waiting in `queue_url`.
fn envelopes_of(engine: &Engine, moto: &Moto, queue_url: &str, body: &[u8]) -> Vec<Value> {
    engine
        .commit(NewHook::new("stripe", body.to_vec()))
        .unwrap();
    engine.tick().unwrap();
    moto.receive(queue_url)
        .iter()
        .map(|m| serde_json::from_str(m["Body"].as_str().unwrap()).unwrap())
        .collect()
}

/// Scenario 22: a body over the sink's `inline_max_bytes` is checked in to
/// the claim check once, whichever row checks it in first; both messages
/// carry its reference instead of the body, and the engine redeems it.
#[test]
fn a_large_body_is_checked_in_once_and_messages_carry_its_claim() {
    let moto = Moto::start();
    let queue_url = moto.create_queue("large");
    let dir = tempfile::tempdir().unwrap();
    let c = two_claiming_sinks(dir.path(), &queue_url);
    let engine = Engine::open(c.clone()).unwrap();
    let body = vec![b'z'; 1_000];
    let envelopes = envelopes_of(&engine, &moto, &queue_url, &body);
    assert_eq!(envelopes.len(), 2);
    let sha256 = envelopes[0]["sha256"].as_str().unwrap().to_string();
    for envelope in &envelopes {
        assert_eq!(
            envelope["claim"],
            format!("urn:goad:claim:v1:acme:{sha256}").as_str()
        );
        assert!(envelope.get("body_base64").is_none());
        assert_eq!(envelope["size"], 1_000);
    }
    let stored = std::fs::read_dir(c.claim_dir().join("acme"))
        .unwrap()
        .count();
    assert_eq!(stored, 1, "one claim for both rows");
    assert_eq!(engine.redeem_claim("acme", &sha256).unwrap(), Some(body));
}

/// With `claim_check.s3_bucket`, claims go to an S3-compatible bucket
/// (moto's): one signed upload for both rows of a hook, under the prefix,
/// named by both messages' claim, and redeemed by the engine from there.
#[test]
fn claims_can_go_to_an_s3_bucket() {
    let moto = Moto::start();
    let queue_url = moto.create_queue("large-s3");
    assert_eq!(moto.s3("PUT", "/claims").0, 200, "bucket created");
    let dir = tempfile::tempdir().unwrap();
    let mut c = two_claiming_sinks(dir.path(), &queue_url);
    c.claim_check = s3_claims(&moto, "claims", [KEY_ENV, SECRET_ENV, TOKEN_ENV]);
    c.claim_check.s3_prefix = Some("goad/".into());
    let engine = Engine::open(c.clone()).unwrap();
    let body = vec![b'q'; 1_000];
    let envelopes = envelopes_of(&engine, &moto, &queue_url, &body);
    assert_eq!(envelopes.len(), 2);
    let claims: Vec<&str> = envelopes
        .iter()
        .map(|e| e["claim"].as_str().unwrap())
        .collect();
    assert_eq!(claims[0], claims[1]);
    let sha256 = claims[0].rsplit(':').next().unwrap();
    let (status, stored) = moto.s3("GET", &format!("/claims/goad/acme/{sha256}"));
    assert_eq!((status, stored), (200, body.clone()));
    assert_eq!(engine.redeem_claim("acme", sha256).unwrap(), Some(body));
    assert_eq!(
        engine.redeem_claim("acme", &"0".repeat(64)).unwrap(),
        None,
        "a missing object"
    );
    assert!(!c.claim_dir().exists(), "nothing in the local directory");
}

/// A claim check in `bucket` of moto's S3, with the credentials in the
/// variables `[key id, secret, session token]`.
fn s3_claims(moto: &Moto, bucket: &str, credentials: [&str; 3]) -> goad::config::ClaimCheckConfig {
    let [key, secret, token] = credentials.map(|var| Some(var.to_string()));
    goad::config::ClaimCheckConfig {
        s3_bucket: Some(bucket.into()),
        s3_region: Some("us-east-1".into()),
        s3_endpoint: Some(moto.url.clone()),
        access_key_id_env: key,
        secret_access_key_env: secret,
        session_token_env: token,
        ..Default::default()
    }
}

/// The text of the first `<tag>` element of `xml`.
fn xml_text<'a>(xml: &'a str, tag: &str) -> &'a str {
    let start = xml.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
    let end = xml[start..].find(&format!("</{tag}>")).unwrap();
    &xml[start..start + end]
}

/// Scenario 41: moto checks every signature against the keys of its IAM
/// users. goad's signed `SendMessage` and the claim check's `PUT` and `GET`
/// are accepted; the same requests signed with a wrong secret are refused
/// (`SignatureDoesNotMatch`, retried until the attempts run out).
#[test]
fn moto_accepts_goads_signatures_and_refuses_a_wrong_secret() {
    // Five requests go unsigned: the user, its policy, its key, the queue
    // and the bucket.
    let moto = Moto::start_checking_signatures_after(Some(5));
    moto.iam("Action=CreateUser&UserName=goad");
    let everything =
        r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    let policy: String = everything.bytes().map(|b| format!("%{b:02X}")).collect();
    moto.iam(&format!(
        "Action=PutUserPolicy&UserName=goad&PolicyName=all&PolicyDocument={policy}"
    ));
    let key = moto.iam("Action=CreateAccessKey&UserName=goad");
    std::env::set_var("GOAD_TEST_SIGNED_KEY", xml_text(&key, "AccessKeyId"));
    std::env::set_var("GOAD_TEST_SIGNED_SECRET", xml_text(&key, "SecretAccessKey"));
    std::env::set_var("GOAD_TEST_SIGNED_WRONG", "not-the-secret");
    let queue_url = moto.create_queue("signed.fifo");
    assert_eq!(moto.s3("PUT", "/signed").0, 200);

    let signed = |secret_env: &str| SinkConfig {
        inline_max_bytes: Some(100),
        access_key_id_env: Some("GOAD_TEST_SIGNED_KEY".into()),
        secret_access_key_env: Some(secret_env.into()),
        session_token_env: Some("GOAD_TEST_SIGNED_NO_TOKEN".into()),
        ..sqs_sink(&queue_url)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 2;
    c.sources.push(source(
        "good",
        "acme",
        vec![signed("GOAD_TEST_SIGNED_SECRET")],
    ));
    c.sources.push(source(
        "bad",
        "acme",
        vec![signed("GOAD_TEST_SIGNED_WRONG")],
    ));
    c.claim_check = s3_claims(
        &moto,
        "signed",
        [
            "GOAD_TEST_SIGNED_KEY",
            "GOAD_TEST_SIGNED_SECRET",
            "GOAD_TEST_SIGNED_NO_TOKEN",
        ],
    );
    let engine = Engine::open(c).unwrap();
    let body = vec![b's'; 1_000];
    engine.commit(NewHook::new("good", body.clone())).unwrap();
    engine.commit(NewHook::new("bad", "x")).unwrap();
    wait_until("one delivered, one dead", Duration::from_secs(20), || {
        engine.tick().unwrap();
        engine.stats()[0].delivered == 1 && dead(&engine).len() == 1
    });
    let reasons = dead_attempts_and_reasons(&engine);
    assert_eq!(reasons[0].0, 2, "{reasons:?}");
    assert!(
        reasons[0].1.contains("SignatureDoesNotMatch"),
        "{reasons:?}"
    );
    let sha256 = hex::encode(sha2::Sha256::digest(&body));
    assert_eq!(engine.redeem_claim("acme", &sha256).unwrap(), Some(body));
}

/// Source `stripe` sending to `queue_url` with credentials from `source`.
fn fetching_credentials(dir: &std::path::Path, queue_url: &str, source: &str) -> Config {
    let sink = SinkConfig {
        credentials: Some(source.into()),
        region: Some("us-east-1".into()),
        ..SinkConfig::sqs(queue_url)
    };
    stripe_to(dir, sink)
}

/// Creates queue `name`, records moto's requests from then on, and sends
/// one hook through an SQS sink whose credentials come from `source`;
/// returns the queue's URL.
fn send_one_with_credentials(
    moto: &Moto,
    name: &str,
    dir: &std::path::Path,
    source: &str,
) -> String {
    let queue_url = moto.create_queue(name);
    moto.start_recording();
    let engine = Engine::open(fetching_credentials(dir, &queue_url, source)).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(moto.receive(&queue_url).len(), 1);
    queue_url
}

/// `credentials = "instance"`: the sink signs with the instance role's
/// credentials from the instance metadata service (moto's, at
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT`), fetched once (IMDSv2: a session
/// token, the role's name, its credentials) and kept while fresh.
#[test]
fn instance_credentials_come_from_the_metadata_service_once_while_fresh() {
    let moto = Moto::start();
    std::env::set_var("AWS_EC2_METADATA_SERVICE_ENDPOINT", &moto.url);
    let queue_url = moto.create_queue("from-instance");
    moto.start_recording();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(fetching_credentials(dir.path(), &queue_url, "instance")).unwrap();
    for body in ["a", "b"] {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    }
    assert_eq!(moto.receive(&queue_url).len(), 2);
    let metadata: Vec<String> = moto
        .recorded()
        .iter()
        .map(recorded_path)
        .filter(|path| path.starts_with("/latest/"))
        .collect();
    assert_eq!(
        metadata,
        [
            "/latest/api/token",
            "/latest/meta-data/iam/security-credentials/",
            "/latest/meta-data/iam/security-credentials/default-role"
        ]
    );
    let sends = moto.recorded_sends();
    assert_eq!(sends.len(), 2);
    for send in &sends {
        let signed = signed_with(send);
        assert_eq!(signed, ("test-key".into(), "test-session-token".into()));
    }
}

/// Tests that point `AWS_ENDPOINT_URL_STS` at their moto take turns: the
/// variable is the process's.
static STS_ENDPOINT_VARIABLE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `role_arn`: an IAM user that may only assume a role writes to a queue
/// and a bucket through that role. moto checks the signatures and the
/// policies: the user's own `SendMessage` is refused (`AccessDenied`); the
/// sink and the claim bucket each assume the role once (with the external
/// id and session name configured, signed with the user's key) and sign
/// every request with the role's temporary credentials; a sink whose user
/// secret is wrong cannot assume the role, and its row is dead-lettered
/// saying so.
#[test]
fn a_role_to_assume_signs_the_queues_and_the_buckets_requests() {
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    // Seven requests go unsigned: the user, its policy, its key, the
    // role, the role's policy, the queue and the bucket.
    let moto = Moto::start_checking_signatures_after(Some(7));
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    let encoded = |json: &str| -> String { json.bytes().map(|b| format!("%{b:02X}")).collect() };
    let allow = |action: &str| {
        encoded(&format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":"{action}","Resource":"*"}}]}}"#
        ))
    };
    moto.iam("Action=CreateUser&UserName=hooks");
    moto.iam(&format!(
        "Action=PutUserPolicy&UserName=hooks&PolicyName=assume&PolicyDocument={}",
        allow("sts:AssumeRole")
    ));
    let key = moto.iam("Action=CreateAccessKey&UserName=hooks");
    let key_id = xml_text(&key, "AccessKeyId").to_string();
    std::env::set_var("GOAD_TEST_ROLE_KEY", &key_id);
    std::env::set_var("GOAD_TEST_ROLE_SECRET", xml_text(&key, "SecretAccessKey"));
    std::env::set_var("GOAD_TEST_ROLE_WRONG", "not-the-secret");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}"#;
    moto.iam(&format!(
        "Action=CreateRole&RoleName=writer&AssumeRolePolicyDocument={}",
        encoded(trust)
    ));
    moto.iam(&format!(
        "Action=PutRolePolicy&RoleName=writer&PolicyName=write&PolicyDocument={}",
        allow("*")
    ));
    let queue_url = moto.create_queue("cross");
    assert_eq!(moto.s3("PUT", "/cross-claims").0, 200);
    moto.start_recording();

    let role_arn = Some("arn:aws:iam::123456789012:role/writer".to_string());
    let sink = |secret_env: &str, role_arn: &Option<String>| SinkConfig {
        inline_max_bytes: Some(100),
        access_key_id_env: Some("GOAD_TEST_ROLE_KEY".into()),
        secret_access_key_env: Some(secret_env.into()),
        session_token_env: Some("GOAD_TEST_ROLE_NO_TOKEN".into()),
        role_arn: role_arn.clone(),
        external_id: role_arn.as_ref().map(|_| "ext-1".into()),
        role_session_name: role_arn.as_ref().map(|_| "goad-test".into()),
        ..sqs_sink(&queue_url)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 2;
    let sources = [
        ("assumed", sink("GOAD_TEST_ROLE_SECRET", &role_arn)),
        ("direct", sink("GOAD_TEST_ROLE_SECRET", &None)),
        ("wrong", sink("GOAD_TEST_ROLE_WRONG", &role_arn)),
    ];
    for (id, sink) in sources {
        c.sources.push(source(id, "acme", vec![sink]));
    }
    c.claim_check = s3_claims(
        &moto,
        "cross-claims",
        [
            "GOAD_TEST_ROLE_KEY",
            "GOAD_TEST_ROLE_SECRET",
            "GOAD_TEST_ROLE_NO_TOKEN",
        ],
    );
    c.claim_check.role_arn = role_arn.clone();
    let engine = Engine::open(c).unwrap();
    let large = vec![b'r'; 1_000];
    for body in [b"a".to_vec(), b"b".to_vec(), large.clone()] {
        engine.commit(NewHook::new("assumed", body)).unwrap();
    }
    engine.commit(NewHook::new("direct", "d")).unwrap();
    engine.commit(NewHook::new("wrong", "w")).unwrap();
    wait_until("3 delivered, 2 dead", Duration::from_secs(30), || {
        engine.tick().unwrap();
        engine.stats()[0].delivered == 3 && dead(&engine).len() == 2
    });

    let mut reasons: Vec<(String, String)> = dead(&engine)
        .into_iter()
        .map(|r| (r.source_id, r.record.error.unwrap_or_default()))
        .collect();
    reasons.sort();
    assert_eq!(reasons[0].0, "direct");
    assert!(
        reasons[0].1.contains("AccessDenied") && reasons[0].1.contains("sqs:SendMessageBatch"),
        "{reasons:?}"
    );
    assert_eq!(reasons[1].0, "wrong");
    assert!(
        reasons[1].1.starts_with(
            "sink sqs: cannot assume role arn:aws:iam::123456789012:role/writer: HTTP status 403"
        ) && reasons[1].1.contains("SignatureDoesNotMatch"),
        "{reasons:?}"
    );

    let recorded = moto.recorded();
    let assumed: Vec<(String, (String, String))> = recorded
        .iter()
        .map(|r| (String::from_utf8(recorded_body(r)).unwrap(), r))
        .filter(|(body, _)| body.contains("Action=AssumeRole"))
        .map(|(body, r)| (body, signed_with(r)))
        .collect();
    // The sink and the bucket once each; the wrong secret once per attempt.
    assert_eq!(assumed.len(), 4, "{assumed:?}");
    for (body, (signer, token)) in &assumed {
        for part in [
            "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fwriter",
            "DurationSeconds=3600",
        ] {
            assert!(body.contains(part), "{part} in {body}");
        }
        assert_eq!((signer, token.as_str()), (&key_id, ""));
    }
    let with_sink_options = assumed
        .iter()
        .filter(|(body, _)| {
            body.contains("RoleSessionName=goad-test&") && body.ends_with("&ExternalId=ext-1")
        })
        .count();
    assert_eq!(
        with_sink_options, 3,
        "the bucket's session is goad's default"
    );
    assert!(assumed
        .iter()
        .any(|(body, _)| body.contains("RoleSessionName=goad&")));

    let role_signed = |r: &&Value| {
        let (signer, token) = signed_with(r);
        signer.starts_with("ASIA") && !token.is_empty()
    };
    let sends = moto.recorded_sends();
    let by_role = sends.iter().filter(role_signed).count();
    assert!(by_role >= 1, "{sends:?}");
    assert_eq!(sends.len() - by_role, 2, "the direct sink's two attempts");
    let puts: Vec<&Value> = recorded
        .iter()
        .filter(|r| r["method"] == "PUT" && recorded_path(r).starts_with("/cross-claims/"))
        .collect();
    assert_eq!(puts.len(), 1);
    assert!(role_signed(&puts[0]), "{:?}", puts[0]);
    let sha256 = hex::encode(sha2::Sha256::digest(&large));
    assert_eq!(engine.redeem_claim("acme", &sha256).unwrap(), Some(large));
}

/// `credentials = "web_identity"`: the service account's token (in
/// `AWS_WEB_IDENTITY_TOKEN_FILE`) is exchanged for `AWS_ROLE_ARN`'s
/// credentials by moto's STS (`AWS_ENDPOINT_URL_STS`), which the sink signs
/// with.
#[test]
fn web_identity_credentials_come_from_sts_for_the_service_accounts_token() {
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "eyJ.service-account.token\n").unwrap();
    std::env::set_var("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file);
    std::env::set_var("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/hooks");
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    send_one_with_credentials(&moto, "from-sts", &dir.path().join("data"), "web_identity");
    let recorded = moto.recorded();
    let assumed: Vec<String> = recorded
        .iter()
        .map(|r| String::from_utf8(recorded_body(r)).unwrap())
        .filter(|body| body.contains("Action=AssumeRoleWithWebIdentity"))
        .collect();
    assert_eq!(assumed.len(), 1, "{assumed:?}");
    for part in [
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fhooks",
        "RoleSessionName=goad",
        "WebIdentityToken=eyJ.service-account.token",
    ] {
        assert!(assumed[0].contains(part), "{part} in {}", assumed[0]);
    }
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert!(key_id.starts_with("ASIA") && !token.is_empty(), "{key_id}");
}

/// `credentials = "profile"`: the sink signs with the keys of the
/// `AWS_PROFILE` section of the shared credentials file
/// (`AWS_SHARED_CREDENTIALS_FILE`), session token included; a profile the
/// file lacks fails the attempt, naming the profile and the file.
#[test]
fn profile_credentials_come_from_the_shared_credentials_file() {
    let _profile = PROFILE_VARIABLES.lock();
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("config");
    std::env::set_var("AWS_CONFIG_FILE", &config_file);
    let file = dir.path().join("credentials");
    std::fs::write(
        &file,
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d\n\n\
         [hooks]\naws_access_key_id = AKIAHOOKS\naws_secret_access_key = h\n\
         aws_session_token = hooks-token\n",
    )
    .unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &file);
    std::env::set_var("AWS_PROFILE", "hooks");
    let queue_url =
        send_one_with_credentials(&moto, "from-profile", &dir.path().join("data"), "profile");
    let sends = moto.recorded_sends();
    assert_eq!(
        signed_with(&sends[0]),
        ("AKIAHOOKS".to_string(), "hooks-token".to_string())
    );

    assert_eq!(
        dead_reason_with_profile("missing", &dir.path().join("data2"), &queue_url),
        format!(
            "sink sqs: cannot get AWS credentials from the AWS profile: \
             no aws_access_key_id in profile [missing] of {} \
             nor a credential_process in [profile missing] of {}",
            file.display(),
            config_file.display()
        )
    );
}

/// The dead-letter reason of a hook sent with `profile`'s credentials,
/// its one attempt failed.
fn dead_reason_with_profile(profile: &str, dir: &std::path::Path, queue_url: &str) -> String {
    std::env::set_var("AWS_PROFILE", profile);
    let mut c = fetching_credentials(dir, queue_url, "profile");
    c.retry.max_attempts = 1;
    let engine = Engine::open(c).unwrap();
    commit_refused(&engine, "stripe", 1);
    let mut reasons = dead_attempts_and_reasons(&engine);
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, 1, "one attempt");
    reasons.remove(0).1
}

/// Tests that set `AWS_PROFILE` and the files it is read from take turns:
/// the variables are the process's.
static PROFILE_VARIABLES: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `credentials = "profile"` with a profile that has no keys in the
/// credentials file but a `credential_process` in the config file (as IAM
/// Roles Anywhere's signing helper is set up): the command runs once, and
/// its credentials, fresh until their `Expiration`, sign both hooks'
/// requests; a process that fails fails the attempt with its exit status
/// and what it wrote to its standard error.
#[test]
fn a_profiles_credential_process_gives_credentials_kept_until_they_expire() {
    let _profile = PROFILE_VARIABLES.lock();
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let helper = dir.path().join("helper.sh");
    std::fs::write(
        &helper,
        "echo run >> \"$1\"\n\
         printf '{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": \"s\", \
         \"SessionToken\": \"proc-token\", \"Expiration\": \"2099-01-01T00:00:00Z\"}'\n",
    )
    .unwrap();
    let failing = dir.path().join("failing.sh");
    std::fs::write(&failing, "echo the trust anchor is gone >&2\nexit 2\n").unwrap();
    let credentials_file = dir.path().join("credentials");
    std::fs::write(
        &credentials_file,
        "[default]\naws_access_key_id = AKIADEFAULT\n",
    )
    .unwrap();
    let config_file = dir.path().join("config");
    std::fs::write(
        &config_file,
        format!(
            "[default]\nregion = us-east-1\n\n[profile roles-anywhere]\n\
             credential_process = sh {} {}\n[profile broken]\ncredential_process = sh {}\n",
            helper.display(),
            runs.display(),
            failing.display()
        ),
    )
    .unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials_file);
    std::env::set_var("AWS_CONFIG_FILE", &config_file);
    std::env::set_var("AWS_PROFILE", "roles-anywhere");
    let queue_url = moto.create_queue("from-process");
    moto.start_recording();
    let engine = Engine::open(fetching_credentials(
        &dir.path().join("data"),
        &queue_url,
        "profile",
    ))
    .unwrap();
    for body in ["a", "b"] {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    }
    assert_eq!(moto.receive(&queue_url).len(), 2);
    let sends = moto.recorded_sends();
    assert_eq!(sends.len(), 2);
    for send in &sends {
        assert_eq!(signed_with(send), ("AKPROC".into(), "proc-token".into()));
    }
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n", "run once");
    engine.shutdown();

    assert_eq!(
        dead_reason_with_profile("broken", &dir.path().join("data2"), &queue_url),
        "sink sqs: cannot get AWS credentials from the AWS profile: \
         credential_process failed (exit status: 2): the trust anchor is gone"
    );
}

/// `credentials = "container"`: credentials come from the container
/// endpoint (`AWS_CONTAINER_CREDENTIALS_FULL_URI`) with the token of
/// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`; an endpoint that fails fails
/// the attempt (transient), naming it, and nothing is sent.
#[test]
fn container_credentials_come_from_the_endpoint_and_its_failure_fails_the_attempt() {
    let moto = Moto::start();
    let serving = Arc::new(AtomicBool::new(false));
    let on = serving.clone();
    let endpoint = Receiver::start(move |r| {
        if !on.load(Ordering::SeqCst) {
            return Reply::status(500).with_body("nope");
        }
        if r.header("authorization") != Some("task-token") {
            return Reply::status(401);
        }
        let document = json!({"AccessKeyId": "CONTAINERKEY", "SecretAccessKey": "s", "Token": "container-token"});
        Reply::status(200).with_body(document.to_string())
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "task-token\n").unwrap();
    std::env::set_var(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        endpoint.url("/v2/credentials"),
    );
    std::env::set_var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token_file);
    let queue_url = moto.create_queue("from-container");
    moto.start_recording();
    let mut c = fetching_credentials(&dir.path().join("data"), &queue_url, "container");
    c.retry.max_attempts = 1;
    let engine = Engine::open(c).unwrap();
    let reasons = {
        commit_refused(&engine, "stripe", 1);
        dead_attempts_and_reasons(&engine)
    };
    assert_eq!(
        reasons,
        [(
            1,
            "sink sqs: cannot get AWS credentials from the container credentials endpoint: \
             HTTP status 500: nope"
                .to_string()
        )]
    );
    assert!(moto.receive(&queue_url).is_empty(), "nothing was sent");
    serving.store(true, Ordering::SeqCst);
    replay_until_delivered(&engine, 1);
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert_eq!(
        (key_id.as_str(), token.as_str()),
        ("CONTAINERKEY", "container-token")
    );
    assert_eq!(endpoint.received()[1].path, "/v2/credentials");
}
