//! The HTTP sink: one ureq Agent (keep-alive pool) per sink entry.
//!
//! Each attempt sends the body verbatim with the hook's content type,
//! Standard Webhooks headers, goad's headers and the forwarded provider
//! headers, and maps the status (see `status`). Timeouts are per phase
//! (connect, send, receive): ureq 3's `timeout_global` would start a thread
//! per request. Redirects are not followed. The response body is read up to
//! `max_response_bytes` (so the connection can be reused) and dropped.

use super::forward::forwarded;
use super::signing::{signature_header, SigningKey};
use super::status::classify;
use super::{Delivery, Sink, SinkError};
use std::time::{Duration, SystemTime};

/// The request method of an HTTP sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Post,
    Put,
    Patch,
}

/// What an HTTP sink needs, resolved from its config entry.
#[derive(Debug, Clone)]
pub struct HttpSinkOptions {
    pub url: String,
    pub method: Method,
    /// Operator headers; they win over forwarded provider headers.
    pub headers: Vec<(String, String)>,
    pub timeout_ms: u64,
    pub keys: Vec<SigningKey>,
    pub max_response_bytes: u64,
    /// The source's `forward_headers` allowlist, if any.
    pub forward_allow: Option<Vec<String>>,
    /// Idle keep-alive connections to keep (at least the sink's concurrency).
    pub idle_connections: usize,
}

/// An HTTP endpoint.
pub struct HttpSink {
    agent: ureq::Agent,
    options: HttpSinkOptions,
}

impl HttpSink {
    pub fn new(options: HttpSinkOptions) -> HttpSink {
        let timeout = Some(Duration::from_millis(options.timeout_ms));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .max_idle_connections_per_host(options.idle_connections)
            .max_idle_connections(options.idle_connections)
            .timeout_connect(timeout)
            .timeout_send_request(timeout)
            .timeout_send_body(timeout)
            .timeout_recv_response(timeout)
            .timeout_recv_body(timeout)
            .user_agent(concat!("goad/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HttpSink { agent, options }
    }

    /// The request headers of one delivery (without content-type).
    fn headers(&self, delivery: &Delivery<'_>, timestamp_s: u64) -> Vec<(String, String)> {
        let hook = delivery.hook;
        let mut own = vec![
            ("webhook-id".to_string(), hook.id.clone()),
            ("webhook-timestamp".to_string(), timestamp_s.to_string()),
            ("x-goad-source".to_string(), hook.source_id.to_string()),
            ("x-goad-tenant".to_string(), hook.tenant.to_string()),
            ("x-goad-idempotency-key".to_string(), hook.idempotency_key()),
            ("x-goad-attempt".to_string(), delivery.attempt.to_string()),
        ];
        if let Some(dedupe_key) = &hook.dedupe_key {
            own.push(("x-goad-dedupe-key".to_string(), dedupe_key.clone()));
        }
        if let Some(replay_id) = delivery.replay_id {
            own.push(("x-goad-replay-id".to_string(), replay_id.to_string()));
        }
        if !self.options.keys.is_empty() {
            own.push((
                "webhook-signature".to_string(),
                signature_header(&self.options.keys, &hook.id, timestamp_s, &hook.body),
            ));
        }
        let taken = |name: &str| {
            own.iter().any(|(n, _)| n == name)
                || self
                    .options
                    .headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let provider: Vec<(String, String)> =
            forwarded(&hook.headers, self.options.forward_allow.as_deref())
                .into_iter()
                .filter(|(n, _)| !taken(n))
                .collect();
        own.extend(provider);
        own.extend(self.options.headers.iter().cloned());
        own
    }
}

impl Sink for HttpSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        let now = SystemTime::now();
        let timestamp_s = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let url = self.options.url.as_str();
        let mut request = match self.options.method {
            Method::Post => self.agent.post(url),
            Method::Put => self.agent.put(url),
            Method::Patch => self.agent.patch(url),
        };
        let content_type = delivery
            .hook
            .content_type
            .as_deref()
            .unwrap_or("application/octet-stream");
        request = request.header("content-type", content_type);
        for (name, value) in self.headers(delivery, timestamp_s) {
            request = request.header(name, value);
        }
        let response = request
            .send(&delivery.hook.body[..])
            .map_err(SinkError::transient)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Drain up to the cap so the connection goes back to the pool; past
        // the cap the rest is dropped with the connection.
        let mut body = response.into_body();
        let _ = body
            .with_config()
            .limit(self.options.max_response_bytes)
            .read_to_vec();
        classify(status, retry_after.as_deref(), now)
    }
}
