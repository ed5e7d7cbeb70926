//! The claim check under SQS: a large body checked in once, in a directory
//! or an S3 bucket, and messages that carry its claim.

use super::*;

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
    c.claim_check = s3_claims(&moto.url, "claims", [KEY_ENV, SECRET_ENV, TOKEN_ENV]);
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

/// A bucket that refuses a claim (here: it does not exist) fails only the
/// attempt of the hook whose body it is, as transient, naming S3's answer;
/// the small hook committed beside it (in its batch when both were due at
/// once) is delivered. Redeeming a claim from it is an error too.
#[test]
fn a_bucket_refusing_a_claim_fails_that_hooks_attempt_alone() {
    let moto = Moto::start();
    let queue_url = moto.create_queue("refused-claims");
    let dir = tempfile::tempdir().unwrap();
    let mut c = two_claiming_sinks(dir.path(), &queue_url);
    c.sources[0].sinks.truncate(1);
    c.claim_check = s3_claims(&moto.url, "missing", [KEY_ENV, SECRET_ENV, TOKEN_ENV]);
    c.retry.base_ms = 600_000;
    c.retry.max_ms = 600_000;
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "small")).unwrap();
    engine
        .commit(NewHook::new("stripe", vec![b'L'; 1_000]))
        .unwrap();
    engine.tick().unwrap();
    let sent = moto.receive(&queue_url);
    let bodies: Vec<&str> = sent.iter().map(|m| m["Body"].as_str().unwrap()).collect();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let envelope: Value = serde_json::from_str(bodies[0]).unwrap();
    assert_eq!(envelope["body_base64"], "c21hbGw=", "the small hook's");
    let pending: Vec<_> = (rows(&engine).into_iter())
        .map(|r| (r.record.status, r.record.attempts, r.record.error))
        .collect();
    let why = "cannot check the body in to the claim check: \
               S3 PUT answered HTTP status 404: NoSuchBucket: The specified bucket does not exist";
    assert_eq!(pending, [(goad::RowStatus::Pending, 1, Some(why.into()))]);
    // Redeeming from it is an error, not a claim that is not there (S3
    // answers both with 404).
    let redeemed = engine.redeem_claim("acme", &"0".repeat(64));
    assert_eq!(
        redeemed.unwrap_err().to_string(),
        "S3 GET answered HTTP status 404: NoSuchBucket: The specified bucket does not exist"
    );
}

/// A bucket slower than the attempt's deadline as it takes a claim: the
/// upload is cut off by the deadline, and its worker is not left stuck.
#[test]
fn a_bucket_slower_than_the_attempts_deadline_is_cut_off_by_it() {
    let cut_off = format!(
        "cannot check the body in to the claim check: {}",
        raw::CUT_OFF
    );
    raw::assert_a_dripping_receiver_is_cut_off_by_the_deadline(
        |url, c| {
            c.claim_check = s3_claims(url, "claims", [KEY_ENV, SECRET_ENV, TOKEN_ENV]);
            SinkConfig {
                inline_max_bytes: Some(16),
                ..sqs_sink(&format!("{url}/123456789012/hooks"))
            }
        },
        &cut_off,
    );
}
