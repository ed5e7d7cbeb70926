//! Operating a node: reload, drain, backup and the operator CLI.

use super::*;
use goad::{Delivery, Sink, SinkError};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicBool, AtomicU32};

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

/// Rotating the admin token and a source's ingest token without refusing
/// anyone: the config lists the new variable beside the old, a reload
/// takes both tokens, clients move to the new one, and a reload that drops
/// the old variable refuses the old token from then on.
#[test]
fn tokens_are_rotated_by_listing_the_new_beside_the_old_then_dropping_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    for (var, token) in [
        ("NODE_TEST_ROTATE_ADMIN_OLD", "adm-old"),
        ("NODE_TEST_ROTATE_ADMIN_NEW", "adm-new"),
        ("NODE_TEST_ROTATE_INGEST_OLD", "in-old"),
        ("NODE_TEST_ROTATE_INGEST_NEW", "in-new"),
    ] {
        std::env::set_var(var, token);
    }
    let mut c = one_source(dir.path(), &receiver);
    let path = dir.path().join("goad.toml");
    let write = |c: &Config| std::fs::write(&path, toml::to_string(c).unwrap()).unwrap();
    c.admin_token_env = Some("NODE_TEST_ROTATE_ADMIN_OLD".into());
    c.sources[0].ingest_token_env = Some("NODE_TEST_ROTATE_INGEST_OLD".into());
    write(&c);
    let node = start_with(c.clone(), Some(path.clone()));
    let addr = node.local_addr();
    let admin_status = |token: &str| {
        let bearer = format!("Bearer {token}");
        call(
            addr,
            "GET",
            "/v1/pressure",
            &[("authorization", &bearer)],
            b"",
        )
        .status
    };
    let ingest_status = |token: &str| {
        let bearer = format!("Bearer {token}");
        ingest(addr, "a", b"{}", &[("authorization", &bearer)]).status
    };
    let reload = |token: &str| {
        let bearer = format!("Bearer {token}");
        let reply = call(
            addr,
            "POST",
            "/v1/reload",
            &[("authorization", &bearer)],
            b"",
        );
        assert_eq!(reply.status, 200, "{}", reply.text());
        reply.json()["applied"].clone()
    };
    // What the admin API and ingest answer the old and the new tokens.
    let answers = || {
        [
            admin_status("adm-old"),
            admin_status("adm-new"),
            ingest_status("in-old"),
            ingest_status("in-new"),
        ]
    };
    assert_eq!(answers(), [200, 401, 202, 401]);

    let both = |old: &str, new: &str| goad::config::OneOrMany::Many(vec![old.into(), new.into()]);
    c.admin_token_env = Some(both(
        "NODE_TEST_ROTATE_ADMIN_OLD",
        "NODE_TEST_ROTATE_ADMIN_NEW",
    ));
    c.sources[0].ingest_token_env = Some(both(
        "NODE_TEST_ROTATE_INGEST_OLD",
        "NODE_TEST_ROTATE_INGEST_NEW",
    ));
    write(&c);
    assert_eq!(
        reload("adm-old"),
        serde_json::json!(["admin_token_env", "sources"])
    );
    assert_eq!(answers(), [200, 200, 202, 202]);
    assert_eq!(admin_status("adm-other"), 401);
    assert_eq!(ingest_status("in-other"), 401);

    c.admin_token_env = Some("NODE_TEST_ROTATE_ADMIN_NEW".into());
    c.sources[0].ingest_token_env = Some("NODE_TEST_ROTATE_INGEST_NEW".into());
    write(&c);
    reload("adm-new");
    assert_eq!(answers(), [401, 200, 401, 202]);
    assert!(
        receiver.wait_for(4, Duration::from_secs(10)),
        "every accepted hook is delivered"
    );
}

/// A node listening beyond loopback refuses a reload that drops its
/// admin token unless it was started with `--allow-open-admin`: a reload
/// opened what a start refuses to, and the admin API then took anyone's
/// requests.
#[test]
fn a_reload_that_would_open_the_admin_api_beyond_loopback_needs_allow_open_admin() {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    std::env::set_var("NODE_TEST_OPEN_ADMIN", "adm");
    let bearer = [("authorization", "Bearer adm")];
    for allow_open_admin in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = one_source(dir.path(), &receiver);
        c.listen = "0.0.0.0:0".into();
        c.admin_token_env = Some("NODE_TEST_OPEN_ADMIN".into());
        let path = dir.path().join("goad.toml");
        let node = Node::start(NodeOptions {
            config_path: Some(path.clone()),
            allow_open_admin,
            ..NodeOptions::new(c.clone())
        })
        .expect("the node starts");
        assert!(node.wait_ready(Duration::from_secs(20)));
        let addr = node.local_addr();
        c.admin_token_env = None;
        std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
        let reload = call(addr, "POST", "/v1/reload", &bearer, b"");
        let tokenless = call(addr, "GET", "/v1/pressure", &[], b"").status;
        if allow_open_admin {
            assert_eq!(
                reload.json()["applied"],
                serde_json::json!(["admin_token_env"])
            );
            assert_eq!(tokenless, 200);
            continue;
        }
        assert_eq!(
            (reload.status, reload.json()),
            (
                400,
                serde_json::json!({"error": "invalid_config", "message": "admin_token_env must be set: this node listens on 0.0.0.0:0 (beyond loopback) and was started without --allow-open-admin, so no reload opens its admin API, got \"absent\""})
            )
        );
        assert_eq!(tokenless, 401, "the admin API stays closed");
        assert_eq!(call(addr, "GET", "/v1/pressure", &bearer, b"").status, 200);
    }
}

/// A node of `config` that took hooks `one`, `two` and `three` of source
/// `a`, each tried once at `receiver`.
fn holding_three_hooks(config: Config, receiver: &Receiver) -> Node {
    let node = start(config);
    let addr = node.local_addr();
    for body in ["one", "two", "three"] {
        assert_eq!(ingest(addr, "a", body.as_bytes(), &[]).status, 202);
    }
    assert!(
        receiver.wait_for(3, Duration::from_secs(10)),
        "each tried once"
    );
    node
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
    let node = holding_three_hooks(config.clone(), &receiver);
    let addr = node.local_addr();

    let started = call(addr, "POST", "/v1/drain", &[], b"");
    assert_eq!(
        started.json(),
        serde_json::json!({"draining": true, "pending_rows": 3, "paused_sinks": []})
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
        serde_json::json!({"draining": false, "pending_rows": 0, "paused_sinks": []})
    );
    assert_eq!(get(addr, "/readyz").status, 200);
    assert_eq!(ingest(addr, "a", b"four", &[]).status, 202);
    assert!(get(addr, "/metrics").text().contains("\ngoad_draining 0\n"));
}

/// `goad drain ARGS` of the node at `addr`, with no admin token.
fn goad_drain(addr: SocketAddr, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_goad"));
    cmd.arg("drain").args(args);
    cmd.args(["--node", &format!("http://{addr}")]);
    cmd.env_remove("GOAD_ADMIN_TOKEN");
    cmd
}

/// What `goad drain --status --wait 1s` tells of the node at `addr`,
/// which still holds rows after that second (it exits 1).
fn still_pending_after_1s(addr: SocketAddr) -> Vec<String> {
    let out = goad_drain(addr, &["--status", "--wait", "1s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr.lines().map(String::from).collect()
}

/// `goad drain --wait` waits until the node holds no pending row, telling
/// the count as it falls, and exits 0 with the node's last answer; a wait
/// that ends with rows still pending exits 1 saying how many (and, for a
/// node not draining, that it is not). A wait of 500 billion years is one.
#[test]
fn goad_drain_wait_returns_once_the_node_holds_nothing_or_says_what_it_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(503);
    let mut c = one_source(dir.path(), &receiver);
    // Retried every 50-200 ms, and not dead-lettered while the test runs.
    (c.retry.base_ms, c.retry.max_ms, c.retry.max_attempts) = (50, 200, 10_000);
    let node = holding_three_hooks(c, &receiver);
    let addr = node.local_addr();
    let drain = |args: &[&str]| goad_drain(addr, args);

    assert_eq!(
        still_pending_after_1s(addr),
        [
            "goad: 3 rows pending",
            "goad: 3 rows still pending after 1s (the node is not draining: goad drain starts it)"
        ]
    );

    let mut waiting = drain(&["--wait", "30s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut told = std::io::BufReader::new(waiting.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut told, &mut line).unwrap();
    assert_eq!(line, "goad: 3 rows pending\n");
    assert_eq!(get(addr, "/readyz").error_code(), "draining");
    status.store(200, Ordering::SeqCst);
    let (done, finished) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || done.send(waiting.wait_with_output().unwrap()));
    let out = finished
        .recv_timeout(Duration::from_secs(20))
        .expect("goad drain --wait returned once the rows were delivered");
    assert_eq!(out.status.code(), Some(0));
    let last: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        last,
        serde_json::json!({"draining": true, "pending_rows": 0, "paused_sinks": []})
    );
    // A wait longer than a clock can count ("for ever") is taken as one.
    let out = drain(&["--status", "--wait", "500000000000years"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
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
    let array = backup("[\"/tmp/x\"]");
    assert_eq!(
        (array.status, array.json()["message"].as_str().unwrap()),
        (
            400,
            r#"the body must be {"to": "/absolute/directory"}: got an array"#
        )
    );
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

    let unmakeable = backup(r#"{"to": "/proc/goad-backup"}"#);
    assert_eq!(
        (unmakeable.status, unmakeable.error_code()),
        (400, "bad_backup_dir".into()),
        "{}",
        unmakeable.text()
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
    for (filter, count) in [
        (&["--hook", hook_id][..], 1),
        (&["--hook", "no-such-hook"], 0),
        (
            &["--sink", "0", "--reason", "permanent", "--since-ms", "1"],
            1,
        ),
        (&["--reason", "max_attempts,retry_horizon"], 0),
        (&["--sink", "1"], 0),
        (&["--until-ms", "1"], 0),
        // Times as an operator thinks of them: a duration ago, or RFC 3339.
        (&["--since", "1h"], 1),
        (&["--until", "1day"], 0),
        (&["--since", "2026-01-01T00:00:00Z", "--until", "0s"], 1),
        (&["--until", "2026-01-01T00:00:00Z"], 0),
    ] {
        let (code, out, _) = goad(&[&["dlq", "list"][..], filter].concat(), true);
        assert_eq!(code, Some(0), "{out}");
        let page = serde_json::from_str::<serde_json::Value>(&out).unwrap();
        assert_eq!(page["items"].as_array().unwrap().len(), count, "{filter:?}");
    }
    let (code, _, err) = goad(&["dlq", "list", "--since", "soon"], true);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("invalid value 'soon' for '--since <WHEN>': \"soon\" is not a duration ago (30m, 2h, 1day), an RFC 3339 time (2026-12-05T10:00:00Z) nor unix ms"),
        "{err}"
    );
    let (code, _, err) = goad(&["dlq", "list", "--reason", "gone"], true);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("invalid value 'gone' for '--reason <REASON>': \"gone\" is not a kind of reason: one of permanent, max_attempts, retry_horizon, source_gone, sink_gone, undecodable, or several separated by commas"),
        "{err}"
    );
    // An empty id, source or tenant (an unset shell variable) is refused
    // before any request: it would match nothing, or no route.
    for (args, named) in [
        (&["dlq", "list", "--source", ""][..], "'--source <SOURCE>'"),
        (&["dlq", "purge", "--tenant", ""], "'--tenant <TENANT>'"),
        (&["dlq", "add", "--source", ""], "'--source <SOURCE>'"),
        (&["hook", ""], "'<ID>'"),
    ] {
        let (code, _, err) = goad(args, true);
        assert_eq!(code, Some(2), "{args:?}");
        let refused = format!("error: a value is required for {named} but none was supplied");
        assert!(err.starts_with(&refused), "{args:?}: {err}");
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
    // Its one hook is dead already: nothing pending to dead-letter.
    let (code, out, _) = goad(&["dlq", "add", "--source", "a"], true);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"count": 0})
    );
    // This node was started without a config file.
    let (code, _, err) = goad(&["reload"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("HTTP 409 no_config_file"), "{err}");
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
    for list in ["sinks", "sources"] {
        let (code, out, _) = goad(&[list, "--tenant", "t2"], true);
        assert_eq!(code, Some(0));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            serde_json::json!({list: [], "next_cursor": null})
        );
        let (code, out, _) = goad(&[list, "--source", "a"], true);
        assert_eq!(code, Some(0));
        let listed = serde_json::from_str::<serde_json::Value>(&out).unwrap()[list].clone();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{out}");
        let (code, out, _) = goad(&[list, "--limit", "1"], true);
        assert_eq!(code, Some(0));
        let page = serde_json::from_str::<serde_json::Value>(&out).unwrap();
        assert_eq!(
            (page[list].as_array().unwrap().len(), &page["next_cursor"]),
            (1, &serde_json::Value::Null),
            "{out}"
        );
        let (code, _, err) = goad(&[list, "--cursor", "gone"], true);
        assert_eq!(code, Some(1));
        assert!(err.contains("HTTP 400 bad_cursor"), "{err}");
    }
    for (args, draining) in [
        (&["drain"][..], true),
        (&["drain", "--status"], true),
        (&["drain", "--end"], false),
    ] {
        let (code, out, _) = goad(args, true);
        assert_eq!(code, Some(0), "{out}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            serde_json::json!({"draining": draining, "pending_rows": 0, "paused_sinks": []}),
            "{args:?}"
        );
    }
    let (code, _, err) = goad(&["hook", "no-such-hook"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("HTTP 404 unknown_hook"), "{err}");
    let (code, _, err) = goad(&["dlq", "show", "0-0-0-0"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("HTTP 404 unknown_dead_letter"), "{err}");
    // `goad sinks --failing`: the sinks whose latest attempt failed (or
    // whose breaker is open), here a's while its receiver refuses.
    let failing = || {
        let (code, out, err) = goad(&["sinks", "--failing"], true);
        assert_eq!(code, Some(0), "{err}");
        let sinks = serde_json::from_str::<serde_json::Value>(&out).unwrap()["sinks"].clone();
        let names = sinks.as_array().unwrap().iter();
        names
            .map(|s| format!("{}/{}", s["source_id"], s["sink_index"]))
            .collect::<Vec<_>>()
    };
    assert_eq!(failing(), ["\"a\"/0"]);
    let (code, _, _) = goad(&["sinks", "--failing", "--limit", "1"], true);
    assert_eq!(code, Some(2), "--failing takes the whole listing");
    status.store(200, Ordering::SeqCst);
    let (code, out, _) = goad(
        &["dlq", "replay", "--source", "a", "--reason", "permanent"],
        true,
    );
    assert_eq!(code, Some(0), "{out}");
    let replay = serde_json::from_str::<serde_json::Value>(&out).unwrap();
    assert_eq!(replay["matched"], 1);
    let replay_id = replay["id"].as_str().unwrap();
    assert!(receiver.wait_for(2, Duration::from_secs(10)));
    let (code, out, _) = goad(&["dlq", "replays", "--limit", "5"], true);
    assert_eq!(code, Some(0), "{out}");
    let listed = serde_json::from_str::<serde_json::Value>(&out).unwrap()["replays"].clone();
    assert_eq!(
        (listed.as_array().unwrap().len(), &listed[0]["id"]),
        (1, &replay_id.into())
    );
    let (code, out, _) = goad(
        &["dlq", "replays", "--limit", "1", "--cursor", replay_id],
        true,
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"replays": [], "next_cursor": null})
    );
    wait_until("the replay done", Duration::from_secs(10), || {
        let (_, out, _) = goad(&["dlq", "replays", replay_id], true);
        let progress = serde_json::from_str::<serde_json::Value>(&out).unwrap();
        progress["state"] == "done" && progress["delivered"] == 1
    });
    let (code, _, err) = goad(&["dlq", "replays", replay_id, "--pause"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("HTTP 409 replay_done"), "{err}");
    assert_eq!(failing(), Vec::<String>::new(), "delivered since");
    for wrong in [
        &["dlq", "replays", "--pause"][..],
        &["dlq", "replays", replay_id, "--pause", "--resume"],
    ] {
        let (code, _, err) = goad(wrong, true);
        assert_eq!(code, Some(2), "{wrong:?}: {err}");
    }
    status.store(400, Ordering::SeqCst);
    assert_eq!(ingest(node.local_addr(), "a", b"y", &[]).status, 202);
    wait_until("1 dead again", Duration::from_secs(10), || {
        dead(&engine).len() == 1
    });
    // Without a filter a purge needs --all, and --all takes no filter.
    let (code, _, err) = goad(&["dlq", "purge"], true);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("or --all to delete every dead letter"),
        "{err}"
    );
    let (code, _, err) = goad(&["dlq", "purge", "--all", "--tenant", "t1"], true);
    assert_eq!(code, Some(2));
    assert!(err.contains("give it no filter"), "{err}");
    assert_eq!(dead(&engine).len(), 1, "nothing purged");
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

/// A sink paused in the config file holds its rows — `/v1/hooks` shows
/// them `held`, `/v1/sinks` the sink `paused`, and a drain's wait names
/// it — until a reload that resumes it, which delivers them at once.
#[test]
fn a_sink_paused_in_the_config_file_is_resumed_by_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let path = dir.path().join("goad.toml");
    let data = dir.path().join("data");
    let url = receiver.url("/in");
    let write = |paused: bool| {
        let config = format!(
            "data_dir = {data:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n[[sources]]\nid = \"a\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"{url}\"\npaused = {paused}\n"
        );
        std::fs::write(&path, config).unwrap()
    };
    write(true);
    let node = start_with(Config::load(&path).unwrap(), Some(path.clone()));
    let addr = node.local_addr();
    let id = ingest(addr, "a", b"x", &[]).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let state = || get(addr, &format!("/v1/hooks/{id}")).json()["sinks"][0].clone();
    wait_until("the row held", Duration::from_secs(10), || {
        state()["state"] == "held"
    });
    assert_eq!(state()["attempts"], 0);
    assert_eq!(state()["last_error"], "sink paused");
    let sink = get(addr, "/v1/sinks").json()["sinks"][0].clone();
    assert_eq!((&sink["paused"], &sink["held"]), (&true.into(), &1.into()));
    assert_eq!(receiver.count(), 0);
    // A drain names the paused sink that keeps its row.
    assert_eq!(
        call(addr, "POST", "/v1/drain", &[], b"").json(),
        serde_json::json!({
            "draining": true,
            "pending_rows": 1,
            "paused_sinks": [{"source_id": "a", "sink_index": 0, "sink_type": "http"}],
        })
    );
    assert_eq!(
        still_pending_after_1s(addr),
        [
            "goad: 1 rows pending",
            "goad: 1 rows still pending after 1s; paused sinks hold theirs until resumed: a/0"
        ]
    );
    call(addr, "DELETE", "/v1/drain", &[], b"");
    write(false);
    let reply = call(addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(reply.json()["applied"], serde_json::json!(["sources"]));
    assert!(receiver.wait_for(1, Duration::from_secs(5)));
    let sink = get(addr, "/v1/sinks").json()["sinks"][0].clone();
    assert_eq!(
        (&sink["paused"], &sink["held"]),
        (&false.into(), &serde_json::Value::Null)
    );
}

/// `goad wake` (`POST /v1/sources/{source_id}/sinks/{sink_index}/wake`)
/// delivers the backlog of a sink whose receiver is back before its
/// breaker's ten-minute period ends, and says what it did; a wake that
/// names no sink, or a paused one, is refused with why.
#[test]
fn waking_a_sink_delivers_its_backlog_at_once_and_refusals_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(503);
    let mut c = one_source(dir.path(), &receiver);
    waits_of_ten_minutes(&mut c, 1);
    let mut paused = SinkConfig::http(receiver.url("/p"));
    paused.paused = true;
    c.sources.push(source("p", "t1", vec![paused]));
    let node = start(c);
    let addr = node.local_addr();
    ingest_n(addr, "a", 3);
    let breaker = || get(addr, "/v1/sinks?source_id=a").json()["sinks"][0]["breaker"].clone();
    wait_until("a's breaker open", Duration::from_secs(10), || {
        breaker() == "open"
    });
    assert_eq!(receiver.count(), 1, "the attempt that opened it");
    status.store(200, Ordering::SeqCst);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["wake", "--source", "a", "--sink", "0"])
        .args(["--node", &format!("http://{addr}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({"woken": 2, "breaker_closed": true}),
        "the failed row and the probe row; the third was held behind the breaker"
    );
    assert!(receiver.wait_for(1 + 3, Duration::from_secs(10)));
    assert_eq!(breaker(), "closed");

    let refusals = [
        ("/v1/sources/nope/sinks/0/wake", 404, "unknown_source"),
        ("/v1/sources/a/sinks/1/wake", 404, "unknown_sink"),
        ("/v1/sources/a/sinks/x/wake", 400, "bad_sink_index"),
        ("/v1/sources/p/sinks/0/wake", 409, "sink_paused"),
    ];
    for (path, status, error) in refusals {
        let reply = call(addr, "POST", path, &[], b"");
        assert_eq!(
            (reply.status, reply.error_code()),
            (status, error.into()),
            "{path}"
        );
    }
    assert_eq!(get(addr, "/v1/sources/a/sinks/0/wake").status, 405);
}

/// A host sink that takes every delivery, counting them, and whose batch
/// size, asked again as the engine is reconfigured, is answered only once
/// the test lets it (after `hold` is set): a reload held in the middle.
struct HeldAtReconfigure {
    delivered: AtomicU32,
    hold: AtomicBool,
    asked: crossbeam_channel::Sender<()>,
    go_on: crossbeam_channel::Receiver<()>,
}

impl Sink for HeldAtReconfigure {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        self.delivered.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        if self.hold.load(Ordering::SeqCst) {
            let _ = self.asked.send(());
            let _ = self.go_on.recv();
        }
        None
    }
}

/// A node embedded with a host sink reloads a file that names the host
/// sink's type (and, while the reload is held in the engine, still
/// answers a scrape of its metrics).
#[test]
fn a_node_with_host_sinks_reloads_its_file_and_is_scraped_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goad.toml");
    let data = dir.path().join("data");
    let source = |id: &str| {
        format!(
            "[[sources]]\nid = \"{id}\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"ledger\"\n"
        )
    };
    let head = format!("data_dir = {data:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n");
    std::fs::write(&path, format!("{head}{}", source("a"))).unwrap();
    let (asked, reconfiguring) = crossbeam_channel::unbounded();
    let (let_go, go_on) = crossbeam_channel::bounded(0);
    let ledger = Arc::new(HeldAtReconfigure {
        delivered: AtomicU32::new(0),
        hold: AtomicBool::new(false),
        asked,
        go_on,
    });
    let options = NodeOptions {
        config_path: Some(path.clone()),
        ..NodeOptions::new(Config::from_toml(&std::fs::read_to_string(&path).unwrap()).unwrap())
    };
    let sinks = vec![("ledger".to_string(), ledger.clone() as Arc<dyn Sink>)];
    let node = Node::start_with_sinks(options, sinks).expect("the node starts");
    assert!(node.wait_ready(Duration::from_secs(20)));
    let addr = node.local_addr();

    std::fs::write(&path, format!("{head}{}{}", source("a"), source("b"))).unwrap();
    ledger.hold.store(true, Ordering::SeqCst);
    let reload = std::thread::spawn(move || call(addr, "POST", "/v1/reload", &[], b""));
    reconfiguring
        .recv_timeout(Duration::from_secs(20))
        .expect("the reload reached the engine");
    let mut scrape = Client::connect(addr);
    scrape.send(&raw_request("GET", "/metrics", &[], b""));
    let answered = scrape.answers_within(Duration::from_secs(10));
    // Let the reload go on first: a node dropped with it held would wait
    // for it for good.
    ledger.hold.store(false, Ordering::SeqCst);
    drop(let_go);
    assert!(answered, "a scrape waited for the reload");
    assert_eq!(scrape.reply().unwrap().status, 200);
    let reloaded = reload.join().unwrap();
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    assert_eq!(reloaded.json()["applied"], serde_json::json!(["sources"]));
    assert_eq!(ingest(addr, "b", b"x", &[]).status, 202);
    wait_until("the hook delivered", Duration::from_secs(20), || {
        ledger.delivered.load(Ordering::SeqCst) == 1
    });
}
