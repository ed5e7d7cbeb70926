//! The core in virtual time against an in-memory due index: exact claims,
//! starts and store ops.

use super::*;
use crate::config::{Config, SinkConfig, SourceConfig, TenantLimitsConfig};
use crate::store::Hook;
use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroU16;

mod batches;
mod breakers;
mod outcome_events;
mod paused;
mod rates;
mod reload;
mod sink_retry;
mod sink_stats;
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
                        parked: false,
                    },
                    hook.clone(),
                ),
            );
        }
        seq
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
                }
                StoreOp::Hold { row, fields } => {
                    self.due.insert(
                        (fields.tenant.clone(), HELD_DUE_MS, *row),
                        fields.size_bytes,
                    );
                }
                // Rows only: the breakers are the core's own to check.
                StoreOp::Breaker(_) | StoreOp::Unparking { .. } | StoreOp::NoneParked => {}
            }
            ops.push(op);
        }
        ops
    }
}

impl DueIndex for Model {
    fn tenants(&mut self, out: &mut Vec<TenantId>) {
        out.extend(self.tenants.iter().cloned());
    }

    fn earliest_due_ms(&mut self, tenant: &TenantId, after: Option<&DueEntry>) -> Option<u64> {
        self.reads += 1;
        self.due
            .keys()
            .filter(|(t, at, row)| {
                t == tenant && after.is_none_or(|a| (*at, *row) > (a.due_at_ms, a.row))
            })
            .map(|(_, at, _)| *at)
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
        let page = self
            .due
            .iter()
            .filter(|((t, at, row), _)| {
                t == tenant
                    && *at <= now_ms
                    && after.is_none_or(|a| (*at, *row) > (a.due_at_ms, a.row))
            })
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

fn source(id: &str, tenant: &str, kinds: &[&str]) -> SourceConfig {
    SourceConfig::new(
        id,
        tenant,
        kinds.iter().map(|k| SinkConfig::of_kind(*k)).collect(),
    )
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

fn claimed_per_tenant(ops: &[StoreOp]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for op in ops {
        if let StoreOp::Claim { tenant, .. } = op {
            *out.entry(tenant.to_string()).or_default() += 1;
        }
    }
    out
}

fn config_with(sources: Vec<SourceConfig>) -> Config {
    let mut c = Config {
        sources,
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

#[test]
fn a_page_is_split_in_equal_shares_and_a_small_tenant_leaves_its_rest_to_others() {
    let config = config_with(vec![
        source("a", "big", &["t"]),
        source("b", "small", &["t"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..1_000 {
        m.add("big", "a", &["t"], 0);
    }
    for _ in 0..10 {
        m.add("small", "b", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    let ops = m.apply(&mut c);
    // Page 128: shares of 64; "small" takes its 10, "big" gets 64 + the 54 left.
    assert_eq!(
        claimed_per_tenant(&ops),
        BTreeMap::from([("big".to_string(), 118), ("small".to_string(), 10)])
    );
}

/// A scan reads the due index only for the tenants that may have rows due:
/// beside a thousand idle tenants, one tenant's commit costs the scan three
/// reads (its earliest due row, its page, its next row after the page),
/// where it once read every tenant, twice.
#[test]
fn a_scan_reads_only_the_tenants_that_may_have_rows_due() {
    let sources = (0..1_000)
        .map(|t| source(&format!("s{t}"), &format!("t{t}"), &["t"]))
        .collect();
    let mut c = core(&config_with(sources), BIG);
    let mut m = Model::default();
    for t in 0..1_000 {
        m.add(&format!("t{t}"), &format!("s{t}"), &["t"], 0);
    }
    let mut ok = |_: &Job| -> AttemptResult { Ok(()) };
    settle_at(&mut c, &mut m, 0, &mut ok);
    assert_eq!((c.stats().delivered, m.due.len()), (1_000, 0));
    m.reads = 0;
    m.add("t7", "s7", &["t"], 10);
    c.handle_committed_for(&Arc::from("t7"), 10);
    settle_at(&mut c, &mut m, 10, &mut ok);
    assert_eq!((c.stats().delivered, m.reads), (1_001, 3));
    // Rows written due for tenants not named: every tenant is read once.
    m.reads = 0;
    m.add("t9", "s9", &["t"], 20);
    c.handle_committed();
    settle_at(&mut c, &mut m, 20, &mut ok);
    assert_eq!((c.stats().delivered, m.reads), (1_002, 1_000 + 2));
}

/// A hint may be early, never late: rows that leave the index behind a
/// tenant's hint (dead-lettered with their source) leave the tenant in the
/// round robin until a scan reads the index, which then drops it, also
/// when that scan reads every tenant at once.
#[test]
fn a_tenant_whose_rows_left_the_index_leaves_the_round_robin_at_the_next_read() {
    let config = config_with(vec![source("a", "ta", &["t"]), source("b", "tb", &["t"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("ta", "a", &["t"], 100);
    c.handle_scan(0, &mut m);
    assert_eq!(c.poll_deadline(0), Some(100), "woken for ta's row");
    assert_eq!(
        c.handle_dead_letter_source(0, "a", FROM_START, ALL, &mut m),
        (1, None)
    );
    let _ = m.apply(&mut c);
    m.add("tb", "b", &["t"], 0);
    c.handle_committed();
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("tb".into(), 1)])
    );
    assert_eq!(c.poll_deadline(0), None, "nothing left to wake for");
}

#[test]
fn a_tenant_the_page_did_not_reach_goes_first_in_the_next_scan() {
    let mut config = config_with(vec![
        source("a", "ta", &["t"]),
        source("b", "tb", &["t"]),
        source("c", "tc", &["t"]),
    ]);
    config.dispatch.batch = 2;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("ta", "a", &["t"], 0);
        m.add("tb", "b", &["t"], 0);
        m.add("tc", "c", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("ta".into(), 1), ("tb".into(), 1)])
    );
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("ta".into(), 1), ("tc".into(), 1)])
    );
}

#[test]
fn a_tenant_at_its_window_is_skipped_by_the_scan_and_the_wake_up_until_an_outcome_frees_room() {
    let mut config = config_with(vec![
        source("a", "full", &["t"]),
        source("b", "free", &["t"]),
    ]);
    config.dispatch.tenants.insert(
        "full".into(),
        TenantLimitsConfig {
            max_inflight: Some(2),
            ..Default::default()
        },
    );
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..5 {
        m.add("full", "a", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("full".into(), 2)])
    );
    // "full" has 3 rows due but no room: no wake-up for it.
    assert!(!c.wants_scan(0));
    assert_eq!(
        c.poll_deadline(0),
        None,
        "nothing to wake for: no attempt runs, the due rows wait for room"
    );
    m.add("free", "b", &["t"], 0);
    c.handle_committed();
    c.handle_scan(0, &mut m);
    assert_eq!(
        claimed_per_tenant(&m.apply(&mut c)),
        BTreeMap::from([("free".into(), 1)])
    );
    let job = c.poll_job(0).expect("a job");
    let first_full = if &*job.key.tenant == "full" {
        job
    } else {
        c.poll_job(0).unwrap()
    };
    c.handle_outcome(5, first_full.id, Ok(()), TOOK);
    assert!(c.wants_scan(5), "freed room asks for a scan");
    c.handle_scan(5, &mut m);
    let ops = m.apply(&mut c);
    assert_eq!(
        claimed_per_tenant(&ops),
        BTreeMap::from([("full".into(), 1)])
    );
}

#[test]
fn slots_go_round_robin_across_tenants_then_across_a_tenants_keys() {
    let config = config_with(vec![
        source("a1", "ta", &["t"]),
        source("a2", "ta", &["t"]),
        source("b", "tb", &["t"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("ta", "a1", &["t"], 0);
        m.add("ta", "a2", &["t"], 0);
        m.add("tb", "b", &["t"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let order: Vec<String> = std::iter::from_fn(|| c.poll_job(0))
        .map(|j| format!("{}/{}", j.key.tenant, j.key.source_id))
        .collect();
    assert_eq!(
        order,
        ["ta/a1", "tb/b", "ta/a2", "tb/b", "ta/a1", "tb/b", "ta/a2", "ta/a1", "ta/a2"]
    );
}

#[test]
fn a_key_never_runs_more_than_sink_concurrency_and_the_shard_not_more_than_its_grant() {
    let mut config = config_with(vec![source("a", "t", &["x"]), source("b", "t", &["x"])]);
    config.dispatch.sink_concurrency = 2;
    let mut c = core(
        &config,
        Grant {
            concurrency: 3,
            ..BIG
        },
    );
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("t", "a", &["x"], 0);
        m.add("t", "b", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(jobs.len(), 3, "the shard's concurrency");
    c.handle_grant(Grant {
        concurrency: 100,
        ..BIG
    });
    let more: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(more.len(), 1, "each key is capped at 2");
    c.handle_outcome(1, jobs[0].id, Ok(()), TOOK);
    assert_eq!(
        c.poll_job(1).map(|j| j.key.source_id.clone()),
        Some(jobs[0].key.source_id.clone())
    );
}

#[test]
fn a_failure_reschedules_by_the_policy_and_a_permanent_error_dead_letters_with_its_attempt() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.base_ms = 100;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    m.add("t", "a", &["x"], 0);
    c.handle_scan(1_000, &mut m);
    let _ = m.apply(&mut c);
    let (j1, j2) = (c.poll_job(1_000).unwrap(), c.poll_job(1_000).unwrap());
    assert_eq!((j1.attempt, j1.deadline_at_ms), (1, 31_000));
    c.handle_outcome(
        1_010,
        j1.id,
        Err(AttemptFailure {
            class: FailureClass::Transient,
            message: "boom".into(),
        }),
        TOOK,
    );
    c.handle_outcome(
        1_020,
        j2.id,
        Err(AttemptFailure {
            class: FailureClass::Permanent,
            message: "gone".into(),
        }),
        TOOK,
    );
    let ops = m.apply(&mut c);
    assert_eq!(
        ops[0],
        StoreOp::Reschedule {
            row: j1.row,
            fields: RowFields {
                tenant: "t".into(),
                sink_type: "x".into(),
                attempts: 1,
                first_attempt_at_ms: 1_000,
                replay: None,
                size_bytes: 10,
                lane: None,
            },
            due_at_ms: 1_110,
            error: Some("boom".into())
        }
    );
    assert_eq!(
        ops[1],
        StoreOp::Dead {
            row: j2.row,
            fields: RowFields {
                tenant: "t".into(),
                sink_type: "x".into(),
                attempts: 1,
                first_attempt_at_ms: 1_000,
                replay: None,
                size_bytes: 10,
                lane: None,
            },
            dead_at_ms: 1_020,
            reason: "sink x: gone".into()
        }
    );
    assert_eq!(c.poll_deadline(1_020), Some(1_110), "woken for the retry");
    c.handle_scan(1_110, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!(
        c.poll_job(1_110).map(|j| (j.row, j.attempt)),
        Some((j1.row, 2))
    );
}

#[test]
fn an_attempt_past_its_deadline_fails_as_attempt_timeout_and_its_late_result_is_discarded() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.attempt_timeout_ms = 100;
    config.retry.max_attempts = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let job = c.poll_job(0).unwrap();
    c.handle_timers(99);
    assert_eq!(c.poll_abandoned(), None);
    c.handle_timers(100);
    assert_eq!(c.poll_abandoned(), Some(job.id));
    let ops = m.apply(&mut c);
    assert!(
        matches!(&ops[..], [StoreOp::Dead { reason, fields: RowFields { attempts: 1, .. }, .. }] if reason == "sink x: attempt_timeout: no result after 100 ms"),
        "{ops:?}"
    );
    c.handle_outcome(150, job.id, Ok(()), TOOK);
    assert!(
        m.apply(&mut c).is_empty(),
        "the late result changes nothing"
    );
    assert!(c.is_idle(150));
}

#[test]
fn rows_of_a_deleted_source_or_an_unbindable_sink_are_dead_lettered_with_attempts_unchanged() {
    let config = config_with(vec![source("a", "t", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "gone", &["x"], 0);
    m.add("t", "a", &["y"], 0);
    c.handle_scan(0, &mut m);
    let dead: Vec<(String, u32)> = m
        .apply(&mut c)
        .into_iter()
        .filter_map(|op| match op {
            StoreOp::Dead { reason, fields, .. } => Some((reason, fields.attempts)),
            _ => None,
        })
        .collect();
    assert_eq!(
        dead,
        vec![
            ("source_gone: gone".to_string(), 0),
            ("sink_gone: index 0, type y".to_string(), 0)
        ]
    );
    assert_eq!(c.stats().claimed, Usage::default());
    assert!(c.is_idle(0));
}

#[test]
fn draining_writes_queued_rows_back_as_they_were_and_claims_nothing_more() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.sink_concurrency = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "a", &["x"], 7);
    m.add("t", "a", &["x"], 7);
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    let running = c.poll_job(10).unwrap();
    c.handle_drain();
    let ops = m.apply(&mut c);
    assert!(
        matches!(
            &ops[..],
            [StoreOp::Reschedule {
                due_at_ms: 7,
                fields: RowFields { attempts: 0, .. },
                error: None,
                ..
            }]
        ),
        "{ops:?}"
    );
    assert!(!c.wants_scan(10));
    assert!(c.poll_job(10).is_none());
    c.handle_outcome(11, running.id, Ok(()), TOOK);
    assert_eq!(c.running(), 0);
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

/// Reloads `config` into the core, as the shard does.
fn reconfigure(c: &mut Core, config: &Config) {
    let catalog = Arc::new(Catalog::from_config(config));
    c.handle_reconfigure(config.dispatch.clone(), config.retry, catalog);
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

/// The key of tenant `t`'s source `source`, its sink at `sink_index` of type `sink_type`.
fn key_of(source: &str, sink_index: u16, sink_type: &str) -> SinkKey {
    SinkKey {
        tenant: Arc::from("t"),
        source_id: Arc::from(source),
        sink_index,
        sink_type: Arc::from(sink_type),
    }
}

/// The one sink key of `breaker_config`'s source.
fn breaker_key() -> SinkKey {
    key_of("a", 0, "x")
}

/// A core with one attempt slot over `rows` due rows of source "a".
fn breaker_setup(config: Config, rows: usize) -> (Core, Model) {
    let c = core(
        &config,
        Grant {
            concurrency: 1,
            ..BIG
        },
    );
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

#[test]
fn dead_letter_source_takes_only_that_sources_pending_rows_with_attempts_unchanged() {
    let config = config_with(vec![
        source("keep", "t", &["x"]),
        source("drop", "t", &["x", "y"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    m.add("t", "keep", &["x"], 5);
    m.add("t", "drop", &["x", "y"], 5);
    m.add("u", "drop", &["x", "y"], 9_999);
    let (count, next) = c.handle_dead_letter_source(10, "drop", FROM_START, ALL, &mut m);
    assert_eq!(count, 4, "due later counts too: every pending row");
    assert_eq!(next, None);
    let reasons: Vec<(String, u32)> = m
        .apply(&mut c)
        .into_iter()
        .filter_map(|op| match op {
            StoreOp::Dead { reason, fields, .. } => Some((reason, fields.attempts)),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, vec![("source_gone: drop".to_string(), 0); 4]);
    assert_eq!(m.rows.len(), 1, "the kept source's row is untouched");
    assert_eq!(c.stats().dead, 4);
}

/// The due index from its start, in one step.
const FROM_START: DueCursor = DueCursor {
    tenant: 0,
    after: None,
};
const ALL: usize = usize::MAX;

/// Dead-lettering a backlog in steps: each walks at most its entries (a
/// tenant with none due counts one) and the next goes on where it stopped,
/// so the steps take each of the source's rows once, and rows behind the
/// last step's place are left.
#[test]
fn dead_letter_source_goes_in_steps_of_at_most_its_entries() {
    let config = config_with(vec![
        source("keep", "t", &["x"]),
        source("drop", "u", &["x", "y"]),
    ]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for at in [5, 6, 7] {
        m.add("t", "keep", &["x"], at);
        m.add("u", "drop", &["x", "y"], at);
    }
    m.tenants.push(Arc::from("idle"));
    let mut steps = Vec::new();
    let mut from = Some(FROM_START);
    while let Some(at) = from {
        let (dead, next) = c.handle_dead_letter_source(10, "drop", at, 4, &mut m);
        let _ = m.apply(&mut c);
        steps.push((
            dead,
            next.as_ref()
                .map(|n| (n.tenant, n.after.clone().map(|e| e.row.seq))),
        ));
        from = next;
    }
    // t's 3 rows kept and its end (4 entries); u's first 4 rows; u's last
    // 2, its end and the idle tenant.
    assert_eq!(
        steps,
        vec![(0, Some((1, None))), (4, Some((1, Some(4)))), (2, None)]
    );
    assert_eq!(c.stats().dead, 6);
    assert_eq!(m.rows.len(), 3, "the kept source's rows are untouched");
}

/// A row whose record does not decode is quarantined and one whose hook
/// does not is dead-lettered, both at claim; the rest of the page runs.
#[test]
fn corrupt_rows_and_hooks_are_settled_at_claim() {
    let c = config_with(vec![source("s", "t", &["http"])]);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "s", &["http"], 0);
    }
    let row = |seq| RowId { seq, sink_index: 0 };
    m.corrupt_rows.insert(row(1));
    m.corrupt_hooks.insert(2);
    let mut core = core(&c, BIG);
    core.handle_scan(5, &mut m);
    let t: TenantId = Arc::from("t");
    let claim = |seq| StoreOp::Claim {
        row: row(seq),
        tenant: t.clone(),
        due_at_ms: 0,
        size_bytes: 10,
    };
    let fields = RowFields {
        tenant: t.clone(),
        sink_type: Arc::from("http"),
        attempts: 0,
        first_attempt_at_ms: 0,
        size_bytes: 10,
        replay: None,
        lane: None,
    };
    assert_eq!(
        m.apply(&mut core),
        vec![
            claim(1),
            StoreOp::Quarantine {
                row: row(1),
                tenant: t.clone(),
                dead_at_ms: 5,
            },
            claim(2),
            StoreOp::Dead {
                row: row(2),
                fields,
                dead_at_ms: 5,
                reason: "undecodable hook record".into(),
            },
            claim(3),
        ]
    );
    assert_eq!((core.stats().dead, core.stats().claimed.rows), (2, 1));
    assert_eq!(core.poll_job(5).map(|j| j.row), Some(row(3)));
}

/// A row with a second due key (a broken index) is claimed once: the
/// second key is dropped, and one attempt starts.
#[test]
fn a_duplicate_due_key_is_dropped_and_its_row_runs_once() {
    let c = config_with(vec![source("s", "t", &["http"])]);
    let mut m = Model::default();
    m.add("t", "s", &["http"], 0);
    let row = RowId {
        seq: 1,
        sink_index: 0,
    };
    let t: TenantId = Arc::from("t");
    m.due.insert((t.clone(), 3, row), 10);
    let mut core = core(&c, BIG);
    core.handle_scan(5, &mut m);
    let claim = |due_at_ms| StoreOp::Claim {
        row,
        tenant: t.clone(),
        due_at_ms,
        size_bytes: 10,
    };
    assert_eq!(m.apply(&mut core), vec![claim(0), claim(3)]);
    assert!(m.due.is_empty());
    assert_eq!(core.stats().claimed.rows, 1);
    assert_eq!(core.poll_job(5).map(|j| j.row), Some(row));
    assert!(core.poll_job(5).is_none());
}

/// Dead rows are counted by their kind of reason, as their stored reason
/// reads: a sink's permanent answer, attempts used up, a source gone, a
/// sink gone, and a record that does not decode.
#[test]
fn dead_rows_are_counted_by_their_kind_of_reason() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.retry.max_attempts = 1;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["x"], 0);
    }
    m.add("t", "gone", &["x"], 0);
    m.add("t", "a", &["y"], 0);
    m.add("t", "a", &["x"], 0);
    m.corrupt_rows.insert(RowId {
        seq: 6,
        sink_index: 0,
    });
    let permanent = AttemptFailure {
        class: FailureClass::Permanent,
        message: "permanent: HTTP status 410".into(),
    };
    let mut results = [
        Err(permanent.clone()),
        Err(permanent),
        fail(FailureClass::Transient),
    ]
    .into_iter();
    settle_at(&mut c, &mut m, 0, &mut |_| results.next().unwrap_or(Ok(())));
    let counted = c.stats().dead_by_reason;
    let kinds: Vec<(DeadReasonKind, u64)> = counted.iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(
        kinds,
        [
            (DeadReasonKind::Permanent, 2),
            (DeadReasonKind::MaxAttempts, 1),
            (DeadReasonKind::SourceGone, 1),
            (DeadReasonKind::SinkGone, 1),
            (DeadReasonKind::Undecodable, 1),
        ]
    );
    assert_eq!(c.stats().dead, 6);
}

/// A rebuilt core counts on from the old one's outcome counters, so the
/// shard's counters (and a `tick` waiting for rows to settle) never go back
/// after a rebuild.
#[test]
fn a_rebuilt_core_keeps_the_outcome_counters() {
    let config = config_with(vec![source("a", "t", &["x"])]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["x"], 0);
    }
    let mut results = [
        Ok(()),
        fail(FailureClass::Permanent),
        fail(FailureClass::Transient),
    ]
    .into_iter();
    settle_at(&mut c, &mut m, 0, &mut |_| results.next().unwrap_or(Ok(())));
    let before = c.stats();
    assert_eq!((before.delivered, before.dead, before.retried), (1, 1, 1));
    assert_eq!(c.rebuilt(10).stats().dead_by_reason, before.dead_by_reason);
    let rebuilt = c.rebuilt(10).stats();
    assert_eq!(
        (
            rebuilt.delivered,
            rebuilt.dead,
            rebuilt.retried,
            rebuilt.timed_out,
            rebuilt.parked
        ),
        (1, 1, 1, 0, 0)
    );
    assert_eq!(rebuilt.settled(), before.settled());
}

/// A core rebuilt while its predecessor's attempts still run (after a
/// panic or a failed store write) takes them on as its own: they hold the
/// key's `sink_concurrency` slots and their rows' claims, a result settles
/// its row as any attempt's would, and a deadline that passes fails the
/// attempt as `attempt_timeout`.
#[test]
fn a_rebuilt_core_takes_on_the_old_attempts_and_settles_them_by_their_results() {
    let mut config = config_with(vec![source("a", "t", &["x"])]);
    config.dispatch.sink_concurrency = 2;
    config.dispatch.attempt_timeout_ms = 1_000;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..4 {
        m.add("t", "a", &["x"], 0);
    }
    c.handle_scan(5, &mut m);
    let _ = m.apply(&mut c);
    let old: Vec<Job> = std::iter::from_fn(|| c.poll_job(5)).collect();
    assert_eq!(old.len(), 2, "the key's two slots");
    let running = c.running_attempts();
    let mut c = c.rebuilt(10);
    // The store after the rebuild: the queued rows due again, the running
    // ones held in flight and adopted.
    let running_rows: Vec<RowId> = old.iter().map(|j| j.row).collect();
    for row in m.rows.keys().filter(|r| !running_rows.contains(r)) {
        m.due.insert((Arc::from("t"), 10, *row), 10);
    }
    for attempt in running {
        c.adopt_straggler(attempt);
    }
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    assert_eq!((c.running(), c.stats().claimed.rows), (2, 4));
    assert!(c.poll_job(10).is_none(), "both slots are the old attempts'");

    c.handle_outcome(20, old[0].id, Ok(()), TOOK);
    assert_eq!(
        m.apply(&mut c),
        [StoreOp::Delivered {
            row: old[0].row,
            replay: None,
            lane: None
        }]
    );
    assert_eq!(c.stats().delivered, 1);
    let next = c.poll_job(20).expect("a slot is free");
    assert!(!running_rows.contains(&next.row), "a queued row starts");
    assert!(
        c.poll_job(20).is_none(),
        "one slot is still the old attempt's"
    );

    c.handle_timers(1_005);
    assert_eq!(
        c.poll_abandoned(),
        Some(old[1].id),
        "its worker may be stuck"
    );
    assert_eq!(
        m.apply(&mut c),
        [StoreOp::Reschedule {
            row: old[1].row,
            fields: RowFields {
                tenant: "t".into(),
                sink_type: "x".into(),
                attempts: 1,
                first_attempt_at_ms: 5,
                size_bytes: 10,
                replay: None,
                lane: None,
            },
            due_at_ms: 1_105,
            error: Some("attempt_timeout: no result after 1000 ms".into()),
        }]
    );
    assert_eq!(c.stats().timed_out, 1);
    c.handle_outcome(1_006, old[1].id, Ok(()), TOOK);
    assert!(m.apply(&mut c).is_empty(), "a late result changes nothing");
}
