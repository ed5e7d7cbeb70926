//! Whether a data directory can serve an engine, checked before one opens
//! it, before a node listens, and by `goad check --environment` (a unit's
//! `ExecStartPre`): a path that cannot is named with what to mend, rather
//! than in the system's words from deep in an open ("File exists", "Not a
//! directory", a shard's "Permission denied" once the node listens).

use super::{ShardStore, StoreError};
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// Refuses a `data_dir` that is a file or lies under one, that this
/// process cannot reach, or that it cannot write — the directory, or what
/// an engine writes in it (the lock file, each shard's directory and
/// files) — or, where it does not exist yet, cannot make: a file system
/// mounted read-only, a directory another user made.
pub fn refuse_unusable_data_dir(data_dir: &Path) -> Result<(), StoreError> {
    let refused = |path: &Path, kind, why: String| {
        Err(StoreError::Io {
            path: path.to_path_buf(),
            source: io::Error::new(kind, why),
        })
    };
    match std::fs::metadata(data_dir) {
        Ok(meta) if !meta.is_dir() => {
            let why = "data_dir is a file, not a directory";
            return refused(data_dir, ErrorKind::NotADirectory, why.into());
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotADirectory => {
            let why = "a part of data_dir's path is a file, not a directory";
            return refused(data_dir, ErrorKind::NotADirectory, why.into());
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // Made as the engine opens, in the nearest directory there is.
            let absolute = std::path::absolute(data_dir).unwrap_or(data_dir.to_path_buf());
            let Some(parent) = absolute.ancestors().skip(1).find(|a| a.is_dir()) else {
                return Ok(());
            };
            return match writable(parent) {
                Ok(()) => Ok(()),
                Err(e) => refused(
                    data_dir,
                    e.kind(),
                    format!(
                        "it does not exist, and this process cannot make it in {parent:?} ({e})"
                    ),
                ),
            };
        }
        Err(e) => {
            let why = format!("this process cannot reach it ({e})");
            return refused(data_dir, e.kind(), why);
        }
    }
    for path in std::iter::once(data_dir.to_path_buf()).chain(written_in(data_dir)) {
        if let Err(e) = writable(&path) {
            let why = format!(
                "this process cannot write it ({e}): a data directory must be writable by the \
                 user goad runs as, on a file system mounted read-write (one another user made \
                 is given to this one with chown -R)"
            );
            return refused(&path, e.kind(), why);
        }
    }
    Ok(())
}

/// What an engine writes in `data_dir` that is there: the lock file, each
/// shard's directory and the files in it.
fn written_in(data_dir: &Path) -> Vec<PathBuf> {
    let mut paths = vec![data_dir.join(super::lock::LOCK_FILE)];
    for index in (0..).take_while(|&i| ShardStore::dir(data_dir, i).is_dir()) {
        let dir = ShardStore::dir(data_dir, index);
        let files = std::fs::read_dir(&dir).into_iter().flatten().flatten();
        paths.extend(files.map(|entry| entry.path()));
        paths.push(dir);
    }
    paths.retain(|path| path.exists());
    paths
}

/// Whether this process may write `path`, as the system decides at an
/// open (its permissions, a read-only mount).
fn writable(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: access(2) reads the NUL-terminated path it is given.
    match unsafe { libc::access(path.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
