//! Draining: a node that takes no new hooks while it goes on delivering
//! the ones it holds (`POST /v1/drain`; `DELETE /v1/drain` ends it), to
//! empty it before it is retired, or to move providers to other nodes
//! behind a load balancer (`/readyz` answers 503 while it drains). The
//! state is a `DRAINING` file in the data directory, so a node restarted
//! while draining goes on draining instead of taking hooks again.

use super::http::Response;
use crate::config::Config;
use crate::runtime::Engine;
use serde_json::{json, Value};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The file that says a node drains.
const MARKER: &str = "DRAINING";

pub(crate) struct Drain {
    on: AtomicBool,
    marker: PathBuf,
}

impl Drain {
    /// Draining if the data directory says so.
    pub(crate) fn load(data_dir: &Path) -> Drain {
        let marker = data_dir.join(MARKER);
        Drain {
            on: AtomicBool::new(marker.exists()),
            marker,
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Starts or ends draining, the marker written (synced) or deleted
    /// first, so what a restart finds is what was answered.
    fn set(&self, on: bool) -> io::Result<()> {
        if on {
            std::fs::File::create(&self.marker)?.sync_all()?;
        } else {
            match std::fs::remove_file(&self.marker) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        if let Some(dir) = self.marker.parent() {
            crate::synced_dir::sync(dir)?;
        }
        self.on.store(on, Ordering::Release);
        Ok(())
    }
}

/// An ingest's answer while the node drains.
pub(super) fn refused() -> Response {
    Response::unavailable(
        "draining",
        "the node is draining: it takes no new hooks, and delivers those it holds (DELETE /v1/drain takes hooks again)",
        5,
    )
}

/// `/readyz` while the node drains.
pub(super) fn not_ready() -> Response {
    Response::unavailable("draining", "the node is draining (POST /v1/drain)", 5)
}

/// `GET /v1/drain` (`set` none), `POST` (start) or `DELETE` (end): whether
/// the node drains, the rows it still holds, and the sinks the config
/// pauses (their rows are held, so a drain does not end while they have
/// any).
pub(super) fn drain(
    drain: &Drain,
    engine: &Engine,
    config: &Config,
    set: Option<bool>,
) -> Response {
    if let Some(on) = set {
        if let Err(e) = drain.set(on) {
            let message = format!("cannot write {}: {e}", drain.marker.display());
            return Response::error(500, "drain_failed", &message);
        }
        let msg = if on { "draining" } else { "drain ended" };
        crate::log::info(msg, &[]);
    }
    let pending_rows = match engine.pending_rows() {
        Ok(rows) => rows,
        Err(e) => return super::admin::store_error(&e),
    };
    Response::json(
        200,
        &json!({
            "draining": drain.is_on(),
            "pending_rows": pending_rows,
            "paused_sinks": paused_sinks(config),
        }),
    )
}

fn paused_sinks(config: &Config) -> Vec<Value> {
    let sinks = config.sources.iter().flat_map(|source| {
        let paused = source
            .sinks
            .iter()
            .enumerate()
            .filter(|(_, sink)| sink.paused);
        paused.map(|(index, sink)| {
            json!({"source_id": source.id, "sink_index": index, "sink_type": sink.kind})
        })
    });
    sinks.collect()
}
