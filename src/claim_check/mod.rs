//! The claim check: a body larger than a queue sink's `inline_max_bytes`
//! is kept in a directory or an S3-compatible bucket, and the sink's
//! message carries a reference to it (`urn:goad:claim:v1:<tenant>:<sha256>`)
//! instead of the body.
//!
//! Claims are content-addressed per tenant (`<tenant>/<sha256>`), so a
//! hook's body is stored once whichever of its sinks and attempts checks it
//! in first, and every other one reuses it: nothing needs storing with the
//! hook. In a directory (see `dir`), a check-in writes a claim whole, so
//! a claim a message names is complete and survives a crash; checking in
//! an existing claim refreshes its time. A claim not checked in again for
//! `retention_ms` is deleted by [`ClaimStore::sweep`] (an engine runs it
//! every hour), never one whose check-in returned within that time. In a
//! bucket (see `s3`), the bucket's lifecycle rule deletes old claims.
//! Consumers redeem claims within the retention, from the directory or the
//! bucket, or through a node's `GET /v1/claims/{tenant}/{sha256}`.

mod dir;
mod s3;
mod sweeper;

pub use s3::{S3Bucket, S3Options};
pub use sweeper::ClaimSweeper;

use crate::config::ConfigError;
use crate::sink::assume_role::RoleToAssume;
use crate::sink::aws_credentials::{AwsCredentials, EnvCredentials};
use crate::sink::aws_endpoint::AwsService;
use crate::sink::aws_region::EnvironmentRegion;
use dir::ClaimDir;
use sha2::{Digest, Sha256};
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// The largest claim redeemed from a bucket (a hook's body is at most
/// `max_body_bytes`, itself at most 4 GiB; this bounds a bucket's answer).
const MAX_CLAIM_BYTES: u64 = u32::MAX as u64;

/// A stored body, named by its tenant and the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub tenant: String,
    /// Lowercase hex.
    pub sha256: String,
}

impl ClaimRef {
    /// The reference a message carries.
    pub fn urn(&self) -> String {
        format!("urn:goad:claim:v1:{}:{}", self.tenant, self.sha256)
    }
}

/// Where claims are kept.
#[derive(Debug)]
pub struct ClaimStore {
    backend: Backend,
    retention: Duration,
}

#[derive(Debug)]
enum Backend {
    Dir(ClaimDir),
    S3(Box<S3Bucket>),
}

/// Whether `name` is a tenant id or a SHA-256 in hex (a claim's path has no
/// other names, so no request can reach outside the directory).
fn is_tenant(name: &str) -> bool {
    crate::config::is_id(name)
}

/// A body's SHA-256 in lowercase hex: the name of its claim (and a queue
/// message's `sha256`).
pub fn body_sha256(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

fn is_sha256(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl ClaimStore {
    /// Claims in the directory `dir`.
    pub fn new(dir: impl Into<PathBuf>, retention_ms: u64) -> ClaimStore {
        ClaimStore::with(Backend::Dir(ClaimDir::new(dir.into())), retention_ms)
    }

    /// Claims in an S3-compatible bucket.
    pub fn s3(bucket: S3Bucket, retention_ms: u64) -> ClaimStore {
        ClaimStore::with(Backend::S3(Box::new(bucket)), retention_ms)
    }

    /// The claim check a config names (`[claim_check]`); an error naming
    /// `claim_check.s3_region` when a bucket's region is neither set nor
    /// named by the environment (see `sink::aws_region`).
    pub fn from_config(config: &crate::config::Config) -> Result<ClaimStore, ConfigError> {
        let c = &config.claim_check;
        let Some(bucket) = &c.s3_bucket else {
            return Ok(ClaimStore::new(config.claim_dir(), c.retention_ms));
        };
        let region = EnvironmentRegion::default().or(
            c.s3_region.clone(),
            "claim_check.s3_region",
            " with claim_check.s3_bucket",
        )?;
        let env = EnvCredentials::named(
            &c.access_key_id_env,
            &c.secret_access_key_env,
            &c.session_token_env,
        );
        let role = RoleToAssume::named(&c.role_arn, &c.external_id, &c.role_session_name);
        let credentials =
            AwsCredentials::new(c.credentials.as_deref(), env, &region).assuming(role, &region);
        let options = S3Options {
            endpoint: (c.s3_endpoint.clone())
                .or_else(|| AwsService::S3.configured_endpoint())
                .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com")),
            bucket: bucket.clone(),
            region,
            prefix: c.s3_prefix.clone().unwrap_or_default(),
            credentials,
            timeout_ms: crate::limits::HTTP_TIMEOUT_MS,
        };
        Ok(ClaimStore::s3(S3Bucket::new(options), c.retention_ms))
    }

    /// The AWS credentials its bucket's requests are signed with, if it
    /// keeps claims in one (sinks whose credentials come from the same
    /// place share them: see `sink::shared_credentials`).
    pub(crate) fn aws_credentials(&self) -> Option<&AwsCredentials> {
        match &self.backend {
            Backend::S3(bucket) => Some(bucket.credentials()),
            Backend::Dir(_) => None,
        }
    }

    fn with(backend: Backend, retention_ms: u64) -> ClaimStore {
        ClaimStore {
            backend,
            retention: Duration::from_millis(retention_ms),
        }
    }

    /// Stores `body` for `tenant` (once: a stored claim is reused, and its
    /// time refreshed) and returns its reference. A bucket's requests end a
    /// little past `deadline`, if given (an attempt's: see
    /// [`crate::Delivery::deadline`]).
    pub fn check_in(
        &self,
        tenant: &str,
        body: &[u8],
        deadline: Option<Instant>,
    ) -> io::Result<ClaimRef> {
        if !is_tenant(tenant) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a tenant id: {tenant:?}"),
            ));
        }
        let sha256 = body_sha256(body);
        match &self.backend {
            Backend::Dir(dir) => dir.check_in(tenant, &sha256, body)?,
            Backend::S3(bucket) => {
                bucket.check_in(tenant, &sha256, body, self.retention, deadline)?
            }
        }
        Ok(ClaimRef {
            tenant: tenant.to_string(),
            sha256,
        })
    }

    /// The body of a claim; `None` when there is no such claim (never
    /// stored, or swept) or the names are not a tenant id and a SHA-256.
    pub fn redeem(&self, tenant: &str, sha256: &str) -> io::Result<Option<Vec<u8>>> {
        if !is_tenant(tenant) || !is_sha256(sha256) {
            return Ok(None);
        }
        match &self.backend {
            Backend::Dir(dir) => dir.get(tenant, sha256),
            Backend::S3(bucket) => bucket.get(tenant, sha256, MAX_CLAIM_BYTES),
        }
    }

    /// Deletes the claims last checked in before `now` less the
    /// retention, and temporary files a crash left as old; returns how
    /// many. The claims it keeps are made their owner's only (`0600`), as
    /// claims are written, for those an earlier goad wrote with the umask's
    /// mode. A bucket's lifecycle rule does this for a bucket: nothing is
    /// swept there.
    pub fn sweep(&self, now: SystemTime) -> io::Result<u64> {
        let Backend::Dir(dir) = &self.backend else {
            return Ok(0);
        };
        match now.checked_sub(self.retention) {
            Some(cutoff) => dir.sweep(cutoff),
            None => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, File};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_body_is_stored_once_per_tenant_redeemed_and_swept_after_its_retention() {
        let dir = tempfile::tempdir().unwrap();
        let claims = ClaimStore::new(dir.path(), 60_000);
        let body = vec![7u8; 10_000];
        let first = claims.check_in("acme", &body, None).unwrap();
        assert_eq!(
            first,
            claims.check_in("acme", &body, None).unwrap(),
            "reused"
        );
        assert_eq!(
            first.urn(),
            format!("urn:goad:claim:v1:acme:{}", first.sha256)
        );
        assert!(is_sha256(&first.sha256));
        let other = claims.check_in("globex", &body, None).unwrap();
        assert_eq!(other.sha256, first.sha256, "content-addressed");
        assert_eq!(claims.redeem("acme", &first.sha256).unwrap(), Some(body));
        assert_eq!(claims.redeem("acme", &"0".repeat(64)).unwrap(), None);
        assert_eq!(
            claims.redeem("..", &first.sha256).unwrap(),
            None,
            "no path outside"
        );
        assert_eq!(claims.redeem("acme", "../globex").unwrap(), None);
        assert!(claims.check_in("../x", b"y", None).is_err());
        let claim_file = dir.path().join("acme").join(&first.sha256);
        let mode = || fs::metadata(&claim_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(), 0o600, "the body its owner's only");
        // A claim an earlier goad wrote with the umask's mode is made the
        // owner's only by the next sweep, and still redeemed.
        fs::set_permissions(&claim_file, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(claims.sweep(SystemTime::now()).unwrap(), 0);
        assert_eq!(mode(), 0o600, "tightened");
        assert!(claims.redeem("acme", &first.sha256).unwrap().is_some());
        let files = |t: &str| fs::read_dir(dir.path().join(t)).unwrap().count();
        assert_eq!(
            (files("acme"), files("globex")),
            (1, 1),
            "no temporary file left"
        );

        // acme's claim was last checked in two minutes ago: past retention.
        let old = SystemTime::now() - Duration::from_secs(120);
        File::options()
            .write(true)
            .open(&claim_file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(claims.sweep(SystemTime::now()).unwrap(), 1);
        assert_eq!(claims.redeem("acme", &first.sha256).unwrap(), None);
        assert!(claims.redeem("globex", &first.sha256).unwrap().is_some());
    }
}
