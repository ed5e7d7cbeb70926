//! The cost of claiming for a tenant with 10 due rows while another tenant
//! of the same shard has 1,000,000 due, beside the same with no neighbour:
//! the due-index reads a scan makes for the small tenant (its earliest due
//! row, its page, and loading each row and hook), in a write transaction
//! like the shard's. Then both alternated in one loop, printing their ratio.

mod common;

use common::paired::{benching, paired};
use criterion::Criterion;
use goad::core::{DueIndex, TenantId};
use goad::store::{Hook, NewRow, ShardStore, TenantTable, TxnIndex};
use std::sync::Arc;

fn store_with(neighbour_rows: u64) -> (tempfile::TempDir, ShardStore, TenantTable) {
    let dir = tempfile::tempdir().unwrap();
    let store = ShardStore::open(dir.path(), 0, 1).unwrap();
    let mut tenants = TenantTable::load(&store).unwrap();
    let rows = [NewRow::unordered(0, "http")];
    let mut seq = 0u64;
    let mut write = |tenant: &str, count: u64, seq: &mut u64| {
        let mut left = count;
        while left > 0 {
            let mut wtxn = store.env().write_txn().unwrap();
            for _ in 0..left.min(50_000) {
                *seq += 1;
                let hook = Hook {
                    id: format!("h{seq}"),
                    seq: *seq,
                    tenant: Arc::from(tenant),
                    source_id: Arc::from("s"),
                    received_at_ms: 1,
                    content_type: None,
                    dedupe_key: None,
                    headers: vec![],
                    body: vec![0; 64],
                };
                goad::store::write_commit(
                    &store,
                    &mut wtxn,
                    &mut tenants,
                    &hook,
                    &rows,
                    1_000 + *seq,
                )
                .unwrap();
            }
            wtxn.commit().unwrap();
            left -= left.min(50_000);
        }
    };
    write("big", neighbour_rows, &mut seq);
    write("small", 10, &mut seq);
    (dir, store, tenants)
}

fn claim_small(store: &ShardStore, tenants: &TenantTable) -> usize {
    let wtxn = store.env().write_txn().unwrap();
    let mut index = TxnIndex::new(store, &wtxn, tenants);
    let small: TenantId = Arc::from("small");
    let mut page = Vec::new();
    assert!(index.earliest_due_ms(&small, None).is_some());
    index.due_page(&small, u64::MAX, None, 128, &mut page);
    for entry in &page {
        std::hint::black_box(index.load(entry.row));
    }
    assert_eq!(page.len(), 10);
    page.len()
}

fn claims(
    c: &mut Criterion,
    alone: &(ShardStore, TenantTable),
    crowded: &(ShardStore, TenantTable),
) {
    let mut group = c.benchmark_group("claim_small_tenant");
    group.bench_function("no_neighbour", |b| {
        b.iter(|| claim_small(&alone.0, &alone.1))
    });
    group.bench_function("neighbour_with_1M_due", |b| {
        b.iter(|| claim_small(&crowded.0, &crowded.1))
    });
    group.finish();
}

fn main() {
    let (_d1, alone_store, alone_tenants) = store_with(0);
    let (_d2, crowded_store, crowded_tenants) = store_with(1_000_000);
    let alone = (alone_store, alone_tenants);
    let crowded = (crowded_store, crowded_tenants);
    let mut criterion = Criterion::default().configure_from_args();
    claims(&mut criterion, &alone, &crowded);
    let blocks = if benching() { 500 } else { 1 };
    let [a, c] = paired(
        blocks,
        1_000,
        || {
            std::hint::black_box(claim_small(&alone.0, &alone.1));
        },
        || {
            std::hint::black_box(claim_small(&crowded.0, &crowded.1));
        },
    );
    println!(
        "claim_small_tenant paired, {blocks} blocks of 1000: no neighbour {a:.0} ns, beside 1M due {c:.0} ns, ratio {:.2}",
        c / a
    );
    criterion.final_summary();
}
