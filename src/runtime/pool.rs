//! A shard's IO pool: blocking worker threads running `Sink::deliver`.
//!
//! Calls come over a bounded queue: one attempt (`Sink::deliver`) or a
//! batch (`Sink::deliver_batch`). Each attempt's result goes back to the
//! shard's input channel tagged with its job id (which wakes the shard).
//! The pool has `dispatch.concurrency` workers, as last reconfigured: a
//! larger value starts more at once, a smaller one lets idle workers leave
//! at once and busy ones after their call.
//!
//! A call that times out (see `Core::poll_abandoned`) while still queued
//! is taken off the queue: run late, it would only repeat an attempt the
//! shard has failed, and since retried or dead-lettered. A worker that
//! pops a call past its deadline before the shard took it off fails it
//! without running it, for the same reason. One that timed
//! out on a worker may have it stuck in a sink for good: the pool starts a
//! replacement, so the shard keeps its capacity, while fewer than
//! `MAX_ABANDONED_WORKERS` are stuck. A stuck worker is back when its late
//! result is (the shard tells the pool, [`IoPool::returned`]); a worker
//! that finds the pool over its size plus its replaced stuck workers
//! leaves. Every worker runs on the CPUs of the thread that started the
//! pool, wherever the pinned shard thread starts a replacement.

use super::cpu_set::CpuSet;
use super::job_queue::{JobQueue, Popped};
use super::shard::ShardInput;
use super::step::Completion;
use crate::core::{AttemptFailure, AttemptResult, Call, FailureClass, Job, JobId};
use crate::latency::AttemptLatency;
use crate::limits::MAX_ABANDONED_WORKERS;
use crate::sink::{deliver_batch_safely, deliver_safely, Delivery, Sink, SinkRegistry};
use crossbeam_channel::Sender;
use parking_lot::RwLock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The sinks, swapped whole on reconfiguration.
pub type SharedRegistry = Arc<RwLock<Arc<SinkRegistry>>>;

/// A call as queued: the instant its attempts' deadline passes, which
/// each [`Delivery`] carries for the sink.
struct Queued {
    call: Call,
    deadline: Instant,
}

struct Shared {
    calls: JobQueue<Queued>,
    results: Sender<ShardInput>,
    registry: SharedRegistry,
    live: AtomicUsize,
    /// The pool's size: `dispatch.concurrency`.
    target: AtomicUsize,
    /// Stuck workers a replacement was started for: the first
    /// `MAX_ABANDONED_WORKERS` of `IoPool::stuck`.
    replaced: AtomicUsize,
    /// The engine whose attempts the workers run (see `io_thread`).
    engine_id: u64,
    shard_index: usize,
    spawned: AtomicUsize,
    latency: Arc<AttemptLatency>,
    cpus: Option<CpuSet>,
}

impl Shared {
    /// Whether a worker leaves: more are live than the pool's size and its
    /// replaced stuck workers. If so it is no longer counted live.
    fn leave(&self) -> bool {
        let mut live = self.live.load(Ordering::Acquire);
        loop {
            let wanted =
                self.target.load(Ordering::Acquire) + self.replaced.load(Ordering::Acquire);
            if live <= wanted {
                return false;
            }
            match (self.live).compare_exchange(live, live - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => live = now,
            }
        }
    }
}

/// The pool of one shard.
pub struct IoPool {
    shared: Arc<Shared>,
    /// Calls that timed out on a worker, each named by the job the core
    /// named it by, until its late result comes back.
    stuck: HashSet<JobId>,
}

impl IoPool {
    /// Starts `workers` threads. The call queue holds more calls than the
    /// shard may start at once (`dispatch.concurrency`): one is queued
    /// only while its attempts run.
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
            target: AtomicUsize::new(workers),
            replaced: AtomicUsize::new(0),
            engine_id,
            shard_index,
            spawned: AtomicUsize::new(0),
            latency,
            cpus: CpuSet::of_current_thread(),
        });
        for _ in 0..workers {
            spawn_worker(&shared);
        }
        IoPool {
            shared,
            stuck: HashSet::new(),
        }
    }

    /// Hands a call, whose attempts time out at `deadline`, to a worker.
    /// A full queue (more calls waiting than the shard may start at once,
    /// which its windows keep from happening) fails the call's attempts at
    /// once rather than block the shard.
    pub fn submit(&self, call: Call, deadline: Instant) -> Result<(), Vec<Completion>> {
        let queued = Queued { call, deadline };
        self.shared
            .calls
            .push(queued)
            .map_err(|Queued { call, .. }| {
                let failure = AttemptFailure {
                    class: FailureClass::Transient,
                    message: "io pool queue is full".into(),
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

    /// The pool's size is now `workers` (a reconfiguration of
    /// `dispatch.concurrency`): more are started at once; past it, idle
    /// workers leave now and busy ones after their call.
    pub fn resize(&self, workers: usize) {
        let was = self.shared.target.swap(workers, Ordering::AcqRel);
        self.shared
            .calls
            .set_capacity(workers + MAX_ABANDONED_WORKERS);
        for _ in was..workers {
            spawn_worker(&self.shared);
        }
        if workers < was {
            self.shared.calls.wake_all();
        }
    }

    /// A call timed out, named by `job` (see the module docs): taken off
    /// the queue if still there, else its worker counted stuck and, while
    /// fewer than `MAX_ABANDONED_WORKERS` are, replaced.
    pub fn abandon(&mut self, job: JobId) {
        let named = |queued: &Queued| queued.call.jobs().iter().any(|j| j.id == job);
        if self.shared.calls.take(named).is_some() {
            return;
        }
        self.stuck.insert(job);
        if self.stuck.len() <= MAX_ABANDONED_WORKERS {
            // Counted before it starts, so that no worker leaves meanwhile.
            self.count_replaced();
            spawn_worker(&self.shared);
        } else if self.stuck.len() == MAX_ABANDONED_WORKERS + 1 {
            crate::log::warn(
                "io workers stuck in calls that timed out are no longer replaced; \
                 the shard runs short of workers until their calls return",
                &[
                    ("shard", &self.shared.shard_index),
                    ("stuck", &self.stuck.len()),
                ],
            );
        }
    }

    /// A result came back for `job`: if it names a call that timed out on
    /// a worker, that worker is back, and the pool one replacement over
    /// (the first worker to find it so leaves).
    pub fn returned(&mut self, job: JobId) {
        if self.stuck.is_empty() || !self.stuck.remove(&job) {
            return;
        }
        if self.stuck.len() < MAX_ABANDONED_WORKERS {
            self.count_replaced();
            self.shared.calls.wake_all();
        } else if self.stuck.len() == MAX_ABANDONED_WORKERS {
            crate::log::info(
                "io workers stuck in calls that timed out are replaced again",
                &[("shard", &self.shared.shard_index)],
            );
        }
    }

    fn count_replaced(&self) {
        let replaced = self.stuck.len().min(MAX_ABANDONED_WORKERS);
        self.shared.replaced.store(replaced, Ordering::Release);
    }

    /// Workers stuck in a call that timed out.
    pub fn abandoned(&self) -> usize {
        self.stuck.len()
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
    loop {
        let queued = match shared.calls.pop(|| shared.leave()) {
            Popped::Item(queued) => queued,
            Popped::Leave => return,
            Popped::Closed => break,
        };
        let started = Instant::now();
        let results = results_of(shared, &queued, started);
        let took = started.elapsed();
        shared.latency.record(took);
        let sent = queued.call.jobs().iter().zip(results).all(|(job, result)| {
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
        if shared.leave() {
            return;
        }
    }
    shared.live.fetch_sub(1, Ordering::AcqRel);
}

/// The results of a call popped at `now`: its sink's answers; or, for a
/// call whose deadline has passed (the shard fails its attempts as
/// `attempt_timeout` and takes queued calls off the queue, but a worker
/// may pop one first), a failure each without running it, since its
/// attempts are retried already and running them would deliver twice.
fn results_of(shared: &Shared, queued: &Queued, now: Instant) -> Vec<AttemptResult> {
    let key = &queued.call.jobs()[0].key;
    let failed = |message: String| {
        let failure = AttemptFailure {
            class: FailureClass::Transient,
            message,
        };
        vec![Err(failure); queued.call.jobs().len()]
    };
    if now >= queued.deadline {
        return failed(
            "not started by the attempt's deadline (dispatch.attempt_timeout_ms): \
             every IO worker was busy"
                .into(),
        );
    }
    // Not read in the match: its guard would hold the registry through the call.
    let sink = shared.registry.read().get(key).cloned();
    match sink {
        Some(sink) => run_call(sink.as_ref(), queued),
        None => failed(format!(
            "no {} sink at {}[{}]",
            key.sink_type, key.source_id, key.sink_index
        )),
    }
}

/// What the sink is given for `job`, whose deadline is `deadline`.
fn delivery(job: &Job, deadline: Instant) -> Delivery<'_> {
    Delivery {
        hook: &job.hook,
        attempt: job.attempt,
        sink_index: job.key.sink_index,
        replay_id: job.replay.as_deref(),
        claim: None,
        deadline,
    }
}

/// One call into `sink`: each attempt's result, in the call's order.
fn run_call(sink: &dyn Sink, Queued { call, deadline }: &Queued) -> Vec<AttemptResult> {
    match call {
        Call::One(job) => {
            vec![deliver_safely(sink, &delivery(job, *deadline)).map_err(|e| e.into_failure())]
        }
        Call::Batch(jobs) => {
            let deliveries: Vec<Delivery<'_>> =
                jobs.iter().map(|job| delivery(job, *deadline)).collect();
            deliver_batch_safely(sink, &deliveries)
                .into_iter()
                .map(|result| result.map_err(|e| e.into_failure()))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::wait_until;

    /// A resized pool starts its new workers at once, and its idle workers
    /// past a smaller size leave at once (rather than after a call each,
    /// which an idle pool may not get for long).
    #[test]
    fn a_resized_pool_grows_and_shrinks_at_once() {
        let (results, _inputs) = crossbeam_channel::unbounded();
        let registry = Arc::new(RwLock::new(Arc::new(SinkRegistry::default())));
        let pool = IoPool::start(0, 0, 4, results, registry, Arc::default());
        let live = || pool.shared.live.load(Ordering::Acquire);
        assert_eq!(live(), 4);
        pool.resize(7);
        assert_eq!(live(), 7);
        pool.resize(2);
        wait_until("five workers gone", || live() == 2);
        pool.resize(3);
        assert_eq!((live(), pool.abandoned()), (3, 0));
    }

    /// A host sink that counts its calls.
    struct Counting(AtomicUsize);

    impl Sink for Counting {
        fn deliver(&self, _: &Delivery<'_>) -> Result<(), crate::sink::SinkError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// A call a worker pops after its deadline is not run (the shard has
    /// failed its attempt, which is retried: run, it would deliver twice);
    /// its attempt fails, saying why. One popped in time runs.
    #[test]
    fn a_call_popped_after_its_deadline_fails_without_running() {
        use crate::config::{Config, SinkConfig};
        let config = Config::with_one_source(vec![SinkConfig::of_kind("host")]);
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let host = [("host".to_string(), counting.clone() as Arc<dyn Sink>)];
        let claims = Arc::new(crate::claim_check::ClaimStore::new(std::env::temp_dir(), 1));
        let built = SinkRegistry::build(
            &config,
            &host.into_iter().collect(),
            &claims,
            &SinkRegistry::default(),
        );
        let registry = Arc::new(RwLock::new(Arc::new(built.unwrap())));
        let (results, completions) = crossbeam_channel::unbounded();
        let pool = IoPool::start(0, 0, 1, results, registry, Arc::default());
        let call = |id| {
            Call::One(Job {
                id: JobId(id),
                row: crate::core::RowId {
                    seq: id,
                    sink_index: 0,
                },
                key: crate::core::SinkKey {
                    tenant: "t".into(),
                    source_id: "s".into(),
                    sink_index: 0,
                    sink_type: "host".into(),
                },
                attempt: 1,
                hook: Arc::new(crate::store::record::sample_hook(id)),
                deadline_at_ms: 0,
                replay: None,
            })
        };
        let result_of = |call, deadline| {
            pool.submit(call, deadline).unwrap();
            match completions.recv_timeout(Duration::from_secs(10)).unwrap() {
                ShardInput::Completion(done) => done.result.map_err(|e| e.message),
                _ => panic!("not a completion"),
            }
        };
        let now = Instant::now();
        assert_eq!(result_of(call(1), now + Duration::from_secs(60)), Ok(()));
        assert_eq!(
            result_of(call(2), now - Duration::from_millis(1)),
            Err(
                "not started by the attempt's deadline (dispatch.attempt_timeout_ms): \
                 every IO worker was busy"
                    .to_string()
            )
        );
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
    }
}
