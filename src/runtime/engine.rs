//! The engine handle: opens the shards, routes commits by tenant, and
//! answers the library API (`commit`, `tick`, `pressure`, `reconfigure`,
//! `shutdown`).

use super::clock::{deadline_after, wall_ms};
use super::committing::Committing;
use super::coordinator::{global_grant, CoordinatorInput};
use super::errors::{CommitError, OpenError, Unavailable};
use super::oneshot;
use super::open::{own_shard, send_to_shard, stop_shards, EngineBuilder};
use super::pool::SharedRegistry;
use super::reply::CommitReply;
use super::shard::{ShardGauges, ShardInput, ShardStats};
use super::step::NewRows;
use super::{hook_headers, io_thread, shard_thread};
use crate::claim_check::{ClaimStore, ClaimSweeper};
use crate::config::{Config, ConfigError};
use crate::core::{Catalog, SourceSweep};
use crate::fnv::Fnv1a;
use crate::latency::AttemptLatency;
use crate::limits::{COMMIT_QUEUE_WAIT_MS, COMMIT_REPLY_WAIT_MS};
use crate::sink::{Sink, SinkRegistry};
use crate::store::{DataDirLock, Hook, RowView, ShardStore, StoreError};
use crossbeam_channel::{RecvTimeoutError, SendTimeoutError, Sender, TrySendError};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A hook to commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewHook {
    /// The configured source it is for; its sinks get one row each.
    pub source_id: String,
    /// Provider headers in arrival order: at most 64, each a name and a
    /// value an HTTP request can carry, on a line of at most 16 KiB (else
    /// the commit is refused, [`CommitError::BadHeader`]).
    pub headers: Vec<(String, String)>,
    /// Sent as the delivery's `content-type` (`application/octet-stream`
    /// when absent): a header value, as above.
    pub content_type: Option<String>,
    /// Delivered verbatim; at most `max_body_bytes`.
    pub body: Vec<u8>,
    /// The provider's event key, if any (the idempotency key builds on it;
    /// sent as `x-goad-dedupe-key`: a header value, as above). An empty
    /// key is none: a provider's empty `Idempotency-Key` names no event,
    /// and as a key it would make every such hook a duplicate of the first.
    pub dedupe_key: Option<String>,
}

impl NewHook {
    /// A hook with a body and no headers, content type or dedupe key.
    pub fn new(source_id: impl Into<String>, body: impl Into<Vec<u8>>) -> NewHook {
        NewHook {
            source_id: source_id.into(),
            body: body.into(),
            ..NewHook::default()
        }
    }
}

/// The spare capacity a replay may use right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pressure {
    /// Age of the oldest due row; 0 when nothing is due.
    pub lag_ms: u64,
    /// The node's in-flight window is full.
    pub window_full: bool,
}

pub(super) struct Shard {
    pub(super) input: Sender<ShardInput>,
    pub(super) store: ShardStore,
    pub(super) gauges: Arc<ShardGauges>,
}

/// A running dispatch engine. Share it by reference or in an `Arc`; dropping
/// it shuts it down.
pub struct Engine {
    /// Tells this engine's IO workers from another's (see `io_thread`).
    pub(super) id: u64,
    pub(super) config: RwLock<Config>,
    /// Where the queue sinks' large bodies are kept (see `claim_check`).
    pub(super) claims: Arc<ClaimStore>,
    pub(super) claim_sweeper: Mutex<Option<ClaimSweeper>>,
    pub(super) catalog: RwLock<Arc<Catalog>>,
    pub(super) registry: SharedRegistry,
    pub(super) latency: Arc<AttemptLatency>,
    pub(super) host_sinks: HashMap<String, Arc<dyn Sink>>,
    pub(super) shards: Vec<Shard>,
    pub(super) coordinator: Sender<CoordinatorInput>,
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(super) coordinator_thread: Mutex<Option<JoinHandle<()>>>,
    pub(super) stopped: AtomicBool,
    /// Held while a backup runs (see `Engine::backup`).
    pub(super) backing_up: Mutex<()>,
    /// Released last, once the threads are joined and the stores closed.
    pub(super) _lock: DataDirLock,
}

/// How long `dead_letter_source` waits for a shard's answer to one step.
const DEAD_LETTER_SOURCE_WAIT: Duration = Duration::from_secs(30);

/// How long `tick` waits by default.
const TICK_WAIT: Duration = Duration::from_secs(30);

/// How long `reconfigure` waits for the shards to run on a new config.
const RECONFIGURE_WAIT: Duration = Duration::from_secs(10);

impl Engine {
    /// Opens an engine with goad's own sinks only.
    pub fn open(config: Config) -> Result<Engine, OpenError> {
        Engine::builder(config).open()
    }

    /// An engine to open with the host's Rust sinks
    /// ([`EngineBuilder::sink`]).
    pub fn builder(config: Config) -> EngineBuilder {
        EngineBuilder {
            config,
            host_sinks: HashMap::new(),
            seed: None,
            observers: Default::default(),
        }
    }

    /// The shard that owns a tenant: a stable hash (FNV-1a) of its id.
    pub fn shard_of(tenant: &str, shard_count: usize) -> usize {
        let mut hasher = Fnv1a::default();
        hasher.write(tenant.as_bytes());
        (hasher.finish() % shard_count as u64) as usize
    }

    /// Makes a shard's loop panic, as a bug in goad would (tests of the restart).
    #[cfg(test)]
    pub(crate) fn panic_shard(&self, shard: usize) {
        self.shards[shard]
            .input
            .send(ShardInput::Panic)
            .expect("the shard is running");
    }

    /// Commits a hook: one delivery row per sink of its source. Returns the
    /// hook id once the hook and its rows are synced to disk. On a shard's
    /// thread (in a callback) it commits nothing and answers
    /// [`CommitError::OnShardThread`]: commit there with
    /// [`commit_then`](Engine::commit_then). From async code, await
    /// [`commit_async`](Engine::commit_async) instead, which holds no
    /// executor thread while the batch syncs.
    pub fn commit(&self, hook: NewHook) -> Result<String, CommitError> {
        if shard_thread::is_current() {
            return Err(CommitError::OnShardThread);
        }
        let (id, shard, rows) = self.prepare(hook)?;
        let (reply_tx, reply_rx) = oneshot::channel();
        let input = ShardInput::Commit {
            rows,
            reply: CommitReply::wait(reply_tx),
        };
        match shard
            .input
            .send_timeout(input, Duration::from_millis(COMMIT_QUEUE_WAIT_MS))
        {
            Ok(()) => {}
            Err(SendTimeoutError::Timeout(_)) => return Err(CommitError::QueueFull),
            Err(SendTimeoutError::Disconnected(_)) => return Err(CommitError::Stopped),
        }
        match reply_rx.recv_deadline(Instant::now() + Duration::from_millis(COMMIT_REPLY_WAIT_MS)) {
            Ok(Ok(first_id)) => Ok(first_id.unwrap_or(id)),
            Ok(Err(e)) => Err(e),
            Err(oneshot::RecvError::Timeout) => Err(CommitError::TimedOut),
            Err(oneshot::RecvError::Closed) => Err(CommitError::Stopped),
        }
    }

    /// Commits a hook without blocking: `done` is called once, on the shard
    /// thread, with the hook id when the hook is durable or with the error.
    /// A commit refused at once (unknown source, too large, a full shard
    /// queue, a stopped engine) returns the error and never calls `done`.
    /// `done` must be quick: the shard waits for it.
    pub fn commit_then(
        &self,
        hook: NewHook,
        done: impl FnOnce(Result<String, CommitError>) + Send + 'static,
    ) -> Result<(), CommitError> {
        let (id, shard, rows) = self.prepare(hook)?;
        let input = ShardInput::Commit {
            rows,
            reply: CommitReply::notify(move |result| done(result.map(|first| first.unwrap_or(id)))),
        };
        let refused = match shard.input.try_send(input) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(input)) => (input, CommitError::QueueFull),
            Err(TrySendError::Disconnected(input)) => (input, CommitError::Stopped),
        };
        match refused {
            (ShardInput::Commit { reply, .. }, error) => {
                reply.disarm();
                Err(error)
            }
            (_, error) => Err(error),
        }
    }

    /// Commits a hook from async code: the future resolves to the hook id
    /// once the hook and its rows are synced to disk, as [`commit`]
    /// returns it, without holding the executor's thread meanwhile (it is
    /// [`commit_then`], awaited; any executor polls it, and goad runs
    /// none). A commit refused at once resolves at once; a full shard
    /// queue is refused at once as [`CommitError::QueueFull`], where
    /// `commit` waits a while for room. Dropping the future does not take
    /// the commit back. It has no deadline of its own (`commit` gives up
    /// after 30 s as [`CommitError::TimedOut`]): a caller that needs one
    /// wraps it in its executor's timeout. It may be called on a shard's
    /// thread.
    ///
    /// [`commit`]: Engine::commit
    /// [`commit_then`]: Engine::commit_then
    pub fn commit_async(&self, hook: NewHook) -> Committing {
        let (committing, answer) = Committing::pending();
        match self.commit_then(hook, answer) {
            Ok(()) => committing,
            Err(refused) => Committing::answered(Err(refused)),
        }
    }

    /// Checks a hook against the config and builds its stored form.
    fn prepare(&self, hook: NewHook) -> Result<(String, &Shard, NewRows), CommitError> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(CommitError::Stopped);
        }
        let max_bytes = self.config.read().max_body_bytes;
        if hook.body.len() as u64 > max_bytes {
            return Err(CommitError::TooLarge {
                size_bytes: hook.body.len() as u64,
                max_bytes,
            });
        }
        let catalog = self.catalog.read();
        let source = catalog
            .source(&hook.source_id)
            .ok_or_else(|| CommitError::UnknownSource(hook.source_id.clone()))?;
        hook_headers::check(&hook, &source.tenant)?;
        let id = uuid::Uuid::now_v7().to_string();
        let stored = Hook {
            id: id.clone(),
            seq: 0,
            tenant: source.tenant.clone(),
            source_id: Arc::from(hook.source_id),
            received_at_ms: wall_ms(),
            content_type: hook.content_type,
            dedupe_key: hook.dedupe_key.filter(|key| !key.is_empty()),
            headers: hook.headers,
            body: hook.body,
        };
        let shard = &self.shards[Engine::shard_of(&source.tenant, self.shards.len())];
        Ok((id, shard, NewRows::of(source, stored)))
    }

    /// Blocks until nothing is claimed, running or due on any shard; returns
    /// the rows settled (delivered or dead-lettered) meanwhile. Rows waiting
    /// out a backoff are not due, so this does not wait for them.
    /// `InSinkCall` inside one of this engine's sink calls (which it would
    /// wait for).
    pub fn tick(&self) -> Result<u64, Unavailable> {
        self.tick_within(TICK_WAIT)
    }

    /// `tick` with its own deadline.
    pub fn tick_within(&self, wait: Duration) -> Result<u64, Unavailable> {
        if io_thread::works_for(self.id) {
            return Err(Unavailable::InSinkCall);
        }
        let settled = self.ask_shards(0..self.shards.len(), wait, |_, reply| {
            ShardInput::Tick(reply)
        })?;
        Ok(settled.into_iter().sum())
    }

    /// Dead-letters every pending row of `source_id` as `source_gone` and
    /// returns how many (for deleting a source that still has a backlog).
    /// It runs inside each shard, the only mover of its rows, so no claim
    /// races it, in steps of `SWEEP_STEP_ENTRIES` rows walked (the
    /// shards step at once), so each shard commits and delivers between
    /// them however large the backlog (see [`crate::core::SourceSweep`]: rows committed while it
    /// runs may be left). Rows whose hook is gone are dropped and not
    /// counted; rows claimed by a running attempt are left to settle.
    /// `Unavailable` when the engine is stopped, a shard's store fails, or
    /// a shard does not answer a step within `DEAD_LETTER_SOURCE_WAIT`; the
    /// steps before it stay done.
    pub fn dead_letter_source(&self, source_id: &str) -> Result<u64, Unavailable> {
        // Each shard's sweep, until it is done; the shards step at once.
        let mut from = vec![Some(SourceSweep::default()); self.shards.len()];
        let mut dead = 0;
        loop {
            let sweeping: Vec<usize> = (0..from.len()).filter(|&k| from[k].is_some()).collect();
            if sweeping.is_empty() {
                return Ok(dead);
            }
            let ask = |k: usize, reply| ShardInput::DeadLetterSource {
                source_id: source_id.to_string(),
                from: from[k].clone().expect("a sweep under way"),
                reply,
            };
            let steps = self.ask_shards(sweeping.iter().copied(), DEAD_LETTER_SOURCE_WAIT, ask)?;
            for (k, step) in sweeping.into_iter().zip(steps) {
                let step = step?;
                dead += step.dead;
                from[k] = step.next;
            }
        }
    }

    /// Sends each shard in `shards` the input `ask` builds for it (given
    /// its index) around a reply channel, then collects their replies in shard order, all within
    /// `wait`. `Unavailable` when the engine is stopped, a shard does not
    /// take the input or answer in time, or the caller is a shard's thread
    /// (`OnShardThread`: the calls built on this one answer so from a
    /// callback).
    pub(super) fn ask_shards<T>(
        &self,
        shards: impl IntoIterator<Item = usize>,
        wait: Duration,
        ask: impl Fn(usize, Sender<T>) -> ShardInput,
    ) -> Result<Vec<T>, Unavailable> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Unavailable::Stopped);
        }
        if shard_thread::is_current() {
            return Err(Unavailable::OnShardThread);
        }
        let deadline = deadline_after(wait);
        let mut replies = Vec::new();
        for k in shards {
            let (reply, rx) = crossbeam_channel::bounded(1);
            self.shards[k]
                .input
                .send_deadline(ask(k, reply), deadline)
                .map_err(|e| match e {
                    SendTimeoutError::Timeout(_) => Unavailable::TimedOut,
                    SendTimeoutError::Disconnected(_) => Unavailable::Stopped,
                })?;
            replies.push(rx);
        }
        replies
            .into_iter()
            .map(|rx| {
                rx.recv_deadline(deadline).map_err(|e| match e {
                    RecvTimeoutError::Timeout => Unavailable::TimedOut,
                    RecvTimeoutError::Disconnected => Unavailable::Stopped,
                })
            })
            .collect()
    }

    /// The limits `dispatch.tenants` gives the tenant now.
    pub fn tenant_limits(&self, tenant: &str) -> crate::config::TenantLimits {
        self.config.read().dispatch.tenant_limits(tenant)
    }

    /// The lag of the oldest due row and whether the in-flight window is full.
    pub fn pressure(&self) -> Result<Pressure, Unavailable> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Unavailable::Stopped);
        }
        let mut oldest: Option<u64> = None;
        for shard in &self.shards {
            if let Some(at) = shard.store.oldest_due_ms()? {
                oldest = Some(oldest.map_or(at, |o| o.min(at)));
            }
        }
        let stats = self.stats();
        let dispatch = &self.config.read().dispatch;
        let rows: u64 = stats.iter().map(|s| s.core.claimed.rows).sum();
        let bytes: u64 = stats.iter().map(|s| s.core.claimed.bytes).sum();
        Ok(Pressure {
            lag_ms: oldest.map_or(0, |at| wall_ms().saturating_sub(at)),
            window_full: rows >= u64::from(dispatch.max_inflight)
                || bytes >= dispatch.max_inflight_bytes,
        })
    }

    /// The sink types the host registered (`EngineBuilder::sink`), which a
    /// config may name beside goad's own.
    pub fn host_sink_types(&self) -> Vec<&str> {
        self.host_sinks.keys().map(String::as_str).collect()
    }

    /// The most connections the engine's sinks can keep open at once (see
    /// [`SinkRegistry::connections_bound`]).
    pub(crate) fn sink_connections_bound(&self) -> usize {
        let sink_concurrency = self.config.read().dispatch.sink_concurrency as usize;
        self.registry.read().connections_bound(sink_concurrency)
    }

    /// The credentials its sinks and claim bucket read from the
    /// environment at each request that are not set or no request can
    /// carry, one line each (see [`SinkRegistry::credential_problems`]).
    pub(crate) fn credential_problems(&self) -> Vec<String> {
        let registry = self.registry.read().clone();
        registry.credential_problems(&self.config.read(), &self.claims)
    }

    /// Takes `[dispatch]` (windows, concurrency, breakers, deadlines, the
    /// tenants' limits), `[retry]`, `[egress]` and the sources with their
    /// sinks from `config` without a restart; its other keys (`data_dir`,
    /// `shards`, `max_body_bytes`, the store's bounds, `claim_check`,
    /// `dead_letters`) keep the values the engine opened with, as a node's
    /// reload reports them `restart_required`. Claimed and running rows are kept; lowered
    /// limits stop the next start.
    /// Commits take the new sources at once; it returns once every shard
    /// runs on them too (its old sources dropped, so their memory can be
    /// given back), or after 10 s with the change queued for the rest.
    /// Called from a callback or a sink call (on a shard thread or one of
    /// the engine's IO workers), it returns without waiting: a shard takes
    /// the change once its callback returns.
    pub fn reconfigure(&self, config: &Config) -> Result<(), ConfigError> {
        config.validate_with_sinks(&self.host_sink_types())?;
        let registry = SinkRegistry::build(
            config,
            &self.host_sinks,
            &self.claims,
            &self.registry.read(),
        )?;
        let catalog = Arc::new(registry.catalog(config));
        // Not under the lock: the comparison may take a while.
        let previous = self.catalog.read().clone();
        catalog.note_changes_from(&previous);
        *self.registry.write() = Arc::new(registry);
        *self.catalog.write() = catalog.clone();
        let own = own_shard(&self.threads.lock());
        let waits = own.is_none() && !shard_thread::is_current() && !io_thread::works_for(self.id);
        let mut applied = Vec::new();
        {
            // Held while the shards are sent the change, so that concurrent
            // calls reach them in the order they set the config.
            let mut current = self.config.write();
            current.dispatch = config.dispatch.clone();
            current.retry = config.retry;
            current.sources = config.sources.clone();
            let grant = global_grant(&current.dispatch);
            let _ = self.coordinator.send(CoordinatorInput::Reconfigure(grant));
            for (k, shard) in self.shards.iter().enumerate() {
                let (reply, answer) = waits.then(|| crossbeam_channel::bounded(1)).unzip();
                let input = ShardInput::Reconfigure {
                    dispatch: current.dispatch.clone(),
                    retry: current.retry,
                    catalog: catalog.clone(),
                    applied: reply,
                };
                send_to_shard(shard, k, input, own == Some(k));
                applied.extend(answer);
            }
        }
        // Not under the lock: a shard's callback may read the config.
        let deadline = Instant::now() + RECONFIGURE_WAIT;
        for answer in applied {
            let _ = answer.recv_deadline(deadline);
        }
        Ok(())
    }

    /// Each shard's gauges.
    pub fn stats(&self) -> Vec<ShardStats> {
        self.shards.iter().map(|s| *s.gauges.lock()).collect()
    }

    /// Every stored row with its hook's ids, across shards: a diagnostic
    /// snapshot (it reads every row) for tests and tools.
    pub fn rows(&self) -> Result<Vec<RowView>, StoreError> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.store.rows()?);
        }
        Ok(out)
    }

    /// How many hooks are stored across shards.
    pub fn hook_count(&self) -> Result<u64, StoreError> {
        self.shards.iter().map(|s| s.store.hook_count()).sum()
    }

    /// Stops claiming, lets running attempts finish (up to a grace period;
    /// those still running are due again at the next open), syncs and joins
    /// the threads. Idempotent. Called in a callback, it does not wait for
    /// the shard whose thread runs it: that shard stops once the callback
    /// returns.
    pub fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        stop_shards(&self.shards, std::mem::take(&mut *self.threads.lock()));
        let _ = self.coordinator.send(CoordinatorInput::Stop);
        if let Some(handle) = self.coordinator_thread.lock().take() {
            let _ = handle.join();
        }
        if let Some(sweeper) = self.claim_sweeper.lock().take() {
            sweeper.stop();
        }
    }

    /// The body a claim reference names (`urn:goad:claim:v1:<tenant>:<sha256>`),
    /// if the claim check still has it.
    pub fn redeem_claim(&self, tenant: &str, sha256: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.claims.redeem(tenant, sha256)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}
