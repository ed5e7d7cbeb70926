//! The root certificates goad's clients trust where nothing more
//! particular is said (a sink's `ca_file`, the operator commands'
//! `--ca-file`): Mozilla's, built in (`webpki-roots`), or, when the
//! environment names roots of its own, those instead: the certificates
//! of the PEM file `SSL_CERT_FILE` names and of every PEM file in the
//! directories `SSL_CERT_DIR` lists (separated by `:`; a file holding no
//! certificate, or not a file, is passed over). OpenSSL, curl, Python and
//! Go read these variables too, and a network whose proxy inspects TLS
//! (re-signing with its own CA) sets them for every program; without
//! them, every queue, credentials and key-set request there would fail as
//! `UnknownIssuer`. They are read once, at their first use (a restart
//! reads them again).

use crate::config::ConfigError;
use crate::pem::{certificates, PemFile};
use rustls::pki_types::CertificateDer;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use ureq::tls::{Certificate, RootCerts};

/// The roots (see the module docs); Mozilla's when those the environment
/// names cannot be loaded, which [`check_default_roots`] refuses before
/// any client is built.
pub(crate) fn default_roots() -> RootCerts {
    loaded().as_ref().cloned().unwrap_or(RootCerts::WebPki)
}

/// The roots the clients of AWS's services trust (SQS, STS, S3, SSO): the
/// certificates of the PEM file `AWS_CA_BUNDLE` names, else the AWS
/// profile's `ca_bundle` (`AWS_PROFILE`, else `default`, in
/// `AWS_CONFIG_FILE` or `$HOME/.aws/config`), as the AWS SDKs and CLI
/// read them, instead of the default roots (for an S3-compatible store or
/// an endpoint of a private CA's); the default roots when neither names
/// a file, or it does not load, which [`check_aws_roots`] refuses before
/// any such client is built.
pub(crate) fn aws_roots() -> RootCerts {
    aws_loaded()
        .as_ref()
        .cloned()
        .unwrap_or_else(|_| default_roots())
}

/// Refuses an `AWS_CA_BUNDLE` (set, not empty), or a profile's
/// `ca_bundle`, that is not a readable PEM file of certificates, naming
/// the variable or setting and the file.
pub(crate) fn check_aws_roots() -> Result<(), ConfigError> {
    refusal(aws_loaded())
}

/// The roots `AWS_CA_BUNDLE` or the profile's `ca_bundle` names (the
/// default roots when neither names a file), or the file and why it does
/// not load; read once.
fn aws_loaded() -> &'static Result<RootCerts, Unloadable> {
    static ROOTS: OnceLock<Result<RootCerts, Unloadable>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let bundle = match set_path("AWS_CA_BUNDLE") {
            Some(path) => Some((Variable::AwsCaBundle, path)),
            None => crate::sink::profile_ca_bundle().map(|path| (Variable::AwsProfile, path)),
        };
        let Some((variable, path)) = bundle else {
            return Ok(default_roots());
        };
        let roots = named(variable, &path).parse(crate::sink::client::roots);
        roots.map_err(|why| (variable, path, why))
    })
}

/// Refuses an `SSL_CERT_FILE` (set, not empty) that is not a readable PEM
/// file of certificates, or an `SSL_CERT_DIR` directory that cannot be
/// read or holds no PEM certificate, naming the variable and the path.
pub(crate) fn check_default_roots() -> Result<(), ConfigError> {
    refusal(loaded())
}

/// The config error of roots that did not load, naming the variable and
/// the path.
fn refusal(loaded: &Result<RootCerts, Unloadable>) -> Result<(), ConfigError> {
    match loaded {
        Ok(_) => Ok(()),
        Err((variable, path, why)) => Err(named(*variable, path).refused(why.clone())),
    }
}

/// The path `variable` holds, if it is set and not empty (an empty one
/// names none).
fn set_path(variable: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// The variables (and the setting) that name roots.
#[derive(Clone, Copy)]
enum Variable {
    SslCertFile,
    SslCertDir,
    AwsCaBundle,
    /// The AWS profile's `ca_bundle`.
    AwsProfile,
}

/// A variable whose file or directory does not load, its path and why.
type Unloadable = (Variable, PathBuf, String);

/// The path `variable` names, as its errors name it.
fn named(variable: Variable, path: &Path) -> PemFile<'_> {
    let (key, holds) = match variable {
        Variable::SslCertFile => (
            "the environment's SSL_CERT_FILE",
            "a PEM file of root certificates",
        ),
        Variable::SslCertDir => (
            "the environment's SSL_CERT_DIR",
            "directories of PEM files of root certificates, separated by ':'",
        ),
        Variable::AwsCaBundle => (
            "the environment's AWS_CA_BUNDLE",
            "a PEM file of root certificates",
        ),
        Variable::AwsProfile => (
            "the AWS profile's ca_bundle",
            "a PEM file of root certificates",
        ),
    };
    PemFile { key, holds, path }
}

/// The roots the environment names (Mozilla's when it names none), or
/// the variable and path that do not load and why; read once.
fn loaded() -> &'static Result<RootCerts, Unloadable> {
    static ROOTS: OnceLock<Result<RootCerts, Unloadable>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let (file, directories) = (set_path("SSL_CERT_FILE"), set_path("SSL_CERT_DIR"));
        if file.is_none() && directories.is_none() {
            return Ok(RootCerts::WebPki);
        }
        let mut roots = Vec::new();
        if let Some(path) = file {
            match named(Variable::SslCertFile, &path).parse(certificates) {
                Ok(found) => roots.extend(found),
                Err(why) => return Err((Variable::SslCertFile, path, why)),
            }
        }
        let directories = directories.iter().flat_map(std::env::split_paths);
        for directory in directories.filter(|d| !d.as_os_str().is_empty()) {
            match directory_certificates(&directory) {
                Ok(found) => roots.extend(found),
                Err(why) => return Err((Variable::SslCertDir, directory, why)),
            }
        }
        let mut seen = HashSet::new();
        roots.retain(|root| seen.insert(root.as_ref().to_vec()));
        let roots = roots
            .iter()
            .map(|der| Certificate::from_der(der).to_owned());
        Ok(RootCerts::from(roots))
    })
}

/// The certificates of the PEM files in `directory`, in the order of
/// their names; a file that holds none, or cannot be read, and what is
/// not a file (or a link to one: an OpenSSL directory's hashed names are
/// links) are passed over, as OpenSSL and Go pass them over. An error
/// says why there are none.
fn directory_certificates(directory: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let entries = std::fs::read_dir(directory).map_err(|e| format!("cannot read it: {e}"))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    let mut found = Vec::new();
    for path in paths.iter().filter(|path| path.is_file()) {
        let file = named(Variable::SslCertDir, path).parse(certificates);
        found.extend(file.unwrap_or_default());
    }
    match found.is_empty() {
        true => Err("no PEM certificate in any file in it".into()),
        false => Ok(found),
    }
}
