//! The `goad` command as a child process: `goad demo`, the README's first
//! command, output into a pipe whose reader went away, an operator
//! command with no node to reach, the log's formats, and `goad verify` of
//! an unsound store.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn demo() -> Command {
    demo_of("400")
}

/// `goad demo` of `hooks` hooks from 4 committers, its output piped.
fn demo_of(hooks: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command.args(["demo", "--hooks", hooks, "--committers", "4"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// 400 hooks of 4 tenants make 500 rows (one tenant's source has two
/// sinks); the flaky receiver fails some attempts, which are retried, and
/// none is dead-lettered. A shell that names a proxy (a developer's behind
/// one) changes nothing: the demo's receivers, on loopback, are reached
/// directly.
#[test]
fn the_demo_delivers_every_row_and_prints_its_summary() {
    let out = demo()
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .output()
        .unwrap();
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

/// A demo interrupted with Ctrl-C (SIGINT) while it commits stops its
/// committers, prints its summary and says what it had done, stops its
/// engine and removes its temporary data directory, and exits 1.
#[test]
fn an_interrupted_demo_summarises_and_removes_its_data_directory() {
    let mut child = demo_of("1000000").spawn().unwrap();
    let lines = common::lines_of(child.stdout.take().unwrap());
    let next_line = || {
        lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a line from the demo")
    };
    let data_dir = loop {
        let line = next_line();
        if let Some(rest) = line.strip_prefix("data directory ") {
            break PathBuf::from(rest.split(" (").next().unwrap());
        }
    };
    assert!(data_dir.is_dir(), "{}", data_dir.display());
    // Its first progress line: the engine is open and committing.
    next_line();
    // SAFETY: kill(2) with the pid of a child this test spawned and has
    // not waited for.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let mut rest = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(30)) {
        rest.push(line);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("goad demo: interrupted after "), "{stderr}");
    assert!(
        rest.iter().any(|l| l.starts_with("delivered ")),
        "a summary: {rest:?}"
    );
    assert!(!data_dir.exists(), "{} was removed", data_dir.display());
}

/// A demo that could not run (no committers, no hooks, bodies over the
/// engine's `max_body_bytes`) is refused at once, naming the option and
/// its bounds, instead of waiting two minutes for rows never committed.
#[test]
fn the_demo_refuses_options_it_cannot_run_with() {
    for (option, value, bounds) in [
        ("--committers", "0", "1..=1024"),
        ("--hooks", "0", "1..=1000000"),
        ("--body-bytes", "1048577", "0..=1048576"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_goad"))
            .args(["demo", option, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{option} {value}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '{option} "))
                && stderr.contains(&format!("{value} is not in {bounds}")),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{option} {value}: nothing ran");
    }
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
/// name the node, and exits 1 (or, through a proxy it cannot reach, names
/// the proxy); a node named by its `HOST:PORT` (as its
/// `listen` is written) is looked for over http://, and an address of
/// another kind is refused, naming the forms taken (exit 2).
#[test]
fn a_command_with_no_node_at_its_address_says_how_to_name_one() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let stats = |node: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_goad"))
            .args(["stats", "--node", node])
            .env_remove("GOAD_NODE")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let node = format!("http://127.0.0.1:{port}");
    for named in [node.clone(), format!("127.0.0.1:{port}")] {
        let (code, stderr) = stats(&named);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.starts_with(&format!("goad: {node}/v1/stats: ")),
            "{stderr}"
        );
        assert!(
            stderr.contains("(no node listens there: give its address with --node or GOAD_NODE)"),
            "{stderr}"
        );
    }
    // A node elsewhere, through a proxy that is not there: the proxy is
    // named, not a node said to be missing.
    let out = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["stats", "--node", "http://node.example.invalid:7878"])
        .env("HTTP_PROXY", format!("http://127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "goad: http://node.example.invalid:7878/v1/stats: the egress proxy \
             127.0.0.1:{port} (HTTP_PROXY) could not be reached: Connection refused (os error \
             111)\n"
        )
    );
    for wrong in ["ftp://127.0.0.1:7878", "http://", "a b"] {
        let (code, stderr) = stats(wrong);
        assert_eq!(code, Some(2), "{stderr}");
        let expected = format!("error: invalid value '{wrong}' for '--node <NODE>': not a node's address: give http://HOST:PORT, https://HOST:PORT or HOST:PORT");
        assert!(stderr.starts_with(&expected), "{stderr}");
    }
}

/// `goad serve` with `GOAD_LOG_FORMAT=format` on a fresh data directory
/// in `dir`, with `more_config`, until it is ready: the lines it logged.
fn serve_log_lines(dir: &std::path::Path, format: &str, more_config: &str) -> Vec<String> {
    let config = dir.join("goad.toml");
    let data_dir = dir.join("data");
    std::fs::write(
        &config,
        format!("data_dir = {data_dir:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n{more_config}"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("GOAD_LOG_FORMAT", format)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let ready = line.contains("engine ready");
        lines.push(line);
        if ready {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        lines.last().is_some_and(|l| l.contains("engine ready")),
        "{lines:?}"
    );
    lines
}

/// A node whose `min_free_disk_bytes` its disk cannot meet says so as it
/// opens: an error when the disk is smaller than the reserve (every hook
/// would be refused), a warning when it has less free than it.
#[test]
fn a_disk_reserve_the_disk_cannot_meet_is_logged_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let past_the_disk = "min_free_disk_bytes = 1125899906842624\n";
    let lines = serve_log_lines(dir.path(), "logfmt", past_the_disk);
    let error = "level=error msg=\"min_free_disk_bytes is more than the file system holding the data directory has: every new hook is refused";
    assert!(lines.iter().any(|l| l.contains(error)), "{lines:?}");

    let total_bytes = common::df_bytes(dir.path(), "size");
    let below_the_size = format!("min_free_disk_bytes = {}\n", total_bytes - 1);
    let lines = serve_log_lines(dir.path(), "logfmt", &below_the_size);
    let warning = "level=warn msg=\"the file system holding the data directory has less free than min_free_disk_bytes";
    assert!(lines.iter().any(|l| l.contains(warning)), "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.contains("level=error")),
        "{lines:?}"
    );
}

/// With `GOAD_LOG_FORMAT=json` every line is one JSON object: `ts_ms` a
/// number, `level` and `msg` first, then the fields as strings.
#[test]
fn json_log_lines_are_objects_with_the_fields_as_strings() {
    let dir = tempfile::tempdir().unwrap();
    let lines = serve_log_lines(dir.path(), "json", "");
    let objects: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).expect(line))
        .collect();
    for (line, object) in lines.iter().zip(&objects) {
        assert!(line.starts_with("{\"ts_ms\":"), "{line}");
        assert!(object["ts_ms"].is_u64(), "{line}");
        let level = object["level"].as_str().unwrap_or_default();
        assert!(["info", "warn", "error"].contains(&level), "{line}");
    }
    let listening = objects.iter().find(|o| o["msg"] == "node listening");
    let listening = listening.expect("a node listening line");
    assert!(listening["addr"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert_eq!(listening["scheme"], "http");
}

/// An unknown format is told of, in logfmt, which the node then logs.
#[test]
fn an_unknown_log_format_is_named_and_logfmt_used() {
    let dir = tempfile::tempdir().unwrap();
    let lines = serve_log_lines(dir.path(), "xml", "");
    assert!(
        lines[0].contains(
            "level=warn msg=\"unknown log format; logging logfmt\" GOAD_LOG_FORMAT=xml known=\"logfmt, json\""
        ),
        "{lines:?}"
    );
    assert!(
        lines[1..].iter().all(|l| l.starts_with("ts_ms=")),
        "{lines:?}"
    );
}

/// `goad verify` of a stopped node's unsound store (its 102 rows' due
/// entries gone) prints the shard's counts, its first 100 problems and how
/// many more, and exits 1.
#[test]
fn goad_verify_lists_the_problems_it_finds_and_exits_1() {
    use common::{config, sink, source_of_kinds, tree};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = config(&data);
    c.retry.base_ms = 600_000;
    c.retry.max_ms = 600_000;
    c.sources.push(source_of_kinds("s", "t", &["later"]));
    let later = sink(|_| Err(goad::SinkError::transient("not now")));
    let engine = goad::Engine::builder(c)
        .sink("later", later)
        .open()
        .unwrap();
    for n in 0..102 {
        engine
            .commit(goad::NewHook::new("s", format!("{n}")))
            .unwrap();
    }
    engine.tick().unwrap();
    drop(engine);
    let store = goad::store::ShardStore::open(&data, 0, 1).unwrap();
    let due = tree(&store, "due");
    let mut wtxn = store.env().write_txn().unwrap();
    due.clear(&mut wtxn).unwrap();
    wtxn.commit().unwrap();
    drop(store);
    let file = dir.path().join("goad.toml");
    let toml = format!("data_dir = {:?}\nshards = 1\n", data.display().to_string());
    std::fs::write(&file, toml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["verify", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let mut expected = vec![
        "shard 0: 102 hooks; rows 0 due, 0 in flight, 0 waiting in lanes, 0 dead: 102 problems"
            .to_string(),
    ];
    expected.extend((1..=100).map(|seq| {
        format!("  - row seq {seq} sink 0 is Pending but in no index: it would never be delivered")
    }));
    expected.push("  - and 2 more".to_string());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected);
    assert_eq!(out.status.code(), Some(1));
}
