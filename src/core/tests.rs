//! The core in virtual time against an in-memory due index (`Model`): exact
//! claims, starts and store ops. This module holds the index and the helpers;
//! each concept's tests are a module of their own.

use super::*;
use crate::config::{Config, SinkConfig, SourceConfig, TenantLimitsConfig};
use crate::store::Hook;
use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroU16;
use std::ops::Bound;

mod attempts;
mod batches;
mod breakers;
mod damaged_store;
mod dead_letters;
mod key_wake;
mod outcome_events;
mod pacing;
mod paused;
mod rates;
mod rebuild;
mod reload;
mod scan;
mod sink_retry;
mod sink_stats;
mod slot_shares;
mod slow_keys;
mod stalls;
mod unpark;
mod wake;

/// The due index and rows as plain maps; store ops are applied to it.
#[derive(Default)]
struct Model {
    due: BTreeMap<(TenantId, u64, RowId), u64>,
    rows: HashMap<RowId, (RowState, Arc<Hook>)>,
    tenants: Vec<TenantId>,
    next_seq: u64,
    /// Rows whose record, and hooks (by seq) whose record, do not decode.
    corrupt_rows: HashSet<RowId>,
    corrupt_hooks: HashSet<u64>,
    /// Reads of the due index (earliest due times and pages).
    reads: u64,
}

impl Model {
    /// Adds a hook for `source` (of `tenant`) with one row per sink type, due at `due_at_ms`.
    fn add(&mut self, tenant: &str, source: &str, sink_types: &[&str], due_at_ms: u64) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        let tenant: TenantId = Arc::from(tenant);
        if !self.tenants.contains(&tenant) {
            self.tenants.push(tenant.clone());
        }
        let hook = Arc::new(Hook {
            id: format!("h{seq}"),
            seq,
            tenant: tenant.clone(),
            source_id: Arc::from(source),
            received_at_ms: due_at_ms,
            content_type: None,
            dedupe_key: None,
            headers: vec![],
            body: vec![0; 10],
        });
        for (i, t) in sink_types.iter().enumerate() {
            let row = RowId {
                seq,
                sink_index: i as u16,
            };
            self.due.insert((tenant.clone(), due_at_ms, row), 10);
            self.rows.insert(
                row,
                (
                    RowState {
                        sink_type: Arc::from(*t),
                        attempts: 0,
                        first_attempt_at_ms: 0,
                        replay: None,
                        lane: None,
                        sink_places: None,
                        parked: false,
                        paced: false,
                    },
                    hook.clone(),
                ),
            );
        }
        seq
    }

    /// [`Model::add`] for a hook whose record keeps `places`, its sinks'.
    fn add_placed(
        &mut self,
        tenant: &str,
        source: &str,
        kinds: &[&str],
        places: &crate::store::record::SinkPlaces,
    ) {
        let seq = self.add(tenant, source, kinds, 0);
        for (_, (state, _)) in self.rows.iter_mut().filter(|(row, _)| row.seq == seq) {
            state.sink_places = Some(places.clone());
        }
    }

    /// Applies every op the core has, returning them.
    fn apply(&mut self, core: &mut Core) -> Vec<StoreOp> {
        let mut ops = Vec::new();
        while let Some(op) = core.poll_store_op() {
            match &op {
                StoreOp::Claim {
                    row,
                    tenant,
                    due_at_ms,
                    ..
                } => {
                    assert!(
                        self.due
                            .remove(&(tenant.clone(), *due_at_ms, *row))
                            .is_some(),
                        "claimed a row that was not due"
                    );
                }
                StoreOp::Delivered { row, .. }
                | StoreOp::Forget { row }
                | StoreOp::Dead { row, .. }
                | StoreOp::Quarantine { row, .. } => {
                    self.rows.remove(row);
                }
                StoreOp::Reschedule {
                    row,
                    fields,
                    due_at_ms,
                    ..
                }
                | StoreOp::Park {
                    row,
                    fields,
                    due_at_ms,
                } => {
                    self.due
                        .insert((fields.tenant.clone(), *due_at_ms, *row), fields.size_bytes);
                    let (state, _) = self.rows.get_mut(row).expect("a rescheduled row exists");
                    state.attempts = fields.attempts;
                    state.first_attempt_at_ms = fields.first_attempt_at_ms;
                    state.parked = matches!(op, StoreOp::Park { .. });
                    state.paced = matches!(&op, StoreOp::Reschedule { error: Some(e), .. } if e == PACED_ERROR);
                }
                StoreOp::Hold { row, fields, .. } => {
                    self.due.insert(
                        (fields.tenant.clone(), HELD_DUE_MS, *row),
                        fields.size_bytes,
                    );
                }
                // Rows only: the breakers are the core's own to check.
                StoreOp::Breaker { .. }
                | StoreOp::Unparking { .. }
                | StoreOp::NoneParked
                | StoreOp::PacedAt { .. } => {}
            }
            ops.push(op);
        }
        ops
    }
}

impl Model {
    /// The due entries of `tenant` after `after` (all of them without
    /// one), in due order.
    fn due_after<'a>(
        &'a self,
        tenant: &TenantId,
        after: Option<&DueEntry>,
    ) -> impl Iterator<Item = (&'a (TenantId, u64, RowId), &'a u64)> {
        let from = match after {
            Some(a) => Bound::Excluded((tenant.clone(), a.due_at_ms, a.row)),
            None => Bound::Included((tenant.clone(), 0, RowId::MIN)),
        };
        let tenant = tenant.clone();
        (self.due.range((from, Bound::Unbounded))).take_while(move |((t, ..), _)| *t == tenant)
    }
}

impl DueIndex for Model {
    fn tenants(&mut self, out: &mut Vec<TenantId>) {
        out.extend(self.tenants.iter().cloned());
    }

    fn earliest_due_ms(&mut self, tenant: &TenantId, after: Option<&DueEntry>) -> Option<u64> {
        self.reads += 1;
        self.due_after(tenant, after)
            .map(|((_, at, _), _)| *at)
            .next()
    }

    fn due_page(
        &mut self,
        tenant: &TenantId,
        now_ms: u64,
        after: Option<&DueEntry>,
        max_rows: usize,
        out: &mut Vec<DueEntry>,
    ) {
        self.reads += 1;
        let page = (self.due_after(tenant, after))
            .take_while(|((_, at, _), _)| *at <= now_ms)
            .take(max_rows)
            .map(|((t, at, row), size)| DueEntry {
                tenant: t.clone(),
                due_at_ms: *at,
                row: *row,
                size_bytes: *size,
            });
        out.extend(page);
    }

    fn load(&mut self, row: RowId) -> Loaded {
        match self.rows.get(&row) {
            Some(_) if self.corrupt_rows.contains(&row) => Loaded::RowCorrupt,
            Some((state, _)) if self.corrupt_hooks.contains(&row.seq) => Loaded::HookCorrupt {
                state: state.clone(),
            },
            Some((state, hook)) => Loaded::Row {
                state: state.clone(),
                hook: hook.clone(),
            },
            None => Loaded::RowMissing,
        }
    }
}

/// How long the tests' attempts take, as their workers would report it.
const TOOK: Duration = Duration::from_millis(3);

const BIG: Grant = Grant {
    max_inflight: 100_000,
    max_inflight_bytes: 1 << 40,
    concurrency: 1_000,
};

/// `BIG`, but the shard runs at most `concurrency` calls at once.
fn calls_at_once(concurrency: u64) -> Grant {
    Grant { concurrency, ..BIG }
}

fn source(id: &str, tenant: &str, kinds: &[&str]) -> SourceConfig {
    SourceConfig::new(
        id,
        tenant,
        kinds.iter().map(|k| SinkConfig::of_kind(*k)).collect(),
    )
}

/// Source `id` of `tenant` with one sink of type `x` at `rate` calls a
/// second (none: no rate).
fn rated_source(id: &str, tenant: &str, rate: Option<u32>) -> SourceConfig {
    let mut rated = source(id, tenant, &["x"]);
    rated.sinks[0].max_calls_per_s = rate;
    rated
}

/// Claims every row due at `now_ms`, scan after scan (the decisions
/// written before each, as the shell does).
fn claim_all(c: &mut Core, m: &mut Model, now_ms: u64) {
    let _ = m.apply(c);
    while c.wants_scan(now_ms) {
        c.handle_scan(now_ms, m);
        let _ = m.apply(c);
    }
}

/// The calls that start at `now_ms` (not answered), the rows due by then
/// claimed first.
fn start_all(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<Job> {
    claim_all(c, m, now_ms);
    std::iter::from_fn(|| c.poll_job(now_ms)).collect()
}

/// The rows still due, as (source, due time), in due order.
fn due_rows(m: &Model) -> Vec<(String, u64)> {
    (m.due.keys())
        .map(|(_, at, row)| (m.rows[row].1.source_id.to_string(), *at))
        .collect()
}

/// The reasons and attempts of the rows `ops` dead-letter, in order.
fn dead_reasons(ops: Vec<StoreOp>) -> Vec<(String, u32)> {
    (ops.into_iter())
        .filter_map(|op| match op {
            StoreOp::Dead { reason, fields, .. } => Some((reason, fields.attempts)),
            _ => None,
        })
        .collect()
}

impl Core {
    /// The next call, of one attempt: the sinks of these tests do not batch.
    fn poll_job(&mut self, now_ms: u64) -> Option<Job> {
        self.poll_call(now_ms).map(|call| match call {
            Call::One(job) => job,
            Call::Batch(jobs) => panic!("a batch of {} where no sink batches", jobs.len()),
        })
    }
}

fn core(config: &Config, grant: Grant) -> Core {
    let retry = RetryConfig {
        jitter: false,
        ..config.retry
    };
    Core::new(
        config.dispatch.clone(),
        retry,
        Arc::new(Catalog::from_config(config)),
        grant,
        0,
        1,
        1,
    )
}

/// Source `a` of tenant `t` with a sink of type `x` posting to each URL.
fn posting_to(urls: &[&str]) -> Config {
    let sinks = (urls.iter())
        .map(|url| SinkConfig {
            url: Some(url.to_string()),
            ..SinkConfig::of_kind("x")
        })
        .collect();
    config_with(vec![SourceConfig::new("a", "t", sinks)])
}

/// The places of source `a`'s sinks in `config`.
fn places_of(config: &Config) -> crate::store::record::SinkPlaces {
    let catalog = Catalog::from_config(config);
    catalog.source("a").unwrap().places.clone()
}

fn config_with(sources: Vec<SourceConfig>) -> Config {
    let mut c = Config {
        sources: sources.into(),
        ..Config::default()
    };
    c.dispatch.tenants.insert(
        "default".into(),
        TenantLimitsConfig {
            max_inflight: Some(100_000),
            max_inflight_bytes: Some(1 << 40),
            concurrency: Some(1_000),
            max_stored_bytes: None,
        },
    );
    c
}

/// Runs everything that can happen at `now_ms`: scans, and every attempt
/// started is answered at once by `sink`.
fn settle_at(
    c: &mut Core,
    m: &mut Model,
    now_ms: u64,
    sink: &mut dyn FnMut(&Job) -> AttemptResult,
) {
    loop {
        // As the shell does: decisions written before a scan reads the index.
        let _ = m.apply(c);
        if c.wants_scan(now_ms) {
            c.handle_scan(now_ms, m);
        }
        let _ = m.apply(c);
        let Some(job) = c.poll_job(now_ms) else {
            let _ = m.apply(c);
            if !c.wants_scan(now_ms) {
                return;
            }
            continue;
        };
        let result = sink(&job);
        c.handle_outcome(now_ms, job.id, result, TOOK);
    }
}

/// Claims every due row at `t_ms` and starts all of them; each fails,
/// which opens their keys' breakers (at one failure), and the rows, due
/// again at once (no backoff), are claimed and parked. Returns how many
/// started.
fn fail_every_row_and_park(c: &mut Core, m: &mut Model, t_ms: u64) -> usize {
    c.handle_scan(t_ms, m);
    let _ = m.apply(c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(t_ms)).collect();
    for job in &jobs {
        c.handle_outcome(t_ms, job.id, fail(FailureClass::Transient), TOOK);
    }
    settle_at(c, m, t_ms, &mut |_| panic!("nothing starts while open"));
    jobs.len()
}

/// Reloads `config` into the core at `now_ms`, as the shard does (its
/// changes noted from the core's catalog, as the engine notes them).
fn reconfigure(c: &mut Core, now_ms: u64, config: &Config) {
    let catalog = Arc::new(Catalog::from_config(config));
    catalog.note_changes_from(&c.catalog);
    c.handle_reconfigure(now_ms, config.dispatch.clone(), config.retry, catalog);
}

/// Source `a` (tenant `t`, one sink of type `x`) with these breaker
/// settings, retries at once and ten attempts.
fn breaker_config(failures: u32, open_ms: u64, max_open_ms: u64) -> Config {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.breaker_failures = failures;
    config.dispatch.breaker_open_ms = open_ms;
    config.dispatch.breaker_max_open_ms = max_open_ms;
    config.retry.base_ms = 0;
    config.retry.max_attempts = 10;
    config
}

/// The breaker changes the core reported since the last call.
fn breaker_events(c: &mut Core) -> Vec<BreakerEvent> {
    std::iter::from_fn(|| c.poll_breaker_event()).collect()
}

/// `key`'s breaker as the store keeps it open until `until_ms`, with
/// the spot `c`'s config gives its sink.
fn kept_open(c: &Core, key: SinkKey, until_ms: u64, opens: u32) -> OpenBreaker {
    let spot = c.catalog.spot_of(&key);
    OpenBreaker {
        key,
        until_ms,
        opens,
        spot,
    }
}

/// The key of tenant `t`'s source `source`, its sink at `sink_index` of type `sink_type`.
fn key_of(source: &str, sink_index: u16, sink_type: &str) -> SinkKey {
    SinkKey {
        tenant: Arc::from("t"),
        source_id: Arc::from(source),
        sink_index,
        sink_type: Arc::from(sink_type),
    }
}

/// `rows` rows of source `a`, held behind its open breaker as a previous
/// process left them.
fn rows_held(rows: usize) -> Model {
    let mut m = Model::default();
    for _ in 0..rows {
        m.add("t", "a", &["x"], 0);
    }
    let keys: Vec<_> = m.due.keys().cloned().collect();
    for (tenant, at, row) in keys {
        let size = m.due.remove(&(tenant.clone(), at, row)).unwrap();
        m.due.insert((tenant, HELD_DUE_MS, row), size);
    }
    m
}

/// A core with one attempt slot over `rows` due rows of source "a".
fn breaker_setup(config: Config, rows: usize) -> (Core, Model) {
    let c = core(&config, calls_at_once(1));
    let mut m = Model::default();
    for _ in 0..rows {
        m.add("t", "a", &["x"], 0);
    }
    (c, m)
}

fn fail(class: FailureClass) -> AttemptResult {
    // Worded as `SinkError` words it: a permanent error says so.
    let message = match class {
        FailureClass::Permanent => "permanent: down",
        _ => "down",
    };
    Err(AttemptFailure {
        class,
        message: message.into(),
    })
}

/// The due index from its start, in one step.
const FROM_START: DueCursor = DueCursor {
    tenant: 0,
    after: None,
};

const ALL: usize = usize::MAX;
