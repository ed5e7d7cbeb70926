//! A tenant's `max_stored_bytes`: the bytes its hooks hold in its shard's
//! store, counted exactly with each commit and deletion, bound its ingest
//! while the other tenants of the shard go on, across a restart too; a
//! redelivery of a hook it already stored still gets the first id.

mod common;

use common::*;
use goad::config::TenantLimitsConfig;
use goad::{CommitError, Engine, NewHook, SinkConfig};
use std::sync::atomic::Ordering;
use std::time::Duration;

const LIMIT_BYTES: u64 = 64 * 1024;

/// What each tenant's hooks hold in the (one) shard's store.
fn stored_bytes(engine: &Engine, tenant: &str) -> u64 {
    let shards = engine.tenant_stats().unwrap();
    let of_tenant = shards[0].stored_bytes.iter().find(|(t, _)| &**t == tenant);
    of_tenant.map_or(0, |(_, bytes)| *bytes)
}

fn kib_hook(source: &str) -> NewHook {
    NewHook::new(source, vec![b'x'; 1024])
}

#[test]
fn a_tenant_at_its_bound_is_refused_while_others_commit_until_deliveries_free_room() {
    let dir = tempfile::tempdir().unwrap();
    // The receiver refuses at first: rows stay, retried every 200 ms at
    // most and never dead-lettered while the test runs.
    let (receiver, status) = switchable(503);
    let mut c = config(dir.path());
    c.max_body_bytes = 4 * 1024;
    c.retry.base_ms = 100;
    c.retry.max_ms = 200;
    c.retry.max_attempts = 1_000;
    let bounded = TenantLimitsConfig {
        max_stored_bytes: Some(LIMIT_BYTES),
        ..TenantLimitsConfig::default()
    };
    c.dispatch.tenants.insert("t1".into(), bounded);
    for (source, tenant) in [("a", "t1"), ("b", "t2")] {
        let sinks = vec![SinkConfig::http(receiver.url("/"))];
        c.sources.push(common::source(source, tenant, sinks));
    }
    c.sources[0].dedupe_window_ms = Some(3_600_000);
    let engine = Engine::open(c.clone()).unwrap();
    let keyed = || NewHook {
        dedupe_key: Some("k-1".into()),
        ..kib_hook("a")
    };
    let first_id = engine.commit(keyed()).unwrap();
    let keyed_bytes = stored_bytes(&engine, "t1");
    engine.commit(kib_hook("a")).unwrap();
    let one_hook_bytes = stored_bytes(&engine, "t1") - keyed_bytes;
    assert!(
        (1024..2048).contains(&one_hook_bytes) && keyed_bytes > one_hook_bytes,
        "a 1 KiB hook is stored in {one_hook_bytes} bytes, with its key in {keyed_bytes}"
    );
    // What t1's hooks hold: the keyed one and `n` others.
    let holding = |n: u64| keyed_bytes + n * one_hook_bytes;
    let mut stored = 1;
    let refused = loop {
        match engine.commit(kib_hook("a")) {
            Ok(_) => stored += 1,
            Err(e) => break e,
        }
        assert!(stored < 100, "{stored} hooks stored under a 64 KiB bound");
    };
    let CommitError::TenantFull {
        tenant,
        used_bytes,
        limit_bytes,
    } = refused
    else {
        panic!("refused as {refused:?}");
    };
    assert_eq!((tenant.as_str(), limit_bytes), ("t1", LIMIT_BYTES));
    assert_eq!(stored_bytes(&engine, "t1"), holding(stored));
    assert!(holding(stored) <= LIMIT_BYTES);
    // What was refused is what is stored and about one hook more.
    let one_more = used_bytes - holding(stored);
    assert!(
        used_bytes > LIMIT_BYTES && (one_hook_bytes..2 * one_hook_bytes).contains(&one_more),
        "refused at {used_bytes} with {stored} hooks of {one_hook_bytes} bytes stored"
    );
    // The other tenant of the shard is not bounded by t1's hooks.
    for _ in 0..100 {
        engine.commit(kib_hook("b")).unwrap();
    }
    assert_eq!(stored_bytes(&engine, "t2"), 100 * one_hook_bytes);
    // A provider's redelivery of a hook t1 already stored costs nothing:
    // it gets the first hook's id, full or not.
    assert_eq!(engine.commit(keyed()).unwrap(), first_id);
    assert_eq!(stored_bytes(&engine, "t1"), holding(stored));

    // The counts are the store's: after a restart t1 is still at its bound.
    engine.shutdown();
    drop(engine);
    let engine = Engine::open(c).unwrap();
    assert_eq!(stored_bytes(&engine, "t1"), holding(stored));
    assert!(matches!(
        engine.commit(kib_hook("a")),
        Err(CommitError::TenantFull { .. })
    ));

    // Deliveries free the room, and t1 commits again.
    status.store(200, Ordering::SeqCst);
    wait_until("every hook delivered", Duration::from_secs(30), || {
        stored_bytes(&engine, "t1") == 0 && stored_bytes(&engine, "t2") == 0
    });
    engine.commit(kib_hook("a")).unwrap();
    assert_eq!(stored_bytes(&engine, "t1"), one_hook_bytes);
}
