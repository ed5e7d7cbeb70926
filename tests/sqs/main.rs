//! The SQS sink against a real SQS-compatible server (moto's, from PyPI,
//! `python3 -m moto.server`, started per test on a free port) and, for answers moto does not give,
//! against a loopback receiver that speaks SQS's JSON protocol. Ports the
//! reference's SQS scenarios (37–45) in goad's words.

#[path = "../common/mod.rs"]
mod common;

mod claims;
mod crash;
mod credentials;
mod endpoints;
mod messages;

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

/// The dead letter of a hook committed to source `stripe` of an engine on
/// `c` whose row ran out of `max_attempts` attempts (or failed for good).
fn dead_letter_of_one_hook(mut c: Config, max_attempts: u32) -> goad::RowView {
    c.retry.max_attempts = max_attempts;
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    wait_until("the row dead-lettered", Duration::from_secs(20), || {
        engine.tick().unwrap();
        dead(&engine).len() == 1
    });
    dead(&engine).remove(0)
}

/// A moto server on a free loopback port, killed when dropped.
struct Moto {
    child: Child,
    url: String,
    /// Its own directory: the file it records to (moto's default is one
    /// in the working directory) and its log, which a failed call shows.
    dir: tempfile::TempDir,
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
            .stdout(Stdio::null());
        // Tests point goad's credential sources at AWS variables (a
        // profile, a role); moto's own boto must not follow them.
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("AWS_")) {
            command.env_remove(name);
        }
        // A test may point HOME at its own (an SSO token cache); python
        // (pyenv's shims) finds its installation under the one the tests
        // started with, taken at the first start, before any test moves it.
        static HOME: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
        if let Some(home) = HOME.get_or_init(|| std::env::var_os("HOME")) {
            command.env("HOME", home);
        }
        let dir = tempfile::tempdir().unwrap();
        command.env("MOTO_RECORDER_FILEPATH", dir.path().join("recording"));
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        command.stderr(log);
        if let Some(n) = unsigned_requests {
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", n.to_string());
        }
        let child = command
            .spawn()
            .expect("python3 runs (tools/test installs moto: pip install 'moto[server]')");
        let mut moto = Moto {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
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
        assert_eq!(status, 200, "{target}: {answer}\n{}", self.log_tail());
        serde_json::from_str(&answer).unwrap()
    }

    /// A request to moto: the status and the body.
    fn run(&self, request: ureq::http::Request<impl ureq::AsSendBody>) -> (u16, Vec<u8>) {
        // moto is on loopback: never through a proxy the shell names.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent.run(request).unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_vec().unwrap())
    }

    /// The last lines moto logged (a traceback, for a 500).
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        format!("moto's log ends:\n{tail}")
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
        assert_eq!(status, 200, "{params}: {answer}\n{}", self.log_tail());
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

/// A claim check in `bucket` of the S3 of the moto at `moto_url`, with the
/// credentials in the variables `[key id, secret, session token]`.
fn s3_claims(
    moto_url: &str,
    bucket: &str,
    credentials: [&str; 3],
) -> goad::config::ClaimCheckConfig {
    let [key, secret, token] = credentials.map(|var| Some(var.to_string()));
    goad::config::ClaimCheckConfig {
        s3_bucket: Some(bucket.into()),
        s3_region: Some("us-east-1".into()),
        s3_endpoint: Some(moto_url.into()),
        access_key_id_env: key,
        secret_access_key_env: secret,
        session_token_env: token,
        ..Default::default()
    }
}
