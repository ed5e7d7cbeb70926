//! `egress`: receivers and token endpoints on private addresses refused,
//! or allowed by network.

use super::tokens::token_endpoint;
use super::*;

/// `egress.deny_private_addresses`: a receiver on loopback, by address or
/// by name, is never connected to; each row is dead-lettered at its first
/// attempt with a reason naming the host, its addresses and the key. The
/// key applies at a reconfiguration: turned off, a replay delivers.
#[test]
fn private_receivers_are_refused_when_egress_denies_them() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    c.egress.deny_private_addresses = true;
    let sinks = vec![
        SinkConfig::http(receiver.url("/by-address")),
        SinkConfig::http(receiver.url("/by-name").replace("127.0.0.1", "localhost")),
    ];
    c.sources.push(source("s", "t", sinks));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(receiver.count(), 0);
    let reasons = dead_attempts_and_reasons(&engine);
    let refused = |host: &str, addresses: &str| {
        format!(
            "sink http: permanent: {host} resolves only to private addresses ({addresses}), \
             which egress.deny_private_addresses refuses"
        )
    };
    assert_eq!(reasons[0], (1, refused("127.0.0.1", "127.0.0.1")));
    let by_name = &reasons[1].1;
    assert_eq!(reasons[1].0, 1);
    assert!(
        [
            refused("localhost", "127.0.0.1"),
            refused("localhost", "::1, 127.0.0.1"),
            refused("localhost", "127.0.0.1, ::1")
        ]
        .contains(by_name),
        "{by_name}"
    );
    c.egress.deny_private_addresses = false;
    engine.reconfigure(&c).unwrap();
    replay_until_delivered(&engine, 2);
    let paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths.len(), 2);
    assert!(paths.contains(&"/by-address".to_string()) && paths.contains(&"/by-name".to_string()));
}

/// `egress.allow_private_networks`: with private addresses denied, a
/// receiver in an allowed network is delivered to and one outside them
/// dead-lettered, naming the key; the list applies at a reconfiguration.
#[test]
fn egress_reaches_the_allowed_private_networks_only() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    c.egress.deny_private_addresses = true;
    c.egress.allow_private_networks = vec!["10.0.0.0/8".into(), "::1".into()];
    c.sources.push(source(
        "s",
        "t",
        vec![SinkConfig::http(receiver.url("/in"))],
    ));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("s", "first")).unwrap();
    engine.tick().unwrap();
    assert_eq!(receiver.count(), 0);
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            "sink http: permanent: 127.0.0.1 resolves only to private addresses (127.0.0.1), \
             which egress.deny_private_addresses refuses \
             (none is in egress.allow_private_networks)"
                .to_string()
        )]
    );
    c.egress.allow_private_networks.push("127.0.0.1/32".into());
    engine.reconfigure(&c).unwrap();
    engine.commit(NewHook::new("s", "second")).unwrap();
    engine.tick().unwrap();
    assert_eq!(receiver.count(), 1);
    replay_until_delivered(&engine, 1);
    let mut bodies: Vec<Vec<u8>> = receiver.received().into_iter().map(|r| r.body).collect();
    bodies.sort();
    assert_eq!(bodies, [b"first".to_vec(), b"second".to_vec()]);
}

/// An OAuth 2 token endpoint is held to `egress.deny_private_addresses` as
/// the receiver is: one on loopback is never asked, and the row is
/// dead-lettered at once, naming the endpoint.
#[test]
fn egress_denies_a_private_oauth2_token_endpoint_too() {
    std::env::set_var("GOAD_TEST_EGRESS_SECRET", "s");
    let tokens = token_endpoint();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.egress.deny_private_addresses = true;
    let mut sink = SinkConfig::http("https://hooks.example.com/in");
    sink.oauth2 = Some(goad::config::OAuth2Config::new(
        tokens.url("/token"),
        "c",
        "GOAD_TEST_EGRESS_SECRET",
    ));
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(tokens.count(), 0);
    let token_url = tokens.url("/token");
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            format!(
                "sink http: permanent: cannot get an OAuth 2 token from {token_url}: \
                 127.0.0.1 resolves only to private addresses (127.0.0.1), \
                 which egress.deny_private_addresses refuses"
            )
        )]
    );
}
