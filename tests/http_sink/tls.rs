//! HTTPS receivers: a private CA through `ca_file`, and client
//! certificates for receivers that ask for one.

use super::*;

/// An https:// endpoint whose certificate chains to the sink's `ca_file`
/// (a private CA) gets the hook over TLS; one whose sink trusts Mozilla's
/// roots (no `ca_file`) gets nothing, and the attempt's failure names the
/// certificate. A `ca_file` that is missing, holds no certificate or is an
/// endless stream is a config error naming the key and the file.
#[test]
fn an_https_endpoint_is_trusted_through_the_sinks_ca_file() {
    let fixtures = fixtures();
    let receiver = Receiver::start_tls(
        include_bytes!("../fixtures/localhost-cert.pem"),
        include_bytes!("../fixtures/localhost-key.pem"),
        |_| Reply::status(200),
    )
    .unwrap();
    assert!(receiver.url("/").starts_with("https://127.0.0.1:"));
    let dir = tempfile::tempdir().unwrap();
    let trusting = |ca_file: &str| SinkConfig {
        ca_file: Some(fixtures.join(ca_file)),
        ..SinkConfig::http(receiver.url("/hooks"))
    };
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    c.sources
        .push(source("private", "acme", vec![trusting("test-ca.pem")]));
    let public = SinkConfig::http(receiver.url("/hooks"));
    c.sources.push(source("public", "acme", vec![public]));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("private", "over tls")).unwrap();
    engine.tick().unwrap();
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, b"over tls");
    commit_refused(&engine, "public", 1);
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            "sink http: io: invalid peer certificate: UnknownIssuer (its certificate chains to no root trusted here: a private CA's certificate goes in an HTTP sink's ca_file, or, for all of goad's clients, in the file SSL_CERT_FILE names)".to_string()
        )]
    );
    assert_eq!(receiver.received().len(), 1, "nothing over untrusted TLS");
    drop(engine);

    for (file, why) in [
        (
            "missing.pem",
            "cannot read it: No such file or directory (os error 2)",
        ),
        ("localhost-key.pem", "no CERTIFICATE in it"),
        // An endless stream is not read into memory.
        (
            "/dev/zero",
            "cannot read it: it holds over 16 MiB, more than any file of its kind",
        ),
    ] {
        let path = fixtures.join(file);
        c.sources[0].sinks[0] = trusting(file);
        let refused = Engine::open(c.clone()).err().expect("a config error");
        assert_eq!(
            refused.to_string(),
            format!(
                "sources[0].sinks[0].ca_file must be a PEM file of root certificates ({why}), \
                 got {path:?}"
            )
        );
    }
}

/// An https:// endpoint that asks for a client certificate (mutual TLS)
/// gets the hook from a sink with `client_cert_file` and
/// `client_key_file`; a sink without one, or with a certificate the
/// endpoint's client CA did not sign, delivers nothing, and each attempt's
/// failure names the TLS alert. A key that does not fit the certificate,
/// or a missing file, is a config error naming the key and the file.
#[test]
fn an_endpoint_asking_for_a_client_certificate_gets_the_sinks() {
    let fixtures = fixtures();
    let receiver = Receiver::start_mutual_tls(
        include_bytes!("../fixtures/localhost-cert.pem"),
        include_bytes!("../fixtures/localhost-key.pem"),
        include_bytes!("../fixtures/test-client-ca.pem"),
        |_| Reply::status(200),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let presenting = |client: Option<(&str, &str)>| SinkConfig {
        ca_file: Some(fixtures.join("test-ca.pem")),
        client_cert_file: client.map(|(cert, _)| fixtures.join(cert)),
        client_key_file: client.map(|(_, key)| fixtures.join(key)),
        ..SinkConfig::http(receiver.url("/hooks"))
    };
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    let client = Some(("client-cert.pem", "client-key.pem"));
    c.sources
        .push(source("mutual", "acme", vec![presenting(client)]));
    c.sources
        .push(source("anonymous", "acme", vec![presenting(None)]));
    let stranger = Some(("client-2-cert.pem", "client-2-key.pem"));
    c.sources
        .push(source("stranger", "acme", vec![presenting(stranger)]));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("mutual", "mutual tls")).unwrap();
    engine.tick().unwrap();
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, b"mutual tls");
    engine.commit(NewHook::new("anonymous", "no tls")).unwrap();
    engine.commit(NewHook::new("stranger", "no tls")).unwrap();
    wait_until("both rows dead", Duration::from_secs(20), || {
        dead(&engine).len() == 2
    });
    // Under TLS 1.3 the server refuses the certificate after the client's
    // handshake is over: the client may see the alert (which says what the
    // sink's config lacks), or the closed socket first.
    let refusals = [
        "sink http: io: received fatal alert: CertificateRequired (the receiver asks for a client \
         certificate: an HTTP sink presents one with client_cert_file and client_key_file)",
        "sink http: io: received fatal alert: UnknownCA (the receiver trusts no CA that signed \
         the client certificate presented (client_cert_file))",
        "sink http: the connection ended with no answer (io: Broken pipe (os error 32))",
        "sink http: the connection ended with no answer (io: Connection reset by peer (os error 104))",
    ];
    for (attempts, reason) in dead_attempts_and_reasons(&engine) {
        assert_eq!(attempts, 1);
        assert!(refusals.contains(&reason.as_str()), "{reason}");
    }
    assert_eq!(
        receiver.received().len(),
        1,
        "nothing without a client certificate"
    );
    drop(engine);

    let mismatched = Some(("client-cert.pem", "localhost-key.pem"));
    c.sources[0].sinks[0] = presenting(mismatched);
    let refused = Engine::open(c.clone()).err().expect("a config error");
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].client_key_file must be the client certificate's PEM private \
             key (it does not fit the certificate (keys may not be consistent: KeyMismatch)), \
             got {:?}",
            fixtures.join("localhost-key.pem")
        )
    );
    let missing = Some(("missing-cert.pem", "client-key.pem"));
    c.sources[0].sinks[0] = presenting(missing);
    let refused = Engine::open(c).err().expect("a config error");
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].client_cert_file must be a PEM certificate chain (cannot \
             read it: No such file or directory (os error 2)), got {:?}",
            fixtures.join("missing-cert.pem")
        )
    );
}

/// A TLS handshake that fails in a way the sink's config can mend says
/// how: an https:// URL whose receiver answers in plain HTTP, and one
/// whose receiver speaks only a TLS version older than 1.2 (its alert).
#[test]
fn a_receiver_that_does_not_speak_goads_tls_fails_the_attempt_saying_so() {
    let plain = raw_answerer(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    // A fatal `protocol_version` alert, as a TLS 1.0 server sends.
    let old = raw_answerer(&[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    for (id, url) in [("plain", plain), ("old", old)] {
        c.sources
            .push(source(id, "acme", vec![SinkConfig::http(url)]));
    }
    let engine = Engine::open(c).unwrap();
    for id in ["plain", "old"] {
        engine.commit(NewHook::new(id, "x")).unwrap();
    }
    wait_until("both rows dead", Duration::from_secs(20), || {
        dead(&engine).len() == 2
    });
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [
            (
                1,
                "sink http: io: received corrupt message of type InvalidContentType (the receiver \
                 answered with something other than TLS: one that serves plain HTTP takes an \
                 http:// URL)"
                    .to_string()
            ),
            (
                1,
                "sink http: io: received fatal alert: ProtocolVersion (the receiver speaks no \
                 TLS version goad does: TLS 1.2 and 1.3)"
                    .to_string()
            ),
        ]
    );
}

/// An https:// URL on loopback whose server answers every connection's
/// first bytes with `answer`, then reads on to the client's end (so that
/// its close resets nothing before the client has read the answer).
fn raw_answerer(answer: &'static [u8]) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/hooks", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            std::thread::spawn(move || {
                let mut hello = [0u8; 4096];
                if stream.read(&mut hello).unwrap_or(0) > 0 && stream.write_all(answer).is_ok() {
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                    let _ = std::io::copy(&mut stream, &mut std::io::sink());
                }
            });
        }
    });
    url
}
