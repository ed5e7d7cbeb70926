//! Outbound requests and an egress proxy: goad's HTTP clients take the
//! proxy of the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//! skipping the hosts of `NO_PROXY`), as ureq does by default. A test binary
//! of its own: the variables hold for the whole process.

mod common;

use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Engine, NewHook, SinkConfig};

/// A sink whose host is not in `NO_PROXY` is delivered through the proxy:
/// ureq asks it for a tunnel (`CONNECT host:port`, for http:// URLs too),
/// then sends the request through it (this stand-in answers the CONNECT
/// with 200 and then the tunnelled request itself). A sink whose host is
/// in `NO_PROXY` is delivered directly.
#[test]
fn an_http_sink_delivers_through_the_environments_proxy_unless_no_proxy_names_its_host() {
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
