//! HTTPS on the front: certificates, client certificates (mutual TLS),
//! reload of the files, refusals at start and slow clients through TLS.

use super::*;

/// A client whose TLS trusts only the CA certificate of this fixture file.
fn agent_trusting(ca_fixture: &str) -> ureq::Agent {
    tls_agent(ca_fixture, None)
}

/// `agent_trusting`, presenting the client certificate and private key of
/// these fixture files when the server asks for one.
fn tls_agent(ca_fixture: &str, client: Option<(&str, &str)>) -> ureq::Agent {
    let read = |fixture: &str| std::fs::read(fixtures().join(fixture)).unwrap();
    let certificates = |pem: Vec<u8>| -> Vec<ureq::tls::Certificate<'static>> {
        ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item.unwrap() {
                ureq::tls::PemItem::Certificate(c) => Some(c),
                _ => None,
            })
            .collect()
    };
    let client = client.map(|(cert, key)| {
        let key = ureq::tls::PrivateKey::from_pem(&read(key)).unwrap();
        ureq::tls::ClientCert::new_with_certs(&certificates(read(cert)), key)
    });
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = ureq::tls::TlsConfig::builder()
        .unversioned_rustls_crypto_provider(provider)
        .root_certs(ureq::tls::RootCerts::from(certificates(read(ca_fixture))))
        .client_cert(client)
        .build();
    // The node is on loopback: never through a proxy the shell names.
    ureq::Agent::config_builder()
        .proxy(None)
        .tls_config(tls)
        .http_status_as_error(false)
        .build()
        .into()
}

/// A node's config serving HTTPS with the `localhost` certificate the
/// test CA signed.
fn https_config(dir: &std::path::Path) -> Config {
    let mut c = node_config(dir);
    c.http.tls_cert_file = Some(fixtures().join("localhost-cert.pem"));
    c.http.tls_key_file = Some(fixtures().join("localhost-key.pem"));
    c
}

/// With `http.tls_client_ca_file` the node serves only clients presenting
/// a certificate that CA signed (mutual TLS): such a client ingests and
/// the hook is delivered; a client with no certificate, or one another CA
/// signed, is refused in the handshake. A reload that drops the key lets
/// every client in again. A file that does not load stops the start,
/// naming the key and the file.
#[test]
fn with_a_client_ca_the_node_serves_only_clients_it_signed() {
    let fixtures = fixtures();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goad.toml");
    let write_config = |client_ca: &str| {
        let text = format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\n[http]\ntls_cert_file = {:?}\n\
             tls_key_file = {:?}\n{client_ca}[[sources]]\nid = \"a\"\ntenant = \"t1\"\n\
             [[sources.sinks]]\ntype = \"http\"\nurl = {:?}\n",
            dir.path().join("data"),
            fixtures.join("localhost-cert.pem"),
            fixtures.join("localhost-key.pem"),
            receiver.url("/a")
        );
        std::fs::write(&path, text).unwrap();
    };
    let client_ca = format!(
        "tls_client_ca_file = {:?}\n",
        fixtures.join("test-client-ca.pem")
    );
    write_config(&client_ca);
    let node = start_with(Config::load(&path).unwrap(), Some(path.clone()));
    let url = |route: &str| format!("https://localhost:{}{route}", node.local_addr().port());
    let presenting = tls_agent("test-ca.pem", Some(("client-cert.pem", "client-key.pem")));
    let anonymous = agent_trusting("test-ca.pem");
    let stranger = tls_agent(
        "test-ca.pem",
        Some(("client-2-cert.pem", "client-2-key.pem")),
    );
    let health = |agent: &ureq::Agent| agent.get(url("/healthz")).call().map(|r| r.status());

    let ingested = presenting.post(url("/v1/sources/a/hooks")).send("mutual");
    assert_eq!(ingested.unwrap().status(), 202);
    assert!(receiver.wait_for(1, Duration::from_secs(20)));
    assert_eq!(receiver.received()[0].body, b"mutual");
    assert!(health(&anonymous).is_err(), "no client certificate");
    assert!(health(&stranger).is_err(), "a certificate of another CA");
    assert_eq!(health(&presenting).unwrap(), 200, "the node goes on");

    write_config("");
    let mut reload = presenting.post(url("/v1/reload")).send_empty().unwrap();
    assert_eq!(reload.status(), 200);
    assert_eq!(
        reload.body_mut().read_to_string().unwrap(),
        r#"{"applied":["http.tls_client_ca_file"],"restart_required":[]}"#
    );
    assert_eq!(health(&anonymous).unwrap(), 200);
    drop(node);

    let missing = fixtures.join("missing-ca.pem");
    let mut config = Config::load(&path).unwrap();
    config.http.tls_client_ca_file = Some(missing.clone());
    let options = NodeOptions::new(config);
    assert_eq!(
        Node::start(options).err().expect("refused").to_string(),
        format!(
            "http.tls_client_ca_file must be a PEM file of root certificates (cannot read it: \
             No such file or directory (os error 2)), got {missing:?}"
        )
    );
}

/// With `http.tls_cert_file` and `http.tls_key_file` the node speaks
/// HTTPS only: a client trusting the certificate's CA ingests (202, the
/// hook delivered, a body of many TLS records too) and reads the health
/// route; a plain HTTP request gets a TLS alert and a closed connection,
/// and the node goes on. A reload takes the files again (a renewed
/// certificate, at the same paths): new connections get the new one, and
/// files that do not load leave the one in hand.
#[test]
fn with_a_certificate_the_node_serves_https_only_and_a_reload_renews_it() {
    use std::io::{Read, Write};
    let fixtures = fixtures();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let install = |cert_fixture: &str, key_fixture: &str| {
        std::fs::copy(fixtures.join(cert_fixture), &cert).unwrap();
        std::fs::copy(fixtures.join(key_fixture), &key).unwrap();
    };
    install("localhost-cert.pem", "localhost-key.pem");
    let path = dir.path().join("goad.toml");
    std::fs::write(
        &path,
        format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\n[http]\ntls_cert_file = {cert:?}\n\
             tls_key_file = {key:?}\n[[sources]]\nid = \"a\"\ntenant = \"t1\"\n\
             [[sources.sinks]]\ntype = \"http\"\nurl = {:?}\n",
            dir.path().join("data"),
            receiver.url("/a")
        ),
    )
    .unwrap();
    let node = start_with(Config::load(&path).unwrap(), Some(path.clone()));
    let addr = node.local_addr();
    let url = |path: &str| format!("https://localhost:{}{path}", addr.port());
    let health = |agent: &ureq::Agent| {
        let mut reply = agent.get(url("/healthz")).call()?;
        let body = reply.body_mut().read_to_string().unwrap();
        Ok::<_, ureq::Error>((reply.status().as_u16(), body))
    };
    let healthy = (200, r#"{"status":"ok"}"#.to_string());

    let agent = agent_trusting("test-ca.pem");
    let mut ingested = agent
        .post(url("/v1/sources/a/hooks"))
        .send("over tls")
        .unwrap();
    assert_eq!(ingested.status(), 202);
    let answer = ingested.body_mut().read_to_string().unwrap();
    assert!(answer.starts_with("{\"id\":"), "{answer}");
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let status = agent.post(url("/v1/sources/a/hooks")).send(&large[..]);
    assert_eq!(status.unwrap().status(), 202);
    assert!(receiver.wait_for(2, Duration::from_secs(20)));
    let mut bodies: Vec<Vec<u8>> = receiver.received().into_iter().map(|r| r.body).collect();
    bodies.sort_by_key(Vec::len);
    assert_eq!(bodies, [b"over tls".to_vec(), large]);
    assert_eq!(health(&agent).unwrap(), healthy);

    let mut plain = std::net::TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut refused = Vec::new();
    plain.read_to_end(&mut refused).unwrap();
    assert_eq!(refused.first(), Some(&0x15), "a TLS alert: {refused:?}");
    assert_eq!(health(&agent).unwrap(), healthy);

    install("localhost-2-cert.pem", "localhost-2-key.pem");
    let mut reload = agent.post(url("/v1/reload")).send_empty().unwrap();
    assert_eq!(reload.status(), 200);
    assert_eq!(
        reload.body_mut().read_to_string().unwrap(),
        r#"{"applied":[],"restart_required":[]}"#
    );
    assert_eq!(health(&agent_trusting("test-ca-2.pem")).unwrap(), healthy);
    let old_ca = health(&agent_trusting("test-ca.pem")).unwrap_err();
    assert!(old_ca.to_string().contains("UnknownIssuer"), "{old_ca}");

    std::fs::write(&key, "not a key").unwrap();
    let mut refused = agent_trusting("test-ca-2.pem")
        .post(url("/v1/reload"))
        .send_empty()
        .unwrap();
    assert_eq!(refused.status(), 400);
    let refused: serde_json::Value =
        serde_json::from_str(&refused.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(refused["error"], "invalid_config");
    let message = refused["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!(
            "http.tls_key_file must be the certificate's PEM private key (no PEM private \
             key in it (no items found)), got {key:?}"
        )
    );
    assert_eq!(health(&agent_trusting("test-ca-2.pem")).unwrap(), healthy);
}

/// A TLS key file that is missing or does not fit the certificate, or a
/// certificate file without a certificate, stops the node's start with an
/// error naming the key and the file.
#[test]
fn tls_files_that_do_not_load_stop_the_start_naming_the_key() {
    let fixtures = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let refused = |cert_file: &str, key_file: &str| {
        let mut config = node_config(dir.path());
        config.http.tls_cert_file = Some(fixtures.join(cert_file));
        config.http.tls_key_file = Some(fixtures.join(key_file));
        let options = NodeOptions::new(config);
        Node::start(options).err().expect("refused").to_string()
    };
    let missing = fixtures.join("missing-key.pem");
    assert_eq!(
        refused("localhost-cert.pem", "missing-key.pem"),
        format!(
            "http.tls_key_file must be the certificate's PEM private key (cannot read it: \
             No such file or directory (os error 2)), got {missing:?}"
        )
    );
    let other = fixtures.join("google-service-account-test-key.pem");
    assert_eq!(
        refused("localhost-cert.pem", "google-service-account-test-key.pem"),
        format!(
            "http.tls_key_file must be the certificate's PEM private key (it does not fit \
             the certificate (keys may not be consistent: KeyMismatch)), got {other:?}"
        )
    );
    let key_as_cert = fixtures.join("localhost-key.pem");
    assert_eq!(
        refused("localhost-key.pem", "localhost-key.pem"),
        format!(
            "http.tls_cert_file must be a PEM certificate chain (no CERTIFICATE in it), \
             got {key_as_cert:?}"
        )
    );
}

pub(super) type TlsStream = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

/// A TLS connection to the node at `addr` (as `localhost`), trusting the
/// test CA, reading with a 10 s timeout.
pub(super) fn tls_stream(addr: SocketAddr) -> TlsStream {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(fixtures().join("test-ca.pem")).unwrap();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = std::net::TcpStream::connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    rustls::StreamOwned::new(tls, socket)
}

/// Over HTTPS the front's deadlines hold as over plain HTTP: a client that
/// sends half a request through TLS gets 408 through TLS and is closed.
#[test]
fn a_slow_https_client_gets_408_through_tls() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let node = start(https_config(dir.path()));
    let mut slow = tls_stream(node.local_addr());
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: h\r\nx-slow: ")
        .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = slow.read_to_end(&mut answer);
    assert!(started.elapsed() >= Duration::from_millis(250));
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout\r\n")
            && answer.contains("request_timeout"),
        "{answer} ({read:?})"
    );
    assert!(read.is_ok(), "closed with close_notify: {read:?}");
}

/// Over HTTPS a connection closes in stages as over plain HTTP: a client
/// that sends a body over `max_body_bytes` whole through TLS before it
/// reads gets its 413 through TLS, then the node's `close_notify`.
#[test]
fn over_https_a_body_past_max_body_bytes_can_be_sent_whole_and_its_413_read() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut c = https_config(dir.path());
    c.max_body_bytes = 64 * 1024;
    c.sources.push(source(
        "a",
        "t1",
        vec![SinkConfig::http("http://127.0.0.1:9/")],
    ));
    let node = start(c);
    let mut client = tls_stream(node.local_addr());
    let body = vec![b'x'; 8 << 20];
    let head = format!(
        "POST /v1/sources/a/hooks HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).unwrap();
    client.write_all(&body).expect("the whole body is taken");
    let mut answer = Vec::new();
    let read = client.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 413 ") && answer.contains("body_too_large"),
        "{answer} ({read:?})"
    );
    assert!(read.is_ok(), "closed with close_notify: {read:?}");
}

/// Over HTTPS the read budget holds as over plain HTTP: a large request
/// that finds the room taken waits (its TLS records unread), and is read
/// and answered once the request ahead of it is.
#[test]
fn over_https_a_request_past_the_read_budget_waits_for_the_one_ahead() {
    use std::io::{Read, Write};
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = https_config(dir.path());
    c.sources.push(source(
        "a",
        "t1",
        vec![SinkConfig::http(receiver.url("/a"))],
    ));
    c.max_body_bytes = 256 * 1024;
    c.http.max_buffered_bytes = (256 + 16) * 1024;
    c.http.read_timeout_ms = 120_000;
    let node = start(c);
    let port = node.local_addr().port();
    let url = move |path: &str| format!("https://localhost:{port}{path}");
    let agent = agent_trusting("test-ca.pem");
    let metric = |name: &str| {
        let mut reply = agent.get(url("/metrics")).call().unwrap();
        let text = reply.body_mut().read_to_string().unwrap();
        let samples = parse_prometheus(&text);
        samples
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, _, v)| v)
            .sum::<f64>()
    };
    let body = vec![b'x'; 200 * 1024];
    let request = raw_request(
        "POST",
        "/v1/sources/a/hooks",
        &[("connection", "close")],
        &body,
    );
    let head_and_some = request.len() - 190 * 1024;
    let mut first = tls_stream(node.local_addr());
    first.write_all(&request[..head_and_some]).unwrap();
    wait_until("the first holds its room", Duration::from_secs(10), || {
        metric("goad_http_buffered_bytes") == request.len() as f64
    });
    let second = {
        let agent = agent.clone();
        let target = url("/v1/sources/a/hooks");
        std::thread::spawn(move || {
            agent
                .post(target)
                .send(&body[..])
                .unwrap()
                .status()
                .as_u16()
        })
    };
    wait_until("the second waits", Duration::from_secs(10), || {
        metric("goad_http_buffer_waits_total") == 1.0
    });
    first.write_all(&request[head_and_some..]).unwrap();
    let mut answer = Vec::new();
    first.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 202 "), "{answer}");
    assert_eq!(second.join().unwrap(), 202);
    assert!(
        receiver.wait_for(2, Duration::from_secs(10)),
        "both delivered"
    );
}

/// The operator commands reach a node that serves HTTPS with a private
/// CA's certificate and asks for client certificates: `--ca-file` trusts
/// the CA, `--client-cert` and `--client-key` present the certificate.
/// Without the client certificate the handshake is refused; a certificate
/// without its key is an error naming the option.
#[test]
fn operator_commands_reach_a_mutual_tls_node_with_their_tls_options() {
    let fixtures = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let mut c = https_config(dir.path());
    c.http.tls_client_ca_file = Some(fixtures.join("test-client-ca.pem"));
    let node = start(c);
    let url = format!("https://localhost:{}", node.local_addr().port());
    let goad = |options: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_goad"));
        command.args(["pressure", "--node", &url]);
        for option in options {
            match option.starts_with("--") {
                true => command.arg(option),
                false => command.arg(fixtures.join(option)),
            };
        }
        command
            .env_remove("GOAD_ADMIN_TOKEN")
            .env_remove("GOAD_CA_FILE");
        let out = command.output().unwrap();
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        (out.status.code(), text(out.stdout), text(out.stderr))
    };
    let ca = ["--ca-file", "test-ca.pem"];
    let client = [
        "--client-cert",
        "client-cert.pem",
        "--client-key",
        "client-key.pem",
    ];

    let (code, stdout, stderr) = goad(&[&ca[..], &client[..]].concat());
    assert_eq!(code, Some(0), "{stderr}");
    let pressure: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(pressure.get("lag_ms").is_some(), "{stdout}");

    let (code, _, stderr) = goad(&ca);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with(&format!("goad: {url}/v1/pressure: ")),
        "{stderr}"
    );

    // Without the CA's certificate, or over plain HTTP, the error says
    // what to give.
    let (code, _, stderr) = goad(&client);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim_end(),
        format!("goad: {url}/v1/pressure: io: invalid peer certificate: UnknownIssuer (a node whose certificate a private CA signed: give that CA's certificate with --ca-file or GOAD_CA_FILE)")
    );
    let plain = format!("localhost:{}", node.local_addr().port());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["pressure", "--node", &plain])
        .env_remove("GOAD_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!("goad: http://{plain}/v1/pressure: protocol: "))
            && stderr.trim_end().ends_with(" (a node that serves HTTPS answers a plain request so: give its address as https://…)"),
        "{stderr}"
    );

    let (code, _, stderr) = goad(&[&ca[..], &client[..2]].concat());
    assert_eq!(code, Some(1));
    let cert = fixtures.join("client-cert.pem");
    assert_eq!(
        stderr.trim_end(),
        format!("goad: --client-cert must be given with --client-key (a certificate and its key), got {cert:?}")
    );
}
