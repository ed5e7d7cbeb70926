//! Ingest end to end: a hook acknowledged once durable and delivered with
//! its headers, dedupe keys and windows, the refusals (unknown source, bad
//! token, sizes, rate, a full store or tenant) and request framing.

use super::*;

/// A node whose source `gh` (tenant `acme`) delivers to a receiver
/// answering 200.
fn gh_node(dir: &std::path::Path) -> (Node, Receiver) {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir);
    c.sources.push(source(
        "gh",
        "acme",
        vec![SinkConfig::http(receiver.url("/in"))],
    ));
    (start(c), receiver)
}

#[test]
fn an_ingested_hook_is_acknowledged_once_durable_and_delivered_with_its_headers() {
    let dir = tempfile::tempdir().unwrap();
    let (node, receiver) = gh_node(dir.path());
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
/// `goad_duplicate_hooks_total` and the stats count it. An empty key is
/// none: two such hooks are two hooks.
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
    let ids: Vec<String> = ["d-1", "d-1", "d-2", "d-1", "", ""]
        .iter()
        .map(|delivery| {
            let reply = ingest(addr, "gh", b"{}", &[("x-github-delivery", delivery)]);
            assert_eq!(reply.status, 202, "{}", reply.text());
            reply.json()["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!((&ids[1], &ids[3]), (&ids[0], &ids[0]));
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), 4, "{ids:?}");
    let engine = node.engine().unwrap();
    wait_until("the four hooks delivered", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 0 && receiver.count() == 4
    });
    let mut keys: Vec<Option<String>> = (receiver.received().iter())
        .map(|r| r.header("x-goad-dedupe-key").map(str::to_string))
        .collect();
    keys.sort();
    assert_eq!(keys, [None, None, Some("d-1".into()), Some("d-2".into())]);
    assert_eq!(metric(addr, "goad_duplicate_hooks_total", ""), 2.0);
    assert_eq!(metric(addr, "goad_commits_total", ""), 4.0);
    assert_eq!(get(addr, "/v1/stats").json()["shards"][0]["duplicates"], 2);
}

/// A source's `dedupe_json_pointer` takes a hook's dedupe key from its JSON
/// body (Stripe's event `id`, which no header carries): a redelivery within
/// the window gets the first hook's id, and the sink gets the key; a body
/// without it, or not JSON, is stored as a hook without one.
#[test]
fn a_dedupe_key_may_come_from_the_json_body() {
    let dir = tempfile::tempdir().unwrap();
    let (node, receiver) = deduped_by_body_id(dir.path());
    let addr = node.local_addr();
    let bodies: [&[u8]; 5] = [
        br#"{"id": "evt_1", "type": "charge.succeeded"}"#,
        br#"{"type": "charge.succeeded", "id": "evt_1"}"#,
        br#"{"id": "evt_2"}"#,
        br#"{"type": "ping"}"#,
        b"not json",
    ];
    let ids: Vec<String> = (bodies.iter())
        .map(|body| {
            let reply = ingest(addr, "stripe", body, &[("idempotency-key", "not-this")]);
            assert_eq!(reply.status, 202, "{}", reply.text());
            reply.json()["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids[1], ids[0], "the redelivery");
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), 4);
    assert!(receiver.wait_for(4, Duration::from_secs(10)));
    let mut keys: Vec<Option<String>> = (receiver.received().iter())
        .map(|r| r.header("x-goad-dedupe-key").map(str::to_string))
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [None, None, Some("evt_1".into()), Some("evt_2".into())]
    );
}

/// A node whose source `stripe` (tenant `acme`) takes a hook's dedupe key
/// at its JSON body's `/id`, with a day's window, and delivers to the
/// receiver returned.
fn deduped_by_body_id(dir: &std::path::Path) -> (Node, Receiver) {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir);
    let mut stripe = source(
        "stripe",
        "acme",
        vec![SinkConfig::http(receiver.url("/in"))],
    );
    stripe.dedupe_json_pointer = Some("/id".into());
    stripe.dedupe_window_ms = Some(86_400_000);
    c.sources.push(stripe);
    (start(c), receiver)
}

/// A gzip body (`content-encoding: gzip`) is looked into decoded for its
/// dedupe key at the pointer: the same event again, gzipped anew, gets
/// the first hook's id; the sink gets the body as it came, encoded, with
/// its `content-encoding` and the key.
#[test]
fn a_gzip_bodys_dedupe_key_is_found_in_it_decoded() {
    use flate2::write::GzEncoder;
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (node, receiver) = deduped_by_body_id(dir.path());
    let gzip = |json: &str, level: u32| {
        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        encoder.write_all(json.as_bytes()).unwrap();
        encoder.finish().unwrap()
    };
    let first = gzip(r#"{"id": "evt_9", "type": "charge.succeeded"}"#, 6);
    let again = gzip(r#"{"type": "charge.succeeded", "id": "evt_9"}"#, 1);
    let ids: Vec<String> = [&first, &again]
        .map(|body| {
            let reply = ingest(
                node.local_addr(),
                "stripe",
                body,
                &[("content-encoding", "gzip")],
            );
            assert_eq!(reply.status, 202, "{}", reply.text());
            reply.json()["id"].as_str().unwrap().to_string()
        })
        .to_vec();
    assert_eq!(ids[1], ids[0], "the redelivery");
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    let sent = &receiver.received()[0];
    assert_eq!(sent.body, first);
    assert_eq!(sent.header("content-encoding"), Some("gzip"));
    assert_eq!(sent.header("x-goad-dedupe-key"), Some("evt_9"));
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
        b"POST /v1/sources/gh/hooks HTTP/1.1\r\nhost: h\r\nauthorization: Bearer tok-123\r\n\r\n",
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
    client.send(
        b"POST /v1/sources/gh/hooks HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n",
    );
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
        b"POST /v1/sources/gh/hooks HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\nx\r\n0\r\n\r\n",
    );
    assert_eq!(
        (large.status, large.error_code().as_str()),
        (413, "body_too_large")
    );
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
}

/// A provider header whose value is not UTF-8 (an older client's
/// ISO-8859-1) does not get the hook refused, which would refuse every
/// retry of it too: the value is read byte by byte as ISO-8859-1 and
/// delivered as that text, in UTF-8.
#[test]
fn a_hook_with_a_header_that_is_not_utf_8_is_taken_and_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let sinks = vec![SinkConfig::http(receiver.url("/in"))];
    c.sources.push(source("gh", "acme", sinks));
    let node = start(c);
    let reply = Client::connect(node.local_addr()).send_and_reply(
        b"POST /v1/sources/gh/hooks HTTP/1.1\r\nhost: h\r\nx-customer: Caf\xe9 M\xfcller\r\ncontent-length: 2\r\n\r\n{}",
    );
    assert_eq!(reply.status, 202, "{}", reply.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    let got = &receiver.received()[0];
    assert_eq!(got.header("x-customer"), Some("Caf\u{e9} M\u{fc}ller"));
    assert_eq!(got.body, b"{}");
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
    assert_eq!(engine.stats()[0].core.delivered, acked);
    assert_eq!(ingest(addr, "a", &body, &[]).status, 202);
}

/// A node whose disk has less free than `min_free_disk_bytes` answers
/// ingest 503 `disk_full`, saying what the disk has and the reserve.
#[test]
fn a_disk_below_its_reserve_answers_503_disk_full() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, _status) = switchable(200);
    let mut c = one_source(dir.path(), &receiver);
    let reserve_bytes = df_available_bytes(dir.path()) + (1 << 40);
    c.min_free_disk_bytes = reserve_bytes;
    let node = start(c);
    let (acked, message) = ingest_until_refused(node.local_addr(), "a", b"{}", 2, "disk_full");
    assert_eq!(acked, 0);
    let prefix = "the disk is full: the file system holding the shard's store has ";
    let suffix = format!(
        " bytes free, and min_free_disk_bytes keeps {reserve_bytes} for recording deliveries: commit again once deliveries or the operator free room"
    );
    let available = message
        .strip_prefix(prefix)
        .and_then(|m| m.strip_suffix(&suffix));
    let available: u64 = available.expect(&message).parse().expect(&message);
    assert!(available < reserve_bytes - (1 << 39), "{message}");
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
        b"POST /v1/sources/a/hooks HTTP/1.1\r\nhost: h\r\nexpect: 100-continue\r\ncontent-length: 5\r\n\r\n",
    );
    let interim = client.reply().expect("100 Continue");
    assert_eq!(interim.status, 100);
    client.send(b"hello");
    let accepted = client.reply().expect("the final answer");
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    assert_eq!(receiver.received()[0].body, b"hello");
    let mut big = Client::connect(node.local_addr());
    big.send(b"POST /v1/sources/a/hooks HTTP/1.1\r\nhost: h\r\nexpect: 100-continue\r\ncontent-length: 5000\r\n\r\n");
    let refused = big.reply().expect("413 without a 100 first");
    assert_eq!(refused.status, 413);
}

/// A request target in absolute form (`POST http://node/v1/sources/…`, as
/// a client configured to reach the node through a proxy may send it) is
/// served by its path, as RFC 9112 asks of a server.
#[test]
fn an_absolute_form_request_target_is_served_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let (node, receiver) = gh_node(dir.path());
    let addr = node.local_addr();
    let target = format!("http://{addr}/v1/sources/gh/hooks");
    let mut client = Client::connect(addr);
    let reply = client.request("POST", &target, &[], b"absolute");
    assert_eq!(reply.status, 202, "{}", reply.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    assert_eq!(receiver.received()[0].body, b"absolute");
}
