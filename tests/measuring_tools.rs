//! The measuring tools that run engines in-process (tools/e2e.rs,
//! tenants.rs, neighbour.rs, batching.rs, restart.rs) as child processes: interrupted
//! while an engine runs, they leave no store behind.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether a file named `name` is anywhere under `dir`.
fn holds_file(dir: &Path, name: &str) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            let path = entry.path();
            path.file_name() == Some(name.as_ref()) || (path.is_dir() && holds_file(&path, name))
        })
}

/// Ctrl-C (SIGINT) once each tool's engine has its store: the tool
/// removes its temporary directory and exits 130, as a process the
/// signal killed would report.
#[test]
fn an_interrupted_tool_removes_its_engines_stores() {
    let runs = [
        (env!("CARGO_BIN_EXE_goad-e2e"), &["2", "8", "2"][..]),
        (env!("CARGO_BIN_EXE_goad-tenants"), &["100000000", "1"]),
        (env!("CARGO_BIN_EXE_goad-neighbour"), &["1000000", "1000"]),
        (
            env!("CARGO_BIN_EXE_goad-batching"),
            &["1000000", "1000", "1"],
        ),
        (env!("CARGO_BIN_EXE_goad-restart"), &["100000000"]),
    ];
    for (tool, args) in runs {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = Command::new(tool)
            .args(args)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the tool runs");
        common::wait_until(&format!("{tool}'s store"), Duration::from_secs(60), || {
            holds_file(tmp.path(), "data.mdb")
        });
        // SAFETY: kill(2) with the pid of a child this test spawned and has
        // not waited for.
        assert_eq!(
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
            0
        );
        let mut status = None;
        common::wait_until(&format!("{tool}'s exit"), Duration::from_secs(60), || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.unwrap().code(), Some(130), "{tool}: {stderr}");
        assert!(
            stderr.starts_with("interrupted: ") && stderr.trim_end().ends_with(" removed"),
            "{tool}: {stderr}"
        );
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "{tool} left {left:?}");
    }
}
