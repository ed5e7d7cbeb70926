//! The admin routes and `/metrics`, answered on worker threads so the
//! HTTP loop never waits on a store scan or a shard. Monitoring routes
//! (`WorkerRoute::is_monitoring`: bounded reads that machines poll on short
//! deadlines) have a worker and a queue of their own, so an operation that
//! takes seconds (a backup, a source's dead-lettering, a replay's count, a
//! claim fetched from its bucket) never delays a scrape or a pressure read.

use super::hook_status::hook_status;
use super::http::{Replier, Request, Response};
use super::routes::WorkerRoute;
use super::sinks::sinks;
use super::{dead_letters, metrics, replay_routes, NodeState};
use crate::config::{Config, ConfigError, Sources};
use crate::core::{TenantId, TenantStats};
use crate::runtime::{Engine, ShardTenants};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Requests each queue holds for its workers; more get 503 `admin_busy`.
pub const ADMIN_QUEUE: usize = 64;

/// Workers of the operations queue.
const OPERATION_WORKERS: usize = 2;
/// Workers of the monitoring queue.
const MONITORING_WORKERS: usize = 1;

pub struct AdminJob {
    pub route: WorkerRoute,
    pub request: Request,
    pub reply: Replier,
}

/// Where admin jobs are queued: one queue for monitoring, one for the
/// rest.
pub(super) struct AdminQueues {
    monitoring: Sender<AdminJob>,
    operations: Sender<AdminJob>,
}

/// The workers' ends of the queues, until `start_workers` takes them.
pub(super) struct AdminReceivers {
    monitoring: Receiver<AdminJob>,
    operations: Receiver<AdminJob>,
}

/// The two queues, `ADMIN_QUEUE` jobs each.
pub(super) fn admin_queues() -> (AdminQueues, AdminReceivers) {
    let (monitoring, monitoring_jobs) = crossbeam_channel::bounded(ADMIN_QUEUE);
    let (operations, operation_jobs) = crossbeam_channel::bounded(ADMIN_QUEUE);
    let queues = AdminQueues {
        monitoring,
        operations,
    };
    let receivers = AdminReceivers {
        monitoring: monitoring_jobs,
        operations: operation_jobs,
    };
    (queues, receivers)
}

impl AdminQueues {
    /// Queues `job` for its route's workers; a full queue answers it 503
    /// `admin_busy` at once.
    pub(super) fn submit(&self, job: AdminJob) {
        let queue = match job.route.is_monitoring() {
            true => &self.monitoring,
            false => &self.operations,
        };
        if let Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) = queue.try_send(job)
        {
            job.reply.send(Response::unavailable(
                "admin_busy",
                "too many admin requests are queued",
                1,
            ));
        }
    }
}

/// Starts the workers of both queues. They hold the node's state weakly:
/// once the node is dropped, its queues close and they exit.
pub(super) fn start_workers(state: &Arc<NodeState>, receivers: AdminReceivers) {
    let queues = [
        ("goad-monitor", MONITORING_WORKERS, receivers.monitoring),
        ("goad-admin", OPERATION_WORKERS, receivers.operations),
    ];
    for (name, workers, jobs) in queues {
        for n in 0..workers {
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn({
                    let (state, jobs) = (Arc::downgrade(state), jobs.clone());
                    move || serve_jobs(&state, &jobs)
                });
            if let Err(e) = spawned {
                crate::log::error("cannot start an admin worker", &[("error", &e)]);
            }
        }
    }
}

/// One worker: answers `jobs` until the queue closes or the node is gone.
fn serve_jobs(state: &Weak<NodeState>, jobs: &Receiver<AdminJob>) {
    while let Ok(job) = jobs.recv() {
        let Some(state) = state.upgrade() else {
            return;
        };
        let response = match state.engine() {
            Some(engine) => answer_caught(&state, engine, &job),
            None => Response::unavailable("not_ready", "the engine is still opening", 1),
        };
        job.reply.send(response);
    }
}

/// `answer`, with a panic (a bug in goad) answered 500 and logged, so the
/// worker lives on. Admin requests only read, or change state through the
/// engine's own calls, so a panic leaves nothing half-changed here.
fn answer_caught(state: &NodeState, engine: &Engine, job: &AdminJob) -> Response {
    crate::panics::catch(|| answer(state, engine, &job.route, &job.request)).unwrap_or_else(
        |panic| {
            crate::log::error(
                "an admin request panicked",
                &[("path", &job.request.path), ("panic", &panic)],
            );
            Response::error(500, "internal", &format!("the request failed: {panic}"))
        },
    )
}

fn answer(state: &NodeState, engine: &Engine, route: &WorkerRoute, request: &Request) -> Response {
    if !route.takes_query() {
        if let Err(refused) = known_params(request, &[]) {
            return refused;
        }
    }
    match route {
        WorkerRoute::Metrics => match metrics::render(engine, state) {
            Ok(text) => Response::text(200, "text/plain; version=0.0.4", text),
            Err(e) => store_error(&e),
        },
        WorkerRoute::Pressure => match engine.pressure() {
            Ok(p) => Response::json(
                200,
                &json!({"lag_ms": p.lag_ms, "window_full": p.window_full}),
            ),
            Err(e) => unavailable(&e),
        },
        WorkerRoute::Stats => stats(engine),
        WorkerRoute::DeadLetters => dead_letters::list(engine, request),
        WorkerRoute::DeadLetter(id) => dead_letters::show(engine, id),
        WorkerRoute::Hook(id) => hook_status(engine, id),
        WorkerRoute::Sinks => sinks(engine, request),
        WorkerRoute::Sources => super::sources::sources(&state.config_now(), request),
        WorkerRoute::PurgeDeadLetters => dead_letters::purge(engine, request),
        WorkerRoute::CreateReplay => replay_routes::create(state, engine, request),
        WorkerRoute::RedeemClaim(tenant, sha256) => match engine.redeem_claim(tenant, sha256) {
            Ok(Some(body)) => Response {
                status: 200,
                content_type: "application/octet-stream",
                headers: Vec::new(),
                body,
                error: None,
            },
            Ok(None) => Response::error(
                404,
                "unknown_claim",
                &format!("no claim {sha256:?} of tenant {tenant:?} (never checked in, or past its retention)"),
            ),
            Err(e) => Response::unavailable(
                "claim_check_unavailable",
                &format!("cannot read the claim: {e}"),
                1,
            ),
        },
        WorkerRoute::Replays => replay_routes::replays(state, engine, request),
        WorkerRoute::GetReplay(id) => replay_routes::replay(state, engine, id),
        WorkerRoute::ControlReplay(id, control) => {
            replay_routes::control(state, engine, id, *control)
        }
        WorkerRoute::DeadLetterSource(source_id) if !crate::config::is_id(source_id) => {
            let message = format!(
                "no source can have the id {source_id:?}: a source id is 1 to 128 letters, digits, '_' and '-'"
            );
            Response::error(404, "unknown_source", &message)
        }
        WorkerRoute::DeadLetterSource(source_id) => match engine.dead_letter_source(source_id) {
            Ok(count) => {
                crate::log::info(
                    "source dead-lettered",
                    &[("source", source_id), ("count", &count)],
                );
                Response::json(200, &json!({"count": count}))
            }
            Err(e) => unavailable(&e),
        },
        WorkerRoute::WakeSink(source_id, index) => super::wake::wake_sink(engine, source_id, index),
        WorkerRoute::Reload => reload(state, engine),
        WorkerRoute::Backup => super::backup::backup(engine, request),
        WorkerRoute::Drain(set) => {
            super::drain::drain(&state.drain, engine, &state.config_now(), *set)
        }
    }
}

pub(super) fn store_error(e: &crate::store::StoreError) -> Response {
    Response::unavailable("store_unavailable", &e.to_string(), 1)
}

pub(super) fn unavailable(e: &crate::runtime::Unavailable) -> Response {
    Response::unavailable("dispatch_unavailable", &e.to_string(), 1)
}

fn stats(engine: &Engine) -> Response {
    let per_tenant = match engine.tenant_stats() {
        Ok(s) => s,
        Err(e) => return unavailable(&e),
    };
    match shards_stats(engine) {
        Ok(shards) => {
            let tenants = tenants_stats(engine, &per_tenant);
            Response::json(200, &json!({"shards": shards, "tenants": tenants}))
        }
        Err(e) => store_error(&e),
    }
}

/// `/v1/stats`' shards: each one's counters, and what its store holds.
fn shards_stats(engine: &Engine) -> Result<Vec<Value>, crate::store::StoreError> {
    let due = engine.due_counts()?;
    let used = engine.store_used_bytes()?;
    let lane_members = engine.lane_member_counts()?;
    let limits = engine.store_ingest_limit_bytes();
    let disk_available = engine.store_disk_available_bytes();
    let shards = engine
        .stats()
        .iter()
        .enumerate()
        .map(|(k, s)| {
            json!({
                "shard": k,
                "due": due[k],
                "lane_members": lane_members[k],
                "claimed": s.core.claimed.rows,
                "claimed_bytes": s.core.claimed.bytes,
                "running": s.core.running,
                "calls": s.core.calls,
                "queued": s.core.queued,
                "parked": s.core.parked,
                "held": s.core.held,
                "breakers_open": s.core.breakers_open,
                "breaker_opens": s.breaker_opens,
                "breaker_closes": s.breaker_closes,
                "window_full": s.window_full,
                "commits": s.commits,
                "group_commits": s.group_commits,
                "duplicates": s.duplicates,
                "delivered": s.core.delivered,
                "retried": s.core.retried,
                "dead": s.core.dead,
                "dead_by_reason": s.core.dead_by_reason,
                "dead_expired": s.dead_expired,
                "abandoned_workers": s.abandoned_workers,
                "restarts": s.restarts,
                "restarting": s.restarting,
                "store_failing": s.store_failing,
                "store_used_bytes": used[k],
                "store_ingest_limit_bytes": limits[k],
                "store_disk_available_bytes": disk_available[k],
            })
        })
        .collect();
    Ok(shards)
}

/// `/v1/stats`' tenants: each tenant of each shard that has rows due,
/// stored bytes or rows claimed, by name.
fn tenants_stats(engine: &Engine, per_tenant: &[ShardTenants]) -> Vec<Value> {
    let mut tenants = Vec::new();
    for shard in per_tenant {
        let (due, stored_bytes) = (by_name(&shard.due), by_name(&shard.stored_bytes));
        let core: HashMap<&str, &TenantStats> =
            shard.tenants.iter().map(|t| (&*t.tenant, t)).collect();
        let mut names: Vec<&str> = (due.keys().chain(stored_bytes.keys()))
            .chain(core.keys())
            .copied()
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let of = |counts: &HashMap<&str, u64>| counts.get(name).copied().unwrap_or(0);
            let core = core.get(name);
            tenants.push(json!({
                "tenant": name,
                "shard": shard.shard,
                "due": of(&due),
                "stored_bytes": of(&stored_bytes),
                "max_stored_bytes": engine.tenant_limits(name).max_stored_bytes,
                "claimed": core.map_or(0, |t| t.claimed_rows),
                "running": core.map_or(0, |t| t.running),
                "parked": core.map_or(0, |t| t.parked),
                "breakers_open": core.map_or(0, |t| t.breakers_open),
            }));
        }
    }
    tenants
}

/// Per-tenant counts by tenant name.
fn by_name(pairs: &[(TenantId, u64)]) -> HashMap<&str, u64> {
    pairs.iter().map(|(t, n)| (&**t, *n)).collect()
}

/// 400 `unknown_parameter` for a query parameter the route does not take:
/// a misspelt filter (`?source=` for `?source_id=`) would otherwise match
/// every row, and a purge delete them all; 400 `repeated_parameter` for
/// one given twice, of which the route would take the first alone.
pub(super) fn known_params(request: &Request, known: &[&str]) -> Result<(), Response> {
    if let Some(name) = request.unknown_query_param(known) {
        let takes = match known {
            [] => "none".to_string(),
            _ => known.join(", "),
        };
        let message = format!("no query parameter {name:?} here; this route takes {takes}");
        return Err(Response::error(400, "unknown_parameter", &message));
    }
    if let Some(name) = request.repeated_query_param() {
        let message = format!("query parameter {name:?} is given more than once; give it once");
        return Err(Response::error(400, "repeated_parameter", &message));
    }
    Ok(())
}

/// Keys whose new value `reload` applies without a restart: these, and
/// every key of the sections of [`LIVE_SECTIONS`].
const LIVE_KEYS: &[&str] = &["admin_token_env", "sources"];

/// Sections whose every key `reload` applies without a restart (each
/// applies to what starts after it: a claim, an attempt, a retry decision).
const LIVE_SECTIONS: &[&str] = &[
    "dispatch",
    "retry",
    "replay",
    "egress",
    "metrics",
    "notifications",
];

/// Takes `new`'s keys of [`LIVE_KEYS`] and [`LIVE_SECTIONS`] into the
/// node's `current` config (the others keep their running values until a
/// restart).
fn adopt_live_keys(current: &mut Config, new: &Config) {
    current.admin_token_env = new.admin_token_env.clone();
    current.sources = new.sources.clone();
    current.dispatch = new.dispatch.clone();
    current.retry = new.retry;
    current.replay = new.replay.clone();
    current.egress = new.egress.clone();
    current.metrics = new.metrics.clone();
    current.notifications = new.notifications.clone();
}

/// Whether a changed dotted key applies at a reload.
fn is_live(key: &str) -> bool {
    LIVE_KEYS.contains(&key)
        || (key.split_once('.')).is_some_and(|(section, _)| LIVE_SECTIONS.contains(&section))
}

/// The dotted keys whose values differ, in order (tables are compared one
/// level down; `sources` and `dispatch.tenants` whole).
fn changed_keys(old: &Config, new: &Config) -> Vec<String> {
    // The sources are compared as they are: turned into JSON with the rest,
    // 100,000 of them took seconds.
    let settings = |config: &Config| {
        let without_sources = Config {
            sources: Sources::default(),
            ..config.clone()
        };
        serde_json::to_value(without_sources).expect("configs serialize")
    };
    let mut changed = Vec::new();
    if old.sources != new.sources {
        changed.push("sources".to_string());
    }
    let (Value::Object(old), Value::Object(new)) = (settings(old), settings(new)) else {
        return changed;
    };
    for (key, old_value) in &old {
        let new_value = &new[key];
        match (old_value, new_value) {
            (Value::Object(a), Value::Object(b)) => {
                for (sub, a_value) in a {
                    if *a_value != b[sub] {
                        changed.push(format!("{key}.{sub}"));
                    }
                }
            }
            (a, b) if a != b => changed.push(key.clone()),
            _ => {}
        }
    }
    changed.sort();
    changed
}

/// What a reload changed: keys applied now, and keys that changed in the
/// file but take effect only at the next start.
pub(super) struct Reloaded {
    pub applied: Vec<String>,
    pub restart_required: Vec<String>,
}

/// Why a reload changed nothing.
#[derive(Debug)]
pub(super) enum ReloadError {
    /// The node runs on embedded defaults: there is no file to re-read.
    NoConfigFile,
    /// The file does not load or validate, or a file it names (a TLS
    /// certificate) does not; the error names the key.
    Invalid(ConfigError),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoConfigFile => {
                f.write_str("the node runs on embedded defaults; start it with --config to reload")
            }
            ReloadError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl From<ConfigError> for ReloadError {
    fn from(e: ConfigError) -> ReloadError {
        ReloadError::Invalid(e)
    }
}

impl std::error::Error for ReloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReloadError::NoConfigFile => None,
            ReloadError::Invalid(e) => Some(e),
        }
    }
}

fn reload(state: &NodeState, engine: &Engine) -> Response {
    match reload_config(state, engine) {
        Ok(done) => Response::json(
            200,
            &json!({"applied": done.applied, "restart_required": done.restart_required}),
        ),
        Err(e @ ReloadError::NoConfigFile) => {
            Response::error(409, "no_config_file", &e.to_string())
        }
        Err(e @ ReloadError::Invalid(_)) => Response::error(400, "invalid_config", &e.to_string()),
    }
}

/// Re-reads the config file and applies its live keys (`POST /v1/reload`,
/// SIGHUP); logs what it applied. One reload at a time, each reading the
/// file under the lock: otherwise one that read the file before an edit
/// could apply after one that read it since, and leave the node on the
/// older config.
pub(super) fn reload_config(state: &NodeState, engine: &Engine) -> Result<Reloaded, ReloadError> {
    let _one_at_a_time = state.reloading.lock();
    if let Some(systemd) = &state.systemd {
        systemd.reloading();
    }
    let reloaded = apply_config_file(state, engine);
    super::free_memory::give_back();
    if let Some(systemd) = &state.systemd {
        systemd.ready(&match &reloaded {
            Ok(_) => "serving: config reloaded".to_string(),
            Err(e) => format!("serving: config reload failed: {e}"),
        });
    }
    match &reloaded {
        Ok(_) => state.reloads.applied(),
        Err(ReloadError::Invalid(_)) => state.reloads.failed(),
        Err(ReloadError::NoConfigFile) => {}
    }
    reloaded
}

/// The body of [`reload_config`], under its lock.
fn apply_config_file(state: &NodeState, engine: &Engine) -> Result<Reloaded, ReloadError> {
    let path = state
        .config_path
        .as_ref()
        .ok_or(ReloadError::NoConfigFile)?;
    let new = Config::load_with_sinks(path, &engine.host_sink_types())?;
    let tokens = super::auth::Tokens::from_config(&new)?;
    if tokens.admin.is_none() && !state.listens_on_loopback && !state.allow_open_admin {
        let rule = format!(
            "set: this node listens on {} (beyond loopback) and was started without --allow-open-admin, so no reload opens its admin API",
            state.config.read().listen
        );
        return Err(crate::config::invalid("admin_token_env", rule, "absent").into());
    }
    let tokens = tokens.keep_state_of(&state.tokens.read());
    // A front that serves HTTPS and goes on doing so takes the files again
    // (a renewed certificate); turning TLS on or off takes a restart.
    let renewed_tls = match &state.tls {
        Some(_) => super::http::tls::from_config(&new.http)?,
        None => None,
    };
    // Only a reload writes the config, one at a time: it is read while the
    // keys are compared and the engine reconfigured (seconds with 100,000
    // sources), and written after, so that a scrape of the metrics or a
    // listing of the sources does not wait out the reload.
    let changed = changed_keys(&state.config.read(), &new);
    engine.reconfigure(&new)?;
    let mut current = state.config.write();
    adopt_live_keys(&mut current, &new);
    super::open_files::warn_if_short(&current, engine.sink_connections_bound());
    state.notifier.configure(&new.notifications);
    tokens.fetch_stale_keys();
    *state.tokens.write() = tokens;
    let tls_renewed = match (&state.tls, renewed_tls) {
        (Some(shared), Some(renewed)) => {
            *shared.write() = renewed;
            current.http.tls_cert_file = new.http.tls_cert_file.clone();
            current.http.tls_key_file = new.http.tls_key_file.clone();
            current.http.tls_client_ca_file = new.http.tls_client_ca_file.clone();
            crate::log::info("TLS certificate reloaded; new connections use it", &[]);
            true
        }
        _ => false,
    };
    let (applied, restart_required): (Vec<String>, Vec<String>) = changed
        .into_iter()
        .partition(|k| is_live(k) || (tls_renewed && k.starts_with("http.tls_")));
    crate::log::info(
        "config reloaded",
        &[
            ("applied", &applied.join(",")),
            ("restart_required", &restart_required.join(",")),
        ],
    );
    drop(current);
    super::log_config_warnings(&new, engine);
    state.warn_if_admin_open();
    Ok(Reloaded {
        applied,
        restart_required,
    })
}

/// SIGHUP: reload as `POST /v1/reload` does, on a thread of its own (the
/// HTTP loop does not wait on it), and log what came of it.
pub(super) fn reload_on_hangup(state: &Arc<NodeState>) {
    let state = state.clone();
    let spawned = std::thread::Builder::new()
        .name("goad-reload".into())
        .spawn(move || {
            let Some(engine) = state.engine() else {
                crate::log::warn("SIGHUP before the engine is open; nothing reloaded", &[]);
                return;
            };
            if let Err(e) = reload_config(&state, engine) {
                crate::log::error("config reload failed", &[("error", &e)]);
            }
        });
    if let Err(e) = spawned {
        crate::log::error(
            "cannot start a thread to reload the config",
            &[("error", &e)],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_retry_and_replay_keys_apply_at_a_reload_and_the_rest_at_a_start() {
        for key in [
            "admin_token_env",
            "sources",
            "dispatch.batch",
            "dispatch.max_inflight",
            "dispatch.attempt_timeout_ms",
            "dispatch.breaker_open_ms",
            "dispatch.tenants",
            "retry.max_attempts",
            "retry.max_elapsed_ms",
            "replay.rate",
            "egress.deny_private_addresses",
            "metrics.per_sink",
            "notifications.source",
        ] {
            assert!(is_live(key), "{key}");
        }
        for key in [
            "shards",
            "pin_shards",
            "data_dir",
            "listen",
            "max_shard_bytes",
            "min_free_disk_bytes",
            "http.read_timeout_ms",
            "dead_letters.retention_ms",
            "claim_check.dir",
            "dispatchx.batch",
        ] {
            assert!(!is_live(key), "{key}");
        }
    }

    /// Every live key and section is taken into the node's config: one
    /// left out would run on while the next reload named it changed again.
    #[test]
    fn a_reload_takes_every_live_key_and_section_and_nothing_else() {
        let old = Config::default();
        let mut new = Config {
            admin_token_env: Some("T".into()),
            shards: 3,
            ..Config::default()
        };
        new.sources
            .push(crate::config::SourceConfig::new("ops", "t", vec![]));
        new.dispatch.batch = 7;
        new.retry.max_attempts = 3;
        new.replay.rate = 5;
        new.egress.deny_private_addresses = true;
        new.metrics.per_sink = crate::config::PerSinkMetrics::Off;
        new.notifications.source = Some("ops".into());
        let value = |c: &Config| serde_json::to_value(c).unwrap();
        let (before, wanted) = (value(&old), value(&new));
        let live = LIVE_KEYS.iter().chain(LIVE_SECTIONS);
        for key in live.clone() {
            assert_ne!(before[key], wanted[key], "the test changes {key}");
        }
        let mut current = old.clone();
        adopt_live_keys(&mut current, &new);
        let after = value(&current);
        for key in live {
            assert_eq!(after[key], wanted[key], "{key} taken");
        }
        assert_eq!(after["shards"], before["shards"], "a restart key kept");
    }

    #[test]
    fn changed_keys_name_the_dotted_keys_that_differ() {
        let old = Config::default();
        let mut new = Config::default();
        new.dispatch.concurrency = 9;
        new.http.read_timeout_ms = 5;
        new.shards = 3;
        assert_eq!(
            changed_keys(&old, &new),
            vec!["dispatch.concurrency", "http.read_timeout_ms", "shards"]
        );
        new.sources
            .push(crate::config::SourceConfig::new("a", "t", vec![]));
        let changed = changed_keys(&old, &new);
        assert_eq!(changed[3..], ["sources"]);
        let mut same = new.clone();
        same.sources = vec![crate::config::SourceConfig::new("a", "t", vec![])].into();
        assert_eq!(changed_keys(&same, &new), Vec::<String>::new());
    }
}
