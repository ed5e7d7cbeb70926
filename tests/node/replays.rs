//! Replays over HTTP: paced by the node's lag, resumed after a restart,
//! idempotent, and pausing themselves into a sink that still fails.

use super::*;

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

/// A node whose source `a` (tenant `t1`) posts to a receiver that answers
/// 400 until its `status` is switched, with `n` hooks committed and dead.
struct Refused {
    node: Node,
    /// Kept: the receiver answers while it lives.
    _receiver: Receiver,
    status: Arc<std::sync::atomic::AtomicU16>,
    /// The node's config (`configure`d), to start it again.
    config: Config,
}

/// Starts a [`Refused`] node on `dir`, its config `configure`d.
fn refused_hooks(dir: &std::path::Path, n: usize, configure: impl FnOnce(&mut Config)) -> Refused {
    let (receiver, status) = switchable(400);
    let mut config = one_source(dir, &receiver);
    configure(&mut config);
    let node = start(config.clone());
    commit_until_dead(&node.engine().unwrap(), n);
    Refused {
        node,
        _receiver: receiver,
        status,
        config,
    }
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
/// at least 100 of its rows died again, more than were delivered. Resumed
/// once the sink is fixed, it goes on (it counts its rows' deaths since
/// the resume, as the reference does) and delivers the rest.
#[test]
fn a_replay_into_a_failing_sink_pauses_itself() {
    let dir = tempfile::tempdir().unwrap();
    let r = refused_hooks(dir.path(), 250, |c| c.replay.rate = 100);
    let addr = r.node.local_addr();
    let engine = r.node.engine().unwrap();
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

    r.status.store(200, Ordering::SeqCst);
    let resumed = call(addr, "POST", &format!("/v1/replays/{id}/resume"), &[], b"");
    assert_eq!(resumed.status, 200, "{}", resumed.text());
    let resumed = resumed.json();
    assert_eq!(
        (&resumed["state"], &resumed["error"]),
        (&"running".into(), &serde_json::Value::Null)
    );
    // Its counters at the resume: what it pauses itself on is counted
    // from them.
    assert_eq!(resumed["resumed_at"]["moved"], moved);
    let moved_before = moved.as_u64().unwrap();
    wait_until("the rest delivered", Duration::from_secs(30), || {
        let p = get(addr, &format!("/v1/replays/{id}")).json();
        p["state"] == "done" && p["delivered"] == 250 - moved_before
    });
    // The rows that died again before the pause are dead letters again,
    // which this replay does not take twice.
    wait_until(
        "the rows moved before the pause dead",
        Duration::from_secs(10),
        || dead(&engine).len() as u64 == moved_before,
    );
    let p = get(addr, &format!("/v1/replays/{id}")).json();
    assert_eq!((&p["moved"], &p["dead_again"]), (&250.into(), &moved));
}

/// An operator pauses a running replay (it moves nothing more, however
/// many passes its pacer makes, and stays paused across a restart) and
/// resumes it; a replay that is done can be neither. Every replay is
/// listed with its progress, newest first, a page at a time.
#[test]
fn an_operator_pauses_and_resumes_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let r = refused_hooks(dir.path(), 200, |c| c.replay.rate = 50);
    let addr = r.node.local_addr();
    let engine = r.node.engine().unwrap();
    r.status.store(200, Ordering::SeqCst);
    let created = call(addr, "POST", "/v1/replays", &[], b"").json();
    let id = created["id"].as_str().unwrap().to_string();
    let path = format!("/v1/replays/{id}");
    wait_until("some rows moved", Duration::from_secs(10), || {
        get(addr, &path).json()["moved"].as_u64() > Some(0)
    });
    for _ in 0..2 {
        let paused = call(addr, "POST", &format!("{path}/pause"), &[], b"");
        assert_eq!(paused.status, 200, "{}", paused.text());
        assert_eq!(
            (&paused.json()["state"], &paused.json()["error"]),
            (
                &"paused".into(),
                &"paused by an operator; resume it to go on".into()
            ),
            "paused, and a second pause leaves it so"
        );
    }
    let moved = get(addr, &path).json()["moved"].clone();
    pacer_passes(addr, 3);
    assert_eq!(
        get(addr, &path).json()["moved"],
        moved,
        "a paused replay moves nothing"
    );
    assert!(
        moved.as_u64() < Some(200),
        "paused before it moved all: {moved}"
    );
    assert_eq!(metric(addr, "goad_replays", "state=\"paused\""), 1.0);
    drop(engine);
    r.node.stop();
    r.node.wait().unwrap();
    let node = start(r.config);
    let addr = node.local_addr();
    pacer_passes(addr, 3);
    let restarted = get(addr, &path).json();
    assert_eq!(
        (&restarted["state"], &restarted["moved"]),
        (&"paused".into(), &moved),
        "still paused after a restart"
    );

    let resumed = call(addr, "POST", &format!("{path}/resume"), &[], b"").json();
    assert_eq!(resumed["state"], "running");
    wait_until("every row delivered", Duration::from_secs(30), || {
        let p = get(addr, &path).json();
        p["state"] == "done" && p["delivered"] == 200
    });
    for action in ["pause", "resume"] {
        let refused = call(addr, "POST", &format!("{path}/{action}"), &[], b"");
        assert_eq!(
            (refused.status, refused.error_code()),
            (409, "replay_done".into())
        );
        assert_eq!(
            refused.json()["message"],
            format!("replay \"{id}\" is done: it moved every row it takes")
        );
    }
    let second = call(addr, "POST", "/v1/replays", &[], b"").json();
    assert_eq!(second["matched"], 0);
    let listed = get(addr, "/v1/replays").json()["replays"].clone();
    let listed: Vec<(&str, &str)> = (listed.as_array().unwrap().iter())
        .map(|r| (r["id"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    let second_id = second["id"].as_str().unwrap();
    assert_eq!(listed[0].0, second_id, "newest first");
    assert_eq!(listed[1], (id.as_str(), "done"));
    let ids = |query: &str| -> Vec<String> {
        let listed = get(addr, &format!("/v1/replays{query}")).json()["replays"].clone();
        (listed.as_array().unwrap().iter())
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("?limit=1"), [second_id]);
    assert_eq!(ids("?state=paused"), Vec::<String>::new());
    assert_eq!(ids("?state=done&limit=1000").last(), Some(&id));
    let page =
        |query: &str| get(addr, &format!("/v1/replays{query}")).json()["next_cursor"].clone();
    assert_eq!(page("?limit=1"), second_id, "the next page starts after it");
    assert_eq!(ids(&format!("?limit=1&cursor={second_id}")), [id.as_str()]);
    assert_eq!(
        page(&format!("?limit=1&cursor={second_id}")),
        serde_json::Value::Null
    );
    assert_eq!(page(""), serde_json::Value::Null);
    assert_gets_refused(
        addr,
        &[
            ("/v1/replays?state=stopped", "bad_state"),
            ("/v1/replays?limit=0", "bad_limit"),
            ("/v1/replays?states=done", "unknown_parameter"),
            (
                "/v1/replays?cursor=01a241ad-0000-7000-8000-000000000000",
                "bad_cursor",
            ),
        ],
    );
    let unknown = call(addr, "POST", "/v1/replays/nope/pause", &[], b"");
    assert_eq!(
        (unknown.status, unknown.error_code()),
        (404, "unknown_replay".into())
    );
    assert_eq!(get(addr, &format!("{path}/pause")).status, 405);
}

/// Scenario 32: a replay into a sink that fails transiently opens its
/// breaker, and the rows it moves next are parked one after another; once
/// its rows were parked 100 times and none delivered it pauses itself,
/// before it moved them all.
#[test]
fn a_replay_behind_an_open_breaker_pauses_itself() {
    let dir = tempfile::tempdir().unwrap();
    let r = refused_hooks(dir.path(), 500, |c| {
        c.dispatch.breaker_failures = 5;
        c.dispatch.breaker_open_ms = 60_000;
        c.dispatch.breaker_max_open_ms = 60_000;
        c.replay.rate = 100;
    });
    let addr = r.node.local_addr();
    let engine = r.node.engine().unwrap();
    r.status.store(503, Ordering::SeqCst);
    let (_, p) = replay_until_paused(addr);
    let error = p["error"].as_str().unwrap();
    assert!(
        error.contains("auto-paused") && error.contains("parked behind an open circuit breaker"),
        "{error}"
    );
    assert!(p["parked"].as_u64().unwrap() >= 100, "{p}");
    assert_eq!(p["delivered"], 0, "{p}");
    assert!(p["moved"].as_u64().unwrap() < 500, "{p}");
    assert_eq!(engine.stats()[0].core.breakers_open, 1);
}

/// A replay that is done is forgotten `replay.retention_ms` after it
/// finished (its file and counters deleted; the route answers 404), so
/// replays of one hook each do not pile up; a paused one is kept. Done
/// means every row it matched was moved; its rows settle after that, so
/// its counters are compared once they have.
#[test]
fn a_done_replay_is_forgotten_past_its_retention() {
    let dir = tempfile::tempdir().unwrap();
    let r = refused_hooks(dir.path(), 3, |c| c.replay.retention_ms = 2_000);
    let addr = r.node.local_addr();
    let engine = r.node.engine().unwrap();
    let paused = call(addr, "POST", "/v1/replays", &[], br#"{"since_ms": 1}"#).json();
    let paused = paused["id"].as_str().unwrap().to_string();
    call(
        addr,
        "POST",
        &format!("/v1/replays/{paused}/pause"),
        &[],
        b"",
    );
    r.status.store(200, Ordering::SeqCst);
    let done = call(addr, "POST", "/v1/replays", &[], b"").json();
    let done = done["id"].as_str().unwrap().to_string();
    let file = dir.path().join("replays").join(format!("{done}.json"));
    let mut progress = serde_json::Value::Null;
    wait_until(
        "the replay done, its rows settled",
        Duration::from_secs(10),
        || {
            progress = get(addr, &format!("/v1/replays/{done}")).json();
            let settled = |field: &str| progress[field].as_u64().unwrap_or(0);
            progress["state"] == "done"
                && settled("delivered") + settled("dead_again") == settled("moved")
        },
    );
    assert!(file.exists(), "{} kept while it is recent", file.display());
    assert_eq!(
        engine.replay_counters(&done).unwrap().delivered,
        progress["delivered"].as_u64().unwrap(),
        "{progress}"
    );
    wait_until("the replay forgotten", Duration::from_secs(20), || {
        get(addr, &format!("/v1/replays/{done}")).status == 404
    });
    assert!(!file.exists(), "{} deleted", file.display());
    assert_eq!(engine.replay_counters(&done).unwrap(), Default::default());
    let listed = get(addr, "/v1/replays").json()["replays"].clone();
    assert_eq!(
        (
            listed.as_array().unwrap().len(),
            &listed[0]["id"],
            &listed[0]["state"]
        ),
        (1, &paused.into(), &"paused".into()),
        "the paused replay is kept"
    );
}
