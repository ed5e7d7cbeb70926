//! The HTTP client every one of goad's sinks uses, one per sink entry, and
//! the roots its TLS trusts; the percent-encoding of what goes into its
//! URLs and forms, and reading a credentials service's answer.

use std::path::Path;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// The HTTP client of one sink: a keep-alive pool of `idle_connections`,
/// per-phase timeouts of `timeout_ms` (connect, send, receive: ureq 3's
/// `timeout_global` would start a thread per request), statuses as
/// answers rather than errors, no redirects followed, and TLS trusting
/// Mozilla's root certificates.
pub(crate) fn agent(timeout_ms: u64, idle_connections: usize) -> ureq::Agent {
    agent_trusting(timeout_ms, idle_connections, RootCerts::WebPki)
}

/// `agent`, with TLS trusting `roots`.
pub(crate) fn agent_trusting(
    timeout_ms: u64,
    idle_connections: usize,
    roots: RootCerts,
) -> ureq::Agent {
    let timeout = Some(std::time::Duration::from_millis(timeout_ms));
    ureq::Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .max_idle_connections_per_host(idle_connections)
        .max_idle_connections(idle_connections)
        .timeout_connect(timeout)
        .timeout_send_request(timeout)
        .timeout_send_body(timeout)
        .timeout_recv_response(timeout)
        .timeout_recv_body(timeout)
        .user_agent(concat!("goad/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// The certificates of the PEM file at `path`, as roots to trust; the
/// error says why there are none.
pub(crate) fn root_certificates(path: &Path) -> Result<RootCerts, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certificates =
        crate::pem::certificates(&pem).map_err(|why| format!("{}: {why}", path.display()))?;
    let roots = certificates
        .iter()
        .map(|der| Certificate::from_der(der).to_owned());
    Ok(RootCerts::from(roots))
}

/// `text` percent-encoded but for RFC 3986's unreserved characters: one
/// path segment or one form value, whatever it holds.
pub(crate) fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `fields` as an `application/x-www-form-urlencoded` body.
pub(crate) fn form(fields: &[(&str, &str)]) -> String {
    let encoded: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{name}={}", percent_encoded(value)))
        .collect();
    encoded.join("&")
}

/// The most of a credentials service's answer read.
const MAX_CREDENTIALS_ANSWER_BYTES: u64 = 64 * 1024;

/// The body of a credentials service's 200 answer; a transport error or
/// another status (with the start of its body) is the error.
pub(crate) fn ok_body(
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<String, super::BoxError> {
    let response = response?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .with_config()
        .limit(MAX_CREDENTIALS_ANSWER_BYTES)
        .read_to_string()?;
    if status == 200 {
        return Ok(body);
    }
    let excerpt: String = body.chars().take(256).collect();
    Err(match excerpt.trim() {
        "" => format!("HTTP status {status}").into(),
        excerpt => format!("HTTP status {status}: {excerpt}").into(),
    })
}
