//! A shard's IO pool: blocking worker threads running `Sink::deliver`.
//!
//! Calls come over a bounded channel: one attempt (`Sink::deliver`) or a
//! batch (`Sink::deliver_batch`). Each attempt's result goes back to the
//! shard's input channel tagged with its job id (which wakes the shard). A
//! worker whose call timed out may be stuck in a sink: the pool starts a
//! replacement so the shard keeps its capacity, up to
//! `MAX_ABANDONED_WORKERS` extra threads. A worker that finds the pool over
//! its size after a job exits, so the count returns to its target once stuck
//! workers come back. Every worker runs on the CPUs of the thread that
//! started the pool, wherever the pinned shard thread starts a replacement.

use super::cpu_set::CpuSet;
use super::job_queue::JobQueue;
use super::shard::ShardInput;
use super::step::Completion;
use crate::core::{AttemptFailure, AttemptResult, Call, FailureClass, Job};
use crate::latency::AttemptLatency;
use crate::limits::MAX_ABANDONED_WORKERS;
use crate::sink::{deliver_batch_safely, deliver_safely, Delivery, Sink, SinkRegistry};
use crossbeam_channel::Sender;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The sinks, swapped whole on reconfiguration.
pub type SharedRegistry = Arc<RwLock<Arc<SinkRegistry>>>;

struct Shared {
    calls: JobQueue<Call>,
    results: Sender<ShardInput>,
    registry: SharedRegistry,
    live: AtomicUsize,
    target: usize,
    /// The engine whose attempts the workers run (see `io_thread`).
    engine_id: u64,
    shard_index: usize,
    spawned: AtomicUsize,
    latency: Arc<AttemptLatency>,
    cpus: Option<CpuSet>,
}

/// The pool of one shard.
pub struct IoPool {
    shared: Arc<Shared>,
}

impl IoPool {
    /// Starts `workers` threads. The call channel holds every call the
    /// shard may start at once plus those whose workers are stuck.
    pub fn start(
        engine_id: u64,
        shard_index: usize,
        workers: usize,
        results: Sender<ShardInput>,
        registry: SharedRegistry,
        latency: Arc<AttemptLatency>,
    ) -> IoPool {
        let shared = Arc::new(Shared {
            calls: JobQueue::new(workers + MAX_ABANDONED_WORKERS),
            results,
            registry,
            live: AtomicUsize::new(0),
            target: workers,
            engine_id,
            shard_index,
            spawned: AtomicUsize::new(0),
            latency,
            cpus: CpuSet::of_current_thread(),
        });
        for _ in 0..workers {
            spawn_worker(&shared);
        }
        IoPool { shared }
    }

    /// Hands a call to a worker. A full channel (every worker stuck past
    /// the replacement bound) fails the call's attempts at once instead of
    /// blocking the shard.
    pub fn submit(&self, call: Call) -> Result<(), Vec<Completion>> {
        self.shared.calls.push(call).map_err(|call| {
            let failure = AttemptFailure {
                class: FailureClass::Transient,
                message: "io pool saturated: every worker is stuck".into(),
            };
            call.jobs()
                .iter()
                .map(|job| Completion {
                    job: job.id,
                    result: Err(failure.clone()),
                    took: Duration::ZERO,
                })
                .collect()
        })
    }

    /// A call timed out: its worker may never come back, so start another
    /// (within the bound).
    pub fn replace_abandoned(&self) {
        if self.abandoned() < MAX_ABANDONED_WORKERS {
            spawn_worker(&self.shared);
        }
    }

    /// Workers beyond the pool's size: stuck in an attempt that timed out.
    pub fn abandoned(&self) -> usize {
        self.shared
            .live
            .load(Ordering::Acquire)
            .saturating_sub(self.shared.target)
    }
}

/// The shard is gone: idle workers exit; busy ones after their attempt.
impl Drop for IoPool {
    fn drop(&mut self) {
        self.shared.calls.close();
    }
}

fn spawn_worker(shared: &Arc<Shared>) {
    shared.live.fetch_add(1, Ordering::AcqRel);
    let n = shared.spawned.fetch_add(1, Ordering::Relaxed);
    let worker = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("goad-io-{}-{n}", shared.shard_index))
        .stack_size(512 * 1024)
        .spawn(move || run_worker(&worker));
    if let Err(e) = spawned {
        shared.live.fetch_sub(1, Ordering::AcqRel);
        crate::log::error(
            "cannot start an IO worker",
            &[("shard", &shared.shard_index), ("error", &e)],
        );
    }
}

fn run_worker(shared: &Shared) {
    if let Some(cpus) = &shared.cpus {
        cpus.apply_to_current_thread();
    }
    super::io_thread::mark(shared.engine_id);
    while let Some(call) = shared.calls.pop() {
        let key = &call.jobs()[0].key;
        let sink = shared.registry.read().get(key).cloned();
        let started = Instant::now();
        let results = match sink {
            Some(sink) => run_call(sink.as_ref(), &call),
            None => {
                let failure = AttemptFailure {
                    class: FailureClass::Transient,
                    message: format!(
                        "no {} sink at {}[{}]",
                        key.sink_type, key.source_id, key.sink_index
                    ),
                };
                vec![Err(failure); call.jobs().len()]
            }
        };
        let took = started.elapsed();
        shared.latency.record(took);
        let sent = call.jobs().iter().zip(results).all(|(job, result)| {
            let completion = Completion {
                job: job.id,
                result,
                took,
            };
            shared
                .results
                .send(ShardInput::Completion(completion))
                .is_ok()
        });
        if !sent {
            break;
        }
        let live = shared.live.load(Ordering::Acquire);
        if live > shared.target
            && shared
                .live
                .compare_exchange(live, live - 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return;
        }
    }
    shared.live.fetch_sub(1, Ordering::AcqRel);
}

/// What the sink is given for `job`.
fn delivery(job: &Job) -> Delivery<'_> {
    Delivery {
        hook: &job.hook,
        attempt: job.attempt,
        sink_index: job.key.sink_index,
        replay_id: job.replay.as_deref(),
        claim: None,
    }
}

/// One call into `sink`: each attempt's result, in the call's order.
fn run_call(sink: &dyn Sink, call: &Call) -> Vec<AttemptResult> {
    match call {
        Call::One(job) => {
            vec![deliver_safely(sink, &delivery(job)).map_err(|e| e.into_failure())]
        }
        Call::Batch(jobs) => {
            let deliveries: Vec<Delivery<'_>> = jobs.iter().map(delivery).collect();
            deliver_batch_safely(sink, &deliveries)
                .into_iter()
                .map(|result| result.map_err(|e| e.into_failure()))
                .collect()
        }
    }
}
