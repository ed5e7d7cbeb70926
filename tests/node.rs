//! The node's HTTP API with real clients over loopback: every route and
//! status, authentication, ingest to delivery end to end, and what the node
//! does with malformed and slow requests.

mod common;

use common::http::{call, get, raw_request, Client, HttpReply};
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
        config,
        config_path,
        allow_open_admin: false,
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
        NodeOptions {
            config,
            config_path: None,
            allow_open_admin: false,
        },
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

#[test]
fn an_ingested_hook_is_acknowledged_once_durable_and_delivered_with_its_headers() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    c.sources.push(source(
        "gh",
        "acme",
        vec![SinkConfig::http(receiver.url("/in"))],
    ));
    let node = start(c);
    let reply = ingest(
        node.local_addr(),
        "gh",
        br#"{"action":"opened"}"#,
        &[
            ("content-type", "application/json"),
            ("x-github-event", "pull_request"),
            ("idempotency-key", "evt-42"),
            ("cookie", "session=secret"),
        ],
    );
    assert_eq!(reply.status, 202, "{}", reply.text());
    let id = reply.json()["id"].as_str().unwrap().to_string();
    // Durable on the answer: the hook is in the store (or already delivered).
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    let got = &receiver.received()[0];
    assert_eq!(got.body, br#"{"action":"opened"}"#);
    assert_eq!(got.header("webhook-id"), Some(id.as_str()));
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.header("x-github-event"), Some("pull_request"));
    assert_eq!(got.header("x-goad-dedupe-key"), Some("evt-42"));
    assert_eq!(got.header("x-goad-source"), Some("gh"));
    assert_eq!(got.header("cookie"), None);
    let engine = node.engine().unwrap();
    wait_until("the row settled", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 0
    });
}

/// A source's `dedupe_header` names the header whose value is the dedupe
/// key: a provider's redeliveries (GitHub's `X-GitHub-Delivery`) then reach
/// the sink with one idempotency key, while an `Idempotency-Key` header is
/// only a provider header there. Without it a hook has none.
#[test]
fn a_sources_dedupe_header_names_its_hooks_dedupe_key() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let mut gh = source("gh", "acme", vec![SinkConfig::http(receiver.url("/in"))]);
    gh.dedupe_header = Some("X-GitHub-Delivery".into());
    c.sources.push(gh);
    let node = start(c);
    let delivery = [
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("idempotency-key", "not-this-one"),
    ];
    for headers in [&delivery[..], &delivery[..], &delivery[1..]] {
        let reply = ingest(node.local_addr(), "gh", b"{}", headers);
        assert_eq!(reply.status, 202, "{}", reply.text());
    }
    assert!(receiver.wait_for(3, Duration::from_secs(10)));
    let mut keys: Vec<(Option<String>, Option<String>)> = receiver
        .received()
        .iter()
        .map(|r| {
            let header = |name| r.header(name).map(str::to_string);
            (
                header("x-goad-dedupe-key"),
                header("x-goad-idempotency-key"),
            )
        })
        .collect();
    keys.sort();
    let redelivered = (
        Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".to_string()),
        Some("acme:gh:72d3162e-cc78-11e3-81ab-4c9367dc0958".to_string()),
    );
    assert_eq!(keys[1..], [redelivered.clone(), redelivered]);
    assert_eq!(
        keys[0].0, None,
        "the hook without the header has no dedupe key"
    );
}

/// With `dedupe_window_ms`, a provider's redelivery within the window is
/// answered 202 with the first hook's id and not stored or delivered again;
/// `goad_duplicate_hooks_total` and the stats count it.
#[test]
fn a_redelivery_within_the_dedupe_window_gets_the_first_id_and_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let mut gh = source("gh", "acme", vec![SinkConfig::http(receiver.url("/in"))]);
    gh.dedupe_header = Some("x-github-delivery".into());
    gh.dedupe_window_ms = Some(86_400_000);
    c.sources.push(gh);
    let node = start(c);
    let addr = node.local_addr();
    let ids: Vec<String> = ["d-1", "d-1", "d-2", "d-1"]
        .iter()
        .map(|delivery| {
            let reply = ingest(addr, "gh", b"{}", &[("x-github-delivery", delivery)]);
            assert_eq!(reply.status, 202, "{}", reply.text());
            reply.json()["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!((&ids[1], &ids[3]), (&ids[0], &ids[0]));
    assert_ne!(ids[2], ids[0]);
    let engine = node.engine().unwrap();
    wait_until("both hooks delivered", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 0 && receiver.count() == 2
    });
    assert_eq!(metric(addr, "goad_duplicate_hooks_total", ""), 2.0);
    assert_eq!(metric(addr, "goad_commits_total", ""), 2.0);
    assert_eq!(get(addr, "/v1/stats").json()["shards"][0]["duplicates"], 2);
}

#[test]
fn ingest_refuses_unknown_sources_bad_tokens_large_bodies_and_missing_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    c.max_body_bytes = 16;
    std::env::set_var("NODE_TEST_INGEST_TOKEN", "tok-123");
    let mut s = source("gh", "acme", vec![SinkConfig::http(receiver.url("/in"))]);
    s.ingest_token_env = Some("NODE_TEST_INGEST_TOKEN".into());
    c.sources.push(s);
    let node = start(c);
    let addr = node.local_addr();

    let unknown = ingest(addr, "nope", b"{}", &[]);
    assert_eq!(
        (unknown.status, unknown.error_code().as_str()),
        (404, "unknown_source")
    );
    let missing = ingest(addr, "gh", b"{}", &[]);
    assert_eq!(
        (missing.status, missing.error_code().as_str()),
        (401, "unauthorized")
    );
    assert_eq!(missing.header("www-authenticate"), Some("Bearer"));
    let wrong = ingest(addr, "gh", b"{}", &[("authorization", "Bearer tok-124")]);
    assert_eq!(wrong.status, 401);
    let large = ingest(
        addr,
        "gh",
        &[b'x'; 17],
        &[("authorization", "Bearer tok-123")],
    );
    assert_eq!(
        (large.status, large.error_code().as_str()),
        (413, "body_too_large")
    );
    let no_length = Client::connect(addr).send_and_reply(
        b"POST /v1/sources/gh/hooks HTTP/1.1\r\nauthorization: Bearer tok-123\r\n\r\n",
    );
    assert_eq!(
        (no_length.status, no_length.error_code().as_str()),
        (411, "length_required")
    );
    let ok = ingest(addr, "gh", b"{}", &[("authorization", "Bearer tok-123")]);
    assert_eq!(ok.status, 202, "{}", ok.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    // Only the accepted hook reached the sink, and without the token.
    assert!(!receiver.wait_for(2, Duration::from_millis(200)));
    assert_eq!(receiver.received()[0].header("authorization"), None);

    let wrong_method = get(addr, "/v1/sources/gh/hooks");
    assert_eq!(
        (wrong_method.status, wrong_method.header("allow")),
        (405, Some("POST"))
    );
    let no_route = get(addr, "/v2/anything");
    assert_eq!(
        (no_route.status, no_route.error_code().as_str()),
        (404, "not_found")
    );
}

/// A chunked ingest body, arriving in pieces, is decoded and delivered
/// verbatim (the provider's framing is not forwarded), the connection
/// serves the next request, and a chunked body over `max_body_bytes` gets
/// 413 like one with a length.
#[test]
fn a_chunked_ingest_body_is_decoded_and_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    c.max_body_bytes = 16;
    c.sources.push(source(
        "gh",
        "acme",
        vec![SinkConfig::http(receiver.url("/in"))],
    ));
    let node = start(c);
    let addr = node.local_addr();
    let mut client = Client::connect(addr);
    client.send(b"POST /v1/sources/gh/hooks HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n");
    client.send(b"6\r\n{\"a\":1\r\n");
    client.send(b"1;ext=x\r\n}\r\n0\r\nx-trailer: t\r\n\r\n");
    let reply = client.reply().expect("a response");
    assert_eq!(reply.status, 202, "{}", reply.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    let got = &receiver.received()[0];
    assert_eq!(got.body, br#"{"a":1}"#);
    assert_eq!(got.header("transfer-encoding"), None);
    assert_eq!(got.header("x-trailer"), None, "trailers are dropped");
    let again = client.request("POST", "/v1/sources/gh/hooks", &[], b"{}");
    assert_eq!(again.status, 202, "the connection serves on");
    let large = Client::connect(addr).send_and_reply(
        b"POST /v1/sources/gh/hooks HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\nx\r\n0\r\n\r\n",
    );
    assert_eq!(
        (large.status, large.error_code().as_str()),
        (413, "body_too_large")
    );
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
}

trait SendAndReply {
    fn send_and_reply(self, raw: &[u8]) -> HttpReply;
}

impl SendAndReply for Client {
    fn send_and_reply(mut self, raw: &[u8]) -> HttpReply {
        self.send(raw);
        self.reply().expect("a response")
    }
}

/// HMAC-SHA256 of the concatenated `parts` under `secret`.
fn hmac_sha256(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    parts.iter().for_each(|part| mac.update(part));
    mac.finalize().into_bytes().to_vec()
}

/// A source with `ingest_signature` takes only hooks its provider signed
/// with the secret of `ingest_secret_env` (signatures made here as each
/// provider documents them): each scheme's signed hook is accepted and
/// delivered; a wrong secret, another body, a missing header or a
/// timestamp past the tolerance gets 401 `bad_signature` saying which, and
/// nothing is stored. A second secret (a rotation) is accepted too.
#[test]
fn a_source_with_a_provider_signature_takes_only_signed_hooks() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let schemes = ["github", "stripe", "slack", "shopify", "standard_webhooks"];
    for scheme in schemes {
        let var = format!("NODE_TEST_SIG_{}", scheme.to_uppercase());
        let secret = match scheme {
            "standard_webhooks" => "whsec_c2lnbmluZy1zZWNyZXQ=".to_string(),
            _ => format!("{scheme}-secret"),
        };
        std::env::set_var(&var, secret);
        let mut source = source(scheme, "t1", vec![SinkConfig::http(receiver.url("/in"))]);
        source.ingest_signature = Some(scheme.into());
        let vars = vec![var, "NODE_TEST_SIG_ROTATED".to_string()];
        source.ingest_secret_env = Some(goad::config::OneOrMany::Many(vars));
        c.sources.push(source);
    }
    std::env::set_var("NODE_TEST_SIG_ROTATED", "rotated-secret");
    let node = start(c);
    let addr = node.local_addr();
    let now_s = goad::runtime::wall_ms() / 1_000;
    let body = br#"{"event":"paid"}"#;
    // The headers `scheme`'s provider sends for `body` signed with
    // `secret` at `t` (unix seconds).
    let signed = |scheme: &str, secret: &[u8], body: &[u8], t: u64| -> Vec<(String, String)> {
        let ts = t.to_string();
        let pairs: Vec<(&str, String)> = match scheme {
            "github" => vec![(
                "x-hub-signature-256",
                format!("sha256={}", hex::encode(hmac_sha256(secret, &[body]))),
            )],
            "stripe" => {
                let sig = hex::encode(hmac_sha256(secret, &[ts.as_bytes(), b".", body]));
                vec![("stripe-signature", format!("t={ts},v1={sig},v0=ignored"))]
            }
            "slack" => {
                let sig = hex::encode(hmac_sha256(secret, &[b"v0:", ts.as_bytes(), b":", body]));
                vec![
                    ("x-slack-signature", format!("v0={sig}")),
                    ("x-slack-request-timestamp", ts.clone()),
                ]
            }
            "shopify" => vec![(
                "x-shopify-hmac-sha256",
                b64.encode(hmac_sha256(secret, &[body])),
            )],
            _ => {
                let id = "msg_1";
                let sig = hmac_sha256(secret, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
                vec![
                    ("webhook-id", id.to_string()),
                    ("webhook-timestamp", ts.clone()),
                    ("webhook-signature", format!("v1,{}", b64.encode(sig))),
                ]
            }
        };
        pairs.into_iter().map(|(n, v)| (n.to_string(), v)).collect()
    };
    let post = |scheme: &str, headers: &[(String, String)], body: &[u8]| {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        ingest(addr, scheme, body, &headers)
    };
    let refused = |reply: HttpReply| {
        assert_eq!(
            (reply.status, reply.error_code()),
            (401, "bad_signature".to_string())
        );
        reply.json()["message"].as_str().unwrap().to_string()
    };
    for scheme in schemes {
        let secret: Vec<u8> = match scheme {
            "standard_webhooks" => b"signing-secret".to_vec(),
            _ => format!("{scheme}-secret").into_bytes(),
        };
        let ok = post(scheme, &signed(scheme, &secret, body, now_s), body);
        assert_eq!(ok.status, 202, "{scheme}: {}", ok.text());
        let rotated = post(
            scheme,
            &signed(scheme, b"rotated-secret", body, now_s),
            body,
        );
        assert_eq!(rotated.status, 202, "{scheme} with the second secret");
        let header = signed(scheme, &secret, body, now_s)
            .into_iter()
            .find(|(n, _)| n.contains("signature") || n.contains("hmac"))
            .unwrap()
            .0;
        let wrong = post(scheme, &signed(scheme, b"wrong", body, now_s), body);
        assert_eq!(
            refused(wrong),
            format!("{header} does not match the body under any of the source's secrets")
        );
        let other_body = post(scheme, &signed(scheme, &secret, body, now_s), b"{}");
        assert!(refused(other_body).contains("does not match"));
        assert_eq!(
            refused(post(scheme, &[], body)),
            match scheme {
                "standard_webhooks" => "this source needs a signed hook: no webhook-id".to_string(),
                _ => format!("this source needs a signed hook: no {header}"),
            }
        );
        if ["stripe", "slack", "standard_webhooks"].contains(&scheme) {
            let stale = post(scheme, &signed(scheme, &secret, body, now_s - 3_600), body);
            let message = refused(stale);
            assert!(
                message.contains("s from now, more than the 300 s allowed"),
                "{scheme}: {message}"
            );
        }
    }
    assert!(receiver.wait_for(10, Duration::from_secs(20)));
    let engine = node.engine().unwrap();
    wait_until(
        "every signed hook delivered",
        Duration::from_secs(20),
        || engine.hook_count().unwrap() == 0,
    );
    assert_eq!(
        receiver.count(),
        10,
        "two signed hooks per scheme, nothing else"
    );
    // Three refusals per scheme, and a stale one for each of the three
    // schemes that sign a timestamp.
    let refusals = metric(
        addr,
        "goad_ingest_requests_total",
        "error=\"bad_signature\"",
    );
    assert_eq!(refusals, 18.0);
}

/// Providers outside the named schemes: a table checks an HMAC of the body
/// in the header, prefix, encoding and algorithm it names (Intercom's
/// `x-hub-signature: sha1=<hex>`, Typeform's `typeform-signature:
/// sha256=<base64>`), and `gitlab` takes the secret itself in
/// `x-gitlab-token`, which is a credential: never stored nor forwarded,
/// while the provider's other headers are. Anything else gets 401
/// `bad_signature` saying why, and is not delivered.
#[test]
fn a_table_or_a_token_scheme_takes_only_hooks_that_carry_the_secret() {
    use base64::Engine as _;
    use goad::config::{HmacSignature, IngestSignature, OneOrMany};
    use hmac::Mac;
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let table = |header: &str, prefix: &str, encoding: &str, algorithm: &str| {
        IngestSignature::Hmac(HmacSignature {
            header: header.to_string(),
            prefix: Some(prefix.to_string()),
            encoding: Some(encoding.to_string()),
            algorithm: Some(algorithm.to_string()),
        })
    };
    let signatures = [
        ("intercom", table("X-Hub-Signature", "sha1=", "hex", "sha1")),
        (
            "typeform",
            table("typeform-signature", "sha256=", "base64", "sha256"),
        ),
        ("gitlab", IngestSignature::from("gitlab")),
    ];
    for (id, signature) in &signatures {
        let var = format!("NODE_TEST_TABLE_{}", id.to_uppercase());
        std::env::set_var(&var, format!("{id}-secret"));
        let mut source = source(id, "t1", vec![SinkConfig::http(receiver.url("/in"))]);
        source.ingest_signature = Some(signature.clone());
        source.ingest_secret_env = Some(OneOrMany::One(var));
        c.sources.push(source);
    }
    let node = start(c);
    let addr = node.local_addr();
    let body = br#"{"topic":"conversation.user.created"}"#;
    let sha1_hex = |secret: &[u8], body: &[u8]| {
        let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret).unwrap();
        mac.update(body);
        format!("sha1={}", hex::encode(mac.finalize().into_bytes()))
    };
    let sha256_b64 = |secret: &[u8], body: &[u8]| {
        let b64 = base64::engine::general_purpose::STANDARD;
        format!("sha256={}", b64.encode(hmac_sha256(secret, &[body])))
    };
    let post = |id: &str, header: &str, value: &str, body: &[u8]| {
        ingest(
            addr,
            id,
            body,
            &[(header, value), ("x-gitlab-event", "Push Hook")],
        )
    };
    let refusal = |reply: HttpReply| {
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (401, "bad_signature")
        );
        reply.json()["message"].as_str().unwrap().to_string()
    };

    let intercom = |secret: &[u8], signed: &[u8], sent: &[u8]| {
        post(
            "intercom",
            "x-hub-signature",
            &sha1_hex(secret, signed),
            sent,
        )
    };
    assert_eq!(intercom(b"intercom-secret", body, body).status, 202);
    assert_eq!(
        refusal(intercom(b"other-secret", body, body)),
        "x-hub-signature does not match the body under any of the source's secrets"
    );
    assert_eq!(
        refusal(intercom(b"intercom-secret", body, b"{}")),
        "x-hub-signature does not match the body under any of the source's secrets"
    );
    let sha256_in_a_sha1_table = post("intercom", "x-hub-signature", "sha256=00", body);
    assert_eq!(
        refusal(sha256_in_a_sha1_table),
        "x-hub-signature is not a signature of this scheme"
    );

    let typeform = sha256_b64(b"typeform-secret", body);
    assert_eq!(
        post("typeform", "typeform-signature", &typeform, body).status,
        202
    );
    assert_eq!(
        refusal(post(
            "typeform",
            "typeform-signature",
            "sha256=no base64!",
            body
        )),
        "typeform-signature is not a signature of this scheme"
    );
    assert_eq!(
        refusal(ingest(addr, "typeform", body, &[])),
        "this source needs a signed hook: no typeform-signature"
    );

    let gitlab = post("gitlab", "x-gitlab-token", "gitlab-secret", body);
    assert_eq!(gitlab.status, 202, "{}", gitlab.text());
    let gitlab_id = gitlab.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        refusal(post("gitlab", "x-gitlab-token", "gitlab-secret2", body)),
        "x-gitlab-token is none of the source's secrets"
    );

    assert!(receiver.wait_for(3, Duration::from_secs(20)));
    let engine = node.engine().unwrap();
    wait_until("every hook delivered", Duration::from_secs(20), || {
        engine.hook_count().unwrap() == 0
    });
    let received = receiver.received();
    assert_eq!(received.len(), 3, "one hook per source, nothing refused");
    let from_gitlab = received
        .iter()
        .find(|r| r.header("webhook-id") == Some(gitlab_id.as_str()))
        .expect("gitlab's hook");
    assert_eq!(from_gitlab.header("x-gitlab-token"), None, "a credential");
    assert_eq!(from_gitlab.header("x-gitlab-event"), Some("Push Hook"));
    let from_intercom = received
        .iter()
        .find(|r| r.header("x-goad-source") == Some("intercom"))
        .expect("intercom's hook");
    assert_eq!(
        from_intercom.header("x-hub-signature"),
        Some(sha1_hex(b"intercom-secret", body).as_str()),
        "a signature is no secret: forwarded like any provider header"
    );
}

/// `GET /v1/sources` shows each configured source as a provider is wired
/// to it — its ingest path, whether a token or which signature ingest
/// checks, its dedupe header and window — and where its sinks deliver,
/// with no secret: a URL loses its user information and query, and a
/// `url_env` URL shows only its variable.
#[test]
fn the_sources_are_listed_as_configured_without_secrets() {
    use goad::config::{HeaderFilter, OneOrMany};
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    std::env::set_var("NODE_TEST_SOURCES_TOKEN", "tok");
    std::env::set_var("NODE_TEST_SOURCES_SECRET", "gh-secret");
    std::env::set_var(
        "NODE_TEST_SOURCES_URL",
        "https://hooks.slack.com/services/T/B/secret",
    );
    let mut signed = source(
        "gh",
        "acme",
        vec![SinkConfig::http(
            "https://u:pw@ci.example.com:8443/hooks?key=k1",
        )],
    );
    signed.ingest_token_env = Some("NODE_TEST_SOURCES_TOKEN".into());
    signed.ingest_signature = Some("github".into());
    signed.ingest_secret_env = Some(OneOrMany::One("NODE_TEST_SOURCES_SECRET".into()));
    signed.dedupe_header = Some("X-GitHub-Delivery".into());
    signed.dedupe_window_ms = Some(60_000);
    signed.max_ingest_per_s = Some(500);
    signed.sinks[0].ordered = true;
    signed.sinks[0].filter = Some(HeaderFilter {
        header: "x-github-event".into(),
        values: vec!["push".into()],
    });
    let slack = SinkConfig {
        url: None,
        url_env: Some("NODE_TEST_SOURCES_URL".into()),
        ..SinkConfig::http("http://unused")
    };
    let pubsub = SinkConfig {
        project: Some("p".into()),
        topic: Some("hooks".into()),
        endpoint: Some("http://127.0.0.1:9".into()),
        ..SinkConfig::of_kind("pubsub")
    };
    let mut plain = source("app", "beta", vec![slack, pubsub]);
    plain.forward_headers = Some(vec!["x-app-event".into()]);
    c.sources = vec![signed, plain];
    let node = start(c);
    let listed = get(node.local_addr(), "/v1/sources");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let sink = |index: u32, kind: &str, target: &str| serde_json::json!({"index": index, "type": kind, "target": target, "ordered": false, "filter": null});
    assert_eq!(
        listed.json(),
        serde_json::json!({"sources": [
            {"id": "gh", "tenant": "acme", "ingest_path": "/v1/sources/gh/hooks",
             "ingest_token": true, "ingest_signature": "github",
             "dedupe_header": "x-github-delivery", "dedupe_window_ms": 60_000,
             "max_ingest_per_s": 500, "forward_headers": null,
             "sinks": [{"index": 0, "type": "http", "target": "https://ci.example.com:8443/hooks",
                        "ordered": true, "filter": {"header": "x-github-event", "values": ["push"]}}]},
            {"id": "app", "tenant": "beta", "ingest_path": "/v1/sources/app/hooks",
             "ingest_token": false, "ingest_signature": null,
             "dedupe_header": "idempotency-key", "dedupe_window_ms": null,
             "max_ingest_per_s": null, "forward_headers": ["x-app-event"],
             "sinks": [sink(0, "http", "$NODE_TEST_SOURCES_URL"),
                       sink(1, "pubsub", "projects/p/topics/hooks")]},
        ]})
    );
    assert!(!listed.text().contains("secret") && !listed.text().contains("pw"));
}

#[test]
fn admin_routes_need_the_admin_token_and_health_and_metrics_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    std::env::set_var("NODE_TEST_ADMIN_TOKEN", "adm-1");
    c.admin_token_env = Some("NODE_TEST_ADMIN_TOKEN".into());
    let node = start(c);
    let addr = node.local_addr();
    for (method, path) in [
        ("GET", "/v1/pressure"),
        ("GET", "/v1/stats"),
        ("GET", "/v1/dead-letters"),
        ("DELETE", "/v1/dead-letters"),
        ("GET", "/v1/hooks/x"),
        ("GET", "/v1/sinks"),
        ("GET", "/v1/sources"),
        ("POST", "/v1/replays"),
        ("GET", "/v1/replays/x"),
        ("POST", "/v1/sources/gh/dead-letter"),
        ("POST", "/v1/reload"),
        ("POST", "/v1/backup"),
        ("POST", "/v1/drain"),
        ("DELETE", "/v1/drain"),
        ("GET", "/v1/drain"),
    ] {
        let denied = call(addr, method, path, &[], b"");
        assert_eq!(denied.status, 401, "{method} {path}");
        assert_eq!(denied.error_code(), "unauthorized");
        let wrong = call(
            addr,
            method,
            path,
            &[("authorization", "Bearer adm-2")],
            b"",
        );
        assert_eq!(wrong.status, 401, "{method} {path}");
    }
    let ok = call(
        addr,
        "GET",
        "/v1/pressure",
        &[("authorization", "Bearer adm-1")],
        b"",
    );
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.json(),
        serde_json::json!({"lag_ms": 0, "window_full": false})
    );
    assert_eq!(
        get(addr, "/healthz").json(),
        serde_json::json!({"status": "ok"})
    );
    assert_eq!(
        get(addr, "/readyz").json(),
        serde_json::json!({"status": "ready"})
    );
    assert_eq!(get(addr, "/metrics").status, 200);
}

#[test]
fn a_node_refuses_a_public_address_without_an_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.listen = "0.0.0.0:0".into();
    let refused = Node::start(NodeOptions {
        config: c.clone(),
        config_path: None,
        allow_open_admin: false,
    });
    let message = refused.err().expect("refused").to_string();
    assert!(message.contains("admin_token_env"), "{message}");
    assert!(message.contains("--allow-open-admin"), "{message}");
    let allowed = Node::start(NodeOptions {
        config: c,
        config_path: None,
        allow_open_admin: true,
    })
    .expect("allowed explicitly");
    allowed.stop();
    allowed.wait().unwrap();
}

#[test]
fn malformed_requests_get_a_4xx_or_a_closed_connection_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let addr = node.local_addr();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("garbage", b"\x16\x03\x01\x02\x00garbage\r\n\r\n".to_vec(), 400),
        ("bad length", b"POST /v1/reload HTTP/1.1\r\ncontent-length: ten\r\n\r\n".to_vec(), 400),
        (
            "two lengths",
            b"POST /v1/reload HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab".to_vec(),
            400,
        ),
        (
            "chunked with a length",
            b"POST /v1/reload HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\nabc".to_vec(),
            400,
        ),
        (
            "a bad chunk",
            b"POST /v1/reload HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n".to_vec(),
            400,
        ),
        (
            "another coding",
            b"POST /v1/reload HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n".to_vec(),
            501,
        ),
        ("huge header", {
            let mut r = b"GET /healthz HTTP/1.1\r\nx-big: ".to_vec();
            r.extend(std::iter::repeat_n(b'a', 20_000));
            r.extend(b"\r\n\r\n");
            r
        }, 431),
        ("many headers", {
            let mut r = b"GET /healthz HTTP/1.1\r\n".to_vec();
            for i in 0..100 {
                r.extend(format!("x-h{i}: 1\r\n").as_bytes());
            }
            r.extend(b"\r\n");
            r
        }, 431),
    ];
    for (what, raw, status) in cases {
        let mut client = Client::connect(addr);
        client.send(&raw);
        let reply = client
            .reply()
            .unwrap_or_else(|| panic!("{what}: no response"));
        assert_eq!(reply.status, status, "{what}: {}", reply.text());
        assert!(!reply.error_code().is_empty(), "{what}: a JSON error");
        assert_eq!(reply.header("connection"), Some("close"), "{what}");
        assert!(client.is_closed(), "{what}: the connection is closed");
        assert_eq!(get(addr, "/healthz").status, 200, "served after {what}");
    }
    // A truncated body: the client gives up mid-body; the node drops it.
    let mut truncated = Client::connect(addr);
    truncated.send(b"POST /v1/reload HTTP/1.1\r\ncontent-length: 100\r\n\r\nonly ten b");
    drop(truncated);
    assert_eq!(get(addr, "/healthz").status, 200);
}

#[test]
fn a_slow_client_gets_408_and_is_closed_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let addr = node.local_addr();
    let started = Instant::now();
    let mut slow = Client::connect(addr);
    slow.send(b"GET /healthz HTTP/1.1\r\nx-slow: ");
    // Meanwhile another client is served at once.
    assert_eq!(get(addr, "/healthz").status, 200);
    let reply = slow.reply().expect("a 408");
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (408, "request_timeout")
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(slow.is_closed());
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let mut client = Client::connect(node.local_addr());
    assert_eq!(client.request("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(client.request("GET", "/readyz", &[], b"").status, 200);
    let mut both = raw_request("GET", "/v1/pressure", &[], b"");
    both.extend(raw_request("GET", "/nope", &[], b""));
    client.send(&both);
    let first = client.reply().unwrap();
    let second = client.reply().unwrap();
    assert_eq!((first.status, second.status), (200, 404));
    assert!(first.json().get("lag_ms").is_some());
    // Connection: close is honoured.
    let closing = client.request("GET", "/healthz", &[("connection", "close")], b"");
    assert_eq!(closing.header("connection"), Some("close"));
    assert!(client.is_closed());
}

#[test]
fn connections_over_the_cap_get_503() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.http.max_connections = 2;
    let node = start(c);
    let addr = node.local_addr();
    let mut held: Vec<Client> = (0..2).map(|_| Client::connect(addr)).collect();
    for client in &mut held {
        assert_eq!(client.request("GET", "/healthz", &[], b"").status, 200);
    }
    let mut third = Client::connect(addr);
    let refused = third.reply().expect("a 503");
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "too_many_connections")
    );
    drop(held);
    wait_until("a connection slot frees", Duration::from_secs(10), || {
        let mut c = Client::connect(addr);
        c.send(&raw_request("GET", "/healthz", &[], b""));
        c.reply().is_some_and(|r| r.status == 200)
    });
}

/// Dead letters newest first, filtered and paged with a cursor; then a
/// replay revives them (attempts reset, tagged) once the sink is fixed.
#[test]
fn dead_letters_list_page_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(400);
    let mut c = two_sources(dir.path(), &receiver);
    c.shards = 2;
    let node = start(c);
    let addr = node.local_addr();
    let engine = node.engine().unwrap();
    let mut ids = Vec::new();
    for i in 0..7 {
        let s = if i % 2 == 0 { "a" } else { "b" };
        ids.push(
            ingest(addr, s, format!("{i}").as_bytes(), &[]).json()["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        // Distinct dead times, so newest-first is the ingest order reversed.
        wait_until("the hook dead", Duration::from_secs(10), || {
            dead(&engine).len() == i + 1
        });
        let dead_at_ms = goad::runtime::wall_ms();
        wait_until("the clock past its death", Duration::from_secs(1), || {
            goad::runtime::wall_ms() > dead_at_ms
        });
    }
    wait_until("7 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 7
    });

    let mut listed = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = get(addr, &format!("/v1/dead-letters?limit=3&cursor={cursor}")).json();
        let items = page["items"].as_array().unwrap().clone();
        assert!(items.len() <= 3);
        let last_id = items.last().map(|item| item["id"].clone());
        listed.extend(items);
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(last_id, Some(next.into()), "the cursor is the last id");
                cursor = next.to_string();
            }
            None => break,
        }
    }
    let listed_ids: Vec<&str> = listed
        .iter()
        .map(|i| i["hook_id"].as_str().unwrap())
        .collect();
    let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed_ids, newest_first);
    let first = &listed[0];
    assert_eq!(first["source_id"], "a");
    assert_eq!(first["tenant"], "t1");
    assert_eq!(first["sink_index"], 0);
    assert_eq!(first["sink_type"], "http");
    assert_eq!(first["attempts"], 1);
    assert!(first["reason"].as_str().unwrap().contains("400"), "{first}");
    let only_b = get(addr, "/v1/dead-letters?source_id=b").json();
    assert_eq!(only_b["items"].as_array().unwrap().len(), 3);
    let only_t1 = get(addr, "/v1/dead-letters?tenant=t1&limit=1000").json();
    assert_eq!(only_t1["items"].as_array().unwrap().len(), 4);
    assert_eq!(get(addr, "/v1/dead-letters?limit=0").status, 400);
    assert_eq!(
        get(addr, "/v1/dead-letters?cursor=junk").error_code(),
        "bad_cursor"
    );

    status.store(200, Ordering::SeqCst);
    let created = call(addr, "POST", "/v1/replays", &[], br#"{"source_id":"a"}"#);
    assert_eq!(created.status, 202, "{}", created.text());
    let replay_id = created.json()["id"].as_str().unwrap().to_string();
    assert_eq!(created.json()["matched"], 4);
    wait_until("the replay delivered 4", Duration::from_secs(20), || {
        let p = get(addr, &format!("/v1/replays/{replay_id}")).json();
        p["state"] == "done" && p["delivered"] == 4
    });
    let progress = get(addr, &format!("/v1/replays/{replay_id}")).json();
    assert_eq!(
        (progress["moved"].clone(), progress["dead_again"].clone()),
        (4.into(), 0.into())
    );
    let replayed: Vec<_> = receiver
        .received()
        .into_iter()
        .filter(|r| r.status == 200)
        .collect();
    assert_eq!(replayed.len(), 4);
    assert!(replayed
        .iter()
        .all(|r| r.header("x-goad-replay-id") == Some(replay_id.as_str())
            && r.header("x-goad-attempt") == Some("1")));
    let left = get(addr, "/v1/dead-letters").json();
    assert_eq!(left["items"].as_array().unwrap().len(), 3);
    assert!(left["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["source_id"] == "b"));
    assert_eq!(get(addr, "/v1/replays/nope").error_code(), "unknown_replay");
    assert_eq!(
        call(addr, "POST", "/v1/replays", &[], b"{\"nope\":1}").error_code(),
        "bad_json"
    );
}

/// `GET /v1/dead-letters/{id}` shows one dead letter, by the id its
/// listing gave, with its hook: the provider's stored headers (credentials
/// are not stored), content type, dedupe key and the body verbatim in
/// base64. Once it is replayed (and dies again, a new dead letter) its id
/// names nothing (404), as an id that never did.
#[test]
fn a_dead_letter_is_shown_with_its_hook_until_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(400)).unwrap();
    let node = start(one_source(dir.path(), &receiver));
    let addr = node.local_addr();
    let body = b"{\"n\":1}\xff\x00";
    let before_ms = goad::runtime::wall_ms();
    let reply = ingest(
        addr,
        "a",
        body,
        &[
            ("content-type", "application/json"),
            ("X-GitHub-Event", "push"),
            ("idempotency-key", "evt-9"),
            ("authorization", "Bearer provider-secret"),
        ],
    );
    assert_eq!(reply.status, 202, "{}", reply.text());
    let hook_id = reply.json()["id"].as_str().unwrap().to_string();
    let engine = node.engine().unwrap();
    wait_until("the hook dead", Duration::from_secs(10), || {
        dead(&engine).len() == 1
    });
    let item = get(addr, "/v1/dead-letters").json()["items"][0].clone();
    let id = item["id"].as_str().unwrap().to_string();
    let mut shown = get(addr, &format!("/v1/dead-letters/{id}")).json();
    let received_at_ms = shown["received_at_ms"].as_u64().unwrap();
    assert!((before_ms..=goad::runtime::wall_ms()).contains(&received_at_ms));
    shown.as_object_mut().unwrap().remove("received_at_ms");
    assert_eq!(
        shown,
        serde_json::json!({
            "id": id,
            "hook_id": hook_id,
            "source_id": "a",
            "tenant": "t1",
            "sink_index": 0,
            "sink_type": "http",
            "reason": item["reason"],
            "attempts": 1,
            "dead_at_ms": item["dead_at_ms"],
            "content_type": "application/json",
            "dedupe_key": "evt-9",
            "headers": [["x-github-event", "push"], ["idempotency-key", "evt-9"]],
            "body_base64": "eyJuIjoxff8A",
        })
    );
    assert_eq!(item["reason"], "sink http: permanent: HTTP status 400");
    for unknown in ["junk", "1-0-1-0", "1-9-1-0"] {
        let refused = get(addr, &format!("/v1/dead-letters/{unknown}"));
        assert_eq!(
            (refused.status, refused.error_code()),
            (404, "unknown_dead_letter".into())
        );
    }
    assert_eq!(
        call(addr, "DELETE", &format!("/v1/dead-letters/{id}"), &[], b"").status,
        405
    );

    // Replayed, it dies again (the sink still refuses it) at a later time:
    // a new dead letter, and the old id names nothing.
    let first_dead_ms = item["dead_at_ms"].as_u64().unwrap();
    wait_until("the clock past its death", Duration::from_secs(1), || {
        goad::runtime::wall_ms() > first_dead_ms
    });
    let created = call(addr, "POST", "/v1/replays", &[], b"");
    assert_eq!(created.status, 202, "{}", created.text());
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
    wait_until("dead again", Duration::from_secs(10), || {
        listed(addr, "id").first().is_some_and(|again| *again != id)
    });
    let again = listed(addr, "id")[0].clone();
    assert_eq!(
        get(addr, &format!("/v1/dead-letters/{again}")).json()["hook_id"],
        hook_id
    );
    let gone = get(addr, &format!("/v1/dead-letters/{id}"));
    assert_eq!(gone.error_code(), "unknown_dead_letter");
}

/// `hook_id` narrows the dead letters to one hook's rows: listed, replayed
/// (the replay matches and revives that hook alone) and purged.
#[test]
fn one_hooks_dead_letters_are_listed_replayed_and_purged_by_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(400);
    let node = start(one_source(dir.path(), &receiver));
    let addr = node.local_addr();
    let ids: Vec<String> = ["first", "second", "third"]
        .iter()
        .map(|body| {
            let reply = ingest(addr, "a", body.as_bytes(), &[]);
            reply.json()["id"].as_str().unwrap().to_string()
        })
        .collect();
    let engine = node.engine().unwrap();
    wait_until("3 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 3
    });
    let of = |id: &str| get(addr, &format!("/v1/dead-letters?hook_id={id}")).json();
    let of_second = of(&ids[1]);
    let items = of_second["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["hook_id"], ids[1].as_str());

    status.store(200, Ordering::SeqCst);
    let body = format!("{{\"hook_id\":\"{}\"}}", ids[1]);
    let created = call(addr, "POST", "/v1/replays", &[], body.as_bytes());
    assert_eq!(created.status, 202, "{}", created.text());
    assert_eq!(created.json()["matched"], 1);
    assert!(receiver.wait_for(4, Duration::from_secs(10)));
    wait_until("2 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 2
    });
    let delivered: Vec<Vec<u8>> = receiver
        .received()
        .into_iter()
        .filter(|r| r.status == 200)
        .map(|r| r.body)
        .collect();
    assert_eq!(delivered, [b"second".to_vec()]);

    let purge = format!("/v1/dead-letters?hook_id={}", ids[2]);
    let purged = call(addr, "DELETE", &purge, &[], b"");
    assert_eq!(purged.json(), serde_json::json!({"purged": 1}));
    assert_eq!(listed(addr, "hook_id"), [ids[0].clone()]);
}

/// `GET /v1/hooks/{id}` finds a hook by the id its ingest returned and
/// says where each sink's row is: delivered (gone, not purged), dead (with
/// its dead letter's id), due again after a `Retry-After` (with the error),
/// in flight (its attempt hangs) and, for the next hook of an ordered sink,
/// waiting in its lane; a purged row is `purged`. Once every row of a hook
/// is delivered, the hook is gone (404), as is an id never committed.
#[test]
fn a_hook_is_found_by_its_id_with_each_sinks_state() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|r| match r.path.as_str() {
        "/ok" => Reply::status(200),
        "/refuse" => Reply::status(400),
        "/later" => Reply::status(503).header("retry-after", "3600"),
        _ => Reply::hang(),
    })
    .unwrap();
    let mut c = node_config(dir.path());
    let mut ordered = SinkConfig::http(receiver.url("/hang"));
    ordered.ordered = true;
    let sinks = ["/ok", "/refuse", "/later"].map(|path| SinkConfig::http(receiver.url(path)));
    let mut sinks = sinks.to_vec();
    sinks.push(ordered);
    c.sources.push(source("a", "t1", sinks));
    c.sources.push(source(
        "b",
        "t2",
        vec![SinkConfig::http(receiver.url("/ok"))],
    ));
    let node = start(c);
    let addr = node.local_addr();
    let before_ms = goad::runtime::wall_ms();
    let headers = [("content-type", "text/plain"), ("idempotency-key", "k-1")];
    let first = ingest(addr, "a", b"first", &headers).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let second = ingest(addr, "a", b"second", &[]).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let states = |id: &str| -> Vec<String> {
        let shown = get(addr, &format!("/v1/hooks/{id}")).json();
        let sinks = shown["sinks"].as_array().cloned().unwrap_or_default();
        sinks
            .iter()
            .map(|s| s["state"].as_str().unwrap().to_string())
            .collect()
    };
    wait_until("each sink's row settled", Duration::from_secs(10), || {
        states(&first) == ["delivered", "dead", "due", "in_flight"]
            && states(&second) == ["delivered", "dead", "due", "in_lane"]
    });
    let mut shown = get(addr, &format!("/v1/hooks/{first}")).json();
    let received_at_ms = shown["received_at_ms"].as_u64().unwrap();
    assert!((before_ms..=goad::runtime::wall_ms()).contains(&received_at_ms));
    let of_first = get(addr, &format!("/v1/dead-letters?hook_id={first}")).json();
    let dead_letter = of_first["items"][0]["id"].clone();
    let sinks = shown["sinks"].as_array_mut().unwrap();
    let mut times = Vec::new();
    for (sink, key) in [
        (1, "first_attempt_at_ms"),
        (1, "dead_at_ms"),
        (2, "first_attempt_at_ms"),
        (2, "due_at_ms"),
    ] {
        let at = sinks[sink].as_object_mut().unwrap().remove(key).unwrap();
        times.push(
            at.as_u64()
                .unwrap_or_else(|| panic!("sink {sink}'s {key} is {at}")),
        );
    }
    let later_ms = goad::runtime::wall_ms();
    assert!(
        times[..3]
            .iter()
            .all(|t| (received_at_ms..=later_ms).contains(t)),
        "{times:?}"
    );
    assert!(
        (received_at_ms + 3_599_000..=later_ms + 3_600_000).contains(&times[3]),
        "{times:?}"
    );
    shown.as_object_mut().unwrap().remove("received_at_ms");
    assert_eq!(
        shown,
        serde_json::json!({
            "id": first,
            "source_id": "a",
            "tenant": "t1",
            "content_type": "text/plain",
            "dedupe_key": "k-1",
            "headers": [["idempotency-key", "k-1"]],
            "body_base64": "Zmlyc3Q=",
            "sinks": [
                {"sink_index": 0, "state": "delivered"},
                {"sink_index": 1, "state": "dead", "sink_type": "http", "attempts": 1,
                 "last_error": "sink http: permanent: HTTP status 400", "replay_id": null,
                 "dead_letter_id": dead_letter},
                {"sink_index": 2, "state": "due", "sink_type": "http", "attempts": 1,
                 "last_error": "retry after 3600000 ms: HTTP status 503", "replay_id": null},
                {"sink_index": 3, "state": "in_flight", "sink_type": "http", "attempts": 0,
                 "first_attempt_at_ms": null,
                 "last_error": null, "replay_id": null},
            ]
        })
    );
    let in_lane = &get(addr, &format!("/v1/hooks/{second}")).json()["sinks"][3];
    assert_eq!(
        in_lane,
        &serde_json::json!({"sink_index": 3, "state": "in_lane", "sink_type": "http", "attempts": 0,
                            "first_attempt_at_ms": null, "last_error": null, "replay_id": null})
    );

    let purge = format!("/v1/dead-letters?hook_id={first}");
    assert_eq!(call(addr, "DELETE", &purge, &[], b"").json()["purged"], 1);
    assert_eq!(states(&first), ["delivered", "purged", "due", "in_flight"]);

    let delivered = ingest(addr, "b", b"only", &[]).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until("the delivered hook gone", Duration::from_secs(10), || {
        get(addr, &format!("/v1/hooks/{delivered}")).status == 404
    });
    let too_long = "x".repeat(600);
    for unknown in [delivered.as_str(), "no-such-hook", &too_long] {
        let refused = get(addr, &format!("/v1/hooks/{unknown}"));
        assert_eq!(
            (refused.status, refused.error_code()),
            (404, "unknown_hook".into())
        );
    }
}

/// `/v1/sinks` says which receiver fails and why: each configured sink's
/// outcomes, latest failure and breaker (zeros for a sink with no attempt
/// yet), filtered by source or tenant; `/metrics` carries the same counts.
#[test]
fn each_sinks_outcomes_failure_and_breaker_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|r| match r.path.as_str() {
        "/ok" => Reply::status(200),
        "/refuse" => Reply::status(400),
        _ => Reply::status(503),
    })
    .unwrap();
    let mut c = node_config(dir.path());
    c.dispatch.breaker_failures = 2;
    c.dispatch.breaker_open_ms = 3_600_000;
    c.dispatch.breaker_max_open_ms = 3_600_000;
    // No retry runs while the test looks: each sink has two attempts.
    c.retry.base_ms = 60_000;
    let sinks = ["/ok", "/refuse", "/down"].map(|path| SinkConfig::http(receiver.url(path)));
    c.sources.push(source("a", "t1", sinks.to_vec()));
    c.sources.push(source(
        "b",
        "t2",
        vec![SinkConfig::http(receiver.url("/ok"))],
    ));
    let node = start(c);
    let addr = node.local_addr();
    let before_ms = goad::runtime::wall_ms();
    ingest_n(addr, "a", 2);
    let sinks = |query: &str| -> Vec<serde_json::Value> {
        let shown = get(addr, &format!("/v1/sinks{query}")).json();
        shown["sinks"].as_array().cloned().unwrap_or_default()
    };
    // Two rows a sink: /ok delivers both, /refuse dead-letters both, and
    // /down's two failures open its breaker, which parks its rows.
    wait_until("the breaker of /down open", Duration::from_secs(10), || {
        let now = sinks("");
        now.len() == 4
            && now[0]["delivered"] == 2
            && now[1]["dead"] == 2
            && now[2]["breaker"] == "open"
    });
    let mut shown = sinks("");
    let later_ms = goad::runtime::wall_ms();
    // Durations are the receiver's and the clock's: each sink's count is
    // exact (a delivery latency for each row delivered), its mean and
    // bucket bounds are checked for sense and then shown as "d".
    let counts = [
        ("attempt_ms", [2, 2, 2, 0]),
        ("delivery_latency_ms", [2, 0, 0, 0]),
    ];
    let ran_ms = (goad::runtime::wall_ms() - before_ms) as f64;
    for (field, sink, count) in counts
        .iter()
        .flat_map(|(field, counts)| (0..4).map(move |sink| (*field, sink, counts[sink])))
    {
        let timed = &mut shown[sink][field];
        assert_eq!(timed["count"], count, "sink {sink}'s {field}: {timed}");
        if count == 0 {
            assert_eq!(
                *timed,
                serde_json::json!({"count": 0, "mean": null, "p50_at_most": null, "p99_at_most": null})
            );
            continue;
        }
        let [mean, p50, p99] = ["mean", "p50_at_most", "p99_at_most"].map(|k| {
            timed[k]
                .as_f64()
                .unwrap_or_else(|| panic!("sink {sink}: {timed}"))
        });
        assert!(
            mean >= 0.0 && mean <= p99 && p50 <= p99 && mean <= ran_ms,
            "sink {sink}'s {field}: {timed}"
        );
        for k in ["mean", "p50_at_most", "p99_at_most"] {
            timed[k] = "d".into();
        }
    }
    // Each time is checked against the clock, then shown as "t".
    let mut take_time = |sink: usize, path: &[&str]| -> u64 {
        let mut at = &mut shown[sink];
        for p in path {
            at = &mut at[*p];
        }
        let taken = std::mem::replace(at, serde_json::json!("t"));
        taken
            .as_u64()
            .unwrap_or_else(|| panic!("sink {sink}'s {path:?} is {taken}"))
    };
    let times = [
        take_time(0, &["last_delivered_at_ms"]),
        take_time(1, &["last_failure", "at_ms"]),
        take_time(2, &["last_failure", "at_ms"]),
    ];
    assert!(
        times.iter().all(|t| (before_ms..=later_ms).contains(t)),
        "{times:?}"
    );
    let open_until_ms = take_time(2, &["breaker_open_until_ms"]);
    assert_eq!(
        open_until_ms,
        times[2] + 3_600_000,
        "opened by the last failure"
    );
    let sink = |source: &str, tenant: &str, index: u16| {
        serde_json::json!({
            "source_id": source, "tenant": tenant, "sink_index": index, "sink_type": "http",
            "delivered": 0, "retried": 0, "dead": 0, "timed_out": 0,
            "last_delivered_at_ms": null, "last_failure": null,
            "breaker": "closed", "breaker_open_until_ms": null, "consecutive_failures": 0,
            "running": 0, "queued": 0,
            "attempt_ms": {"count": 0, "mean": null, "p50_at_most": null, "p99_at_most": null},
            "delivery_latency_ms": {"count": 0, "mean": null, "p50_at_most": null, "p99_at_most": null},
        })
    };
    let timed =
        serde_json::json!({"count": 2, "mean": "d", "p50_at_most": "d", "p99_at_most": "d"});
    let with = |mut base: serde_json::Value, more: serde_json::Value| {
        let fields = base.as_object_mut().unwrap();
        fields.extend(more.as_object().unwrap().clone());
        base
    };
    let expected = vec![
        with(
            sink("a", "t1", 0),
            serde_json::json!({"delivered": 2, "last_delivered_at_ms": "t", "attempt_ms": timed,
                               "delivery_latency_ms": timed}),
        ),
        with(
            sink("a", "t1", 1),
            serde_json::json!({"dead": 2, "attempt_ms": timed,
                               "last_failure": {"at_ms": "t", "error": "permanent: HTTP status 400"}}),
        ),
        with(
            sink("a", "t1", 2),
            serde_json::json!({"retried": 2, "consecutive_failures": 2, "attempt_ms": timed,
                               "breaker": "open", "breaker_open_until_ms": "t",
                               "last_failure": {"at_ms": "t", "error": "HTTP status 503"}}),
        ),
        sink("b", "t2", 0),
    ];
    assert_eq!(shown, expected);
    let sources = |query: &str| -> Vec<(String, u64)> {
        let listed = sinks(query);
        let pairs = listed.iter().map(|s| {
            let source = s["source_id"].as_str().unwrap().to_string();
            (source, s["sink_index"].as_u64().unwrap())
        });
        pairs.collect()
    };
    assert_eq!(sources("?source_id=b"), [("b".to_string(), 0)]);
    assert_eq!(sources("?tenant=t1").len(), 3);
    assert!(sources("?source_id=nope").is_empty());

    let labels = |index: u16, result: &str| {
        format!("tenant=\"t1\",source=\"a\",sink=\"{index}\",type=\"http\",result=\"{result}\"")
    };
    let sink_metric =
        |index, result| metric(addr, "goad_sink_outcomes_total", &labels(index, result));
    assert_eq!(
        [
            sink_metric(0, "delivered"),
            sink_metric(1, "dead"),
            sink_metric(2, "retried"),
            sink_metric(2, "delivered"),
        ],
        [2.0, 2.0, 2.0, 0.0]
    );
    let timed = |index: u16| {
        let labels = format!("tenant=\"t1\",source=\"a\",sink=\"{index}\",type=\"http\"");
        metric(addr, "goad_sink_attempt_duration_seconds_count", &labels)
    };
    assert_eq!((timed(0), timed(2)), (2.0, 2.0));
    let open = |index: u16| {
        let labels = format!("tenant=\"t1\",source=\"a\",sink=\"{index}\"");
        metric(addr, "goad_sink_breaker_open", &labels)
    };
    assert_eq!((open(0), open(2)), (0.0, 1.0));
}

/// Scenario 28: a replay moves nothing while the node's lag is over
/// `replay.max_lag_ms`, and resumes when it is not.
#[test]
fn a_replay_waits_while_the_node_lags() {
    let dir = tempfile::tempdir().unwrap();
    let (dead_sink, dead_status) = switchable(400);
    let g = gate();
    let mut c = node_config(dir.path());
    c.dispatch.concurrency = 1;
    c.dispatch.sink_concurrency = 1;
    c.dispatch.max_inflight = 2;
    c.replay.max_lag_ms = 100;
    c.sources.push(source(
        "dead",
        "t1",
        vec![SinkConfig::http(dead_sink.url("/d"))],
    ));
    c.sources.push(source_of_kinds("live", "t2", &["gated"]));
    let node = start_gated(c, &g);
    let addr = node.local_addr();
    ingest_n(addr, "dead", 20);
    let engine = node.engine().unwrap();
    wait_until("20 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 20
    });
    dead_status.store(200, Ordering::SeqCst);
    ingest_n(addr, "live", 20);
    wait_until("a lag over 100 ms", Duration::from_secs(10), || {
        engine.pressure().unwrap().lag_ms > 150
    });
    let id = call(addr, "POST", "/v1/replays", &[], b"{}").json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let progress = |addr| get(addr, &format!("/v1/replays/{id}")).json();
    wait_until(
        "the replay reports throttled",
        Duration::from_secs(10),
        || progress(addr)["throttled"] == true,
    );
    // Three more pacing steps looked at the replay while the node lagged.
    pacer_passes(addr, 3);
    let p = progress(addr);
    assert_eq!(p["moved"], 0, "moved while the node lagged: {p}");
    assert_eq!(p["throttled"], true, "{p}");
    drop(g.open); // the live sink fails fast from now on; its rows back off
    wait_until(
        "the replay moved and delivered all",
        Duration::from_secs(30),
        || {
            let p = progress(addr);
            p["delivered"] == 20 && p["state"] == "done"
        },
    );
}

/// Scenario 30: a replay stopped halfway resumes after a restart, and every
/// row is delivered exactly once.
#[test]
fn a_replay_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(400);
    let mut c = one_source(dir.path(), &receiver);
    c.replay.rate = 50;
    let node = start(c.clone());
    let addr = node.local_addr();
    ingest_n(addr, "a", 60);
    let engine = node.engine().unwrap();
    wait_until("60 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 60
    });
    drop(engine);
    status.store(200, Ordering::SeqCst);
    let id = call(addr, "POST", "/v1/replays", &[], b"{}").json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let progress = |addr| get(addr, &format!("/v1/replays/{id}")).json();
    wait_until("some moved", Duration::from_secs(10), || {
        progress(addr)["moved"].as_u64().unwrap() >= 10
    });
    node.stop();
    node.wait().unwrap();
    let moved_before = receiver.ok_count();
    assert!(
        moved_before < 60,
        "the replay was cut halfway ({moved_before} delivered)"
    );
    let node = start(c);
    let addr = node.local_addr();
    wait_until(
        "the replay finished after the restart",
        Duration::from_secs(30),
        || {
            let p = progress(addr);
            p["state"] == "done" && p["delivered"] == 60
        },
    );
    let mut bodies: Vec<Vec<u8>> = receiver
        .received()
        .into_iter()
        .filter(|r| r.status == 200)
        .map(|r| r.body)
        .collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 60);
    assert_eq!(receiver.ok_count(), 60, "each row delivered once");
}

#[test]
fn dead_lettering_a_source_reports_the_count_and_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, _) = switchable(503);
    let mut c = one_source(dir.path(), &receiver);
    c.retry.base_ms = 60_000;
    c.retry.max_ms = 60_000;
    let node = start(c);
    let addr = node.local_addr();
    ingest_n(addr, "a", 5);
    assert!(receiver.wait_for(5, Duration::from_secs(10)));
    let engine = node.engine().unwrap();
    wait_until("5 backing off", Duration::from_secs(10), || {
        engine.stats().iter().map(|s| s.retried).sum::<u64>() == 5
    });
    let reply = call(addr, "POST", "/v1/sources/a/dead-letter", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json(), serde_json::json!({"count": 5}));
    let listed = get(addr, "/v1/dead-letters").json();
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    assert!(
        items.iter().all(|i| i["reason"] == "source_gone: a"),
        "{listed}"
    );
}

#[test]
fn stats_report_shards_and_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let g = gate();
    let mut c = node_config(dir.path());
    c.shards = 2;
    c.sources.push(source_of_kinds("a", "t1", &["gated"]));
    let node = start_gated(c, &g);
    let addr = node.local_addr();
    for _ in 0..3 {
        assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    }
    let engine = node.engine().unwrap();
    wait_until("3 running", Duration::from_secs(10), || {
        engine.stats().iter().map(|s| s.running).sum::<u64>() == 3
    });
    let stats = get(addr, "/v1/stats").json();
    assert_eq!(stats["shards"].as_array().unwrap().len(), 2);
    let tenants = stats["tenants"].as_array().unwrap();
    assert_eq!(tenants.len(), 1, "{stats}");
    let t = &tenants[0];
    assert_eq!(t["tenant"], "t1");
    assert_eq!(
        (t["claimed"].clone(), t["running"].clone(), t["due"].clone()),
        (3.into(), 3.into(), 0.into())
    );
    assert_eq!(
        (t["parked"].clone(), t["breakers_open"].clone()),
        (0.into(), 0.into())
    );
    let shard = &stats["shards"][t["shard"].as_u64().unwrap() as usize];
    assert_eq!(
        (
            shard["running"].clone(),
            shard["commits"].clone(),
            shard["group_commits"].clone()
        ),
        (3.into(), 3.into(), 3.into())
    );
    assert_eq!(
        (shard["restarts"].clone(), shard["restarting"].clone()),
        (0.into(), false.into())
    );
    assert_eq!(
        (
            shard["breaker_opens"].clone(),
            shard["breaker_closes"].clone()
        ),
        (0.into(), 0.into())
    );
    // Three hooks and their rows fill a few pages of 64 GiB × 7/8.
    assert_eq!(shard["store_ingest_limit_bytes"], 56u64 << 30);
    let used = shard["store_used_bytes"].as_u64().unwrap();
    assert!((4_096..1 << 20).contains(&used), "{used}");
    for _ in 0..3 {
        g.open.send(()).unwrap();
    }
}

/// A claim's body is served to an admin by `GET /v1/claims/{tenant}/{sha256}`;
/// an unknown claim, or names that are not a tenant id and a SHA-256, get 404.
#[test]
fn claims_are_redeemed_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let c = one_source(dir.path(), &receiver);
    let claims = goad::claim_check::ClaimStore::new(c.claim_dir(), 60_000);
    let claim = claims.check_in("acme", b"a large body").unwrap();
    let node = start(c);
    let addr = node.local_addr();
    let reply = get(addr, &format!("/v1/claims/acme/{}", claim.sha256));
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(reply.body, b"a large body");
    let unknown = get(addr, &format!("/v1/claims/acme/{}", "0".repeat(64)));
    assert_eq!(
        (unknown.status, unknown.error_code()),
        (404, "unknown_claim".into())
    );
    let outside = get(addr, "/v1/claims/acme/..%2Fx");
    assert_eq!(outside.status, 404);
}

/// Hooks posted with an ordering header wait behind their lane's head: the
/// stats and the metrics count them, and they are delivered once the head
/// is.
#[test]
fn hooks_waiting_in_an_ordering_lane_are_counted_in_stats_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let g = gate();
    let mut c = node_config(dir.path());
    let ordered = SinkConfig {
        ordered: true,
        ordering_key: Some("header:x-customer".into()),
        ..SinkConfig::of_kind("gated")
    };
    c.sources.push(source("a", "t1", vec![ordered]));
    let node = start_gated(c, &g);
    let addr = node.local_addr();
    for customer in ["c1", "c1", "c1", "c2"] {
        let reply = ingest(addr, "a", b"x", &[("x-customer", customer)]);
        assert_eq!(reply.status, 202);
    }
    let engine = node.engine().unwrap();
    wait_until("both lanes' heads running", Duration::from_secs(10), || {
        engine.stats()[0].running == 2
    });
    let stats = get(addr, "/v1/stats").json();
    assert_eq!(stats["shards"][0]["lane_members"], 2, "{stats}");
    assert_eq!(metric(addr, "goad_lane_members", ""), 2.0);
    for _ in 0..4 {
        g.open.send(()).unwrap();
    }
    engine.tick().unwrap();
    assert_eq!(engine.stats()[0].delivered, 4);
    assert_eq!(metric(addr, "goad_lane_members", ""), 0.0);
}

#[test]
fn reload_applies_live_keys_and_names_those_that_need_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goad.toml");
    let data = dir.path().join("data");
    let write = |extra: &str| {
        std::fs::write(
            &path,
            format!(
                "data_dir = {data:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n{extra}\n[[sources]]\nid = \"a\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/\"\n"
            ),
        )
        .unwrap()
    };
    write("[dispatch]\nsink_concurrency = 8");
    let node = start_with(Config::load(&path).unwrap(), Some(path.clone()));
    let addr = node.local_addr();
    assert_eq!(ingest(addr, "b", b"x", &[]).status, 404);

    std::fs::write(&path, std::fs::read_to_string(&path).unwrap().replace("shards = 1", "shards = 3").replace("sink_concurrency = 8", "sink_concurrency = 4\nbreaker_failures = 3\n[retry]\nmax_attempts = 5") + "[[sources]]\nid = \"b\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/\"\n").unwrap();
    let reply = call(addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json(),
        serde_json::json!({
            "applied": ["dispatch.breaker_failures", "dispatch.sink_concurrency", "retry.max_attempts", "sources"],
            "restart_required": ["shards"],
        })
    );
    assert_eq!(
        ingest(addr, "b", b"x", &[]).status,
        202,
        "the new source takes hooks"
    );

    write("[dispatch]\nsink_concurrency = 0");
    let bad = call(addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.error_code(), "invalid_config");
    assert!(bad.json()["message"]
        .as_str()
        .unwrap()
        .contains("dispatch.sink_concurrency"));
    assert_eq!(ingest(addr, "b", b"x", &[]).status, 202, "nothing applied");

    let dir2 = tempfile::tempdir().unwrap();
    let plain = start(node_config(dir2.path()));
    assert_eq!(
        call(plain.local_addr(), "POST", "/v1/reload", &[], b"").error_code(),
        "no_config_file"
    );
}

/// A source's `max_ingest_per_s`: past a second's worth its ingest is
/// answered 429 `rate_limited` with `Retry-After`, counted in the ingest
/// metrics, while another source takes hooks. A reload that leaves the
/// rate as it was keeps the source's bucket (no fresh second's worth); one
/// that changes it starts a new one.
#[test]
fn a_source_over_its_ingest_rate_gets_429_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = two_sources(dir.path(), &receiver);
    c.sources[0].max_ingest_per_s = Some(1);
    let path = dir.path().join("goad.toml");
    let write = |c: &Config| std::fs::write(&path, toml::to_string(c).unwrap()).unwrap();
    write(&c);
    let node = start_with(c.clone(), Some(path.clone()));
    let addr = node.local_addr();
    assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    let refused = ingest(addr, "a", b"y", &[]);
    assert_eq!(
        (
            refused.status,
            refused.error_code(),
            refused.header("retry-after")
        ),
        (429, "rate_limited".to_string(), Some("1"))
    );
    assert_eq!(
        refused.json()["message"],
        "this source takes at most its max_ingest_per_s; come back in 1 s"
    );
    assert_eq!(ingest(addr, "b", b"z", &[]).status, 202);
    let labels = r#"source="a",status="429",error="rate_limited""#;
    assert_eq!(metric(addr, "goad_ingest_requests_total", labels), 1.0);
    let reload = || call(addr, "POST", "/v1/reload", &[], b"").status;
    assert_eq!(reload(), 200);
    assert_eq!(ingest(addr, "a", b"y", &[]).status, 429, "the bucket kept");
    c.sources[0].max_ingest_per_s = Some(2);
    write(&c);
    assert_eq!(reload(), 200);
    assert_eq!(
        ingest(addr, "a", b"y", &[]).status,
        202,
        "a new rate, a new bucket"
    );
}

/// A source `a` (tenant `t1`) posting to `receiver`, and a source `ops`
/// posting to `ops` that is the notifications source.
fn notifying(dir: &std::path::Path, receiver: &Receiver, ops: &Receiver) -> Config {
    let mut c = node_config(dir);
    c.sources.push(source(
        "a",
        "t1",
        vec![SinkConfig::http(receiver.url("/a"))],
    ));
    c.sources.push(source(
        "ops",
        "operator",
        vec![SinkConfig::http(ops.url("/ops"))],
    ));
    c.notifications.source = Some("ops".into());
    c
}

/// `notifications.source`: a row dead-lettered raises a `row.dead` event,
/// committed to that source and delivered by its sink as a JSON hook; a
/// row of that source itself raises none (a failing notifications sink
/// cannot feed itself).
#[test]
fn a_dead_row_is_notified_through_the_notifications_source() {
    let dir = tempfile::tempdir().unwrap();
    let refusing = Receiver::start(|_| Reply::status(410).with_body("gone")).unwrap();
    let (ops, ops_status) = switchable(200);
    let node = start(notifying(dir.path(), &refusing, &ops));
    let addr = node.local_addr();
    let before_ms = goad::runtime::wall_ms();
    let reply = ingest(addr, "a", b"x", &[]);
    let id = reply.json()["id"].as_str().unwrap().to_string();
    assert!(ops.wait_for(1, Duration::from_secs(10)));
    let after_ms = goad::runtime::wall_ms();
    let notice = &ops.received()[0];
    assert_eq!(notice.header("content-type"), Some("application/json"));
    assert_eq!(notice.header("x-goad-source"), Some("ops"));
    let mut event: serde_json::Value = serde_json::from_slice(&notice.body).unwrap();
    let at_ms = event["at_ms"].as_u64().unwrap();
    assert!((before_ms..=after_ms).contains(&at_ms), "{event}");
    event.as_object_mut().unwrap().remove("at_ms");
    assert_eq!(
        event,
        serde_json::json!({
            "type": "row.dead",
            "hook_id": id,
            "tenant": "t1",
            "source_id": "a",
            "sink_index": 0,
            "sink_type": "http",
            "attempt": 1,
            "reason": "sink http: permanent: HTTP status 410: gone",
        })
    );
    ops_status.store(410, Ordering::SeqCst);
    assert_eq!(ingest(addr, "ops", b"y", &[]).status, 202);
    let engine = node.engine().unwrap();
    wait_until("the ops row dead too", Duration::from_secs(10), || {
        dead(&engine).len() == 2
    });
    let counted = |result: &str| {
        metric(
            addr,
            "goad_notifications_total",
            &format!("result=\"{result}\""),
        )
    };
    assert_eq!(
        [
            counted("queued"),
            counted("committed"),
            counted("dropped"),
            counted("failed")
        ],
        [1.0, 1.0, 0.0, 0.0]
    );
}

/// A burst of dead rows (a source's backlog dead-lettered at once) is
/// notified in full: 2,000 events queued and committed, none dropped.
#[test]
fn a_burst_of_dead_rows_is_notified_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let held = Receiver::start(|_| Reply::status(503).header("retry-after", "3600")).unwrap();
    let ops = Receiver::start(|_| Reply::status(200)).unwrap();
    let node = start(notifying(dir.path(), &held, &ops));
    let addr = node.local_addr();
    ingest_n(addr, "a", 2_000);
    let started = std::time::Instant::now();
    let reply = call(addr, "POST", "/v1/sources/a/dead-letter", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let dead = reply.json()["count"].as_u64().unwrap();
    let counted = |result: &str| {
        metric(
            addr,
            "goad_notifications_total",
            &format!("result=\"{result}\""),
        )
    };
    wait_until("every notice committed", Duration::from_secs(60), || {
        counted("committed") + counted("failed") + counted("dropped") >= dead as f64
    });
    eprintln!("{dead} notices committed in {:?}", started.elapsed());
    assert_eq!(
        [counted("queued"), counted("committed"), counted("dropped")],
        [dead as f64, dead as f64, 0.0]
    );
}

/// `notifications.source` hears of breakers too: a receiver failing until
/// its key's breaker opens raises `sink.breaker_opened` (with until when
/// its rows park), and its first answer after that `sink.breaker_closed`.
#[test]
fn a_breaker_opening_and_closing_is_notified() {
    let dir = tempfile::tempdir().unwrap();
    let (failing, status) = switchable(503);
    let ops = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = notifying(dir.path(), &failing, &ops);
    // Long enough that the receiver is fixed before the first probe.
    c.dispatch.breaker_failures = 2;
    c.dispatch.breaker_open_ms = 2_000;
    c.dispatch.breaker_max_open_ms = 2_000;
    let node = start(c);
    let addr = node.local_addr();
    for _ in 0..2 {
        assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    }
    assert!(ops.wait_for(1, Duration::from_secs(10)));
    status.store(200, Ordering::SeqCst);
    assert!(ops.wait_for(2, Duration::from_secs(10)));
    let events: Vec<serde_json::Value> = ops
        .received()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let (opened_at_ms, closed_at_ms) = (&events[0]["at_ms"], &events[1]["at_ms"]);
    let key = |kind: &str| {
        serde_json::json!({
            "type": kind, "tenant": "t1", "source_id": "a", "sink_index": 0, "sink_type": "http",
        })
    };
    let mut opened = key("sink.breaker_opened");
    opened["at_ms"] = opened_at_ms.clone();
    opened["open_until_ms"] = (opened_at_ms.as_u64().unwrap() + 2_000).into();
    opened["consecutive_opens"] = 1.into();
    let mut closed = key("sink.breaker_closed");
    closed["at_ms"] = closed_at_ms.clone();
    assert_eq!(events, [opened, closed]);
}

/// `metrics.per_sink`: `counts` keeps each sink's outcomes and breaker
/// and drops its histograms, `off` every `goad_sink_` series (the node's
/// own stay), and a reload applies it to the next scrape. A reload applies
/// `egress` too, and a later one does not name it again.
#[test]
fn per_sink_metrics_are_cut_to_counts_or_off_at_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let path = dir.path().join("goad.toml");
    let data = dir.path().join("data");
    let url = receiver.url("/a");
    let write = |per_sink: &str, deny: bool| {
        std::fs::write(
            &path,
            format!(
                "data_dir = {data:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n[metrics]\nper_sink = \"{per_sink}\"\n[egress]\ndeny_private_addresses = {deny}\n[[sources]]\nid = \"a\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"{url}\"\n"
            ),
        )
        .unwrap()
    };
    write("counts", false);
    let node = start_with(Config::load(&path).unwrap(), Some(path.clone()));
    let addr = node.local_addr();
    assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    wait_until("the delivery counted", Duration::from_secs(10), || {
        metric(addr, "goad_sink_outcomes_total", r#"result="delivered""#) == 1.0
    });
    let families = || -> std::collections::BTreeSet<String> {
        parse_prometheus(&get(addr, "/metrics").text())
            .into_iter()
            .map(|(name, _, _)| name)
            .filter(|name| name.starts_with("goad_sink_"))
            .collect()
    };
    let counts = ["goad_sink_breaker_open", "goad_sink_outcomes_total"];
    assert_eq!(families(), counts.map(String::from).into());
    assert_eq!(
        metric(addr, "goad_deliveries_total", r#"result="delivered""#),
        1.0
    );

    write("off", true);
    let reply = call(addr, "POST", "/v1/reload", &[], b"");
    let applied = ["egress.deny_private_addresses", "metrics.per_sink"];
    assert_eq!(
        reply.json(),
        serde_json::json!({"applied": applied, "restart_required": []})
    );
    assert_eq!(families(), Default::default());
    assert_eq!(
        metric(addr, "goad_deliveries_total", r#"result="delivered""#),
        1.0
    );

    write("all", true);
    assert_eq!(
        call(addr, "POST", "/v1/reload", &[], b"").json(),
        serde_json::json!({"applied": ["metrics.per_sink"], "restart_required": []})
    );
    let all = families();
    assert!(
        all.contains("goad_sink_attempt_duration_seconds_bucket"),
        "{all:?}"
    );
    assert!(
        all.contains("goad_sink_delivery_latency_seconds_count"),
        "{all:?}"
    );
}

/// A draining node takes no new hooks (503 `draining`, and `/readyz` 503
/// so a load balancer moves providers away) while it delivers the ones it
/// holds, counting them down to 0; it drains on after a restart, and
/// `DELETE /v1/drain` takes hooks again.
#[test]
fn a_draining_node_delivers_what_it_holds_takes_nothing_new_and_drains_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(503);
    let config = {
        let mut c = one_source(dir.path(), &receiver);
        c.retry.base_ms = 50;
        c
    };
    let node = start(config.clone());
    let addr = node.local_addr();
    for body in ["one", "two", "three"] {
        assert_eq!(ingest(addr, "a", body.as_bytes(), &[]).status, 202);
    }
    assert!(
        receiver.wait_for(3, Duration::from_secs(10)),
        "each tried once"
    );

    let started = call(addr, "POST", "/v1/drain", &[], b"");
    assert_eq!(
        started.json(),
        serde_json::json!({"draining": true, "pending_rows": 3})
    );
    let refused = ingest(addr, "a", b"four", &[]);
    assert_eq!(
        (
            refused.status,
            refused.error_code(),
            refused.header("retry-after")
        ),
        (503, "draining".to_string(), Some("5"))
    );
    assert_eq!(get(addr, "/readyz").error_code(), "draining");
    assert!(get(addr, "/metrics").text().contains("\ngoad_draining 1\n"));

    status.store(200, Ordering::SeqCst);
    wait_until("the held hooks delivered", Duration::from_secs(10), || {
        get(addr, "/v1/drain").json()["pending_rows"] == 0
    });
    let mut delivered: Vec<Vec<u8>> = receiver
        .received()
        .into_iter()
        .filter(|r| r.status == 200)
        .map(|r| r.body)
        .collect();
    delivered.sort();
    assert_eq!(
        delivered,
        [b"one".to_vec(), b"three".to_vec(), b"two".to_vec()]
    );
    drop(node);

    let node = start(config);
    let addr = node.local_addr();
    assert_eq!(
        get(addr, "/readyz").error_code(),
        "draining",
        "after a restart"
    );
    assert_eq!(ingest(addr, "a", b"four", &[]).status, 503);
    let ended = call(addr, "DELETE", "/v1/drain", &[], b"");
    assert_eq!(
        ended.json(),
        serde_json::json!({"draining": false, "pending_rows": 0})
    );
    assert_eq!(get(addr, "/readyz").status, 200);
    assert_eq!(ingest(addr, "a", b"four", &[]).status, 202);
    assert!(get(addr, "/metrics").text().contains("\ngoad_draining 0\n"));
}

/// `POST /v1/backup` writes the data directory to an absolute path on the
/// node's host, answering what it wrote; a body that is not its JSON, a
/// relative path and a directory holding files are 400s saying so.
#[test]
fn a_backup_is_written_where_the_request_says_or_refused_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let addr = node.local_addr();
    let backup = |body: &str| call(addr, "POST", "/v1/backup", &[], body.as_bytes());

    let bad = backup("{\"dir\": \"/tmp/x\"}");
    assert_eq!((bad.status, bad.error_code()), (400, "bad_json".into()));
    let relative = backup("{\"to\": \"backups/today\"}");
    assert_eq!(
        (
            relative.status,
            relative.json()["message"].as_str().unwrap()
        ),
        (
            400,
            "to must be an absolute path on the node's host, got \"backups/today\""
        )
    );
    let full = tempfile::tempdir().unwrap();
    std::fs::write(full.path().join("old"), b"x").unwrap();
    let refused = backup(&serde_json::json!({"to": full.path()}).to_string());
    assert_eq!(
        (refused.status, refused.error_code()),
        (400, "bad_backup_dir".into()),
        "{}",
        refused.text()
    );

    let to = full.path().join("today");
    let made = backup(&serde_json::json!({"to": to}).to_string());
    assert_eq!(made.status, 200, "{}", made.text());
    let made = made.json();
    assert_eq!(made["to"], to.display().to_string());
    assert_eq!(
        made["shards"],
        serde_json::json!([{"shard": 0, "bytes": std::fs::metadata(to.join("shard-0/data.mdb")).unwrap().len()}])
    );
    assert!(to.join(goad::BACKUP_MANIFEST).exists());
}

/// Ingests `body` into `source` until it is refused, at most `max` times:
/// the hooks taken, and the refusal's message, checked to be a 503 with
/// `error` and `Retry-After: 5`.
fn ingest_until_refused(
    addr: SocketAddr,
    source: &str,
    body: &[u8],
    max: u64,
    error: &str,
) -> (u64, String) {
    let mut acked = 0;
    let refused = loop {
        let reply = ingest(addr, source, body, &[]);
        if reply.status != 202 {
            break reply;
        }
        acked += 1;
        assert!(acked < max, "{max} hooks of {} bytes taken", body.len());
    };
    assert_eq!((refused.status, refused.error_code()), (503, error.into()));
    assert_eq!(refused.header("retry-after"), Some("5"));
    let message = refused.json()["message"].as_str().unwrap().to_string();
    (acked, message)
}

/// A shard whose store holds all that new hooks may fill answers ingest
/// 503 `store_full`, and takes hooks again once deliveries free room.
#[test]
fn a_full_store_answers_503_store_full_until_deliveries_free_room() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(503);
    let mut c = one_source(dir.path(), &receiver);
    c.max_shard_bytes = 16 << 20;
    c.retry.base_ms = 50;
    c.retry.max_ms = 200;
    c.retry.max_attempts = 10_000;
    let node = start(c);
    let addr = node.local_addr();
    let body = vec![b'x'; 64 * 1024];
    let (acked, message) = ingest_until_refused(addr, "a", &body, 300, "store_full");
    assert!(
        message.starts_with("the shard's store is full (")
            && message.ends_with(
                "bytes in use; new hooks may fill 14680064, 7/8 of max_shard_bytes): commit again once deliveries free room"
            ),
        "{message}"
    );
    status.store(200, Ordering::SeqCst);
    let engine = node.engine().unwrap();
    wait_until("every hook delivered", Duration::from_secs(30), || {
        engine.hook_count().unwrap() == 0
    });
    assert_eq!(engine.stats()[0].delivered, acked);
    assert_eq!(ingest(addr, "a", &body, &[]).status, 202);
}

/// A tenant at its `max_stored_bytes` gets 503 `tenant_full` (naming the
/// tenant and its bound) while another tenant's ingest goes on; `/v1/stats`
/// shows what each tenant's hooks hold against its bound.
#[test]
fn a_tenant_at_its_stored_bytes_bound_answers_503_tenant_full() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, _status) = switchable(503);
    let mut c = two_sources(dir.path(), &receiver);
    c.max_body_bytes = 64 * 1024;
    c.retry.base_ms = 60_000;
    let bound = goad::config::TenantLimitsConfig {
        max_stored_bytes: Some(256 * 1024),
        ..Default::default()
    };
    c.dispatch.tenants.insert("t1".into(), bound);
    let node = start(c);
    let addr = node.local_addr();
    let body = vec![b'x'; 64 * 1024];
    let (acked, message) = ingest_until_refused(addr, "a", &body, 10, "tenant_full");
    assert_eq!(acked, 3, "a fourth hook and its headers would pass 256 KiB");
    assert!(
        message
            .starts_with("tenant \"t1\" is at its max_stored_bytes (262144; its hooks would hold ")
            && message.ends_with(" with this one): commit again once its deliveries free room"),
        "{message}"
    );
    assert_eq!(
        ingest(addr, "b", &body, &[]).status,
        202,
        "t2 is not bounded by t1"
    );
    let tenants = get(addr, "/v1/stats").json()["tenants"].clone();
    let stored = |tenant: &str| {
        let of = tenants
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tenant"] == tenant)
            .unwrap();
        (
            of["stored_bytes"].as_u64().unwrap(),
            of["max_stored_bytes"].as_u64().unwrap(),
        )
    };
    let (t1_bytes, t1_bound) = stored("t1");
    let (t2_bytes, t2_bound) = stored("t2");
    assert_eq!((t1_bound, t2_bound), (256 * 1024, 0));
    assert_eq!(t1_bytes, 3 * t2_bytes, "three hooks of t1, one of t2");
    assert!((64 * 1024..65 * 1024).contains(&t2_bytes), "{t2_bytes}");
    let refused = metric(addr, "goad_ingest_requests_total", r#"error="tenant_full""#);
    assert_eq!(refused, 1.0);
}

/// `DELETE /v1/dead-letters` deletes the matching dead letters for good and
/// says how many; what it does not match stays listed.
#[test]
fn dead_letters_are_purged_by_source_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, _status) = switchable(400);
    let node = start(two_sources(dir.path(), &receiver));
    let addr = node.local_addr();
    ingest_n(addr, "a", 3);
    ingest_n(addr, "b", 2);
    let engine = node.engine().unwrap();
    wait_until("5 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 5
    });
    let purge = |query: &str| {
        call(
            addr,
            "DELETE",
            &format!("/v1/dead-letters{query}"),
            &[],
            b"",
        )
    };
    let bad = purge("?until_ms=soon");
    assert_eq!((bad.status, bad.error_code()), (400, "bad_time".into()));
    assert_eq!(
        purge("?until_ms=1").json(),
        serde_json::json!({"purged": 0})
    );
    assert_eq!(
        purge("?source_id=a").json(),
        serde_json::json!({"purged": 3})
    );
    assert_eq!(listed(addr, "source_id"), ["b", "b"]);
    assert_eq!(purge("").json(), serde_json::json!({"purged": 2}));
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// `/metrics` parses as the Prometheus text format: every sample has a
/// declared family, a valid name, labels and a number, and histogram
/// buckets are cumulative.
#[test]
fn metrics_parse_as_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = one_source(dir.path(), &receiver);
    c.shards = 2;
    let node = start(c);
    let addr = node.local_addr();
    for _ in 0..5 {
        assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    }
    assert_eq!(ingest(addr, "nope", b"x", &[]).status, 404);
    assert!(receiver.wait_for(5, Duration::from_secs(10)));
    let engine = node.engine().unwrap();
    wait_until("5 delivered", Duration::from_secs(10), || {
        engine.stats().iter().map(|s| s.delivered).sum::<u64>() == 5
    });
    let reply = get(addr, "/metrics");
    assert_eq!(reply.status, 200);
    assert!(reply
        .header("content-type")
        .unwrap()
        .starts_with("text/plain"));
    let text = reply.text();
    let samples = parse_prometheus(&text);
    let sum = |name: &str, label: &str| -> f64 {
        samples
            .iter()
            .filter(|(n, labels, _)| n == name && labels.contains(label))
            .map(|(_, _, v)| v)
            .sum()
    };
    assert_eq!(sum("goad_commits_total", ""), 5.0);
    let ingested: Vec<(&str, f64)> = samples
        .iter()
        .filter(|(n, _, _)| n == "goad_ingest_requests_total")
        .map(|(_, labels, v)| (labels.as_str(), *v))
        .collect();
    assert_eq!(
        ingested,
        [
            (r#"source="",status="404",error="unknown_source""#, 1.0),
            (r#"source="a",status="202",error="""#, 5.0),
        ]
    );
    // One ingest at a time: each waited for a sync of its own.
    assert_eq!(sum("goad_group_commits_total", ""), 5.0);
    assert_eq!(sum("goad_deliveries_total", "result=\"delivered\""), 5.0);
    assert_eq!(sum("goad_attempt_duration_seconds_count", ""), 5.0);
    assert_eq!(sum("goad_dead_letters", ""), 0.0);
    assert_eq!(sum("goad_store_failures_total", ""), 0.0);
    assert_eq!(sum("goad_unreadable_due_entries_total", ""), 0.0);
    assert_eq!(sum("goad_recovered_rows_total", ""), 0.0);
    assert_eq!(sum("goad_shard_restarts_total", ""), 0.0);
    assert_eq!(sum("goad_dead_letters_expired_total", ""), 0.0);
    assert_eq!(sum("goad_replays", ""), 0.0);
    assert_eq!(sum("goad_lane_members", ""), 0.0);
    assert_eq!(
        sum("goad_store_ingest_limit_bytes", ""),
        2.0 * (56u64 << 30) as f64
    );
    assert!(sum("goad_store_used_bytes", "shard=\"0\"") > 0.0);
    for family in [
        "goad_attempts_total",
        "goad_due_rows",
        "goad_claimed_rows",
        "goad_running_attempts",
        "goad_running_calls",
        "goad_parked_total",
        "goad_breakers_open",
        "goad_breaker_opens_total",
        "goad_breaker_closes_total",
        "goad_oldest_due_age_seconds",
        "goad_abandoned_workers",
        "goad_recovered_rows_total",
        "goad_store_failures_total",
        "goad_shard_restarts_total",
        "goad_replay_pacer_passes_total",
        "goad_lane_members",
    ] {
        assert!(
            samples.iter().any(|(n, _, _)| n == family),
            "{family} missing"
        );
    }
    let buckets: Vec<f64> = samples
        .iter()
        .filter(|(n, _, _)| n == "goad_attempt_duration_seconds_bucket")
        .map(|(_, _, v)| *v)
        .collect();
    assert!(
        buckets.windows(2).all(|w| w[0] <= w[1]),
        "cumulative buckets"
    );
    assert_eq!(*buckets.last().unwrap(), 5.0);
    // The one sink's histogram is the node's, with the sink's labels.
    let sink_buckets: Vec<(&str, f64)> = samples
        .iter()
        .filter(|(n, _, _)| n == "goad_sink_attempt_duration_seconds_bucket")
        .map(|(_, labels, v)| (labels.as_str(), *v))
        .collect();
    assert_eq!(
        sink_buckets.iter().map(|(_, v)| *v).collect::<Vec<f64>>(),
        buckets
    );
    assert!(sink_buckets
        .iter()
        .all(|(l, _)| l.starts_with(r#"tenant="t1",source="a",sink="0",type="http",le="#)));
    assert_eq!(sum("goad_sink_attempt_duration_seconds_count", ""), 5.0);
    assert_eq!(
        sum(
            "goad_build_info",
            &format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))
        ),
        1.0
    );
    // Each delivered row's latency from its ingest: all within the test.
    assert_eq!(sum("goad_sink_delivery_latency_seconds_count", ""), 5.0);
    let waited_s = sum("goad_sink_delivery_latency_seconds_sum", "");
    assert!((0.0..50.0).contains(&waited_s), "{waited_s}");
    // Every metric the operations guide names, its alert rules included,
    // is one the node exports (a histogram by its base name).
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"),
    )
    .unwrap();
    let named: std::collections::BTreeSet<&str> = guide
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("goad_"))
        .collect();
    assert!(named.len() >= 15, "{named:?}");
    for name in named {
        let exported = |n: &str| samples.iter().any(|(s, _, _)| s == n);
        assert!(
            exported(name) || exported(&format!("{name}_bucket")),
            "docs/operations.md names {name}, which the node does not export"
        );
    }
    assert_eq!(
        sum(
            "goad_sink_outcomes_total",
            r#"source="a",sink="0",type="http",result="delivered""#
        ),
        5.0
    );
}

/// The sum of a metric's samples whose labels contain `labels`.
fn metric(addr: SocketAddr, name: &str, labels: &str) -> f64 {
    parse_prometheus(&get(addr, "/metrics").text())
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

/// Scenarios 29 and 33: the same spec while a replay runs is that replay;
/// rows that die after a replay began are not its rows.
#[test]
fn a_replay_is_idempotent_and_takes_only_rows_dead_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let f = failing.clone();
    let receiver = Receiver::start(move |r| {
        if f.load(Ordering::SeqCst) || r.body.starts_with(b"late") {
            Reply::status(400)
        } else {
            Reply::status(200)
        }
    })
    .unwrap();
    let mut c = one_source(dir.path(), &receiver);
    c.replay.rate = 2;
    let node = start(c);
    let addr = node.local_addr();
    for i in 0..3 {
        assert_eq!(
            ingest(addr, "a", format!("early {i}").as_bytes(), &[]).status,
            202
        );
    }
    let engine = node.engine().unwrap();
    wait_until("3 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 3
    });
    failing.store(false, Ordering::SeqCst);
    let first = call(addr, "POST", "/v1/replays", &[], br#"{"source_id":"a"}"#).json();
    let again = call(addr, "POST", "/v1/replays", &[], br#"{"source_id":"a"}"#).json();
    assert_eq!(again["id"], first["id"]);
    assert_eq!(
        (first["existing"].clone(), again["existing"].clone()),
        (false.into(), true.into())
    );
    let other = call(addr, "POST", "/v1/replays", &[], br#"{"tenant":"nobody"}"#).json();
    assert_ne!(other["id"], first["id"]);
    assert_eq!(other["matched"], 0);
    for i in 0..2 {
        assert_eq!(
            ingest(addr, "a", format!("late {i}").as_bytes(), &[]).status,
            202
        );
    }
    let id = first["id"].as_str().unwrap();
    wait_until("the replay finished", Duration::from_secs(20), || {
        let p = get(addr, &format!("/v1/replays/{id}")).json();
        p["state"] == "done" && p["delivered"] == 3
    });
    let p = get(addr, &format!("/v1/replays/{id}")).json();
    assert_eq!(
        (p["matched"].clone(), p["moved"].clone()),
        (3.into(), 3.into())
    );
    let left = listed(addr, "hook_id");
    assert_eq!(left.len(), 2, "the two late rows are still dead: {left:?}");
}

/// Commits `n` hooks to source "a", whose sink refuses them, and waits
/// until all `n` are dead letters.
fn commit_until_dead(engine: &goad::Engine, n: usize) {
    for i in 0..n {
        engine
            .commit(goad::NewHook::new("a", format!("{i}").into_bytes()))
            .unwrap();
    }
    wait_until(&format!("{n} dead"), Duration::from_secs(20), || {
        dead(engine).len() == n
    });
}

/// Starts a replay of every dead letter and waits until it paused itself;
/// returns its id and progress.
fn replay_until_paused(addr: SocketAddr) -> (String, serde_json::Value) {
    let id = call(addr, "POST", "/v1/replays", &[], b"").json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until("the replay paused", Duration::from_secs(20), || {
        get(addr, &format!("/v1/replays/{id}")).json()["state"] == "paused"
    });
    let progress = get(addr, &format!("/v1/replays/{id}")).json();
    (id, progress)
}

/// Scenario 31: a replay into a sink that still fails pauses itself once
/// at least 100 of its rows died again, more than were delivered.
#[test]
fn a_replay_into_a_failing_sink_pauses_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, _) = switchable(400);
    let mut c = one_source(dir.path(), &receiver);
    c.replay.rate = 100;
    let node = start(c);
    let addr = node.local_addr();
    let engine = node.engine().unwrap();
    commit_until_dead(&engine, 250);
    let (id, p) = replay_until_paused(addr);
    let error = p["error"].as_str().unwrap();
    assert!(
        error.contains("auto-paused") && error.contains("dead-lettered again"),
        "{error}"
    );
    assert!(p["dead_again"].as_u64().unwrap() >= 100, "{p}");
    assert!(p["moved"].as_u64().unwrap() < 250, "{p}");
    let moved = p["moved"].clone();
    assert_eq!(metric(addr, "goad_replays", "state=\"paused\""), 1.0);
    pacer_passes(addr, 3);
    assert_eq!(
        get(addr, &format!("/v1/replays/{id}")).json()["moved"],
        moved,
        "a paused replay moves nothing"
    );
}

/// Scenario 32: a replay into a sink that fails transiently opens its
/// breaker, and the rows it moves next are parked one after another; once
/// its rows were parked 100 times and none delivered it pauses itself,
/// before it moved them all.
#[test]
fn a_replay_behind_an_open_breaker_pauses_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(400);
    let mut c = one_source(dir.path(), &receiver);
    c.dispatch.breaker_failures = 5;
    c.dispatch.breaker_open_ms = 60_000;
    c.dispatch.breaker_max_open_ms = 60_000;
    c.replay.rate = 100;
    let node = start(c);
    let addr = node.local_addr();
    let engine = node.engine().unwrap();
    commit_until_dead(&engine, 500);
    status.store(503, Ordering::SeqCst);
    let (_, p) = replay_until_paused(addr);
    let error = p["error"].as_str().unwrap();
    assert!(
        error.contains("auto-paused") && error.contains("parked behind an open circuit breaker"),
        "{error}"
    );
    assert!(p["parked"].as_u64().unwrap() >= 100, "{p}");
    assert_eq!(p["delivered"], 0, "{p}");
    assert!(p["moved"].as_u64().unwrap() < 500, "{p}");
    assert_eq!(engine.stats()[0].breakers_open, 1);
}

/// The operator subcommands talk to a node's admin API.
#[test]
fn the_operator_cli_lists_replays_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(400);
    let mut c = one_source(dir.path(), &receiver);
    std::env::set_var("NODE_TEST_CLI_TOKEN", "cli-1");
    c.admin_token_env = Some("NODE_TEST_CLI_TOKEN".into());
    let node = start(c);
    let url = format!("http://{}", node.local_addr());
    assert_eq!(ingest(node.local_addr(), "a", b"x", &[]).status, 202);
    let engine = node.engine().unwrap();
    wait_until("1 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 1
    });
    let goad = |args: &[&str], token: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_goad"));
        cmd.args(args)
            .args(["--node", &url, "--token-env", "NODE_TEST_CLI_TOKEN"]);
        if !token {
            cmd.env_remove("NODE_TEST_CLI_TOKEN");
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, _) = goad(&["stats"], true);
    assert_eq!(code, Some(0));
    assert!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["shards"].is_array());
    let (code, out, _) = goad(&["pressure"], true);
    assert_eq!(code, Some(0));
    assert!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["lag_ms"].is_u64());
    let (code, out, _) = goad(&["dlq", "list", "--source", "a"], true);
    assert_eq!(code, Some(0));
    let items = serde_json::from_str::<serde_json::Value>(&out).unwrap()["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1);
    let id = items[0]["id"].as_str().unwrap();
    let (code, out, _) = goad(&["dlq", "show", id], true);
    assert_eq!(code, Some(0), "{out}");
    let shown = serde_json::from_str::<serde_json::Value>(&out).unwrap();
    assert_eq!(
        (&shown["id"], &shown["body_base64"]),
        (&items[0]["id"], &"eA==".into())
    );
    let (code, out, _) = goad(&["dlq", "show", id, "--body"], true);
    assert_eq!((code, out.as_str()), (Some(0), "x"));
    let hook_id = items[0]["hook_id"].as_str().unwrap();
    for (hook, count) in [(hook_id, 1), ("no-such-hook", 0)] {
        let (code, out, _) = goad(&["dlq", "list", "--hook", hook], true);
        assert_eq!(code, Some(0), "{out}");
        let page = serde_json::from_str::<serde_json::Value>(&out).unwrap();
        assert_eq!(page["items"].as_array().unwrap().len(), count);
    }
    let (code, out, _) = goad(&["hook", hook_id], true);
    assert_eq!(code, Some(0), "{out}");
    let hook = serde_json::from_str::<serde_json::Value>(&out).unwrap();
    assert_eq!(
        (&hook["id"], &hook["sinks"][0]["state"]),
        (&hook_id.into(), &"dead".into())
    );
    let (code, out, _) = goad(&["hook", hook_id, "--body"], true);
    assert_eq!((code, out.as_str()), (Some(0), "x"));
    for args in [
        &["sinks"][..],
        &["sinks", "--source", "a", "--tenant", "t1"],
    ] {
        let (code, out, _) = goad(args, true);
        assert_eq!(code, Some(0), "{out}");
        let sinks = serde_json::from_str::<serde_json::Value>(&out).unwrap()["sinks"].clone();
        assert_eq!(
            (
                &sinks[0]["source_id"],
                &sinks[0]["dead"],
                sinks.as_array().unwrap().len()
            ),
            (&"a".into(), &1.into(), 1)
        );
    }
    let (code, out, _) = goad(&["sinks", "--tenant", "t2"], true);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"sinks": []})
    );
    for (args, draining) in [
        (&["drain"][..], true),
        (&["drain", "--status"], true),
        (&["drain", "--end"], false),
    ] {
        let (code, out, _) = goad(args, true);
        assert_eq!(code, Some(0), "{out}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            serde_json::json!({"draining": draining, "pending_rows": 0}),
            "{args:?}"
        );
    }
    let (code, _, err) = goad(&["hook", "no-such-hook"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("HTTP 404 unknown_hook"), "{err}");
    let (code, _, err) = goad(&["dlq", "show", "0-0-0-0"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("HTTP 404 unknown_dead_letter"), "{err}");
    status.store(200, Ordering::SeqCst);
    let (code, out, _) = goad(&["dlq", "replay", "--source", "a"], true);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["matched"],
        1
    );
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
    status.store(400, Ordering::SeqCst);
    assert_eq!(ingest(node.local_addr(), "a", b"y", &[]).status, 202);
    wait_until("1 dead again", Duration::from_secs(10), || {
        dead(&engine).len() == 1
    });
    let (code, out, _) = goad(&["dlq", "purge", "--source", "a"], true);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"purged": 1})
    );
    assert_eq!(dead(&engine).len(), 0);
    let (code, _, err) = goad(&["stats"], false);
    assert_eq!(code, Some(1));
    assert!(err.contains("401") && err.contains("unauthorized"), "{err}");
}

/// A client that sends `Expect: 100-continue` gets the interim answer at
/// once (no stall waiting for it), then the final one; an oversized body
/// is refused before it is sent.
#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = one_source(dir.path(), &receiver);
    c.max_body_bytes = 1_000;
    let node = start(c);
    let mut client = Client::connect(node.local_addr());
    client.send(
        b"POST /v1/sources/a/hooks HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 5\r\n\r\n",
    );
    let interim = client.reply().expect("100 Continue");
    assert_eq!(interim.status, 100);
    client.send(b"hello");
    let accepted = client.reply().expect("the final answer");
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    assert_eq!(receiver.received()[0].body, b"hello");
    let mut big = Client::connect(node.local_addr());
    big.send(b"POST /v1/sources/a/hooks HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 5000\r\n\r\n");
    let refused = big.reply().expect("413 without a 100 first");
    assert_eq!(refused.status, 413);
}

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
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::from(certificates(read(ca_fixture))))
        .client_cert(client)
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .build()
        .into()
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
    let options = NodeOptions {
        config,
        config_path: None,
        allow_open_admin: false,
    };
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
        let options = NodeOptions {
            config,
            config_path: None,
            allow_open_admin: false,
        };
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

/// Over HTTPS the front's deadlines hold as over plain HTTP: a client that
/// sends half a request through TLS gets 408 through TLS and is closed.
#[test]
fn a_slow_https_client_gets_408_through_tls() {
    use rustls::pki_types::pem::PemObject;
    use std::io::{Read, Write};
    let fixtures = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.http.tls_cert_file = Some(fixtures.join("localhost-cert.pem"));
    c.http.tls_key_file = Some(fixtures.join("localhost-key.pem"));
    let node = start(c);
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(fixtures.join("test-ca.pem")).unwrap();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = std::net::TcpStream::connect(node.local_addr()).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut slow = rustls::StreamOwned::new(tls, socket);
    slow.write_all(b"GET /healthz HTTP/1.1\r\nx-slow: ")
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
