//! The temporary directory a tool's in-process engines keep their stores
//! in. Each engine has a directory of its own inside it, removed when its
//! run ends. SIGINT or SIGTERM would end the tool before any `Drop` runs
//! and leave the stores behind, so the first one removes the whole
//! directory and ends the tool as the signal would have: its status is
//! 128 + the signal's number, the shell's for a process a signal killed.

use signal_hook::consts::{SIGINT, SIGTERM};
use tempfile::TempDir;

pub struct Scratch(TempDir);

impl Scratch {
    /// Creates the directory and takes SIGINT and SIGTERM; once per tool.
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().to_path_buf();
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .expect("handle SIGINT and SIGTERM");
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let removed = std::fs::remove_dir_all(&path);
                eprintln!(
                    "interrupted: {} {}",
                    path.display(),
                    match removed {
                        Ok(()) => "removed".to_string(),
                        Err(e) => format!("not removed: {e}"),
                    }
                );
                std::process::exit(128 + signal);
            }
        });
        Scratch(dir)
    }

    /// A new directory for one engine's store, removed when dropped.
    pub fn engine_dir(&self) -> TempDir {
        tempfile::tempdir_in(self.0.path()).expect("a temporary directory")
    }
}
