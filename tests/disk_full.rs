//! The disk fills before the store: new hooks leave `min_free_disk_bytes`
//! of the file system holding the data directory free, so the writes that
//! record deliveries still find room. The file system is a real one: the
//! stores live in `/dev/shm` where it has room (a tmpfs no build or log
//! writes to), and a reserve set at what it has free stands for a disk
//! filled to its reserve. The simulator keeps its stores there too: a
//! simulator soak run beside these tests moves their disk.

mod common;

use common::http::{call, get};
use common::*;
use goad::node::{Node, NodeOptions};
use goad::{CommitError, Engine, NewHook};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// Held by the tests that set a reserve near what the file system has
/// free, or fill it: one's file would move the other's disk.
static NEAR_THE_RESERVE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `/dev/shm` if it has a GiB free, else the temporary directory.
fn quiet_file_system() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && df_available_bytes(shm) >= 1 << 30 {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn store_file_bytes(data_dir: &Path) -> u64 {
    std::fs::metadata(data_dir.join("shard-0").join("data.mdb"))
        .unwrap()
        .len()
}

/// Commits `body` until the engine refuses it; the ids taken and the refusal.
fn commit_until_refused(engine: &Engine, body: &[u8], max: usize) -> (Vec<String>, CommitError) {
    let mut acked = Vec::new();
    loop {
        match engine.commit(NewHook::new("s", body.to_vec())) {
            Ok(id) => acked.push(id),
            Err(e) => return (acked, e),
        }
        assert!(acked.len() < max, "{max} hooks taken");
    }
}

/// A node whose disk has no more free than its reserve still takes hooks
/// into the pages its store's file has free (the deliveries of earlier
/// hooks freed them), without growing the file into the reserve; then it
/// refuses them with `DiskFull`, naming what the file system has free and
/// the reserve, while its deliveries go on and are recorded; once they
/// free pages, it takes hooks again.
#[test]
fn a_disk_at_its_reserve_takes_hooks_into_the_store_s_free_pages_then_refuses_them() {
    let _turn = NEAR_THE_RESERVE.lock();
    let dir = tempfile::tempdir_in(quiet_file_system()).unwrap();
    let (receiver, status) = switchable(503);
    let mut c = config_with_http_sink(dir.path(), &receiver.url("/h"));
    c.shards = 1;
    c.retry.base_ms = 50;
    c.retry.max_ms = 200;
    c.retry.max_attempts = 10_000;
    // A hook's record well inside one 4 KiB page: LMDB puts a larger
    // one in overflow pages, which it can only take from runs of free
    // pages, so it would grow the file beside free pages oftener.
    let body = vec![b'x'; 3_000];
    let hooks = 1_000;
    {
        // The store's file grows to hold 1,000 hooks at once, then their
        // deliveries free its pages.
        let engine = Engine::open(c.clone()).unwrap();
        for _ in 0..hooks {
            engine.commit(NewHook::new("s", body.clone())).unwrap();
        }
        status.store(200, SeqCst);
        wait_until("the first hooks delivered", Duration::from_secs(60), || {
            engine.hook_count().unwrap() == 0
        });
        engine.shutdown();
    }
    let file_bytes = store_file_bytes(dir.path());
    assert!(file_bytes > (hooks * body.len()) as u64, "{file_bytes}");

    // Each new hook's row fails once and then waits (until it is woken
    // below): retries meanwhile would take free pages too, as many as the
    // machine's pace lets them.
    status.store(503, SeqCst);
    let reserve_bytes = df_available_bytes(dir.path());
    c.min_free_disk_bytes = reserve_bytes;
    c.retry.base_ms = 600_000;
    c.retry.max_ms = 600_000;
    let engine = Engine::open(c).unwrap();
    let (acked, refusal) = commit_until_refused(&engine, &body, 4 * hooks);
    // The first hooks' pages hold about as many again (with their rows'
    // pages too; LMDB grows the file beside the free pages now and then,
    // which is taken off them). How many depends on how the commits of
    // each round shared their transactions, which the machine's pace
    // decides: 1,527 under coverage instrumentation. That none went into
    // the reserve is what the file's size below says.
    assert!(
        (hooks / 2..=hooks * 2).contains(&acked.len()),
        "{} hooks taken into the free pages of {hooks}",
        acked.len()
    );
    let grown_bytes = store_file_bytes(dir.path()) - file_bytes;
    assert!(
        grown_bytes < 1 << 20,
        "the file grew {grown_bytes} bytes into the reserve"
    );
    let CommitError::DiskFull {
        available_bytes,
        min_free_bytes,
    } = refusal
    else {
        panic!("refused otherwise: {refusal}");
    };
    assert_eq!(min_free_bytes, reserve_bytes);
    assert!(available_bytes <= min_free_bytes, "{available_bytes} free");
    assert_eq!(
        refusal.to_string(),
        format!(
            "the disk is full: the file system holding the shard's store has {available_bytes} bytes free, and min_free_disk_bytes keeps {min_free_bytes} for recording deliveries: commit again once deliveries or the operator free room"
        )
    );

    wait_until("each row failed once", Duration::from_secs(60), || {
        rows(&engine).iter().all(|row| row.record.attempts == 1)
    });
    status.store(200, SeqCst);
    engine.wake_sink("s", 0).unwrap();
    wait_until("the hooks taken delivered", Duration::from_secs(60), || {
        engine.hook_count().unwrap() == 0
    });
    let stats = &engine.stats()[0];
    assert_eq!(stats.store_failures, 0, "no write found the disk full");
    assert_eq!(
        stats.core.delivered,
        acked.len() as u64,
        "each recorded once"
    );
    engine
        .commit(NewHook::new("s", body))
        .expect("a hook taken into the pages the deliveries freed");
}

/// A disk with a terabyte less free than the reserve refuses the first
/// hook of an empty store.
#[test]
fn a_disk_below_its_reserve_refuses_the_first_hook() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    c.min_free_disk_bytes = df_available_bytes(dir.path()) + (1 << 40);
    let engine = Engine::open(c.clone()).unwrap();
    match engine.commit(NewHook::new("s", b"{}".to_vec())) {
        Err(CommitError::DiskFull {
            available_bytes,
            min_free_bytes,
        }) => {
            assert_eq!(min_free_bytes, c.min_free_disk_bytes);
            assert!(
                available_bytes < min_free_bytes - (1 << 39),
                "{available_bytes}"
            );
        }
        other => panic!("not refused as DiskFull: {other:?}"),
    }
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// A node none of whose shards has room for a new hook is not ready:
/// `/readyz` answers 503 `disk_full` (as ingest does) while a file fills
/// the disk past the reserve, measured at each probe — so it is ready
/// again once room is freed, though no hook came to measure it.
#[test]
fn a_node_whose_disk_is_at_its_reserve_is_not_ready_until_room_is_freed() {
    let _turn = NEAR_THE_RESERVE.lock();
    let dir = tempfile::tempdir_in(quiet_file_system()).unwrap();
    let mut config = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    config.listen = "127.0.0.1:0".into();
    let filler_bytes: u64 = 256 << 20;
    config.min_free_disk_bytes = df_available_bytes(dir.path()) - filler_bytes / 2;
    let node = Node::start(NodeOptions::new(config)).unwrap();
    assert!(node.wait_ready(Duration::from_secs(20)));
    let addr = node.local_addr();
    assert_eq!(get(addr, "/readyz").status, 200);

    let filler = dir.path().join("filler");
    std::fs::write(&filler, vec![0u8; filler_bytes as usize]).unwrap();
    let refused = get(addr, "/readyz");
    assert_eq!(
        (refused.status, refused.error_code()),
        (503, "disk_full".into())
    );
    let message = refused.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(
            "no shard takes new hooks: the file system holding the data directory has "
        ),
        "{message}"
    );
    let ingest = call(addr, "POST", "/v1/sources/s/hooks", &[], b"{}");
    assert_eq!(
        (ingest.status, ingest.error_code()),
        (503, "disk_full".into())
    );

    std::fs::remove_file(&filler).unwrap();
    assert_eq!(get(addr, "/readyz").status, 200);
    assert_eq!(
        call(addr, "POST", "/v1/sources/s/hooks", &[], b"{}").status,
        202
    );
    node.stop();
    node.wait().unwrap();
}
