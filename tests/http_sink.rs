//! The HTTP sink against a real receiver on loopback: what a request
//! carries (reference scenarios 57–66), the status mapping, and the
//! Standard Webhooks signature checked with an independent HMAC.

mod common;

use base64::Engine as _;
use common::*;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::{Engine, NewHook, RowStatus, SinkConfig};
use hmac::{Hmac, Mac};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
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

/// Scenario 57: the body verbatim, goad's headers and the content type.
#[test]
fn the_request_carries_the_body_verbatim_and_goads_headers() {
    let (got, _e, _d) = deliver(provider_hook(), Reply::status(200), |_| {});
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/hooks"));
    assert_eq!(r.body, br#"{"event":"x"}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-goad-source"), Some("stripe"));
    assert_eq!(r.header("x-goad-tenant"), Some("acme"));
    assert_eq!(r.header("x-goad-attempt"), Some("1"));
    let id = r.header("webhook-id").unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);
    let ts: u64 = r.header("webhook-timestamp").unwrap().parse().unwrap();
    assert!(ts.abs_diff(goad::runtime::wall_ms() / 1000) < 60);
}

/// Scenario 58: no content type is sent as application/octet-stream.
#[test]
fn a_hook_without_content_type_is_sent_as_octet_stream() {
    let (got, _e, _d) = deliver(NewHook::new("stripe", "raw"), Reply::status(200), |_| {});
    assert_eq!(
        got[0].header("content-type"),
        Some("application/octet-stream")
    );
}

/// Scenario 59: `method = "put"` and operator headers.
#[test]
fn method_and_operator_headers_are_honoured() {
    let (got, _e, _d) = deliver(NewHook::new("stripe", "raw"), Reply::status(200), |s| {
        s.sinks[0].method = Some("put".into());
        s.sinks[0]
            .headers
            .insert("x-trace".into(), "operator".into());
    });
    assert_eq!(got[0].method, "PUT");
    assert_eq!(got[0].header("x-trace"), Some("operator"));
}

/// A URL's user information is sent as a Basic authorization, decoded
/// (`%40` is `@`; a user alone has an empty password), and not in the
/// request line or `host`; a sink's own `authorization` header wins.
#[test]
fn a_urls_user_information_is_sent_as_a_decoded_basic_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let at = |user_info: &str, path: &str| {
        receiver
            .url(path)
            .replace("http://", &format!("http://{user_info}@"))
    };
    let mut operators = SinkConfig::http(at("alice:pw", "/c"));
    operators
        .headers
        .insert("authorization".into(), "Bearer operator".into());
    let sinks = vec![
        SinkConfig::http(at("alice:s%40cret%3A1", "/a")),
        SinkConfig::http(at("token", "/b")),
        operators,
    ];
    let mut c = config(dir.path());
    c.sources.push(source("s", "t", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let mut got: Vec<(String, String, String)> = receiver
        .received()
        .into_iter()
        .map(|r| {
            let auth = r.header("authorization").unwrap_or_default().to_string();
            let host = r.header("host").unwrap_or_default().to_string();
            (r.path, auth, host)
        })
        .collect();
    got.sort();
    let basic = |credentials: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(credentials)
        )
    };
    let host = receiver.url("").replace("http://", "");
    assert_eq!(
        got,
        [
            ("/a".into(), basic("alice:s@cret:1"), host.clone()),
            ("/b".into(), basic("token:"), host.clone()),
            ("/c".into(), "Bearer operator".into(), host),
        ]
    );
}

/// Scenarios 63 and 65: default forwarding drops credentials, framing and
/// goad's namespaces; goad's own id wins over a forged one; the operator's
/// header wins over the provider's; the dedupe key is sent.
#[test]
fn provider_headers_are_forwarded_minus_credentials_and_forgeries() {
    let (got, _e, _d) = deliver(provider_hook(), Reply::status(200), |s| {
        s.sinks[0]
            .headers
            .insert("x-trace".into(), "operator".into());
    });
    let r = &got[0];
    assert_eq!(r.header("x-github-event"), Some("push"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.header("x-goad-whatever"), None);
    assert_ne!(r.header("webhook-id"), Some("forged"));
    assert_eq!(
        r.headers.iter().filter(|(n, _)| n == "webhook-id").count(),
        1
    );
    assert_eq!(
        r.headers
            .iter()
            .filter(|(n, _)| n == "x-trace")
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>(),
        ["operator"]
    );
    assert_eq!(
        r.header("content-length"),
        Some("13"),
        "the real length, not a forwarded one"
    );
    assert_eq!(r.header("x-goad-dedupe-key"), Some("evt_1"));
    assert_eq!(
        r.header("x-goad-idempotency-key"),
        Some("acme:stripe:evt_1")
    );
}

/// Scenario 64: a `forward_headers` allowlist forwards only its names.
#[test]
fn a_forward_headers_allowlist_forwards_only_its_names() {
    let (got, _e, _d) = deliver(provider_hook(), Reply::status(200), |s| {
        s.forward_headers = Some(vec!["x-keep".into()])
    });
    assert_eq!(got[0].header("x-keep"), Some("1"));
    assert_eq!(got[0].header("x-github-event"), None);
    assert_eq!(got[0].header("x-trace"), None);
}

/// Scenario 66: no dedupe key, no dedupe header; the idempotency key is the id.
#[test]
fn without_a_dedupe_key_the_idempotency_key_is_the_hook_id() {
    let (got, _e, _d) = deliver(NewHook::new("stripe", "x"), Reply::status(200), |_| {});
    assert_eq!(got[0].header("x-goad-dedupe-key"), None);
    assert_eq!(
        got[0].header("x-goad-idempotency-key"),
        got[0].header("webhook-id")
    );
}

/// Standard Webhooks: one signature per secret, in order: `v1,` for a
/// shared secret, an HMAC-SHA256 of `id.timestamp.body` under the decoded
/// `whsec_` key (or the raw bytes), and `v1a,` for a `whsk_` private key,
/// an Ed25519 signature of the same bytes (RFC 8032's first test key here,
/// checked with its public key).
#[test]
fn the_signature_verifies_with_each_secret() {
    let b64 = base64::engine::general_purpose::STANDARD;
    let seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let public = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    std::env::set_var(
        "GOAD_TEST_SECRET_A",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    );
    std::env::set_var("GOAD_TEST_SECRET_B", "plain-secret");
    let private = format!("whsk_{}", b64.encode(hex::decode(seed).unwrap()));
    std::env::set_var("GOAD_TEST_SECRET_C", private);
    let (got, _e, _d) = deliver(provider_hook(), Reply::status(200), |s| {
        s.sinks[0].secret_env = Some(goad::config::OneOrMany::Many(vec![
            "GOAD_TEST_SECRET_A".into(),
            "GOAD_TEST_SECRET_B".into(),
            "GOAD_TEST_SECRET_C".into(),
        ]));
    });
    let r = &got[0];
    let signed = format!(
        "{}.{}.",
        r.header("webhook-id").unwrap(),
        r.header("webhook-timestamp").unwrap()
    );
    let expect = |key: &[u8]| {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        mac.update(signed.as_bytes());
        mac.update(&r.body);
        format!("v1,{}", b64.encode(mac.finalize().into_bytes()))
    };
    let key_a = b64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let header = r.header("webhook-signature").unwrap();
    let (symmetric, asymmetric) = header.rsplit_once(' ').unwrap();
    assert_eq!(
        symmetric,
        format!("{} {}", expect(&key_a), expect(b"plain-secret"))
    );
    let signature = b64
        .decode(asymmetric.strip_prefix("v1a,").unwrap())
        .unwrap();
    let public = hex::decode(public).unwrap();
    let public = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public);
    let content = [signed.as_bytes(), &r.body].concat();
    public
        .verify(&content, &signature)
        .expect("the private key's signature of id.timestamp.body");
}

/// A secret variable that is not set is a config error naming the key.
#[test]
fn a_missing_secret_variable_is_a_config_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http("http://127.0.0.1:9/");
    sink.secret_env = Some(goad::config::OneOrMany::One(
        "GOAD_TEST_UNSET_SECRET".into(),
    ));
    c.sources.push(source("s", "t", vec![sink]));
    let err = Engine::open(c.clone()).err().expect("refused").to_string();
    assert_eq!(err, "sources[0].sinks[0].secret_env must be the name of a set, non-empty environment variable, got \"GOAD_TEST_UNSET_SECRET\" (not set)");
    // An OAuth 2 client's secret likewise.
    let sink = &mut c.sources[0].sinks[0];
    sink.secret_env = None;
    sink.oauth2 = Some(goad::config::OAuth2Config::new(
        "https://auth.example.com/token",
        "c",
        "GOAD_TEST_UNSET_SECRET",
    ));
    let err = Engine::open(c).err().expect("refused").to_string();
    assert_eq!(err, "sources[0].sinks[0].oauth2.client_secret_env must be the name of a set, non-empty environment variable, got \"GOAD_TEST_UNSET_SECRET\" (not set)");
}

/// A sink's `headers_env` sends the values of environment variables (a
/// receiver's credentials, which the config file must not hold), read when
/// the sink is built; an operator `content-type` replaces the hook's (sent
/// once). An unset variable, or one whose value cannot be a header, is a
/// config error naming the key and the variable but not the value.
#[test]
fn secret_headers_come_from_the_environment_and_content_type_is_replaced() {
    std::env::set_var("GOAD_TEST_RECEIVER_AUTH", "Bearer receiver-token");
    std::env::set_var("GOAD_TEST_BROKEN_HEADER", "secret\nvalue");
    let (got, _e, _d) = deliver(provider_hook(), Reply::status(200), |s| {
        let sink = &mut s.sinks[0];
        sink.headers_env
            .insert("Authorization".into(), "GOAD_TEST_RECEIVER_AUTH".into());
        sink.headers
            .insert("content-type".into(), "application/cloudevents+json".into());
    });
    let r = &got[0];
    assert_eq!(r.header("authorization"), Some("Bearer receiver-token"));
    let content_types: Vec<&str> = r
        .headers
        .iter()
        .filter(|(name, _)| name == "content-type")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(content_types, ["application/cloudevents+json"]);

    let dir = tempfile::tempdir().unwrap();
    for (var, why) in [
        ("GOAD_TEST_UNSET_HEADER", "the name of a set, non-empty environment variable, got \"GOAD_TEST_UNSET_HEADER\" (not set)"),
        ("GOAD_TEST_BROKEN_HEADER", "a variable holding a valid HTTP header value (no control characters but tab), got \"GOAD_TEST_BROKEN_HEADER\""),
    ] {
        let mut c = config(dir.path());
        let mut sink = SinkConfig::http("http://127.0.0.1:9/");
        sink.headers_env.insert("x-api-key".into(), var.into());
        c.sources.push(source("s", "t", vec![sink]));
        let err = Engine::open(c).err().expect("refused").to_string();
        assert_eq!(err, format!("sources[0].sinks[0].headers_env.x-api-key must be {why}"));
    }
}

/// A sink's `url_env` names the variable holding its URL (a secret, as
/// Slack's incoming webhooks are): the hook goes there. An unset variable,
/// one that holds no http(s) URL, or TLS files with an http:// one, are
/// config errors naming the key and the variable, never the URL.
#[test]
fn a_url_from_the_environment_is_delivered_to_and_never_printed() {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    std::env::set_var("GOAD_TEST_SINK_URL", receiver.url("/T000/B000/s3cr3t"));
    std::env::set_var("GOAD_TEST_BAD_URL", "hooks.example.com/s3cr3t");
    let dir = tempfile::tempdir().unwrap();
    let from_env = |var: &str| SinkConfig {
        url_env: Some(var.into()),
        ..SinkConfig::of_kind("http")
    };
    let mut c = config(dir.path());
    c.sources.push(source(
        "slack",
        "acme",
        vec![from_env("GOAD_TEST_SINK_URL")],
    ));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("slack", "hi")).unwrap();
    engine.tick().unwrap();
    let received = receiver.received();
    assert_eq!(
        (received.len(), received[0].path.as_str()),
        (1, "/T000/B000/s3cr3t")
    );
    drop(engine);

    let refused = |sink: SinkConfig| {
        let mut c = c.clone();
        c.sources[0].sinks[0] = sink;
        let error = Engine::open(c).err().expect("a config error").to_string();
        assert!(!error.contains("s3cr3t"), "{error}");
        error
    };
    assert_eq!(
        refused(from_env("GOAD_TEST_UNSET_URL")),
        "sources[0].sinks[0].url_env must be the name of a set, non-empty environment \
         variable, got \"GOAD_TEST_UNSET_URL\" (not set)"
    );
    assert_eq!(
        refused(from_env("GOAD_TEST_BAD_URL")),
        "sources[0].sinks[0].url_env must be a variable holding an http:// or https:// URL \
         with a host, got \"GOAD_TEST_BAD_URL\""
    );
    let ca_file = fixtures().join("test-ca.pem");
    let plain_with_ca = SinkConfig {
        ca_file: Some(ca_file.clone()),
        ..from_env("GOAD_TEST_SINK_URL")
    };
    assert_eq!(
        refused(plain_with_ca),
        format!(
            "sources[0].sinks[0].ca_file must be absent with an http:// url (only TLS uses \
             it), got {ca_file:?}"
        )
    );
}

/// The status mapping over real HTTP (scenarios 60 and 61 among them: a
/// 503 without `Retry-After`, a 302 not followed): the row's state after
/// one attempt.
/// A failure's error quotes the start of the answer's body, where a
/// receiver says why (its first 256 bytes, whitespace runs as one space,
/// "…" where cut).
#[test]
fn statuses_map_to_delivered_permanent_retry_after_or_transient() {
    let html = format!("<html>\n<body>{}", "x".repeat(1_000));
    let html_quoted = format!("HTTP status 503: <html> <body>{}…", "x".repeat(243));
    let cases: &[(Reply, RowStatus, Option<&str>)] = &[
        (Reply::status(204), RowStatus::Pending, None),
        (
            Reply::status(200).with_body("x".repeat(100_000)),
            RowStatus::Pending,
            None,
        ),
        (
            Reply::status(400).with_body("{\n  \"error\": \"unknown event type\"\n}\n"),
            RowStatus::Dead,
            Some("sink http: permanent: HTTP status 400: { \"error\": \"unknown event type\" }"),
        ),
        (
            Reply::status(503).with_body(html.clone()),
            RowStatus::Pending,
            Some(&html_quoted),
        ),
        (
            Reply::status(410),
            RowStatus::Dead,
            Some("sink http: permanent: HTTP status 410"),
        ),
        (
            Reply::status(422),
            RowStatus::Dead,
            Some("sink http: permanent: HTTP status 422"),
        ),
        (
            Reply::status(429).header("retry-after", "30"),
            RowStatus::Pending,
            Some("retry after 30000 ms: HTTP status 429"),
        ),
        (
            Reply::status(503),
            RowStatus::Pending,
            Some("HTTP status 503"),
        ),
        (
            Reply::status(302).header("location", "/elsewhere"),
            RowStatus::Pending,
            Some("HTTP status 302"),
        ),
    ];
    for (reply, status, error) in cases {
        let (got, engine, _d) = deliver(NewHook::new("stripe", "x"), reply.clone(), |_| {});
        let code = reply.status;
        assert_eq!(
            got.len(),
            1,
            "{code}: exactly one request (redirects are not followed)"
        );
        let rows = rows(&engine);
        if (200..300).contains(&code) {
            assert!(rows.is_empty(), "{code}: delivered rows are deleted");
            continue;
        }
        assert_eq!(
            (rows[0].record.status, rows[0].record.attempts),
            (*status, 1),
            "{code}"
        );
        assert_eq!(rows[0].record.error.as_deref(), *error, "{code}");
    }
}

/// A hook value that cannot be sent as a header (a library caller's dedupe
/// key with a line break, first met in the idempotency key built on it) is
/// dead at its first attempt: no retry could send it.
#[test]
fn a_hook_value_that_is_no_valid_header_is_a_permanent_failure() {
    let hook = NewHook {
        dedupe_key: Some("evt\n1".into()),
        ..NewHook::new("stripe", "x")
    };
    let (got, engine, _d) = deliver(hook, Reply::status(200), |_| {});
    assert!(got.is_empty(), "nothing was sent");
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].record.attempts, dead[0].record.error.as_deref()),
        (
            1,
            Some("sink http: permanent: cannot send \"acme:stripe:evt\\n1\" in a header: failed to parse header value")
        )
    );
}

/// Header values beyond ASCII (UTF-8 text, which HTTP carries as opaque
/// bytes and the node accepts at ingest) are sent byte for byte, not refused.
#[test]
fn utf8_header_values_are_sent_verbatim() {
    let hook = NewHook {
        headers: vec![("x-note".into(), "José ☃".into())],
        dedupe_key: Some("évt_1".into()),
        ..NewHook::new("stripe", "x")
    };
    let (got, engine, _d) = deliver(hook, Reply::status(200), |_| {});
    assert_eq!(got.len(), 1, "{:?}", dead(&engine));
    assert_eq!(got[0].header("x-note"), Some("José ☃"));
    assert_eq!(got[0].header("x-goad-dedupe-key"), Some("évt_1"));
    assert_eq!(
        got[0].header("x-goad-idempotency-key"),
        Some("acme:stripe:évt_1")
    );
    assert_eq!(engine.hook_count().unwrap(), 0, "delivered and reclaimed");
}

/// A connection refused is a transient failure with the transport's error.
#[test]
fn an_unreachable_endpoint_is_a_transient_failure() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    c.sources.push(source(
        "s",
        "t",
        vec![SinkConfig::http(format!("http://127.0.0.1:{port}/"))],
    ));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick_within(Duration::from_secs(10)).unwrap();
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0]
            .record
            .error
            .as_deref()
            .unwrap()
            .starts_with("sink http: "),
        "{:?}",
        dead[0].record.error
    );
}

/// An https:// endpoint whose certificate chains to the sink's `ca_file`
/// (a private CA) gets the hook over TLS; one whose sink trusts Mozilla's
/// roots (no `ca_file`) gets nothing, and the attempt's failure names the
/// certificate. A `ca_file` that is missing or holds no certificate is a
/// config error naming the key and the file.
#[test]
fn an_https_endpoint_is_trusted_through_the_sinks_ca_file() {
    let fixtures = fixtures();
    let receiver = Receiver::start_tls(
        include_bytes!("fixtures/localhost-cert.pem"),
        include_bytes!("fixtures/localhost-key.pem"),
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
            "sink http: io: invalid peer certificate: UnknownIssuer".to_string()
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
        include_bytes!("fixtures/localhost-cert.pem"),
        include_bytes!("fixtures/localhost-key.pem"),
        include_bytes!("fixtures/test-client-ca.pem"),
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
    // handshake is over: the client may see the alert, or the closed
    // socket first.
    let refusals = [
        "sink http: io: received fatal alert: CertificateRequired",
        "sink http: io: received fatal alert: UnknownCA",
        "sink http: io: Broken pipe (os error 32)",
        "sink http: io: Connection reset by peer (os error 104)",
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

/// botocore's SigV4 signature of a request (`python3` with botocore, which
/// moto brings: `tools/test` installs it): AWS's own Python signer, an
/// implementation independent of goad's.
const BOTOCORE_SIGNATURE: &str = r#"
import base64, json, sys
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
d = json.load(sys.stdin)
request = AWSRequest(method=d["method"], url=d["url"], data=base64.b64decode(d["body"]), headers=d["headers"])
request.context["timestamp"] = d["headers"]["x-amz-date"]
auth = SigV4Auth(Credentials(d["key"], d["secret"], d["token"]), d["service"], d["region"])
print(auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request))
"#;

/// An HTTP sink with `aws_service` signs each request with AWS Signature
/// Version 4, as a Lambda function URL with `AWS_IAM` auth asks: the
/// credentials of its variables (the session token sent along), the
/// service and region in the scope, the host, content type and `x-amz-*`
/// headers signed, and the signature botocore computes for the same
/// request, query, body and time.
#[test]
fn an_aws_signed_sink_sends_the_signature_aws_computes() {
    let vars = [
        ("GOAD_TEST_SIGV4_KEY_ID", "AKIDEXAMPLE"),
        (
            "GOAD_TEST_SIGV4_SECRET",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        ),
        ("GOAD_TEST_SIGV4_SESSION", "session-token-1"),
    ];
    vars.iter()
        .for_each(|(var, value)| std::env::set_var(var, value));
    let (got, engine, _d) = deliver(provider_hook(), Reply::status(200), |s| {
        let sink = &mut s.sinks[0];
        sink.url = Some(format!("{}?b=2&a=1", sink.url.as_ref().unwrap()));
        sink.aws_service = Some("lambda".into());
        sink.region = Some("eu-west-1".into());
        sink.access_key_id_env = Some(vars[0].0.into());
        sink.secret_access_key_env = Some(vars[1].0.into());
        sink.session_token_env = Some(vars[2].0.into());
    });
    assert_eq!(got.len(), 1);
    let sent = &got[0];
    assert_eq!(sent.header("x-amz-security-token"), Some("session-token-1"));
    let amz_date = sent.header("x-amz-date").unwrap();
    let authorization = sent.header("authorization").unwrap();
    let (scope, signature) = authorization.split_once(", Signature=").unwrap();
    assert_eq!(
        scope,
        format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/eu-west-1/lambda/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token",
            &amz_date[..8]
        )
    );
    let signed: serde_json::Map<String, serde_json::Value> =
        ["content-type", "x-amz-date", "x-amz-security-token"]
            .iter()
            .map(|name| (name.to_string(), sent.header(name).unwrap().into()))
            .collect();
    let host = sent.header("host").unwrap();
    let request = serde_json::json!({
        "method": sent.method, "url": format!("http://{host}{}", sent.path),
        "headers": signed, "body": base64::engine::general_purpose::STANDARD.encode(&sent.body),
        "key": vars[0].1, "secret": vars[1].1, "token": vars[2].1,
        "service": "lambda", "region": "eu-west-1",
    });
    let mut python = std::process::Command::new("python3")
        .args(["-c", BOTOCORE_SIGNATURE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let stdin = python.stdin.as_mut().unwrap();
    stdin.write_all(request.to_string().as_bytes()).unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "botocore signs (tools/test installs moto, which brings it)"
    );
    assert_eq!(signature, String::from_utf8(out.stdout).unwrap().trim());
    assert!(rows(&engine).is_empty(), "delivered");
}

/// An unsigned JWT carrying `claims` (goad reads its `exp`; the receiver,
/// here, checks nothing).
fn jwt_of(claims: serde_json::Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("e30.{}.sig", b64.encode(claims.to_string()))
}

/// The `n`-th ID token a stand-in issues, for the sink's audience, to
/// expire in 2096 (held as long as the test runs).
fn id_token(n: u32) -> String {
    let claims =
        serde_json::json!({"aud": "https://svc-abc.a.run.app", "n": n, "exp": 4_000_000_000u64});
    jwt_of(claims)
}

/// A receiver that answers 401 to its `refused`-th request (counting from
/// 1), 200 to the others.
fn refusing_once(refused: u32) -> Receiver {
    let seen = std::sync::atomic::AtomicU32::new(0);
    Receiver::start(move |_| {
        match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == refused {
            true => Reply::status(401),
            false => Reply::status(200),
        }
    })
    .unwrap()
}

/// A config whose source `s` delivers to `receiver` with a Google ID
/// token of audience `https://svc-abc.a.run.app` from `credentials`.
fn id_token_config(dir: &std::path::Path, receiver: &Receiver, credentials: &str) -> goad::Config {
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.google_id_token = Some(goad::config::GoogleIdTokenConfig {
        audience: "https://svc-abc.a.run.app".into(),
        credentials: Some(credentials.into()),
    });
    let mut c = config(dir);
    c.sources.push(source("s", "t", vec![sink]));
    c
}

/// The bearer tokens a receiver got.
fn bearers(receiver: &Receiver) -> Vec<String> {
    let received = receiver.received();
    let bearer = |r: &Received| r.header("authorization").unwrap().to_string();
    received.iter().map(bearer).collect()
}

/// `google_id_token` with `credentials = "metadata"`: each request carries
/// the metadata server's ID token for the sink's audience (asked with
/// `Metadata-Flavor: Google`, the audience percent-encoded, `format=full`),
/// kept while its `exp` is far; a 401 to a token held a while drops it and
/// the retry carries a new one, as Cloud Run asks of a caller.
#[test]
fn a_google_id_token_sink_sends_the_metadata_servers_token_for_its_audience() {
    let issued = std::sync::atomic::AtomicU32::new(0);
    let metadata = Receiver::start(move |r| {
        if r.header("metadata-flavor") != Some("Google") {
            return Reply::status(403);
        }
        let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Reply::status(200).with_body(id_token(n))
    })
    .unwrap();
    std::env::set_var(
        "GCE_METADATA_HOST",
        metadata.url("").trim_start_matches("http://"),
    );
    let receiver = refusing_once(2);
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(id_token_config(dir.path(), &receiver, "metadata")).unwrap();
    commit_and_tick(&engine, "one");
    commit_and_tick(&engine, "two");
    let asked: Vec<String> = metadata.received().into_iter().map(|r| r.path).collect();
    let path = "/computeMetadata/v1/instance/service-accounts/default/identity\
                ?audience=https%3A%2F%2Fsvc-abc.a.run.app&format=full";
    assert_eq!(asked, [path, path]);
    let sent = [1, 1, 2].map(|n| format!("Bearer {}", id_token(n)));
    assert_eq!(bearers(&receiver), sent);
    assert!(rows(&engine).is_empty(), "both delivered");
}

/// `google_id_token` with `credentials = "service_account"`: the key file
/// `GOOGLE_APPLICATION_CREDENTIALS` names is read when the engine opens (a
/// missing one is a config error naming the key and the file); its token
/// endpoint gets a JWT bearer grant asking for the sink's audience
/// (`target_audience`), and its `id_token` is sent, once for both hooks.
#[test]
fn a_google_id_token_sink_exchanges_a_service_account_key_for_its_token() {
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("key.json");
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", &key_path);
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = id_token_config(dir.path(), &receiver, "service_account");
    let refused = Engine::open(c.clone()).err().expect("no key file");
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].google_id_token.credentials must be \"service_account\" only \
             with a usable service-account key file at GOOGLE_APPLICATION_CREDENTIALS (cannot \
             read {}: No such file or directory (os error 2)), got \"service_account\"",
            key_path.display()
        )
    );
    let token_endpoint = Receiver::start(|_| {
        Reply::status(200).with_body(serde_json::json!({"id_token": id_token(1)}).to_string())
    })
    .unwrap();
    let token_uri = token_endpoint.url("/token");
    let key_file = service_account_key_file(&token_uri);
    std::fs::write(&key_path, key_file.to_string()).unwrap();
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "one");
    commit_and_tick(&engine, "two");
    assert_eq!(
        bearers(&receiver),
        [1, 1].map(|n| format!("Bearer {}", id_token(n)))
    );
    let grants = token_endpoint.received();
    assert_eq!(grants.len(), 1, "one token for both");
    let form = String::from_utf8(grants[0].body.clone()).unwrap();
    let assertion = form
        .strip_prefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=")
        .expect("a JWT bearer grant");
    let claims = assertion.split('.').nth(1).unwrap();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims: serde_json::Value = serde_json::from_slice(&b64.decode(claims).unwrap()).unwrap();
    assert_eq!(claims["target_audience"], "https://svc-abc.a.run.app");
    assert_eq!(claims["iss"], "goad@p.iam.gserviceaccount.com");
    assert_eq!(claims["aud"], token_uri);
    assert_eq!(claims.get("scope"), None);
}

/// A token endpoint that issues `tok-1`, `tok-2`, … (one per request).
fn token_endpoint() -> Receiver {
    let issued = std::sync::atomic::AtomicU32::new(0);
    Receiver::start(move |_| {
        let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Reply::status(200)
            .header("content-type", "application/json")
            .with_body(format!(
                r#"{{"access_token": "tok-{n}", "token_type": "Bearer", "expires_in": 3600}}"#
            ))
    })
    .unwrap()
}

/// An HTTP sink with `oauth2` sends `authorization: Bearer` with a token of
/// the client-credentials grant (client authenticated with HTTP Basic,
/// each part form-encoded), kept across deliveries. A 401 to a token held
/// a while drops it and is retried with a new one; a 401 to a fresh token
/// is the receiver's refusal, dead-lettered.
#[test]
fn an_oauth2_sink_sends_the_grants_token_and_asks_again_after_a_401() {
    use std::sync::atomic::{AtomicU32, Ordering};
    std::env::set_var("GOAD_TEST_OAUTH2_SECRET", "s3cret:/");
    let tokens = token_endpoint();
    let accepted = std::sync::Arc::new(AtomicU32::new(1));
    let accepting = accepted.clone();
    let receiver = Receiver::start(move |r| {
        let wanted = format!("Bearer tok-{}", accepting.load(Ordering::SeqCst));
        match r.header("authorization") == Some(wanted.as_str()) {
            true => Reply::status(200),
            false => Reply::status(401).with_body("invalid_token"),
        }
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    let mut sink = SinkConfig::http(receiver.url("/in"));
    sink.oauth2 = Some(goad::config::OAuth2Config {
        scope: Some("hooks:write".into()),
        audience: Some("https://api.example.com".into()),
        ..goad::config::OAuth2Config::new(
            tokens.url("/token"),
            "goad client",
            "GOAD_TEST_OAUTH2_SECRET",
        )
    });
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "a");
    commit_and_tick(&engine, "b");
    // The receiver now takes only the next token.
    accepted.store(2, Ordering::SeqCst);
    commit_and_tick(&engine, "c");
    // And then none.
    accepted.store(99, Ordering::SeqCst);
    commit_and_tick(&engine, "d");
    let seen: Vec<(String, String, u16)> = receiver
        .received()
        .into_iter()
        .map(|r| {
            let auth = r.header("authorization").unwrap_or_default().to_string();
            (String::from_utf8(r.body).unwrap(), auth, r.status)
        })
        .collect();
    let sent =
        |body: &str, token: u32, status| (body.to_string(), format!("Bearer tok-{token}"), status);
    assert_eq!(
        seen,
        [
            sent("a", 1, 200),
            sent("b", 1, 200),
            sent("c", 1, 401),
            sent("c", 2, 200),
            sent("d", 2, 401),
            sent("d", 3, 401),
        ]
    );
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            2,
            "sink http: permanent: HTTP status 401: invalid_token".to_string()
        )]
    );
    let asked = tokens.received();
    assert_eq!(asked.len(), 3);
    let basic = base64::engine::general_purpose::STANDARD.encode("goad%20client:s3cret%3A%2F");
    for request in &asked {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/token")
        );
        assert_eq!(
            request.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
        assert_eq!(
            request.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(
            String::from_utf8_lossy(&request.body),
            "grant_type=client_credentials&scope=hooks%3Awrite&audience=https%3A%2F%2Fapi.example.com"
        );
    }
}

/// With `client_auth = "body"` the client's id and secret go in the token
/// request's form, and no `authorization` is sent to the token endpoint; a
/// token endpoint that fails fails the attempt, naming it.
#[test]
fn an_oauth2_client_may_authenticate_in_the_form_and_a_failing_endpoint_is_named() {
    std::env::set_var("GOAD_TEST_OAUTH2_BODY_SECRET", "s3cret");
    let tokens = token_endpoint();
    let refusing =
        Receiver::start(|_| Reply::status(400).with_body(r#"{"error":"invalid_client"}"#)).unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    let grant = |token_url: String| goad::config::OAuth2Config {
        client_auth: goad::config::ClientAuth::Body,
        ..goad::config::OAuth2Config::new(token_url, "goad", "GOAD_TEST_OAUTH2_BODY_SECRET")
    };
    let mut good = SinkConfig::http(receiver.url("/good"));
    good.oauth2 = Some(grant(tokens.url("/token")));
    let mut bad = SinkConfig::http(receiver.url("/bad"));
    bad.oauth2 = Some(grant(refusing.url("/token")));
    c.sources.push(source("s", "t", vec![good, bad]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].path.as_str(), got[0].header("authorization")),
        ("/good", Some("Bearer tok-1"))
    );
    let asked = tokens.received();
    assert_eq!(asked[0].header("authorization"), None);
    assert_eq!(
        String::from_utf8_lossy(&asked[0].body),
        "grant_type=client_credentials&client_id=goad&client_secret=s3cret"
    );
    let token_url = refusing.url("/token");
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            format!(
                r#"sink http: cannot get an OAuth 2 token from {token_url}: HTTP status 400: {{"error":"invalid_client"}}"#
            )
        )]
    );
}

/// With `client_auth = "private_key_jwt"` the client proves itself with a
/// JWT it signs with its private key (RFC 7523 §2.2: ES256 here, the key
/// read from `private_key_file` and named by `key_id`), for the token
/// endpoint, with an id of its own; no secret and no `authorization` go
/// to the token endpoint, and the token serves both hooks.
#[test]
fn an_oauth2_client_may_authenticate_with_a_jwt_signed_by_its_key() {
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        b64.encode(pkcs8.as_ref())
    );
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("client-key.pem");
    std::fs::write(&key_path, pem).unwrap();
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let token_url = tokens.url("/token");
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.oauth2 = Some(goad::config::OAuth2Config {
        client_secret_env: None,
        client_auth: goad::config::ClientAuth::PrivateKeyJwt,
        private_key_file: Some(key_path),
        key_id: Some("k-1".into()),
        ..goad::config::OAuth2Config::new(&token_url, "goad", "")
    });
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "one");
    commit_and_tick(&engine, "two");
    assert_eq!(bearers(&receiver), ["Bearer tok-1", "Bearer tok-1"]);
    let asked = tokens.received();
    assert_eq!(asked.len(), 1, "one token for both");
    assert_eq!(asked[0].header("authorization"), None);
    let (header, claims, signed, signature) = client_assertion(&asked[0]);
    assert_eq!(
        header,
        serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": "k-1"})
    );
    assert_eq!(
        (&claims["iss"], &claims["sub"]),
        (&"goad".into(), &"goad".into())
    );
    assert_eq!(claims["aud"], token_url);
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap(),
        claims["exp"].as_u64().unwrap(),
    );
    assert_eq!(exp - iat, 300);
    assert!(claims["jti"].as_str().is_some_and(|jti| !jti.is_empty()));
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P256_SHA256_FIXED,
        pair.public_key().as_ref(),
    );
    public
        .verify(signed.as_bytes(), &signature)
        .expect("signed with the client's key");
}

/// The client assertion of a token request's form: its header and claims,
/// what it signs and its signature.
fn client_assertion(request: &Received) -> (serde_json::Value, serde_json::Value, String, Vec<u8>) {
    let form = String::from_utf8(request.body.clone()).unwrap();
    let assertion = form
        .strip_prefix(
            "grant_type=client_credentials&client_id=goad&client_assertion_type=\
             urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=",
        )
        .expect("a client assertion");
    let parts: Vec<&str> = assertion.split('.').collect();
    let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let decoded = |part: &str| -> serde_json::Value {
        serde_json::from_slice(&url_safe.decode(part).unwrap()).unwrap()
    };
    (
        decoded(parts[0]),
        decoded(parts[1]),
        format!("{}.{}", parts[0], parts[1]),
        url_safe.decode(parts[2]).unwrap(),
    )
}

/// `openssl` run with `args`; its standard output.
fn openssl(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
    out.stdout
}

/// The base64url thumbprint `openssl` gives the PEM certificate at `path`
/// with `digest` (`-sha1`, `-sha256`).
fn thumbprint(path: &std::path::Path, digest: &str) -> String {
    let out = openssl(&[
        "x509".as_ref(),
        "-noout".as_ref(),
        "-fingerprint".as_ref(),
        digest.as_ref(),
        "-in".as_ref(),
        path.as_os_str(),
    ]);
    let out = String::from_utf8(out).unwrap();
    let hex = out.trim().rsplit('=').next().unwrap().replace(':', "");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// With a `certificate_file` beside its key, a `private_key_jwt`
/// assertion names the key by the certificate's SHA-1 and SHA-256
/// thumbprints (`x5t`, `x5t#S256`: how Microsoft Entra ID finds a
/// certificate credential), both as `openssl` computes them, and is signed
/// by that certificate's key (RS256, checked by `openssl` with the
/// certificate's public key).
#[test]
fn an_oauth2_client_key_may_be_named_by_its_certificate() {
    let fixtures = fixtures();
    let (key_path, cert_path) = (
        fixtures.join("localhost-key.pem"),
        fixtures.join("localhost-cert.pem"),
    );
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.oauth2 = Some(goad::config::OAuth2Config {
        client_secret_env: None,
        client_auth: goad::config::ClientAuth::PrivateKeyJwt,
        private_key_file: Some(key_path),
        certificate_file: Some(cert_path.clone()),
        ..goad::config::OAuth2Config::new(tokens.url("/token"), "goad", "")
    });
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "one");
    assert_eq!(bearers(&receiver), ["Bearer tok-1"]);
    let (header, _, signed, signature) = client_assertion(&tokens.received()[0]);
    assert_eq!(
        header,
        serde_json::json!({
            "alg": "RS256",
            "typ": "JWT",
            "x5t": thumbprint(&cert_path, "-sha1"),
            "x5t#S256": thumbprint(&cert_path, "-sha256"),
        })
    );
    let public_key = dir.path().join("public.pem");
    let out = openssl(&[
        "x509".as_ref(),
        "-pubkey".as_ref(),
        "-noout".as_ref(),
        "-in".as_ref(),
        cert_path.as_os_str(),
    ]);
    std::fs::write(&public_key, out).unwrap();
    let (signed_path, signature_path) = (dir.path().join("signed"), dir.path().join("signature"));
    std::fs::write(&signed_path, signed).unwrap();
    std::fs::write(&signature_path, signature).unwrap();
    let verified = openssl(&[
        "dgst".as_ref(),
        "-sha256".as_ref(),
        "-verify".as_ref(),
        public_key.as_os_str(),
        "-signature".as_ref(),
        signature_path.as_os_str(),
        signed_path.as_os_str(),
    ]);
    assert_eq!(String::from_utf8(verified).unwrap().trim(), "Verified OK");
}

/// A `certificate_file` that is not the certificate of `private_key_file`'s
/// key is refused when the sink is built, naming the key.
#[test]
fn an_oauth2_client_certificate_of_another_key_is_refused() {
    let fixtures = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let cert_path = fixtures.join("localhost-2-cert.pem");
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http("http://127.0.0.1:9/hooks".to_string());
    sink.oauth2 = Some(goad::config::OAuth2Config {
        client_secret_env: None,
        client_auth: goad::config::ClientAuth::PrivateKeyJwt,
        private_key_file: Some(fixtures.join("localhost-key.pem")),
        certificate_file: Some(cert_path.clone()),
        ..goad::config::OAuth2Config::new("https://auth.example/token", "goad", "")
    });
    c.sources.push(source("s", "t", vec![sink]));
    let error = Engine::open(c).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        format!(
            "sources[0].sinks[0].oauth2.certificate_file must be the PEM certificate of private_key_file's key (its public key is not private_key_file's), got {cert_path:?}"
        )
    );
}

/// A receiver over raw TCP, so it can end a kept-alive connection the
/// moment a request arrives: it answers 200 with keep-alive, but closes
/// the connection unanswered on the requests `unanswered` numbers (from 0,
/// across connections). It records each request's connection (numbered
/// from 0), `webhook-id` and `x-goad-attempt`.
struct ClosingReceiver {
    url: String,
    seen: Arc<Mutex<Vec<(usize, String, String)>>>,
}

impl ClosingReceiver {
    fn start(unanswered: &'static [usize]) -> ClosingReceiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        std::thread::spawn(move || {
            for (connection, stream) in listener.incoming().enumerate() {
                let seen = recorded.clone();
                std::thread::spawn(move || {
                    let mut stream = stream.unwrap();
                    while let Some((id, attempt)) = read_request(&mut stream) {
                        let mut seen = seen.lock().unwrap();
                        let number = seen.len();
                        seen.push((connection, id, attempt));
                        if unanswered.contains(&number) {
                            return;
                        }
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        stream.write_all(ok).unwrap();
                    }
                });
            }
        });
        ClosingReceiver { url, seen }
    }

    fn seen(&self) -> Vec<(usize, String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

/// An engine whose source `s` delivers to `url`; a failed attempt waits a
/// minute, so a test sees each attempt once.
fn engine_delivering_to(dir: &std::path::Path, url: &str) -> Engine {
    let mut c = config(dir);
    c.retry.base_ms = 60_000;
    c.retry.max_ms = 60_000;
    c.sources
        .push(source("s", "t", vec![SinkConfig::http(url)]));
    Engine::open(c).unwrap()
}

/// One whole request from `stream`: its `webhook-id` and `x-goad-attempt`;
/// `None` at the end of the stream.
fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(head) = request.parse(&buf).unwrap() {
            let header = |name: &str| {
                let found = request
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name));
                String::from_utf8(found.unwrap().value.to_vec()).unwrap()
            };
            let length: usize = header("content-length").parse().unwrap();
            let (id, attempt) = (header("webhook-id"), header("x-goad-attempt"));
            while buf.len() < head + length {
                let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some((id, attempt));
        }
        let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The keep-alive race: a receiver closes an idle connection just as goad
/// reuses it (its idle timeout), so the connection ends with no answer and
/// the request never reached the receiver's application. goad sends it
/// again at once on a new connection, as the same attempt: no failure, no
/// backoff, no second attempt counted.
#[test]
fn a_request_on_a_kept_alive_connection_closed_as_it_was_reused_is_sent_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = ClosingReceiver::start(&[1]);
    let engine = engine_delivering_to(dir.path(), &receiver.url);
    // Each tick waits for its hook's row to settle (its count could be 0
    // if the row settled before the call), so the receiver's log is whole.
    let first = engine.commit(NewHook::new("s", "first")).unwrap();
    engine.tick().unwrap();
    let second = engine.commit(NewHook::new("s", "second")).unwrap();
    engine.tick().unwrap();
    let one = || "1".to_string();
    assert_eq!(
        receiver.seen(),
        [
            (0, first, one()),
            (0, second.clone(), one()),
            (1, second, one())
        ]
    );
    assert_eq!(rows(&engine).len(), 0, "both delivered");
}

/// A new connection that ends without an answer is the receiver's failure:
/// the attempt fails (transient, retried later), and is not sent again at
/// once.
#[test]
fn a_new_connection_closed_without_an_answer_fails_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = ClosingReceiver::start(&[0]);
    let engine = engine_delivering_to(dir.path(), &receiver.url);
    let id = engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(receiver.seen(), [(0, id, "1".to_string())]);
    let rows = rows(&engine);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].record.attempts, 1);
    assert_eq!(rows[0].record.status, RowStatus::Pending);
    let error = rows[0].record.error.as_deref().unwrap();
    assert_eq!(error, "io: Peer disconnected");
}

/// A reconfiguration keeps a sink whose options did not change, with its
/// kept-alive connection: the receiver sees the next delivery on the same
/// connection. A sink whose options changed is built anew (a new
/// connection).
#[test]
fn a_reconfiguration_keeps_an_unchanged_sinks_connection() {
    let receiver = ClosingReceiver::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source(
        "s",
        "t",
        vec![SinkConfig::http(receiver.url.clone())],
    ));
    let engine = Engine::open(c.clone()).unwrap();
    commit_and_tick(&engine, "before");
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "after an unchanged reconfiguration");
    c.sources[0].sinks[0]
        .headers
        .insert("x-team".into(), "payments".into());
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "after a changed one");
    let connections: Vec<usize> = receiver.seen().into_iter().map(|(c, _, _)| c).collect();
    assert_eq!(connections, [0, 0, 1]);
}

/// A reconfiguration keeps an unchanged OAuth 2 sink's token; a new client
/// secret builds the sink anew, which asks for a new token.
#[test]
fn a_reconfiguration_keeps_an_unchanged_sinks_oauth2_token() {
    let variable = "GOAD_TEST_OAUTH2_RELOAD_SECRET";
    std::env::set_var(variable, "first");
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http(receiver.url("/in"));
    sink.oauth2 = Some(goad::config::OAuth2Config::new(
        tokens.url("/token"),
        "goad",
        variable,
    ));
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c.clone()).unwrap();
    commit_and_tick(&engine, "a");
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "b");
    std::env::set_var(variable, "second");
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "c");
    let sent: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_string())
        .collect();
    assert_eq!(sent, ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]);
    assert_eq!(tokens.received().len(), 2);
}
