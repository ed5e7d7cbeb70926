//! The dead-letter routes: `GET /v1/dead-letters` (a page, newest first),
//! `GET /v1/dead-letters/{id}` (one with its hook) and
//! `DELETE /v1/dead-letters` (a purge), all taking one filter.

use super::admin::{known_params, store_error, unavailable};
use super::hook_status::hook_json;
use super::http::{Request, Response};
use super::listing::{page_limit, PAGING_PARAMS};
use crate::core::{DeadReasonKind, ReasonKinds};
use crate::runtime::Engine;
use crate::store::{DeadFilter, DeadItem, DeadPosition};
use serde_json::{json, Value};

/// A dead letter's id, and a listing's cursor (the last listed row's id):
/// `dead_at_ms-shard-seq-sink_index`.
fn parse_position(text: &str) -> Option<DeadPosition> {
    let mut parts = text.split('-');
    let position = DeadPosition {
        dead_at_ms: parts.next()?.parse().ok()?,
        shard: parts.next()?.parse().ok()?,
        row: crate::core::RowId {
            seq: parts.next()?.parse().ok()?,
            sink_index: parts.next()?.parse().ok()?,
        },
    };
    parts.next().is_none().then_some(position)
}

pub(super) fn format_position(p: &DeadPosition) -> String {
    format!(
        "{}-{}-{}-{}",
        p.dead_at_ms, p.shard, p.row.seq, p.row.sink_index
    )
}

/// The query parameters of a dead-letter filter.
const DEAD_FILTER_PARAMS: [&str; 7] = [
    "source_id",
    "tenant",
    "hook_id",
    "sink_index",
    "reason",
    "since_ms",
    "until_ms",
];

/// The dead letters a request names: `source_id`, `tenant`, `hook_id`,
/// `sink_index`, `reason` (a [`DeadReasonKind`]'s name), and dead between
/// `since_ms` and `until_ms` (unix ms, inclusive).
fn dead_filter(request: &Request) -> Result<DeadFilter, Response> {
    let time = |name: &str, default: u64| match request.query_param(name) {
        None => Ok(default),
        Some(text) => text.parse::<u64>().map_err(|_| {
            Response::error(
                400,
                "bad_time",
                &format!("{name} must be a time in unix milliseconds, got {text:?}"),
            )
        }),
    };
    let sink_index = match request.query_param("sink_index").filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<u16>().map_err(|_| {
            let message = format!("sink_index must be a number from 0 to 65535, got {text:?}");
            Response::error(400, "bad_sink_index", &message)
        })?),
    };
    let reason = match request.query_param("reason").filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(
            text.parse::<ReasonKinds>()
                .map_err(|e| Response::error(400, "bad_reason", &format!("reason: {e}")))?,
        ),
    };
    let (since_ms, until_ms) = (time("since_ms", 0)?, time("until_ms", u64::MAX)?);
    time_range(since_ms, until_ms)?;
    Ok(DeadFilter {
        source_id: request.query_param("source_id").filter(|s| !s.is_empty()),
        tenant: request.query_param("tenant").filter(|s| !s.is_empty()),
        hook_id: request.query_param("hook_id").filter(|s| !s.is_empty()),
        sink_index,
        reason,
        since_ms,
        until_ms,
    })
}

/// 400 `empty_filter` for a filter given with no value, where a purge or
/// a replay would take every dead letter: a script's unset variable
/// (`?source_id=$SOURCE`) must not purge them all.
pub(super) fn empty_filter(name: &str) -> Response {
    let message = format!(
        "{name} is empty: give a value, or leave it out (which takes every dead letter, whatever its {name})"
    );
    Response::error(400, "empty_filter", &message)
}

/// Refuses a range of dead times that ends before it starts (a swapped
/// pair, most likely), which would match nothing and say nothing of why.
pub(super) fn time_range(since_ms: u64, until_ms: u64) -> Result<(), Response> {
    if since_ms <= until_ms {
        return Ok(());
    }
    let message = format!(
        "since_ms ({since_ms}) is after until_ms ({until_ms}): no row is dead in that range; were they swapped?"
    );
    Err(Response::error(400, "bad_time", &message))
}

/// `DELETE /v1/dead-letters`: the matching dead letters deleted for good.
pub(super) fn purge(engine: &Engine, request: &Request) -> Response {
    if let Err(unknown) = known_params(request, &DEAD_FILTER_PARAMS) {
        return unknown;
    }
    let empty = DEAD_FILTER_PARAMS
        .iter()
        .find(|name| request.query_param(name).as_deref() == Some(""));
    if let Some(name) = empty {
        return empty_filter(name);
    }
    let filter = match dead_filter(request) {
        Ok(filter) => filter,
        Err(bad) => return bad,
    };
    match engine.purge_dead_letters(&filter) {
        Ok(purged) => {
            crate::log::info(
                "dead letters purged",
                &[
                    ("source", &filter.source_id.as_deref().unwrap_or("*")),
                    ("tenant", &filter.tenant.as_deref().unwrap_or("*")),
                    ("hook", &filter.hook_id.as_deref().unwrap_or("*")),
                    (
                        "sink",
                        &filter.sink_index.map_or("*".into(), |i| i.to_string()),
                    ),
                    (
                        "reason",
                        &filter.reason.map_or("*".into(), |k| k.to_string()),
                    ),
                    ("since_ms", &filter.since_ms),
                    ("until_ms", &filter.until_ms),
                    ("purged", &purged),
                ],
            );
            Response::json(200, &json!({"purged": purged}))
        }
        Err(e) => unavailable(&e),
    }
}

/// `GET /v1/dead-letters`: a page of the matching dead letters, newest
/// first, and the cursor of the next.
pub(super) fn list(engine: &Engine, request: &Request) -> Response {
    if let Err(unknown) = known_params(request, &[&DEAD_FILTER_PARAMS[..], &PAGING_PARAMS].concat())
    {
        return unknown;
    }
    let limit = match page_limit(request) {
        Ok(limit) => limit,
        Err(bad) => return bad,
    };
    let after = match request.query_param("cursor").filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => match parse_position(&text) {
            Some(p) => Some(p),
            None => {
                return Response::error(
                    400,
                    "bad_cursor",
                    &format!("cursor {text:?} is not a cursor this node returned"),
                )
            }
        },
    };
    let filter = match dead_filter(request) {
        Ok(filter) => filter,
        Err(bad) => return bad,
    };
    let items = match engine.dead_letters(&filter, after, limit) {
        Ok(items) => items,
        Err(e) => return store_error(&e),
    };
    let next_cursor = (items.len() == limit)
        .then(|| items.last().map(|i| format_position(&i.position)))
        .flatten();
    let items: Vec<Value> = items.iter().map(dead_item_json).collect();
    Response::json(200, &json!({"items": items, "next_cursor": next_cursor}))
}

/// A dead letter as listings show it; its `id` names it for
/// `GET /v1/dead-letters/{id}`.
fn dead_item_json(item: &DeadItem) -> Value {
    json!({
        "id": format_position(&item.position),
        "hook_id": item.hook_id,
        "source_id": item.source_id,
        "tenant": &*item.tenant,
        "sink_index": item.position.row.sink_index,
        "sink_type": item.sink_type,
        "reason": item.reason,
        "reason_kind": item.reason_kind().map(DeadReasonKind::name),
        "attempts": item.attempts,
        "dead_at_ms": item.position.dead_at_ms,
    })
}

/// `GET /v1/dead-letters/{id}`: one dead letter with its hook: what the
/// listing shows, and when the hook was received, its content type,
/// dedupe key, headers and body (base64).
pub(super) fn show(engine: &Engine, id: &str) -> Response {
    let not_found = || {
        let message = format!("no dead letter {id:?} (replayed, purged, or never dead)");
        Response::error(404, "unknown_dead_letter", &message)
    };
    let Some(position) = parse_position(id) else {
        return not_found();
    };
    let letter = match engine.dead_letter(position) {
        Ok(Some(letter)) => letter,
        Ok(None) => return not_found(),
        Err(e) => return store_error(&e),
    };
    let mut shown = dead_item_json(&letter.item);
    if let (Value::Object(shown), Value::Object(more)) = (&mut shown, hook_json(&letter.hook)) {
        shown.extend(more);
    }
    Response::json(200, &shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_junk_is_refused() {
        let p = DeadPosition {
            dead_at_ms: 17,
            shard: 1,
            row: crate::core::RowId {
                seq: 9,
                sink_index: 2,
            },
        };
        assert_eq!(parse_position(&format_position(&p)), Some(p));
        assert_eq!(parse_position("1-2-3"), None);
        assert_eq!(parse_position("1-2-3-4-5"), None);
        assert_eq!(parse_position("a-b-c-d"), None);
    }
}
