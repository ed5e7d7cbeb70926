//! Helpers for the unit tests that start an engine or a node.

use crate::config::{Config, SinkConfig, SourceConfig};
use std::path::Path;
use std::time::{Duration, Instant};

/// One shard in `data_dir`, listening on a free loopback port, and source
/// `s` of tenant `t` with one sink.
pub(crate) fn one_source(data_dir: &Path, sink: SinkConfig) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        shards: 1,
        ..Config::default()
    };
    config.sources.push(SourceConfig::new("s", "t", vec![sink]));
    config
}

/// Waits until `done`, failing the test after 20 s.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A file of `tests/fixtures/`.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(path).unwrap()
}

/// The roots a client trusting the tests' CA (`test-ca.pem`, which signed
/// `localhost-cert.pem`) holds.
fn test_ca_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for ca in crate::pem::certificates(&fixture("test-ca.pem")).unwrap() {
        roots.add(ca).unwrap();
    }
    roots
}

/// A TLS client on `provider` that trusts the tests' CA and shows no
/// certificate of its own.
pub(crate) fn test_ca_client(
    provider: std::sync::Arc<rustls::crypto::CryptoProvider>,
) -> std::sync::Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(test_ca_roots())
        .with_no_client_auth();
    std::sync::Arc::new(config)
}
