//! TLS on the node's HTTP front (`http.tls_cert_file` and
//! `http.tls_key_file`): the server config from PEM files, and a
//! connection's reads and writes through rustls over its non-blocking
//! socket. The files are read when the node starts and at each reload
//! (a renewed certificate); new connections take the config in hand.

use crate::config::{ConfigError, HttpConfig};
use crate::pem::{certificates, private_key};
use parking_lot::RwLock;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// The TLS config new connections take; a reload replaces it.
pub type SharedTls = Arc<RwLock<Arc<ServerConfig>>>;

/// A server config for the certificate chain and private key of these
/// PEM texts (the key PKCS #8, PKCS #1 or SEC1); the error says what is
/// wrong with them.
pub fn server_config(chain_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, String> {
    server_config_of(certificates(chain_pem)?, private_key(key_pem)?)
}

fn server_config_of(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("it does not fit the certificate ({e})"))
}

/// The front's TLS config, when `http` names a certificate and key; an
/// error names the key whose file does not load.
pub(crate) fn from_config(http: &HttpConfig) -> Result<Option<Arc<ServerConfig>>, ConfigError> {
    let (Some(cert_file), Some(key_file)) = (&http.tls_cert_file, &http.tls_key_file) else {
        return Ok(None);
    };
    let cert = (
        "http.tls_cert_file",
        "a PEM certificate chain",
        cert_file.as_path(),
    );
    let key = (
        "http.tls_key_file",
        "the certificate's PEM private key",
        key_file.as_path(),
    );
    let chain = loaded(cert, certificates)?;
    let private_key = loaded(key, private_key)?;
    let config = server_config_of(chain, private_key).map_err(|why| not_loaded(key, why))?;
    Ok(Some(Arc::new(config)))
}

/// A config key naming a file, what the file must hold, and its path.
type FileKey<'a> = (&'a str, &'a str, &'a Path);

/// What `parse` makes of the file, or an error naming its key.
fn loaded<T>(file: FileKey<'_>, parse: fn(&[u8]) -> Result<T, String>) -> Result<T, ConfigError> {
    let (_, _, path) = file;
    let pem = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"));
    pem.and_then(|pem| parse(&pem))
        .map_err(|why| not_loaded(file, why))
}

fn not_loaded(file: FileKey<'_>, why: String) -> ConfigError {
    let (key, rule, path) = file;
    ConfigError::Invalid {
        key: key.into(),
        rule: format!("{rule} ({why})"),
        value: format!("{path:?}"),
    }
}

/// What a read through TLS ended on.
pub(super) struct ReadEnd {
    /// `input` reached the bound: bytes may be left to read.
    pub full: bool,
    /// The peer closed its half.
    pub closed: bool,
}

/// Reads plaintext into `input` until the socket would block, the peer
/// closes, or `input` reaches `max_buffer`.
pub(super) fn read_plaintext(
    tls: &mut ServerConnection,
    socket: &mut (impl Read + Write),
    input: &mut Vec<u8>,
    chunk: &mut [u8],
    max_buffer: usize,
) -> io::Result<ReadEnd> {
    let mut socket_closed = false;
    loop {
        loop {
            if input.len() >= max_buffer {
                return Ok(ReadEnd {
                    full: true,
                    closed: false,
                });
            }
            match tls.reader().read(chunk) {
                Ok(0) => {
                    return Ok(ReadEnd {
                        full: false,
                        closed: true,
                    })
                }
                Ok(n) => input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Closed without close_notify: what arrived stands.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Ok(ReadEnd {
                        full: false,
                        closed: true,
                    })
                }
                Err(e) => return Err(e),
            }
        }
        if socket_closed {
            return Ok(ReadEnd {
                full: false,
                closed: true,
            });
        }
        match tls.read_tls(socket) {
            Ok(0) => socket_closed = true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Ok(ReadEnd {
                    full: false,
                    closed: false,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if let Err(e) = tls.process_new_packets() {
            // Tell the peer why (an alert) before the connection closes.
            let _ = tls.write_tls(socket);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    }
}

/// Hands `output[written..]` to rustls and writes its records until the
/// socket would block; returns the new `written`.
pub(super) fn write_records(
    tls: &mut ServerConnection,
    socket: &mut impl Write,
    output: &[u8],
    mut written: usize,
) -> io::Result<usize> {
    loop {
        while tls.wants_write() {
            match tls.write_tls(socket) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(written),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if written == output.len() {
            return Ok(written);
        }
        match tls.writer().write(&output[written..])? {
            0 => return Ok(written),
            n => written += n,
        }
    }
}
