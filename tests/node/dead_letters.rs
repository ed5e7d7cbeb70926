//! Dead letters over HTTP: listed, paged, shown with their hook,
//! replayed, purged, and a source's pending rows dead-lettered.

use super::*;

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
            "reason_kind": "permanent",
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

/// What a dead-letter route or a replay answers a time range that ends
/// before it starts (20 to 10).
const SWAPPED_TIMES: &str =
    "since_ms (20) is after until_ms (10): no row is dead in that range; were they swapped?";

/// `sink_index` and `reason` narrow the dead letters to one sink's rows
/// and to what they died of: after an outage of one sink (its rows dead
/// of `max_attempts`) beside another that refuses the hooks (`permanent`),
/// a replay of the outage's rows delivers them and nothing else, and a
/// purge of the refusals leaves no dead letter. Unknown values are refused.
#[test]
fn dead_letters_are_taken_by_sink_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let receiver = {
        let down = down.clone();
        Receiver::start(move |r| match r.path.as_str() {
            "/refuses" => Reply::status(422),
            _ if down.load(Ordering::SeqCst) => Reply::status(503),
            _ => Reply::status(200),
        })
        .unwrap()
    };
    let mut c = node_config(dir.path());
    c.retry.max_attempts = 1;
    c.sources.push(source(
        "a",
        "t1",
        vec![
            SinkConfig::http(receiver.url("/refuses")),
            SinkConfig::http(receiver.url("/recovers")),
        ],
    ));
    let node = start(c);
    let addr = node.local_addr();
    ingest_n(addr, "a", 3);
    let engine = node.engine().unwrap();
    wait_until("6 dead", Duration::from_secs(10), || {
        dead(&engine).len() == 6
    });
    let items = |query: &str| -> Vec<(u64, String)> {
        let page = get(addr, &format!("/v1/dead-letters{query}")).json();
        (page["items"].as_array().unwrap().iter())
            .map(|i| {
                let kind = i["reason_kind"].as_str().unwrap().to_string();
                (i["sink_index"].as_u64().unwrap(), kind)
            })
            .collect()
    };
    let outage = vec![(1, "max_attempts".to_string()); 3];
    let refusals = vec![(0, "permanent".to_string()); 3];
    // Counted by kind too, in the metrics and the stats.
    for (kind, n) in [
        ("permanent", 3.0),
        ("max_attempts", 3.0),
        ("source_gone", 0.0),
    ] {
        let labels = format!("reason_kind=\"{kind}\"");
        assert_eq!(metric(addr, "goad_dead_rows_total", &labels), n, "{kind}");
    }
    let shards = get(addr, "/v1/stats").json()["shards"].clone();
    let counted = |kind: &str| -> u64 {
        (shards.as_array().unwrap().iter())
            .map(|s| s["dead_by_reason"][kind].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        (
            counted("permanent"),
            counted("max_attempts"),
            counted("undecodable")
        ),
        (3, 3, 0)
    );
    // And per sink: the one that refuses, and the one that was down.
    let sinks = get(addr, "/v1/sinks").json()["sinks"].clone();
    let by_reason = |i: usize, kind: &str| sinks[i]["dead_by_reason"][kind].as_u64();
    assert_eq!(
        [
            by_reason(0, "permanent"),
            by_reason(0, "max_attempts"),
            by_reason(1, "max_attempts"),
            by_reason(1, "permanent")
        ],
        [Some(3), Some(0), Some(3), Some(0)]
    );
    assert_eq!(items("?sink_index=1"), outage);
    assert_eq!(items("?reason=max_attempts"), outage);
    assert_eq!(items("?reason=retry_horizon,max_attempts"), outage);
    assert_eq!(
        items("?source_id=a&sink_index=0&reason=permanent"),
        refusals
    );
    assert_eq!(items("?sink_index=0&reason=max_attempts"), []);
    for (query, code, message) in [
        (
            "?sink_index=one",
            "bad_sink_index",
            "sink_index must be a number from 0 to 65535, got \"one\"",
        ),
        (
            "?reason=max_attempts,gone",
            "bad_reason",
            "reason: \"gone\" is not a kind of reason: one of permanent, max_attempts, retry_horizon, source_gone, sink_gone, undecodable, or several separated by commas",
        ),
        (
            "?since_ms=20&until_ms=10",
            "bad_time",
            SWAPPED_TIMES,
        ),
    ] {
        for method in ["GET", "DELETE"] {
            let refused = call(addr, method, &format!("/v1/dead-letters{query}"), &[], b"");
            assert_eq!(refused.status, 400, "{method} {query}");
            assert_eq!(refused.error_code(), code);
            assert_eq!(refused.json()["message"], message);
        }
    }
    // A replay of an empty name, or of a body that is not one JSON
    // object, would replay nothing (or everything): refused.
    for (body, code, message) in [
        (
            r#"{"tenant": ""}"#,
            "empty_filter",
            "tenant is empty: give a value, or leave it out (which takes every dead letter, whatever its tenant)",
        ),
        (
            "[null, null, null, null, null, null, null]",
            "bad_json",
            r#"the body must be {"source_id"?, "tenant"?, "hook_id"?, "sink_index"?, "reason"?, "since_ms"?, "until_ms"?}: got an array"#,
        ),
    ] {
        let refused = call(addr, "POST", "/v1/replays", &[], body.as_bytes());
        assert_eq!(
            (refused.status, refused.error_code(), refused.json()["message"].as_str().unwrap()),
            (400, code.into(), message),
            "{body}"
        );
    }
    assert_eq!(
        get(addr, "/v1/replays").json()["replays"],
        serde_json::json!([])
    );
    let bad_spec = call(addr, "POST", "/v1/replays", &[], br#"{"reason": "gone"}"#);
    assert_eq!(
        (bad_spec.status, bad_spec.error_code()),
        (400, "bad_json".into())
    );
    assert!(
        bad_spec.json()["message"]
            .as_str()
            .unwrap()
            .contains("\"gone\" is not a kind of reason: one of permanent, max_attempts"),
        "{}",
        bad_spec.text()
    );
    let swapped = br#"{"since_ms": 20, "until_ms": 10}"#;
    let swapped = call(addr, "POST", "/v1/replays", &[], swapped);
    assert_eq!(
        (
            swapped.status,
            swapped.error_code(),
            swapped.json()["message"].clone()
        ),
        (400, "bad_time".into(), SWAPPED_TIMES.into())
    );
    assert_eq!(dead(&engine).len(), 6, "nothing purged");

    down.store(false, Ordering::SeqCst);
    let spec = br#"{"source_id": "a", "sink_index": 1, "reason": "retry_horizon,max_attempts"}"#;
    let created = call(addr, "POST", "/v1/replays", &[], spec).json();
    assert_eq!(created["matched"], 3, "{created}");
    let replay = format!("/v1/replays/{}", created["id"].as_str().unwrap());
    wait_until(
        "the outage's rows delivered",
        Duration::from_secs(10),
        || get(addr, &replay).json()["delivered"] == 3,
    );
    let progress = get(addr, &replay).json();
    assert_eq!(
        (&progress["spec"], &progress["dead_again"]),
        (
            &serde_json::json!({"source_id": "a", "tenant": null, "sink_index": 1,
                "reason": "max_attempts,retry_horizon", "since_ms": null}),
            &0.into()
        )
    );
    let sent_to = |path: &str| {
        receiver
            .received()
            .iter()
            .filter(|r| r.path == path)
            .count()
    };
    assert_eq!((sent_to("/refuses"), sent_to("/recovers")), (3, 6));
    assert_eq!(items(""), refusals, "the refusals are still dead");
    let purged = call(
        addr,
        "DELETE",
        "/v1/dead-letters?reason=permanent",
        &[],
        b"",
    );
    assert_eq!(purged.json(), serde_json::json!({"purged": 3}));
    assert_eq!(items(""), []);
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
        engine.stats().iter().map(|s| s.core.retried).sum::<u64>() == 5
    });
    // A filter written on the route (it takes none) is refused, not
    // ignored while every row of the source is dead-lettered; so is one
    // on a replay, whose body is the filter.
    let filtered = call(
        addr,
        "POST",
        "/v1/sources/a/dead-letter?sink_index=1",
        &[],
        b"",
    );
    assert_eq!(
        (filtered.status, filtered.json()),
        (
            400,
            serde_json::json!({"error": "unknown_parameter", "message": "no query parameter \"sink_index\" here; this route takes none"})
        )
    );
    let replay = call(addr, "POST", "/v1/replays?source_id=a", &[], b"{}");
    assert_eq!(replay.error_code(), "unknown_parameter");
    assert_eq!(
        get(addr, "/v1/stats?shard=0").error_code(),
        "unknown_parameter"
    );
    assert_eq!(get(addr, "/metrics?name=x").status, 200);
    assert_eq!(
        get(addr, "/v1/dead-letters").json()["items"],
        serde_json::json!([])
    );
    // An id no source can have is refused; one the config does not have
    // (a source removed from it) is walked, and has nothing here.
    let impossible = call(addr, "POST", "/v1/sources/a%20/dead-letter", &[], b"");
    assert_eq!(
        (impossible.status, impossible.json()),
        (
            404,
            serde_json::json!({"error": "unknown_source", "message": "no source can have the id \"a \": a source id is 1 to 128 letters, digits, '_' and '-'"})
        )
    );
    let removed = call(addr, "POST", "/v1/sources/gone/dead-letter", &[], b"");
    assert_eq!(removed.json(), serde_json::json!({"count": 0}));
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
    // A misspelt filter is refused, not read as no filter (which would
    // purge them all).
    let misspelt = purge("?source=a");
    assert_eq!(
        (misspelt.status, misspelt.json()["message"].as_str().unwrap()),
        (
            400,
            "no query parameter \"source\" here; this route takes source_id, tenant, hook_id, sink_index, reason, since_ms, until_ms"
        )
    );
    assert_eq!(misspelt.error_code(), "unknown_parameter");
    assert_gets_refused(
        addr,
        &[("/v1/dead-letters?sorce_id=a", "unknown_parameter")],
    );
    // An empty filter (a script's unset variable) is refused, not read as
    // no filter; a filter given twice is refused, not read as its first.
    let empty = purge("?source_id=&until_ms=99999999999999");
    assert_eq!(
        (empty.status, empty.error_code(), empty.json()["message"].as_str().unwrap()),
        (
            400,
            "empty_filter".into(),
            "source_id is empty: give a value, or leave it out (which takes every dead letter, whatever its source_id)"
        )
    );
    let twice = purge("?source_id=a&source_id=b");
    assert_eq!(
        (
            twice.status,
            twice.error_code(),
            twice.json()["message"].as_str().unwrap()
        ),
        (
            400,
            "repeated_parameter".into(),
            "query parameter \"source_id\" is given more than once; give it once"
        )
    );
    assert_gets_refused(
        addr,
        &[("/v1/dead-letters?limit=1&limit=2", "repeated_parameter")],
    );
    assert_eq!(dead(&engine).len(), 5, "nothing purged");
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
