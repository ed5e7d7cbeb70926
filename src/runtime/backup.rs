//! Backups of a running engine's data directory: each shard's store as its
//! last commit left it, the directory's other files, and a manifest
//! written last (see [`Engine::backup`]).

use super::clock::wall_ms;
use super::Engine;
use crate::store::{reshard, ShardStore, StoreError, BACKUP_UNFINISHED};
use crate::synced_dir;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The file a finished backup holds; a directory without it is not a
/// whole backup.
pub const BACKUP_MANIFEST: &str = "backup.json";

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// Each shard's store copy, in bytes, by shard.
    pub shard_bytes: Vec<u64>,
    /// The data directory's other files (replays, claims kept under it).
    pub files: u64,
    pub file_bytes: u64,
    /// When it began (unix ms): it holds every hook acknowledged before.
    pub started_at_ms: u64,
    pub took: Duration,
}

/// Why a backup was not made.
#[derive(Debug)]
#[non_exhaustive]
pub enum BackupError {
    /// The directory given is not a place for a backup.
    Target { dir: PathBuf, why: &'static str },
    /// The directory given could not be made, read or written in: a path
    /// the node's user may not write, a read-only or pseudo file system.
    Unwritable { dir: PathBuf, source: io::Error },
    /// Another backup of this engine is running.
    Running,
    /// A store could not be copied.
    Store(StoreError),
    /// A file could not be read or written.
    Io { path: PathBuf, source: io::Error },
}

impl fmt::Display for BackupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackupError::Target { dir, why } => {
                write!(f, "cannot back up to {}: {why}", dir.display())
            }
            BackupError::Unwritable { dir, source } => write!(
                f,
                "cannot back up to {}: the node cannot make it or write in it: {source}",
                dir.display()
            ),
            BackupError::Running => write!(f, "a backup of this engine is running"),
            BackupError::Store(e) => write!(f, "backup: {e}"),
            BackupError::Io { path, source } => {
                write!(f, "backup: {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for BackupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BackupError::Store(e) => Some(e),
            BackupError::Io { source, .. } | BackupError::Unwritable { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<StoreError> for BackupError {
    fn from(e: StoreError) -> BackupError {
        BackupError::Store(e)
    }
}

fn io_at(path: &Path) -> impl Fn(io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn unwritable(dir: &Path) -> impl Fn(io::Error) -> BackupError + '_ {
    move |source| BackupError::Unwritable {
        dir: dir.to_path_buf(),
        source,
    }
}

impl Engine {
    /// Writes a backup of the data directory to `dir`, a new or empty
    /// directory outside it, while the engine runs: each shard's store as
    /// its last commit left it (so every hook whose commit returned before
    /// the call is in it), then the directory's other files (replay
    /// definitions, the claim check's files when they are kept under it),
    /// then `backup.json`, everything synced; `dir` is marked unfinished
    /// ([`BACKUP_UNFINISHED`]) until every store and file is in it, so an
    /// engine or `verify` refuses a backup cut short. A node started on `dir` with
    /// the same shard count takes up from there: rows pending or in flight
    /// then are due again (delivered again if they were delivered since),
    /// and hooks committed after are not in it. One backup at a time.
    pub fn backup(&self, dir: &Path) -> Result<Backup, BackupError> {
        let _one = self.backing_up.try_lock().ok_or(BackupError::Running)?;
        let data_dir = self.config.read().data_dir.clone();
        prepare_target(&data_dir, dir)?;
        let started = Instant::now();
        let started_at_ms = wall_ms();
        let shard_bytes = self
            .shards
            .iter()
            .enumerate()
            .map(|(k, shard)| shard.store.copy_to(&ShardStore::dir(dir, k)))
            .collect::<Result<Vec<u64>, StoreError>>()?;
        let mut copied = Copied::default();
        copy_files(&data_dir, dir, true, &mut copied)?;
        // Whole now: the manifest only describes it.
        let unfinished = dir.join(BACKUP_UNFINISHED);
        fs::remove_file(&unfinished).map_err(io_at(&unfinished))?;
        synced_dir::sync(dir).map_err(io_at(dir))?;
        let manifest = serde_json::json!({
            "started_at_ms": started_at_ms,
            "shards": self.shards.len(),
            "shard_bytes": shard_bytes,
            "files": copied.files,
            "goad_version": env!("CARGO_PKG_VERSION"),
        });
        let path = dir.join(BACKUP_MANIFEST);
        write_synced(&path, manifest.to_string().as_bytes()).map_err(io_at(&path))?;
        synced_dir::sync(dir).map_err(io_at(dir))?;
        Ok(Backup {
            shard_bytes,
            files: copied.files,
            file_bytes: copied.bytes,
            started_at_ms,
            took: started.elapsed(),
        })
    }
}

/// Makes `dir` ready for a backup of `data_dir`: created if absent,
/// refused if it holds anything or lies inside the data directory (a
/// backup there is lost with the disk, and would be copied into the next);
/// then marked unfinished ([`BACKUP_UNFINISHED`], synced), so a backup
/// cut short is never opened as a data directory.
fn prepare_target(data_dir: &Path, dir: &Path) -> Result<(), BackupError> {
    usable_target(data_dir, dir)?;
    write_synced(&dir.join(BACKUP_UNFINISHED), b"").map_err(unwritable(dir))?;
    synced_dir::sync(dir).map_err(unwritable(dir))
}

/// Refuses `dir` for a backup of `data_dir`, or creates it if absent.
fn usable_target(data_dir: &Path, dir: &Path) -> Result<(), BackupError> {
    let refused = |why| BackupError::Target {
        dir: dir.to_path_buf(),
        why,
    };
    let data_dir = fs::canonicalize(data_dir).map_err(io_at(data_dir))?;
    if resolved(dir)
        .map_err(unwritable(dir))?
        .starts_with(&data_dir)
    {
        return Err(refused("it is inside the data directory"));
    }
    match fs::read_dir(dir).map(|mut entries| entries.next().is_none()) {
        Ok(true) => Ok(()),
        // One cut short (its node killed, its disk full) is named as such:
        // its files are no use, and trying again is what comes next.
        Ok(false) if dir.join(BACKUP_UNFINISHED).exists() => Err(refused(
            "it holds a backup cut short (its BACKUP_UNFINISHED file says so): \
             delete it first, or back up to another directory",
        )),
        Ok(false) => Err(refused(
            "it holds files: a backup goes to a new or empty directory",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            synced_dir::create_all(dir).map_err(unwritable(dir))
        }
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => Err(refused(match dir.is_file() {
            true => "it is a file",
            false => "a part of its path is a file, not a directory",
        })),
        Err(e) => Err(unwritable(dir)(e)),
    }
}

/// `path` made absolute with its existing part's links resolved.
fn resolved(path: &Path) -> io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(parent) = existing.parent() else {
            break;
        };
        rest.extend(existing.file_name());
        existing = parent;
    }
    let mut out = fs::canonicalize(existing)?;
    out.extend(rest.iter().rev());
    Ok(out)
}

#[derive(Default)]
struct Copied {
    files: u64,
    bytes: u64,
}

/// Whether a top-level entry of the data directory is not copied as a
/// file: the shards' stores (copied by LMDB), the lock, the shards a
/// reshard replaced and those one cut short staged (the node runs on
/// neither).
fn is_engine_entry(name: &str) -> bool {
    let shard = name
        .strip_prefix("shard-")
        .is_some_and(|n| n.parse::<usize>().is_ok());
    shard || name == "goad.lock" || name == reshard::BEFORE_DIR || name == reshard::STAGING_DIR
}

/// Whether a file is one goad is still writing (it renames it into place
/// when whole).
fn is_temporary(name: &str) -> bool {
    name.starts_with(".tmp-") || name.ends_with(".tmp")
}

/// Copies the files under `from` to `to`, synced, skipping the engine's
/// own entries at the top and files being written; a file deleted while
/// the copy runs (a claim past its retention) is skipped.
fn copy_files(from: &Path, to: &Path, top: bool, copied: &mut Copied) -> Result<(), BackupError> {
    for entry in fs::read_dir(from).map_err(io_at(from))? {
        let entry = entry.map_err(io_at(from))?;
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        if (top && is_engine_entry(&name_text)) || is_temporary(&name_text) {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&name));
        let kind = entry.file_type().map_err(io_at(&source))?;
        if kind.is_dir() {
            synced_dir::create_all(&target).map_err(io_at(&target))?;
            copy_files(&source, &target, false, copied)?;
            synced_dir::sync(&target).map_err(io_at(&target))?;
        } else if kind.is_file() {
            match fs::copy(&source, &target) {
                Ok(bytes) => {
                    fs::File::open(&target)
                        .and_then(|f| f.sync_all())
                        .map_err(io_at(&target))?;
                    copied.files += 1;
                    copied.bytes += bytes;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_at(&source)(e)),
            }
        }
    }
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backup's directory is marked unfinished before anything is
    /// copied into it.
    #[test]
    fn a_target_is_made_and_marked_unfinished_first() {
        let (data, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dir = root.path().join("backup");
        prepare_target(data.path(), &dir).unwrap();
        let names: Vec<_> = (fs::read_dir(&dir).unwrap())
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [BACKUP_UNFINISHED]);
    }
}
