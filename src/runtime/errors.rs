//! Why an engine call failed: a commit not acknowledged, an engine that
//! did not open, a call the shards could not answer.

use crate::config::ConfigError;
use crate::limits::COMMIT_REPLY_WAIT_MS;
use crate::store::StoreError;
use std::fmt;
use std::sync::Arc;

/// Why a commit was not acknowledged. Only `Ok` means durable; after
/// `TimedOut` the hook may or may not have been stored.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CommitError {
    /// No source with this id is configured.
    UnknownSource(String),
    /// A header (or the content type, or the dedupe key, which are sent as
    /// headers) is one no HTTP request could carry, or one too many: see
    /// [`NewHook::headers`](super::NewHook::headers).
    BadHeader {
        /// The header's name as given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The body is over `max_body_bytes`.
    TooLarge {
        /// The body's size.
        size_bytes: u64,
        /// The configured `max_body_bytes`.
        max_bytes: u64,
    },
    /// The shard's input queue stayed full: retry later.
    QueueFull,
    /// The store could not write the batch.
    Store(Arc<StoreError>),
    /// The engine is shut down.
    Stopped,
    /// No answer within the commit deadline: the outcome is unknown.
    TimedOut,
    /// The hook's shard's store holds all new hooks may fill (7/8 of
    /// `max_shard_bytes`): commit again once deliveries free room.
    StoreFull {
        /// About how many bytes of that the store holds.
        used_bytes: u64,
        /// What new hooks may fill.
        limit_bytes: u64,
    },
    /// The file system holding the hook's shard's store has no more room
    /// than `min_free_disk_bytes` keeps for recording deliveries (past the
    /// pages free inside the store): commit again once deliveries free
    /// pages in the store, or room is freed on the disk.
    DiskFull {
        /// What the file system had free at the last measure.
        available_bytes: u64,
        /// The configured `min_free_disk_bytes`.
        min_free_bytes: u64,
    },
    /// The hook's tenant holds its `max_stored_bytes` in its shard's store
    /// (pending and dead hooks): commit again once its deliveries, or a
    /// purge of its dead letters, free room.
    TenantFull {
        tenant: String,
        /// About how many bytes the tenant's hooks hold, with this one.
        used_bytes: u64,
        /// The tenant's `max_stored_bytes`.
        limit_bytes: u64,
    },
    /// The hook's shard hit an internal error (a panic) and is restarting
    /// from its store: the hook may not be durable; commit it again (if it
    /// was, the hook is delivered twice).
    ShardRestarting,
    /// `commit` was called on a shard's thread (in an `on_outcome`,
    /// `on_breaker` or `commit_then` callback), where waiting for a shard
    /// could wait for the thread it blocks: nothing was committed. Commit
    /// with `commit_then` there.
    OnShardThread,
}

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommitError::UnknownSource(id) => write!(f, "no source {id:?} is configured"),
            CommitError::BadHeader { name, why } => write!(f, "header {name:?} {why}"),
            CommitError::TooLarge {
                size_bytes,
                max_bytes,
            } => write!(
                f,
                "body of {size_bytes} bytes is over max_body_bytes ({max_bytes})"
            ),
            CommitError::QueueFull => write!(f, "the commit queue is full"),
            CommitError::Store(e) => write!(f, "commit failed: {e}"),
            CommitError::Stopped => write!(f, "the engine is stopped"),
            CommitError::TimedOut => write!(
                f,
                "no answer from the store within {COMMIT_REPLY_WAIT_MS} ms"
            ),
            CommitError::StoreFull {
                used_bytes,
                limit_bytes,
            } => write!(
                f,
                "the shard's store is full ({used_bytes} bytes in use; new hooks may fill {limit_bytes}, 7/8 of max_shard_bytes): commit again once deliveries free room"
            ),
            CommitError::DiskFull {
                available_bytes,
                min_free_bytes,
            } => write!(
                f,
                "the disk is full: the file system holding the shard's store has {available_bytes} bytes free, and min_free_disk_bytes keeps {min_free_bytes} for recording deliveries: commit again once deliveries or the operator free room"
            ),
            CommitError::TenantFull {
                tenant,
                used_bytes,
                limit_bytes,
            } => write!(
                f,
                "tenant {tenant:?} is at its max_stored_bytes ({limit_bytes}; its hooks would hold {used_bytes} with this one): commit again once its deliveries free room"
            ),
            CommitError::ShardRestarting => write!(
                f,
                "the shard is restarting after an internal error: the hook may not be durable, commit it again"
            ),
            CommitError::OnShardThread => write!(f, "{ON_SHARD_THREAD}: nothing was committed; use commit_then, which does not wait"),
        }
    }
}

impl std::error::Error for CommitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CommitError::Store(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// Why the engine did not open.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The config is invalid (the error names the key and the value).
    Config(ConfigError),
    /// A shard's store did not open or recover.
    Store(StoreError),
    /// A shard, worker or coordinator thread could not be started.
    Thread(std::io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Config(e) => write!(f, "{e}"),
            OpenError::Store(e) => write!(f, "{e}"),
            OpenError::Thread(e) => write!(f, "cannot start a thread: {e}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Config(e) => Some(e),
            OpenError::Store(e) => Some(e),
            OpenError::Thread(e) => Some(e),
        }
    }
}

/// Why an engine call that asks the shards got no answer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Unavailable {
    /// The engine is shut down.
    Stopped,
    /// A shard did not take the call or answer it within its deadline.
    TimedOut,
    /// A shard's store failed to read or write (a shard whose write failed
    /// rebuilds from its store, and the call may be made again).
    StoreFailed(Arc<StoreError>),
    /// Called on a shard's thread (in an `on_outcome`, `on_breaker` or
    /// `commit_then` callback), where waiting for the shards could wait for
    /// the thread it blocks: call it from another thread.
    OnShardThread,
    /// `tick` called inside one of the engine's own sink calls (a host
    /// sink's `deliver`), where waiting for its attempts to end would wait
    /// for the attempt making the call.
    InSinkCall,
}

/// How the errors of a waiting call made on a shard's thread begin.
const ON_SHARD_THREAD: &str =
    "called on a shard's thread (in an on_outcome, on_breaker or commit_then callback), where waiting for the shards would stall this one";

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Stopped => write!(f, "the dispatch engine is stopped"),
            Unavailable::TimedOut => write!(
                f,
                "a shard of the dispatch engine did not answer within the call's deadline"
            ),
            Unavailable::StoreFailed(e) => {
                write!(
                    f,
                    "a shard's store failed ({e}); the call may be made again"
                )
            }
            Unavailable::OnShardThread => {
                write!(f, "{ON_SHARD_THREAD}: call it from another thread")
            }
            Unavailable::InSinkCall => write!(
                f,
                "tick called inside one of this engine's sink calls, where waiting for its attempts to end would wait for this one: call it from another thread"
            ),
        }
    }
}

impl From<StoreError> for Unavailable {
    fn from(e: StoreError) -> Unavailable {
        Unavailable::StoreFailed(Arc::new(e))
    }
}

impl From<Arc<StoreError>> for Unavailable {
    fn from(e: Arc<StoreError>) -> Unavailable {
        Unavailable::StoreFailed(e)
    }
}

impl std::error::Error for Unavailable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unavailable::StoreFailed(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
