//! What a shard tells operators about its breakers: a log line when one
//! opens (its key's rows are parked), when it closes, and when a reload
//! or a restart moves it with its sink to another index, and counts of
//! opens and closes for the metrics. The core reports the changes; the
//! shard thread, which does IO, writes them (the simulator, which drives
//! the same core, does not).

use crate::core::{BreakerEvent, SinkKey};
use crate::log::Level;
use std::fmt::Display;

/// Breaker changes a shard logged since it opened.
#[derive(Debug, Default)]
pub struct BreakerLog {
    pub opens: u64,
    pub closes: u64,
}

impl BreakerLog {
    /// Logs and counts one change, seen at `now_ms` by shard `shard`.
    pub fn record(&mut self, shard: usize, now_ms: u64, event: &BreakerEvent) {
        match event {
            BreakerEvent::Opened {
                key,
                until_ms,
                opens,
            } => {
                self.opens += 1;
                let open_ms = until_ms.saturating_sub(now_ms);
                log_change(
                    Level::Warn,
                    "breaker opened; the sink key's rows are parked until it lets a probe through",
                    shard,
                    key,
                    &[("open_ms", &open_ms), ("consecutive_opens", opens)],
                );
            }
            BreakerEvent::Closed { key } => {
                self.closes += 1;
                log_change(
                    Level::Info,
                    "breaker closed; the sink key's rows run again",
                    shard,
                    key,
                    &[],
                );
            }
            BreakerEvent::Moved { from, to } => log_change(
                Level::Info,
                "breaker moved with its sink, which the config put at another index; still open",
                shard,
                to,
                &[("from_sink_index", &from.sink_index)],
            ),
        }
    }
}

/// One line naming the shard and the sink key, then `more`.
pub(super) fn log_change(
    level: Level,
    msg: &str,
    shard: usize,
    key: &SinkKey,
    more: &[(&str, &dyn Display)],
) {
    let mut fields: Vec<(&str, &dyn Display)> = vec![
        ("shard", &shard),
        ("tenant", &key.tenant),
        ("source", &key.source_id),
        ("sink_index", &key.sink_index),
        ("sink_type", &key.sink_type),
    ];
    fields.extend_from_slice(more);
    crate::log::write(level, msg, &fields);
}
