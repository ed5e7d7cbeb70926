//! What the node shows of itself: its sources, a hook's state per sink,
//! each sink's outcomes and breaker, shard and tenant stats, claims.

use super::*;

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
    signed.ingest_verify_token_env = Some("NODE_TEST_SOURCES_TOKEN".into());
    signed.ingest_handshake = Some("event_grid".into());
    signed.ingest_signature = Some("github".into());
    signed.ingest_secret_env = Some(OneOrMany::One("NODE_TEST_SOURCES_SECRET".into()));
    signed.dedupe_header = Some("X-GitHub-Delivery".into());
    signed.dedupe_window_ms = Some(60_000);
    signed.max_ingest_per_s = Some(500);
    signed.sinks[0].ordered = true;
    signed.sinks[0].ordering_key = Some("header:x-github-repository".into());
    signed.sinks[0].paused = true;
    signed.sinks[0].filter = Some(HeaderFilter {
        header: "x-github-event".into(),
        values: vec!["push".into()],
    });
    let slack = SinkConfig {
        url: None,
        url_env: Some("NODE_TEST_SOURCES_URL".into()),
        google_id_token: Some(goad::config::GoogleIdTokenConfig {
            audience: "https://svc-abc.a.run.app".into(),
            credentials: None,
        }),
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
    plain.dedupe_json_pointer = Some("/message/messageId".into());
    plain.ingest_jwt = Some(goad::config::IngestJwt {
        jwks_url: "https://127.0.0.1:9/certs".into(),
        issuer: OneOrMany::Many(vec!["https://accounts.google.com".into()]),
        audience: "https://goad.example/v1/sources/app/hooks".into(),
        claims: [(
            "email".to_string(),
            serde_json::json!("p@q.iam.gserviceaccount.com"),
        )]
        .into(),
    });
    c.sources = vec![signed, plain].into();
    let node = start(c);
    let listed = get(node.local_addr(), "/v1/sources");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let sink = |index: u32, kind: &str, target: &str| serde_json::json!({"index": index, "type": kind, "target": target, "auth": null, "ordered": false, "ordering_key": null, "paused": false, "filter": null});
    assert_eq!(
        listed.json(),
        serde_json::json!({"next_cursor": null, "sources": [
            {"id": "gh", "tenant": "acme", "ingest_path": "/v1/sources/gh/hooks",
             "ingest_token": true, "ingest_verify_token": true, "ingest_handshake": "event_grid",
             "ingest_signature": "github", "ingest_jwt": null,
             "dedupe_header": "x-github-delivery", "dedupe_json_pointer": null,
             "dedupe_window_ms": 60_000,
             "max_ingest_per_s": 500, "forward_headers": null,
             "sinks": [{"index": 0, "type": "http", "target": "https://ci.example.com:8443/hooks",
                        "auth": null, "ordered": true,
                        "ordering_key": "header:x-github-repository", "paused": true,
                        "filter": {"header": "x-github-event", "values": ["push"]}}]},
            {"id": "app", "tenant": "beta", "ingest_path": "/v1/sources/app/hooks",
             "ingest_token": false, "ingest_verify_token": false, "ingest_handshake": null,
             "ingest_signature": null,
             "ingest_jwt": {"jwks_url": "https://127.0.0.1:9/certs",
                            "issuer": ["https://accounts.google.com"],
                            "audience": "https://goad.example/v1/sources/app/hooks",
                            "claims": {"email": "p@q.iam.gserviceaccount.com"}},
             "dedupe_header": null, "dedupe_json_pointer": "/message/messageId",
             "dedupe_window_ms": null,
             "max_ingest_per_s": null, "forward_headers": ["x-app-event"],
             "sinks": [{"index": 0, "type": "http", "target": "$NODE_TEST_SOURCES_URL",
                        "auth": "google_id_token", "ordered": false, "ordering_key": null,
                        "paused": false, "filter": null},
                       sink(1, "pubsub", "projects/p/topics/hooks")]},
        ]})
    );
    assert!(!listed.text().contains("secret") && !listed.text().contains("pw"));
}

/// `/v1/sources` and `/v1/sinks` are filtered by source and tenant, and
/// come a page at a time with `limit`: each page ends with the cursor of
/// the next (its last item's key: a source's id, a sink's
/// `<source id>/<sink index>`), the last page with none. A reload that
/// removes another source leaves a cursor good; one that removes the
/// cursor's own source makes it stale. Unknown parameters, bad limits and
/// stale cursors get 400.
#[test]
fn sources_and_sinks_are_filtered_and_listed_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    let sinks = |n: usize| vec![SinkConfig::http("http://127.0.0.1:9/"); n];
    for (id, tenant, n) in [
        ("a", "t1", 2),
        ("b", "t2", 1),
        ("c", "t1", 3),
        ("d", "t2", 1),
    ] {
        c.sources.push(source(id, tenant, sinks(n)));
    }
    let path = dir.path().join("goad.toml");
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    let node = start_with(c.clone(), Some(path.clone()));
    let addr = node.local_addr();
    // Each page's keys and the next cursor.
    let page = |route: &str, query: &str| -> (Vec<String>, serde_json::Value) {
        let reply = get(addr, &format!("/v1/{route}?{query}"));
        assert_eq!(reply.status, 200, "{route}?{query}: {}", reply.text());
        let json = reply.json();
        let keys = json[route]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| match route {
                "sources" => item["id"].as_str().unwrap().to_string(),
                _ => format!(
                    "{}/{}",
                    item["source_id"].as_str().unwrap(),
                    item["sink_index"]
                ),
            });
        (keys.collect(), json["next_cursor"].clone())
    };
    let (all, none) = page("sources", "");
    assert_eq!(
        (all, none),
        (
            ["a", "b", "c", "d"].map(String::from).to_vec(),
            serde_json::Value::Null
        )
    );
    assert_eq!(page("sources", "tenant=t1").0, ["a", "c"]);
    assert_eq!(page("sources", "source_id=c").0, ["c"]);
    assert_eq!(
        page("sources", "limit=3"),
        (vec!["a".into(), "b".into(), "c".into()], "c".into())
    );
    assert_eq!(
        page("sources", "limit=3&cursor=c"),
        (vec!["d".into()], serde_json::Value::Null)
    );
    assert_eq!(
        page("sources", "limit=4"),
        (page("sources", "").0, serde_json::Value::Null)
    );
    assert_eq!(
        page("sources", "tenant=t2&limit=1"),
        (vec!["b".into()], "b".into())
    );
    assert_eq!(
        page("sources", "tenant=t2&limit=1&cursor=b"),
        (vec!["d".into()], serde_json::Value::Null)
    );

    assert_eq!(
        page("sinks", "limit=2"),
        (vec!["a/0".into(), "a/1".into()], "a/1".into())
    );
    assert_eq!(
        page("sinks", "limit=2&cursor=a/1"),
        (vec!["b/0".into(), "c/0".into()], "c/0".into())
    );
    assert_eq!(
        page("sinks", "limit=2&cursor=c/0"),
        (vec!["c/1".into(), "c/2".into()], "c/2".into())
    );
    assert_eq!(
        page("sinks", "limit=2&cursor=c/2"),
        (vec!["d/0".into()], serde_json::Value::Null)
    );
    assert_eq!(
        page("sinks", "tenant=t1&limit=4&cursor=a/0").0,
        ["a/1", "c/0", "c/1", "c/2"]
    );
    assert_eq!(page("sinks", "").0.len(), 7);

    // A reload removes b: a cursor past it goes on; one naming it is stale.
    c.sources.retain(|s| s.id != "b");
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    assert_eq!(call(addr, "POST", "/v1/reload", &[], b"").status, 200);
    assert_eq!(
        page("sources", "limit=1&cursor=a"),
        (vec!["c".into()], "c".into())
    );
    assert_eq!(
        page("sinks", "limit=1&cursor=a/1"),
        (vec!["c/0".into()], "c/0".into())
    );
    assert_gets_refused(
        addr,
        &[
            ("/v1/sources?limit=1&cursor=b", "bad_cursor"),
            ("/v1/sinks?cursor=b/0", "bad_cursor"),
            ("/v1/sinks?tenant=t2&cursor=a/0", "bad_cursor"),
            ("/v1/sources?limit=0", "bad_limit"),
            ("/v1/sinks?limit=1001", "bad_limit"),
            ("/v1/sources?source=a", "unknown_parameter"),
            ("/v1/sinks?page=2", "unknown_parameter"),
        ],
    );
    let stale = get(addr, "/v1/sources?cursor=b").json();
    assert_eq!(
        stale["message"],
        "cursor \"b\" names nothing this listing holds (it is gone since, or the filters changed): list again from the start"
    );
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
                 "dead_letter_id": dead_letter, "reason_kind": "permanent"},
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
    let dead_by_reason = |permanent: u64| {
        serde_json::json!({"permanent": permanent, "max_attempts": 0, "retry_horizon": 0,
                           "source_gone": 0, "sink_gone": 0, "undecodable": 0})
    };
    let sink = |source: &str, tenant: &str, index: u16| {
        serde_json::json!({
            "source_id": source, "tenant": tenant, "sink_index": index, "sink_type": "http",
            "delivered": 0, "retried": 0, "dead": 0, "dead_by_reason": dead_by_reason(0), "timed_out": 0,
            "last_delivered_at_ms": null, "last_failure": null,
            "breaker": "closed", "breaker_open_until_ms": null, "consecutive_failures": 0,
            "running": 0, "queued": 0, "paused": false, "held": null,
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
            serde_json::json!({"dead": 2, "dead_by_reason": dead_by_reason(2), "attempt_ms": timed,
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
    assert_gets_refused(addr, &[("/v1/sinks?source=b", "unknown_parameter")]);

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

    // Hooks committed while /down's breaker is open: its row of the first
    // is due when the open period ends (to be the probe), the second's
    // waits, parked, for the breaker to close.
    let ids: Vec<String> = (0..2)
        .map(|i| {
            ingest(addr, "a", format!("late {i}").as_bytes(), &[]).json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let down_row = |id: &str| get(addr, &format!("/v1/hooks/{id}")).json()["sinks"][2].clone();
    wait_until(
        "both rows of /down set aside",
        Duration::from_secs(10),
        || down_row(&ids[1])["state"] == "parked",
    );
    let probe_row = down_row(&ids[0]);
    assert_eq!(
        (
            &probe_row["state"],
            &probe_row["due_at_ms"],
            &probe_row["last_error"]
        ),
        (&"due".into(), &open_until_ms.into(), &"breaker open".into())
    );
    let parked = down_row(&ids[1]);
    assert_eq!(
        (
            &parked["attempts"],
            &parked["last_error"],
            &parked["due_at_ms"]
        ),
        (&0.into(), &"breaker open".into(), &serde_json::Value::Null)
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
        engine.stats().iter().map(|s| s.core.running).sum::<u64>() == 3
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
    // As df says, within the 1 GiB others may have written since.
    let disk_available = shard["store_disk_available_bytes"].as_u64().unwrap();
    let df_available = df_available_bytes(dir.path());
    assert!(
        disk_available.abs_diff(df_available) < 1 << 30,
        "{disk_available} vs {df_available}"
    );
    // Every field the answer has is documented, and nothing more.
    let keys = |object: &serde_json::Value| -> Vec<String> {
        let mut names: Vec<String> = object.as_object().unwrap().keys().cloned().collect();
        names.sort();
        names
    };
    assert_eq!(keys(shard), documented_fields("GET /v1/stats", "shards"));
    assert_eq!(keys(t), documented_fields("GET /v1/stats", "tenants"));
    for _ in 0..3 {
        g.open.send(()).unwrap();
    }
}

/// The field names `docs/http-api.md`'s table gives for `route`'s objects
/// in the list `list` (`{"list": [{"a", "b", …}]`), sorted.
fn documented_fields(route: &str, list: &str) -> Vec<String> {
    let page = include_str!("../../docs/http-api.md");
    let row = page
        .lines()
        .find(|l| l.starts_with(&format!("| `{route}` |")))
        .unwrap_or_else(|| panic!("docs/http-api.md has a row for {route}"));
    let from = row
        .find(&format!("\"{list}\": [{{"))
        .unwrap_or_else(|| panic!("{route}'s row lists {list}"));
    let fields = &row[from..];
    let fields = &fields[fields.find("[{").unwrap() + 2..fields.find("}]").unwrap()];
    let mut names: Vec<String> = fields
        .split(", ")
        .map(|f| f.trim_matches('"').to_string())
        .collect();
    names.sort();
    names
}

/// A claim's body is served to an admin by `GET /v1/claims/{tenant}/{sha256}`;
/// an unknown claim, or names that are not a tenant id and a SHA-256, get 404.
#[test]
fn claims_are_redeemed_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let c = one_source(dir.path(), &receiver);
    let claims = goad::claim_check::ClaimStore::new(c.claim_dir(), 60_000);
    let claim = claims.check_in("acme", b"a large body", None).unwrap();
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

/// Operations that take seconds never delay monitoring: while two claims
/// are being fetched from a bucket that holds both requests (every
/// operations worker busy, and a third operation queued behind them),
/// `/metrics`, `/v1/pressure` and `/v1/stats` are answered; once the
/// bucket answers, the claims and the queued operation are too.
#[test]
fn monitoring_is_answered_while_slow_operations_hold_every_admin_worker() {
    const KEY_ENV: &str = "GOAD_TEST_ADMIN_BUCKET_KEY";
    const SECRET_ENV: &str = "GOAD_TEST_ADMIN_BUCKET_SECRET";
    std::env::set_var(KEY_ENV, "AKIDEXAMPLE");
    std::env::set_var(SECRET_ENV, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
    let (in_hand, requests_held) = crossbeam_channel::unbounded::<()>();
    let (release, released) = crossbeam_channel::unbounded::<()>();
    let bucket = Receiver::start(move |_| {
        in_hand.send(()).unwrap();
        // A dropped sender (the test ended) releases the request too.
        let _ = released.recv();
        Reply::status(404)
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = one_source(dir.path(), &receiver);
    c.claim_check = goad::config::ClaimCheckConfig {
        s3_bucket: Some("claims".into()),
        s3_region: Some("us-east-1".into()),
        s3_endpoint: Some(bucket.url("")),
        access_key_id_env: Some(KEY_ENV.into()),
        secret_access_key_env: Some(SECRET_ENV.into()),
        ..Default::default()
    };
    let node = start(c);
    let addr = node.local_addr();
    let claim = format!("/v1/claims/acme/{}", "0".repeat(64));
    std::thread::scope(|s| {
        let fetches: Vec<_> = (0..2).map(|_| s.spawn(|| get(addr, &claim))).collect();
        for _ in 0..2 {
            requests_held
                .recv_timeout(Duration::from_secs(30))
                .expect("both claims asked of the bucket");
        }
        let queued = s.spawn(|| get(addr, "/v1/sources"));
        for path in ["/metrics", "/v1/pressure", "/v1/stats"] {
            assert_eq!(get(addr, path).status, 200, "{path}");
        }
        assert!(
            requests_held.is_empty(),
            "no third request reached the bucket"
        );
        assert!(!queued.is_finished(), "the operation waits for a worker");
        drop(release);
        for fetch in fetches {
            let reply = fetch.join().unwrap();
            assert_eq!(
                (reply.status, reply.error_code()),
                (404, "unknown_claim".into())
            );
        }
        assert_eq!(queued.join().unwrap().status, 200);
    });
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
        engine.stats()[0].core.running == 2
    });
    let stats = get(addr, "/v1/stats").json();
    assert_eq!(stats["shards"][0]["lane_members"], 2, "{stats}");
    assert_eq!(metric(addr, "goad_lane_members", ""), 2.0);
    for _ in 0..4 {
        g.open.send(()).unwrap();
    }
    engine.tick().unwrap();
    assert_eq!(engine.stats()[0].core.delivered, 4);
    assert_eq!(metric(addr, "goad_lane_members", ""), 0.0);
}
