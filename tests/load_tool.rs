//! `goad-load` (tools/load.rs) as a child process, driving a `goad serve`
//! child of its own: every hook it counts acknowledged is delivered, and
//! it reports the node's peak memory. A short run: the tool's figures are
//! for the README, not for a test to judge.

mod common;

use std::process::Command;
use std::time::Duration;

/// The first line of `out` that starts with `prefix`.
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
}

/// What follows `word` in `line`, up to the next space, parsed.
fn number_after<T: std::str::FromStr>(line: &str, word: &str) -> T {
    let after = line
        .split(word)
        .nth(1)
        .unwrap_or_else(|| panic!("no {word:?} in {line:?}"));
    let text = after.split_whitespace().next().unwrap_or_default();
    text.parse()
        .unwrap_or_else(|_| panic!("{text:?} after {word:?} in {line:?}"))
}

/// A run of `goad-load` with `args` driving this build's `goad`, which
/// succeeds: what it printed.
fn load_run(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_goad-load"))
        .args(["--goad", env!("CARGO_BIN_EXE_goad")])
        .args(args)
        .output()
        .expect("goad-load runs");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Bodies larger than a head take their room in the node's read budget,
/// here the least it may be (one largest request), so the connections
/// take turns: the run still acknowledges hooks, fails no request and
/// delivers every hook it acknowledged.
#[test]
fn every_hook_the_load_tool_acknowledges_is_delivered_and_the_nodes_memory_is_reported() {
    let out = load_run(&[
        "--connections",
        "8",
        "--seconds",
        "2",
        "--tenants",
        "2",
        "--body-bytes",
        "100000",
        "--max-buffered-bytes",
        "1064960",
    ]);
    let ingest = line(&out, "ingest:");
    let acknowledged: f64 = number_after(ingest, "ingest:");
    assert!(acknowledged > 0.0, "{ingest}");
    assert!(ingest.ends_with("; 0 failed requests"), "{ingest}");
    let delivery = line(&out, "delivery:");
    assert_eq!(
        number_after::<f64>(delivery, "delivery:"),
        acknowledged,
        "{out}"
    );
    if cfg!(target_os = "linux") {
        let memory = line(&out, "node memory:");
        assert!(number_after::<f64>(memory, "RssAnon") > 0.0, "{memory}");
    }
}

/// With `--sinks 3` each source fans a hook out to three sinks: the
/// receiver counts three deliveries for every hook acknowledged.
#[test]
fn a_hook_of_a_source_with_three_sinks_is_delivered_three_times() {
    let out = load_run(&["--connections", "4", "--seconds", "1", "--sinks", "3"]);
    assert!(
        line(&out, "goad-load:").contains(", 3 sinks a source,"),
        "{out}"
    );
    let acknowledged: f64 = number_after(line(&out, "ingest:"), "ingest:");
    assert!(acknowledged > 0.0, "{out}");
    let delivered: f64 = number_after(line(&out, "delivery:"), "delivery:");
    assert_eq!(delivered, 3.0 * acknowledged, "{out}");
}

/// Ctrl-C (SIGINT) while the tool posts for ten minutes ends the run
/// early: it reports what it measured, stops its node (whose address then
/// refuses connections) and exits 0.
#[test]
fn an_interrupted_run_reports_and_stops_its_node() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_goad-load"))
        .args(["--goad", env!("CARGO_BIN_EXE_goad")])
        .args(["--connections", "2", "--seconds", "600"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("goad-load runs");
    let lines = common::lines_of(child.stdout.take().unwrap());
    let first = lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the tool's first line");
    let addr: std::net::SocketAddr = number_after(&first, "node at ");
    // SAFETY: kill(2) with the pid of a child this test spawned and has
    // not waited for.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let mut status = None;
    common::wait_until("goad-load's exit", Duration::from_secs(60), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    // Its lines until its pipe closes, with a bound: a node the tool left
    // running would hold the pipe open.
    let mut rest = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(10)) {
        rest.push(line);
    }
    let status = status.expect("exited");
    assert!(status.success(), "{status:?}: {rest:?}");
    assert_eq!(
        rest.first().map(String::as_str),
        Some("interrupted: what was measured until then"),
        "{rest:?}"
    );
    assert!(rest[1].starts_with("ingest: "), "{rest:?}");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "the node at {addr} stopped"
    );
}
