//! Signed requests: Standard Webhooks signatures checked with an
//! independent HMAC and Ed25519 key, and AWS Signature Version 4 checked
//! with botocore's signer.

use super::*;
use hmac::{Hmac, KeyInit, Mac};

/// Standard Webhooks: one signature per secret, in order: `v1,` for a
/// shared secret, an HMAC-SHA256 of `id.timestamp.body` under the decoded
/// `whsec_` key (or the raw bytes), and `v1a,` for a `whsk_` private key,
/// an Ed25519 signature of the same bytes (RFC 8032's first test key here,
/// checked with its public key).
#[test]
fn the_signature_verifies_with_each_secret() {
    let b64 = base64::engine::general_purpose::STANDARD;
    let seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let public = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    std::env::set_var(
        "GOAD_TEST_SECRET_A",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    );
    std::env::set_var("GOAD_TEST_SECRET_B", "plain-secret");
    let private = format!("whsk_{}", b64.encode(hex::decode(seed).unwrap()));
    std::env::set_var("GOAD_TEST_SECRET_C", private);
    let (got, _e, _d) = deliver(provider_hook(), Reply::status(200), |s| {
        s.sinks[0].secret_env = Some(goad::config::OneOrMany::Many(vec![
            "GOAD_TEST_SECRET_A".into(),
            "GOAD_TEST_SECRET_B".into(),
            "GOAD_TEST_SECRET_C".into(),
        ]));
    });
    let r = &got[0];
    let signed = format!(
        "{}.{}.",
        r.header("webhook-id").unwrap(),
        r.header("webhook-timestamp").unwrap()
    );
    let expect = |key: &[u8]| {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        mac.update(signed.as_bytes());
        mac.update(&r.body);
        format!("v1,{}", b64.encode(mac.finalize().into_bytes()))
    };
    let key_a = b64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let header = r.header("webhook-signature").unwrap();
    let (symmetric, asymmetric) = header.rsplit_once(' ').unwrap();
    assert_eq!(
        symmetric,
        format!("{} {}", expect(&key_a), expect(b"plain-secret"))
    );
    let signature = b64
        .decode(asymmetric.strip_prefix("v1a,").unwrap())
        .unwrap();
    let public = hex::decode(public).unwrap();
    let public =
        aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ED25519, public);
    let content = [signed.as_bytes(), &r.body].concat();
    public
        .verify(&content, &signature)
        .expect("the private key's signature of id.timestamp.body");
}

/// A secret variable that is not set is a config error naming the key.
#[test]
fn a_missing_secret_variable_is_a_config_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http("http://127.0.0.1:9/");
    sink.secret_env = Some(goad::config::OneOrMany::One(
        "GOAD_TEST_UNSET_SECRET".into(),
    ));
    c.sources.push(source("s", "t", vec![sink]));
    let err = Engine::open(c.clone()).err().expect("refused").to_string();
    assert_eq!(err, "sources[0].sinks[0].secret_env must be the name of a set, non-empty environment variable, got \"GOAD_TEST_UNSET_SECRET\" (not set)");
    // An OAuth 2 client's secret likewise.
    let sink = &mut c.sources[0].sinks[0];
    sink.secret_env = None;
    sink.oauth2 = Some(goad::config::OAuth2Config::new(
        "https://auth.example.com/token",
        "c",
        "GOAD_TEST_UNSET_SECRET",
    ));
    let err = Engine::open(c).err().expect("refused").to_string();
    assert_eq!(err, "sources[0].sinks[0].oauth2.client_secret_env must be the name of a set, non-empty environment variable, got \"GOAD_TEST_UNSET_SECRET\" (not set)");
}

/// botocore's SigV4 signature of a request (`python3` with botocore, which
/// moto brings: `tools/test` installs it): AWS's own Python signer, an
/// implementation independent of goad's.
const BOTOCORE_SIGNATURE: &str = r#"
import base64, json, sys
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
d = json.load(sys.stdin)
request = AWSRequest(method=d["method"], url=d["url"], data=base64.b64decode(d["body"]), headers=d["headers"])
request.context["timestamp"] = d["headers"]["x-amz-date"]
auth = SigV4Auth(Credentials(d["key"], d["secret"], d["token"]), d["service"], d["region"])
print(auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request))
"#;

/// The credentials of `aws_signed`'s sink: its variables and their values.
const AWS_TEST_VARS: [(&str, &str); 3] = [
    ("GOAD_TEST_SIGV4_KEY_ID", "AKIDEXAMPLE"),
    (
        "GOAD_TEST_SIGV4_SECRET",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ),
    ("GOAD_TEST_SIGV4_SESSION", "session-token-1"),
];

/// Makes the source's sink sign for Lambda in eu-west-1 with
/// `AWS_TEST_VARS` (set here), its URL given a query.
fn aws_signed(s: &mut goad::config::SourceConfig) {
    (AWS_TEST_VARS.iter()).for_each(|(var, value)| std::env::set_var(var, value));
    let sink = &mut s.sinks[0];
    sink.url = Some(format!("{}?b=2&a=1", sink.url.as_ref().unwrap()));
    sink.aws_service = Some("lambda".into());
    sink.region = Some("eu-west-1".into());
    sink.access_key_id_env = Some(AWS_TEST_VARS[0].0.into());
    sink.secret_access_key_env = Some(AWS_TEST_VARS[1].0.into());
    sink.session_token_env = Some(AWS_TEST_VARS[2].0.into());
}

/// A hook whose content type is beyond ASCII cannot be signed as it would
/// be sent (AWS's signer takes visible ASCII): its row is dead-lettered at
/// once, naming the content type, and nothing is sent with a signature AWS
/// would refuse.
#[test]
fn an_aws_signed_sink_refuses_a_content_type_it_cannot_sign() {
    let hook = NewHook {
        content_type: Some("text/plain; title=Grüße".into()),
        ..provider_hook()
    };
    let (got, engine, _d) = deliver(hook, Reply::status(200), aws_signed);
    assert_eq!(got.len(), 0, "nothing sent");
    let dead: Vec<_> = (rows(&engine).into_iter())
        .map(|r| (r.record.status, r.record.attempts, r.record.error))
        .collect();
    let why = "sink http: permanent: cannot sign the request: \
               its content type is not ASCII, which AWS cannot sign: \"text/plain; title=Grüße\"";
    assert_eq!(dead, [(RowStatus::Dead, 1, Some(why.to_string()))]);
}

/// An HTTP sink with `aws_service` signs each request with AWS Signature
/// Version 4, as a Lambda function URL with `AWS_IAM` auth asks: the
/// credentials of its variables (the session token sent along), the
/// service and region in the scope, the host, content type and `x-amz-*`
/// headers signed, and the signature botocore computes for the same
/// request, query, body and time.
#[test]
fn an_aws_signed_sink_sends_the_signature_aws_computes() {
    let vars = AWS_TEST_VARS;
    let (got, engine, _d) = deliver(provider_hook(), Reply::status(200), aws_signed);
    assert_eq!(got.len(), 1);
    let sent = &got[0];
    assert_eq!(sent.header("x-amz-security-token"), Some("session-token-1"));
    let amz_date = sent.header("x-amz-date").unwrap();
    let authorization = sent.header("authorization").unwrap();
    let (scope, signature) = authorization.split_once(", Signature=").unwrap();
    assert_eq!(
        scope,
        format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/eu-west-1/lambda/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token",
            &amz_date[..8]
        )
    );
    let signed: serde_json::Map<String, serde_json::Value> =
        ["content-type", "x-amz-date", "x-amz-security-token"]
            .iter()
            .map(|name| (name.to_string(), sent.header(name).unwrap().into()))
            .collect();
    let host = sent.header("host").unwrap();
    let request = serde_json::json!({
        "method": sent.method, "url": format!("http://{host}{}", sent.path),
        "headers": signed, "body": base64::engine::general_purpose::STANDARD.encode(&sent.body),
        "key": vars[0].1, "secret": vars[1].1, "token": vars[2].1,
        "service": "lambda", "region": "eu-west-1",
    });
    let mut python = std::process::Command::new("python3")
        .args(["-c", BOTOCORE_SIGNATURE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let stdin = python.stdin.as_mut().unwrap();
    stdin.write_all(request.to_string().as_bytes()).unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "botocore signs (tools/test installs moto, which brings it)"
    );
    assert_eq!(signature, String::from_utf8(out.stdout).unwrap().trim());
    assert!(rows(&engine).is_empty(), "delivered");
}
