//! The `goad` command as a child process: `goad demo`, the README's first
//! command, output into a pipe whose reader went away, and an operator
//! command with no node to reach.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn demo() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command.args(["demo", "--hooks", "400", "--committers", "4"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// 400 hooks of 4 tenants make 500 rows (one tenant's source has two
/// sinks); the flaky receiver fails some attempts, which are retried, and
/// none is dead-lettered.
#[test]
fn the_demo_delivers_every_row_and_prints_its_summary() {
    let out = demo().output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = stdout.lines().find(|l| l.starts_with("delivered "));
    let summary = summary.expect("a summary line");
    assert!(summary.starts_with("delivered 500  retried "), "{summary}");
    assert!(summary.contains("  dead-lettered 0  in "), "{summary}");
    for tenant in ["acme", "globex", "initech", "umbrella"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(tenant)),
            "{tenant}: {stdout}"
        );
    }
}

/// A reader that stops after the first line (`goad demo | head -1`) does
/// not make the demo fail: it runs to its end and exits 0.
#[test]
fn a_reader_that_goes_away_does_not_fail_the_demo() {
    let mut child = demo().spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("goad demo: 400 hooks"), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Output into a pipe whose reader is gone before the command writes
/// (`goad keygen | true`) is no error: the command exits 0, not with a
/// panic at its first line.
#[test]
fn output_into_a_closed_pipe_is_no_error() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_goad"))
        .arg("keygen")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert_eq!(stderr, "");
}

/// An operator command with no node where it looks says so and how to
/// name the node, and exits 1.
#[test]
fn a_command_with_no_node_at_its_address_says_how_to_name_one() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let node = format!("http://127.0.0.1:{port}");
    let out = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["stats", "--node", &node])
        .env_remove("GOAD_NODE")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!("goad: {node}/v1/stats: ")),
        "{stderr}"
    );
    assert!(
        stderr.contains("(no node listens there: give its address with --node or GOAD_NODE)"),
        "{stderr}"
    );
}
