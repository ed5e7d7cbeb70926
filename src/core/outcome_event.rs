//! What became of each attempt, for a host that watches its deliveries
//! (`EngineBuilder::on_outcome`): delivered, failed and due again, or
//! dead-lettered (and rows dead-lettered without one, for their horizon,
//! their config or an operator's `dead_letter_source`). Off unless the
//! shell asks ([`Core::observe_outcomes`]), so an engine nobody watches
//! builds no events.

use super::{Core, RowFields, RowId, SinkKey, TenantId};
use std::sync::Arc;

/// One attempt's outcome: the row it was for (its hook, and the sink by
/// source, index and type), which attempt, when, and what it came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutcomeEvent {
    pub hook_id: String,
    pub tenant: TenantId,
    pub source_id: Arc<str>,
    pub sink_index: u16,
    pub sink_type: Arc<str>,
    /// The attempt's number, 1-based; for a row dead-lettered without a
    /// new attempt (past its horizon while it waited, or its source or
    /// sink gone from the config), its last attempt's (0: none).
    pub attempt: u32,
    pub at_ms: u64,
    pub outcome: Outcome,
}

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    Delivered,
    /// Failed; the row is due again at `due_at_ms`.
    Retrying {
        due_at_ms: u64,
        error: String,
    },
    /// Failed for good: the row is a dead letter with this reason.
    Dead {
        reason: String,
    },
}

impl OutcomeEvent {
    /// The sink key of the row it is of.
    pub fn sink_key(&self) -> SinkKey {
        SinkKey {
            tenant: self.tenant.clone(),
            source_id: self.source_id.clone(),
            sink_index: self.sink_index,
            sink_type: self.sink_type.clone(),
        }
    }
}

impl Core {
    /// Whether to build an [`OutcomeEvent`] per settled attempt for
    /// [`Core::poll_outcome_event`].
    pub fn observe_outcomes(&mut self, on: bool) {
        self.observed = on;
    }

    /// The next attempt's outcome, in the order they were handled.
    #[must_use]
    pub fn poll_outcome_event(&mut self) -> Option<OutcomeEvent> {
        self.outcome_events.pop_front()
    }

    /// Reports a row the store wrote dead without the core's hand (a
    /// lane member of a source being dead-lettered): `source_id`'s sink of
    /// `row`, a hook `hook_id`, with the dead letter's `reason`.
    pub fn report_dead(
        &mut self,
        now_ms: u64,
        source_id: &Arc<str>,
        (row, hook_id): (RowId, &str),
        fields: &RowFields,
        reason: &str,
    ) {
        let key = fields.key(source_id, row);
        self.observe(&key, hook_id, fields.attempts, now_ms, || Outcome::Dead {
            reason: reason.to_string(),
        });
    }

    /// Queues the outcome of hook `hook_id`'s row of `key`, if observed.
    pub(super) fn observe(
        &mut self,
        key: &SinkKey,
        hook_id: &str,
        attempt: u32,
        at_ms: u64,
        outcome: impl FnOnce() -> Outcome,
    ) {
        if !self.observed {
            return;
        }
        self.outcome_events.push_back(OutcomeEvent {
            hook_id: hook_id.to_string(),
            tenant: key.tenant.clone(),
            source_id: key.source_id.clone(),
            sink_index: key.sink_index,
            sink_type: key.sink_type.clone(),
            attempt,
            at_ms,
            outcome: outcome(),
        });
    }
}
