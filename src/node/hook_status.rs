//! `GET /v1/hooks/{id}`: a hook by the id its ingest returned, with where
//! each of its sinks' rows is (due, in flight, waiting in its lane, dead,
//! delivered or purged).

use super::admin::store_error;
use super::dead_letters::format_position;
use super::http::Response;
use crate::core::DeadReasonKind;
use crate::runtime::Engine;
use crate::store::{DeadPosition, Hook, HookStatus, RowRecord, SinkState, SinkStatus};
use base64::Engine as _;
use serde_json::{json, Map, Value};

pub(super) fn hook_status(engine: &Engine, id: &str) -> Response {
    match engine.hook_status(id) {
        Ok(Some(status)) => Response::json(200, &status_json(&status)),
        Ok(None) => Response::error(
            404,
            "unknown_hook",
            &format!("no hook {id:?} is stored: every sink's row was delivered or purged, or it was never committed"),
        ),
        Err(e) => store_error(&e),
    }
}

fn status_json(status: &HookStatus) -> Value {
    let hook = &status.hook;
    let mut shown = json!({
        "id": hook.id,
        "source_id": &*hook.source_id,
        "tenant": &*hook.tenant,
    });
    let sinks: Vec<Value> = status
        .sinks
        .iter()
        .map(|sink| sink_json(status.shard, hook.seq, sink))
        .collect();
    if let (Value::Object(shown), Value::Object(more)) = (&mut shown, hook_json(hook)) {
        shown.extend(more);
        shown.insert("sinks".into(), Value::Array(sinks));
    }
    shown
}

/// What an operator reads of a stored hook besides its ids: when it was
/// received, its content type, dedupe key, headers and body (base64).
pub(super) fn hook_json(hook: &Hook) -> Value {
    json!({
        "received_at_ms": hook.received_at_ms,
        "content_type": hook.content_type,
        "dedupe_key": hook.dedupe_key,
        "headers": hook.headers,
        "body_base64": base64::engine::general_purpose::STANDARD.encode(&hook.body),
    })
}

/// One sink's row: its state and what its record says.
fn sink_json(shard: u32, seq: u64, sink: &SinkStatus) -> Value {
    let (state, record) = match &sink.state {
        SinkState::Due(r) => ("due", Some(r)),
        SinkState::InFlight(r) => ("in_flight", Some(r)),
        SinkState::InLane(r) => ("in_lane", Some(r)),
        SinkState::Held(r) => ("held", Some(r)),
        SinkState::Parked(r) => ("parked", Some(r)),
        SinkState::Dead(r) => ("dead", Some(r)),
        SinkState::Undecodable => ("undecodable", None),
        SinkState::Delivered => ("delivered", None),
        SinkState::Purged => ("purged", None),
    };
    let mut shown = Map::new();
    shown.insert("sink_index".into(), sink.sink_index.into());
    shown.insert("state".into(), state.into());
    if let Some(record) = record {
        record_fields(record, &mut shown);
    }
    match &sink.state {
        SinkState::Due(r) => {
            shown.insert("due_at_ms".into(), r.at_ms.into());
        }
        SinkState::Dead(r) => {
            let position = DeadPosition {
                dead_at_ms: r.at_ms,
                shard,
                row: crate::core::RowId {
                    seq,
                    sink_index: sink.sink_index,
                },
            };
            shown.insert("dead_at_ms".into(), r.at_ms.into());
            shown.insert("dead_letter_id".into(), format_position(&position).into());
            let reason = r.error.as_deref().unwrap_or_default();
            let kind = DeadReasonKind::of(reason, &r.sink_type).map(DeadReasonKind::name);
            shown.insert("reason_kind".into(), kind.into());
        }
        _ => {}
    }
    Value::Object(shown)
}

/// A row's attempts and errors: `last_error` is the last failed attempt's
/// error, the dead-letter reason of a dead row, or what a row written back
/// waits for (an open breaker, a paused sink, its turn behind a rate).
fn record_fields(record: &RowRecord, shown: &mut Map<String, Value>) {
    let first_attempt = (record.first_attempt_at_ms > 0).then_some(record.first_attempt_at_ms);
    shown.insert("sink_type".into(), (*record.sink_type).into());
    shown.insert("attempts".into(), record.attempts.into());
    shown.insert("first_attempt_at_ms".into(), first_attempt.into());
    shown.insert("last_error".into(), record.error.clone().into());
    shown.insert("replay_id".into(), record.replay.as_deref().into());
}
