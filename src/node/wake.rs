//! `POST /v1/sources/{source_id}/sinks/{sink_index}/wake`: a sink whose
//! receiver is back gets its backlog now (see [`Engine::wake_sink`]).

use super::admin::unavailable;
use super::http::Response;
use crate::runtime::{Engine, WakeError};
use serde_json::json;

pub(super) fn wake_sink(engine: &Engine, source_id: &str, sink_index: &str) -> Response {
    let Ok(index) = sink_index.parse::<u16>() else {
        let message = format!("sink index {sink_index:?} is not a number from 0 to 65535");
        return Response::error(400, "bad_sink_index", &message);
    };
    match engine.wake_sink(source_id, index) {
        Ok(woken) => {
            crate::log::info(
                "sink woken",
                &[
                    ("source", &source_id),
                    ("sink", &index),
                    ("woken", &woken.woken),
                    ("breaker_closed", &woken.breaker_closed),
                ],
            );
            let body = json!({"woken": woken.woken, "breaker_closed": woken.breaker_closed});
            Response::json(200, &body)
        }
        Err(e @ WakeError::UnknownSource(_)) => {
            Response::error(404, "unknown_source", &e.to_string())
        }
        Err(e @ WakeError::UnknownSink { .. }) => {
            Response::error(404, "unknown_sink", &e.to_string())
        }
        Err(e @ WakeError::Paused { .. }) => Response::error(409, "sink_paused", &e.to_string()),
        Err(WakeError::Unavailable(e)) => unavailable(&e),
    }
}
