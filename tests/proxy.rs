//! Outbound requests and an egress proxy: goad's HTTP clients take the
//! proxy of the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//! skipping the hosts of `NO_PROXY`), as ureq does by default. A test binary
//! of its own: the variables hold for the whole process, so each test
//! holds `ENVIRONMENT` while it sets them and its engine runs.

mod common;

use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Engine, NewHook, SinkConfig};
use std::io::{Read, Write};
use std::sync::Mutex;
use std::time::Duration;

/// Held by a test while the proxy variables it set are in force.
static ENVIRONMENT: Mutex<()> = Mutex::new(());

/// A sink whose host is not in `NO_PROXY` is delivered through the proxy:
/// ureq asks it for a tunnel (`CONNECT host:port`, for http:// URLs too),
/// then sends the request through it (this stand-in answers the CONNECT
/// with 200 and then the tunnelled request itself). A sink whose host is
/// in `NO_PROXY` is delivered directly.
#[test]
fn an_http_sink_delivers_through_the_environments_proxy_unless_no_proxy_names_its_host() {
    let _environment = ENVIRONMENT.lock().unwrap();
    let proxy = Receiver::start(|_| Reply::status(200)).unwrap();
    let direct = Receiver::start(|_| Reply::status(200)).unwrap();
    std::env::set_var("HTTP_PROXY", proxy.url(""));
    std::env::set_var("NO_PROXY", "127.0.0.1");
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let sinks = vec![
        SinkConfig::http("http://hooks.example.invalid/a"),
        SinkConfig::http(direct.url("/b")),
    ];
    c.sources.push(source("stripe", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "via proxy")).unwrap();
    engine.tick().unwrap();
    let proxied = proxy.received();
    assert_eq!(proxied.len(), 2);
    assert_eq!(
        (proxied[0].method.as_str(), proxied[0].path.as_str()),
        ("CONNECT", "hooks.example.invalid:80")
    );
    assert_eq!(
        (proxied[1].method.as_str(), proxied[1].path.as_str()),
        ("POST", "/a")
    );
    assert_eq!(proxied[1].header("host"), Some("hooks.example.invalid"));
    assert_eq!(proxied[1].body, b"via proxy");
    let direct_received = direct.received();
    assert_eq!(direct_received.len(), 1);
    assert_eq!(direct_received[0].path, "/b");

    // With egress.deny_private_addresses the proxy, though on loopback, is
    // still used (it resolves and connects the proxied host, under its own
    // policy); the host NO_PROXY names is resolved here, and refused.
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.egress.deny_private_addresses = true;
    let sinks = vec![
        SinkConfig::http("http://hooks.example.invalid/c"),
        SinkConfig::http(direct.url("/d")),
    ];
    c.sources.push(source("stripe", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "guarded")).unwrap();
    engine.tick().unwrap();
    let proxied = proxy.received();
    assert_eq!(proxied.len(), 4);
    assert_eq!(proxied[3].path, "/c");
    assert_eq!(
        direct.received().len(),
        1,
        "nothing more reached the direct host"
    );
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].row.sink_index, 1);
}

/// A tunnel the proxy does not open fails the attempt saying that the
/// proxy refused it, with what its answer most often means: 407 (it wants
/// credentials), 403 (its policy), 502 (it could not reach the receiver),
/// or no answer at all.
#[test]
fn a_tunnel_the_proxy_refuses_fails_the_attempt_naming_the_proxy() {
    let _environment = ENVIRONMENT.lock().unwrap();
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std::env::set_var(
        "HTTP_PROXY",
        format!("http://{}", proxy.local_addr().unwrap()),
    );
    std::env::remove_var("NO_PROXY");
    // Answers each CONNECT by the port asked for.
    std::thread::spawn(move || {
        for stream in proxy.incoming() {
            let mut stream = stream.unwrap();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let port = head.split([' ', ':']).nth(2).unwrap_or_default();
                let answer: &[u8] = match port {
                    "1407" => b"HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm=\"egress\"\r\ncontent-length: 0\r\n\r\n",
                    "1403" => b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n",
                    "1502" => b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n",
                    _ => b"",
                };
                let _ = stream.write_all(answer);
                let _ = stream.shutdown(std::net::Shutdown::Write);
                let _ = std::io::copy(&mut stream, &mut std::io::sink());
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    let sinks = ["1407", "1403", "1502", "1000"]
        .map(|port| SinkConfig::http(format!("http://hooks.example.invalid:{port}/")));
    c.sources.push(source("stripe", "acme", sinks.to_vec()));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "refused")).unwrap();
    wait_until("every row dead", Duration::from_secs(20), || {
        dead(&engine).len() == 4
    });
    let mut reasons: Vec<_> = dead(&engine)
        .into_iter()
        .map(|r| (r.row.sink_index, r.record.error.unwrap_or_default()))
        .collect();
    reasons.sort();
    let refused = "sink http: the egress proxy opened no tunnel to the receiver";
    assert_eq!(
        reasons,
        [
            (0, format!("{refused} (HTTP 407: it wants credentials, or others than those given: they go in its URL, as HTTPS_PROXY=http://user:password@proxy:3128)")),
            (1, format!("{refused} (HTTP 403: its policy refuses the receiver's host or port)")),
            (2, format!("{refused} (HTTP 502: it could not reach the receiver)")),
            (3, format!("{refused} (it ended the connection without answering)")),
        ]
    );
}
