//! Files that hold hook bodies (a backup's store copies; a claim check's
//! bodies, which `claim_check::dir` makes as temporary files of the same
//! mode) are made readable by their owner only (`0600`), as LMDB makes a
//! shard's store: a body may hold a customer's data or a provider's
//! secrets, and other accounts of the host have no business reading it.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates (or truncates) `path` for writing, readable and writable by its
/// owner only.
pub(crate) fn create(path: &Path) -> io::Result<File> {
    File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_file_is_its_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("body");
        create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
