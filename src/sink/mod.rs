//! Sinks: where a row is delivered. goad's own HTTP and SQS sinks and the
//! host's Rust sinks implement the same [`Sink`] trait; the IO pool calls it on a
//! blocking worker thread, and a sink that panics is a failed attempt.

mod forward;
pub mod http;
mod message;
pub mod pubsub;
mod registry;
pub mod signing;
mod sigv4;
pub mod sqs;
mod status;

pub use forward::never_forwarded;
pub use registry::SinkRegistry;

use crate::core::{AttemptFailure, FailureClass};
use crate::store::Hook;
use std::fmt;

/// The HTTP client of one sink: a keep-alive pool of `idle_connections`,
/// per-phase timeouts of `timeout_ms` (connect, send, receive: ureq 3's
/// `timeout_global` would start a thread per request), statuses as
/// answers rather than errors, and no redirects followed.
fn agent(timeout_ms: u64, idle_connections: usize) -> ureq::Agent {
    let timeout = Some(std::time::Duration::from_millis(timeout_ms));
    ureq::Agent::config_builder()
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

/// Where a queue sink's bodies go when they are too large to go inline.
#[derive(Debug, Clone)]
pub struct ClaimCheck {
    pub store: std::sync::Arc<crate::claim_check::ClaimStore>,
    /// Bodies larger than this are checked in.
    pub inline_max_bytes: u64,
}

impl ClaimCheck {
    /// The message of one delivery, its body inline or checked in (a
    /// check-in that fails is a transient failure).
    fn message(
        &self,
        delivery: &Delivery<'_>,
        forward_allow: Option<&[String]>,
    ) -> Result<String, SinkError> {
        let hook = delivery.hook;
        let claim = if hook.body.len() as u64 > self.inline_max_bytes {
            let checked_in = self.store.check_in(&hook.tenant, &hook.body);
            Some(checked_in.map_err(|e| SinkError::transient(ClaimCheckFailed(e)))?)
        } else {
            None
        };
        Ok(message::message_json(
            delivery,
            forward_allow,
            claim.as_ref(),
        ))
    }
}

/// A body could not be checked in.
#[derive(Debug)]
pub struct ClaimCheckFailed(pub std::io::Error);

impl fmt::Display for ClaimCheckFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot check the body in to the claim check: {}", self.0)
    }
}

impl std::error::Error for ClaimCheckFailed {}

/// The most of an answer a queue sink reads (an answer is a few hundred bytes).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// Sends a queue sink's request and reads its answer (up to
/// `MAX_ANSWER_BYTES`, so the connection can be reused): the status and the
/// body. A transport error is a transient failure.
fn answer_of(
    request: ureq::RequestBuilder<ureq::typestate::WithBody>,
    body: &[u8],
) -> Result<(u16, Vec<u8>), SinkError> {
    let response = request.send(body).map_err(SinkError::transient)?;
    let status = response.status().as_u16();
    let reply = response
        .into_body()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_vec()
        .unwrap_or_default();
    Ok((status, reply))
}

/// The start of a sink's answer, as text, for an error message.
fn excerpt(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(&reply[..reply.len().min(256)]);
    text.trim().to_string()
}

/// A message over the sink's `max_message_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTooLarge {
    pub size_bytes: usize,
    pub max_bytes: u64,
}

impl fmt::Display for MessageTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message of {} bytes over max_message_bytes {}",
            self.size_bytes, self.max_bytes
        )
    }
}

impl std::error::Error for MessageTooLarge {}

/// A boxed error with its cause chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What one attempt delivers.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The hook as committed: id, tenant, source, headers, body.
    pub hook: &'a Hook,
    /// 1-based attempt number of this row.
    pub attempt: u32,
    /// The sink's index in its source.
    pub sink_index: u16,
    /// The replay that revived the row, if any.
    pub replay_id: Option<&'a str>,
}

/// A destination. `deliver` blocks until the sink answered; it runs on an
/// IO pool worker and may take up to `dispatch.attempt_timeout_ms`.
pub trait Sink: Send + Sync + 'static {
    /// One attempt: `Ok` settles the row as delivered; an error (or a
    /// panic, which counts as a transient failure) goes to the retry policy.
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError>;
}

/// Why a sink did not take a delivery, and what the retry policy does.
#[derive(Debug)]
#[non_exhaustive]
pub enum SinkError {
    /// Retrying cannot help: the row is dead-lettered now.
    Permanent(BoxError),
    /// Retry no sooner than `after_ms` (capped at an hour).
    RetryAfter {
        /// The delay the sink asked for.
        after_ms: u64,
        /// What the sink answered.
        cause: BoxError,
    },
    /// Retry per the policy.
    Transient(BoxError),
}

impl SinkError {
    /// Retrying cannot help: dead-letter the row now.
    pub fn permanent(cause: impl Into<BoxError>) -> SinkError {
        SinkError::Permanent(cause.into())
    }

    /// Retry after the policy's backoff.
    pub fn transient(cause: impl Into<BoxError>) -> SinkError {
        SinkError::Transient(cause.into())
    }

    /// Retry no sooner than `after_ms` from now.
    pub fn retry_after(after_ms: u64, cause: impl Into<BoxError>) -> SinkError {
        SinkError::RetryAfter {
            after_ms,
            cause: cause.into(),
        }
    }

    fn cause(&self) -> &(dyn std::error::Error + 'static) {
        match self {
            SinkError::Permanent(c)
            | SinkError::Transient(c)
            | SinkError::RetryAfter { cause: c, .. } => c.as_ref(),
        }
    }

    /// The failure as the core records it: its class and its cause chain as text.
    pub fn into_failure(self) -> AttemptFailure {
        let class = match &self {
            SinkError::Permanent(_) => FailureClass::Permanent,
            SinkError::RetryAfter { after_ms, .. } => FailureClass::RetryAfter {
                after_ms: *after_ms,
            },
            SinkError::Transient(_) => FailureClass::Transient,
        };
        AttemptFailure {
            class,
            message: self.to_string(),
        }
    }
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Permanent(_) => write!(f, "permanent: ")?,
            SinkError::RetryAfter { after_ms, .. } => write!(f, "retry after {after_ms} ms: ")?,
            SinkError::Transient(_) => {}
        }
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self.cause());
        let mut first = true;
        while let Some(c) = cause {
            if !first {
                write!(f, ": ")?;
            }
            write!(f, "{c}")?;
            first = false;
            cause = c.source();
        }
        Ok(())
    }
}

impl std::error::Error for SinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause())
    }
}

/// A sink that panicked: the panic's message.
#[derive(Debug)]
pub struct SinkPanicked(pub String);

impl fmt::Display for SinkPanicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sink panicked: {}", self.0)
    }
}

impl std::error::Error for SinkPanicked {}

/// Runs `sink.deliver`, turning a panic into a transient failure.
pub fn deliver_safely(sink: &dyn Sink, delivery: &Delivery<'_>) -> Result<(), SinkError> {
    // The sink is the host's: goad keeps no state it could leave half-changed.
    crate::panics::catch(|| sink.deliver(delivery))
        .unwrap_or_else(|message| Err(SinkError::transient(SinkPanicked(message))))
}
