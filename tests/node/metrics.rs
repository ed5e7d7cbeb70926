//! `/metrics`: Prometheus text that parses, its families and values, and
//! `metrics.per_sink`.

use super::*;

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

/// `/metrics` parses as the Prometheus text format: every sample has a
/// declared family, a valid name, labels and a number, and histogram
/// buckets are cumulative.
#[test]
fn metrics_parse_as_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = one_source(dir.path(), &receiver);
    c.shards = 2;
    // A source whose issuer's keys cannot be fetched (nothing listens on
    // port 9), and which has no sink: its key-set fetches are counted.
    let mut oidc = source("oidc", "t2", vec![]);
    oidc.ingest_jwt = Some(goad::config::IngestJwt {
        jwks_url: "http://127.0.0.1:9/certs".into(),
        issuer: goad::config::OneOrMany::One("https://issuer.example".into()),
        audience: "goad".into(),
        claims: Default::default(),
    });
    c.sources.push(oidc);
    let node = start(c);
    let addr = node.local_addr();
    for _ in 0..5 {
        assert_eq!(ingest(addr, "a", b"x", &[]).status, 202);
    }
    assert_eq!(ingest(addr, "nope", b"x", &[]).status, 404);
    assert!(receiver.wait_for(5, Duration::from_secs(10)));
    let engine = node.engine().unwrap();
    wait_until("5 delivered", Duration::from_secs(10), || {
        engine.stats().iter().map(|s| s.core.delivered).sum::<u64>() == 5
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
    // The process's own, as Prometheus clients name them (this test's
    // process: the node runs in it).
    let now_s = goad::runtime::wall_ms() as f64 / 1_000.0;
    let started_s = sum("process_start_time_seconds", "");
    assert!(
        (now_s - 3_600.0..=now_s).contains(&started_s),
        "{started_s}"
    );
    let open_fds = sum("process_open_fds", "");
    assert!(
        (1.0..=sum("process_max_fds", "")).contains(&open_fds),
        "{open_fds}"
    );
    assert!(sum("process_resident_memory_bytes", "") > 1_048_576.0);
    assert!(sum("process_cpu_seconds_total", "") > 0.0);
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
    // Every host this process looked up answered.
    assert_eq!(sum("goad_dns_stale_hosts", ""), 0.0);
    assert_eq!(
        sum("goad_store_ingest_limit_bytes", ""),
        2.0 * (56u64 << 30) as f64
    );
    assert!(sum("goad_store_used_bytes", "shard=\"0\"") > 0.0);
    assert_eq!(sum("goad_min_free_disk_bytes", ""), (256u64 << 20) as f64);
    // What the disk has free, as df says it within the 1 GiB others may
    // have written since.
    let df_free = df_available_bytes(dir.path()) as f64;
    for shard in ["shard=\"0\"", "shard=\"1\""] {
        let free = sum("goad_store_disk_available_bytes", shard);
        assert!(
            (free - df_free).abs() < (1u64 << 30) as f64,
            "{free} vs {df_free}"
        );
    }
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
        "goad_dns_stale_hosts",
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
