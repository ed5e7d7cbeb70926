//! `[notifications] source`: dead rows and breakers told through a source
//! of the node's own.

use super::*;

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

/// The events the notifications source's receiver got, in order.
fn told_events(ops: &Receiver) -> Vec<serde_json::Value> {
    (ops.received().iter())
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
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
            "reason_kind": "permanent",
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

/// With `coalesce_ms = 0`, a burst of dead rows (a source's backlog
/// dead-lettered at once) is notified in full: 2,000 events queued and
/// committed, none dropped.
#[test]
fn a_burst_of_dead_rows_is_notified_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let held = Receiver::start(|_| Reply::status(503).header("retry-after", "3600")).unwrap();
    let ops = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = notifying(dir.path(), &held, &ops);
    c.notifications.coalesce_ms = 0;
    let node = start(c);
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

/// By default a sink's dead rows after the first are told together: a
/// backlog of ~2,000 dead-lettered at once (all but a row in flight) is one
/// `row.dead` and a `rows.dead` summary of the others (their reason, first
/// and last time, the first ten hooks) when the window ends, not a notice
/// a row.
#[test]
fn a_burst_of_dead_rows_is_told_in_one_summary() {
    let dir = tempfile::tempdir().unwrap();
    let held = Receiver::start(|_| Reply::status(503).header("retry-after", "3600")).unwrap();
    let ops = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = notifying(dir.path(), &held, &ops);
    c.notifications.coalesce_ms = 1_000;
    let node = start(c);
    let addr = node.local_addr();
    ingest_n(addr, "a", 2_000);
    let reply = call(addr, "POST", "/v1/sources/a/dead-letter", &[], b"");
    let dead = reply.json()["count"].as_u64().unwrap();
    assert!(dead > 1_000, "{dead}");
    let counted = |result: &str| {
        metric(
            addr,
            "goad_notifications_total",
            &format!("result=\"{result}\""),
        )
    };
    let events = || told_events(&ops);
    let told = |events: &[serde_json::Value]| -> u64 {
        (events.iter())
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum()
    };
    wait_until("every dead row told", Duration::from_secs(30), || {
        told(&events()) == dead
    });
    let events = events();
    assert_eq!(events[0]["type"], "row.dead");
    let summaries = &events[1..];
    assert!(
        (1..=3).contains(&summaries.len()),
        "one summary a window: {summaries:?}"
    );
    for summary in summaries {
        assert_eq!(summary["type"], "rows.dead");
        assert_eq!(
            (
                &summary["tenant"],
                &summary["source_id"],
                &summary["sink_index"]
            ),
            (&"t1".into(), &"a".into(), &0.into())
        );
        assert!(summary["first_at_ms"].as_u64() <= summary["last_at_ms"].as_u64());
        let count = &summary["count"];
        assert_eq!(
            summary["reasons"],
            serde_json::json!({ "source_gone: a": count })
        );
        assert_eq!(summary["other_reasons"], 0);
        assert_eq!(
            summary["reason_kinds"],
            serde_json::json!({ "source_gone": count })
        );
        let hooks = summary["hook_ids"].as_array().unwrap().len() as u64;
        assert_eq!(hooks, count.as_u64().unwrap().min(10));
    }
    let committed = events.len() as f64;
    wait_until("the last commit counted", Duration::from_secs(10), || {
        counted("committed") == committed
    });
    assert_eq!(
        [
            counted("queued"),
            counted("coalesced"),
            counted("dropped"),
            counted("failed")
        ],
        [dead as f64, dead as f64 - 1.0, 0.0, 0.0]
    );
}

/// A node that stops tells of its open windows first: the summary of a
/// window that had a minute to run is committed at the stop and delivered
/// by the next start.
#[test]
fn a_stopping_node_tells_of_its_open_windows() {
    let dir = tempfile::tempdir().unwrap();
    let refusing = Receiver::start(|_| Reply::status(410)).unwrap();
    let ops = Receiver::start(|_| Reply::status(200)).unwrap();
    let c = notifying(dir.path(), &refusing, &ops);
    assert_eq!(c.notifications.coalesce_ms, 60_000, "the default");
    let node = start(c.clone());
    let addr = node.local_addr();
    ingest_n(addr, "a", 3);
    assert!(ops.wait_for(1, Duration::from_secs(10)));
    let engine = node.engine().unwrap();
    wait_until("every row dead", Duration::from_secs(10), || {
        dead(&engine).len() == 3
    });
    drop(engine);
    node.stop();
    node.wait().unwrap();
    let node = start(c);
    assert!(ops.wait_for(2, Duration::from_secs(10)));
    let summary: serde_json::Value = serde_json::from_slice(&ops.received()[1].body).unwrap();
    assert_eq!(
        (&summary["type"], &summary["count"]),
        (&"rows.dead".into(), &2.into())
    );
    drop(node);
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
    let events = told_events(&ops);
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

/// A reload that inserts a sink before one whose breaker is open raises
/// `sink.breaker_moved`: the breaker is the same sink's, still open, at
/// its new `sink_index` (from `from_sink_index`) — not a close and an open.
#[test]
fn a_breaker_a_reload_moves_with_its_sink_is_notified_moved() {
    let dir = tempfile::tempdir().unwrap();
    let failing = Receiver::start(|_| Reply::status(503)).unwrap();
    let ops = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = notifying(dir.path(), &failing, &ops);
    breakers_open_ten_minutes(&mut c, 2);
    let path = dir.path().join("goad.toml");
    let write = |c: &Config| std::fs::write(&path, toml::to_string(c).unwrap()).unwrap();
    write(&c);
    let node = start_with(c.clone(), Some(path.clone()));
    let addr = node.local_addr();
    for _ in 0..2 {
        assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    }
    assert!(ops.wait_for(1, Duration::from_secs(10)));
    let new = SinkConfig::http(failing.url("/new"));
    c.sources[0].sinks.insert(0, new);
    write(&c);
    assert_eq!(call(addr, "POST", "/v1/reload", &[], b"").status, 200);
    assert!(ops.wait_for(2, Duration::from_secs(10)));
    let events = told_events(&ops);
    assert_eq!(events[0]["type"], "sink.breaker_opened");
    let moved = serde_json::json!({
        "type": "sink.breaker_moved", "tenant": "t1", "source_id": "a", "sink_index": 1,
        "sink_type": "http", "from_sink_index": 0, "at_ms": events[1]["at_ms"].clone(),
    });
    assert_eq!(events[1..], [moved]);
}
