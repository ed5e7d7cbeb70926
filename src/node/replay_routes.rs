//! The replay routes: `POST /v1/replays` (create), `GET /v1/replays` (a
//! page), `GET /v1/replays/{id}` and `POST /v1/replays/{id}/pause` or
//! `…/resume`; the replays themselves are `super::replay`'s.

use super::admin::{known_params, store_error};
use super::dead_letters::{empty_filter, time_range};
use super::http::{Request, Response};
use super::json_body::json_object;
use super::listing::{Paging, PAGING_PARAMS};
use super::replay::{ControlError, CreateError, ReplayControl, ReplaySpec, ReplayState};
use super::NodeState;
use crate::limits::MAX_STORED_REPLAYS;
use crate::runtime::Engine;
use serde_json::json;

/// `POST /v1/replays`: a replay of the dead letters its body names.
pub(super) fn create(state: &NodeState, engine: &Engine, request: &Request) -> Response {
    let spec: ReplaySpec = if request.body.iter().all(u8::is_ascii_whitespace) {
        ReplaySpec::default()
    } else {
        let shape = r#"{"source_id"?, "tenant"?, "hook_id"?, "sink_index"?, "reason"?, "since_ms"?, "until_ms"?}"#;
        match json_object(&request.body, shape) {
            Ok(spec) => spec,
            Err(bad) => return bad,
        }
    };
    let named = [
        ("source_id", &spec.source_id),
        ("tenant", &spec.tenant),
        ("hook_id", &spec.hook_id),
    ];
    if let Some((name, _)) = named.iter().find(|(_, v)| v.as_deref() == Some("")) {
        return empty_filter(name);
    }
    if let Err(bad) = time_range(
        spec.since_ms.unwrap_or(0),
        spec.until_ms.unwrap_or(u64::MAX),
    ) {
        return bad;
    }
    match state.replays.create(engine, spec) {
        Ok((job, created)) => Response::json(
            202,
            &json!({"id": job.id, "matched": job.matched, "existing": !created}),
        ),
        Err(CreateError::TooMany) => {
            let message = format!(
                "the node keeps {MAX_STORED_REPLAYS} replays: done ones are forgotten replay.retention_ms after they finish"
            );
            Response::unavailable("too_many_replays", &message, 60)
        }
        Err(CreateError::Store(e)) => Response::unavailable("store_unavailable", &e.to_string(), 1),
    }
}

/// `GET /v1/replays`: a page of the replays, newest first, of one `state`
/// if asked; a replay's cursor is its id.
pub(super) fn replays(state: &NodeState, engine: &Engine, request: &Request) -> Response {
    if let Err(unknown) = known_params(request, &[&["state"][..], &PAGING_PARAMS].concat()) {
        return unknown;
    }
    let paging = match Paging::paged(request) {
        Ok(paging) => paging,
        Err(bad) => return bad,
    };
    let wanted = match request.query_param("state").filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => match ReplayState::ALL.into_iter().find(|s| s.name() == text) {
            Some(wanted) => Some(wanted),
            None => {
                let message = format!("state must be running, done or paused, got {text:?}");
                return Response::error(400, "bad_state", &message);
            }
        },
    };
    let (ids, next_cursor) = match paging.page(state.replays.ids(wanted), String::clone) {
        Ok(page) => page,
        Err(bad) => return bad,
    };
    let mut replays = Vec::with_capacity(ids.len());
    for id in ids {
        match state.replays.progress(engine, &id) {
            Ok(progress) => replays.extend(progress),
            Err(e) => return store_error(&e),
        }
    }
    Response::json(
        200,
        &json!({ "replays": replays, "next_cursor": next_cursor }),
    )
}

/// `GET /v1/replays/{id}`: its progress.
pub(super) fn replay(state: &NodeState, engine: &Engine, id: &str) -> Response {
    match state.replays.progress(engine, id) {
        Ok(Some(progress)) => Response::json(200, &progress),
        Ok(None) => unknown_replay(id),
        Err(e) => store_error(&e),
    }
}

/// `POST /v1/replays/{id}/pause` and `…/resume`: its progress after.
pub(super) fn control(
    state: &NodeState,
    engine: &Engine,
    id: &str,
    control: ReplayControl,
) -> Response {
    match state.replays.control(engine, id, control) {
        Ok(progress) => Response::json(200, &progress),
        Err(ControlError::Unknown) => unknown_replay(id),
        Err(ControlError::Done) => {
            let message = format!("replay {id:?} is done: it moved every row it takes");
            Response::error(409, "replay_done", &message)
        }
        Err(ControlError::Store(e)) => {
            Response::unavailable("store_unavailable", &e.to_string(), 1)
        }
    }
}

fn unknown_replay(id: &str) -> Response {
    Response::error(404, "unknown_replay", &format!("no replay {id:?}"))
}
