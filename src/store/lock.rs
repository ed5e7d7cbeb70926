//! The data directory's lock: one engine at a time.
//!
//! Two engines on one data directory would each number new hooks from the
//! same stored counter, so one would overwrite the other's acknowledged
//! hooks, and each would make the other's claimed rows due again when it
//! opens. So an engine holds an exclusive `flock` on `<data_dir>/goad.lock`
//! while it runs, and a second engine, in this process or another, is
//! refused with the holder's pid. The kernel drops the lock when its holder
//! exits, killed or not, so a crash never leaves the directory locked
//! (unless a child the host forked lives on without calling `exec`: it
//! shares the lock's file; goad's own children exec at once).

use super::StoreError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The lock file's name under the data directory.
pub(super) const LOCK_FILE: &str = "goad.lock";

/// Held while an engine runs on a data directory; dropping it unlocks.
#[derive(Debug)]
pub struct DataDirLock {
    file: File,
}

impl Drop for DataDirLock {
    /// Unlocks before the file closes. An `flock` belongs to the open file,
    /// which a child process forked meanwhile (by any thread of the host:
    /// a `Command`, goad's own `credential_process`) shares until it execs
    /// or exits; closing this descriptor alone would leave the directory
    /// locked until then, and an engine opened on it at once refused as
    /// "another engine in this process". Unlocking through any descriptor
    /// of the open file releases it for all. (Should it fail, closing the
    /// file still unlocks once the child lets go.)
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl DataDirLock {
    /// Locks `data_dir` (creating it if needed) and writes this process's
    /// pid into the lock file, or names the holder.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, StoreError> {
        let path = data_dir.join(LOCK_FILE);
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        super::usable_dir::refuse_unusable_data_dir(data_dir)?;
        crate::synced_dir::create_all(data_dir).map_err(|source| StoreError::Io {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::InUse {
                    path: data_dir.to_path_buf(),
                    holder_pid: holder_pid(&mut file),
                })
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        // Locked: a failure from here on unlocks as it drops.
        let mut lock = DataDirLock { file };
        lock.file.set_len(0).map_err(io)?;
        lock.file.rewind().map_err(io)?;
        writeln!(lock.file, "{}", std::process::id()).map_err(io)?;
        Ok(lock)
    }
}

/// The pid the holder wrote, if it is there yet.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Who holds a data directory, for the error message.
pub(super) fn describe_holder(holder_pid: Option<u32>) -> String {
    match holder_pid {
        Some(pid) if pid == std::process::id() => "another engine in this process".into(),
        Some(pid) => format!("another goad process (pid {pid})"),
        None => "another goad process".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let pid = std::process::id();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(),
            format!("{pid}\n")
        );
        match DataDirLock::acquire(dir.path()) {
            Err(StoreError::InUse { path, holder_pid }) => {
                assert_eq!(path, dir.path());
                assert_eq!(holder_pid, Some(pid));
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }

    /// A child process forked while an engine ran shares the lock's open
    /// file until it execs (here, a copy of the descriptor stands for
    /// it): the engine's drop unlocks the directory all the same, so an
    /// engine opened on it at once is not refused.
    #[test]
    fn a_descriptor_a_forked_child_shares_does_not_keep_the_directory_locked() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let forked_copy = first.file.try_clone().unwrap();
        drop(first);
        let again = DataDirLock::acquire(dir.path()).expect("the directory is unlocked");
        match DataDirLock::acquire(dir.path()) {
            Err(StoreError::InUse { holder_pid, .. }) => {
                assert_eq!(holder_pid, Some(std::process::id()))
            }
            other => panic!("expected InUse while the second lock is held, got {other:?}"),
        }
        drop((again, forked_copy));
    }

    #[test]
    fn a_data_dir_that_is_a_file_or_under_one_is_named_so_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, b"x").unwrap();
        for (data_dir, why) in [
            (file.clone(), "data_dir is a file, not a directory"),
            (
                file.join("shards"),
                "a part of data_dir's path is a file, not a directory",
            ),
        ] {
            let refused = DataDirLock::acquire(&data_dir).unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!("store: {}: {why}", data_dir.display())
            );
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }
}
