//! `goad serve` as a real child process: stopped with SIGTERM or killed
//! with SIGKILL under ingest load and restarted, reloading its config on
//! SIGHUP, its data directory (in use, verified, backed up), a full disk
//! and its open-files limit, the cores its shards run on, what it takes
//! from its environment, what it logs, and what it tells systemd.

#[path = "../common/mod.rs"]
mod common;

mod crashes;
mod data_dir;
mod environment;
mod limits;
mod logging;
mod pinning;
mod reloads;
mod stalls;
mod systemd;

use common::http::{get, Client};
use common::{lines_of, wait_until};
use goad::demo::receiver::{Receiver, Reply};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
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
        self.lines_up_to(msg).pop().expect("the line logging msg")
    }

    /// The lines the node logs up to the next with message `msg`, that one
    /// last.
    fn lines_up_to(&self, msg: &str) -> Vec<String> {
        let wanted = format!("msg=\"{msg}\"");
        let mut lines = Vec::new();
        loop {
            match self.log.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => {
                    let found = line.contains(&wanted);
                    lines.push(line);
                    if found {
                        return lines;
                    }
                }
                Err(e) => panic!("the node did not log {wanted}: {e}"),
            }
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    serve_configured(dir, sink_url, "", setup)
}

/// `serve_with`, the config's top-level keys `top` (lines) first.
fn serve_configured(
    dir: &Path,
    sink_url: &str,
    top: &str,
    setup: impl FnOnce(&mut Command),
) -> ServeProcess {
    let config = format!(
        "{top}data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nshards = 2\n[dispatch]\nbreaker_open_ms = 50\nbreaker_max_open_ms = 100\n[retry]\nbase_ms = 10\nmax_ms = 20\njitter = false\n[[sources]]\nid = \"a\"\ntenant = \"t1\"\n[[sources.sinks]]\ntype = \"http\"\nurl = {sink_url:?}\n[[sources]]\nid = \"b\"\ntenant = \"t2\"\n[[sources.sinks]]\ntype = \"http\"\nurl = {sink_url:?}\n",
        dir.join("data")
    );
    serve_config(dir, &config, setup)
}

/// Starts `goad serve` on `config` (written to `<dir>/goad.toml`; its
/// `listen` must be `127.0.0.1:0`), `setup` applied to the command
/// first, and waits until it is ready.
fn serve_config(dir: &Path, config: &str, setup: impl FnOnce(&mut Command)) -> ServeProcess {
    let path = dir.join("goad.toml");
    std::fs::write(&path, config).unwrap();
    let config = path;
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // No service manager but the one a test stands in for.
        .env_remove("NOTIFY_SOCKET");
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

/// `command`, run as `nobody` when the test runs as root, whom
/// permissions do not stop: as a service's own user.
fn unprivileged(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid(2) reads the process's credentials, nothing else.
    if unsafe { libc::geteuid() } != 0 {
        return command;
    }
    // SAFETY: the child only calls async-signal-safe functions.
    unsafe {
        command.pre_exec(|| {
            let nobody = 65534;
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(nobody) != 0
                || libc::setuid(nobody) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
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

/// A receiver that fails every third request (503): rows are mid-retry.
fn flaky_receiver() -> Receiver {
    let n = std::sync::atomic::AtomicU64::new(0);
    Receiver::start(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
            Reply::status(503)
        } else {
            Reply::status(200)
        }
    })
    .unwrap()
}

/// SIGKILL, and the child reaped.
fn kill(node: &mut ServeProcess) {
    node.child.kill().unwrap();
    node.child.wait().unwrap();
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

/// A node started again on `dir` delivers to `receiver` every hook of
/// `acked` (said on stderr as `what`'s outcome).
fn all_delivered_after_a_restart(
    dir: &Path,
    receiver: &Receiver,
    acked: &Mutex<HashSet<String>>,
    what: &str,
) {
    let acked = acked.lock().unwrap().clone();
    let node = serve(dir, &receiver.url("/hooks"));
    wait_all_delivered(&node, receiver, &acked, Duration::from_secs(120));
    eprintln!(
        "{what}: {} acknowledged, all delivered; {} requests at the receiver",
        acked.len(),
        receiver.count()
    );
}

/// A soak's count: the number in environment variable `var`, else
/// `default` (as CI runs it).
fn soak_count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// `goad verify` finds the store `serve` left in `dir` sound.
fn assert_verified(dir: &Path, after: &str) {
    let verified = goad_verify(dir);
    let report = String::from_utf8_lossy(&verified.stdout);
    assert_eq!(verified.status.code(), Some(0), "after {after}: {report}");
}

/// `goad verify` of the node `serve` ran in `dir`.
fn goad_verify(dir: &Path) -> std::process::Output {
    goad_verify_command(dir).output().unwrap()
}

/// `goad verify` of `data_dir` (a backup, say) with the config of the
/// node `serve` ran in `dir`.
fn goad_verify_copy(dir: &Path, data_dir: &Path) -> std::process::Output {
    let mut command = goad_verify_command(dir);
    command.arg("--data-dir").arg(data_dir).output().unwrap()
}

fn goad_verify_command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command
        .args(["verify", "--config"])
        .arg(dir.join("goad.toml"));
    command
}

/// `goad backup` of `node` to `to`, its output piped.
fn goad_backup(node: &ServeProcess, to: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command.args(["backup", "--node", &format!("http://{}", node.addr), "--to"]);
    command
        .arg(to)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}
