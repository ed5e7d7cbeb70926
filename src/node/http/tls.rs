//! TLS on the node's HTTP front (`http.tls_cert_file` and
//! `http.tls_key_file`): the server config from PEM files, and a
//! connection's reads and writes through rustls over its non-blocking
//! socket. The files are read when the node starts and at each reload
//! (a renewed certificate); new connections take the config in hand.

use crate::config::{ConfigError, HttpConfig};
use crate::pem::{certificates, private_key, PemFile};
use parking_lot::RwLock;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::sync::Arc;

/// The TLS config new connections take; a reload replaces it.
pub type SharedTls = Arc<RwLock<Arc<ServerConfig>>>;

/// A server config for the certificate chain and private key of these
/// PEM texts (the key PKCS #8, PKCS #1 or SEC1) that, given the PEM text
/// of client roots, accepts only clients with a certificate chaining to
/// them; the error says what is wrong with the texts.
pub fn server_config(
    chain_pem: &[u8],
    key_pem: &[u8],
    client_roots_pem: Option<&[u8]>,
) -> Result<ServerConfig, String> {
    let clients = match client_roots_pem {
        Some(pem) => Some(client_verifier(certificates(pem)?)?),
        None => None,
    };
    server_config_of(certificates(chain_pem)?, private_key(key_pem)?, clients)
}

/// Accepts clients whose certificate chains to one of `roots`.
fn client_verifier(
    roots: Vec<CertificateDer<'static>>,
) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut store = RootCertStore::empty();
    for root in roots {
        store
            .add(root)
            .map_err(|e| format!("not a usable root certificate ({e})"))?;
    }
    let provider = crate::tls_provider::tls_provider();
    WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
        .build()
        .map_err(|e| format!("no usable root certificate ({e})"))
}

/// The error is the key's: it does not fit the certificate.
fn server_config_of(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    clients: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<ServerConfig, String> {
    let builder = ServerConfig::builder_with_provider(crate::tls_provider::tls_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(verifier) => builder.with_client_cert_verifier(verifier),
    };
    builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("it does not fit the certificate ({e})"))
}

/// The front's TLS config, when `http` names a certificate and key; an
/// error names the key whose file does not load.
pub(crate) fn from_config(http: &HttpConfig) -> Result<Option<Arc<ServerConfig>>, ConfigError> {
    let (Some(cert_file), Some(key_file)) = (&http.tls_cert_file, &http.tls_key_file) else {
        return Ok(None);
    };
    let cert = PemFile {
        key: "http.tls_cert_file",
        holds: "a PEM certificate chain",
        path: cert_file,
    };
    let key = PemFile {
        key: "http.tls_key_file",
        holds: "the certificate's PEM private key",
        path: key_file,
    };
    let chain = cert.load(certificates)?;
    let private_key = key.load(private_key)?;
    let clients = match &http.tls_client_ca_file {
        Some(path) => {
            let file = PemFile {
                key: "http.tls_client_ca_file",
                holds: "a PEM file of root certificates",
                path,
            };
            let roots = file.load(certificates)?;
            Some(client_verifier(roots).map_err(|why| file.refused(why))?)
        }
        None => None,
    };
    let config = server_config_of(chain, private_key, clients).map_err(|why| key.refused(why))?;
    Ok(Some(Arc::new(config)))
}

/// What a read through TLS ended on.
pub(super) struct ReadEnd {
    /// `input` reached the bound: bytes may be left to read.
    pub full: bool,
    /// The peer closed its half.
    pub closed: bool,
}

/// Reads plaintext into `input` until the socket would block, the peer
/// closes, or `input` reaches `max_buffer` (not past it).
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
            let room = (max_buffer - input.len()).min(chunk.len());
            match tls.reader().read(&mut chunk[..room]) {
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
