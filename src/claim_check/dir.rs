//! Claims in a directory: `<dir>/<tenant>/<sha256>`, and the sweep that
//! deletes those past their retention.
//!
//! A check-in of a claim that is there refreshes its time (synced, so a
//! power loss cannot give it back its older one); one that is not there
//! is written whole: a temporary file, synced, renamed into place, the
//! directory synced. A claim a message names is complete and survives a
//! crash.
//!
//! A sweep and a check-in of the same claim may run at once (the claim's
//! body sent again as its retention ends), and no file system deletes a
//! file only if it is still old. So the sweep first moves an old claim
//! aside under a name of its own (`.swept-<sha256>-<unique>`), reads its
//! time again, and deletes it only if it is still old, putting it back
//! otherwise; and a check-in that refreshed a claim looks again that the
//! file it refreshed is still the claim, and writes the claim anew if a
//! sweep moved it aside meanwhile. Either the sweep reads the refreshed
//! time after it moved the claim aside (and puts it back), or the refresh
//! comes after the move, and the check-in sees the claim gone: a claim
//! whose check-in returned is never deleted within its retention. A claim
//! that is being swept is out of place for that instant: a redeem then
//! finds nothing, as it would a moment later. A sweep that crashed
//! between the two names leaves the claim under the sweep's name: the
//! next sweep puts it back if it is fresh and deletes it if not.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How the names of files a crash left half-written begin.
const TEMP_PREFIX: &str = ".tmp-";
/// How the names of claims a sweep moved aside begin.
const SWEPT_PREFIX: &str = ".swept-";

/// A directory of claims.
#[derive(Debug)]
pub(super) struct ClaimDir {
    dir: PathBuf,
}

impl ClaimDir {
    pub(super) fn new(dir: PathBuf) -> ClaimDir {
        ClaimDir { dir }
    }

    fn path(&self, tenant: &str, sha256: &str) -> PathBuf {
        self.dir.join(tenant).join(sha256)
    }

    /// Stores `body` as `tenant`'s claim `sha256`, or refreshes the time of
    /// the one stored.
    pub(super) fn check_in(&self, tenant: &str, sha256: &str, body: &[u8]) -> io::Result<()> {
        let path = self.path(tenant, sha256);
        let opened = open_existing(&path)?;
        if let Some(file) = &opened {
            touch(file)?;
        }
        keep_or_write(opened.as_ref(), &path, body)
    }

    /// The body of a claim; `None` when there is none.
    pub(super) fn get(&self, tenant: &str, sha256: &str) -> io::Result<Option<Vec<u8>>> {
        if_there(fs::read(self.path(tenant, sha256)))
    }

    /// [`super::ClaimStore::sweep`], with claims last checked in before
    /// `cutoff` past their retention; it also puts back a fresh claim a
    /// crashed sweep left aside.
    pub(super) fn sweep(&self, cutoff: SystemTime) -> io::Result<u64> {
        let Some(tenants) = if_there(fs::read_dir(&self.dir))? else {
            return Ok(0);
        };
        let mut swept = 0;
        for tenant in tenants {
            let tenant = tenant?;
            if tenant.file_type()?.is_dir() {
                swept += sweep_tenant(&tenant.path(), cutoff)?;
            }
        }
        Ok(swept)
    }
}

/// One tenant's directory's share of [`ClaimDir::sweep`].
fn sweep_tenant(dir: &Path, cutoff: SystemTime) -> io::Result<u64> {
    let mut swept = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let Some(metadata) = if_there(fs::symlink_metadata(&path))? else {
            continue;
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let aside_of = name
            .strip_prefix(SWEPT_PREFIX)
            .and_then(|rest| rest.get(..64))
            .filter(|sha256| super::is_sha256(sha256));
        if let Some(sha256) = aside_of {
            swept += settle(&path, &dir.join(sha256), cutoff)?;
        } else if metadata.modified()? >= cutoff {
            make_private(&path, &metadata)?;
        } else if !super::is_sha256(&name) {
            swept += u64::from(remove(&path)?);
        } else if let Some(aside) = set_aside(&path, &name)? {
            swept += settle(&aside, &path, cutoff)?;
        }
    }
    Ok(swept)
}

/// `None` for a file that is not there: a check-in or another sweep may
/// move or delete one at any time.
fn if_there<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The claim at `path`, opened to refresh its time; `None` if there is none.
fn open_existing(path: &Path) -> io::Result<Option<File>> {
    if_there(File::options().write(true).open(path))
}

/// Sets `file`'s time to now, synced.
fn touch(file: &File) -> io::Result<()> {
    file.set_modified(SystemTime::now())?;
    file.sync_all()
}

/// Ends a check-in: done if `opened`, refreshed, is still the claim at
/// `path` (a sweep may have moved it aside meanwhile); else the claim is
/// written anew.
fn keep_or_write(opened: Option<&File>, path: &Path, body: &[u8]) -> io::Result<()> {
    if let Some(file) = opened {
        if still_at(file, path)? {
            return Ok(());
        }
    }
    write_new(path, body)
}

/// Whether `path` still names `file`.
fn still_at(file: &File, path: &Path) -> io::Result<bool> {
    let opened = file.metadata()?;
    let named = if_there(fs::metadata(path))?;
    Ok(named.is_some_and(|named| (named.dev(), named.ino()) == (opened.dev(), opened.ino())))
}

/// Writes a claim whole: a synced temporary file (its owner's only)
/// renamed into place, then the directory synced.
fn write_new(path: &Path, body: &[u8]) -> io::Result<()> {
    let dir = path.parent().expect("a claim is in its tenant's directory");
    crate::synced_dir::create_all(dir)?;
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    temp.write_all(body)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    crate::synced_dir::sync(dir)
}

/// Moves the claim `name` at `path` aside, to a name no other sweep
/// uses; `None` if it is gone.
fn set_aside(path: &Path, name: &str) -> io::Result<Option<PathBuf>> {
    let unique = uuid::Uuid::now_v7().simple();
    let aside = path.with_file_name(format!("{SWEPT_PREFIX}{name}-{unique}"));
    Ok(if_there(fs::rename(path, &aside))?.map(|()| aside))
}

/// Deletes the claim moved aside to `aside` if it is still older than
/// `cutoff` (returns 1), or puts it back at `claim` (0).
fn settle(aside: &Path, claim: &Path, cutoff: SystemTime) -> io::Result<u64> {
    let Some(metadata) = if_there(fs::symlink_metadata(aside))? else {
        return Ok(0);
    };
    if metadata.modified()? < cutoff {
        return Ok(u64::from(remove(aside)?));
    }
    put_back(aside, claim)?;
    Ok(0)
}

/// Puts a claim moved aside back in its place, synced.
fn put_back(aside: &Path, claim: &Path) -> io::Result<()> {
    if if_there(fs::rename(aside, claim))?.is_some() {
        let dir = claim
            .parent()
            .expect("a claim is in its tenant's directory");
        crate::synced_dir::sync(dir)?;
    }
    Ok(())
}

/// Deletes `path`; whether it was there.
fn remove(path: &Path) -> io::Result<bool> {
    Ok(if_there(fs::remove_file(path))?.is_some())
}

/// Makes the file at `path` its owner's only, if it is not.
fn make_private(path: &Path, metadata: &fs::Metadata) -> io::Result<()> {
    if metadata.permissions().mode() & 0o077 == 0 {
        return Ok(());
    }
    if_there(fs::set_permissions(path, fs::Permissions::from_mode(0o600))).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const BODY: &[u8] = b"a body too large for a message";

    struct Claims {
        _dir: tempfile::TempDir,
        claims: ClaimDir,
        tenant_dir: PathBuf,
        path: PathBuf,
        cutoff: SystemTime,
    }

    /// A directory holding one claim of tenant `acme`, last checked in
    /// before `cutoff`.
    fn an_old_claim() -> Claims {
        let dir = tempfile::tempdir().unwrap();
        let claims = ClaimDir::new(dir.path().to_path_buf());
        let sha256 = crate::claim_check::body_sha256(BODY);
        claims.check_in("acme", &sha256, BODY).unwrap();
        let path = claims.path("acme", &sha256);
        let cutoff = SystemTime::now() - Duration::from_secs(60);
        age(&path, cutoff - Duration::from_secs(60));
        Claims {
            tenant_dir: path.parent().unwrap().to_path_buf(),
            claims,
            _dir: dir,
            path,
            cutoff,
        }
    }

    fn age(path: &Path, to: SystemTime) {
        let file = File::options().write(true).open(path).unwrap();
        file.set_modified(to).unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Whether the claim is at its place, whole, and fresh.
    fn fresh_in_place(c: &Claims) -> bool {
        let Some(metadata) = if_there(fs::symlink_metadata(&c.path)).unwrap() else {
            return false;
        };
        fs::read(&c.path).unwrap() == BODY && metadata.modified().unwrap() >= c.cutoff
    }

    /// A check-in of an old claim and a sweep of it run their steps in
    /// every order: the check-in returns with the claim in place and
    /// fresh, and neither the next sweep nor any later one within its
    /// retention deletes it.
    #[test]
    fn a_claim_checked_in_while_a_sweep_takes_it_is_never_deleted() {
        const CHECK_IN_STEPS: u32 = 3;
        const SWEEP_STEPS: u32 = 3;
        let mut orders = 0;
        for order in 0u32..1 << (CHECK_IN_STEPS + SWEEP_STEPS) {
            if order.count_ones() != CHECK_IN_STEPS {
                continue;
            }
            orders += 1;
            let c = an_old_claim();
            let name = c.path.file_name().unwrap().to_string_lossy().into_owned();
            let mut opened = None;
            let (mut check_in_step, mut sweep_step) = (0, 0);
            let (mut old, mut aside) = (false, None);
            for at in 0..CHECK_IN_STEPS + SWEEP_STEPS {
                if order & (1 << at) != 0 {
                    match check_in_step {
                        0 => opened = open_existing(&c.path).unwrap(),
                        1 => opened.iter().for_each(|file| touch(file).unwrap()),
                        _ => keep_or_write(opened.as_ref(), &c.path, BODY).unwrap(),
                    }
                    check_in_step += 1;
                } else {
                    match sweep_step {
                        0 => old = fs::metadata(&c.path).unwrap().modified().unwrap() < c.cutoff,
                        1 if old => aside = set_aside(&c.path, &name).unwrap(),
                        2 => aside.iter().for_each(|aside| {
                            settle(aside, &c.path, c.cutoff).unwrap();
                        }),
                        _ => {}
                    }
                    sweep_step += 1;
                }
            }
            let steps = format!("order {order:06b} (1: a check-in step)");
            assert!(fresh_in_place(&c), "{steps}: the claim is gone or old");
            assert_eq!(c.claims.sweep(c.cutoff).unwrap(), 0, "{steps}");
            assert!(fresh_in_place(&c), "{steps}: the next sweep took it");
            assert_eq!(names(&c.tenant_dir), [name], "{steps}: nothing else left");
        }
        assert_eq!(orders, 20);
    }

    #[test]
    fn a_sweep_deletes_old_claims_and_leftovers_and_puts_back_fresh_claims_a_crashed_sweep_left_aside(
    ) {
        let c = an_old_claim();
        let name = c.path.file_name().unwrap().to_string_lossy().into_owned();
        let other_sha = "0".repeat(64);
        let leftover = c.tenant_dir.join(".tmp-crashed");
        fs::write(&leftover, b"half").unwrap();
        age(&leftover, c.cutoff - Duration::from_secs(1));
        let writing = c.tenant_dir.join(".tmp-writing");
        fs::write(&writing, b"half").unwrap();
        // A sweep that crashed left this claim aside, fresh (a check-in
        // refreshed it), and another one old.
        let fresh_aside = set_aside(&c.path, &name).unwrap().unwrap();
        age(&fresh_aside, SystemTime::now());
        let old_aside = c.tenant_dir.join(format!("{SWEPT_PREFIX}{other_sha}-1"));
        fs::write(&old_aside, b"old").unwrap();
        age(&old_aside, c.cutoff - Duration::from_secs(1));

        assert_eq!(
            c.claims.sweep(c.cutoff).unwrap(),
            2,
            "the leftover and the old claim"
        );
        assert!(fresh_in_place(&c), "put back");
        assert_eq!(names(&c.tenant_dir), [".tmp-writing".to_string(), name]);

        age(&c.path, c.cutoff - Duration::from_secs(1));
        assert_eq!(c.claims.sweep(c.cutoff).unwrap(), 1);
        assert_eq!(
            c.claims
                .get("acme", &c.path.file_name().unwrap().to_string_lossy())
                .unwrap(),
            None
        );
        assert_eq!(names(&c.tenant_dir), [".tmp-writing"]);
    }
}
