//! Replays: revive dead rows through the normal pipeline at a pace.
//!
//! A replay takes the dead rows matching its filter (source, tenant, hook,
//! sink index, reason, dead between `since_ms` and `until_ms`) that were
//! dead when it was created; rows that die later, including its own that
//! die again, are not taken. A pacer thread moves them back to due in
//! steps of at most `replay.rate` rows per second, and moves none while
//! the engine's pressure shows a lag over `replay.max_lag_ms` or a full
//! window. Each step runs inside the owning shard, which resets the rows'
//! attempts, tags them with the replay's id (sinks see it as
//! `x-goad-replay-id`) and counts them; the shard counts their deliveries
//! and new deaths in the same transactions.
//!
//! A replay's definition and state are a JSON file in
//! `<data_dir>/replays/`, written (synced, then renamed) when it is created
//! and when its state changes; its counters are in the shards' stores. After
//! a restart a running replay resumes where the stores say it is: the rows
//! it moved are no longer dead, so it only takes what is left.
//!
//! A replay pauses itself when, of its rows, at least `AUTO_PAUSE_MIN_ROWS`
//! died again and more died than were delivered, or its rows were parked
//! behind an open breaker that many times and more often than any were
//! delivered: replaying into a sink that still fails only refills the dead
//! letters, or parks row after row (see `auto_pause`). An operator pauses
//! a running replay and resumes a paused one (`Replays::control`); after
//! a resume it counts its rows from there, as the reference counts "since
//! last resume".

use super::NodeState;
use crate::core::ReasonKinds;
use crate::limits::MAX_STORED_REPLAYS;
use crate::runtime::{Engine, ReviveStep};
use crate::store::{DeadFilter, ReplayCounts, StoreError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the pacer moves rows.
const STEP_INTERVAL: Duration = Duration::from_millis(100);

/// The pacer looks for done replays to forget once in this many passes
/// (a second): a walk of every replay kept.
const FORGET_EVERY_PASSES: u64 = 10;

/// Rows of a replay dead again (or parks of its rows) before it may pause itself.
pub const AUTO_PAUSE_MIN_ROWS: u64 = 100;

/// What a replay takes, as `POST /v1/replays` gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    pub source_id: Option<String>,
    pub tenant: Option<String>,
    /// Only the dead rows of this hook (absent from specs written before
    /// it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_id: Option<String>,
    /// Only the rows of the sink at this index of their source (this and
    /// the next two are absent from specs written before they existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_index: Option<u16>,
    /// Only the rows that died of one of these: an outage's
    /// `max_attempts,retry_horizon`, say, and not the receiver's
    /// `permanent` refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ReasonKinds>,
    pub since_ms: Option<u64>,
    /// Only the rows dead at or before this time (and, whatever it says,
    /// before the replay was created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayState {
    /// Moving rows.
    Running,
    /// Every matching row was moved; their outcomes keep counting.
    Done,
    /// Stopped moving rows, by itself or by an operator (see `error`).
    Paused,
}

impl ReplayState {
    pub const ALL: [ReplayState; 3] =
        [ReplayState::Running, ReplayState::Done, ReplayState::Paused];

    pub fn name(self) -> &'static str {
        match self {
            ReplayState::Running => "running",
            ReplayState::Done => "done",
            ReplayState::Paused => "paused",
        }
    }
}

/// A replay as stored in its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayJob {
    pub id: String,
    pub spec: ReplaySpec,
    pub created_at_ms: u64,
    /// Matching dead rows when it was created.
    pub matched: u64,
    pub state: ReplayState,
    pub error: Option<String>,
    /// Its counters when an operator last resumed it: it pauses itself on
    /// what its rows did since (absent until a resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<ReplayCounts>,
    /// When it was done (absent before; and from replays done before it
    /// was kept, which count from their creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at_ms: Option<u64>,
}

/// An operator's word to a replay (`POST /v1/replays/{id}/pause`, `…/resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayControl {
    /// A running replay moves no more rows (those it moved are delivered
    /// as any row).
    Pause,
    /// A paused replay (by itself or an operator) moves rows again.
    Resume,
}

/// Why a replay was not created.
#[derive(Debug)]
pub enum CreateError {
    /// `MAX_STORED_REPLAYS` are kept.
    TooMany,
    /// Its matches could not be counted, or its file written.
    Store(KeepError),
}

/// Why a replay was not paused or resumed.
#[derive(Debug)]
pub enum ControlError {
    Unknown,
    /// It moved every row it takes: there is nothing to pause or resume.
    Done,
    /// Its counters could not be read, or its file written (the replay is
    /// as it was).
    Store(KeepError),
}

/// Why a replay's change could not be kept.
#[derive(Debug)]
pub enum KeepError {
    /// Its rows or counters could not be read from the shards' stores.
    Shards(StoreError),
    /// Its file in `dir` could not be written.
    File {
        dir: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for KeepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeepError::Shards(e) => e.fmt(f),
            KeepError::File { dir, source } => {
                let dir = dir.display();
                write!(f, "cannot write the replay's file in {dir}: {source}")
            }
        }
    }
}

impl std::error::Error for KeepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeepError::Shards(e) => Some(e),
            KeepError::File { source, .. } => Some(source),
        }
    }
}

impl ReplayJob {
    fn filter(&self) -> DeadFilter {
        DeadFilter {
            source_id: self.spec.source_id.clone(),
            tenant: self.spec.tenant.clone(),
            hook_id: self.spec.hook_id.clone(),
            sink_index: self.spec.sink_index,
            reason: self.spec.reason,
            since_ms: self.spec.since_ms.unwrap_or(0),
            until_ms: (self.spec.until_ms)
                .map_or(self.created_at_ms, |t| t.min(self.created_at_ms)),
        }
    }
}

/// A replay's progress, as `GET /v1/replays/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayProgress {
    #[serde(flatten)]
    pub job: ReplayJob,
    pub moved: u64,
    pub delivered: u64,
    pub dead_again: u64,
    /// Parks of its rows behind an open breaker.
    pub parked: u64,
    /// The last step moved nothing because of pressure.
    pub throttled: bool,
}

/// The pacer's memory of a running replay (rebuilt after a restart).
#[derive(Default)]
struct Pace {
    /// Per shard: where its last step stopped, and whether it has no more.
    cursors: Vec<Option<Vec<u8>>>,
    exhausted: Vec<bool>,
    /// Rows the rate allows now.
    allowance: f64,
    throttled: bool,
}

impl Pace {
    /// The rows a step may move after `elapsed_s` at `rate` a second:
    /// what the time since the last pass earned, so the rate holds however
    /// late passes run, but no more than a second's worth (after a stalled
    /// pacer) and, unspent (no rows to move), no more than a fifth of a
    /// second's worth: no burst after either.
    fn grant(&mut self, rate: f64, elapsed_s: f64) -> u64 {
        let most = rate * elapsed_s.clamp(0.2, 1.0) + 1.0;
        self.allowance = (self.allowance + rate * elapsed_s).min(most);
        self.allowance.floor() as u64
    }

    /// `rows` of the grant were moved.
    fn spent(&mut self, rows: u64) {
        self.allowance -= rows as f64;
    }
}

/// The node's replays.
pub struct Replays {
    dir: PathBuf,
    jobs: Mutex<Vec<ReplayJob>>,
    paces: Mutex<HashMap<String, Pace>>,
    stop: Arc<AtomicBool>,
    pacer: Mutex<Option<JoinHandle<()>>>,
    /// Times the pacer looked at the running replays.
    passes: AtomicU64,
}

impl Replays {
    /// Loads the replays stored under `data_dir`; a file that does not
    /// parse is reported and skipped, as is a directory that cannot be
    /// read (its replays are not resumed: their rows stay dead letters).
    pub fn new(data_dir: &Path) -> Replays {
        let dir = data_dir.join("replays");
        let mut jobs = Vec::new();
        if let Err(e) = load_jobs(&dir, &mut jobs) {
            crate::log::error(
                "cannot read the replays directory: the replays it holds are not resumed",
                &[("path", &dir.display()), ("error", &e)],
            );
        }
        jobs.sort_by(|a: &ReplayJob, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Replays {
            dir,
            jobs: Mutex::new(jobs),
            paces: Mutex::new(HashMap::new()),
            stop: Arc::new(AtomicBool::new(false)),
            pacer: Mutex::new(None),
            passes: AtomicU64::new(0),
        }
    }

    /// Creates a replay, or returns the running one with the same spec
    /// (`false`: it already existed).
    pub fn create(
        &self,
        engine: &Engine,
        spec: ReplaySpec,
    ) -> Result<(ReplayJob, bool), CreateError> {
        let mut jobs = self.jobs.lock();
        if let Some(job) = jobs
            .iter()
            .find(|j| j.spec == spec && j.state == ReplayState::Running)
        {
            return Ok((job.clone(), false));
        }
        if jobs.len() >= MAX_STORED_REPLAYS {
            return Err(CreateError::TooMany);
        }
        let mut job = ReplayJob {
            id: uuid::Uuid::now_v7().to_string(),
            spec,
            created_at_ms: crate::runtime::wall_ms(),
            matched: 0,
            state: ReplayState::Running,
            error: None,
            resumed_at: None,
            done_at_ms: None,
        };
        job.matched = (engine.count_dead(&job.filter()))
            .map_err(|e| CreateError::Store(KeepError::Shards(e)))?;
        self.save(&job).map_err(CreateError::Store)?;
        jobs.push(job.clone());
        crate::log::info(
            "replay created",
            &[("replay", &job.id), ("matched", &job.matched)],
        );
        Ok((job, true))
    }

    /// The ids of the replays (of state `wanted`, if given), newest first.
    pub fn ids(&self, wanted: Option<ReplayState>) -> Vec<String> {
        (self.jobs.lock().iter().rev())
            .filter(|j| wanted.is_none_or(|s| j.state == s))
            .map(|j| j.id.clone())
            .collect()
    }

    /// Pauses or resumes a replay, and its progress after. One already so
    /// is left as it is. A resumed replay pauses itself again only on what
    /// its rows do after the resume (as the reference counts "since last
    /// resume"), so one paused by a failing sink that was fixed goes on.
    pub fn control(
        &self,
        engine: &Engine,
        id: &str,
        control: ReplayControl,
    ) -> Result<ReplayProgress, ControlError> {
        let store = |e| ControlError::Store(KeepError::Shards(e));
        {
            let mut jobs = self.jobs.lock();
            let job = jobs
                .iter_mut()
                .find(|j| j.id == id)
                .ok_or(ControlError::Unknown)?;
            let mut changed = job.clone();
            match (job.state, control) {
                (ReplayState::Done, _) => return Err(ControlError::Done),
                (ReplayState::Running, ReplayControl::Pause) => {
                    changed.state = ReplayState::Paused;
                    changed.error = Some("paused by an operator; resume it to go on".into());
                }
                (ReplayState::Paused, ReplayControl::Resume) => {
                    changed.state = ReplayState::Running;
                    changed.error = None;
                    changed.resumed_at = Some(engine.replay_counters(id).map_err(store)?);
                }
                _ => {}
            }
            if changed != *job {
                self.save(&changed).map_err(ControlError::Store)?;
                *job = changed;
                crate::log::info(
                    "replay state",
                    &[("replay", &id), ("state", &job.state.name())],
                );
                self.paces.lock().remove(id);
            }
        }
        let progress = self.progress(engine, id).map_err(store)?;
        progress.ok_or(ControlError::Unknown)
    }

    /// A replay's progress.
    pub fn progress(
        &self,
        engine: &Engine,
        id: &str,
    ) -> Result<Option<ReplayProgress>, StoreError> {
        let Some(job) = self.jobs.lock().iter().find(|j| j.id == id).cloned() else {
            return Ok(None);
        };
        let counts = engine.replay_counters(id)?;
        let throttled = self.paces.lock().get(id).is_some_and(|p| p.throttled);
        Ok(Some(ReplayProgress {
            job,
            moved: counts.moved,
            delivered: counts.delivered,
            dead_again: counts.dead_again,
            parked: counts.parked,
            throttled,
        }))
    }

    /// Starts the pacer.
    pub(super) fn start(&self, state: Arc<NodeState>) {
        let stop = self.stop.clone();
        let handle = std::thread::Builder::new()
            .name("goad-replay".into())
            .spawn(move || {
                let mut last = Instant::now();
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(STEP_INTERVAL);
                    let elapsed_s = last.elapsed().as_secs_f64();
                    last = Instant::now();
                    let Some(engine) = state.engine() else {
                        continue;
                    };
                    // A panic poisons no lock (parking_lot's), and a
                    // replay's pace keeps the cursors of the steps that
                    // finished: the next pass goes on from them.
                    let pass =
                        crate::panics::catch(|| state.replays.pass(&state, engine, elapsed_s));
                    if let Err(panic) = pass {
                        crate::log::error(
                            "the replay pacer panicked; it goes on at its next pass",
                            &[("panic", &panic)],
                        );
                    }
                }
            });
        match handle {
            Ok(h) => *self.pacer.lock() = Some(h),
            Err(e) => crate::log::error("cannot start the replay pacer", &[("error", &e)]),
        }
    }

    /// One pass of the pacer, `elapsed_s` after the last: the running
    /// replays stepped, and every `FORGET_EVERY_PASSES` the done ones
    /// past their retention forgotten.
    fn pass(&self, state: &NodeState, engine: &Engine, elapsed_s: f64) {
        let (rate, max_lag_ms, retention_ms) = {
            let c = state.config.read();
            (c.replay.rate, c.replay.max_lag_ms, c.replay.retention_ms)
        };
        self.step_all(engine, rate, max_lag_ms, elapsed_s);
        let passes = self.passes.fetch_add(1, Ordering::Release);
        if passes.is_multiple_of(FORGET_EVERY_PASSES) {
            self.forget_done(engine, retention_ms, crate::runtime::wall_ms());
        }
    }

    /// How many replays are in each state.
    pub fn count_by_state(&self) -> [(ReplayState, usize); 3] {
        let jobs = self.jobs.lock();
        ReplayState::ALL.map(|state| (state, jobs.iter().filter(|j| j.state == state).count()))
    }

    /// Times the pacer has looked at the running replays (each
    /// `STEP_INTERVAL`, while the engine is open).
    pub fn pacer_passes(&self) -> u64 {
        self.passes.load(Ordering::Acquire)
    }

    /// Stops the pacer (replays resume at the next start).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.pacer.lock().take() {
            let _ = h.join();
        }
    }

    fn step_all(&self, engine: &Engine, rate: u32, max_lag_ms: u64, elapsed_s: f64) {
        let running: Vec<ReplayJob> = self
            .jobs
            .lock()
            .iter()
            .filter(|j| j.state == ReplayState::Running)
            .cloned()
            .collect();
        if running.is_empty() {
            return;
        }
        let pressure = engine.pressure().ok();
        let held = pressure.is_none_or(|p| p.lag_ms > max_lag_ms || p.window_full);
        for job in running {
            let next = self.step(engine, &job, held, f64::from(rate), elapsed_s);
            if let Some((state, error)) = next {
                self.set_state(&job, state, error);
            }
        }
    }

    /// Forgets the replays done at least `retention_ms` before `now_ms`:
    /// their counters, then their files. One whose counters cannot be
    /// deleted now is kept for a later pass.
    fn forget_done(&self, engine: &Engine, retention_ms: u64, now_ms: u64) {
        let expired: Vec<String> = (self.jobs.lock().iter())
            .filter(|j| j.state == ReplayState::Done)
            .filter(|j| {
                j.done_at_ms
                    .unwrap_or(j.created_at_ms)
                    .saturating_add(retention_ms)
                    <= now_ms
            })
            .map(|j| j.id.clone())
            .collect();
        for id in expired {
            if let Err(e) = engine.forget_replay(&id) {
                crate::log::warn("cannot forget a replay", &[("replay", &id), ("error", &e)]);
                continue;
            }
            let path = self.dir.join(format!("{id}.json"));
            if let Err(e) = std::fs::remove_file(&path) {
                let shown = path.display();
                crate::log::warn(
                    "cannot delete a replay's file",
                    &[("path", &shown), ("error", &e)],
                );
            }
            self.jobs.lock().retain(|j| j.id != id);
            crate::log::info(
                "replay forgotten",
                &[("replay", &id), ("retention_ms", &retention_ms)],
            );
        }
    }

    /// One pacing step of one replay; its new state if it changed.
    fn step(
        &self,
        engine: &Engine,
        job: &ReplayJob,
        held: bool,
        rate: f64,
        elapsed_s: f64,
    ) -> Option<(ReplayState, Option<String>)> {
        let shards = engine.shard_count();
        let mut paces = self.paces.lock();
        let pace = paces.entry(job.id.clone()).or_insert_with(|| Pace {
            cursors: vec![None; shards],
            exhausted: vec![false; shards],
            ..Pace::default()
        });
        pace.throttled = held;
        if held {
            return None;
        }
        let mut budget = pace.grant(rate, elapsed_s);
        for k in 0..shards {
            if budget == 0 {
                break;
            }
            if pace.exhausted[k] {
                continue;
            }
            let step = ReviveStep {
                replay: Arc::from(job.id.as_str()),
                filter: job.filter(),
                cursor: pace.cursors[k].clone(),
                max_rows: budget,
            };
            match engine.revive(k, step) {
                Ok(revived) => {
                    budget -= revived.moved;
                    pace.spent(revived.moved);
                    pace.cursors[k] = revived.cursor;
                    pace.exhausted[k] = revived.exhausted;
                }
                Err(e) => {
                    crate::log::warn("replay step failed", &[("replay", &job.id), ("error", &e)]);
                    return None;
                }
            }
        }
        if pace.exhausted.iter().all(|e| *e) {
            return Some((ReplayState::Done, None));
        }
        let counts = engine.replay_counters(&job.id).ok()?;
        let since_resume = counts.since(job.resumed_at.unwrap_or_default());
        auto_pause(since_resume).map(|e| (ReplayState::Paused, Some(e)))
    }

    /// The pacer's change of a replay it stepped as `stepped`, unless an
    /// operator paused or resumed it meanwhile (their word stands).
    fn set_state(&self, stepped: &ReplayJob, state: ReplayState, error: Option<String>) {
        let id = &stepped.id;
        let mut jobs = self.jobs.lock();
        let Some(job) = jobs.iter_mut().find(|j| j.id == *id) else {
            return;
        };
        if job.state != stepped.state || job.resumed_at != stepped.resumed_at {
            return;
        }
        job.state = state;
        job.error = error;
        if state == ReplayState::Done {
            job.done_at_ms = Some(crate::runtime::wall_ms());
        }
        if let Err(e) = self.save(job) {
            crate::log::warn(
                "cannot store a replay's state",
                &[("replay", &id), ("error", &e)],
            );
        }
        crate::log::info("replay state", &[("replay", &id), ("state", &state.name())]);
        self.paces.lock().remove(id);
    }

    /// Writes a replay's file durably: a synced temporary file renamed over it.
    fn save(&self, job: &ReplayJob) -> Result<(), KeepError> {
        use std::io::Write as _;
        let write = || -> std::io::Result<()> {
            crate::synced_dir::create_all(&self.dir)?;
            let path = self.dir.join(format!("{}.json", job.id));
            let tmp = self.dir.join(format!("{}.json.tmp", job.id));
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&serde_json::to_vec_pretty(job).map_err(std::io::Error::other)?)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            crate::synced_dir::sync(&self.dir)
        };
        write().map_err(|source| KeepError::File {
            dir: self.dir.clone(),
            source,
        })
    }
}

/// Adds the replays whose files are in `dir` (none if there is no `dir`)
/// to `jobs`; a file that does not read or parse is logged and skipped.
/// A `.json.tmp` file is a write a crash cut short (its replay's file is
/// as it was before): it is deleted.
fn load_jobs(dir: &Path, jobs: &mut Vec<ReplayJob>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        entries => entries?,
    };
    for entry in entries {
        let path = entry?.path();
        if path.to_string_lossy().ends_with(".json.tmp") {
            if let Err(e) = std::fs::remove_file(&path) {
                let shown = path.display();
                crate::log::warn(
                    "cannot delete a replay's unfinished file",
                    &[("path", &shown), ("error", &e)],
                );
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(job) => jobs.push(job),
            Err(e) => crate::log::warn(
                "skipping an unreadable replay file",
                &[("path", &path.display()), ("error", &e)],
            ),
        }
    }
    Ok(())
}

/// Why a replay pauses itself, if it must: of its rows, at least
/// `AUTO_PAUSE_MIN_ROWS` died again, or were parked behind an open breaker,
/// and more than were delivered. Replaying into a sink that still fails only
/// refills the dead letters, or parks row after row until the breaker lets
/// a probe through.
fn auto_pause(counts: ReplayCounts) -> Option<String> {
    let ReplayCounts {
        delivered,
        dead_again,
        parked,
        ..
    } = counts;
    if dead_again >= AUTO_PAUSE_MIN_ROWS && dead_again > delivered {
        return Some(format!(
            "auto-paused: {dead_again} replayed deliveries dead-lettered again ({delivered} delivered); fix the sink and resume it"
        ));
    }
    if parked >= AUTO_PAUSE_MIN_ROWS && parked > delivered {
        return Some(format!(
            "auto-paused: replayed rows parked behind an open circuit breaker {parked} times ({delivered} delivered); fix the sink and resume it"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node that keeps `MAX_STORED_REPLAYS` replays refuses another
    /// (the same spec as a running one is still answered with it), and
    /// takes one again once one is forgotten.
    #[test]
    fn a_node_keeps_a_bounded_number_of_replays() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::test_support::one_source(
            dir.path(),
            crate::SinkConfig::http("http://127.0.0.1:9/"),
        );
        let engine = Engine::open(config).unwrap();
        let replays = Replays::new(dir.path());
        let (first, created) = replays.create(&engine, ReplaySpec::default()).unwrap();
        assert!(created);
        let done = ReplayJob {
            state: ReplayState::Done,
            ..first.clone()
        };
        replays.jobs.lock().resize(MAX_STORED_REPLAYS, done);
        replays.jobs.lock()[0] = first.clone();
        let other = ReplaySpec {
            tenant: Some("t".into()),
            ..ReplaySpec::default()
        };
        assert!(matches!(
            replays.create(&engine, other.clone()),
            Err(CreateError::TooMany)
        ));
        assert_eq!(
            replays.create(&engine, ReplaySpec::default()).unwrap(),
            (first, false)
        );
        replays.jobs.lock().pop();
        assert!(replays.create(&engine, other).unwrap().1);
        engine.shutdown();
    }

    /// Rows a pace moves in `seconds` of passes `pass_s` apart, each
    /// moving all it is granted of the `rows` left.
    fn moved(rate: f64, seconds: f64, pass_s: f64, rows: u64) -> u64 {
        let mut pace = Pace::default();
        let mut moved = 0;
        for _ in 0..(seconds / pass_s).round() as u64 {
            let step = pace.grant(rate, pass_s).min(rows - moved);
            pace.spent(step);
            moved += step;
        }
        moved
    }

    /// Scenarios 26 and 27, in virtual time: a replay moves its rate's
    /// worth of rows a second, however its passes are spaced (a pass later
    /// than a fifth of a second used to lose the rest: 84 a second at 100),
    /// and no burst after a stall or a time with nothing to move.
    #[test]
    fn a_replay_moves_its_rate_a_second_without_bursting() {
        for pass_s in [0.01, 0.05, 0.25] {
            let first_second = moved(100.0, 1.0, pass_s, 500);
            let two_seconds = moved(100.0, 2.0, pass_s, 500);
            assert!(
                (99..=100).contains(&first_second),
                "{pass_s}: {first_second}"
            );
            assert!(
                (199..=200).contains(&two_seconds),
                "{pass_s}: {two_seconds}"
            );
        }
        assert_eq!(moved(100.0, 10.0, 0.05, 500), 500, "all of them in time");
        assert_eq!(moved(1.0, 0.9, 0.1, 5), 0);
        assert_eq!(moved(1.0, 5.5, 0.1, 5), 5);
        let mut pace = Pace::default();
        assert_eq!(
            pace.grant(100.0, 10.0),
            101,
            "a second's worth after a stall"
        );
        let mut idle = Pace::default();
        for _ in 0..10 {
            idle.grant(100.0, 0.1);
        }
        assert_eq!(
            idle.grant(100.0, 0.1),
            21,
            "unspent: a fifth of a second's worth"
        );
    }

    /// The replays of a node's directory are loaded oldest first; a file
    /// a crash left half-written (`.json.tmp`) is deleted, and one that does
    /// not parse is skipped and left for the operator.
    #[test]
    fn replays_load_from_their_files_and_a_crashs_leftover_goes() {
        let dir = tempfile::tempdir().unwrap();
        let replays = dir.path().join("replays");
        std::fs::create_dir(&replays).unwrap();
        let job = |id: &str, created_at_ms| ReplayJob {
            id: id.into(),
            spec: ReplaySpec::default(),
            created_at_ms,
            matched: 3,
            state: ReplayState::Running,
            error: None,
            resumed_at: None,
            done_at_ms: None,
        };
        for job in [job("b", 2), job("a", 1)] {
            let file = replays.join(format!("{}.json", job.id));
            std::fs::write(file, serde_json::to_vec(&job).unwrap()).unwrap();
        }
        std::fs::write(replays.join("a.json.tmp"), b"{\"id\":").unwrap();
        std::fs::write(replays.join("broken.json"), b"{\"id\":").unwrap();
        let loaded = Replays::new(dir.path());
        assert_eq!(*loaded.jobs.lock(), [job("a", 1), job("b", 2)]);
        let mut left: Vec<_> = std::fs::read_dir(&replays)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["a.json", "b.json", "broken.json"]);
    }

    #[test]
    fn a_spec_written_before_hook_ids_reads_as_one_without() {
        let before: ReplaySpec =
            serde_json::from_str(r#"{"source_id":"a","tenant":null,"since_ms":5}"#).unwrap();
        let spec = ReplaySpec {
            source_id: Some("a".into()),
            since_ms: Some(5),
            ..ReplaySpec::default()
        };
        assert_eq!(before, spec);
        assert_eq!(
            serde_json::to_string(&spec).unwrap(),
            r#"{"source_id":"a","tenant":null,"since_ms":5}"#,
            "written as before while it names no hook"
        );
    }

    #[test]
    fn a_replay_pauses_on_rows_dead_again_or_parked_past_its_deliveries() {
        let counts = |delivered, dead_again, parked| ReplayCounts {
            moved: 500,
            delivered,
            dead_again,
            parked,
        };
        assert_eq!(auto_pause(counts(0, 99, 99)), None, "under the minimum");
        assert_eq!(auto_pause(counts(150, 100, 140)), None, "more delivered");
        let dead = auto_pause(counts(20, 100, 0)).unwrap();
        assert!(
            dead.starts_with(
                "auto-paused: 100 replayed deliveries dead-lettered again (20 delivered)"
            ),
            "{dead}"
        );
        let parked = auto_pause(counts(0, 5, 100)).unwrap();
        assert!(
            parked.contains("parked behind an open circuit breaker 100 times (0 delivered)"),
            "{parked}"
        );
    }
}
