//! The Pub/Sub sink against a loopback server speaking Pub/Sub's publish
//! API (Google's emulator needs the Cloud SDK, which cannot be installed
//! here). Ports the reference's Pub/Sub scenarios (47–55) in goad's words.

mod common;

use base64::Engine as _;
use common::*;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::node::http::request::percent_decode;
use goad::store::DeadFilter;
use goad::{Config, Engine, NewHook, SinkConfig};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TOKEN_ENV: &str = "GOAD_TEST_PUBSUB_TOKEN";

/// How the stand-in answers a publish.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    Published,
    InvalidArgument,
}

fn pubsub_reply(answer: Answer, r: &Received) -> Reply {
    let refused = |status: &str, message: &str| {
        (
            400,
            json!({"error": {"code": 400, "message": message, "status": status}}),
        )
    };
    let (status, body) = match (answer, refusal(r)) {
        (Answer::InvalidArgument, _) => refused("INVALID_ARGUMENT", "bad"),
        (Answer::Published, Some((status, message))) => refused(status, &message),
        (Answer::Published, None) => {
            let ids: Vec<String> = (0..published(r).len()).map(|i| i.to_string()).collect();
            (200, json!({ "messageIds": ids }))
        }
    };
    Reply::status(status)
        .header("content-type", "application/json")
        .with_body(body.to_string())
}

/// Why Pub/Sub would refuse a publish, whole: messages whose ordering
/// keys differ, an attribute value or an ordering key over 1,024 bytes.
fn refusal(r: &Received) -> Option<(&'static str, String)> {
    let messages = published(r);
    let key = |message: &Value| message["orderingKey"].as_str().unwrap_or("").to_string();
    let keys: std::collections::BTreeSet<String> = messages.iter().map(|(m, _)| key(m)).collect();
    if keys.len() > 1 {
        let why = "In a single publish request, all messages must have no ordering key or they must all have the same ordering key.";
        return Some(("FAILED_PRECONDITION", why.into()));
    }
    let too_long = |m: &Value| {
        let values = m["attributes"].as_object().unwrap().values();
        values.map(|v| v.as_str().unwrap().len()).any(|n| n > 1024) || key(m).len() > 1024
    };
    messages
        .iter()
        .any(|(m, _)| too_long(m))
        .then(|| ("INVALID_ARGUMENT", "a value that is too long".into()))
}

/// A stand-in answering every publish with `answer` (switchable).
fn stand_in(answer: Answer) -> (Receiver, Arc<Mutex<Answer>>) {
    let current = Arc::new(Mutex::new(answer));
    let switch = current.clone();
    let receiver = Receiver::start(move |r| pubsub_reply(*current.lock(), r)).unwrap();
    (receiver, switch)
}

fn pubsub_sink(receiver: &Receiver) -> SinkConfig {
    pubsub_sink_at(&receiver.url(""))
}

fn pubsub_sink_at(endpoint: &str) -> SinkConfig {
    std::env::set_var(TOKEN_ENV, "tok");
    SinkConfig {
        endpoint: Some(endpoint.into()),
        token_env: Some(TOKEN_ENV.into()),
        ..SinkConfig::pubsub("p", "hooks")
    }
}

fn stripe_to(dir: &std::path::Path, sink: SinkConfig) -> Config {
    let mut c = config(dir);
    c.sources.push(source("stripe", "acme", vec![sink]));
    c
}

/// The messages of a publish request, each with its envelope decoded.
fn published(r: &Received) -> Vec<(Value, Value)> {
    let request: Value = serde_json::from_slice(&r.body).unwrap();
    let messages = request["messages"].as_array().unwrap();
    messages
        .iter()
        .map(|message| {
            let data = base64::engine::general_purpose::STANDARD
                .decode(message["data"].as_str().unwrap())
                .unwrap();
            (message.clone(), serde_json::from_slice(&data).unwrap())
        })
        .collect()
}

/// The `authorization` of every request `receiver` got, in order.
fn authorizations(receiver: &Receiver) -> Vec<Option<String>> {
    let requests = receiver.received();
    let header = |r: &Received| r.header("authorization").map(str::to_string);
    requests.iter().map(header).collect()
}

/// Every message of `requests`, in order.
fn all_published(requests: &[Received]) -> Vec<(Value, Value)> {
    requests.iter().flat_map(published).collect()
}

/// Scenarios 47, 51: one message is published to the topic's `:publish`
/// URL with the bearer token; its data is goad's envelope, its attributes
/// goad's six, with no ordering key. A sink without `token_env` sends no
/// authorization (the emulator).
#[test]
fn a_hook_is_published_as_goads_message_with_the_token() {
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let tokenless = SinkConfig {
        token_env: None,
        ..pubsub_sink(&receiver)
    };
    let mut c = stripe_to(dir.path(), pubsub_sink(&receiver));
    c.sources.push(source("emulated", "acme", vec![tokenless]));
    let engine = Engine::open(c).unwrap();
    let id = engine.commit(NewHook::new("stripe", "hello")).unwrap();
    engine.tick().unwrap();
    engine.commit(NewHook::new("emulated", "x")).unwrap();
    engine.tick().unwrap();
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    let first = &received[0];
    assert_eq!(first.path, "/v1/projects/p/topics/hooks:publish");
    assert_eq!(first.header("authorization"), Some("Bearer tok"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    let (message, envelope) = published(first).pop().unwrap();
    assert_eq!(published(first).len(), 1);
    assert_eq!(envelope["v"], 1);
    assert_eq!(envelope["id"], id.as_str());
    assert_eq!(envelope["body_base64"], "aGVsbG8=");
    let attributes = message["attributes"].as_object().unwrap();
    let names: Vec<&str> = attributes.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "content_type",
            "goad_id",
            "goad_idempotency_key",
            "goad_message_version",
            "goad_source_id",
            "goad_tenant_id"
        ]
    );
    assert_eq!(attributes["goad_id"], id.as_str());
    assert!(message.get("orderingKey").is_none());
    assert_eq!(received[1].header("authorization"), None);
}

/// Scenarios 48, 49: an ordered sink keyed by a header publishes that
/// header's value as the ordering key (a hook without it, none); a replayed
/// row names its replay.
#[test]
fn an_ordered_sink_sends_its_lane_key_and_a_replay_names_itself() {
    let (receiver, answer) = stand_in(Answer::InvalidArgument);
    let dir = tempfile::tempdir().unwrap();
    let sink = ordered_by_customer(&receiver);
    let engine = Engine::open(stripe_to(dir.path(), sink)).unwrap();
    engine.commit(of_customer("cus_1", "a")).unwrap();
    engine.commit(NewHook::new("stripe", "b")).unwrap();
    engine.tick().unwrap();
    // INVALID_ARGUMENT is permanent: both dead after one attempt each.
    let dead = dead(&engine);
    assert_eq!(dead.len(), 2);
    assert!(dead.iter().all(|r| r.record.attempts == 1));
    let reason = dead[0].record.error.as_deref().unwrap();
    assert!(
        reason.contains("Pub/Sub error INVALID_ARGUMENT (HTTP status 400)"),
        "{reason}"
    );
    // (Two lanes, in either order: a publish each, as their keys differ.)
    let first_publishes = receiver.received();
    let mut keys: Vec<Option<String>> = all_published(&first_publishes)
        .iter()
        .map(|(message, _)| message["orderingKey"].as_str().map(str::to_string))
        .collect();
    keys.sort();
    assert_eq!(keys, [None, Some("cus_1".to_string())]);

    *answer.lock() = Answer::Published;
    let replayed = engine.replay(&DeadFilter::default()).unwrap();
    assert_eq!(replayed.moved, 2);
    engine.tick().unwrap();
    let replays = all_published(&receiver.received()[first_publishes.len()..]);
    assert_eq!(replays.len(), 2);
    for (message, envelope) in &replays {
        assert_eq!(
            message["attributes"]["goad_replay_id"],
            replayed.replay_id.as_str()
        );
        assert_eq!(envelope["replay_id"], replayed.replay_id.as_str());
    }
}

/// Commits `hooks` to an engine on `sink` while the sink is paused, then
/// resumes it, so one of its batches takes them all at once; waits until
/// every hook but one is delivered and returns the one dead row's attempts
/// and reason.
fn one_dead_of(dir: &std::path::Path, sink: SinkConfig, hooks: Vec<NewHook>) -> (u32, String) {
    let mut c = stripe_to(
        dir,
        SinkConfig {
            paused: true,
            ..sink
        },
    );
    let engine = Engine::open(c.clone()).unwrap();
    for hook in hooks {
        engine.commit(hook).unwrap();
    }
    c.sources[0].sinks[0].paused = false;
    engine.reconfigure(&c).unwrap();
    wait_until("all delivered but one", Duration::from_secs(20), || {
        engine.tick().unwrap();
        engine.hook_count().unwrap() == 1
    });
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    let reason = dead[0].record.error.clone().unwrap();
    (dead[0].record.attempts, reason)
}

/// A Pub/Sub sink on `receiver`, ordered by the `x-customer` header.
fn ordered_by_customer(receiver: &Receiver) -> SinkConfig {
    SinkConfig {
        ordered: true,
        ordering_key: Some("header:x-customer".into()),
        ..pubsub_sink(receiver)
    }
}

/// A hook with `x-customer: customer` and `body`.
fn of_customer(customer: &str, body: &str) -> NewHook {
    NewHook {
        headers: vec![("x-customer".into(), customer.into())],
        ..NewHook::new("stripe", body)
    }
}

/// Pub/Sub refuses a publish whose messages' ordering keys differ, so an
/// ordered sink keyed by a header does not batch: five lanes' backlog
/// (and a hook without the header) waiting at once is published a message
/// a request, each lane in commit order, every hook delivered. A lane key
/// over Pub/Sub's 1,024 bytes is not sent: that hook alone is dead at its
/// first attempt, naming it.
#[test]
fn an_ordered_sink_publishes_one_ordering_key_a_request() {
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let sink = ordered_by_customer(&receiver);
    let customers = ["c1", "c2", "c3", "c4", "c5"];
    let mut hooks: Vec<NewHook> = (1..=2)
        .flat_map(|n| customers.map(|c| of_customer(c, &format!("{c}-{n}"))))
        .collect();
    hooks.push(NewHook::new("stripe", "keyless"));
    let long_key = "k".repeat(1_025);
    hooks.push(of_customer(&long_key, "long"));
    assert_eq!(
        one_dead_of(dir.path(), sink, hooks),
        (
            1,
            "sink pubsub: permanent: not published: the ordering key is 1025 bytes, over the 1024 Pub/Sub takes".into()
        )
    );
    let requests = receiver.received();
    assert!(
        requests.iter().all(|r| published(r).len() == 1),
        "a message a request"
    );
    let bodies: Vec<String> = all_published(&requests)
        .iter()
        .map(|(_, envelope)| {
            let body = envelope["body_base64"].as_str().unwrap();
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(body)
                    .unwrap(),
            )
            .unwrap()
        })
        .collect();
    assert_eq!(bodies.len(), 11, "{bodies:?}");
    for c in customers {
        let at = |n: u32| {
            bodies
                .iter()
                .position(|b| *b == format!("{c}-{n}"))
                .unwrap()
        };
        assert!(at(1) < at(2), "{c} in commit order: {bodies:?}");
    }
    assert!(bodies.contains(&"keyless".to_string()));
}

/// A message Pub/Sub would refuse (here its idempotency key, built on a
/// dedupe key of 1,100 bytes, is over 1,024 bytes as an attribute) would
/// fail its whole publish: it is not sent and is dead at once, alone, and
/// the hooks batched with it are published.
#[test]
fn a_message_with_an_attribute_pubsub_refuses_fails_alone() {
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let long = NewHook {
        dedupe_key: Some("e".repeat(1_100)),
        ..NewHook::new("stripe", "long")
    };
    let hooks = vec![
        NewHook::new("stripe", "a"),
        long,
        NewHook::new("stripe", "b"),
    ];
    assert_eq!(
        one_dead_of(dir.path(), pubsub_sink(&receiver), hooks),
        (
            1,
            "sink pubsub: permanent: not published: attribute goad_idempotency_key is 1112 bytes, over the 1024 Pub/Sub takes".into()
        )
    );
    let requests = receiver.received();
    assert_eq!(requests.len(), 1, "one publish");
    assert_eq!(published(&requests[0]).len(), 2);
}

/// Scenarios 50, 55: a token variable that is not set (or holds a line
/// break), or a message over `max_message_bytes`, sends nothing; the first
/// is retried (transient), the second dead-lettered at once.
#[test]
fn a_missing_token_or_a_message_too_large_publishes_nothing() {
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let unset = SinkConfig {
        token_env: Some("GOAD_TEST_PUBSUB_UNSET".into()),
        ..pubsub_sink(&receiver)
    };
    let small = SinkConfig {
        max_message_bytes: Some(100),
        ..pubsub_sink(&receiver)
    };
    let reasons = dead_within_two_attempts(dir.path(), unset, small.clone());
    assert_too_large_and_missing_credentials(
        &reasons,
        "no Pub/Sub access token: GOAD_TEST_PUBSUB_UNSET is not set",
    );
    // A token no header can carry is no token either.
    std::env::set_var("GOAD_TEST_PUBSUB_BROKEN", "tok\nx-injected: 1");
    let broken = SinkConfig {
        token_env: Some("GOAD_TEST_PUBSUB_BROKEN".into()),
        ..pubsub_sink(&receiver)
    };
    let dir = tempfile::tempdir().unwrap();
    let reasons = dead_within_two_attempts(dir.path(), broken, small);
    assert_too_large_and_missing_credentials(
        &reasons,
        "cannot get a Pub/Sub access token from $GOAD_TEST_PUBSUB_BROKEN: the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry",
    );
    assert_eq!(receiver.count(), 0, "nothing was published");
}

/// A batch is one publish: 25 rows refused (INVALID_ARGUMENT, permanent),
/// replayed once the topic takes them, come due at once and are published
/// in one request of 25 messages, each hook once, and all delivered on its
/// one answer.
#[test]
fn a_replayed_backlog_is_published_in_one_request() {
    let (receiver, answer) = stand_in(Answer::InvalidArgument);
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(stripe_to(dir.path(), pubsub_sink(&receiver))).unwrap();
    let mut ids = commit_refused(&engine, "stripe", 25);
    let refused = receiver.received().len();
    *answer.lock() = Answer::Published;
    replay_until_delivered(&engine, 25);
    let publishes = &receiver.received()[refused..];
    assert_eq!(publishes.len(), 1, "one publish");
    let mut published: Vec<String> = all_published(publishes)
        .iter()
        .map(|(_, envelope)| envelope["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    published.sort();
    assert_eq!(published, ids);
}

/// `credentials = "metadata"`: the token of the workload's service account
/// comes from the metadata server (a stand-in at `GCE_METADATA_HOST` that
/// answers only `Metadata-Flavor: Google`), fetched once while it is fresh,
/// for a sink a reconfiguration adds too; a server that fails fails the
/// attempt, naming it, and nothing is published.
#[test]
fn a_metadata_token_is_fetched_once_while_fresh_and_its_failure_fails_the_attempt() {
    let serving = Arc::new(AtomicBool::new(false));
    let on = serving.clone();
    let metadata = Receiver::start(move |r| {
        if !on.load(Ordering::SeqCst) {
            return Reply::status(503).with_body("not yet");
        }
        if r.header("metadata-flavor") != Some("Google") {
            return Reply::status(403);
        }
        let token =
            json!({"access_token": "ya29.token", "expires_in": 3599, "token_type": "Bearer"});
        Reply::status(200).with_body(token.to_string())
    })
    .unwrap();
    let host = metadata.url("");
    std::env::set_var("GCE_METADATA_HOST", host.trim_start_matches("http://"));
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let sink = SinkConfig {
        token_env: None,
        credentials: Some("metadata".into()),
        ..pubsub_sink(&receiver)
    };
    let mut c = stripe_to(dir.path(), sink.clone());
    c.retry.max_attempts = 1;
    let engine = Engine::open(c.clone()).unwrap();
    commit_refused(&engine, "stripe", 1);
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            "sink pubsub: cannot get a Pub/Sub access token from the metadata server: \
             HTTP status 503: not yet"
                .to_string()
        )]
    );
    assert_eq!(receiver.received().len(), 0, "nothing was published");
    serving.store(true, Ordering::SeqCst);
    replay_until_delivered(&engine, 1);
    engine.commit(NewHook::new("stripe", "second")).unwrap();
    engine.tick().unwrap();
    c.sources.push(source("added", "acme", vec![sink]));
    engine.reconfigure(&c).unwrap();
    engine.commit(NewHook::new("added", "third")).unwrap();
    engine.tick().unwrap();
    assert_eq!(
        authorizations(&receiver),
        vec![Some("Bearer ya29.token".to_string()); 3]
    );
    let asked = metadata.received();
    assert_eq!(asked.len(), 2, "the failure, then one token for all three");
    assert_eq!(
        asked[1].path,
        "/computeMetadata/v1/instance/service-accounts/default/token"
    );
}

/// A form body's fields, decoded.
fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    let fields = std::str::from_utf8(body).unwrap().split('&');
    fields
        .map(|field| {
            let (name, value) = field.split_once('=').unwrap();
            (percent_decode(name), percent_decode(value))
        })
        .collect()
}

/// `credentials = "service_account"`: the key file `GOOGLE_APPLICATION_CREDENTIALS`
/// names is read when the engine opens (a missing one is a config error
/// naming the key and the file); the token endpoint the file names gets
/// one JWT bearer grant, signed with the file's key, for both publishes.
#[test]
fn a_service_account_key_is_exchanged_for_a_token_once_while_fresh() {
    let _file = CREDENTIALS_FILE_VARIABLE.lock();
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("key.json");
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", &key_path);
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let sink = SinkConfig {
        token_env: None,
        credentials: Some("service_account".into()),
        ..pubsub_sink(&receiver)
    };
    let c = stripe_to(dir.path(), sink);
    let refused = Engine::open(c.clone()).err().expect("no key file");
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].credentials must be \"service_account\" only with a usable \
             key file at GOOGLE_APPLICATION_CREDENTIALS (cannot read {}: No such file or \
             directory (os error 2)), got \"service_account\"",
            key_path.display()
        )
    );

    let token_endpoint = Receiver::start(|_| {
        let token = json!({"access_token": "ya29.sa", "expires_in": 3599, "token_type": "Bearer"});
        Reply::status(200).with_body(token.to_string())
    })
    .unwrap();
    let token_uri = token_endpoint.url("/token");
    let key_file = service_account_key_file(&token_uri);
    std::fs::write(&key_path, key_file.to_string()).unwrap();
    let engine = Engine::open(c.clone()).unwrap();
    let publish = |body: &str| {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    };
    publish("first");
    publish("second");
    assert_eq!(
        authorizations(&receiver),
        vec![Some("Bearer ya29.sa".to_string()); 2]
    );

    let asked = token_endpoint.received();
    assert_eq!(asked.len(), 1, "one token for both publishes");
    assert_eq!(asked[0].path, "/token");
    assert_eq!(
        asked[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let fields = form_fields(&asked[0].body);
    assert_eq!(fields[0].0, "grant_type");
    assert_eq!(fields[0].1, "urn:ietf:params:oauth:grant-type:jwt-bearer");
    assert_eq!(fields[1].0, "assertion");
    let parts: Vec<&str> = fields[1].1.split('.').collect();
    let decoded = |part: &str| -> Value {
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap();
        serde_json::from_slice(&json).unwrap()
    };
    assert_eq!(
        decoded(parts[0]),
        json!({"alg": "RS256", "typ": "JWT", "kid": "key-1"})
    );
    let claims = decoded(parts[1]);
    assert_eq!(claims["iss"], "goad@p.iam.gserviceaccount.com");
    assert_eq!(claims["scope"], "https://www.googleapis.com/auth/pubsub");
    assert_eq!(claims["aud"], token_uri.as_str());
    let issued_s = claims["iat"].as_u64().unwrap();
    assert_eq!(claims["exp"].as_u64().unwrap(), issued_s + 3600);
    let pem = key_file["private_key"].as_str().unwrap();
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(der)
        .unwrap();
    let key = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
    let public = aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
        aws_lc_rs::signature::KeyPair::public_key(&key).as_ref(),
    );
    let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(parts[2])
        .unwrap();
    let signed = format!("{}.{}", parts[0], parts[1]);
    public
        .verify(signed.as_bytes(), &signature)
        .expect("signed with the key file's key");

    // A reconfiguration keeps the sink, and its token, while the key file
    // is the same; a new key file builds the sink anew, which asks again.
    engine.reconfigure(&c).unwrap();
    publish("third");
    assert_eq!(token_endpoint.received().len(), 1);
    let mut rotated = key_file.clone();
    rotated["private_key_id"] = json!("key-2");
    std::fs::write(&key_path, rotated.to_string()).unwrap();
    engine.reconfigure(&c).unwrap();
    publish("fourth");
    let asked = token_endpoint.received();
    assert_eq!(asked.len(), 2);
    let assertion = &form_fields(&asked[1].body)[1].1;
    assert_eq!(
        decoded(assertion.split('.').next().unwrap())["kid"],
        "key-2"
    );
}

/// `credentials = "authorized_user"` (what `gcloud auth
/// application-default login` writes): without
/// `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's file under `CLOUDSDK_CONFIG`
/// is read when the engine opens (a missing one is a config error naming
/// it); its refresh token gets one token from the endpoint the file names,
/// which both publishes carry with the file's quota project.
#[test]
fn a_users_refresh_token_is_exchanged_once_while_fresh_and_names_its_quota_project() {
    let _file = CREDENTIALS_FILE_VARIABLE.lock();
    std::env::remove_var("GOOGLE_APPLICATION_CREDENTIALS");
    let gcloud = tempfile::tempdir().unwrap();
    std::env::set_var("CLOUDSDK_CONFIG", gcloud.path());
    let adc = gcloud.path().join("application_default_credentials.json");
    let (receiver, _) = stand_in(Answer::Published);
    let dir = tempfile::tempdir().unwrap();
    let sink = SinkConfig {
        token_env: None,
        credentials: Some("authorized_user".into()),
        ..pubsub_sink(&receiver)
    };
    let c = stripe_to(dir.path(), sink);
    let refused = Engine::open(c.clone()).err().expect("no credentials file");
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].credentials must be \"authorized_user\" only with a usable \
             authorized_user file at GOOGLE_APPLICATION_CREDENTIALS or gcloud's application \
             default credentials (cannot read {}: No such file or directory (os error 2)), \
             got \"authorized_user\"",
            adc.display()
        )
    );

    let token_endpoint = Receiver::start(|_| {
        let token =
            json!({"access_token": "ya29.user", "expires_in": 3599, "token_type": "Bearer"});
        Reply::status(200).with_body(token.to_string())
    })
    .unwrap();
    let user = json!({
        "type": "authorized_user",
        "client_id": "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "refresh_token": "1//0g-refresh",
        "quota_project_id": "billed-project",
        "token_uri": token_endpoint.url("/token"),
    });
    std::fs::write(&adc, user.to_string()).unwrap();
    let engine = Engine::open(c).unwrap();
    for body in ["first", "second"] {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    }
    std::env::remove_var("CLOUDSDK_CONFIG");
    assert_eq!(
        authorizations(&receiver),
        vec![Some("Bearer ya29.user".to_string()); 2]
    );
    let projects: Vec<_> = (receiver.received().iter())
        .map(|r| r.header("x-goog-user-project").map(str::to_string))
        .collect();
    assert_eq!(projects, vec![Some("billed-project".to_string()); 2]);
    let asked = token_endpoint.received();
    assert_eq!(asked.len(), 1, "one token for both publishes");
    assert_eq!(
        form_fields(&asked[0].body),
        [
            ("grant_type", "refresh_token"),
            ("client_id", user["client_id"].as_str().unwrap()),
            ("client_secret", "d-FL95Q19q7MQmFpd7hHD0Ty"),
            ("refresh_token", "1//0g-refresh"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

/// Tests that point `GOOGLE_APPLICATION_CREDENTIALS` at their file take
/// turns: the variable is the process's.
static CREDENTIALS_FILE_VARIABLE: Mutex<()> = Mutex::new(());

/// A stand-in for Google's STS and IAM credentials, and for a platform's
/// token endpoint (`/subject`, answering JSON when asked with `metadata:
/// true`): STS gives `sts-for-<subject token>`, IAM credentials
/// `ya29.as-<account>` when the bearer is an STS token, or an ID token
/// (see `id_token_for`).
fn google_stand_in() -> Receiver {
    Receiver::start(|r| {
        let answer = match r.path.as_str() {
            "/v1/token" => {
                let fields = form_fields(&r.body);
                let subject = &fields.iter().find(|(k, _)| k == "subject_token").unwrap().1;
                json!({"access_token": format!("sts-for-{subject}"), "expires_in": 3600,
                       "token_type": "Bearer",
                       "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
            }
            "/subject" if r.header("metadata") == Some("true") => {
                json!({"access_token": "platform-token", "expires_in": 600})
            }
            path => match (
                path.strip_prefix("/v1/projects/-/serviceAccounts/"),
                r.header("authorization"),
            ) {
                (Some(account), Some(bearer)) if bearer.starts_with("Bearer sts-for-") => {
                    match account.strip_suffix(":generateIdToken") {
                        Some(account) => json!({"token": id_token_for(account, &r.body)}),
                        None => {
                            let account = account.trim_end_matches(":generateAccessToken");
                            json!({"accessToken": format!("ya29.as-{account}"),
                                   "expireTime": "2099-01-01T00:00:00Z"})
                        }
                    }
                }
                _ => return Reply::status(403).with_body("{\"error\": \"denied\"}"),
            },
        };
        Reply::status(200)
            .header("content-type", "application/json")
            .with_body(answer.to_string())
    })
    .unwrap()
}

/// The workload identity pool provider the federation tests' files name.
const POOL_AUDIENCE: &str =
    "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/nodes/providers/aws";

/// An `external_account` configuration file in `dir` of the stand-in's
/// STS, reading the subject token as `source` says and impersonating
/// `account` if given; `GOOGLE_APPLICATION_CREDENTIALS` names it.
fn federation_file(
    google: &Receiver,
    dir: &std::path::Path,
    source: Value,
    account: Option<&str>,
) -> std::path::PathBuf {
    let mut file = json!({
        "type": "external_account",
        "audience": POOL_AUDIENCE,
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": google.url("/v1/token"),
        "credential_source": source,
    });
    if let Some(account) = account {
        let url = format!("/v1/projects/-/serviceAccounts/{account}:generateAccessToken");
        file["service_account_impersonation_url"] = google.url(&url).into();
    }
    let written = std::fs::read_dir(dir).unwrap().count();
    let path = dir.join(format!("wif-{written}.json"));
    std::fs::write(&path, file.to_string()).unwrap();
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", &path);
    path
}

/// The ID token the stand-in's IAM credentials give `account` for the
/// `generateIdToken` request `body`: unsigned, its claims the request's
/// audience, the account and an `exp` in 2100.
fn id_token_for(account: &str, body: &[u8]) -> String {
    let request: Value = serde_json::from_slice(body).unwrap();
    let claims = json!({"aud": request["audience"], "email": account, "exp": 4_102_444_800u64});
    let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("e30.{}.sig", url_safe.encode(claims.to_string()))
}

/// An HTTP sink's `google_id_token` with `credentials =
/// "external_account"`: the federated token asks IAM credentials'
/// `generateIdToken` of the impersonated service account for the sink's
/// audience (with its email), and that token, kept while fresh, goes with
/// both hooks: one exchange, one ID token. A configuration that
/// impersonates no service account is a config error saying why.
#[test]
fn a_federated_identity_gets_a_service_accounts_id_token() {
    let _file = CREDENTIALS_FILE_VARIABLE.lock();
    let google = google_stand_in();
    let files = tempfile::tempdir().unwrap();
    let subject_file = files.path().join("oidc-token");
    std::fs::write(&subject_file, "eyJ.platform.oidc\n").unwrap();
    let account = "caller@p.iam.gserviceaccount.com";
    let configuration = |impersonate: bool| {
        let source = json!({"file": subject_file});
        federation_file(
            &google,
            files.path(),
            source,
            impersonate.then_some(account),
        )
    };
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let audience = "https://hooks-abc-uc.a.run.app";
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.google_id_token = Some(goad::config::GoogleIdTokenConfig {
        audience: audience.into(),
        credentials: Some("external_account".into()),
    });
    let dir = tempfile::tempdir().unwrap();
    configuration(true);
    let engine = Engine::open(stripe_to(dir.path(), sink.clone())).unwrap();
    for body in ["first", "second"] {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    }
    engine.shutdown();
    let bearer = format!(
        "Bearer {}",
        id_token_for(
            account,
            json!({"audience": audience}).to_string().as_bytes()
        )
    );
    assert_eq!(authorizations(&receiver), vec![Some(bearer); 2]);
    let asked = google.received();
    let paths: Vec<&str> = asked.iter().map(|r| r.path.as_str()).collect();
    let generate = format!("/v1/projects/-/serviceAccounts/{account}:generateIdToken");
    assert_eq!(paths, ["/v1/token", generate.as_str()]);
    assert_eq!(
        asked[1].header("authorization"),
        Some("Bearer sts-for-eyJ.platform.oidc")
    );
    let request: Value = serde_json::from_slice(&asked[1].body).unwrap();
    assert_eq!(request, json!({"audience": audience, "includeEmail": true}));

    let unimpersonated = configuration(false);
    let dir = tempfile::tempdir().unwrap();
    let refused = Engine::open(stripe_to(dir.path(), sink)).err().unwrap();
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].google_id_token.credentials must be \"external_account\" only \
             with a usable external_account configuration at GOOGLE_APPLICATION_CREDENTIALS ({}: \
             it names no service_account_impersonation_url, and an ID token is a service \
             account's), got \"external_account\"",
            unimpersonated.display()
        )
    );
}

/// `credentials = "external_account"` (workload identity federation): the
/// configuration file `GOOGLE_APPLICATION_CREDENTIALS` names is read when
/// the engine opens. With a subject token in a file and impersonation, the
/// token is exchanged at STS (RFC 8693's fields, cloud-platform scope) and
/// the STS token asks IAM credentials for the service account's token of
/// Pub/Sub's scope, which both publishes carry: one exchange for both.
/// With a subject token from a URL (a JSON field, with the source's
/// headers) and no impersonation, the STS token itself is sent. A subject
/// token file that is gone fails the attempt, naming it; a source goad
/// cannot read is a config error naming the file and the source.
#[test]
fn a_federated_identity_is_exchanged_for_a_service_accounts_token_once_while_fresh() {
    let _file = CREDENTIALS_FILE_VARIABLE.lock();
    let google = google_stand_in();
    let files = tempfile::tempdir().unwrap();
    let subject_file = files.path().join("oidc-token");
    std::fs::write(&subject_file, "eyJ.platform.oidc\n").unwrap();
    let audience = POOL_AUDIENCE;
    let account = "goad@p.iam.gserviceaccount.com";
    let configuration = |source: Value, impersonate: bool| {
        federation_file(
            &google,
            files.path(),
            source,
            impersonate.then_some(account),
        )
    };
    let (receiver, _) = stand_in(Answer::Published);
    let sink = SinkConfig {
        token_env: None,
        credentials: Some("external_account".into()),
        ..pubsub_sink(&receiver)
    };
    let publish_two = |name: &str| {
        let dir = tempfile::tempdir().unwrap();
        let mut c = stripe_to(&dir.path().join(name), sink.clone());
        c.retry.max_attempts = 1;
        let engine = Engine::open(c).unwrap();
        for body in ["first", "second"] {
            engine.commit(NewHook::new("stripe", body)).unwrap();
            engine.tick().unwrap();
        }
        engine
    };

    configuration(json!({"file": subject_file}), true);
    publish_two("impersonated").shutdown();
    let bearer = format!("Bearer ya29.as-{account}");
    assert_eq!(authorizations(&receiver), vec![Some(bearer); 2]);
    let asked = google.received();
    assert_eq!(asked.len(), 2, "one exchange, one impersonation");
    assert_eq!(asked[0].path, "/v1/token");
    assert_eq!(
        form_fields(&asked[0].body),
        [
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange"
            ),
            ("audience", audience),
            ("scope", "https://www.googleapis.com/auth/cloud-platform"),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token"
            ),
            ("subject_token", "eyJ.platform.oidc"),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert_eq!(
        asked[1].path,
        format!("/v1/projects/-/serviceAccounts/{account}:generateAccessToken")
    );
    assert_eq!(
        asked[1].header("authorization"),
        Some("Bearer sts-for-eyJ.platform.oidc")
    );
    let request: Value = serde_json::from_slice(&asked[1].body).unwrap();
    assert_eq!(
        request,
        json!({"scope": ["https://www.googleapis.com/auth/pubsub"], "lifetime": "3600s"})
    );

    let url_source = json!({"url": google.url("/subject"), "headers": {"Metadata": "true"},
                            "format": {"type": "json", "subject_token_field_name": "access_token"}});
    configuration(url_source, false);
    publish_two("federated").shutdown();
    assert_eq!(
        authorizations(&receiver)[2..],
        [
            Some("Bearer sts-for-platform-token".to_string()),
            Some("Bearer sts-for-platform-token".to_string())
        ]
    );
    let asked = google.received();
    let paths: Vec<&str> = asked[2..].iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/subject", "/v1/token"]);

    configuration(json!({"file": files.path().join("gone")}), true);
    let engine = publish_two("gone");
    wait_until("both rows dead", Duration::from_secs(20), || {
        dead(&engine).len() == 2
    });
    let reasons = dead_attempts_and_reasons(&engine);
    assert_eq!(
        reasons[0].1,
        format!(
            "sink pubsub: cannot get a Pub/Sub access token from {} for {audience}: \
             cannot read the subject token {}: No such file or directory (os error 2)",
            google.url("/v1/token"),
            files.path().join("gone").display()
        )
    );
    engine.shutdown();

    let aws = configuration(
        json!({"environment_id": "aws1", "region_url": "http://x"}),
        false,
    );
    let dir = tempfile::tempdir().unwrap();
    let refused = Engine::open(stripe_to(dir.path(), sink.clone()))
        .err()
        .unwrap();
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].credentials must be \"external_account\" only with a usable \
             external_account configuration at GOOGLE_APPLICATION_CREDENTIALS ({}: its \
             credential_source has an environment_id of \"aws1\": goad reads a subject token \
             from a file or a url (text or json format)), got \"external_account\"",
            aws.display()
        )
    );
}

/// A Pub/Sub endpoint slower than the attempt's deadline, though within
/// the sink's timeout in each phase of the request: the request is cut
/// off by the deadline, and its worker is not left stuck.
#[test]
fn an_endpoint_slower_than_the_attempts_deadline_is_cut_off_by_it() {
    raw::assert_a_dripping_receiver_is_cut_off_by_the_deadline(
        |url, _| pubsub_sink_at(url),
        raw::ANSWER_CUT_OFF,
    );
}
