//! The HTTP sink against a real receiver on loopback: what a request
//! carries (reference scenarios 57–66), the status mapping, signatures
//! checked with independent signers, TLS, egress rules, bearer tokens and
//! keep-alive connections.

#[path = "../common/mod.rs"]
mod common;

mod connections;
mod deadline;
mod egress;
mod requests;
mod signing;
mod statuses;
mod tls;
mod tokens;

use base64::Engine as _;
use common::*;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::{Engine, NewHook, RowStatus, SinkConfig};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Commits a hook of source `s` and runs the engine until it is settled.
fn commit_and_tick(engine: &Engine, body: &str) {
    engine.commit(NewHook::new("s", body)).unwrap();
    engine.tick().unwrap();
}

/// Delivers one hook through an HTTP sink built by `configure` and returns
/// what the receiver got and the engine (for its rows).
fn deliver(
    hook: NewHook,
    reply: Reply,
    configure: impl FnOnce(&mut goad::config::SourceConfig),
) -> (Vec<Received>, Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(move |_| reply.clone()).unwrap();
    let mut c = config(dir.path());
    // A failed attempt waits a minute: each case sees exactly one attempt.
    c.retry.base_ms = 60_000;
    c.retry.max_ms = 60_000;
    let mut s = source(
        "stripe",
        "acme",
        vec![SinkConfig::http(receiver.url("/hooks"))],
    );
    configure(&mut s);
    c.sources.push(s);
    let engine = Engine::open(c).unwrap();
    engine.commit(hook).unwrap();
    engine.tick().unwrap();
    (receiver.received(), engine, dir)
}

fn provider_hook() -> NewHook {
    NewHook {
        source_id: "stripe".into(),
        headers: vec![
            ("X-GitHub-Event".into(), "push".into()),
            ("Authorization".into(), "Bearer provider-secret".into()),
            ("x-goad-whatever".into(), "forged".into()),
            ("webhook-id".into(), "forged".into()),
            ("Content-Length".into(), "13".into()),
            ("x-trace".into(), "provider".into()),
            ("x-keep".into(), "1".into()),
        ],
        content_type: Some("application/json".into()),
        body: br#"{"event":"x"}"#.to_vec(),
        dedupe_key: Some("evt_1".into()),
    }
}
