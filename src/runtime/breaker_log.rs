//! What a shard tells operators about its breakers: a log line when one
//! opens (its key's rows are parked) and when it closes, and counts of both
//! for the metrics. The core reports the changes; the shard thread, which
//! does IO, writes them (the simulator, which drives the same core, does not).

use crate::core::BreakerEvent;

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
                crate::log::warn(
                    "breaker opened; the sink key's rows are parked until it lets a probe through",
                    &[
                        ("shard", &shard),
                        ("tenant", &key.tenant),
                        ("source", &key.source_id),
                        ("sink_index", &key.sink_index),
                        ("sink_type", &key.sink_type),
                        ("open_ms", &until_ms.saturating_sub(now_ms)),
                        ("consecutive_opens", opens),
                    ],
                );
            }
            BreakerEvent::Closed { key } => {
                self.closes += 1;
                crate::log::info(
                    "breaker closed; the sink key's rows run again",
                    &[
                        ("shard", &shard),
                        ("tenant", &key.tenant),
                        ("source", &key.source_id),
                        ("sink_index", &key.sink_index),
                        ("sink_type", &key.sink_type),
                    ],
                );
            }
        }
    }
}
