//! `goad-sink` (tools/sink.rs) as a child process, fed by a real engine: its
//! failure share is exact, it verifies Standard Webhooks signatures, and its
//! counts match what the engine settled.

mod common;

use common::*;
use goad::{Engine, NewHook, SinkConfig};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SECRET: &str = "whsec_c2luay10b29sLXNlY3JldA==";

/// A running `goad-sink`, its URL and its stdout lines.
struct SinkTool {
    child: Child,
    url: String,
    lines: crossbeam_channel::Receiver<String>,
}

impl SinkTool {
    /// The tool verifying signatures with [`SECRET`].
    fn start(args: &[&str]) -> SinkTool {
        SinkTool::verifying(SECRET, args)
    }

    /// The tool verifying signatures with `secret` (or a public key).
    fn verifying(secret: &str, args: &[&str]) -> SinkTool {
        let mut child = Command::new(env!("CARGO_BIN_EXE_goad-sink"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--secret-env",
                "GOAD_SINK_TEST_SECRET",
            ])
            .args(args)
            .env("GOAD_SINK_TEST_SECRET", secret)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let first = lines.recv_timeout(Duration::from_secs(30)).unwrap();
        let url = first
            .strip_prefix("goad-sink listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        SinkTool { child, url, lines }
    }

    /// The first report whose `key` reaches `at_least`.
    fn report_when(&self, key: &str, at_least: u64) -> HashMap<String, u64> {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no report with {key} >= {at_least}"));
            let report: HashMap<String, u64> = line
                .split(' ')
                .filter_map(|field| field.split_once('='))
                .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
                .collect();
            if report[key] >= at_least {
                return report;
            }
        }
    }
}

impl Drop for SinkTool {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An engine whose one HTTP sink posts to `url` (trusting the CA of
/// `ca_file`, if any), signing with the secret in the variable
/// `secret_env` (one variable per test: tests run in parallel), up to 10
/// attempts of at most `attempt_timeout_ms`.
fn engine_for(
    dir: &std::path::Path,
    mut sink: SinkConfig,
    secret_env: &str,
    secret: &str,
    attempt_timeout_ms: u64,
) -> Engine {
    std::env::set_var(secret_env, secret);
    let mut c = config(dir);
    c.retry.max_attempts = 10;
    c.dispatch.attempt_timeout_ms = attempt_timeout_ms;
    sink.secret_env = Some(goad::config::OneOrMany::One(secret_env.into()));
    c.sources.push(source("s", "t", vec![sink]));
    Engine::open(c).unwrap()
}

/// Commits `n` hooks and waits until they are settled.
fn deliver_hooks(engine: &Engine, n: u32) {
    for i in 0..n {
        engine
            .commit(NewHook::new("s", format!("hook {i}")))
            .unwrap();
    }
    engine.tick_within(Duration::from_secs(60)).unwrap();
}

/// A tenth of the requests hang and four tenths fail, spread as the tool
/// documents; every hook is still delivered once, and every signature
/// verifies.
#[test]
fn hangs_and_failures_are_exact_shares_and_every_hook_arrives_signed() {
    let tool = SinkTool::start(&["--hang-percent", "10", "--fail-percent", "40"]);
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_for(
        dir.path(),
        SinkConfig::http(&tool.url),
        "GOAD_SINK_TEST_KEY_RIGHT",
        SECRET,
        300,
    );
    deliver_hooks(&engine, 20);
    let report = tool.report_when("hooks", 20);
    // Request n hangs when (n·37) mod 100 < 10 and fails when it is < 50:
    // the requests it took to get 20 answered ok.
    let (mut requests, mut hung, mut ok) = (0u64, 0u64, 0u64);
    while ok < 20 {
        let bucket = requests * 37 % 100;
        hung += u64::from(bucket < 10);
        ok += u64::from(bucket >= 50);
        requests += 1;
    }
    let expected: HashMap<String, u64> = [
        ("requests", requests),
        ("ok", 20),
        ("failed", requests - hung - 20),
        ("hung", hung),
        ("bad_signatures", 0),
        ("hooks", 20),
        ("redelivered", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let seen: HashMap<String, u64> = report.into_iter().filter(|(k, _)| k != "t_s").collect();
    assert_eq!(seen, expected);
    assert_eq!(
        engine.hook_count().unwrap(),
        0,
        "all delivered and reclaimed"
    );
}

/// Signed with another secret, every request is refused with 401, which
/// dead-letters each row at its first attempt.
#[test]
fn a_wrong_secret_is_refused_and_dead_letters() {
    let tool = SinkTool::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_for(
        dir.path(),
        SinkConfig::http(&tool.url),
        "GOAD_SINK_TEST_KEY_WRONG",
        "whsec_b3RoZXItc2VjcmV0",
        30_000,
    );
    deliver_hooks(&engine, 5);
    let report = tool.report_when("bad_signatures", 5);
    assert_eq!(
        (
            report["bad_signatures"],
            report["requests"],
            report["hooks"]
        ),
        (5, 0, 0)
    );
    let dead = dead(&engine);
    assert_eq!(dead.len(), 5);
    for row in dead {
        assert_eq!(row.record.attempts, 1);
        assert_eq!(
            row.record.error.as_deref(),
            Some("sink http: permanent: HTTP status 401")
        );
    }
}

/// A key pair `goad keygen` prints: its lines that are no comment.
fn keygen() -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_goad"))
        .arg("keygen")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let keys: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    match keys[..] {
        [private, public] if private.starts_with("whsk_") && public.starts_with("whpk_") => {
            (private.to_string(), public.to_string())
        }
        _ => panic!("not a key pair: {text}"),
    }
}

/// Asymmetric signatures: a sink signing with the private key of `goad
/// keygen` (`v1a`) is verified by a receiver that holds only its public
/// key; a sink signing with another pair's key is refused (401, dead
/// letters), as is a shared secret's `v1` signature.
#[test]
fn a_receiver_holding_the_public_key_verifies_the_private_keys_signatures() {
    let (private, public) = keygen();
    let (other_private, other_public) = keygen();
    assert_ne!(public, other_public, "each run makes a new key");
    let tool = SinkTool::verifying(&public, &[]);
    let dir = tempfile::tempdir().unwrap();
    let sink = || SinkConfig::http(&tool.url);
    let signed = engine_for(
        dir.path(),
        sink(),
        "GOAD_SINK_TEST_KEY_PAIR",
        &private,
        30_000,
    );
    deliver_hooks(&signed, 5);
    let report = tool.report_when("hooks", 5);
    assert_eq!((report["hooks"], report["bad_signatures"]), (5, 0));
    assert_eq!(signed.hook_count().unwrap(), 0);
    signed.shutdown();
    for (n, secret) in [other_private.as_str(), SECRET].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let variable = format!("GOAD_SINK_TEST_KEY_NOT_THE_PAIR_{n}");
        let refused = engine_for(dir.path(), sink(), &variable, secret, 30_000);
        deliver_hooks(&refused, 2);
        let dead = dead(&refused);
        assert_eq!(dead.len(), 2, "signed with {secret:.8}…");
        assert!(dead.iter().all(
            |row| row.record.error.as_deref() == Some("sink http: permanent: HTTP status 401")
        ));
    }
    let report = tool.report_when("bad_signatures", 4);
    assert_eq!((report["hooks"], report["bad_signatures"]), (5, 4));
}

/// With `--tls-cert` and `--tls-key` the tool speaks HTTPS, and with
/// `--tls-client-ca` asks for a client certificate that CA signed: a sink
/// whose `ca_file` names the CA that signed the tool's certificate, and
/// whose `client_cert_file` and `client_key_file` hold a certificate the
/// client CA signed, delivers every hook.
#[test]
fn with_a_certificate_it_speaks_https_to_a_sink_trusting_its_ca() {
    let fixtures = fixtures();
    let file = |name: &str| fixtures.join(name).display().to_string();
    let (cert, key) = (file("localhost-cert.pem"), file("localhost-key.pem"));
    let client_ca = file("test-client-ca.pem");
    let tool = SinkTool::start(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-client-ca",
        &client_ca,
    ]);
    assert!(tool.url.starts_with("https://127.0.0.1:"), "{}", tool.url);
    let dir = tempfile::tempdir().unwrap();
    let sink = SinkConfig {
        ca_file: Some(fixtures.join("test-ca.pem")),
        client_cert_file: Some(fixtures.join("client-cert.pem")),
        client_key_file: Some(fixtures.join("client-key.pem")),
        ..SinkConfig::http(&tool.url)
    };
    let engine = engine_for(dir.path(), sink, "GOAD_SINK_TEST_KEY_TLS", SECRET, 30_000);
    deliver_hooks(&engine, 5);
    let report = tool.report_when("hooks", 5);
    assert_eq!((report["ok"], report["bad_signatures"]), (5, 0));
    assert_eq!(engine.hook_count().unwrap(), 0, "all delivered");
}
