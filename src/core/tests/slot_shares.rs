//! Slots by shares: a freed slot goes first to a tenant under its share of
//! the shard's concurrency, and the last eighth is kept for a tenant to
//! come while tenants share them (see `slots`).

use super::*;

/// Tenants `t` and `v` (sources `a`, `b`) with 50 rows each due at 0, and
/// tenant `u` (source `c`); the shard runs 16 calls at once.
fn shared_core() -> (Core, Model) {
    let config = config_with(vec![
        source("a", "t", &["x"]),
        source("b", "v", &["x"]),
        source("c", "u", &["x"]),
    ]);
    let c = core(&config, calls_at_once(16));
    let mut m = Model::default();
    for _ in 0..50 {
        m.add("t", "a", &["x"], 0);
        m.add("v", "b", &["x"], 0);
    }
    (c, m)
}

fn count(jobs: &[Job], source: &str) -> usize {
    jobs.iter().filter(|j| &*j.key.source_id == source).count()
}

/// Two tenants with backlogs run 14 of the 16 calls (7 each), the last two
/// kept: a third tenant's row starts the moment it is claimed, and again
/// after its call ends, while the first two's calls all run on.
#[test]
fn a_tenant_that_comes_finds_a_slot_beside_tenants_holding_the_rest() {
    let (mut c, mut m) = shared_core();
    let first = start_all(&mut c, &mut m, 0);
    assert_eq!((count(&first, "a"), count(&first, "b")), (7, 7));
    m.add("u", "c", &["x"], 10);
    c.handle_committed_for(&Arc::from("u"), 10);
    let u = start_all(&mut c, &mut m, 10);
    assert_eq!(count(&u, "c"), 1, "at once");
    c.handle_outcome(11, u[0].id, Ok(()), TOOK);
    m.add("u", "c", &["x"], 12);
    c.handle_committed_for(&Arc::from("u"), 12);
    let u = start_all(&mut c, &mut m, 12);
    assert_eq!(count(&u, "c"), 1, "at once again");
    // Beside u's call, t and v run past their shares (16 / 3): a slot t
    // frees is kept; once u's call ends, t takes one, the last two kept.
    let a_job = first.iter().find(|j| &*j.key.source_id == "a").unwrap();
    c.handle_outcome(300, a_job.id, Ok(()), TOOK);
    assert!(start_all(&mut c, &mut m, 300).is_empty());
    c.handle_outcome(301, u[0].id, Ok(()), TOOK);
    let after = start_all(&mut c, &mut m, 301);
    assert_eq!((after.len(), count(&after, "a")), (1, 1));
}

/// A lone tenant keeps no slot for another: it may run every one.
#[test]
fn a_lone_tenant_may_run_every_slot() {
    let config = config_with(vec![source("a", "t", &["x", "y"])]);
    let mut c = core(&config, calls_at_once(16));
    let mut m = Model::default();
    for _ in 0..50 {
        m.add("t", "a", &["x", "y"], 0);
    }
    assert_eq!(start_all(&mut c, &mut m, 0).len(), 16, "8 a sink");
}

/// The calls a shard's tenants could run, which the coordinator shares
/// the node's concurrency by: those running, and those their queued rows
/// could start, a key's up to `sink_concurrency` and a tenant's up to its
/// concurrency; and whether the shard's share is what stops them.
#[test]
fn the_calls_wanted_are_those_running_and_those_queued_rows_could_start() {
    let mut config = config_with(vec![
        source("a", "t", &["x", "y"]),
        source("b", "u", &["x"]),
    ]);
    config.dispatch.sink_concurrency = 2;
    config.dispatch.tenants.insert(
        "t".into(),
        TenantLimitsConfig {
            concurrency: Some(3),
            ..TenantLimitsConfig::default()
        },
    );
    let mut c = core(&config, calls_at_once(2));
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("t", "a", &["x", "y"], 0);
    }
    for _ in 0..5 {
        m.add("u", "b", &["x"], 0);
    }
    let running = start_all(&mut c, &mut m, 0);
    assert_eq!(running.len(), 2, "the shard's share");
    assert!(c.short_of_calls(1), "its share keeps rows from starting");
    assert!(!c.short_of_calls(2), "as the coordinator was told");
    // t: 3 in all (its concurrency); u: 2 (its key's sink_concurrency).
    assert_eq!(c.wanted_calls(), 3 + 2);
    for job in &running {
        c.handle_outcome(1, job.id, Ok(()), TOOK);
    }
    let _ = m.apply(&mut c);
    c.handle_grant(calls_at_once(100));
    assert_eq!(start_all(&mut c, &mut m, 1).len(), 5, "as many as wanted");
    assert_eq!(c.wanted_calls(), 5);
    assert!(
        !c.short_of_calls(0),
        "the tenants' caps keep the rest queued"
    );
}

/// The tenants a shard counts active (the coordinator's weights) are those
/// with rows claimed or due now: once their calls end and nothing is due,
/// none, with no scan after them (a count taken at the last scan stayed at
/// a burst's tenants while the shard slept, and kept the node's
/// concurrency from another shard's backlog).
#[test]
fn a_tenant_is_active_while_its_rows_are_claimed_or_due() {
    let config = config_with(vec![source("a", "t", &["x"]), source("b", "v", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    m.add("v", "b", &["x"], 0);
    let running = start_all(&mut c, &mut m, 0);
    assert_eq!((running.len(), c.stats().active_tenants), (2, 2));
    c.handle_outcome(1, running[0].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(c.stats().active_tenants, 1);
    c.handle_outcome(2, running[1].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(c.stats().active_tenants, 0);
    assert!(!c.wants_scan(2), "nothing due");
}

/// The calls wanted are counted up to the node's concurrency, which no
/// shard is granted more of: forty tenants with a row queued each want 40
/// calls, said as the node's 32 (and as 40 once the node runs 64).
#[test]
fn the_calls_wanted_are_counted_up_to_the_nodes_concurrency() {
    let names: Vec<(String, String)> = (0..40)
        .map(|i| (format!("s{i}"), format!("t{i}")))
        .collect();
    let sources = names.iter().map(|(s, t)| source(s, t, &["x"])).collect();
    let mut config = config_with(sources);
    config.dispatch.concurrency = 32;
    let mut c = core(&config, calls_at_once(1));
    let mut m = Model::default();
    for (s, t) in &names {
        m.add(t, s, &["x"], 0);
    }
    assert_eq!(start_all(&mut c, &mut m, 0).len(), 1, "the shard's share");
    assert_eq!(c.wanted_calls(), 32);
    config.dispatch.concurrency = 64;
    reconfigure(&mut c, 1, &config);
    assert_eq!(c.wanted_calls(), 40);
}
