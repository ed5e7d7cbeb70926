//! `goad-load` (tools/load.rs) as a child process, driving a `goad serve`
//! child of its own: every hook it counts acknowledged is delivered, and
//! it reports the node's peak memory. A short run: the tool's figures are
//! for the README, not for a test to judge.

use std::process::Command;

/// The first line of `out` that starts with `prefix`.
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
}

/// The number after `word` in `line`.
fn number_after(line: &str, word: &str) -> f64 {
    let after = line
        .split(word)
        .nth(1)
        .unwrap_or_else(|| panic!("no {word:?} in {line:?}"));
    let number = after.split_whitespace().next().unwrap_or_default();
    number
        .parse()
        .unwrap_or_else(|_| panic!("{number:?} after {word:?} in {line:?}"))
}

/// Bodies larger than a head take their room in the node's read budget,
/// here the least it may be (one largest request), so the connections
/// take turns: the run still acknowledges hooks, fails no request and
/// delivers every hook it acknowledged.
#[test]
fn every_hook_the_load_tool_acknowledges_is_delivered_and_the_nodes_memory_is_reported() {
    let output = Command::new(env!("CARGO_BIN_EXE_goad-load"))
        .args(["--goad", env!("CARGO_BIN_EXE_goad")])
        .args(["--connections", "8", "--seconds", "2", "--tenants", "2"])
        .args(["--body-bytes", "100000", "--max-buffered-bytes", "1064960"])
        .output()
        .expect("goad-load runs");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ingest = line(&out, "ingest:");
    let acknowledged = number_after(ingest, "ingest:");
    assert!(acknowledged > 0.0, "{ingest}");
    assert!(ingest.ends_with("; 0 failed requests"), "{ingest}");
    let delivery = line(&out, "delivery:");
    assert_eq!(number_after(delivery, "delivery:"), acknowledged, "{out}");
    if cfg!(target_os = "linux") {
        let memory = line(&out, "node memory:");
        assert!(number_after(memory, "RssAnon") > 0.0, "{memory}");
    }
}
