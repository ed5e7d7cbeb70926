//! The thread that deletes claims past their retention (and makes those
//! an earlier goad left open to all its owner's only): as the engine
//! opens, then once an hour (or twice per retention, if that is shorter),
//! until the engine stops.

use super::ClaimStore;
use crate::limits::CLAIM_SWEEP_INTERVAL_MS;
use crossbeam_channel::{RecvTimeoutError, Sender};
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// A running sweeper; [`ClaimSweeper::stop`] ends it.
#[derive(Debug)]
pub struct ClaimSweeper {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl ClaimSweeper {
    pub fn start(claims: Arc<ClaimStore>) -> std::io::Result<ClaimSweeper> {
        let (stop, stopped) = crossbeam_channel::bounded::<()>(1);
        let retention_ms = claims.retention.as_millis() as u64;
        let interval = Duration::from_millis(CLAIM_SWEEP_INTERVAL_MS.min(retention_ms / 2).max(1));
        let thread = std::thread::Builder::new()
            .name("goad-claims".into())
            .spawn(move || loop {
                let panicked =
                    |panic| Err(io::Error::other(format!("the sweep panicked: {panic}")));
                let swept = crate::panics::catch(|| claims.sweep(SystemTime::now()))
                    .unwrap_or_else(panicked);
                match swept {
                    Ok(0) => {}
                    Ok(swept) => crate::log::info(
                        "claims past their retention deleted",
                        &[("claims", &swept), ("retention_ms", &retention_ms)],
                    ),
                    Err(e) => crate::log::error(
                        "claim check sweep failed; trying again later",
                        &[("error", &e)],
                    ),
                }
                if stopped.recv_timeout(interval) != Err(RecvTimeoutError::Timeout) {
                    return;
                }
            })?;
        Ok(ClaimSweeper { stop, thread })
    }

    /// Ends the sweeper and waits for its thread.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}
