//! `notifications.source`: the node tells its operator of the rows it
//! dead-letters (`row.dead`, and `rows.dead` for those of a sink that die
//! within `notifications.coalesce_ms` of one told: see
//! [`super::dead_summary`]) and every sink key whose breaker opens
//! (`sink.breaker_opened`: its receiver is failing, its rows park) or
//! closes (`sink.breaker_closed`), by committing the event, a JSON hook,
//! to a source of its own config, whose sinks deliver it as any hook
//! (retried, signed, to a chat webhook, an incident tool or a queue).
//!
//! The engine reports on its shard thread, which must not wait: an event
//! goes into a bounded queue there (or, when the queue is full, is counted
//! dropped), and a thread of its own commits the queued events, each
//! without waiting for the last, so a burst shares the shards' syncs. Rows and
//! keys of the notifications source itself raise none, so a failing
//! notifications sink cannot feed itself. An event is committed after it
//! is decided; a crash in between loses the event, not what it tells of
//! (best effort, as an alert is).

use super::dead_summary::{DeadSummaries, Summary};
use crate::config::NotificationsConfig;
use crate::core::{BreakerEvent, DeadReasonKind, Outcome, OutcomeEvent, SinkKey};
use crate::limits::NOTIFICATION_QUEUE;
use crate::runtime::wall_ms;
use crate::runtime::{CommitError, Engine, NewHook};
use crossbeam_channel::{select, Receiver, Sender, TrySendError};
use parking_lot::{Mutex, RwLock};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The queue between the shards' observer and the committing thread.
pub(crate) struct Notifier {
    /// The notifications source, as the node's config stands.
    source: RwLock<Option<String>>,
    /// `notifications.coalesce_ms`, as the node's config stands.
    coalesce_ms: AtomicU64,
    queue: Sender<Notice>,
    queued: Receiver<Notice>,
    /// Asks the committing thread to stop (it sleeps until an event
    /// comes, a window closes or this).
    stop: Sender<()>,
    stopping: Receiver<()>,
    /// The committing thread, which holds the engine until it ends.
    thread: Mutex<Option<JoinHandle<()>>>,
    pub counts: NotificationCounts,
}

/// What the node tells of.
enum Notice {
    /// An outcome that dead-lettered its row.
    Dead(OutcomeEvent),
    /// A breaker change, and when its shard saw it.
    Breaker(BreakerEvent, u64),
    /// Rows of one sink dead within a window, and when it closed.
    DeadRows(Summary, u64),
}

/// What became of the events, for `/metrics`.
#[derive(Default)]
pub(crate) struct NotificationCounts {
    pub queued: AtomicU64,
    /// The queue was full.
    pub dropped: AtomicU64,
    pub committed: AtomicU64,
    /// Dead rows told in a `rows.dead` summary rather than alone.
    pub coalesced: AtomicU64,
    /// The commit was refused (the store full, the node stopping).
    pub failed: AtomicU64,
}

impl Notifier {
    pub fn new(config: &NotificationsConfig) -> Arc<Notifier> {
        let (queue, queued) = crossbeam_channel::bounded(NOTIFICATION_QUEUE);
        let (stop, stopping) = crossbeam_channel::bounded(1);
        Arc::new(Notifier {
            source: RwLock::new(config.source.clone()),
            coalesce_ms: AtomicU64::new(config.coalesce_ms),
            queue,
            queued,
            stop,
            stopping,
            thread: Mutex::new(None),
            counts: NotificationCounts::default(),
        })
    }

    /// A reload's `[notifications]`.
    pub fn configure(&self, config: &NotificationsConfig) {
        *self.source.write() = config.source.clone();
        (self.coalesce_ms).store(config.coalesce_ms, Ordering::Relaxed);
    }

    /// The engine's outcome observer: queues each dead row's event.
    pub fn observe(&self, event: &OutcomeEvent) {
        if matches!(event.outcome, Outcome::Dead { .. }) {
            self.queue_for(&event.source_id, || Notice::Dead(event.clone()));
        }
    }

    /// The engine's breaker observer: queues each change.
    pub fn observe_breaker(&self, event: &BreakerEvent, at_ms: u64) {
        let key = breaker_key(event);
        self.queue_for(&key.source_id, || Notice::Breaker(event.clone(), at_ms));
    }

    /// Queues `notice` of a row or key of source `of`, unless no
    /// notifications source is set or `of` is it.
    fn queue_for(&self, of: &str, notice: impl FnOnce() -> Notice) {
        if self.source.read().as_deref().is_none_or(|own| own == of) {
            return;
        }
        let counts = &self.counts;
        match self.queue.try_send(notice()) {
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

    /// Commits the queued events until `stop` (a dead row counted in its
    /// sink's window waits for the window's summary), and the summaries
    /// as their windows close; at `stop`, the summaries of the open
    /// windows, each waited for. A pass that panics is logged, and the
    /// thread goes on with the next event: the events stay told, but for
    /// the one it was committing.
    fn run(self: &Arc<Notifier>, engine: &Engine) {
        let started = Instant::now();
        let mut summaries = DeadSummaries::default();
        while let Err(panic) = crate::panics::catch(|| self.serve(engine, started, &mut summaries))
        {
            crate::log::error(
                "the notifier panicked; it goes on with the next event",
                &[("panic", &panic)],
            );
        }
        for summary in summaries.drain() {
            self.commit(engine, &Notice::DeadRows(summary, wall_ms()), true);
        }
    }

    /// The body of [`Notifier::run`] until `stop`, its windows' times
    /// counted from `started`.
    fn serve(
        self: &Arc<Notifier>,
        engine: &Engine,
        started: Instant,
        summaries: &mut DeadSummaries,
    ) {
        let now_ms = || started.elapsed().as_millis() as u64;
        loop {
            let window_ms = self.coalesce_ms.load(Ordering::Relaxed);
            let closes = match summaries.next_close_ms() {
                Some(at_ms) => crossbeam_channel::at(started + Duration::from_millis(at_ms)),
                None => crossbeam_channel::never(),
            };
            select! {
                recv(self.queued) -> notice => {
                    let notice = notice.expect("the notifier holds its queue's sender");
                    let alone = match &notice {
                        Notice::Dead(event) => summaries.take(event, now_ms(), window_ms),
                        _ => true,
                    };
                    match alone {
                        true => self.commit(engine, &notice, false),
                        false => _ = self.counts.coalesced.fetch_add(1, Ordering::Relaxed),
                    }
                }
                recv(closes) -> _ => {}
                recv(self.stopping) -> _ => return,
            }
            if summaries
                .next_close_ms()
                .is_some_and(|at_ms| at_ms <= now_ms())
            {
                for summary in summaries.closed(now_ms(), window_ms) {
                    self.commit(engine, &Notice::DeadRows(summary, wall_ms()), false);
                }
            }
        }
    }

    /// Commits `notice` to the notifications source, without waiting for
    /// it (a burst shares the shard's syncs) unless `wait` or the shard's
    /// queue is full.
    fn commit(self: &Arc<Notifier>, engine: &Engine, notice: &Notice, wait: bool) {
        let Some(source) = self.source.read().clone() else {
            return;
        };
        let hook = notice.hook(&source);
        if wait {
            return self.settled(engine.commit(hook));
        }
        let notifier = self.clone();
        let settled = move |result: Result<String, CommitError>| notifier.settled(result);
        match engine.commit_then(hook.clone(), settled) {
            Ok(()) => {}
            Err(CommitError::QueueFull) => self.settled(engine.commit(hook)),
            Err(e) => self.settled(Err(e)),
        }
    }

    /// Counts a commit's result (and logs a refusal).
    fn settled(&self, result: Result<String, CommitError>) {
        let counts = &self.counts;
        match result {
            Ok(_) => counts.committed.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                crate::log::warn("cannot commit a notification", &[("error", &e)]);
                counts.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// Ends the committing thread and waits for it, so that it no longer
    /// holds the engine (a node's stop; the node may start again on the
    /// same data directory at once).
    pub fn stop(&self) {
        let _ = self.stop.try_send(());
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

/// The sink key a breaker change is of.
fn breaker_key(event: &BreakerEvent) -> &SinkKey {
    match event {
        BreakerEvent::Opened { key, .. }
        | BreakerEvent::Closed { key }
        | BreakerEvent::Moved { to: key, .. } => key,
    }
}

impl Notice {
    /// The hook telling of it, committed to `source`. A dead row's has the
    /// row's and attempt's dedupe key, so it is taken once.
    fn hook(&self, source: &str) -> NewHook {
        let (key, at_ms) = match self {
            Notice::Dead(event) => (event.sink_key(), event.at_ms),
            Notice::Breaker(event, at_ms) => (breaker_key(event).clone(), *at_ms),
            Notice::DeadRows(summary, at_ms) => (summary.key.clone(), *at_ms),
        };
        let mut body = json!({
            "tenant": &*key.tenant,
            "source_id": &*key.source_id,
            "sink_index": key.sink_index,
            "sink_type": &*key.sink_type,
            "at_ms": at_ms,
        });
        let fields = body.as_object_mut().expect("an object");
        let mut dedupe_key = None;
        match self {
            Notice::Dead(event) => {
                let Outcome::Dead { reason } = &event.outcome else {
                    unreachable!("only dead rows are queued");
                };
                fields.insert("type".into(), "row.dead".into());
                fields.insert("hook_id".into(), event.hook_id.clone().into());
                fields.insert("attempt".into(), event.attempt.into());
                fields.insert("reason".into(), reason.clone().into());
                let kind = DeadReasonKind::of(reason, &event.sink_type).map(DeadReasonKind::name);
                fields.insert("reason_kind".into(), kind.into());
                let (id, index, attempt) = (&event.hook_id, event.sink_index, event.attempt);
                dedupe_key = Some(format!("{id}:{index}:dead:{attempt}"));
            }
            Notice::Breaker(
                BreakerEvent::Opened {
                    until_ms, opens, ..
                },
                _,
            ) => {
                fields.insert("type".into(), "sink.breaker_opened".into());
                fields.insert("open_until_ms".into(), (*until_ms).into());
                fields.insert("consecutive_opens".into(), (*opens).into());
            }
            Notice::Breaker(BreakerEvent::Closed { .. }, _) => {
                fields.insert("type".into(), "sink.breaker_closed".into());
            }
            Notice::Breaker(BreakerEvent::Moved { from, .. }, _) => {
                fields.insert("type".into(), "sink.breaker_moved".into());
                fields.insert("from_sink_index".into(), from.sink_index.into());
            }
            Notice::DeadRows(summary, _) => {
                fields.insert("type".into(), "rows.dead".into());
                fields.insert("count".into(), summary.count.into());
                fields.insert("first_at_ms".into(), summary.first_at_ms.into());
                fields.insert("last_at_ms".into(), summary.last_at_ms.into());
                fields.insert("reasons".into(), json!(summary.reasons));
                fields.insert("other_reasons".into(), summary.other_reasons.into());
                fields.insert("reason_kinds".into(), json!(summary.reason_kinds));
                fields.insert("hook_ids".into(), json!(summary.hook_ids));
            }
        }
        NewHook {
            content_type: Some("application/json".into()),
            dedupe_key,
            ..NewHook::new(source, body.to_string())
        }
    }
}
