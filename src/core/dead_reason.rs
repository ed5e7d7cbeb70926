//! Why a row was dead-lettered: the reason the core writes on a dead row
//! (as text), and the kinds of reason an operator filters dead letters by.
//!
//! A dead row stores its reason as the text of [`DeadReason`]'s display,
//! so [`DeadReasonKind::of`] reads the kind back from that text: rows
//! written before kinds existed classify as new ones do, and the store's
//! format did not change for them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Why a row was dead-lettered. Stored as its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadReason {
    /// The retry policy gave up on the sink's last error, or the error was permanent.
    Sink { sink_type: Arc<str>, error: String },
    /// The row's source no longer exists.
    SourceGone { source_id: Arc<str> },
    /// The row's sink cannot be bound in its source any more.
    SinkGone {
        sink_index: u16,
        sink_type: Arc<str>,
    },
    /// The row's retry horizon passed.
    RetryHorizon { sink_type: Arc<str> },
    /// The row's hook record does not decode.
    HookCorrupt,
}

impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadReason::Sink { sink_type, error } => write!(f, "sink {sink_type}: {error}"),
            DeadReason::SourceGone { source_id } => write!(f, "source_gone: {source_id}"),
            DeadReason::SinkGone {
                sink_index,
                sink_type,
            } => write!(f, "sink_gone: index {sink_index}, type {sink_type}"),
            DeadReason::RetryHorizon { sink_type } => write!(f, "retry_horizon: {sink_type}"),
            DeadReason::HookCorrupt => write!(f, "undecodable hook record"),
        }
    }
}

impl DeadReason {
    /// Its kind, as [`DeadReasonKind::of`] reads it back from its text.
    pub fn kind(&self) -> DeadReasonKind {
        match self {
            DeadReason::Sink { error, .. } => sink_error_kind(error),
            DeadReason::SourceGone { .. } => DeadReasonKind::SourceGone,
            DeadReason::SinkGone { .. } => DeadReasonKind::SinkGone,
            DeadReason::RetryHorizon { .. } => DeadReasonKind::RetryHorizon,
            DeadReason::HookCorrupt => DeadReasonKind::Undecodable,
        }
    }
}

/// The kind of a row the sink's answers dead-lettered: permanent when the
/// error says so (as `SinkError`'s display of a permanent error begins),
/// else its attempts ran out.
fn sink_error_kind(error: &str) -> DeadReasonKind {
    if error.starts_with("permanent: ") {
        DeadReasonKind::Permanent
    } else {
        DeadReasonKind::MaxAttempts
    }
}

/// What a dead row died of, as dead-letter filters name it: a replay of
/// an outage takes the rows whose attempts ran out (`max_attempts`,
/// `retry_horizon`) and leaves those the receiver refused (`permanent`),
/// which would only die again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadReasonKind {
    /// The sink answered that no retry could succeed (`SinkError::Permanent`,
    /// an HTTP 400, 401, 403, 404, 410, 413 or 422).
    Permanent,
    /// The sink kept failing until the row's `max_attempts` were used.
    MaxAttempts,
    /// The row was still failing at its retry horizon (`retry.max_elapsed_ms`
    /// after its first attempt).
    RetryHorizon,
    /// Its source left the config, or was dead-lettered with its backlog.
    SourceGone,
    /// Its sink left its source's config.
    SinkGone,
    /// Its row or hook record does not decode.
    Undecodable,
}

impl DeadReasonKind {
    pub const ALL: [DeadReasonKind; 6] = [
        DeadReasonKind::Permanent,
        DeadReasonKind::MaxAttempts,
        DeadReasonKind::RetryHorizon,
        DeadReasonKind::SourceGone,
        DeadReasonKind::SinkGone,
        DeadReasonKind::Undecodable,
    ];

    /// The name filters and listings use.
    pub fn name(self) -> &'static str {
        match self {
            DeadReasonKind::Permanent => "permanent",
            DeadReasonKind::MaxAttempts => "max_attempts",
            DeadReasonKind::RetryHorizon => "retry_horizon",
            DeadReasonKind::SourceGone => "source_gone",
            DeadReasonKind::SinkGone => "sink_gone",
            DeadReasonKind::Undecodable => "undecodable",
        }
    }

    /// The kind named `name`, if any.
    pub fn named(name: &str) -> Option<DeadReasonKind> {
        DeadReasonKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its place in [`DeadReasonKind::ALL`].
    fn index(self) -> usize {
        (DeadReasonKind::ALL.iter())
            .position(|k| *k == self)
            .expect("a kind of ALL")
    }

    /// Its bit in a [`ReasonKinds`].
    fn bit(self) -> u8 {
        1 << self.index()
    }

    /// The kind of the stored reason of a dead row of `sink_type`: the
    /// text of a [`DeadReason`] (a sink's error is permanent when its text
    /// says so, as `SinkError`'s display of a permanent error does), or the
    /// store's own for a row that does not decode. `None` for any other text.
    pub fn of(reason: &str, sink_type: &str) -> Option<DeadReasonKind> {
        let sink_error = reason
            .strip_prefix("sink ")
            .and_then(|r| r.strip_prefix(sink_type));
        if let Some(error) = sink_error.and_then(|r| r.strip_prefix(": ")) {
            return Some(sink_error_kind(error));
        }
        let prefixes = [
            ("source_gone: ", DeadReasonKind::SourceGone),
            ("sink_gone: ", DeadReasonKind::SinkGone),
            ("retry_horizon: ", DeadReasonKind::RetryHorizon),
            ("undecodable ", DeadReasonKind::Undecodable),
        ];
        let kind = prefixes.into_iter().find(|(p, _)| reason.starts_with(p));
        kind.map(|(_, kind)| kind)
    }
}

impl fmt::Display for DeadReasonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rows dead-lettered, counted by their kind of reason. Serialized as a
/// map from each kind's name to its count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeadCounts([u64; DeadReasonKind::ALL.len()]);

impl DeadCounts {
    pub fn add(&mut self, kind: DeadReasonKind) {
        self.0[kind.index()] += 1;
    }

    pub fn get(&self, kind: DeadReasonKind) -> u64 {
        self.0[kind.index()]
    }

    /// Each kind with its count, in [`DeadReasonKind::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (DeadReasonKind, u64)> + '_ {
        DeadReasonKind::ALL.into_iter().map(|k| (k, self.get(k)))
    }
}

impl Serialize for DeadCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter().map(|(kind, n)| (kind.name(), n)))
    }
}

/// One or more kinds of reason, as a filter takes them: written as their
/// names separated by commas (`max_attempts,retry_horizon`: what an
/// outage dead-lettered), in a query, a command's flag and a replay's JSON
/// alike.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReasonKinds(u8);

// A kind is a bit of a `ReasonKinds`.
const _: () = assert!(DeadReasonKind::ALL.len() <= u8::BITS as usize);

impl ReasonKinds {
    pub fn contains(self, kind: DeadReasonKind) -> bool {
        self.0 & kind.bit() != 0
    }
}

impl From<DeadReasonKind> for ReasonKinds {
    fn from(kind: DeadReasonKind) -> ReasonKinds {
        ReasonKinds(kind.bit())
    }
}

impl FromStr for ReasonKinds {
    type Err = String;

    /// Names separated by commas; the error names the part that is not
    /// one and every name there is.
    fn from_str(text: &str) -> Result<ReasonKinds, String> {
        let mut kinds = 0;
        for part in text.split(',').map(str::trim) {
            let Some(kind) = DeadReasonKind::named(part) else {
                let names: Vec<&str> = DeadReasonKind::ALL.iter().map(|k| k.name()).collect();
                let near = crate::config::suggest::nearest(part, names.iter().copied())
                    .map_or(String::new(), |name| format!(" (did you mean {name:?}?)"));
                let names = names.join(", ");
                return Err(format!("{part:?} is not a kind of reason{near}: one of {names}, or several separated by commas"));
            };
            kinds |= kind.bit();
        }
        Ok(ReasonKinds(kinds))
    }
}

impl fmt::Display for ReasonKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds = DeadReasonKind::ALL
            .into_iter()
            .filter(|k| self.contains(*k));
        let names: Vec<&str> = kinds.map(DeadReasonKind::name).collect();
        f.write_str(&names.join(","))
    }
}

impl fmt::Debug for ReasonKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReasonKinds({self})")
    }
}

impl Serialize for ReasonKinds {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ReasonKinds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ReasonKinds, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::SinkError;

    /// Each reason the core writes reads back as its kind; a sink's error
    /// as `SinkError` words it (its failure's message is what the row keeps).
    #[test]
    fn every_reason_the_core_writes_reads_back_as_its_kind() {
        let sink = |error: SinkError| DeadReason::Sink {
            sink_type: Arc::from("http"),
            error: error.into_failure().message,
        };
        let cases = [
            (
                sink(SinkError::permanent("HTTP status 410: gone")),
                DeadReasonKind::Permanent,
            ),
            (
                sink(SinkError::transient("HTTP status 503: busy")),
                DeadReasonKind::MaxAttempts,
            ),
            (
                sink(SinkError::retry_after(5_000, "HTTP status 429")),
                DeadReasonKind::MaxAttempts,
            ),
            (
                DeadReason::Sink {
                    sink_type: Arc::from("sqs"),
                    error: "attempt_timeout: no result after 30000 ms".into(),
                },
                DeadReasonKind::MaxAttempts,
            ),
            (
                DeadReason::SourceGone {
                    source_id: Arc::from("stripe"),
                },
                DeadReasonKind::SourceGone,
            ),
            (
                DeadReason::SinkGone {
                    sink_index: 1,
                    sink_type: Arc::from("pubsub"),
                },
                DeadReasonKind::SinkGone,
            ),
            (
                DeadReason::RetryHorizon {
                    sink_type: Arc::from("http"),
                },
                DeadReasonKind::RetryHorizon,
            ),
            (DeadReason::HookCorrupt, DeadReasonKind::Undecodable),
        ];
        for (reason, kind) in cases {
            let sink_type = match &reason {
                DeadReason::Sink { sink_type, .. } => sink_type.to_string(),
                _ => "http".into(),
            };
            let text = reason.to_string();
            assert_eq!(DeadReasonKind::of(&text, &sink_type), Some(kind), "{text}");
            assert_eq!(reason.kind(), kind, "{text}");
        }
        // A host's sink type may hold what a reason's parts are split by.
        let odd = DeadReason::Sink {
            sink_type: Arc::from("x: permanent: y"),
            error: "down".into(),
        };
        let text = odd.to_string();
        let kind = DeadReasonKind::of(&text, "x: permanent: y");
        assert_eq!(kind, Some(DeadReasonKind::MaxAttempts), "{text}");
        assert_eq!(
            DeadReasonKind::of("undecodable delivery row", ""),
            Some(DeadReasonKind::Undecodable)
        );
        assert_eq!(DeadReasonKind::of("", "http"), None);
        assert_eq!(DeadReasonKind::of("breaker open", "http"), None);
        assert_eq!(DeadReasonKind::of("sink sqs: down", "http"), None);
    }

    #[test]
    fn each_kind_is_named_by_its_name_alone() {
        for kind in DeadReasonKind::ALL {
            assert_eq!(DeadReasonKind::named(kind.name()), Some(kind));
            let one: ReasonKinds = kind.name().parse().unwrap();
            assert_eq!(one, ReasonKinds::from(kind));
            let others = DeadReasonKind::ALL.into_iter().filter(|k| *k != kind);
            assert!(one.contains(kind) && others.into_iter().all(|k| !one.contains(k)));
        }
        assert_eq!(DeadReasonKind::named("Permanent"), None);
        let mut counts = DeadCounts::default();
        counts.add(DeadReasonKind::Permanent);
        counts.add(DeadReasonKind::Permanent);
        assert_eq!(
            serde_json::to_value(counts).unwrap(),
            serde_json::json!({"permanent": 2, "max_attempts": 0, "retry_horizon": 0,
                "source_gone": 0, "sink_gone": 0, "undecodable": 0})
        );
    }

    /// Several kinds separated by commas, in any order, spaces allowed;
    /// written back in one order; anything else refused, naming the part.
    #[test]
    fn kinds_of_reason_are_read_and_written_as_names_separated_by_commas() {
        let outage: ReasonKinds = "retry_horizon, max_attempts".parse().unwrap();
        assert!(outage.contains(DeadReasonKind::MaxAttempts));
        assert!(outage.contains(DeadReasonKind::RetryHorizon));
        assert!(!outage.contains(DeadReasonKind::Permanent));
        assert_eq!(outage.to_string(), "max_attempts,retry_horizon");
        assert_eq!(
            format!("{outage:?}"),
            "ReasonKinds(max_attempts,retry_horizon)"
        );
        let json = serde_json::to_string(&outage).unwrap();
        assert_eq!(json, "\"max_attempts,retry_horizon\"");
        assert_eq!(serde_json::from_str::<ReasonKinds>(&json).unwrap(), outage);
        let names = "one of permanent, max_attempts, retry_horizon, source_gone, sink_gone, undecodable, or several separated by commas";
        for (bad, part) in [("gone", "gone"), ("permanent,", ""), ("", "")] {
            let refused = bad.parse::<ReasonKinds>().unwrap_err();
            assert_eq!(
                refused,
                format!("{part:?} is not a kind of reason: {names}")
            );
        }
        let near = "max_attempts,retry_horizn"
            .parse::<ReasonKinds>()
            .unwrap_err();
        let told = format!(
            "\"retry_horizn\" is not a kind of reason (did you mean \"retry_horizon\"?): {names}"
        );
        assert_eq!(near, told);
        let refused = serde_json::from_str::<ReasonKinds>("\"x\"").unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("\"x\" is not a kind of reason"),
            "{refused}"
        );
    }
}
