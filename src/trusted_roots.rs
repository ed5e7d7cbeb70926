//! The root certificates goad's clients trust where nothing more
//! particular is said (a sink's `ca_file`, the operator commands'
//! `--ca-file`): Mozilla's, built in (`webpki-roots`), or, when the
//! environment's `SSL_CERT_FILE` names a PEM file, its certificates
//! instead. OpenSSL, curl, Python and Go read that variable too, and a
//! network whose proxy inspects TLS (re-signing with its own CA) sets it
//! for every program; without it, every queue, credentials and key-set
//! request there would fail as `UnknownIssuer`. The file is read once, at
//! its first use (a restart reads it again).

use crate::config::ConfigError;
use crate::pem::PemFile;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use ureq::tls::RootCerts;

/// The roots (see the module docs); Mozilla's when `SSL_CERT_FILE`'s file
/// cannot be loaded, which [`check_default_roots`] refuses before any
/// client is built.
pub(crate) fn default_roots() -> RootCerts {
    loaded().as_ref().cloned().unwrap_or(RootCerts::WebPki)
}

/// Refuses an `SSL_CERT_FILE` (set, not empty) that is not a readable PEM
/// file of certificates, naming the variable and the file.
pub(crate) fn check_default_roots() -> Result<(), ConfigError> {
    match loaded() {
        Ok(_) => Ok(()),
        Err((path, why)) => Err(the_file(path).refused(why.clone())),
    }
}

/// The roots `SSL_CERT_FILE` names (Mozilla's when it is unset or empty),
/// or its file and why it does not load; read once.
fn loaded() -> &'static Result<RootCerts, (PathBuf, String)> {
    static ROOTS: OnceLock<Result<RootCerts, (PathBuf, String)>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let Some(path) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) else {
            return Ok(RootCerts::WebPki);
        };
        let path = PathBuf::from(path);
        let roots = the_file(&path).parse(crate::sink::client::roots);
        roots.map_err(|why| (path, why))
    })
}

/// `SSL_CERT_FILE` as a PEM file its errors name.
fn the_file(path: &Path) -> PemFile<'_> {
    PemFile {
        key: "the environment's SSL_CERT_FILE",
        holds: "a PEM file of root certificates",
        path,
    }
}
