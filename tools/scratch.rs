//! The temporary directory a tool's in-process engines keep their stores
//! in. Each engine has a directory of its own inside it, removed when its
//! run ends. SIGINT or SIGTERM would end the tool before any `Drop` runs
//! and leave the stores behind, so the first one removes the whole
//! directory and ends the tool as the signal would have: its status is
//! 128 + the signal's number, the shell's for a process a signal killed.
//! The removal waits for an engine that is being opened (its shards'
//! directories made one by one) and no other starts after it: else the
//! opening could make a directory again once it is removed.

use parking_lot::RwLock;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::Arc;
use tempfile::TempDir;

pub struct Scratch {
    dir: TempDir,
    /// Held to read while something is made in the directory, to write
    /// by the removal (for good: the tool ends).
    making: Arc<RwLock<()>>,
}

impl Scratch {
    /// Creates the directory and takes SIGINT and SIGTERM; once per tool.
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().to_path_buf();
        let making = Arc::new(RwLock::new(()));
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .expect("handle SIGINT and SIGTERM");
        let removal = making.clone();
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let _nothing_made = removal.write();
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
        Scratch { dir, making }
    }

    /// A new directory for one engine's store, removed when dropped.
    pub fn engine_dir(&self) -> TempDir {
        self.making(|| tempfile::tempdir_in(self.dir.path()).expect("a temporary directory"))
    }

    /// `make`'s result (an engine opened on a directory of this one),
    /// made while no signal's removal runs.
    pub fn making<T>(&self, make: impl FnOnce() -> T) -> T {
        let _making = self.making.read();
        make()
    }
}
