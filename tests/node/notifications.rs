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
