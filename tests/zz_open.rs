use goad::config::Config;
use goad::core::{Catalog, Core, Grant};
use goad::store::{Hook, NewRow, ShardStore, TenantTable, TxnIndex};
use std::sync::Arc;
use std::time::Instant;

#[test]
fn zz_open() {
    let n: u64 = std::env::var("ROWS").unwrap().parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = ShardStore::open(dir.path(), 0, 1).unwrap();
    let mut tenants = TenantTable::load(&store).unwrap();
    let rows = [NewRow::unordered(0, "http")];
    let mut seq = 0;
    while seq < n {
        let mut wtxn = store.env().write_txn().unwrap();
        for _ in 0..50_000.min(n - seq) {
            seq += 1;
            let hook = Hook {
                id: format!("h{seq}"),
                seq,
                tenant: Arc::from(format!("t{}", seq % 4)),
                source_id: Arc::from("s"),
                received_at_ms: 1,
                content_type: None,
                dedupe_key: None,
                headers: vec![],
                body: vec![7; 1024],
            };
            goad::store::write_commit(
                &store,
                &mut wtxn,
                &mut tenants,
                &hook,
                &rows,
                10_000_000 + seq,
            )
            .unwrap();
        }
        wtxn.commit().unwrap();
    }
    let config = Config::default();
    let grant = Grant {
        max_inflight: 1 << 20,
        max_inflight_bytes: 1 << 40,
        concurrency: 1000,
    };
    let mut core = Core::new(
        config.dispatch.clone(),
        config.retry,
        Arc::new(Catalog::from_config(&config)),
        grant,
        1_000,
        1,
        1,
    );
    let start = Instant::now();
    let mut scans = 0;
    let mut worst = std::time::Duration::ZERO;
    while core.is_unparking() {
        let t = Instant::now();
        let wtxn = store.env().write_txn().unwrap();
        let mut index = TxnIndex::new(&store, &wtxn, &tenants);
        core.handle_scan(1_000, &mut index);
        drop(index);
        drop(wtxn);
        worst = worst.max(t.elapsed());
        scans += 1;
    }
    eprintln!(
        "{n} rows waiting: {scans} scans, {:?} in all, worst scan {:?}",
        start.elapsed(),
        worst
    );
}
