//! [`Engine::wake_sink`]: an operator's "the receiver is back, deliver
//! its backlog now" (see `core::sink_wake`).

use super::engine::Engine;
use super::errors::Unavailable;
use super::shard::ShardInput;
use crate::core::SinkKey;
use std::fmt;
use std::time::Duration;

/// How long `wake_sink` waits for the shard's answer to one step.
const WAKE_STEP_WAIT: Duration = Duration::from_secs(30);

/// What [`Engine::wake_sink`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkWoken {
    /// Rows made due now: those waiting out a backoff or parked behind
    /// the sink's breaker (rows its breaker held until it closed are made
    /// due by the shard a window at a time as the sink takes them, and
    /// not counted).
    pub woken: u64,
    /// Whether the sink's breaker was open (or half-open) and is closed.
    pub breaker_closed: bool,
}

/// Why [`Engine::wake_sink`] woke nothing.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum WakeError {
    /// No configured source has this id.
    UnknownSource(String),
    /// The source has no sink at this index.
    UnknownSink { source_id: String, sink_index: u16 },
    /// The sink is paused: its rows are held until a reload resumes it.
    Paused { source_id: String, sink_index: u16 },
    /// The shard did not answer; the steps before stay done.
    Unavailable(Unavailable),
}

impl fmt::Display for WakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WakeError::UnknownSource(id) => write!(f, "no source {id:?} is configured"),
            WakeError::UnknownSink {
                source_id,
                sink_index,
            } => write!(f, "source {source_id:?} has no sink at index {sink_index}"),
            WakeError::Paused {
                source_id,
                sink_index,
            } => write!(
                f,
                "sink {sink_index} of source {source_id:?} is paused: its rows are held until a reload resumes it (paused = false)"
            ),
            WakeError::Unavailable(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WakeError {}

impl From<Unavailable> for WakeError {
    fn from(e: Unavailable) -> WakeError {
        WakeError::Unavailable(e)
    }
}

impl Engine {
    /// Wakes sink `sink_index` of `source_id`, whose receiver is back:
    /// closes its breaker and makes every row of it waiting out a backoff
    /// or an open breaker due now, attempts kept (see `core::sink_wake`).
    /// The scan then claims them as any due rows, within the windows (the
    /// rows of the source's tenant as configured: those of hooks committed
    /// before a reload moved the source to another tenant keep theirs). It
    /// runs in the tenant's shard in steps, between which the shard goes
    /// on committing and delivering, so a large backlog wakes without
    /// stalling it.
    pub fn wake_sink(&self, source_id: &str, sink_index: u16) -> Result<SinkWoken, WakeError> {
        let key = self.sink_key(source_id, sink_index)?;
        let shard = Engine::shard_of(&key.tenant, self.shards.len());
        let mut woken = SinkWoken {
            woken: 0,
            breaker_closed: false,
        };
        let mut after = None;
        loop {
            let ask = |_, reply| ShardInput::WakeSink {
                key: key.clone(),
                after: after.clone(),
                reply,
            };
            let step = (self.ask_shards([shard], WAKE_STEP_WAIT, ask)?.pop())
                .expect("one shard asked, one answer");
            let step = step.map_err(Unavailable::from)?;
            woken.woken += step.woken;
            woken.breaker_closed |= step.breaker_closed;
            after = step.next;
            if after.is_none() {
                return Ok(woken);
            }
        }
    }

    /// The key of a configured sink that is not paused, as the shards'
    /// catalog has it.
    fn sink_key(&self, source_id: &str, sink_index: u16) -> Result<SinkKey, WakeError> {
        let catalog = self.catalog.read().clone();
        let source = (catalog.source(source_id))
            .ok_or_else(|| WakeError::UnknownSource(source_id.to_string()))?;
        let sink = source.sinks.get(usize::from(sink_index));
        let sink = sink.ok_or_else(|| WakeError::UnknownSink {
            source_id: source_id.to_string(),
            sink_index,
        })?;
        if sink.paused {
            return Err(WakeError::Paused {
                source_id: source_id.to_string(),
                sink_index,
            });
        }
        Ok(SinkKey {
            tenant: source.tenant.clone(),
            source_id: source_id.into(),
            sink_index,
            sink_type: sink.sink_type.clone(),
        })
    }
}
