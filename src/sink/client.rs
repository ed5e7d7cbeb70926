//! The HTTP client every one of goad's sinks uses (HTTP sinks posting to
//! one host share one, see `shared_clients`), the
//! roots its TLS trusts and the certificate it presents; the
//! percent-encoding of what goes into its URLs and forms, and reading a
//! credentials service's answer (or quoting one that failed).

use super::egress::Egress;
use super::proxy_env::{environment_proxy, ProxyUnreached, Scheme};
use super::resolver::CachingResolver;
use super::status::BadStatus;
use crate::config::ConfigError;
use crate::limits::{HTTP_BUFFER_BYTES, HTTP_MAX_RESPONSE_HEAD_BYTES, REQUEST_PAST_DEADLINE_MS};
use crate::pem::{certificates, private_key, PemFile};
use rustls::pki_types::PrivateKeyDer;
use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};
use ureq::typestate::{WithBody, WithoutBody};
use ureq::unversioned::transport::{ConnectionDetails, Connector, DefaultConnector, Transport};
use ureq::RequestBuilder;

/// An HTTP client for URLs of both schemes: an [`agent_with_tls`] for
/// each, so that a request goes through the proxy the environment names
/// for its URL's scheme (see [`super::proxy_env`]); each built as its
/// first request is made (most clients only ever ask URLs of one scheme).
/// Its requests are made as an agent's are.
pub(crate) struct Client {
    timeout_ms: u64,
    idle_connections: usize,
    tls: TlsConfig,
    egress: Egress,
    http: OnceLock<ureq::Agent>,
    https: OnceLock<ureq::Agent>,
}

impl Client {
    /// A keep-alive pool of `idle_connections` per scheme, per-phase
    /// timeouts of `timeout_ms`, and TLS trusting the default roots (see
    /// [`agent_with_tls`]).
    pub(crate) fn new(timeout_ms: u64, idle_connections: usize) -> Client {
        let tls = crate::tls_provider::ureq_tls().build();
        Client::with_tls(timeout_ms, idle_connections, tls, Egress::open())
    }

    /// `new`, for the clients of AWS's services: trusting the roots
    /// `AWS_CA_BUNDLE` names, if any (see [`crate::trusted_roots::aws_roots`]).
    pub(crate) fn for_aws(timeout_ms: u64, idle_connections: usize) -> Client {
        let roots = crate::trusted_roots::aws_roots();
        let tls = crate::tls_provider::ureq_tls().root_certs(roots).build();
        Client::with_tls(timeout_ms, idle_connections, tls, Egress::open())
    }

    /// `new`, with TLS as `tls` says, connecting only where `egress` allows.
    pub(crate) fn with_tls(
        timeout_ms: u64,
        idle_connections: usize,
        tls: TlsConfig,
        egress: Egress,
    ) -> Client {
        Client {
            timeout_ms,
            idle_connections,
            tls,
            egress,
            http: OnceLock::new(),
            https: OnceLock::new(),
        }
    }

    /// The agent for requests to `url`.
    pub(crate) fn agent(&self, url: &str) -> &ureq::Agent {
        let scheme = Scheme::of(url);
        let agent = match scheme {
            Scheme::Http => &self.http,
            Scheme::Https => &self.https,
        };
        agent.get_or_init(|| {
            let (tls, egress) = (self.tls.clone(), self.egress.clone());
            agent_with_tls(self.timeout_ms, self.idle_connections, tls, egress, scheme)
        })
    }

    pub(crate) fn get(&self, url: impl AsRef<str>) -> RequestBuilder<WithoutBody> {
        let url = url.as_ref();
        self.agent(url).get(url)
    }

    pub(crate) fn put(&self, url: impl AsRef<str>) -> RequestBuilder<WithBody> {
        let url = url.as_ref();
        self.agent(url).put(url)
    }

    pub(crate) fn post(&self, url: impl AsRef<str>) -> RequestBuilder<WithBody> {
        let url = url.as_ref();
        self.agent(url).post(url)
    }
}

/// An HTTP client for URLs of `scheme`: a keep-alive pool of
/// `idle_connections`, per-phase timeouts of `timeout_ms` (connect, send,
/// receive; a request also ends by its attempt's deadline, see
/// [`request_timeout`]), statuses as answers rather than errors, no
/// redirects followed, `HTTP_BUFFER_BYTES` of buffers each way per
/// connection (response heads of at most `HTTP_MAX_RESPONSE_HEAD_BYTES`),
/// TLS as `tls` says (roots, client certificate), the environment's proxy
/// for `scheme`, and connecting only where `egress` allows. Hosts'
/// addresses are kept a while, for the whole process (see
/// [`super::address_book`]).
pub(crate) fn agent_with_tls(
    timeout_ms: u64,
    idle_connections: usize,
    tls: TlsConfig,
    egress: Egress,
    scheme: Scheme,
) -> ureq::Agent {
    let timeout = Some(std::time::Duration::from_millis(timeout_ms));
    // A proxy variable that names none was refused before any sink was
    // built (`check_client_environment`).
    let proxy = environment_proxy(scheme).ok().flatten();
    let config = ureq::Agent::config_builder()
        .proxy(proxy)
        .tls_config(tls)
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .max_idle_connections_per_host(idle_connections)
        .max_idle_connections(idle_connections)
        .input_buffer_size(HTTP_BUFFER_BYTES)
        .output_buffer_size(HTTP_BUFFER_BYTES)
        .max_response_header_size(HTTP_MAX_RESPONSE_HEAD_BYTES)
        .timeout_connect(timeout)
        .timeout_send_request(timeout)
        .timeout_send_body(timeout)
        .timeout_recv_response(timeout)
        .timeout_recv_body(timeout)
        .user_agent(concat!("goad/", env!("CARGO_PKG_VERSION")))
        .build();
    agent_of(config, egress, scheme)
}

/// An agent of `config`, for URLs of `scheme`, with goad's resolver (see
/// [`CachingResolver`]) and connectors (a failure to reach the proxy said
/// as such, and connections counted).
pub(crate) fn agent_of(
    config: ureq::config::Config,
    egress: Egress,
    scheme: Scheme,
) -> ureq::Agent {
    let resolver = CachingResolver::new(egress, scheme);
    let connector = NamesProxy(DefaultConnector::new(), scheme).chain(CountsOpened);
    ureq::Agent::with_parts(config, connector, resolver)
}

/// Refuses what every client of goad's reads from the environment and
/// would otherwise pass over: a proxy variable that names no proxy
/// ([`super::proxy_env`]) and roots named (`SSL_CERT_FILE`,
/// `SSL_CERT_DIR`) that do not load ([`crate::trusted_roots`]). Run where a config's clients are first
/// built: its sinks and claim bucket, its `ingest_jwt` key sets.
pub(crate) fn check_client_environment() -> Result<(), ConfigError> {
    super::proxy_env::check_proxy_variables()?;
    crate::trusted_roots::check_default_roots()
}

/// How long a sink's request may take in all, from now, for an attempt
/// due to time out at `deadline`: a little past it, so that the shard's
/// timer fails the attempt as `attempt_timeout` first and the worker is
/// back soon after. Each phase also has the agent's own timeout; together
/// they could add up to several times the attempt's, and each worker a
/// slow receiver held past its attempt's deadline would be replaced by
/// another, while its slot went to the receiver's next attempt. With no
/// name to look up (a host's addresses are kept, see
/// [`super::address_book`]), a request-wide timeout starts no thread.
pub(crate) fn request_timeout(deadline: Instant) -> Option<Duration> {
    let past = Duration::from_millis(REQUEST_PAST_DEADLINE_MS);
    Some(deadline.saturating_duration_since(Instant::now()) + past)
}

/// A request's transport error, as an attempt's failure says it: one cut
/// by [`request_timeout`] names the attempt's deadline, a tunnel the
/// egress proxy did not open says why (see [`proxy_refusal`]), a proxy
/// not reached says so ([`ProxyUnreached`]), a TLS
/// failure that a sink's config can mend says how (see [`tls_hint`]), and
/// a connection the peer ended says so before the system's word for it.
pub(crate) fn transport_error(e: ureq::Error) -> super::BoxError {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Global) => {
            "no answer by the attempt's deadline (dispatch.attempt_timeout_ms)".into()
        }
        ureq::Error::ConnectProxyFailed(why) => proxy_refusal(&why).into(),
        e => match tls_hint(&e) {
            None if ProxyUnreached::of(&e).is_some() => e.into_io().to_string().into(),
            Some(hint) => format!("{e} ({hint})").into(),
            None if ended_by_peer(&e) => {
                format!("the connection ended with no answer ({e})").into()
            }
            None => e.into(),
        },
    }
}

/// The environment's egress proxy's refusal of a tunnel (`why` is ureq's
/// `proxy server responded 407/407`, or `… did not respond` when it ended
/// the connection without answering), with what its status most often
/// means.
fn proxy_refusal(why: &str) -> String {
    let status = why
        .strip_prefix("proxy server responded ")
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse::<u16>().ok());
    let said = match status {
        Some(407) => "HTTP 407: it wants credentials, or others than those given: they go in its \
                      URL, as HTTPS_PROXY=http://user:password@proxy:3128"
            .to_string(),
        Some(403) => "HTTP 403: its policy refuses the receiver's host or port".to_string(),
        Some(status @ (502..=504)) => format!("HTTP {status}: it could not reach the receiver"),
        Some(status) => format!("HTTP {status}"),
        None if why == "proxy server did not respond" => {
            "it ended the connection without answering".to_string()
        }
        None => why.to_string(),
    };
    format!("the egress proxy opened no tunnel to the receiver ({said})")
}

/// What a sink's config can do about a TLS handshake that failed, where
/// the failure says: a certificate that chains to no root trusted here
/// (a private CA's, or a proxy's that intercepts TLS), an answer that is
/// not TLS (a plain HTTP server at an https:// URL), a receiver that asks
/// for a client certificate or does not trust the one presented, or one
/// that speaks no TLS version goad does.
fn tls_hint(e: &ureq::Error) -> Option<&'static str> {
    use rustls::{AlertDescription, CertificateError, Error, InvalidMessage};
    Some(match tls_error(e)? {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "its certificate chains to no root trusted here: a private CA's certificate goes in an HTTP sink's ca_file, or, for all of goad's clients, in the file SSL_CERT_FILE names"
        }
        Error::InvalidMessage(InvalidMessage::InvalidContentType) => {
            "the receiver answered with something other than TLS: one that serves plain HTTP takes an http:// URL"
        }
        Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the receiver asks for a client certificate: an HTTP sink presents one with client_cert_file and client_key_file"
        }
        Error::AlertReceived(AlertDescription::UnknownCA) => {
            "the receiver trusts no CA that signed the client certificate presented (client_cert_file)"
        }
        Error::AlertReceived(AlertDescription::ProtocolVersion) => {
            "the receiver speaks no TLS version goad does: TLS 1.2 and 1.3"
        }
        _ => return None,
    })
}

/// The TLS error that failed a request, if one did.
pub(crate) fn tls_error(e: &ureq::Error) -> Option<&rustls::Error> {
    let ureq::Error::Io(io) = e else {
        return None;
    };
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Whether two sets of roots trust the same certificates.
pub(crate) fn same_roots(a: &RootCerts, b: &RootCerts) -> bool {
    match (a, b) {
        (RootCerts::WebPki, RootCerts::WebPki) => true,
        (RootCerts::PlatformVerifier, RootCerts::PlatformVerifier) => true,
        // One list (the environment's, held by every sink without a
        // `ca_file`) is the same without reading its certificates.
        (RootCerts::Specific(a), RootCerts::Specific(b)) => {
            std::sync::Arc::ptr_eq(a, b)
                || a.len() == b.len() && a.iter().zip(b.iter()).all(|(a, b)| a.der() == b.der())
        }
        _ => false,
    }
}

/// Whether two client certificates (or none) are the same chain and key.
pub(crate) fn same_client_certificate(a: Option<&ClientCert>, b: Option<&ClientCert>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.certs().len() == b.certs().len()
                && a.certs()
                    .iter()
                    .zip(b.certs())
                    .all(|(a, b)| a.der() == b.der())
                && a.private_key().der() == b.private_key().der()
        }
        _ => false,
    }
}

thread_local! {
    /// Connections this thread's agents opened (ureq connects on the
    /// thread that sends): a try that opened none went over a pooled one.
    static OPENED: Cell<u64> = const { Cell::new(0) };
}

/// The first link of every agent's connector chain: ureq's connectors (a
/// proxy's, TCP, TLS), with a connection the environment's proxy for URLs
/// of its scheme did not make said as such ([`ProxyUnreached`]). (A failure
/// to look its host up is said so by [`CachingResolver`].)
#[derive(Debug)]
struct NamesProxy(DefaultConnector, Scheme);

impl Connector for NamesProxy {
    type Out = Box<dyn Transport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let NamesProxy(connector, scheme) = self;
        connector
            .connect(details, chained)
            .map_err(|e| match details.config.proxy() {
                Some(proxy) if !proxy.is_no_proxy(details.uri) && ProxyUnreached::is_proxys(&e) => {
                    ProxyUnreached::error(proxy, *scheme, e)
                }
                _ => e,
            })
    }
}

/// The last link of every agent's connector chain: counts the connections
/// it opens, in `OPENED`.
#[derive(Debug)]
struct CountsOpened;

impl Connector<Box<dyn Transport>> for CountsOpened {
    type Out = Box<dyn Transport>;

    fn connect(
        &self,
        _: &ConnectionDetails,
        chained: Option<Box<dyn Transport>>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if chained.is_some() {
            OPENED.set(OPENED.get() + 1);
        }
        Ok(chained)
    }
}

/// Tries of one request over pooled connections the receiver had closed,
/// at most (each such try fails at once).
const MAX_STALE_TRIES: usize = 4;

/// Sends a request with `send`, again when a try went over a kept-alive
/// connection that ended without an answer: most often the receiver closed
/// it as it was reused (its idle timeout raced the request, which never
/// reached its application), as curl and Go's client assume; a receiver
/// that took the request and then dropped the connection gets it twice,
/// which at-least-once delivery allows. A try over a connection it opened
/// itself is not repeated: that failure is the receiver's.
pub(crate) fn send_past_stale_connections<T>(
    mut send: impl FnMut() -> Result<T, ureq::Error>,
) -> Result<T, ureq::Error> {
    let mut stale_tries = 0;
    loop {
        let opened = OPENED.get();
        let sent = send();
        match &sent {
            Err(e) if ended_by_peer(e) && OPENED.get() == opened => stale_tries += 1,
            _ => return sent,
        }
        if stale_tries == MAX_STALE_TRIES {
            return sent;
        }
    }
}

/// Whether `e` is the connection's end: reset, or closed, by the peer.
pub(super) fn ended_by_peer(e: &ureq::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    match e {
        ureq::Error::Io(io) => matches!(
            io.kind(),
            ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
        ),
        _ => false,
    }
}

/// The certificates of a PEM file, as roots to trust.
pub(crate) fn root_certificates(file: &PemFile<'_>) -> Result<RootCerts, ConfigError> {
    file.load(roots)
}

/// The certificates of a PEM text, as roots to trust; an error says why
/// there are none.
pub(crate) fn roots(pem: &[u8]) -> Result<RootCerts, String> {
    let roots = certificates(pem)?;
    let roots = roots
        .iter()
        .map(|der| Certificate::from_der(der).to_owned());
    Ok(RootCerts::from(roots))
}

/// The certificate chain of one PEM file and the private key of another,
/// which must fit it, as a TLS client's certificate.
pub(crate) fn client_certificate(
    chain: &PemFile<'_>,
    key: &PemFile<'_>,
) -> Result<ClientCert, ConfigError> {
    let chain_der = chain.load(certificates)?;
    let (key_der, key_for_ureq) = key.load(rustls_and_ureq_key)?;
    let provider = crate::tls_provider::tls_provider();
    rustls::sign::CertifiedKey::from_der(chain_der.clone(), key_der, &provider)
        .map_err(|e| key.refused(format!("it does not fit the certificate ({e})")))?;
    let chain: Vec<Certificate<'static>> = chain_der
        .iter()
        .map(|der| Certificate::from_der(der).to_owned())
        .collect();
    Ok(ClientCert::new_with_certs(&chain, key_for_ureq))
}

/// The private key of a PEM text, as rustls takes it (to check it fits
/// its certificate) and as ureq does.
fn rustls_and_ureq_key(
    pem: &[u8],
) -> Result<(PrivateKeyDer<'static>, PrivateKey<'static>), String> {
    let der = private_key(pem)?;
    let key = PrivateKey::from_pem(pem).map_err(|e| format!("no PEM private key in it ({e})"))?;
    Ok((der, key))
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

/// A URL without its user information and query, which may hold secrets.
pub(crate) fn shown_url(url: &str) -> String {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return "(not a URL)".into();
    };
    let host = uri.host().unwrap_or_default();
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    let scheme = uri.scheme_str().unwrap_or("http");
    format!("{scheme}://{host}{port}{}", uri.path())
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

/// The body of a credentials service's 200 answer; a transport error (as
/// [`transport_error`] says it) or another status (with the start of its
/// body) is the error.
pub(crate) fn ok_body(
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<String, super::BoxError> {
    let response = response.map_err(transport_error)?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .with_config()
        .limit(MAX_CREDENTIALS_ANSWER_BYTES)
        .read_to_string()?;
    if status == 200 {
        return Ok(body);
    }
    Err(failed_answer(status, body.as_bytes()).into())
}

/// An answer of `status` other than the one asked for, as an error: its
/// body quoted as an AWS XML error's code and message (`HTTP status 404:
/// NoSuchBucket: The specified bucket does not exist`), else as its start
/// (see `status::excerpt`), or the status alone when the body is empty.
pub(crate) fn failed_answer(status: u16, answer: &[u8]) -> BadStatus {
    let quoted = super::aws_xml::error(answer).unwrap_or_else(|| super::status::excerpt(answer));
    BadStatus {
        status,
        redirect_to: None,
        answer: quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_url_keeps_its_origin_and_path_only() {
        assert_eq!(
            shown_url("https://user:pw@hooks.example.com:8443/in/a?token=s3cret#x"),
            "https://hooks.example.com:8443/in/a"
        );
        assert_eq!(
            shown_url("http://127.0.0.1/hooks"),
            "http://127.0.0.1/hooks"
        );
        assert_eq!(shown_url("not a url"), "(not a URL)");
    }

    #[test]
    fn a_credentials_service_that_ended_the_connection_is_said_so() {
        let ended = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let failed = ok_body(Err(ureq::Error::Io(ended))).unwrap_err();
        assert_eq!(
            failed.to_string(),
            "the connection ended with no answer (io: connection reset)"
        );
    }
}
