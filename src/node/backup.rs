//! `POST /v1/backup`: a backup of the node's data directory, written by
//! the node to a directory on its host (see [`Engine::backup`]).

use super::http::{Request, Response};
use super::json_body::json_object;
use crate::runtime::{BackupError, Engine};
use serde_json::json;
use std::path::PathBuf;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BackupSpec {
    /// An absolute path on the node's host: a new or empty directory.
    to: PathBuf,
}

pub(super) fn backup(engine: &Engine, request: &Request) -> Response {
    let shape = r#"{"to": "/absolute/directory"}"#;
    let spec: BackupSpec = match json_object(&request.body, shape) {
        Ok(spec) => spec,
        Err(bad) => return bad,
    };
    if !spec.to.is_absolute() {
        let message = format!(
            "to must be an absolute path on the node's host, got {:?}",
            spec.to
        );
        return Response::error(400, "bad_backup_dir", &message);
    }
    let to = spec.to.display().to_string();
    match engine.backup(&spec.to) {
        Ok(done) => {
            let took_ms = done.took.as_millis() as u64;
            crate::log::info(
                "backup written",
                &[("to", &to), ("files", &done.files), ("took_ms", &took_ms)],
            );
            let shards: Vec<_> = (done.shard_bytes.iter().enumerate())
                .map(|(shard, bytes)| json!({"shard": shard, "bytes": bytes}))
                .collect();
            Response::json(
                200,
                &json!({
                    "to": to,
                    "started_at_ms": done.started_at_ms,
                    "shards": shards,
                    "files": done.files,
                    "file_bytes": done.file_bytes,
                    "took_ms": took_ms,
                }),
            )
        }
        Err(e @ (BackupError::Target { .. } | BackupError::Unwritable { .. })) => {
            Response::error(400, "bad_backup_dir", &e.to_string())
        }
        Err(e @ BackupError::Running) => Response::error(409, "backup_running", &e.to_string()),
        Err(e) => {
            crate::log::error("backup failed", &[("to", &to), ("error", &e)]);
            Response::error(500, "backup_failed", &e.to_string())
        }
    }
}
