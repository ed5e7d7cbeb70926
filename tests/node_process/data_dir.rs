//! A node's data directory: refused to a second node or to a user who
//! cannot write it, checked by `goad verify`, and copied by `goad backup`
//! while the node runs.

use super::*;
use common::http::call;

/// A second `goad serve` on a data directory in use exits with an error
/// naming the directory and the first node's pid, said once, and the first
/// node goes on serving: two engines on one directory would overwrite each
/// other's hooks.
#[test]
fn a_second_node_on_a_data_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let first = serve(dir.path(), &receiver.url("/hooks"));
    let mut second = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["serve", "--config"])
        .arg(dir.path().join("goad.toml"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut exit = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while exit.is_none() && std::time::Instant::now() < deadline {
        exit = second.try_wait().unwrap();
        std::thread::park_timeout(Duration::from_millis(5));
    }
    let Some(exit) = exit else {
        second.kill().unwrap();
        second.wait().unwrap();
        panic!("the second node was still running after 30 s");
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(exit.code(), Some(1), "{stderr}");
    let expected = format!(
        "{} is in use by another goad process (pid {}): one engine at a time may open a data directory",
        dir.path().join("data").display(),
        first.child.id()
    );
    assert_eq!(stderr.matches(&expected).count(), 1, "{stderr}");
    let mut client = Client::connect(first.addr);
    let reply = client.request("POST", "/v1/sources/a/hooks", &[], b"still served");
    assert_eq!(reply.status, 202, "{}", reply.text());
    assert!(receiver.wait_for(1, Duration::from_secs(30)), "delivered");
    assert_eq!(receiver.received()[0].body, b"still served");
}

/// `goad serve` with a `data_dir` that is a file exits 2 at once saying
/// so, before it listens: the system's own word, "File exists", named no
/// culprit, and the node listened before its engine stopped it.
#[test]
fn a_node_whose_data_dir_is_a_file_says_so_and_does_not_listen() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, b"not a directory").unwrap();
    let config = dir.path().join("goad.toml");
    std::fs::write(
        &config,
        format!("listen = \"127.0.0.1:0\"\ndata_dir = {file:?}\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let expected = format!(
        "level=error msg=\"cannot start the node\" error=\"cannot open the engine: store: {}: \
         data_dir is a file, not a directory\"",
        file.display()
    );
    assert_eq!(stderr.matches(&expected).count(), 1, "{stderr}");
    assert!(!stderr.contains("node listening"), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
}

/// `goad serve` run by a user who cannot write its data directory (one
/// root made, say), or cannot make it, exits 2 at once saying so and what
/// to mend, before it listens; `goad check --environment` refuses it the
/// same way. (The node used to listen, then stop when its engine's open
/// met the system's "Permission denied".) Run as `nobody` when the test
/// runs as root, whom permissions do not stop.
#[test]
fn a_node_whose_user_cannot_write_its_data_dir_says_so_and_does_not_listen() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    mode(dir.path(), 0o755);
    let made = dir.path().join("made");
    std::fs::create_dir(&made).unwrap();
    mode(&made, 0o755);
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    mode(&locked, 0o555);
    let not_written = "this process cannot write it (Permission denied (os error 13)): a data \
                       directory must be writable by the user goad runs as, on a file system \
                       mounted read-write (one another user made is given to this one with chown \
                       -R)";
    let not_made = format!(
        "it does not exist, and this process cannot make it in {locked:?} (Permission denied \
         (os error 13))"
    );
    for (data_dir, why) in [
        (made, not_written.to_string()),
        (locked.join("data"), not_made),
    ] {
        let config = dir.path().join("goad.toml");
        std::fs::write(
            &config,
            format!("listen = \"127.0.0.1:0\"\ndata_dir = {data_dir:?}\n"),
        )
        .unwrap();
        mode(&config, 0o644);
        let run = |args: &[&str]| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
            command.args(args).arg(&config);
            unprivileged(&mut command).output().unwrap()
        };
        let refused = format!(
            "cannot open the engine: store: {}: {why}",
            data_dir.display()
        );
        let out = run(&["serve", "--config"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let logged = format!("msg=\"cannot start the node\" error={refused:?}");
        assert_eq!(stderr.matches(&logged).count(), 1, "{stderr}");
        assert!(!stderr.contains("node listening"), "{stderr}");
        let out = run(&["check", "--environment", "--config"]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{refused}\n"));
    }
}

/// `goad verify` refuses a data directory a node runs on, and finds the
/// directory sound once the node stopped (SIGTERM) with hooks in it.
#[test]
fn goad_verify_checks_a_stopped_nodes_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(503)).unwrap();
    let mut node = serve(dir.path(), &receiver.url("/hooks"));
    let mut client = Client::connect(node.addr);
    for _ in 0..5 {
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], b"kept");
        assert_eq!(reply.status, 202, "{}", reply.text());
    }
    let verify = || goad_verify(dir.path());
    let running = verify();
    assert_eq!(running.status.code(), Some(2));
    let expected = format!(
        "goad verify: {} is in use by another goad process (pid {})",
        dir.path().join("data").display(),
        node.child.id()
    );
    assert!(
        String::from_utf8_lossy(&running.stderr).starts_with(&expected),
        "{}",
        String::from_utf8_lossy(&running.stderr)
    );
    // SAFETY: kill(2) on our own child's pid has no memory effects.
    let sent = unsafe { libc::kill(node.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    assert!(node.child.wait().unwrap().success());
    let stopped = verify();
    let report = String::from_utf8_lossy(&stopped.stdout);
    assert_eq!(stopped.status.code(), Some(0), "{report}");
    let verdicts: Vec<&str> = report
        .lines()
        .map(|l| l.rsplit(": ").next().unwrap())
        .collect();
    assert_eq!(verdicts, vec!["sound", "sound"], "{report}");
    // "shard k: H hooks; rows D due, F in flight, W waiting in lanes, X dead: sound"
    let numbers: Vec<u64> = report
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let per_shard: Vec<&[u64]> = numbers.chunks(6).collect();
    let hooks: u64 = per_shard.iter().map(|s| s[1]).sum();
    let rows: u64 = per_shard.iter().map(|s| s[2..].iter().sum::<u64>()).sum();
    assert_eq!((hooks, rows), (5, 5), "{report}");
}

/// `goad backup` writes a running node's data directory to another while
/// eight clients ingest: it exits 0 with the node's answer, `goad verify
/// --data-dir` finds the backup sound, and a node started on it delivers
/// every hook the first node acknowledged before the backup began (its
/// receiver hung on them).
#[test]
fn goad_backup_copies_a_running_node_and_a_node_on_the_copy_delivers_its_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let hanging = Receiver::start(|_| Reply::hang()).unwrap();
    let mut node = serve(dir.path(), &hanging.url("/hooks"));
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(node.addr, acked.clone(), stop.clone());
    wait_until("500 hooks acknowledged", Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 500
    });
    let restored_dir = tempfile::tempdir().unwrap();
    let to = restored_dir.path().join("data");
    let before = acked.lock().unwrap().clone();
    let backup = goad_backup(&node, &to).output().unwrap();
    let answer = String::from_utf8_lossy(&backup.stdout);
    assert_eq!(
        backup.status.code(),
        Some(0),
        "{answer}{}",
        String::from_utf8_lossy(&backup.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["to"], to.display().to_string());
    assert_eq!(answer["shards"].as_array().unwrap().len(), 2);
    assert!(
        acked.lock().unwrap().len() > before.len(),
        "ingest went on during the backup"
    );
    node.logged("backup written");
    stop.store(true, Ordering::Release);
    kill(&mut node);
    for c in clients {
        c.join().unwrap();
    }

    let verify = goad_verify_copy(dir.path(), &to);
    let report = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(0), "{report}");
    assert_eq!(report.matches(": sound\n").count(), 2, "{report}");

    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let restored = serve(restored_dir.path(), &receiver.url("/hooks"));
    wait_all_delivered(&restored, &receiver, &before, Duration::from_secs(60));
    drop(restored);
}

/// A node killed with SIGKILL while `goad backup` copies its stores, under
/// ingest load, leaves its own data directory sound, and started again it
/// delivers every hook it acknowledged; the copy cut short is refused as a
/// data directory (`goad verify`) and as a backup's target (saying to
/// delete it), and a backup to a new directory is whole.
#[test]
fn a_node_killed_during_a_backup_keeps_its_hooks_and_the_copy_cut_short_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hanging = Receiver::start(|_| Reply::hang()).unwrap();
    let mut node = serve(dir.path(), &hanging.url("/hooks"));
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let backups = tempfile::tempdir().unwrap();
    let cut_short = backups.path().join("cut-short");
    ingest_then_stop(&mut node, &acked, 30_000, |node| {
        let copying = goad_backup(node, &cut_short).spawn().unwrap();
        wait_until("the backup copying", Duration::from_secs(30), || {
            cut_short.join("shard-0").exists()
        });
        kill(node);
        let answer = copying.wait_with_output().unwrap();
        assert_ne!(answer.status.code(), Some(0), "{answer:?}");
    });
    assert!(
        !cut_short.join(goad::BACKUP_MANIFEST).exists(),
        "the node was killed before the backup ended"
    );
    assert_verified(dir.path(), "a kill during a backup");
    let verify_copy = goad_verify_copy(dir.path(), &cut_short);
    let refusal = String::from_utf8_lossy(&verify_copy.stderr);
    assert_ne!(verify_copy.status.code(), Some(0), "{refusal}");
    assert!(refusal.contains("is a backup cut short"), "{refusal}");

    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let restarted = serve(dir.path(), &receiver.url("/hooks"));
    let again = goad_backup(&restarted, &cut_short).output().unwrap();
    let refusal = String::from_utf8_lossy(&again.stderr);
    assert_ne!(again.status.code(), Some(0), "{refusal}");
    assert!(
        refusal.contains("it holds a backup cut short") && refusal.contains("delete it first"),
        "{refusal}"
    );
    let whole = backups.path().join("whole");
    let made = goad_backup(&restarted, &whole).output().unwrap();
    assert_eq!(made.status.code(), Some(0), "{made:?}");
    assert!(whole.join(goad::BACKUP_MANIFEST).exists());
    let acked = acked.lock().unwrap().clone();
    wait_all_delivered(&restarted, &receiver, &acked, Duration::from_secs(120));
}

/// A node whose replays directory cannot be read (a file stands in its
/// place) says so as it starts, and answers a new replay 503
/// `store_unavailable` naming the directory, creating none; restarted on a
/// directory holding a replay file that does not parse, it skips that file
/// saying so, and a new replay is kept.
#[test]
fn a_replays_directory_that_cannot_be_read_or_written_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let replays = dir.path().join("data").join("replays");
    std::fs::create_dir_all(replays.parent().unwrap()).unwrap();
    std::fs::write(&replays, b"not a directory").unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut node = serve(dir.path(), &receiver.url("/hooks"));
    let unread = node.started.iter().find(|l| {
        l.contains(
            "msg=\"cannot read the replays directory: the replays it holds are not resumed\"",
        )
    });
    let unread = unread.expect("the unreadable directory logged as the node started");
    let expected = format!(
        "level=error msg=\"cannot read the replays directory: the replays it holds are not resumed\" path={} error=\"Not a directory (os error 20)\"",
        replays.display()
    );
    assert!(unread.ends_with(&expected), "{unread}");
    let refused = call(node.addr, "POST", "/v1/replays", &[], b"{}");
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "store_unavailable"),
        "{}",
        refused.text()
    );
    let expected = format!(
        "cannot write the replay's file in {}: File exists (os error 17)",
        replays.display()
    );
    assert_eq!(refused.json()["message"], expected.as_str());
    assert_eq!(
        get(node.addr, "/v1/replays").json()["replays"],
        serde_json::json!([])
    );
    kill(&mut node);

    std::fs::remove_file(&replays).unwrap();
    std::fs::create_dir(&replays).unwrap();
    std::fs::write(replays.join("broken.json"), b"{\"id\":").unwrap();
    let node = serve(dir.path(), &receiver.url("/hooks"));
    let skipped = node
        .started
        .iter()
        .find(|l| l.contains("msg=\"skipping an unreadable replay file\""));
    let skipped = skipped.expect("the broken file logged as the node started");
    let expected = format!("path={} error=", replays.join("broken.json").display());
    assert!(skipped.contains(&expected), "{skipped}");
    let created = call(node.addr, "POST", "/v1/replays", &[], b"{}");
    assert_eq!(created.status, 202, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_string();
    assert!(replays.join(format!("{id}.json")).is_file());
}
