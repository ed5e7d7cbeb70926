//! Backups of a running engine (`Engine::backup`): what a backup taken
//! while hooks commit holds, what an engine opened on it delivers, and
//! where a backup may not go.

mod common;

use common::{config, source, wait_until};
use goad::demo::receiver::{Receiver, Reply};
use goad::store::{verify_data_dir, DeadFilter, BACKUP_UNFINISHED};
use goad::{BackupError, Config, Engine, NewHook, SinkConfig};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Two shards: source `s` (tenant `t`) delivering to `pending_url`, and
/// source `d` (tenant `u`) to `refusing_url`.
fn two_sources(data_dir: &Path, pending_url: &str, refusing_url: &str) -> Config {
    let mut c = config(data_dir);
    c.shards = 2;
    let sink = |url: &str| vec![SinkConfig::http(url.to_string())];
    c.sources.push(source("s", "t", sink(pending_url)));
    c.sources.push(source("d", "u", sink(refusing_url)));
    c
}

fn delivered_ids(receiver: &Receiver) -> HashSet<String> {
    receiver
        .received()
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_string))
        .collect()
}

/// A backup taken while a thread commits holds every hook acknowledged
/// before it began and none committed after it returned, the dead letters
/// as they were, and the data directory's other files but not the ones
/// being written nor a reshard's leftovers; it verifies sound, and an engine opened on it delivers
/// every pending hook (its receiver hung on them before). Marked
/// unfinished, as a backup cut short is, it is refused.
#[test]
fn a_backup_holds_every_hook_acknowledged_before_it_and_an_engine_on_it_delivers_them() {
    let dir = tempfile::tempdir().unwrap();
    let (data, to) = (dir.path().join("data"), dir.path().join("backup"));
    let hanging = Receiver::start(|_| Reply::hang()).unwrap();
    let refusing = Receiver::start(|_| Reply::status(410)).unwrap();
    let engine = Engine::open(two_sources(&data, &hanging.url("/s"), &refusing.url("/d"))).unwrap();
    let replays = data.join("replays");
    std::fs::create_dir_all(&replays).unwrap();
    std::fs::write(replays.join("r1.json"), b"{\"id\":\"r1\"}").unwrap();
    std::fs::write(replays.join("r2.json.tmp"), b"{\"id\":").unwrap();
    // What a reshard left: the shards it replaced, and new ones staged by
    // one cut short (the node runs on the old shards).
    for left in ["before-reshard", "resharding"] {
        let shard = data.join(left).join("shard-0");
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::write(shard.join("data.mdb"), b"not copied").unwrap();
    }
    let dead_ids: HashSet<String> = (0..5)
        .map(|i| {
            engine
                .commit(NewHook::new("d", format!("dead-{i}")))
                .unwrap()
        })
        .collect();
    wait_until("5 dead letters", Duration::from_secs(10), || {
        engine.count_dead(&DeadFilter::default()).unwrap() == 5
    });

    let acked = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let (before, backup) = std::thread::scope(|s| {
        s.spawn(|| {
            for n in 0.. {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let id = engine
                    .commit(NewHook::new("s", format!("hook-{n}")))
                    .unwrap();
                acked.lock().push(id);
            }
        });
        wait_until("100 hooks committed", Duration::from_secs(10), || {
            acked.lock().len() >= 100
        });
        let before = acked.lock().clone();
        let backup = engine.backup(&to).unwrap();
        stop.store(true, Ordering::Release);
        (before, backup)
    });
    let after = engine.commit(NewHook::new("s", "after")).unwrap();
    engine.shutdown();
    drop(engine);

    assert_eq!(backup.shard_bytes.len(), 2);
    assert!(backup.shard_bytes.iter().all(|b| *b > 0), "{backup:?}");
    assert_eq!((backup.files, backup.file_bytes), (1, 11), "r1.json only");
    assert_eq!(
        std::fs::read(to.join("replays/r1.json")).unwrap(),
        b"{\"id\":\"r1\"}"
    );
    assert!(!to.join("replays/r2.json.tmp").exists());
    assert!(!to.join("before-reshard").exists() && !to.join("resharding").exists());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(to.join(goad::BACKUP_MANIFEST)).unwrap()).unwrap();
    assert_eq!(manifest["shards"], 2);
    assert_eq!(manifest["started_at_ms"], backup.started_at_ms);
    for k in 0..2 {
        use std::os::unix::fs::PermissionsExt;
        let copy = to.join(format!("shard-{k}")).join("data.mdb");
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the store copy its owner's only, as the store"
        );
    }
    assert!(!to.join(BACKUP_UNFINISHED).exists(), "marked finished");
    for (k, shard) in verify_data_dir(&to, 2).unwrap().iter().enumerate() {
        assert_eq!(shard.problems, Vec::<String>::new(), "shard {k}");
    }
    // As a backup cut short is left: marked unfinished (its first file).
    std::fs::write(to.join(BACKUP_UNFINISHED), b"").unwrap();
    let cut_short = format!(
        "{} is a backup cut short (it holds BACKUP_UNFINISHED: the node stopped or failed while writing it), so a store or a file may be missing or cut short; take the backup again",
        to.display()
    );
    let err = verify_data_dir(&to, 2).expect_err("refused");
    assert_eq!(err.to_string(), cut_short);
    let err = Engine::open(two_sources(
        &to,
        "http://127.0.0.1:9/",
        "http://127.0.0.1:9/",
    ));
    assert_eq!(err.err().expect("refused").to_string(), cut_short);
    std::fs::remove_file(to.join(BACKUP_UNFINISHED)).unwrap();

    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let restored =
        Engine::open(two_sources(&to, &receiver.url("/s"), &refusing.url("/d"))).unwrap();
    assert!(restored.hook_status(&after).unwrap().is_none());
    wait_until(
        "every hook acknowledged before the backup delivered",
        Duration::from_secs(30),
        || {
            let delivered = delivered_ids(&receiver);
            before.iter().all(|id| delivered.contains(id))
        },
    );
    let listed = restored
        .dead_letters(&DeadFilter::default(), None, 100)
        .unwrap();
    let listed: HashSet<String> = listed.into_iter().map(|d| d.hook_id).collect();
    assert_eq!(listed, dead_ids);
}

/// A backup goes to a new or empty directory outside the data directory
/// that the node can make or write in; anywhere else it is refused, saying
/// why (a backup cut short by name), and nothing is written.
#[test]
fn a_backup_into_a_directory_with_files_or_inside_the_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let url = receiver.url("/");
    let engine = Engine::open(two_sources(&data, &url, &url)).unwrap();
    let refusal = |to: &Path| match engine.backup(to) {
        Err(e @ BackupError::Target { .. }) => e.to_string(),
        other => panic!("{} was not refused: {other:?}", to.display()),
    };

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("old"), b"x").unwrap();
    assert_eq!(
        refusal(&full),
        format!(
            "cannot back up to {}: it holds files: a backup goes to a new or empty directory",
            full.display()
        )
    );
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);

    let cut_short = dir.path().join("cut-short");
    std::fs::create_dir(&cut_short).unwrap();
    std::fs::write(cut_short.join(goad::store::BACKUP_UNFINISHED), b"").unwrap();
    assert_eq!(
        refusal(&cut_short),
        format!(
            "cannot back up to {}: it holds a backup cut short (its BACKUP_UNFINISHED \
             file says so): delete it first, or back up to another directory",
            cut_short.display()
        )
    );

    let inside = data.join("backups/today");
    assert_eq!(
        refusal(&inside),
        format!(
            "cannot back up to {}: it is inside the data directory",
            inside.display()
        )
    );
    assert!(!data.join("backups").exists());

    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        refusal(&file),
        format!("cannot back up to {}: it is a file", file.display())
    );
    let under_file = file.join("backup");
    assert_eq!(
        refusal(&under_file),
        format!(
            "cannot back up to {}: a part of its path is a file, not a directory",
            under_file.display()
        )
    );

    // A place the node cannot make a directory in (a pseudo file system
    // here; a path its user may not write elsewhere) says what the system
    // said.
    let unmakeable = Path::new("/proc/goad-backup");
    let why = std::fs::create_dir(unmakeable).unwrap_err();
    match engine.backup(unmakeable) {
        Err(e @ BackupError::Unwritable { .. }) => assert_eq!(
            e.to_string(),
            format!(
                "cannot back up to /proc/goad-backup: the node cannot make it or write in it: {why}"
            )
        ),
        other => panic!("/proc/goad-backup was not refused: {other:?}"),
    }

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let made = engine.backup(&empty).unwrap();
    assert_eq!(made.shard_bytes.len(), 2);
    assert!(empty.join(goad::BACKUP_MANIFEST).exists());
}
