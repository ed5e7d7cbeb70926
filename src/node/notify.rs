//! `notifications.source`: the node tells its operator of every row it
//! dead-letters by committing a `row.dead` event, a JSON hook, to a source
//! of its own config, whose sinks deliver it as any hook (retried, signed,
//! to a chat webhook, an incident tool or a queue).
//!
//! The engine reports each outcome on its shard thread, which must not
//! wait: a dead row's event goes into a bounded queue there (or, when the
//! queue is full, is counted dropped), and a thread of its own commits the
//! queued events. Rows of the notifications source itself raise none, so
//! a failing notifications sink cannot feed itself. An event is committed
//! after its row is decided dead; a crash in between loses the event, not
//! the dead letter (best effort, as an alert is).

use crate::core::{Outcome, OutcomeEvent};
use crate::limits::NOTIFICATION_QUEUE;
use crate::runtime::{Engine, NewHook};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::{Mutex, RwLock};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How soon the committing thread sees a stop.
const STOP_CHECK: Duration = Duration::from_millis(20);

/// The queue between the shards' observer and the committing thread.
pub(crate) struct Notifier {
    /// The notifications source, as the node's config stands.
    source: RwLock<Option<String>>,
    queue: Sender<OutcomeEvent>,
    queued: Receiver<OutcomeEvent>,
    stop: AtomicBool,
    /// The committing thread, which holds the engine until it ends.
    thread: Mutex<Option<JoinHandle<()>>>,
    pub counts: NotificationCounts,
}

/// What became of the events, for `/metrics`.
#[derive(Default)]
pub(crate) struct NotificationCounts {
    pub queued: AtomicU64,
    /// The queue was full.
    pub dropped: AtomicU64,
    pub committed: AtomicU64,
    /// The commit was refused (the store full, the node stopping).
    pub failed: AtomicU64,
}

impl Notifier {
    pub fn new(source: Option<String>) -> Arc<Notifier> {
        let (queue, queued) = crossbeam_channel::bounded(NOTIFICATION_QUEUE);
        Arc::new(Notifier {
            source: RwLock::new(source),
            queue,
            queued,
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            counts: NotificationCounts::default(),
        })
    }

    /// A reload's `notifications.source`.
    pub fn set_source(&self, source: Option<String>) {
        *self.source.write() = source;
    }

    /// The engine's outcome observer: queues each dead row's event.
    pub fn observe(&self, event: &OutcomeEvent) {
        if !matches!(event.outcome, Outcome::Dead { .. }) {
            return;
        }
        let source = self.source.read();
        match source.as_deref() {
            Some(own) if own != &*event.source_id => {}
            _ => return,
        }
        let counts = &self.counts;
        match self.queue.try_send(event.clone()) {
            Ok(()) => counts.queued.fetch_add(1, Ordering::Relaxed),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                counts.dropped.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// Starts the thread that commits the queued events to `engine`.
    pub fn start(self: &Arc<Notifier>, engine: Arc<Engine>) -> std::io::Result<()> {
        let notifier = self.clone();
        let thread = std::thread::Builder::new()
            .name("goad-notify".into())
            .spawn(move || notifier.run(&engine))?;
        *self.thread.lock() = Some(thread);
        Ok(())
    }

    /// Commits the queued events until `stop`.
    fn run(&self, engine: &Engine) {
        while !self.stop.load(Ordering::Acquire) {
            let Ok(event) = self.queued.recv_timeout(STOP_CHECK) else {
                continue;
            };
            let Some(source) = self.source.read().clone() else {
                continue;
            };
            let counts = &self.counts;
            match engine.commit(notice(&source, &event)) {
                Ok(_) => counts.committed.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    crate::log::warn(
                        "cannot commit a notification",
                        &[("source", &source), ("hook", &event.hook_id), ("error", &e)],
                    );
                    counts.failed.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
    }

    /// Ends the committing thread and waits for it, so that it no longer
    /// holds the engine (a node's stop; the node may start again on the
    /// same data directory at once).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

/// The hook telling of `event`'s dead row, committed to `source`; its
/// dedupe key is the row's and attempt's, so a notice is taken once.
fn notice(source: &str, event: &OutcomeEvent) -> NewHook {
    let Outcome::Dead { reason } = &event.outcome else {
        unreachable!("only dead rows are queued");
    };
    let body = json!({
        "type": "row.dead",
        "hook_id": event.hook_id,
        "tenant": &*event.tenant,
        "source_id": &*event.source_id,
        "sink_index": event.sink_index,
        "sink_type": &*event.sink_type,
        "attempt": event.attempt,
        "at_ms": event.at_ms,
        "reason": reason,
    });
    let key = format!(
        "{}:{}:dead:{}",
        event.hook_id, event.sink_index, event.attempt
    );
    NewHook {
        content_type: Some("application/json".into()),
        dedupe_key: Some(key),
        ..NewHook::new(source, body.to_string())
    }
}
