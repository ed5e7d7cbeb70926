//! Opening an engine: the builder, then the shards started one by one (each
//! opens and recovers its store on its own thread, pinned to a core), then
//! the coordinator. A shard that fails to open stops the shards started
//! before it, so a failed open leaves no thread running and no store open.

use super::clock::wall_ms;
use super::coordinator::{self, global_grant, CoordinatorInput};
use super::engine::{Engine, Shard};
use super::errors::OpenError;
use super::observers::Observers;
use super::pool::{IoPool, SharedRegistry};
use super::shard::{ShardGauges, ShardInput, ShardThread};
use crate::claim_check::{ClaimStore, ClaimSweeper};
use crate::config::Config;
use crate::core::{BreakerEvent, Catalog, Core, Grant, OutcomeEvent};
use crate::latency::AttemptLatency;
use crate::limits::SHARD_INPUT_CAPACITY;
use crate::sink::{Sink, SinkRegistry};
use crate::store::{
    refuse_unfinished_reshard, refuse_unmappable, stored_shard_count, DataDirLock, DiskReserve,
    ShardStore, StoreError,
};
use crossbeam_channel::{Sender, TrySendError};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Opens an engine with host sinks, a seed and observers.
pub struct EngineBuilder {
    pub(super) config: Config,
    pub(super) host_sinks: HashMap<String, Arc<dyn Sink>>,
    pub(super) seed: Option<u64>,
    pub(super) observers: Observers,
}

impl EngineBuilder {
    /// Registers a Rust sink; config sink entries with `type = name` use it.
    pub fn sink(mut self, name: impl Into<String>, sink: Arc<dyn Sink>) -> EngineBuilder {
        self.host_sinks.insert(name.into(), sink);
        self
    }

    /// Calls `observer` with the outcome of every attempt — delivered, due
    /// again after a failure, or dead-lettered — on the thread of the
    /// row's shard, in the order that shard settled them: to mark a
    /// delivery in the host's own records, or count per customer. It must
    /// return quickly (the shard waits for it); one that panics is logged
    /// and the shard goes on. An outcome is reported when decided, before
    /// its store write is synced: after a crash a row can be attempted,
    /// and reported, again (at least once, as deliveries are). Rows dead
    /// without an attempt (their horizon, their config, or
    /// [`Engine::dead_letter_source`], which reports its rows before it
    /// returns) are reported too.
    pub fn on_outcome(
        mut self,
        observer: impl Fn(&OutcomeEvent) + Send + Sync + 'static,
    ) -> EngineBuilder {
        self.observers.outcome = Some(Arc::new(observer));
        self
    }

    /// Calls `observer` with each change of a sink key's circuit breaker
    /// — opened (its rows park until `until_ms`), closed (they run
    /// again), or moved with its sink to another index by a reload or a
    /// restart (still open) — and the time its shard saw it, on that
    /// shard's thread: to tell someone a receiver is failing. It must
    /// return quickly; one that panics is logged and the shard goes on.
    /// Breakers are kept in the store, so one open at a crash is open
    /// again at the next start, without a second report.
    pub fn on_breaker(
        mut self,
        observer: impl Fn(&BreakerEvent, u64) + Send + Sync + 'static,
    ) -> EngineBuilder {
        self.observers.breaker = Some(Arc::new(observer));
        self
    }

    /// Fixes the shards' PRNG seeds (jitter) for reproducible runs.
    pub fn seed(mut self, seed: u64) -> EngineBuilder {
        self.seed = Some(seed);
        self
    }

    /// Validates the config, opens every shard (recovering claimed rows) and
    /// starts the threads.
    pub fn open(self) -> Result<Engine, OpenError> {
        let (claims, catalog, registry) = self.sinks()?;
        let (lock, stores, disk_reserve) = open_stores(&self.config)?;
        let shard_count = stores.len();
        let global = global_grant(&self.config.dispatch);
        let (coordinator_tx, coordinator_rx) = crossbeam_channel::bounded(1024);
        let start = ShardStart {
            engine_id: super::io_thread::new_engine_id(),
            config: &self.config,
            catalog,
            grants: coordinator::shares(global, &vec![0; shard_count], &vec![0; shard_count]),
            seed: self.seed.unwrap_or_else(wall_ms),
            now_ms: wall_ms(),
            registry: registry.clone(),
            latency: Arc::new(AttemptLatency::default()),
            coordinator: coordinator_tx.clone(),
            core_ids: match self.config.pin_shards {
                true => core_affinity::get_core_ids().unwrap_or_default(),
                false => Vec::new(),
            },
            observers: self.observers,
            disk_reserve,
        };
        let (shards, threads) = start.shards(stores)?;
        let inputs = shards.iter().map(|s| s.input.clone()).collect();
        let started = std::thread::Builder::new()
            .name("goad-coordinator".into())
            .spawn(move || coordinator::run(coordinator_rx, inputs, global))
            .and_then(|coordinator| Ok((coordinator, ClaimSweeper::start(claims.clone())?)));
        let (coordinator, claim_sweeper) = match started {
            Ok(started) => started,
            Err(e) => {
                stop_shards(&shards, threads);
                return Err(OpenError::Thread(e));
            }
        };
        Ok(Engine {
            id: start.engine_id,
            claims,
            claim_sweeper: Mutex::new(Some(claim_sweeper)),
            catalog: RwLock::new(start.catalog),
            latency: start.latency,
            config: RwLock::new(self.config),
            registry,
            host_sinks: self.host_sinks,
            shards,
            coordinator: coordinator_tx,
            threads: Mutex::new(threads),
            coordinator_thread: Mutex::new(Some(coordinator)),
            stopped: AtomicBool::new(false),
            backing_up: Mutex::new(()),
            _lock: lock,
        })
    }

    /// Validates the config against the host's sinks and builds the
    /// sinks: the claim-check store, the catalog and the registry.
    fn sinks(&self) -> Result<(Arc<ClaimStore>, Arc<Catalog>, SharedRegistry), OpenError> {
        let names: Vec<&str> = self.host_sinks.keys().map(String::as_str).collect();
        self.config
            .validate_with_sinks(&names)
            .map_err(OpenError::Config)?;
        let claims = ClaimStore::from_config(&self.config).map_err(OpenError::Config)?;
        let claims = Arc::new(claims);
        let sinks = SinkRegistry::build(
            &self.config,
            &self.host_sinks,
            &claims,
            &SinkRegistry::default(),
        )
        .map_err(OpenError::Config)?;
        let catalog = Arc::new(sinks.catalog(&self.config));
        Ok((claims, catalog, Arc::new(RwLock::new(Arc::new(sinks)))))
    }
}

/// Locks the data directory and opens every shard's store, refusing a
/// directory a reshard left unfinished.
fn open_stores(config: &Config) -> Result<(DataDirLock, Vec<ShardStore>, DiskReserve), OpenError> {
    let lock = DataDirLock::acquire(&config.data_dir).map_err(OpenError::Store)?;
    refuse_unfinished_reshard(&config.data_dir).map_err(OpenError::Store)?;
    let shard_count = shards_to_open(config).map_err(OpenError::Store)?;
    refuse_unmappable(&config.data_dir, shard_count, config.max_shard_bytes)
        .map_err(OpenError::Store)?;
    let stores = ShardStore::open_all(&config.data_dir, shard_count, config.max_shard_bytes)
        .map_err(OpenError::Store)?;
    let disk_reserve = DiskReserve {
        min_free_bytes: config.min_free_disk_bytes,
        shards: shard_count,
    };
    if let Some(store) = stores.first() {
        disk_reserve.check(store);
    }
    Ok((lock, stores, disk_reserve))
}

/// The shard count an engine opens `config`'s data directory with: its
/// `shards`, or, with `shards = 0` (one per core), the count the
/// directory was made with (one per core for a new one), so that a node
/// whose machine gains or loses cores (a resized VM, a pod given another
/// CPU limit) opens its data as it was made; `goad reshard --shards 0`
/// moves it to one per core.
pub fn shards_to_open(config: &Config) -> Result<usize, StoreError> {
    match config.shards {
        0 => Ok(
            stored_shard_count(&config.data_dir, config.max_shard_bytes)?
                .unwrap_or(config.shard_count()),
        ),
        configured => Ok(configured),
    }
}

/// What every shard is started with.
struct ShardStart<'a> {
    engine_id: u64,
    config: &'a Config,
    catalog: Arc<Catalog>,
    /// Each shard's first share of the global windows.
    grants: Vec<Grant>,
    seed: u64,
    now_ms: u64,
    registry: SharedRegistry,
    latency: Arc<AttemptLatency>,
    coordinator: Sender<CoordinatorInput>,
    core_ids: Vec<core_affinity::CoreId>,
    observers: Observers,
    disk_reserve: DiskReserve,
}

impl ShardStart<'_> {
    /// Starts a shard on each store, or none: a shard that cannot start
    /// stops those started before it.
    fn shards(
        &self,
        stores: Vec<ShardStore>,
    ) -> Result<(Vec<Shard>, Vec<JoinHandle<()>>), OpenError> {
        let mut shards = Vec::with_capacity(stores.len());
        let mut threads = Vec::with_capacity(stores.len());
        for (k, store) in stores.into_iter().enumerate() {
            match self.shard(k, store) {
                Ok((shard, thread)) => {
                    shards.push(shard);
                    threads.push(thread);
                }
                Err(e) => {
                    stop_shards(&shards, threads);
                    return Err(e);
                }
            }
        }
        Ok((shards, threads))
    }

    /// Starts shard `k` and waits until it has opened and recovered its
    /// store. On failure its thread has ended.
    fn shard(&self, k: usize, store: ShardStore) -> Result<(Shard, JoinHandle<()>), OpenError> {
        let (input, inputs) = crossbeam_channel::bounded(SHARD_INPUT_CAPACITY);
        let mut core = Core::new(
            self.config.dispatch.clone(),
            self.config.retry,
            self.catalog.clone(),
            self.grants[k],
            self.now_ms,
            self.seed ^ (k as u64).wrapping_mul(0x9E37_79B9),
            1,
        );
        core.observe_outcomes(self.observers.outcome.is_some());
        let (opened_tx, opened_rx) = crossbeam_channel::bounded(1);
        let gauges = Arc::new(ShardGauges::default());
        let pool = IoPool::start(
            self.engine_id,
            k,
            self.config.dispatch.concurrency as usize,
            input.clone(),
            self.registry.clone(),
            self.latency.clone(),
        );
        let thread = ShardThread {
            index: k,
            store: store.clone(),
            core,
            opened: opened_tx,
            inputs,
            pool,
            coordinator: self.coordinator.clone(),
            gauges: gauges.clone(),
            dead_retention_ms: self.config.dead_letters.retention_ms,
            observers: self.observers.clone(),
            disk_reserve: self.disk_reserve,
        };
        let core_id = (!self.core_ids.is_empty()).then(|| self.core_ids[k % self.core_ids.len()]);
        let handle = std::thread::Builder::new()
            .name(format!("goad-shard-{k}"))
            .spawn(move || {
                if let Some(id) = core_id {
                    core_affinity::set_for_current(id);
                }
                super::shard_thread::mark();
                thread.run();
            })
            .map_err(OpenError::Thread)?;
        // The shard opens (and recovers) on its own thread; wait for it.
        let opened = opened_rx.recv().map_err(|_| {
            OpenError::Thread(std::io::Error::other("a shard thread died while opening"))
        });
        match opened.and_then(|result| result.map_err(OpenError::Store)) {
            Ok(()) => Ok((
                Shard {
                    input,
                    store,
                    gauges,
                },
                handle,
            )),
            Err(e) => {
                let _ = handle.join();
                Err(e)
            }
        }
    }
}

/// Tells every shard to shut down (running attempts finish, up to a grace
/// period) and waits for their threads (`threads[k]` is shard `k`'s), but
/// for the caller's own when a shard's callback calls it: that shard stops
/// once the callback returns.
pub(super) fn stop_shards(shards: &[Shard], threads: Vec<JoinHandle<()>>) {
    let own = own_shard(&threads);
    for (k, shard) in shards.iter().enumerate() {
        send_to_shard(shard, k, ShardInput::Shutdown, own == Some(k));
    }
    for (k, thread) in threads.into_iter().enumerate() {
        if own != Some(k) {
            let _ = thread.join();
        }
    }
}

/// The shard whose thread calls (in a callback), if one of `threads` does.
pub(super) fn own_shard(threads: &[JoinHandle<()>]) -> Option<usize> {
    let me = std::thread::current().id();
    threads.iter().position(|t| t.thread().id() == me)
}

/// Sends shard `k` an input that asks no answer. Its `own` shard's queue
/// empties only after the calling callback returns, so a full one is sent
/// to by a thread of its own, which waits for that.
pub(super) fn send_to_shard(shard: &Shard, k: usize, input: ShardInput, own: bool) {
    if !own {
        let _ = shard.input.send(input);
        return;
    }
    if let Err(TrySendError::Full(input)) = shard.input.try_send(input) {
        let queue = shard.input.clone();
        let sent = std::thread::Builder::new()
            .name(format!("goad-send-shard-{k}"))
            .spawn(move || {
                let _ = queue.send(input);
            });
        if let Err(e) = sent {
            crate::log::error(
                "cannot start a thread to send to the calling shard; the input is dropped",
                &[("shard", &k), ("error", &e)],
            );
        }
    }
}
