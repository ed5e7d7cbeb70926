//! PEM texts goad reads: the certificates and private key of the node's
//! HTTPS, and the root certificates and client certificate of an HTTP
//! sink; and the files the config names for them.

use crate::bounded_read::read_at_most;
use crate::config::ConfigError;
use crate::limits::MAX_KEY_FILE_BYTES;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

/// A config key naming a PEM file: the key, what the file must hold, and
/// its path.
pub(crate) struct PemFile<'a> {
    pub key: &'a str,
    pub holds: &'a str,
    pub path: &'a Path,
}

impl PemFile<'_> {
    /// What `parse` makes of the file, or an error naming its key.
    pub fn load<T>(&self, parse: fn(&[u8]) -> Result<T, String>) -> Result<T, ConfigError> {
        self.parse(parse).map_err(|why| self.refused(why))
    }

    /// What `parse` makes of the file, or why it makes nothing of it.
    pub fn parse<T>(&self, parse: fn(&[u8]) -> Result<T, String>) -> Result<T, String> {
        let pem = read_at_most(self.path, MAX_KEY_FILE_BYTES);
        let pem = pem.map_err(|e| format!("cannot read it: {e}"))?;
        parse(&pem)
    }

    /// The error naming the key, what the file must hold and why it does not.
    pub fn refused(&self, why: String) -> ConfigError {
        ConfigError::Invalid {
            key: self.key.into(),
            rule: format!("{} ({why})", self.holds),
            value: format!("{:?}", self.path),
        }
    }
}

/// The certificates of a PEM text, in order; an error says why there are
/// none.
pub(crate) fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM ({e})"))?;
    match certificates.is_empty() {
        true => Err("no CERTIFICATE in it".into()),
        false => Ok(certificates),
    }
}

/// The private key of a PEM text (PKCS #8, PKCS #1 or SEC1).
pub(crate) fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("no PEM private key in it ({e})"))
}
