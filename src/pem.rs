//! PEM texts goad reads: the certificates and private key of the node's
//! HTTPS, and the root certificates an HTTP sink trusts.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

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
