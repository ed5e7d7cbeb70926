//! The node's HTTP API with real clients over loopback: every route and
//! status, authentication, ingest to delivery end to end, and what the node
//! does with malformed and slow requests. A module per concern; the
//! helpers every one uses (a node on a loopback port, ingest, metrics) are
//! here.

#[path = "../common/mod.rs"]
mod common;

mod dead_letters;
mod front;
mod ingest;
mod inspection;
mod jwt;
mod metrics;
mod notifications;
mod operations;
mod replays;
mod signatures;
mod storm;
mod tls;

use common::http::{assert_gets_refused, call, get, raw_request, Client, HttpReply};
use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Config, Node, NodeOptions, SinkConfig};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A node config on a free loopback port with short HTTP deadlines.
fn node_config(dir: &std::path::Path) -> Config {
    let mut c = config(dir);
    c.listen = "127.0.0.1:0".into();
    c.http.read_timeout_ms = 300;
    c
}

fn start(config: Config) -> Node {
    start_with(config, None)
}

fn start_with(config: Config, config_path: Option<std::path::PathBuf>) -> Node {
    let node = Node::start(NodeOptions {
        config_path,
        ..NodeOptions::new(config)
    })
    .expect("the node starts");
    assert!(
        node.wait_ready(Duration::from_secs(20)),
        "the node got ready"
    );
    node
}

fn ingest(addr: SocketAddr, source: &str, body: &[u8], headers: &[(&str, &str)]) -> HttpReply {
    call(
        addr,
        "POST",
        &format!("/v1/sources/{source}/hooks"),
        headers,
        body,
    )
}

/// Starts a node whose sinks of type `gated` hold each delivery on `gate`.
fn start_gated(config: Config, gate: &Gate) -> Node {
    let node = Node::start_with_sinks(
        NodeOptions::new(config),
        vec![("gated".to_string(), gate.sink.clone())],
    )
    .expect("the node starts");
    assert!(
        node.wait_ready(Duration::from_secs(20)),
        "the node got ready"
    );
    node
}

/// A node config whose source `a` (tenant `t1`) posts to `receiver`.
fn one_source(dir: &std::path::Path, receiver: &Receiver) -> Config {
    let mut c = node_config(dir);
    c.sources.push(source(
        "a",
        "t1",
        vec![SinkConfig::http(receiver.url("/a"))],
    ));
    c
}

/// `one_source` and a source `b` (tenant `t2`) posting to `receiver` too.
fn two_sources(dir: &std::path::Path, receiver: &Receiver) -> Config {
    let mut c = one_source(dir, receiver);
    c.sources.push(source(
        "b",
        "t2",
        vec![SinkConfig::http(receiver.url("/b"))],
    ));
    c
}

/// Ingests `count` hooks with bodies `0`, `1`, … into `source`, each answered 202.
fn ingest_n(addr: SocketAddr, source: &str, count: usize) {
    for i in 0..count {
        let reply = ingest(addr, source, format!("{i}").as_bytes(), &[]);
        assert_eq!(reply.status, 202, "{}", reply.text());
    }
}

/// One field of every dead letter the node lists (its first page).
fn listed(addr: SocketAddr, field: &str) -> Vec<String> {
    get(addr, "/v1/dead-letters").json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i[field].as_str().unwrap().to_string())
        .collect()
}

/// The sum of a metric's samples whose labels contain `labels`.
fn metric(addr: SocketAddr, name: &str, labels: &str) -> f64 {
    sample_sum(&get(addr, "/metrics").text(), name, labels)
}

/// The sum of a scrape's samples of `name` whose labels contain `labels`.
fn sample_sum(scrape: &str, name: &str, labels: &str) -> f64 {
    parse_prometheus(scrape)
        .iter()
        .filter(|(n, l, _)| n == name && l.contains(labels))
        .map(|(_, _, v)| v)
        .sum()
}

/// Waits until the replay pacer has made `passes` more passes.
fn pacer_passes(addr: SocketAddr, passes: u64) {
    let name = "goad_replay_pacer_passes_total";
    let from = metric(addr, name, "");
    wait_until("more replay pacer passes", Duration::from_secs(10), || {
        metric(addr, name, "") >= from + passes as f64
    });
}

/// (name, labels text, value) of every sample, checking the format.
fn parse_prometheus(text: &str) -> Vec<(String, String, f64)> {
    let mut typed: Vec<String> = Vec::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.push(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let labels = rest.strip_suffix('}').expect("labels end with }");
                for pair in labels.split(',') {
                    let (k, v) = pair.split_once('=').expect("label=value");
                    assert!(
                        k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{line}"
                    );
                    assert!(v.starts_with('"') && v.ends_with('"'), "{line}");
                }
                (name, labels)
            }
            None => (series, ""),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "bad metric name in {line:?}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| typed.iter().any(|t| t == f))
            })
            .unwrap_or(name);
        assert!(typed.iter().any(|t| t == family), "{name} has no # TYPE");
        samples.push((name.to_string(), labels.to_string(), value));
    }
    samples
}
