//! The HTTP sink's cost per delivery beside a bare ureq post of the same
//! 1 KiB body to the same loopback receiver, on one keep-alive connection:
//! what goad adds to each attempt (its headers, the status mapping, the
//! per-phase timeouts). Then what a signature of that body costs, `v1`
//! (HMAC-SHA256) and `v1a` (Ed25519).
//!
//! Not alternated in one loop as the other benches are: each side keeps
//! one connection, served by one receiver thread, for the whole run, and
//! on these VMs a round trip whose two threads share a core took ~20 µs
//! while one across cores took ~100–140 µs, so a loop's ratio said where
//! the scheduler put the threads (0.24× in one run, 7.56× in the next),
//! not what goad adds. Criterion's two runs, one after the other, agreed
//! within 15% in the same runs.

use criterion::Criterion;
use goad::demo::receiver::{Receiver, Reply};
use goad::sink::http::{HttpSink, HttpSinkOptions};
use goad::sink::signing::SigningKey;
use goad::store::Hook;
use goad::{Delivery, Sink};
use std::sync::Arc;

const BODY_BYTES: usize = 1_024;

fn hook() -> Hook {
    Hook {
        id: "01890a5d-ac96-774b-bcce-b302099a8057".into(),
        seq: 1,
        tenant: Arc::from("acme"),
        source_id: Arc::from("orders"),
        received_at_ms: 1_700_000_000_000,
        content_type: Some("application/json".into()),
        dedupe_key: Some("evt_1".into()),
        headers: vec![("X-Provider-Event".into(), "order.created".into())],
        body: vec![b'x'; BODY_BYTES],
    }
}

fn main() {
    let receiver = Receiver::start_with(|_| Reply::status(200), false).expect("receiver");
    let url = receiver.url("/hooks");
    let mut options = HttpSinkOptions::new(url.clone());
    options.headers = vec![("x-operator".into(), "1".into())];
    options.timeout_ms = 10_000;
    let sink = HttpSink::new(options).expect("valid options");
    // On loopback, as the sink reaches it: never through a proxy the shell
    // names.
    let raw: ureq::Agent = ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .build()
        .into();
    let hook = hook();
    let deliver = || {
        let delivery = Delivery {
            hook: &hook,
            attempt: 1,
            sink_index: 0,
            replay_id: None,
            claim: None,
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(30),
        };
        sink.deliver(&delivery).expect("delivered");
    };
    let post = || {
        let mut response = raw
            .post(&url)
            .header("content-type", "application/json")
            .send(&hook.body[..])
            .expect("posted");
        let _ = response.body_mut().read_to_vec();
    };
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("http_delivery");
    group.bench_function("goad_http_sink", |b| b.iter(deliver));
    group.bench_function("raw_ureq_post", |b| b.iter(post));
    group.finish();
    let mut signing = criterion.benchmark_group("signature_1KiB");
    for (name, secret) in [
        ("v1_hmac_sha256", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        (
            "v1a_ed25519",
            &SigningKey::generate().expect("randomness").0,
        ),
    ] {
        let key = SigningKey::parse(secret).expect("a signing key");
        signing.bench_function(name, |b| {
            b.iter(|| key.sign(&hook.id, 1_700_000_000, &hook.body))
        });
    }
    signing.finish();
    criterion.final_summary();
}
