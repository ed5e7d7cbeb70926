//! How the core dead-letters a row: by its sink key's answers (counted as
//! the key's outcome) or because the config no longer delivers it, each
//! counted by its kind of reason, written as a store op and reported to
//! an observer.

use super::*;

impl Core {
    /// Dead-letters a row by its key's answers (an error, its attempts used
    /// up, or its retry horizon), counting it as the key's outcome too, and
    /// reporting it (with its last attempt's number) when observed.
    pub(super) fn sink_dead(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        hook: &crate::store::Hook,
        row: RowId,
        fields: RowFields,
        reason: DeadReason,
    ) {
        let state = self.key_mut(key);
        state.outcomes.dead += 1;
        state.outcomes.dead_by_reason.add(reason.kind());
        state.unlogged_dead += 1;
        if state.unlogged_dead == 1 {
            self.unlogged_dead_keys.push(key.clone());
        }
        self.dead(now_ms, row, fields, reason, Some((key, &hook.id)));
    }

    /// Dead-letters a row its config no longer delivers (its source or
    /// sink gone): no sink's outcome, but reported when observed, under
    /// the sink it was written for and its last attempt's number (0: none).
    pub(super) fn config_dead(
        &mut self,
        now_ms: u64,
        row: RowId,
        hook_id: &str,
        source_id: &Arc<str>,
        fields: RowFields,
        reason: DeadReason,
    ) {
        let key = fields.key(source_id, row);
        self.dead(now_ms, row, fields, reason, Some((&key, hook_id)));
    }

    /// Writes a row dead; `reported_as` (its sink key and hook id) also
    /// reports it, with its last attempt's number, when observed.
    pub(super) fn dead(
        &mut self,
        now_ms: u64,
        row: RowId,
        fields: RowFields,
        reason: DeadReason,
        reported_as: Option<(&SinkKey, &str)>,
    ) {
        self.stats.dead += 1;
        self.stats.dead_by_reason.add(reason.kind());
        let reason = truncate(reason.to_string());
        if let Some((key, hook_id)) = reported_as {
            self.observe(key, hook_id, fields.attempts, now_ms, || Outcome::Dead {
                reason: reason.clone(),
            });
        }
        self.ops.push_back(StoreOp::Dead {
            row,
            fields,
            dead_at_ms: now_ms,
            reason,
        });
    }
}
