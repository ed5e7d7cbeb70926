//! The scan and the slots: a page of due rows split by deficit round robin
//! over the tenants with work due, the tenants' windows, and slots round
//! robin across tenants and keys within `sink_concurrency` and the grant.

use super::*;

fn claimed_per_tenant(ops: &[StoreOp]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for op in ops {
        if let StoreOp::Claim { tenant, .. } = op {
            *out.entry(tenant.to_string()).or_default() += 1;
        }
    }
    out
}

#[test]
fn a_page_is_split_in_equal_shares_and_a_small_tenant_leaves_its_rest_to_others() {
    let config = config_with(vec![
        source("a", "big", &["t"]),
        source("b", "small", &["t"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..1_000 {
        m.add("big", "a", &["t"], 0);
    }
    for _ in 0..10 {
        m.add("small", "b", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    let ops = m.apply(&mut c);
    // Page 128: shares of 64; "small" takes its 10, "big" gets 64 + the 54 left.
    assert_eq!(
        claimed_per_tenant(&ops),
        BTreeMap::from([("big".to_string(), 118), ("small".to_string(), 10)])
    );
}

/// A core of `tenants` tenants (`t{i}`, each with source `s{i}`) and
/// `rows` rows of each due at 0.
fn tenants_with_rows_due(tenants: usize, rows: usize) -> (Core, Model) {
    let sources = (0..tenants)
        .map(|t| source(&format!("s{t}"), &format!("t{t}"), &["t"]))
        .collect();
    let c = core(&config_with(sources), BIG);
    let mut m = Model::default();
    for t in 0..tenants {
        for _ in 0..rows {
            m.add(&format!("t{t}"), &format!("s{t}"), &["t"], 0);
        }
    }
    (c, m)
}

/// A scan reads the due index only for the tenants that may have rows due:
/// beside a thousand idle tenants, one tenant's commit costs the scan two
/// reads (its page, its next row after the page), where it once read every
/// tenant, twice.
#[test]
fn a_scan_reads_only_the_tenants_that_may_have_rows_due() {
    let (mut c, mut m) = tenants_with_rows_due(1_000, 1);
    let mut ok = |_: &Job| -> AttemptResult { Ok(()) };
    settle_at(&mut c, &mut m, 0, &mut ok);
    assert_eq!((c.stats().delivered, m.due.len()), (1_000, 0));
    m.reads = 0;
    m.add("t7", "s7", &["t"], 10);
    c.handle_committed_for(&Arc::from("t7"), 10);
    settle_at(&mut c, &mut m, 10, &mut ok);
    assert_eq!((c.stats().delivered, m.reads), (1_001, 2));
    // Rows written due for tenants not named: every tenant is read once.
    m.reads = 0;
    m.add("t9", "s9", &["t"], 20);
    c.handle_committed();
    settle_at(&mut c, &mut m, 20, &mut ok);
    assert_eq!((c.stats().delivered, m.reads), (1_002, 1_000 + 2));
}

/// A scan's reads do not grow with the tenants that have rows due: with
/// 2,000 tenants due, a page of 128 claims one row from each of the next
/// 128 tenants of the round robin for two reads each (its page, its next
/// row after the page), where it once read every due tenant first.
#[test]
fn a_scan_reads_only_as_far_into_the_round_robin_as_its_page_goes() {
    let (mut c, mut m) = tenants_with_rows_due(2_000, 2);
    c.handle_scan(0, &mut m);
    let first = claimed_per_tenant(&m.apply(&mut c));
    assert_eq!((first.len(), first.values().max()), (128, Some(&1)));
    m.reads = 0;
    c.handle_scan(0, &mut m);
    let second = claimed_per_tenant(&m.apply(&mut c));
    assert_eq!((second.len(), second.values().max()), (128, Some(&1)));
    assert!(
        second.keys().all(|t| !first.contains_key(t)),
        "the next 128 tenants"
    );
    assert_eq!(m.reads, 2 * 128);
    assert_eq!(c.stats().active_tenants, 2_000);
}

/// A hint may be early, never late: rows that leave the index behind a
/// tenant's hint (dead-lettered with their source) leave the tenant in the
/// round robin until a scan reads the index, which then drops it, also
/// when that scan reads every tenant at once.
#[test]
fn a_tenant_whose_rows_left_the_index_leaves_the_round_robin_at_the_next_read() {
    let config = config_with(vec![source("a", "ta", &["t"]), source("b", "tb", &["t"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("ta", "a", &["t"], 100);
    c.handle_scan(0, &mut m);
    assert_eq!(c.poll_deadline(0), Some(100), "woken for ta's row");
    assert_eq!(
        c.handle_dead_letter_source(0, "a", FROM_START, ALL, &mut m),
        (1, None)
    );
    let _ = m.apply(&mut c);
    m.add("tb", "b", &["t"], 0);
    c.handle_committed();
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("tb".into(), 1)])
    );
    assert_eq!(c.poll_deadline(0), None, "nothing left to wake for");
}

/// A tenant the page did not reach goes first in the next scan; a tenant
/// that became due since goes after it, before those the page reached.
#[test]
fn a_tenant_the_page_did_not_reach_goes_first_in_the_next_scan() {
    let mut config = config_with(vec![
        source("a", "ta", &["t"]),
        source("b", "tb", &["t"]),
        source("c", "tc", &["t"]),
        source("d", "td", &["t"]),
    ]);
    config.dispatch.batch = 2;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("ta", "a", &["t"], 0);
        m.add("tb", "b", &["t"], 0);
        m.add("tc", "c", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("ta".into(), 1), ("tb".into(), 1)])
    );
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("ta".into(), 1), ("tc".into(), 1)])
    );
    // Now tb leads (not reached), then ta and tc; td joins before those.
    m.add("td", "d", &["t"], 0);
    c.handle_committed_for(&Arc::from("td"), 0);
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("tb".into(), 1), ("td".into(), 1)])
    );
}

#[test]
fn a_tenant_at_its_window_is_skipped_by_the_scan_and_the_wake_up_until_an_outcome_frees_room() {
    let mut config = config_with(vec![
        source("a", "full", &["t"]),
        source("b", "free", &["t"]),
    ]);
    config.dispatch.tenants.insert(
        "full".into(),
        TenantLimitsConfig {
            max_inflight: Some(2),
            ..Default::default()
        },
    );
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..5 {
        m.add("full", "a", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("full".into(), 2)])
    );
    // "full" has 3 rows due but no room: no wake-up for it.
    assert!(!c.wants_scan(0));
    assert_eq!(
        c.poll_deadline(0),
        None,
        "nothing to wake for: no attempt runs, the due rows wait for room"
    );
    m.add("free", "b", &["t"], 0);
    c.handle_committed();
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("free".into(), 1)])
    );
    let job = c.poll_job(0).expect("a job");
    let first_full = if &*job.key.tenant == "full" {
        job
    } else {
        c.poll_job(0).unwrap()
    };
    c.handle_outcome(5, first_full.id, Ok(()), TOOK);
    assert!(c.wants_scan(5), "freed room asks for a scan");
    c.handle_scan(5, &mut m);
    let ops = m.apply(&mut c);
    assert_eq!(
        claimed_per_tenant(&ops),
        BTreeMap::from([("full".into(), 1)])
    );
}

/// A reload that widens a tenant's window lets the next scan claim its
/// due rows, with no outcome to free room.
#[test]
fn a_tenant_at_its_window_claims_again_when_a_reload_widens_it() {
    let mut config = config_with(vec![source("a", "full", &["t"])]);
    let limits = |max_inflight| TenantLimitsConfig {
        max_inflight: Some(max_inflight),
        ..Default::default()
    };
    config.dispatch.tenants.insert("full".into(), limits(2));
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..5 {
        m.add("full", "a", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    assert_eq!(claimed_per_tenant(&m.apply(&mut c)).get("full"), Some(&2));
    c.handle_scan(0, &mut m);
    assert_eq!(claimed_per_tenant(&m.apply(&mut c)).get("full"), None);
    config.dispatch.tenants.insert("full".into(), limits(5));
    reconfigure(&mut c, 0, &config);
    c.handle_scan(0, &mut m);
    assert_eq!(claimed_per_tenant(&m.apply(&mut c)).get("full"), Some(&3));
}

#[test]
fn slots_go_round_robin_across_tenants_then_across_a_tenants_keys() {
    let config = config_with(vec![
        source("a1", "ta", &["t"]),
        source("a2", "ta", &["t"]),
        source("b", "tb", &["t"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("ta", "a1", &["t"], 0);
        m.add("ta", "a2", &["t"], 0);
        m.add("tb", "b", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let order: Vec<String> = std::iter::from_fn(|| c.poll_job(0))
        .map(|j| format!("{}/{}", j.key.tenant, j.key.source_id))
        .collect();
    assert_eq!(
        order,
        ["ta/a1", "tb/b", "ta/a2", "tb/b", "ta/a1", "tb/b", "ta/a2", "ta/a1", "ta/a2"]
    );
}

#[test]
fn a_key_never_runs_more_than_sink_concurrency_and_the_shard_not_more_than_its_grant() {
    let mut config = config_with(vec![source("a", "t", &["x"]), source("b", "t", &["x"])]);
    config.dispatch.sink_concurrency = 2;
    let mut c = core(&config, calls_at_once(3));
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("t", "a", &["x"], 0);
        m.add("t", "b", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(jobs.len(), 3, "the shard's concurrency");
    c.handle_grant(calls_at_once(100));
    let more: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(more.len(), 1, "each key is capped at 2");
    c.handle_outcome(1, jobs[0].id, Ok(()), TOOK);
    assert_eq!(
        c.poll_job(1).map(|j| j.key.source_id.clone()),
        Some(jobs[0].key.source_id.clone())
    );
}
