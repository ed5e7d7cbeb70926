//! Names that survive power loss. Syncing a file makes its bytes durable,
//! not its name: the name is an entry in its directory, and a new
//! directory's name an entry in its parent, each durable only once that
//! directory is synced. Every file goad must find again after a crash (a
//! shard's store, a claim's body, a replay's state, a backup, a marker) is
//! named through these.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Creates `dir` and its missing parents, as `fs::create_dir_all` does,
/// and syncs the parent of each directory it created, top down. The new
/// directory's own entries are its creator's to sync (with [`sync`]).
pub(crate) fn create_all(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = dir;
    while !at.try_exists()? {
        missing.push(at);
        match at.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => at = parent,
            _ => break,
        }
    }
    fs::create_dir_all(dir)?;
    for created in missing.iter().rev() {
        sync(parent_of(created))?;
    }
    Ok(())
}

/// Syncs the directory `dir`: the entries made in it (files created,
/// renamed in or out) survive power loss.
pub(crate) fn sync(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The directory holding `path` (`.` for a bare relative name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_all_makes_every_missing_level_and_takes_one_that_exists() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a").join("b").join("c");
        create_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_all(&deep).unwrap();
        create_all(root.path()).unwrap();
        assert!(deep.is_dir());
    }

    #[test]
    fn create_all_fails_on_a_file_in_the_way() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        fs::write(&file, b"x").unwrap();
        let error = create_all(&file.join("dir")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotADirectory, "{error}");
    }

    #[test]
    fn a_bare_name_is_in_the_working_directory() {
        assert_eq!(parent_of(Path::new("data")), Path::new("."));
        assert_eq!(parent_of(Path::new("/srv/goad")), Path::new("/srv"));
    }
}
