//! Dead-row notices told together per sink key (`notifications.coalesce_ms`).
//!
//! The first row of a key to die is told at once (`row.dead`), and opens a
//! window of `coalesce_ms`; rows of that key that die within it are only
//! counted, and told together when it closes (`rows.dead`: how many, when
//! the first and last died, why, and some of their hooks). A window that
//! told of rows opens another, so a receiver that stays down is told of
//! once per window; one that closes with none ends, and the key's next
//! dead row is told at once again. Time is passed in (the notifier's
//! monotonic milliseconds), so the windows are tested in virtual time.

use crate::core::{DeadReasonKind, Outcome, OutcomeEvent, SinkKey};
use crate::limits::{SUMMARY_MAX_HOOK_IDS, SUMMARY_MAX_REASONS};
use std::collections::{BTreeMap, HashMap};

/// The open windows, by sink key.
#[derive(Default)]
pub(crate) struct DeadSummaries {
    windows: HashMap<SinkKey, Window>,
    /// The earliest of `windows`' closing times.
    next_close_ms: Option<u64>,
}

struct Window {
    closes_at_ms: u64,
    /// The rows counted since the window opened, if any.
    summary: Option<Summary>,
}

/// Dead rows of one sink key told together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub key: SinkKey,
    pub count: u64,
    /// When the first and the last of them died (their events' times).
    pub first_at_ms: u64,
    pub last_at_ms: u64,
    /// How many died of each reason, for the first `SUMMARY_MAX_REASONS`
    /// distinct ones; rows of other reasons are `other_reasons`.
    pub reasons: BTreeMap<String, u64>,
    pub other_reasons: u64,
    /// How many died of each kind of reason (all of them: there are few
    /// kinds), by the kind's name.
    pub reason_kinds: BTreeMap<&'static str, u64>,
    /// The hooks of the first `SUMMARY_MAX_HOOK_IDS` rows.
    pub hook_ids: Vec<String>,
}

impl DeadSummaries {
    /// Takes a dead row's event at `now_ms`: `true` if it is to be told
    /// alone now (no window of its key is open, or `window_ms` is 0),
    /// `false` if it was counted in its key's window.
    pub fn take(&mut self, event: &OutcomeEvent, now_ms: u64, window_ms: u64) -> bool {
        if window_ms == 0 {
            return true;
        }
        let key = event.sink_key();
        let Some(window) = self.windows.get_mut(&key) else {
            let closes_at_ms = now_ms + window_ms;
            self.next_close_ms = Some(closes_at_ms.min(self.next_close_ms.unwrap_or(u64::MAX)));
            self.windows.insert(
                key,
                Window {
                    closes_at_ms,
                    summary: None,
                },
            );
            return true;
        };
        let summary = window.summary.get_or_insert_with(|| Summary {
            key,
            count: 0,
            first_at_ms: event.at_ms,
            last_at_ms: event.at_ms,
            reasons: BTreeMap::new(),
            other_reasons: 0,
            reason_kinds: BTreeMap::new(),
            hook_ids: Vec::new(),
        });
        summary.add(event);
        false
    }

    /// The summaries of the windows closed by `now_ms`. A window with rows
    /// opens another of `window_ms` (none if 0); one without ends.
    pub fn closed(&mut self, now_ms: u64, window_ms: u64) -> Vec<Summary> {
        let mut told = Vec::new();
        self.windows.retain(|_, window| {
            if now_ms < window.closes_at_ms {
                return true;
            }
            let Some(summary) = window.summary.take() else {
                return false;
            };
            told.push(summary);
            window.closes_at_ms = now_ms + window_ms;
            window_ms > 0
        });
        self.next_close_ms = self.windows.values().map(|w| w.closes_at_ms).min();
        told.sort_by_key(|s| s.first_at_ms);
        told
    }

    /// When the first open window closes, if any is open.
    pub fn next_close_ms(&self) -> Option<u64> {
        self.next_close_ms
    }

    /// Every window's rows, closing them all (the node stops).
    pub fn drain(&mut self) -> Vec<Summary> {
        self.next_close_ms = None;
        let mut told: Vec<Summary> = (self.windows.drain())
            .filter_map(|(_, window)| window.summary)
            .collect();
        told.sort_by_key(|s| s.first_at_ms);
        told
    }
}

impl Summary {
    fn add(&mut self, event: &OutcomeEvent) {
        let Outcome::Dead { reason } = &event.outcome else {
            unreachable!("only dead rows are summarized");
        };
        self.count += 1;
        self.first_at_ms = self.first_at_ms.min(event.at_ms);
        self.last_at_ms = self.last_at_ms.max(event.at_ms);
        let room = self.reasons.len() < SUMMARY_MAX_REASONS;
        match self.reasons.get_mut(reason) {
            Some(n) => *n += 1,
            None if room => _ = self.reasons.insert(reason.clone(), 1),
            None => self.other_reasons += 1,
        }
        if let Some(kind) = DeadReasonKind::of(reason, &event.sink_type) {
            *self.reason_kinds.entry(kind.name()).or_default() += 1;
        }
        if self.hook_ids.len() < SUMMARY_MAX_HOOK_IDS {
            self.hook_ids.push(event.hook_id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn dead(source: &str, hook: u32, at_ms: u64, reason: &str) -> OutcomeEvent {
        OutcomeEvent {
            hook_id: format!("h{hook}"),
            tenant: "t".into(),
            source_id: Arc::from(source),
            sink_index: 0,
            sink_type: Arc::from("http"),
            attempt: 3,
            at_ms,
            outcome: Outcome::Dead {
                reason: reason.into(),
            },
        }
    }

    /// The first dead row of a key is told at once; the rest of its window
    /// are told in one summary when it closes; a window with rows opens
    /// another, one without ends; keys have windows of their own.
    #[test]
    fn a_keys_dead_rows_after_the_first_are_told_once_per_window() {
        let mut s = DeadSummaries::default();
        assert_eq!(s.next_close_ms(), None);
        assert!(s.take(&dead("a", 1, 100, "gone"), 0, 1_000));
        assert!(!s.take(&dead("a", 2, 150, "gone"), 50, 1_000));
        assert!(!s.take(&dead("a", 3, 120, "timeout"), 60, 1_000));
        assert!(s.take(&dead("b", 4, 130, "gone"), 70, 1_000), "b's first");
        assert_eq!(s.next_close_ms(), Some(1_000), "a's window closes first");
        assert_eq!(s.closed(999, 1_000), []);
        let told = s.closed(1_100, 1_000);
        assert_eq!(s.next_close_ms(), Some(2_100), "a's next window");
        assert_eq!(told.len(), 1, "b's window had no rows after its first");
        let a = &told[0];
        assert_eq!(&*a.key.source_id, "a");
        assert_eq!((a.count, a.first_at_ms, a.last_at_ms), (2, 120, 150));
        let reasons = [("gone".to_string(), 1), ("timeout".to_string(), 1)];
        assert_eq!(a.reasons, BTreeMap::from(reasons));
        assert_eq!(a.hook_ids, ["h2", "h3"]);
        // a's window opened again at 1,100; b's ended.
        assert!(!s.take(&dead("a", 5, 1_500, "gone"), 1_500, 1_000));
        assert!(s.take(&dead("b", 6, 1_500, "gone"), 1_500, 1_000));
        assert_eq!(s.closed(2_099, 1_000), []);
        let told = s.closed(2_100, 1_000);
        assert_eq!((told.len(), told[0].count), (1, 1));
        // b's window closes with nothing and ends; then a's next one.
        assert_eq!(s.closed(2_500, 1_000), []);
        assert_eq!(s.windows.len(), 1);
        assert_eq!(s.closed(3_100, 1_000), []);
        assert!(s.windows.is_empty());
        assert_eq!(s.next_close_ms(), None);
        assert!(s.take(&dead("a", 7, 3_200, "gone"), 3_200, 1_000));
    }

    /// A summary counts its rows by kind of reason, all of them.
    #[test]
    fn a_summary_counts_every_row_by_its_kind_of_reason() {
        let mut s = DeadSummaries::default();
        assert!(s.take(&dead("a", 0, 0, "sink http: HTTP status 503"), 0, 60_000));
        for hook in 1..=20 {
            let reason = match hook % 4 {
                0 => "sink http: permanent: HTTP status 400: bad".to_string(),
                _ => format!("sink http: HTTP status 50{}", hook % 10),
            };
            assert!(!s.take(&dead("a", hook, hook.into(), &reason), 1, 60_000));
        }
        assert!(!s.take(&dead("a", 21, 21, "retry_horizon: http"), 1, 60_000));
        let told = s.drain();
        let kinds = [("max_attempts", 15), ("permanent", 5), ("retry_horizon", 1)];
        assert_eq!(told[0].reason_kinds, BTreeMap::from(kinds));
        // Twelve distinct texts: the two rows whose texts came after the
        // ten a summary names are counted by their kinds all the same.
        assert_eq!(told[0].other_reasons, 2);
    }

    /// A window of 0 tells each row alone; a summary names its first
    /// reasons and hooks and counts the rest.
    #[test]
    fn no_window_tells_each_row_and_a_summary_is_bounded() {
        let mut s = DeadSummaries::default();
        for hook in 0..3 {
            assert!(s.take(&dead("a", hook, 0, "gone"), 0, 0));
        }
        assert!(s.windows.is_empty());
        assert!(s.take(&dead("a", 0, 0, "r0"), 0, 60_000));
        for hook in 1..=30 {
            let reason = format!("r{}", hook % 15);
            assert!(!s.take(&dead("a", hook, hook.into(), &reason), 1, 60_000));
        }
        let told = s.drain();
        let a = &told[0];
        assert_eq!(a.count, 30);
        assert_eq!(a.reasons.len(), SUMMARY_MAX_REASONS);
        assert_eq!(a.reasons.values().sum::<u64>() + a.other_reasons, 30);
        assert_eq!(a.hook_ids.len(), SUMMARY_MAX_HOOK_IDS);
        assert_eq!(a.hook_ids[0], "h1");
        assert!(s.windows.is_empty(), "drained");
        assert_eq!(s.next_close_ms(), None);
    }
}
