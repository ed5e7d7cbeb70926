//! The crypto provider of every TLS connection goad makes or takes: its
//! sinks' and the operator commands' clients, and the node's HTTPS front.
//!
//! rustls's aws-lc-rs provider, which offers the hybrid post-quantum key
//! exchange X25519MLKEM768 first (as current browsers and TLS libraries
//! do), so a recording of a hook's delivery cannot be decrypted later
//! with a quantum computer, and falls back to X25519 and the NIST curves
//! for peers without it. ring's provider, goad's before, has no
//! post-quantum key exchange (rustls deprecates it for that from 0.23.48).
//! One instance for the process: ureq keeps connections in one pool only
//! for TLS configs whose provider is the same instance.

use rustls::crypto::CryptoProvider;
use std::sync::{Arc, OnceLock};

/// The provider (see the module docs).
pub(crate) fn tls_provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    let provider = || Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    PROVIDER.get_or_init(provider).clone()
}

/// A ureq TLS config with the provider, trusting the default roots
/// (Mozilla's, or those the environment names: see
/// [`crate::trusted_roots`]) until
/// told otherwise.
pub(crate) fn ureq_tls() -> ureq::tls::TlsConfigBuilder {
    ureq::tls::TlsConfig::builder()
        .unversioned_rustls_crypto_provider(tls_provider())
        .root_certs(crate::trusted_roots::default_roots())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pem::{certificates, private_key};
    use crate::test_support::{fixture, test_ca_client};
    use rustls::pki_types::ServerName;
    use rustls::{ClientConnection, NamedGroup, ServerConfig};
    use rustls::{ServerConnection, SideData};

    /// A client and a server with the provider agree on X25519MLKEM768;
    /// a peer that offers only X25519 still gets through.
    #[test]
    fn the_key_exchange_is_post_quantum_where_the_peer_offers_it() {
        let server = ServerConfig::builder_with_provider(tls_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                certificates(&fixture("localhost-cert.pem")).unwrap(),
                private_key(&fixture("localhost-key.pem")).unwrap(),
            )
            .unwrap();
        let classical = CryptoProvider {
            kx_groups: vec![rustls::crypto::aws_lc_rs::kx_group::X25519],
            ..rustls::crypto::aws_lc_rs::default_provider()
        };
        for (client_provider, group) in [
            (tls_provider(), NamedGroup::X25519MLKEM768),
            (Arc::new(classical), NamedGroup::X25519),
        ] {
            let name = ServerName::try_from("localhost").unwrap();
            let mut client = ClientConnection::new(test_ca_client(client_provider), name).unwrap();
            let mut server = ServerConnection::new(Arc::new(server.clone())).unwrap();
            shake_hands(&mut client, &mut server);
            assert_eq!(negotiated(&client), Some(group));
            assert_eq!(negotiated(&server), Some(group));
        }
    }

    /// Passes the two sides' records to each other until both are done.
    fn shake_hands(client: &mut ClientConnection, server: &mut ServerConnection) {
        for _ in 0..10 {
            let mut records = Vec::new();
            client.write_tls(&mut records).unwrap();
            server.read_tls(&mut records.as_slice()).unwrap();
            server.process_new_packets().unwrap();
            records.clear();
            server.write_tls(&mut records).unwrap();
            client.read_tls(&mut records.as_slice()).unwrap();
            client.process_new_packets().unwrap();
            if !client.is_handshaking() && !server.is_handshaking() {
                return;
            }
        }
        panic!("the handshake did not end");
    }

    fn negotiated<S: SideData>(side: &rustls::ConnectionCommon<S>) -> Option<NamedGroup> {
        side.negotiated_key_exchange_group().map(|g| g.name())
    }
}
