//! Sinks: where a row is delivered. goad's own HTTP, SQS and Pub/Sub sinks
//! and the host's Rust sinks implement the same [`Sink`] trait; the IO pool
//! calls it on a blocking worker thread, and a sink that panics is a failed
//! attempt.

mod address_book;
pub(crate) mod assume_role;
pub(crate) mod aws_credentials;
pub(crate) mod aws_endpoint;
mod aws_profile;
pub(crate) mod aws_region;
mod aws_sso;
pub(crate) mod aws_xml;
mod claiming;
pub(crate) mod client;
mod egress;
mod expiring;
mod forward;
mod gcp_external;
pub(crate) mod gcp_id_token;
mod gcp_key;
pub(crate) mod gcp_token;
mod gcp_user;
pub mod http;
mod jwt_key;
mod message;
pub mod oauth2;
pub(crate) mod proxy_env;
pub mod pubsub;
mod pubsub_emulator;
mod queue;
mod registry;
mod resolver;
mod shared_clients;
mod shared_credentials;
pub mod signing;
pub(crate) mod sigv4;
pub mod sqs;
mod status;

pub(crate) use aws_profile::profile_ca_bundle;
pub use claiming::{ClaimCheckFailed, ClaimingSink};
pub use egress::{Egress, Network};
pub use forward::{is_credential, never_forwarded, reserved_header, PROVIDER_TOKENS};
use queue::answer_of;
pub use queue::MessageTooLarge;
pub use registry::SinkRegistry;
use status::excerpt;

use crate::claim_check::ClaimRef;
use crate::core::{AttemptFailure, FailureClass};
use crate::limits::MAX_RETRY_AFTER_MS;
use crate::store::Hook;
use std::fmt;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::Instant;

/// How many hosts' addresses the node serves from an earlier look-up
/// because looking them up again failed, its DNS server down or slow (see
/// `address_book`).
pub(crate) fn dns_stale_hosts() -> usize {
    address_book::AddressBook::shared().stale_hosts(Instant::now())
}

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
    /// The body's claim, when it is over the sink's
    /// [`Sink::inline_max_bytes`].
    pub claim: Option<&'a ClaimRef>,
    /// When the engine stops waiting for this attempt: then it fails as
    /// `attempt_timeout` (`dispatch.attempt_timeout_ms` after it started,
    /// as configured then), a result that comes later is discarded, and
    /// the worker is counted stuck. A sink bounds its own blocking calls
    /// by it (every attempt of a batch has the same).
    pub deadline: Instant,
}

/// A destination. `deliver` blocks until the sink answered; it runs on an
/// IO pool worker and may take until [`Delivery::deadline`].
pub trait Sink: Send + Sync + 'static {
    /// One attempt: `Ok` settles the row as delivered; an error (or a
    /// panic, which counts as a transient failure) goes to the retry policy.
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError>;

    /// The largest body this sink takes inline. A larger one is checked in
    /// to the claim check first (once per hook, whichever sink or attempt
    /// comes first), and the delivery carries its reference
    /// ([`Delivery::claim`]) for the sink to send instead. `None` (the
    /// default): every body inline. Asked at every attempt; a panic here is
    /// a failed attempt too.
    fn inline_max_bytes(&self) -> Option<u64> {
        None
    }

    /// `Some(n)`: the sink batches. Attempts of one key (one tenant's
    /// source and sink) are then handed to [`Sink::deliver_batch`] up to
    /// `n` at a time (at most `limits::MAX_BATCH_ENTRIES`), and a batch
    /// takes one slot of the concurrency caps, whatever its size. `None`
    /// (the default): one attempt per [`Sink::deliver`]. Asked when the
    /// engine opens or is reconfigured.
    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        None
    }

    /// Attempts of one key in one call (for a sink whose
    /// [`Sink::batch_max_entries`] is `Some`): one result per delivery, in
    /// order, each settling its own row. A sink whose request carries
    /// fewer bytes than the whole batch may split it; a panic, or a
    /// result count other than the deliveries', fails every attempt of
    /// the batch. The default delivers one by one.
    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        deliveries.iter().map(|d| self.deliver(d)).collect()
    }
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

    /// This failure of a whole batch as the failure of each of its
    /// `entries` (one cause, shared).
    pub fn for_each_of(self, entries: usize) -> Vec<SinkError> {
        let (after_ms, permanent, cause) = match self {
            SinkError::Permanent(cause) => (None, true, cause),
            SinkError::RetryAfter { after_ms, cause } => (Some(after_ms), false, cause),
            SinkError::Transient(cause) => (None, false, cause),
        };
        let shared = SharedCause(Arc::from(cause));
        (0..entries)
            .map(|_| {
                let cause: BoxError = Box::new(shared.clone());
                match (permanent, after_ms) {
                    (true, _) => SinkError::Permanent(cause),
                    (false, Some(after_ms)) => SinkError::RetryAfter { after_ms, cause },
                    (false, None) => SinkError::Transient(cause),
                }
            })
            .collect()
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
            // What the core waits: a longer ask is capped.
            SinkError::RetryAfter { after_ms, .. } if *after_ms > MAX_RETRY_AFTER_MS => write!(
                f,
                "retry after {MAX_RETRY_AFTER_MS} ms (an hour at most; it asked for longer): "
            )?,
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

/// One cause shared by the failures of a batch's entries: it reads as the
/// cause itself.
#[derive(Debug, Clone)]
struct SharedCause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl fmt::Display for SharedCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
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

/// A batching sink answered a number of results other than its entries'.
#[derive(Debug)]
pub struct BatchMiscounted {
    pub entries: usize,
    pub results: usize,
}

impl fmt::Display for BatchMiscounted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the sink answered {} results for a batch of {}",
            self.results, self.entries
        )
    }
}

impl std::error::Error for BatchMiscounted {}

/// Runs `sink.deliver_batch`; a panic or a miscounted answer fails every
/// entry as transient.
pub fn deliver_batch_safely(
    sink: &dyn Sink,
    deliveries: &[Delivery<'_>],
) -> Vec<Result<(), SinkError>> {
    let failure = match crate::panics::catch(|| sink.deliver_batch(deliveries)) {
        Ok(results) if results.len() == deliveries.len() => return results,
        Ok(results) => SinkError::transient(BatchMiscounted {
            entries: deliveries.len(),
            results: results.len(),
        }),
        Err(message) => SinkError::transient(SinkPanicked(message)),
    };
    failure
        .for_each_of(deliveries.len())
        .into_iter()
        .map(Err)
        .collect()
}

/// Hooks of tenant `t` with these bodies (each its id too), for tests.
#[cfg(test)]
pub(crate) fn hooks_with_bodies(bodies: &[&str]) -> Vec<Hook> {
    bodies
        .iter()
        .map(|body| Hook {
            id: body.to_string(),
            body: body.as_bytes().to_vec(),
            ..crate::store::record::sample_hook(1)
        })
        .collect()
}

/// The first attempt of each of `hooks` at sink 0, for tests.
#[cfg(test)]
pub(crate) fn first_attempts(hooks: &[Hook]) -> Vec<Delivery<'_>> {
    hooks
        .iter()
        .map(|hook| Delivery {
            hook,
            attempt: 1,
            sink_index: 0,
            replay_id: None,
            claim: None,
            deadline: Instant::now() + std::time::Duration::from_secs(30),
        })
        .collect()
}

/// Runs `sink.deliver`, turning a panic into a transient failure.
pub fn deliver_safely(sink: &dyn Sink, delivery: &Delivery<'_>) -> Result<(), SinkError> {
    // The sink is the host's: goad keeps no state it could leave half-changed.
    crate::panics::catch(|| sink.deliver(delivery))
        .unwrap_or_else(|message| Err(SinkError::transient(SinkPanicked(message))))
}
