//! `goad serve` as a real child process under ingest load: stopped with
//! SIGTERM (graceful: exit 0) or killed with SIGKILL, then restarted on the
//! same data directory. Either way every hook the node answered 202 for
//! reaches the sink.

mod common;

use common::http::{call, get, raw_request, Client};
use common::{lines_of, wait_until};
use goad::demo::receiver::{Receiver, Reply};
use std::collections::HashSet;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct ServeProcess {
    child: Child,
    addr: SocketAddr,
    /// The lines the node logged until it got ready.
    started: Vec<String>,
    /// The lines the node logs after it got ready.
    log: crossbeam_channel::Receiver<String>,
}

impl ServeProcess {
    /// Sends the node `signal`.
    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        let sent = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(sent, 0, "signal {signal} sent");
    }

    /// The next line the node logs with message `msg`.
    fn logged(&self, msg: &str) -> String {
        let wanted = format!("msg=\"{msg}\"");
        loop {
            match self.log.recv_timeout(Duration::from_secs(30)) {
                Ok(line) if line.contains(&wanted) => return line,
                Ok(_) => {}
                Err(e) => panic!("the node did not log {wanted}: {e}"),
            }
        }
    }
}

/// Starts `goad serve --config <dir>/goad.toml` and waits until it is ready.
/// Breakers stay on but open for 50–100 ms: the flaky receiver can fail a
/// key five times running, and a default 30 s park would outlast the test.
fn serve(dir: &Path, sink_url: &str) -> ServeProcess {
    serve_with(dir, sink_url, |_| {})
}

/// `serve`, with `setup` applied to the command first.
fn serve_with(dir: &Path, sink_url: &str, setup: impl FnOnce(&mut Command)) -> ServeProcess {
    let config = dir.join("goad.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nshards = 2\n[dispatch]\nbreaker_open_ms = 50\nbreaker_max_open_ms = 100\n[retry]\nbase_ms = 10\nmax_ms = 20\njitter = false\n[[sources]]\nid = \"a\"\ntenant = \"t1\"\n[[sources.sinks]]\ntype = \"http\"\nurl = {sink_url:?}\n[[sources]]\nid = \"b\"\ntenant = \"t2\"\n[[sources.sinks]]\ntype = \"http\"\nurl = {sink_url:?}\n",
            dir.join("data")
        ),
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    setup(&mut command);
    let mut child = command.spawn().unwrap();
    let rx = lines_of(child.stderr.take().unwrap());
    let mut addr = None;
    let mut started = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) {
        if let Some(rest) = line.split("msg=\"node listening\" addr=").nth(1) {
            addr = Some(rest.split_whitespace().next().unwrap().parse().unwrap());
        }
        let ready = line.contains("msg=\"engine ready\"");
        started.push(line);
        if ready {
            break;
        }
    }
    ServeProcess {
        child,
        addr: addr.expect("the node logged its address and got ready"),
        started,
        log: rx,
    }
}

/// Eight keep-alive clients ingest until the node stops answering; returns
/// the ids answered 202.
fn load(
    addr: SocketAddr,
    acked: Arc<Mutex<HashSet<String>>>,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..8)
        .map(|t| {
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let Some(mut client) = Client::try_connect(addr) else {
                    return;
                };
                let source = if t % 2 == 0 { "a" } else { "b" };
                let path = format!("/v1/sources/{source}/hooks");
                while !stop.load(Ordering::Acquire) {
                    let Some(reply) = client.try_request("POST", &path, &[], &[b'x'; 256]) else {
                        return;
                    };
                    if reply.status == 202 {
                        acked
                            .lock()
                            .unwrap()
                            .insert(reply.json()["id"].as_str().unwrap().to_string());
                    }
                    if reply.header("connection") == Some("close") {
                        return;
                    }
                }
            })
        })
        .collect()
}

/// Ingests into `node` with `load`'s clients until `acked` holds
/// `at_least` hooks, then stops the node with `stop` and the clients after it.
fn ingest_then_stop(
    node: &mut ServeProcess,
    acked: &Arc<Mutex<HashSet<String>>>,
    at_least: usize,
    stop: impl FnOnce(&mut ServeProcess),
) {
    let stopped = Arc::new(AtomicBool::new(false));
    let clients = load(node.addr, acked.clone(), stopped.clone());
    wait_until(
        &format!("{at_least} hooks acknowledged"),
        Duration::from_secs(60),
        || acked.lock().unwrap().len() >= at_least,
    );
    stop(node);
    stopped.store(true, Ordering::Release);
    for c in clients {
        c.join().unwrap();
    }
}

/// SIGKILL, and the child reaped.
fn kill(node: &mut ServeProcess) {
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}

fn flaky_receiver() -> Receiver {
    let n = AtomicU64::new(0);
    Receiver::start(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
            Reply::status(503)
        } else {
            Reply::status(200)
        }
    })
    .unwrap()
}

fn delivered_ids(receiver: &Receiver) -> HashSet<String> {
    receiver
        .received()
        .iter()
        .filter(|r| r.status == 200)
        .filter_map(|r| r.header("webhook-id").map(str::to_string))
        .collect()
}

/// Waits until `receiver` got every hook of `acked` (by `webhook-id`)
/// from `node`; past `within`, panics with where the node says the first
/// missing hooks are, its stats and what it logged.
fn wait_all_delivered(
    node: &ServeProcess,
    receiver: &Receiver,
    acked: &HashSet<String>,
    within: Duration,
) {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        // Counting first keeps the poll cheap: each acknowledged hook needs
        // at least one 200 before the ids are worth comparing.
        if receiver.ok_count() >= acked.len() as u64 {
            let delivered = delivered_ids(receiver);
            if acked.iter().all(|id| delivered.contains(id)) {
                return;
            }
        }
        std::thread::park_timeout(Duration::from_millis(5));
    }
    let delivered = delivered_ids(receiver);
    let missing: Vec<&String> = acked.iter().filter(|id| !delivered.contains(*id)).collect();
    let states: Vec<String> = missing
        .iter()
        .take(5)
        .map(|id| get(node.addr, &format!("/v1/hooks/{id}")).text())
        .collect();
    let log: Vec<String> = node.log.try_iter().collect();
    panic!(
        "{} of {} acknowledged hooks not delivered after {within:?}; the first: {states:#?}\nstats: {}\nlog: {log:#?}",
        missing.len(),
        acked.len(),
        get(node.addr, "/v1/stats").text()
    );
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

fn stop_under_load_then_restart(signal: Signal) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = flaky_receiver();
    let url = receiver.url("/hooks");
    let mut node = serve(dir.path(), &url);
    let acked = Arc::new(Mutex::new(HashSet::new()));
    ingest_then_stop(&mut node, &acked, 3_000, |node| {
        assert!(receiver.ok_count() > 0, "deliveries were under way");
        match signal {
            Signal::Kill => kill(node),
            Signal::Term => {
                node.signal(libc::SIGTERM);
                let exit = node.child.wait().unwrap();
                assert!(exit.success(), "a graceful stop exits 0, got {exit}");
            }
        }
    });
    let acked = acked.lock().unwrap().clone();
    let node = serve(dir.path(), &url);
    wait_all_delivered(&node, &receiver, &acked, Duration::from_secs(120));
    eprintln!(
        "{signal:?}: {} acknowledged, all delivered; {} requests at the receiver",
        acked.len(),
        receiver.count()
    );
    drop(node);
}

#[test]
fn every_acknowledged_hook_is_delivered_after_sigterm_and_a_restart() {
    stop_under_load_then_restart(Signal::Term);
}

#[test]
fn every_acknowledged_hook_is_delivered_after_sigkill_and_a_restart() {
    stop_under_load_then_restart(Signal::Kill);
}

/// A node killed again and again under ingest load, each time once 1,000
/// more hooks were acknowledged and restarted on the same directory, loses
/// none: after each kill `goad verify` finds the store sound, and the last
/// node delivers every hook any of them answered 202. `GOAD_KILLS` sets
/// the number of kills (3 by default, as CI runs it; more for a soak).
#[test]
fn a_node_killed_again_and_again_loses_no_acknowledged_hook() {
    let kills: usize = std::env::var("GOAD_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let receiver = flaky_receiver();
    let url = receiver.url("/hooks");
    let acked = Arc::new(Mutex::new(HashSet::new()));
    for kills_so_far in 1..=kills {
        let mut node = serve(dir.path(), &url);
        ingest_then_stop(&mut node, &acked, kills_so_far * 1_000, kill);
        let verified = goad_verify(dir.path());
        let report = String::from_utf8_lossy(&verified.stdout);
        assert_eq!(
            verified.status.code(),
            Some(0),
            "after kill {kills_so_far}: {report}"
        );
    }
    let acked = acked.lock().unwrap().clone();
    let node = serve(dir.path(), &url);
    wait_all_delivered(&node, &receiver, &acked, Duration::from_secs(120));
}

/// SIGHUP re-reads the config file, as `POST /v1/reload` does: a changed
/// live key is applied and logged; a file that does not validate is logged
/// with the error naming its key, and the node goes on serving on the
/// config it had.
#[test]
fn sighup_reloads_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut node = serve(dir.path(), &receiver.url("/hooks"));
    let path = dir.path().join("goad.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let with = |line: &str| config.replace("[dispatch]\n", &format!("[dispatch]\n{line}\n"));
    std::fs::write(&path, with("sink_concurrency = 3")).unwrap();
    node.signal(libc::SIGHUP);
    let line = node.logged("config reloaded");
    assert!(
        line.ends_with("applied=dispatch.sink_concurrency restart_required=\"\""),
        "{line}"
    );
    let reloads = |applied: u64, failed: u64, last_ok: u8| {
        let expected = format!(
            "goad_config_reloads_total{{result=\"applied\"}} {applied}\n\
             goad_config_reloads_total{{result=\"failed\"}} {failed}\n"
        );
        let last = format!("\ngoad_config_last_reload_successful {last_ok}\n");
        wait_until("the reloads counted", Duration::from_secs(10), || {
            let metrics = get(node.addr, "/metrics").text();
            metrics.contains(&expected) && metrics.contains(&last)
        });
    };
    reloads(1, 0, 1);
    std::fs::write(&path, with("sink_concurrency = 0")).unwrap();
    node.signal(libc::SIGHUP);
    let line = node.logged("config reload failed");
    assert!(line.contains("dispatch.sink_concurrency"), "{line}");
    reloads(1, 1, 0);
    let mut client = Client::connect(node.addr);
    let reply = client.request("POST", "/v1/sources/a/hooks", &[], b"after");
    assert_eq!(reply.status, 202, "still serving");
    wait_until("the hook delivered", Duration::from_secs(10), || {
        receiver.ok_count() == 1
    });
    node.signal(libc::SIGTERM);
    let exit = node.child.wait().unwrap();
    assert!(exit.success(), "a graceful stop exits 0, got {exit}");
}

/// Rows a sink's answers dead-letter are logged per sink key, at most a
/// line every 10 s with how many and the latest failure (the receiver's
/// answer quoted), not a line per row: three refused hooks add up to three
/// rows over the lines, all of source `a`'s one sink.
#[test]
fn rows_dead_lettered_by_a_sink_are_logged_per_key_with_its_latest_failure() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(400).with_body("unknown event\n")).unwrap();
    let node = serve(dir.path(), &receiver.url("/hooks"));
    let mut client = Client::connect(node.addr);
    for n in 0..3 {
        let reply = client.request(
            "POST",
            "/v1/sources/a/hooks",
            &[],
            format!("{n}").as_bytes(),
        );
        assert_eq!(reply.status, 202);
    }
    let (mut rows, mut lines) = (0, 0);
    while rows < 3 {
        let line = node.logged("rows dead-lettered by their sink's answers");
        lines += 1;
        let (fields, count) = line
            .split_once(" rows=")
            .unwrap_or_else(|| panic!("no count in {line}"));
        assert!(
            fields.ends_with("tenant=t1 source=a sink_index=0 sink_type=http"),
            "{line}"
        );
        let (count, rest) = count.split_once(' ').unwrap();
        rows += count.parse::<u64>().unwrap();
        assert_eq!(
            rest, "latest_failure=\"permanent: HTTP status 400: unknown event\"",
            "{line}"
        );
    }
    assert_eq!(rows, 3);
    // The first line comes at once; the rows refused within the next 10 s
    // share the second.
    assert!(lines <= 2, "{lines} lines for 3 rows");
}

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

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `goad verify` of the node `serve` ran in `dir`.
fn goad_verify(dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["verify", "--config"])
        .arg(dir.join("goad.toml"))
        .output()
        .unwrap()
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
    let backup = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["backup", "--node", &format!("http://{}", node.addr), "--to"])
        .arg(&to)
        .output()
        .unwrap();
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

    let verify = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["verify", "--config"])
        .arg(dir.path().join("goad.toml"))
        .arg("--data-dir")
        .arg(&to)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(0), "{report}");
    assert_eq!(report.matches(": sound\n").count(), 2, "{report}");

    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let restored = serve(restored_dir.path(), &receiver.url("/hooks"));
    wait_all_delivered(&restored, &receiver, &before, Duration::from_secs(60));
    drop(restored);
}

/// The file size limit of process `pid` (`RLIMIT_FSIZE`), in bytes.
fn limit_file_size(pid: libc::pid_t, bytes: libc::rlim_t) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit(2) reads `limit` and writes nothing back (null old).
    let set = unsafe { libc::prlimit(pid, libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// A full disk, made real with a file size limit on the node's process
/// (writes past it fail with EFBIG, as they would with ENOSPC): ingest is
/// refused with 503 `store_unavailable`, the node keeps serving (and
/// logs the failing store once, not once per refused batch), and once
/// there is room again it commits, says so, and every hook it
/// acknowledged, before and after, is delivered.
#[test]
fn a_full_disk_refuses_ingest_and_loses_no_acknowledged_hook() {
    const LIMIT_BYTES: libc::rlim_t = 512 * 1024;
    let dir = tempfile::tempdir().unwrap();
    // The sink fails until the disk is full, so committed rows pile up.
    let accepting = Arc::new(AtomicBool::new(false));
    let receiver = {
        let accepting = accepting.clone();
        Receiver::start(move |_| {
            Reply::status(if accepting.load(Ordering::SeqCst) {
                200
            } else {
                503
            })
        })
        .unwrap()
    };
    let node = serve_with(dir.path(), &receiver.url("/hooks"), |command| {
        // SAFETY: only async-signal-safe calls between fork and exec. With
        // SIGXFSZ ignored, a write past the limit fails instead of killing.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let pid = node.child.id() as libc::pid_t;
    limit_file_size(pid, LIMIT_BYTES);
    let mut client = Client::connect(node.addr);
    let mut acked = HashSet::new();
    let failing_since = Instant::now();
    let refused = loop {
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], &[b'x'; 1024]);
        match reply.status {
            202 => acked.insert(reply.json()["id"].as_str().unwrap().to_string()),
            _ => break reply,
        };
        assert!(acked.len() < 100_000, "the file size limit never bit");
    };
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "store_unavailable"),
        "{}",
        refused.text()
    );
    assert!(!acked.is_empty(), "some hooks fit before the disk filled");
    assert_eq!(get(node.addr, "/healthz").status, 200);
    // Each refused request is a batch that failed (a few fit in pages the
    // failed ones freed); the shard logs the first failure of the run and
    // then one line per 10 s at most.
    let mut refusals = 0;
    for _ in 0..2_000 {
        if refusals == 50 {
            break;
        }
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], &[b'x'; 1024]);
        if reply.status == 202 {
            acked.insert(reply.json()["id"].as_str().unwrap().to_string());
        } else {
            refusals += 1;
        }
    }
    assert_eq!(refusals, 50, "refused requests in 2,000");
    let failing_s = failing_since.elapsed().as_secs();
    let store_errors = node
        .log
        .try_iter()
        .filter(|line| line.contains("level=error msg=\"shard store"))
        .count() as u64;
    let shards = 2;
    assert!(
        (1..=shards * (2 + failing_s / 10)).contains(&store_errors),
        "{store_errors} store failures logged in {failing_s} s"
    );

    limit_file_size(pid, libc::RLIM_INFINITY);
    accepting.store(true, Ordering::SeqCst);
    wait_until("ingest accepted again", Duration::from_secs(30), || {
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], b"after");
        if reply.status == 202 {
            acked.insert(reply.json()["id"].as_str().unwrap().to_string());
        }
        reply.status == 202
    });
    node.logged("shard store writes succeed again");
    wait_all_delivered(&node, &receiver, &acked, Duration::from_secs(120));
    let metrics = get(node.addr, "/metrics").text();
    let failures: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("goad_store_failures_total"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(failures >= 1.0, "store failures counted: {failures}");
    eprintln!(
        "disk full after {} acknowledged hooks; {failures} store failures; all delivered",
        acked.len()
    );
    drop(node);
}

/// `serve`, the child's open-files limit (`RLIMIT_NOFILE`) set to `soft`
/// and `hard` before it starts.
fn serve_with_open_files(dir: &Path, soft: libc::rlim_t, hard: libc::rlim_t) -> ServeProcess {
    serve_with(dir, "http://127.0.0.1:9/unused", |command| {
        // SAFETY: setrlimit(2) is async-signal-safe; it only reads `limit`.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
    })
}

/// The descriptors `serve`'s config can take: 1,024 connections
/// (`http.max_connections`), 32 attempts (`dispatch.concurrency`), two
/// sinks' pools of 8 idle connections, and the node's own: 16, and 4 for
/// each of its 2 shards.
const NEEDED_FDS: u64 = 1_024 + 32 + 2 * 8 + 16 + 2 * 4;

/// The soft and hard open-files limits of process `pid`, from /proc.
fn open_files_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let mut numbers = line.split_whitespace().filter_map(|w| w.parse().ok());
    (numbers.next().unwrap(), numbers.next().unwrap())
}

/// A service manager's usual soft limit of 1,024 (here 256) under a higher
/// hard one: `goad serve` raises its soft limit to the hard one, and then
/// has what its config can take, so it warns of nothing.
#[test]
fn goad_serve_raises_its_open_files_limit_to_the_hard_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut ours = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) fills `ours`.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut ours) },
        0
    );
    let hard = ours.rlim_max.min(4_096);
    assert!(
        hard > NEEDED_FDS,
        "the test needs a hard limit above a node's needs"
    );
    let node = serve_with_open_files(dir.path(), 256, hard);
    assert_eq!(open_files_limits(node.child.id()), (hard, hard));
    let raised = node
        .started
        .iter()
        .find(|l| l.contains("open-files limit raised"));
    let raised = raised.expect("the raise logged");
    assert!(
        raised.ends_with(&format!(" from=256 to={hard}")),
        "{raised}"
    );
    let warned = node.started.iter().find(|l| l.contains("level=warn"));
    assert_eq!(warned, None, "no warning with the limit raised");
}

/// A node whose descriptors run out (a limit of 128, which the node warns
/// of as it starts) answers each connection it cannot take 503
/// `too_many_connections` at once, saying why, instead of leaving it
/// unanswered in the listener's backlog; once connections close, it
/// serves new ones.
#[test]
fn a_node_out_of_file_descriptors_refuses_connections_with_503_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve_with_open_files(dir.path(), 128, 128);
    let warned = node
        .started
        .iter()
        .find(|l| l.contains("the open-files limit is below"));
    let warned = warned.expect("the node warned of its limit as it started");
    let expected = format!("open_files_limit=128 needed={NEEDED_FDS}");
    assert!(warned.contains(&expected), "{warned}");
    // More connections than descriptors: those past the limit are refused.
    let held: Vec<std::net::TcpStream> = (0..150)
        .map(|_| std::net::TcpStream::connect(node.addr).unwrap())
        .collect();
    // Refused without a request (which, unread, could reset the answer).
    let refused = Client::connect(node.addr)
        .reply()
        .expect("an answer, not a connection left waiting");
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "too_many_connections"),
        "{}",
        refused.text()
    );
    let message = refused.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("the node is out of file descriptors"),
        "{message}"
    );
    let logged = node.logged("out of file descriptors: new connections are refused with 503 until some close (raise the open-files limit, or lower http.max_connections)");
    assert!(logged.contains("open_files_limit=128"), "{logged}");
    drop(held);
    let mut tries = 0;
    wait_until("a new connection served", Duration::from_secs(30), || {
        tries += 1;
        get(node.addr, "/healthz").status == 200
    });
    // Every connection made was taken or refused for want of descriptors:
    // the 150, the refused one, the tries and this scrape.
    let metrics = get(node.addr, "/metrics").text();
    let value = |series: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(series));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap()
    };
    let taken = value("goad_http_connections_total ");
    let refused = value("goad_http_connections_refused_total{reason=\"file_descriptors\"} ");
    assert!(refused >= 1.0, "{metrics}");
    assert_eq!(taken + refused, f64::from(150 + 1 + tries + 1), "{metrics}");
    assert_eq!(
        value("goad_http_connections_refused_total{reason=\"max_connections\"} "),
        0.0
    );
}

/// Replaces `link` with a symbolic link to `target` (atomically: a link
/// made beside it is renamed over it).
fn point(link: &Path, target: &Path) {
    let made = link.with_extension("new-link");
    std::os::unix::fs::symlink(target, &made).unwrap();
    std::fs::rename(&made, link).unwrap();
}

/// Two reloads at once (SIGHUP, then `POST /v1/reload`) with the config
/// file changed between their reads: they run one at a time, each reading
/// the file under the lock, so the node ends on the file as it is now. The
/// first reads the older config through a FIFO the test feeds late; had
/// the second not waited, it would have read the newer file and applied it
/// first, and the first the older one over it.
#[test]
fn reloads_run_one_at_a_time_so_the_node_ends_on_the_latest_file() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), "http://127.0.0.1:9/unused");
    let path = dir.path().join("goad.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let with = |line: &str| config.replace("[dispatch]\n", &format!("[dispatch]\n{line}\n"));
    let (older, newer) = (dir.path().join("older.fifo"), dir.path().join("newer.toml"));
    let fifo_path = std::ffi::CString::new(older.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) reads the NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo_path.as_ptr(), 0o600) }, 0);
    std::fs::write(&newer, with("sink_concurrency = 3")).unwrap();

    point(&path, &older);
    node.signal(libc::SIGHUP);
    // Its reader is there once a writer may open without blocking.
    let mut fifo = None;
    wait_until(
        "the SIGHUP's reload opens the file",
        Duration::from_secs(30),
        || {
            use std::os::unix::fs::OpenOptionsExt;
            let open = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&older);
            fifo = open.ok();
            fifo.is_some()
        },
    );
    point(&path, &newer);
    let mut second = Client::connect(node.addr);
    second.send(&raw_request("POST", "/v1/reload", &[], b""));
    assert!(
        !second.answers_within(Duration::from_secs(1)),
        "the second reload waits for the first"
    );
    let mut fifo = fifo.unwrap();
    fifo.write_all(with("sink_concurrency = 2").as_bytes())
        .unwrap();
    drop(fifo);
    let first = node.logged("config reloaded");
    assert!(
        first.contains("applied=dispatch.sink_concurrency"),
        "{first}"
    );
    let reply = second.reply().expect("the second reload's answer");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json()["applied"],
        serde_json::json!(["dispatch.sink_concurrency"])
    );
    // The node is on the file as it is: a reload now changes nothing.
    let again =
        Client::connect(node.addr).send_and_reply(&raw_request("POST", "/v1/reload", &[], b""));
    assert_eq!(
        again.json()["applied"],
        serde_json::json!([]),
        "{}",
        again.text()
    );
}

/// A relative `data_dir` is the working directory's (not the config
/// file's), and the node logs it as the absolute path it opened.
#[test]
fn the_node_logs_the_data_directory_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("elsewhere.toml");
    std::fs::write(
        &config,
        "data_dir = \"relative-data\"\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["serve", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = lines_of(child.stderr.take().unwrap());
    let ready = loop {
        let line = log
            .recv_timeout(Duration::from_secs(30))
            .expect("the node got ready");
        if line.contains("msg=\"engine ready\"") {
            break line;
        }
    };
    let expected = format!("data_dir={}", dir.path().join("relative-data").display());
    assert!(ready.contains(&expected), "{ready}");
    assert!(dir.path().join("relative-data").is_dir());
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The node's resident memory, from `/proc`.
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// A reload gives back what it allocated for a while: nine reloads of a
/// 4,000-sink config leave the node's resident memory within half of what
/// it was after the first (glibc's allocator kept the freed pages: ~130 MB
/// more a reload at 10,000 sinks, up to ~350 MB; here ~8 MB a reload,
/// 63 MB after the first and 130 MB after nine without giving it back).
/// Half, not a quarter: on a busy machine the reloads ran on more of the
/// node's threads, whose allocator arenas kept ~14 MB more (53 MB after
/// the first, 67 MB after five, in 2 of 13 runs beside other tests).
#[test]
fn reloads_of_a_large_config_give_back_the_memory_they_took() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), "http://127.0.0.1:9/x");
    let config = dir.path().join("goad.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    for i in 0..2_000 {
        let tenant = i % 100;
        text.push_str(&format!(
            "[[sources]]\nid = \"s{i}\"\ntenant = \"t{tenant}\"\n\
             [[sources.sinks]]\ntype = \"http\"\nurl = \"https://r{i}.example.com/a\"\n\
             [[sources.sinks]]\ntype = \"http\"\nurl = \"https://r{i}.example.com/b\"\n"
        ));
    }
    std::fs::write(&config, text).unwrap();
    let reload = || {
        let reply = call(node.addr, "POST", "/v1/reload", &[], b"");
        assert_eq!(reply.status, 200, "{}", reply.text());
    };
    reload();
    let after_first = resident_bytes(node.child.id());
    for _ in 0..8 {
        reload();
    }
    let after_nine = resident_bytes(node.child.id());
    assert!(
        after_nine <= after_first + after_first / 2,
        "resident {after_first} bytes after the first reload, {after_nine} after nine"
    );
}
