//! What a request carries: the body verbatim, goad's headers, the
//! operator's headers and credentials, forwarded provider headers
//! (reference scenarios 57–59 and 63–66), and header values as sent.

use super::*;
use goad::limits::HTTP_MAX_URL_BYTES;
use goad::CommitError;

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

/// Scenario 64: a `forward_headers` allowlist forwards only its names —
/// and the body's `content-encoding`, without which its bytes cannot be
/// read.
#[test]
fn a_forward_headers_allowlist_forwards_only_its_names() {
    let mut hook = provider_hook();
    hook.headers
        .push(("Content-Encoding".into(), "gzip".into()));
    let (got, _e, _d) = deliver(hook, Reply::status(200), |s| {
        s.forward_headers = Some(vec!["x-keep".into()])
    });
    assert_eq!(got[0].header("x-keep"), Some("1"));
    assert_eq!(got[0].header("content-encoding"), Some("gzip"));
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

/// A sink's `headers_env` sends the values of environment variables (a
/// receiver's credentials, which the config file must not hold), read when
/// the sink is built; an operator `content-type` replaces the hook's (sent
/// once). An unset variable, or one whose value cannot be a header, is a
/// config error naming the key and the variable but not the value.
#[test]
fn secret_headers_come_from_the_environment_and_content_type_is_replaced() {
    std::env::set_var("GOAD_TEST_RECEIVER_AUTH", "Bearer receiver-token");
    std::env::set_var("GOAD_TEST_BROKEN_HEADER", "secret\nvalue");
    std::env::set_var("GOAD_TEST_UNSENDABLE_AUTH", "Bearer sécret");
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
    for (header, var, why) in [
        ("x-api-key", "GOAD_TEST_UNSET_HEADER", "the name of a set, non-empty environment variable, got \"GOAD_TEST_UNSET_HEADER\" (not set)"),
        ("x-api-key", "GOAD_TEST_BROKEN_HEADER", "a variable holding a valid HTTP header value (no control characters but tab), got \"GOAD_TEST_BROKEN_HEADER\""),
        // ureq sends nothing but printable ASCII in an authorization header.
        ("authorization", "GOAD_TEST_UNSENDABLE_AUTH", "a variable holding printable ASCII (all an authorization header carries), got \"GOAD_TEST_UNSENDABLE_AUTH\""),
    ] {
        let mut c = config(dir.path());
        let mut sink = SinkConfig::http("http://127.0.0.1:9/");
        sink.headers_env.insert(header.into(), var.into());
        c.sources.push(source("s", "t", vec![sink]));
        let err = Engine::open(c).err().expect("refused").to_string();
        assert_eq!(err, format!("sources[0].sinks[0].headers_env.{header} must be {why}"));
    }
}

/// A sink's `url_env` names the variable holding its URL (a secret, as
/// Slack's incoming webhooks are): the hook goes there. An unset variable,
/// one that holds no http(s) URL, one with the line break its secret's
/// file left at its end, or one too long to send a request to, or TLS
/// files with an http:// one, are config errors naming the key and the
/// variable, never the URL.
#[test]
fn a_url_from_the_environment_is_delivered_to_and_never_printed() {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    std::env::set_var("GOAD_TEST_SINK_URL", receiver.url("/T000/B000/s3cr3t"));
    std::env::set_var("GOAD_TEST_BAD_URL", "hooks.example.com/s3cr3t");
    let from_a_file = receiver.url("/T000/B000/s3cr3t") + "\n";
    std::env::set_var("GOAD_TEST_FILED_URL", from_a_file);
    let long_url = receiver.url("/s3cr3t/");
    let long_url = long_url.clone() + &"p".repeat(HTTP_MAX_URL_BYTES + 1 - long_url.len());
    std::env::set_var("GOAD_TEST_LONG_URL", long_url);
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
    assert_eq!(
        refused(from_env("GOAD_TEST_FILED_URL")),
        "sources[0].sinks[0].url_env must be a variable holding a secret with no space or \
         line break at either end (a secret's file may leave one), got \"GOAD_TEST_FILED_URL\""
    );
    assert_eq!(
        refused(from_env("GOAD_TEST_LONG_URL")),
        "sources[0].sinks[0].url_env must be a URL of at most 16367 bytes (its request line \
         is sent as a header line, of at most 16384), got a URL of 16368 bytes"
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

/// A hook with a header no HTTP request could carry (a library caller's:
/// a node's ingest makes none) is refused as it is committed, naming the
/// header, and nothing is stored: a name that is no token, a value with a
/// line break or a NUL (the content type and the dedupe key are sent as
/// headers too), a 65th header, a line over 16 KiB (the dedupe key's
/// idempotency key's too).
#[test]
fn a_hook_with_a_header_no_request_could_carry_is_refused_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(config_with_http_sink(dir.path(), "http://127.0.0.1:9/")).unwrap();
    let with = |name: &str, value: &str| NewHook {
        headers: vec![("x-ok".into(), "ok".into()), (name.into(), value.into())],
        ..NewHook::new("s", "x")
    };
    let many = NewHook {
        headers: (0..65).map(|i| (format!("x-{i}"), "v".into())).collect(),
        ..NewHook::new("s", "x")
    };
    let long_line = "f".repeat(16 * 1024 - "x-big: \r\n".len() + 1);
    let cases = [
        (with("bad name", "v"), "header \"bad name\" is not an HTTP header name (a token of letters, digits and !#$%&'*+-.^_`|~)"),
        (with("", "v"), "header \"\" is not an HTTP header name (a token of letters, digits and !#$%&'*+-.^_`|~)"),
        (with("x-a", "a\r\nx-forged: 1"), "header \"x-a\" has a value with a control character (CR, LF, NUL, …), which HTTP cannot carry"),
        (with("x-a", "a\0b"), "header \"x-a\" has a value with a control character (CR, LF, NUL, …), which HTTP cannot carry"),
        (
            NewHook { dedupe_key: Some("evt\n1".into()), ..NewHook::new("s", "x") },
            "header \"x-goad-dedupe-key\" has a value with a control character (CR, LF, NUL, …), which HTTP cannot carry",
        ),
        (
            NewHook { content_type: Some("text/plain\r\n".into()), ..NewHook::new("s", "x") },
            "header \"content-type\" has a value with a control character (CR, LF, NUL, …), which HTTP cannot carry",
        ),
        (many, "header \"x-64\" is one more than the 64 headers a hook may carry"),
        (with("x-big", &long_line), "header \"x-big\" is a line of 16385 bytes, longer than the 16384 an HTTP sink sends"),
        // The dedupe key's own line fits (16,384 bytes), but not its
        // idempotency key's, which puts `t:s:` before it.
        (
            NewHook { dedupe_key: Some("k".repeat(16_363)), ..NewHook::new("s", "x") },
            "header \"x-goad-idempotency-key\" (the tenant, the source and the dedupe key) is a line of 16393 bytes, longer than the 16384 an HTTP sink sends",
        ),
        (
            NewHook { dedupe_key: Some("k".repeat(16_364)), ..NewHook::new("s", "x") },
            "header \"x-goad-dedupe-key\" is a line of 16385 bytes, longer than the 16384 an HTTP sink sends",
        ),
    ];
    for (hook, want) in cases {
        let refused = engine.commit(hook).unwrap_err();
        assert!(
            matches!(refused, CommitError::BadHeader { .. }),
            "{refused:?}"
        );
        assert_eq!(refused.to_string(), want);
    }
    assert_eq!(engine.hook_count().unwrap(), 0, "nothing stored");
}

/// Header values beyond ASCII (UTF-8 text, which HTTP carries as opaque
/// bytes and the node accepts at ingest) are sent byte for byte, not
/// refused: a hook's headers, content type and dedupe key, and a sink's own
/// headers (which the config check takes).
#[test]
fn utf8_header_values_are_sent_verbatim() {
    let hook = NewHook {
        headers: vec![("x-note".into(), "José ☃".into())],
        content_type: Some("text/plain; title=\"Grüße\"".into()),
        dedupe_key: Some("évt_1".into()),
        ..NewHook::new("stripe", "x")
    };
    let (got, engine, _d) = deliver(hook, Reply::status(200), |s| {
        s.sinks[0].headers.insert("x-site".into(), "Zürich".into());
    });
    assert_eq!(got.len(), 1, "{:?}", dead(&engine));
    assert_eq!(got[0].header("x-note"), Some("José ☃"));
    assert_eq!(
        got[0].header("content-type"),
        Some("text/plain; title=\"Grüße\"")
    );
    assert_eq!(got[0].header("x-site"), Some("Zürich"));
    assert_eq!(got[0].header("x-goad-dedupe-key"), Some("évt_1"));
    assert_eq!(
        got[0].header("x-goad-idempotency-key"),
        Some("acme:stripe:évt_1")
    );
    assert_eq!(engine.hook_count().unwrap(), 0, "delivered and reclaimed");
}

/// A sink URL of `HTTP_MAX_URL_BYTES`, the longest the config takes, is
/// delivered to with the longest request line goad sends (`PATCH`); a
/// longer one is refused by the config check (`tests/config.rs`).
/// A path and query beyond ASCII are sent percent-encoded, as a browser
/// sends them: a request target holds ASCII alone, and a strict server
/// refuses the raw bytes.
#[test]
fn a_url_beyond_ascii_is_sent_percent_encoded() {
    let (got, engine, _d) = deliver(NewHook::new("stripe", "x"), Reply::status(200), |s| {
        let url = s.sinks[0].url.clone().unwrap();
        s.sinks[0].url = Some(url.replace("/hooks", "/hooks/café?name=zoë&done=✓"));
    });
    assert_eq!(got.len(), 1, "{:?}", rows(&engine));
    assert_eq!(got[0].path, "/hooks/caf%C3%A9?name=zo%C3%AB&done=%E2%9C%93");
}

#[test]
fn a_sink_url_of_the_longest_length_is_delivered_to() {
    let (got, engine, _d) = deliver(NewHook::new("stripe", "x"), Reply::status(200), |s| {
        let url = s.sinks[0].url.clone().unwrap();
        let longest = url.clone() + &"p".repeat(HTTP_MAX_URL_BYTES - url.len());
        s.sinks[0].url = Some(longest);
        s.sinks[0].method = Some("patch".into());
    });
    assert_eq!(got.len(), 1, "{:?}", rows(&engine));
    let path_bytes = HTTP_MAX_URL_BYTES - got[0].header("host").unwrap().len() - "http://".len();
    assert_eq!(
        (got[0].method.as_str(), got[0].path.len()),
        ("PATCH", path_bytes)
    );
}

/// A hook at the header bounds -- 64 headers, one of them on a line of
/// `HTTP_MAX_HEADER_LINE_BYTES` (16 KiB, which a connection's write buffer
/// holds whole) -- is delivered with each header byte for byte.
#[test]
fn a_hook_with_64_headers_and_a_16_kib_line_is_delivered_whole() {
    let fits = "f".repeat(16 * 1024 - "x-big: \r\n".len());
    let mut headers: Vec<(String, String)> = (0..63)
        .map(|i| (format!("x-{i}"), format!("{i}")))
        .collect();
    headers.push(("x-big".into(), fits.clone()));
    let hook = NewHook {
        headers,
        ..NewHook::new("stripe", "x")
    };
    let (got, engine, _d) = deliver(hook, Reply::status(200), |_| {});
    assert_eq!(got.len(), 1, "{:?}", rows(&engine));
    assert_eq!(got[0].header("x-big"), Some(fits.as_str()));
    for i in 0..63 {
        assert_eq!(
            got[0].header(&format!("x-{i}")),
            Some(format!("{i}").as_str())
        );
    }
}
