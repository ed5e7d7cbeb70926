//! The HTTP sink: a ureq Agent (keep-alive pool) shared with the sinks
//! posting to the same host over the same connections (see
//! `shared_clients`).
//!
//! Each attempt sends the body verbatim with the hook's content type,
//! Standard Webhooks headers, goad's headers and the forwarded provider
//! headers, and maps the status (see `status`). Each phase (connect, send,
//! receive) has its timeout, and the whole request ends a little past the
//! attempt's deadline (see `client::request_timeout`). Redirects are not
//! followed. The response body is read up to
//! `max_response_bytes` (so the connection can be reused) and dropped, but
//! for the start of a failure's, which its error quotes.
//!
//! The URL and the operator's headers are parsed once, when the sink is
//! built. A hook whose own value cannot be sent as a header (a library
//! caller's dedupe key with a line break, say) fails the attempt as
//! permanent: no retry could send it.

use super::client::{
    agent_with_tls, request_timeout, same_client_certificate, same_roots,
    send_past_stale_connections, shown_url, transport_error,
};
use super::egress::{Egress, PrivateAddress};
use super::forward::{forwarded, reserved_header};
use super::gcp_id_token::GoogleIdToken;
use super::oauth2::{ClientCredentials, Token};
use super::proxy_env::Scheme;
use super::signing::{signature_header, SigningKey};
use super::sigv4::{AwsSigning, SignError};
use super::status::{classify, EXCERPT_BYTES};
use super::{BoxError, Delivery, Sink, SinkError};
use crate::limits::{HTTP_MAX_HEADER_LINE_BYTES, HTTP_MAX_RESPONSE_BYTES, HTTP_TIMEOUT_MS};
use base64::prelude::{Engine as _, BASE64_STANDARD};
use std::io::Read as _;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use ureq::http::header::{
    HeaderName, HeaderValue, InvalidHeaderValue, AUTHORIZATION, CONTENT_TYPE,
};
use ureq::http::{Request, Uri};
use ureq::tls::{ClientCert, RootCerts};
use ureq::RequestExt as _;

/// The request method of an HTTP sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Post,
    Put,
    Patch,
}

/// What an HTTP sink needs, resolved from its config entry (a library
/// caller starts from [`HttpSinkOptions::new`]).
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpSinkOptions {
    pub url: String,
    pub method: Method,
    /// Operator headers (some values may be secrets); they win over
    /// forwarded provider headers, and a `content-type` over the hook's.
    /// Framing and hop-by-hop headers and goad's namespaces are refused
    /// (`reserved_header`).
    pub headers: Vec<(String, String)>,
    pub timeout_ms: u64,
    pub keys: Vec<SigningKey>,
    pub max_response_bytes: u64,
    /// The source's `forward_headers` allowlist, if any.
    pub forward_allow: Option<Vec<String>>,
    /// Idle keep-alive connections to keep (at least the sink's concurrency).
    pub idle_connections: usize,
    /// The root certificates an https:// endpoint's must chain to
    /// (`RootCerts::WebPki`: Mozilla's, built in).
    pub roots: RootCerts,
    /// The certificate presented to an https:// endpoint that asks for one
    /// (mutual TLS).
    pub client_certificate: Option<ClientCert>,
    /// Where it may connect (`[egress]` in a config); an attempt whose
    /// host resolves to no address allowed fails permanently.
    pub egress: Egress,
    /// The grant whose token every request carries (`authorization:
    /// Bearer`), if the receiver wants one.
    pub oauth2: Option<Arc<ClientCredentials>>,
    /// The Google ID token every request carries (`authorization:
    /// Bearer`), if the receiver is a Cloud Run service, a function or
    /// behind IAP.
    pub google_id_token: Option<Arc<GoogleIdToken>>,
    /// AWS Signature Version 4 of every request, if the receiver is an AWS
    /// service's endpoint that wants one (a Lambda function URL).
    pub aws_signing: Option<AwsSigning>,
}

impl HttpSinkOptions {
    /// A sink posting to `url` with the config's defaults: no headers nor
    /// secrets, 5 s per phase, 64 KiB of response read, every provider
    /// header forwarded, 8 idle connections, the default roots (Mozilla's,
    /// or those the environment names: `crate::trusted_roots`), no
    /// client certificate, any address.
    pub fn new(url: impl Into<String>) -> HttpSinkOptions {
        HttpSinkOptions {
            url: url.into(),
            method: Method::Post,
            headers: Vec::new(),
            timeout_ms: HTTP_TIMEOUT_MS,
            keys: Vec::new(),
            max_response_bytes: HTTP_MAX_RESPONSE_BYTES,
            forward_allow: None,
            idle_connections: 8,
            roots: crate::trusted_roots::default_roots(),
            client_certificate: None,
            egress: Egress::open(),
            oauth2: None,
            google_id_token: None,
            aws_signing: None,
        }
    }

    /// How a sink built from these connects.
    pub(crate) fn connections(&self) -> Connections {
        Connections {
            origin: origin(&self.url),
            scheme: Scheme::of(&self.url),
            timeout_ms: self.timeout_ms,
            idle_connections: self.idle_connections,
            roots: self.roots.clone(),
            client_certificate: self.client_certificate.clone(),
            egress: self.egress.clone(),
        }
    }

    /// Whether a sink built from `other` would do what one built from
    /// these does: every option equal, secrets, keys and certificates by
    /// their bytes, an OAuth 2 grant by its endpoint, client, secret and
    /// parameters, a Google ID token by its audience and source, AWS
    /// signing by its service, region and credentials' source.
    pub(crate) fn same_as(&self, other: &HttpSinkOptions) -> bool {
        let HttpSinkOptions {
            url,
            method,
            headers,
            timeout_ms,
            keys,
            max_response_bytes,
            forward_allow,
            idle_connections,
            roots,
            client_certificate,
            egress,
            oauth2,
            google_id_token,
            aws_signing,
        } = self;
        *url == other.url
            && *method == other.method
            && *headers == other.headers
            && *timeout_ms == other.timeout_ms
            && keys.len() == other.keys.len()
            && keys
                .iter()
                .zip(&other.keys)
                .all(|(a, b)| a.verifier() == b.verifier())
            && *max_response_bytes == other.max_response_bytes
            && *forward_allow == other.forward_allow
            && *idle_connections == other.idle_connections
            && same_roots(roots, &other.roots)
            && same_client_certificate(
                client_certificate.as_ref(),
                other.client_certificate.as_ref(),
            )
            && *egress == other.egress
            && match (oauth2, &other.oauth2) {
                (None, None) => true,
                (Some(a), Some(b)) => a.same_grant(b),
                _ => false,
            }
            && match (google_id_token, &other.google_id_token) {
                (None, None) => true,
                (Some(a), Some(b)) => a.same_as(b),
                _ => false,
            }
            && match (aws_signing, &other.aws_signing) {
                (None, None) => true,
                (Some(a), Some(b)) => a.same_as(b),
                _ => false,
            }
    }
}

/// Header values, and the URL's user information and query, are not
/// shown: they may be secrets.
impl std::fmt::Debug for HttpSinkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpSinkOptions")
            .field("url", &shown_url(&self.url))
            .field("method", &self.method)
            .field("header_names", &header_names)
            .field("timeout_ms", &self.timeout_ms)
            .field("keys", &self.keys)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("forward_allow", &self.forward_allow)
            .field("idle_connections", &self.idle_connections)
            .field("roots", &self.roots)
            .field("client_certificate", &self.client_certificate.is_some())
            .field("egress", &self.egress)
            .field("oauth2", &self.oauth2)
            .field("google_id_token", &self.google_id_token)
            .field("aws_signing", &self.aws_signing)
            .finish()
    }
}

/// An HTTP endpoint.
pub struct HttpSink {
    agent: ureq::Agent,
    /// The options' URL and headers, parsed once.
    uri: Uri,
    operator_headers: Vec<(HeaderName, HeaderValue)>,
    /// The operator's `content-type`, sent instead of the hook's.
    content_type: Option<HeaderValue>,
    method: Method,
    keys: Vec<SigningKey>,
    forward_allow: Option<Vec<String>>,
    max_response_bytes: u64,
    oauth2: Option<Arc<ClientCredentials>>,
    google_id_token: Option<Arc<GoogleIdToken>>,
    aws_signing: Option<AwsSigning>,
}

/// An option an HTTP sink cannot be built with (the config's validation
/// rejects both first; a library caller may pass them).
#[derive(Debug)]
#[non_exhaustive]
pub enum InvalidHttpSink {
    Url {
        url: String,
        cause: ureq::http::uri::InvalidUri,
    },
    Header {
        name: String,
        cause: ureq::http::Error,
    },
    /// A header goad or the HTTP client sets itself (`reserved_header`).
    ReservedHeader { name: String },
}

impl std::fmt::Display for InvalidHttpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidHttpSink::Url { url, .. } => write!(f, "not a valid URL: {url:?}"),
            InvalidHttpSink::Header { name, .. } => write!(f, "not a valid HTTP header: {name:?}"),
            InvalidHttpSink::ReservedHeader { name } => {
                write!(f, "a header goad sets itself: {name:?}")
            }
        }
    }
}

impl std::error::Error for InvalidHttpSink {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InvalidHttpSink::Url { cause, .. } => Some(cause),
            InvalidHttpSink::Header { cause, .. } => Some(cause),
            InvalidHttpSink::ReservedHeader { .. } => None,
        }
    }
}

/// A hook's text that cannot be sent in a header, with the parser's cause.
#[derive(Debug)]
struct UnsendableHeader {
    text: String,
    cause: BoxError,
}

impl std::fmt::Display for UnsendableHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot send {:?} in a header", self.text)
    }
}

impl std::error::Error for UnsendableHeader {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// No retry could send it: a permanent failure.
fn unsendable(text: &str, cause: impl Into<BoxError>) -> SinkError {
    SinkError::permanent(UnsendableHeader {
        text: text.to_owned(),
        cause: cause.into(),
    })
}

/// `text` as a header value, byte for byte: UTF-8 beyond ASCII included
/// (RFC 9110 §5.5's obs-text, which receivers read as UTF-8 or ISO-8859-1),
/// control characters but tab refused. Every header value an HTTP sink
/// makes of a hook's, a config's or a signer's text goes through here, as
/// does every check of one ahead of sending (a commit's, a config's):
/// `http`'s `HeaderValue::from_str` takes visible ASCII only (since http
/// 1.6), so a provider's `José` would fail a hook it used to deliver.
pub(crate) fn header_value(text: &str) -> Result<HeaderValue, InvalidHeaderValue> {
    HeaderValue::from_bytes(text.as_bytes())
}

/// Whether a credential (a token, a key id) can be sent in a header: not
/// empty, and printable ASCII (RFC 6749's `VSCHAR`: what tokens are made
/// of, and all ureq sends in an `authorization` header, where it refuses
/// a [`header_value`]'s UTF-8 beyond ASCII).
pub(crate) fn sendable_credential(text: &str) -> bool {
    !text.is_empty() && printable_ascii(text)
}

fn printable_ascii(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b' '..=b'~'))
}

/// Why `value` cannot be sent in an operator's header `name` (a sink's
/// `headers` and `headers_env`), if it cannot: as a [`header_value`], and
/// in `authorization` as printable ASCII alone (ureq refuses a request
/// with any other byte there).
pub(crate) fn unsendable_header_rule(name: &str, value: &str) -> Option<&'static str> {
    if name.eq_ignore_ascii_case(AUTHORIZATION.as_str()) {
        let rule = "printable ASCII (all an authorization header carries)";
        return (!printable_ascii(value)).then_some(rule);
    }
    let rule = "a valid HTTP header value (no control characters but tab)";
    header_value(value).is_err().then_some(rule)
}

/// A header's line as an HTTP sink sends it: `name: value` and the line
/// break.
pub(crate) fn header_line_bytes(name: &str, value: &[u8]) -> usize {
    name.len() + ": ".len() + value.len() + "\r\n".len()
}

/// Each header's line (`name: value` and its line break) is at most
/// `HTTP_MAX_HEADER_LINE_BYTES`, which the connection's write buffer holds
/// whole; a longer one could never be sent, so it is a permanent failure
/// naming the header. A hook's own headers, and the idempotency key goad
/// builds on its dedupe key, were checked as it was committed
/// (`runtime::hook_headers`): this one is for a hook committed before that
/// check, and for a sink's own headers.
fn lines_fit(request: &Request<()>) -> Result<(), SinkError> {
    let too_long = (request.headers().iter())
        .map(|(name, value)| (name, header_line_bytes(name.as_str(), value.as_bytes())))
        .find(|&(_, line_bytes)| line_bytes > HTTP_MAX_HEADER_LINE_BYTES);
    match too_long {
        Some((name, line_bytes)) => Err(SinkError::permanent(format!(
            "cannot send header {name}: its line of {line_bytes} bytes is longer than a request line may be ({HTTP_MAX_HEADER_LINE_BYTES})"
        ))),
        None => Ok(()),
    }
}

const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
const GOAD_SOURCE: HeaderName = HeaderName::from_static("x-goad-source");
const GOAD_TENANT: HeaderName = HeaderName::from_static("x-goad-tenant");
pub(crate) const GOAD_IDEMPOTENCY_KEY: HeaderName =
    HeaderName::from_static("x-goad-idempotency-key");
const GOAD_ATTEMPT: HeaderName = HeaderName::from_static("x-goad-attempt");
/// The header that carries a hook's dedupe key.
pub(crate) const GOAD_DEDUPE_KEY: HeaderName = HeaderName::from_static("x-goad-dedupe-key");
const GOAD_REPLAY_ID: HeaderName = HeaderName::from_static("x-goad-replay-id");

impl HttpSink {
    pub fn new(options: HttpSinkOptions) -> Result<HttpSink, InvalidHttpSink> {
        let client = options.connections().client(options.idle_connections);
        HttpSink::with_client(options, client)
    }

    /// A sink built from `options` whose requests go through `client`, a
    /// client built for the same [`Connections`], which other sinks may
    /// share.
    pub(crate) fn with_client(
        options: HttpSinkOptions,
        client: ureq::Agent,
    ) -> Result<HttpSink, InvalidHttpSink> {
        let uri = options
            .url
            .parse::<Uri>()
            .map_err(|cause| InvalidHttpSink::Url {
                url: options.url.clone(),
                cause,
            })?;
        let mut operator_headers = Vec::with_capacity(options.headers.len());
        let mut content_type = None;
        for (name, value) in &options.headers {
            let invalid = |cause: ureq::http::Error| InvalidHttpSink::Header {
                name: name.clone(),
                cause,
            };
            let header_name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(e.into()))?;
            if reserved_header(header_name.as_str()) {
                return Err(InvalidHttpSink::ReservedHeader { name: name.clone() });
            }
            let value = header_value(value).map_err(|e| invalid(e.into()))?;
            match header_name == CONTENT_TYPE {
                true => content_type = Some(value),
                false => operator_headers.push((header_name, value)),
            }
        }
        let (uri, basic) = without_user_info(uri);
        let authorization = ureq::http::header::AUTHORIZATION;
        let authorized = options.oauth2.is_some()
            || options.google_id_token.is_some()
            || options.aws_signing.is_some();
        if let Some(basic) = basic.filter(|_| !authorized) {
            if !operator_headers.iter().any(|(n, _)| n == authorization) {
                operator_headers.push((authorization, basic));
            }
        }
        Ok(HttpSink {
            agent: client,
            uri,
            operator_headers,
            content_type,
            method: options.method,
            keys: options.keys,
            forward_allow: options.forward_allow,
            max_response_bytes: options.max_response_bytes,
            oauth2: options.oauth2,
            google_id_token: options.google_id_token,
            aws_signing: options.aws_signing,
        })
    }

    /// The request of one delivery: its headers, without the body.
    fn request(&self, delivery: &Delivery<'_>, timestamp_s: u64) -> Result<Request<()>, SinkError> {
        let hook = delivery.hook;
        let method = match self.method {
            Method::Post => ureq::http::Method::POST,
            Method::Put => ureq::http::Method::PUT,
            Method::Patch => ureq::http::Method::PATCH,
        };
        let mut request = Request::builder().method(method).uri(self.uri.clone());
        let value = |v: &str| header_value(v).map_err(|e| unsendable(v, e));
        let content_type = match &self.content_type {
            Some(operators) => operators.clone(),
            None => value(
                hook.content_type
                    .as_deref()
                    .unwrap_or("application/octet-stream"),
            )?,
        };
        request = request
            .header(CONTENT_TYPE, content_type)
            .header(WEBHOOK_ID, value(&hook.id)?)
            .header(WEBHOOK_TIMESTAMP, HeaderValue::from(timestamp_s))
            .header(GOAD_SOURCE, value(&hook.source_id)?)
            .header(GOAD_TENANT, value(&hook.tenant)?)
            .header(GOAD_IDEMPOTENCY_KEY, value(&hook.idempotency_key())?)
            .header(GOAD_ATTEMPT, HeaderValue::from(delivery.attempt));
        if let Some(dedupe_key) = &hook.dedupe_key {
            request = request.header(GOAD_DEDUPE_KEY, value(dedupe_key)?);
        }
        if let Some(replay_id) = delivery.replay_id {
            request = request.header(GOAD_REPLAY_ID, value(replay_id)?);
        }
        if !self.keys.is_empty() {
            let signature = signature_header(&self.keys, &hook.id, timestamp_s, &hook.body);
            request = request.header(WEBHOOK_SIGNATURE, value(&signature)?);
        }
        // Forwarded names never collide with goad's own (`forwarded` drops
        // the `webhook-*` and `x-goad-*` namespaces); operator headers win.
        for (name, v) in forwarded(&hook.headers, self.forward_allow.as_deref()) {
            if !self
                .operator_headers
                .iter()
                .any(|(n, _)| n == name.as_str())
            {
                let name =
                    HeaderName::from_bytes(name.as_bytes()).map_err(|e| unsendable(&name, e))?;
                request = request.header(name, value(&v)?);
            }
        }
        for (name, v) in &self.operator_headers {
            request = request.header(name.clone(), v.clone());
        }
        request.body(()).map_err(SinkError::permanent)
    }

    /// The bearer token of the sink's `oauth2` grant or Google ID token,
    /// if it has either, for an attempt due to time out at `deadline`.
    fn bearer_token(&self, now: SystemTime, deadline: Instant) -> Result<Option<Token>, SinkError> {
        if let Some(grant) = &self.oauth2 {
            let token = grant
                .token(now, deadline)
                .map_err(|e| match e.refused_by_egress {
                    true => SinkError::permanent(e),
                    false => SinkError::transient(e),
                })?;
            return Ok(Some(token));
        }
        let Some(id_token) = &self.google_id_token else {
            return Ok(None);
        };
        let token = id_token.token(now, deadline);
        token.map(Some).map_err(SinkError::transient)
    }

    /// The receiver refused `token`: its source does not send it again.
    fn refused(&self, token: &str) {
        if let Some(grant) = &self.oauth2 {
            grant.refused(token);
        }
        if let Some(id_token) = &self.google_id_token {
            id_token.refused(token);
        }
    }
}

/// How a sink connects: to its URL's scheme, host and port, with its
/// timeouts, pool, TLS and egress rule. Sinks whose connections are the
/// same may share a client (see `shared_clients`).
#[derive(Clone)]
pub(crate) struct Connections {
    /// `scheme://host:port`, if the URL is one.
    pub origin: Option<String>,
    /// The URL's scheme, whose proxy it goes through.
    scheme: Scheme,
    timeout_ms: u64,
    idle_connections: usize,
    roots: RootCerts,
    client_certificate: Option<ClientCert>,
    egress: Egress,
}

impl Connections {
    /// A client for them: a keep-alive pool keeping up to
    /// `idle_connections` idle.
    pub(crate) fn client(&self, idle_connections: usize) -> ureq::Agent {
        let tls = crate::tls_provider::ureq_tls()
            .root_certs(self.roots.clone())
            .client_cert(self.client_certificate.clone())
            .build();
        let egress = self.egress.clone();
        agent_with_tls(self.timeout_ms, idle_connections, tls, egress, self.scheme)
    }

    /// Whether they are `other`'s (never without an origin).
    pub(crate) fn same_as(&self, other: &Connections) -> bool {
        self.origin.is_some()
            && self.origin == other.origin
            && self.timeout_ms == other.timeout_ms
            && self.idle_connections == other.idle_connections
            && same_roots(&self.roots, &other.roots)
            && same_client_certificate(
                self.client_certificate.as_ref(),
                other.client_certificate.as_ref(),
            )
            && self.egress == other.egress
    }

    /// The idle connections a sink of them keeps, at least.
    pub(crate) fn idle_connections(&self) -> usize {
        self.idle_connections
    }
}

/// `url`'s `scheme://host:port` (its user information left out; the
/// scheme's port when it names none, so `https://h/` and `https://h:443/`
/// are one origin), if it is a URL.
fn origin(url: &str) -> Option<String> {
    let uri = url.parse::<Uri>().ok()?;
    let (scheme, host) = (uri.scheme_str()?.to_ascii_lowercase(), uri.host()?);
    let default_port = match scheme.as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    };
    let port = uri.port_u16().or(default_port);
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    Some(format!("{scheme}://{}{port}", host.to_ascii_lowercase()))
}

/// The user information of `uri`'s authority (before its `@`) and the
/// host and port after it; `None` without user information.
pub(crate) fn user_info_and_host(uri: &Uri) -> Option<(&str, &str)> {
    uri.authority()?.as_str().rsplit_once('@')
}

/// `uri` without its user information, and that information (RFC 3986:
/// `user:password@`, percent-encoded) as a Basic authorization, as curl
/// sends it. ureq would send it still encoded (a password `s%40cret` as
/// those 8 characters), which a receiver refuses.
fn without_user_info(uri: Uri) -> (Uri, Option<HeaderValue>) {
    let Some((user_info, host)) = user_info_and_host(&uri) else {
        return (uri, None);
    };
    // A user alone (no `:` before decoding) has an empty password.
    let user_and_password = match user_info.contains(':') {
        true => user_info.to_string(),
        false => format!("{user_info}:"),
    };
    let credentials: Vec<u8> = percent_encoding::percent_decode_str(&user_and_password).collect();
    let basic = format!("Basic {}", BASE64_STANDARD.encode(credentials));
    let mut parts = uri.clone().into_parts();
    parts.authority = host.parse().ok();
    match Uri::from_parts(parts) {
        Ok(bare) => (bare, header_value(&basic).ok()),
        Err(_) => (uri, None),
    }
}

/// Adds the headers of `request`'s AWS signature, for an attempt due to
/// time out at `deadline`.
fn sign(
    request: &mut Request<()>,
    signing: &AwsSigning,
    body: &[u8],
    now: SystemTime,
    deadline: Instant,
) -> Result<(), SinkError> {
    let content_type = match request.headers().get(CONTENT_TYPE) {
        // AWS's signer takes visible ASCII only: a request it cannot sign
        // as sent is refused here, not sent with a signature AWS refuses.
        Some(value) => value.to_str().map_err(|_| {
            let sent = String::from_utf8_lossy(value.as_bytes());
            let why = format!("its content type is not ASCII, which AWS cannot sign: {sent:?}");
            SignError::Signing(why.into()).failure()
        })?,
        None => "",
    };
    let url = request.uri().to_string();
    let method = request.method().as_str();
    let headers = signing.headers(method, &url, content_type, body, now, deadline);
    for (name, value) in headers.map_err(SignError::failure)? {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|e| unsendable(&name, e))?;
        // Not the value in the error: a signature, or a session token.
        let secret = || format!("the value of {name}");
        let value = header_value(&value).map_err(|e| unsendable(&secret(), e))?;
        request.headers_mut().insert(header, value);
    }
    Ok(())
}

impl Sink for HttpSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        let now = SystemTime::now();
        let timestamp_s = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut request = self.request(delivery, timestamp_s)?;
        let token = self.bearer_token(now, delivery.deadline)?;
        if let Some(token) = &token {
            let bearer = format!("Bearer {}", token.value);
            let bearer = header_value(&bearer).map_err(|e| unsendable("token", e))?;
            request.headers_mut().insert(AUTHORIZATION, bearer);
        }
        let body = &delivery.hook.body[..];
        if let Some(signing) = &self.aws_signing {
            sign(&mut request, signing, body, now, delivery.deadline)?;
        }
        lines_fit(&request)?;
        let response = send_past_stale_connections(|| {
            let (head, ()) = request.clone().into_parts();
            Request::from_parts(head, body)
                .with_agent(&self.agent)
                .configure()
                .timeout_global(request_timeout(delivery.deadline))
                .build()
                .run()
        })
        .map_err(|e| match PrivateAddress::of(&e) {
            Some(refused) => SinkError::permanent(refused.to_string()),
            None => SinkError::transient(transport_error(e)),
        })?;
        let status = response.status().as_u16();
        let (head, mut body) = response.into_parts();
        // Drain up to the cap so the connection goes back to the pool; past
        // the cap the rest is dropped with the connection.
        let mut reader = body.with_config().limit(self.max_response_bytes).reader();
        let mut answer = Vec::new();
        if !(200..300).contains(&status) {
            // One byte past the excerpt says whether it was cut.
            let mut start = (&mut reader).take(EXCERPT_BYTES as u64 + 1);
            let _ = start.read_to_end(&mut answer);
        }
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
        let result = classify(status, &head.headers, &answer, now);
        match token {
            // A token held a while may have been revoked or expired early:
            // the next attempt asks for a new one. A 401 to a fresh one is
            // the receiver's refusal, permanent as any 401.
            Some(token) if status == 401 && !token.fresh => {
                self.refused(&token.value);
                result.map_err(|e| match e {
                    SinkError::Permanent(cause) => SinkError::transient(format!(
                        "{cause}; a new token is asked for the next attempt"
                    )),
                    other => other,
                })
            }
            _ => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: &str, header: (&str, &str)) -> HttpSinkOptions {
        HttpSinkOptions {
            headers: vec![(header.0.into(), header.1.into())],
            ..HttpSinkOptions::new(url)
        }
    }

    #[test]
    fn options_show_no_secret_when_debugged() {
        let url = "https://alice:pw-secret@hooks.example.com/in?key=key-secret";
        let shown = format!(
            "{:?}",
            options(url, ("authorization", "Bearer header-secret"))
        );
        assert!(
            shown.contains(r#"url: "https://hooks.example.com/in""#),
            "{shown}"
        );
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn a_bad_url_or_operator_header_is_refused_when_the_sink_is_built() {
        let build = |url, header| HttpSink::new(options(url, header)).err();
        assert!(build("http://127.0.0.1:9/h", ("x-a", "1")).is_none());
        assert!(matches!(
            build("http://a b/", ("x-a", "1")),
            Some(InvalidHttpSink::Url { url, .. }) if url == "http://a b/"
        ));
        assert!(matches!(
            build("http://127.0.0.1:9/h", ("x a", "1")),
            Some(InvalidHttpSink::Header { name, .. }) if name == "x a"
        ));
        assert!(matches!(
            build("http://127.0.0.1:9/h", ("x-a", "1\n2")),
            Some(InvalidHttpSink::Header { name, .. }) if name == "x-a"
        ));
        assert!(matches!(
            build("http://127.0.0.1:9/h", ("transfer-encoding", "chunked")),
            Some(InvalidHttpSink::ReservedHeader { name }) if name == "transfer-encoding"
        ));
    }
    /// Sinks whose URLs name one scheme, host and port in other spellings
    /// (the scheme's port left out, the host in capitals, user
    /// information) connect to one origin, so they may share connections.
    #[test]
    fn a_urls_origin_is_its_scheme_host_and_port_however_spelt() {
        let origin_of = |url| HttpSinkOptions::new(url).connections().origin;
        let slack = Some("https://hooks.slack.com:443".to_string());
        assert_eq!(origin_of("https://hooks.slack.com/services/a"), slack);
        assert_eq!(origin_of("HTTPS://Hooks.Slack.com:443/services/b"), slack);
        assert_eq!(origin_of("https://u:p@hooks.slack.com/c"), slack);
        let other = |url| origin_of(url).unwrap();
        assert_eq!(
            other("http://hooks.slack.com/a"),
            "http://hooks.slack.com:80"
        );
        assert_eq!(
            other("https://hooks.slack.com:8443/a"),
            "https://hooks.slack.com:8443"
        );
        assert_eq!(other("http://[::1]:8080/a"), "http://[::1]:8080");
        assert_eq!(origin_of("not a url"), None);
    }
}
