//! What a node takes from its environment beyond its config: the roots
//! its clients trust (`SSL_CERT_FILE`).

use super::*;
use common::fixtures;

/// With `SSL_CERT_FILE` naming a private CA's certificate, a sink with no
/// `ca_file` trusts that CA (as a network that inspects TLS needs of
/// every client); a file that does not load is refused, naming the
/// variable and the file.
#[test]
fn ssl_cert_file_names_the_roots_every_client_trusts() {
    let receiver = Receiver::start_tls(
        include_bytes!("../fixtures/localhost-cert.pem"),
        include_bytes!("../fixtures/localhost-key.pem"),
        |_| Reply::status(200),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = fixtures().join("test-ca.pem");
    let node = serve_with(dir.path(), &receiver.url("/hooks"), |command| {
        command.env("SSL_CERT_FILE", &ca);
    });
    let reply = Client::connect(node.addr).request("POST", "/v1/sources/a/hooks", &[], b"trusted");
    assert_eq!(reply.status, 202);
    wait_until("delivered over TLS", Duration::from_secs(20), || {
        receiver.count() == 1
    });
    assert_eq!(receiver.received()[0].body, b"trusted");
    drop(node);

    for (file, why) in [
        (
            "missing.pem",
            "cannot read it: No such file or directory (os error 2)",
        ),
        ("localhost-key.pem", "no CERTIFICATE in it"),
    ] {
        let path = fixtures().join(file);
        let out = Command::new(env!("CARGO_BIN_EXE_goad"))
            .args(["check", "--environment", "--config"])
            .arg(dir.path().join("goad.toml"))
            .env("SSL_CERT_FILE", &path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            format!("the environment's SSL_CERT_FILE must be a PEM file of root certificates ({why}), got {path:?}\n")
        );
    }
}
