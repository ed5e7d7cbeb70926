//! Helpers shared by the integration tests: configs, Rust sinks, and
//! waiting on a condition with a deadline.
#![allow(dead_code)]

pub mod awaiting;
pub mod http;
pub mod raw;

use goad::config::{SourceConfig, TenantLimitsConfig};
use goad::demo::receiver::{Receiver, Reply};
use goad::store::ShardStore;
use goad::{Config, Delivery, Engine, RowView, Sink, SinkConfig, SinkError};
use heed::types::Bytes;
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The test keys and certificates (`tests/fixtures/README.md` says how
/// each was made).
pub fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One shard, the reference test policy: retry base 0, 10 attempts, no jitter.
pub fn config(dir: &Path) -> Config {
    let mut c = Config {
        data_dir: dir.to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    c.retry.base_ms = 0;
    c.retry.max_attempts = 10;
    c.retry.jitter = false;
    c.dispatch.breaker_failures = 0;
    c
}

/// `config(dir)` with one source `s` of tenant `t` delivering over HTTP to `url`.
pub fn config_with_http_sink(dir: &Path, url: &str) -> Config {
    let mut c = config(dir);
    c.sources
        .push(source("s", "t", vec![SinkConfig::http(url.to_string())]));
    c
}

/// A Google service-account key file (as `gcloud iam service-accounts keys
/// create` writes one) of the test key, for `goad@p.iam.gserviceaccount.com`,
/// whose token endpoint is `token_uri`.
pub fn service_account_key_file(token_uri: &str) -> serde_json::Value {
    let pem = std::fs::read_to_string(fixtures().join("google-service-account-test-key.pem"));
    serde_json::json!({
        "type": "service_account",
        "project_id": "p",
        "private_key_id": "key-1",
        "private_key": pem.unwrap(),
        "client_email": "goad@p.iam.gserviceaccount.com",
        "token_uri": token_uri,
    })
}

pub fn source(id: &str, tenant: &str, sinks: Vec<SinkConfig>) -> SourceConfig {
    SourceConfig::new(id, tenant, sinks)
}

/// Source `id` of `tenant` with one sink of each of `kinds` (host sinks).
pub fn source_of_kinds(id: &str, tenant: &str, kinds: &[&str]) -> SourceConfig {
    let sinks = kinds.iter().map(|k| SinkConfig::of_kind(*k)).collect();
    source(id, tenant, sinks)
}

pub fn tenant_limits(max_inflight: u32, concurrency: u32) -> TenantLimitsConfig {
    TenantLimitsConfig {
        max_inflight: Some(max_inflight),
        concurrency: Some(concurrency),
        ..TenantLimitsConfig::default()
    }
}

/// A Rust sink from a closure.
pub struct FnSink<F>(pub F);

impl<F: Fn(&Delivery<'_>) -> Result<(), SinkError> + Send + Sync + 'static> Sink for FnSink<F> {
    fn deliver(&self, d: &Delivery<'_>) -> Result<(), SinkError> {
        (self.0)(d)
    }
}

pub fn sink(
    f: impl Fn(&Delivery<'_>) -> Result<(), SinkError> + Send + Sync + 'static,
) -> Arc<dyn Sink> {
    Arc::new(FnSink(f))
}

/// A sink that counts its calls and fails the first `failures` of them.
pub fn failing_first(failures: u32) -> (Arc<dyn Sink>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let s = sink(move |_| {
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= failures {
            Err(SinkError::transient(std::io::Error::other(format!(
                "failure {n}"
            ))))
        } else {
            Ok(())
        }
    });
    (s, calls)
}

/// A sink that takes everything and counts its calls.
pub fn counting_sink() -> (Arc<dyn Sink>, Arc<AtomicU32>) {
    failing_first(0)
}

/// The lines a child's pipe writes, read on a thread of their own.
pub fn lines_of(pipe: impl std::io::Read + Send + 'static) -> crossbeam_channel::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Starts this test binary again as a child that runs only the test `role`,
/// with `env` set, kills it (SIGKILL) once `kill_at` holds for the number
/// of lines beginning `ACK ` it has printed (asked at each such line), and
/// returns what follows `ACK ` on every such line it printed, those still
/// unread at the kill too.
pub fn acks_until_killed(
    role: &str,
    env: &[(&str, String)],
    mut kill_at: impl FnMut(usize) -> bool,
) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", role, "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the child exited early").unwrap();
        if let Some(ack) = line.strip_prefix("ACK ") {
            acked.push(ack.to_string());
            if kill_at(acked.len()) {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Acknowledgements printed before the kill that were not read yet.
    for line in lines.map_while(Result::ok) {
        if let Some(ack) = line.strip_prefix("ACK ") {
            acked.push(ack.to_string());
        }
    }
    acked
}

/// Starts this test binary again as a child that runs only the test `role`,
/// with `env` set, and waits for it to pass; a failure shows its output.
pub fn run_role(role: &str, env: &[(&str, String)]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", role, "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{role} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A crash test's child at work: commits forever from `threads` threads,
/// thread `t` to source `s{t}` one hook at a time with `pause` between,
/// hook `i` (from `from` on) with body `body(t, i)` in lane
/// `x-key: i % keys`, printing `ACK <id> <t> <i>` for each acknowledged
/// hook.
pub fn commit_and_ack_forever(
    engine: &Engine,
    threads: u64,
    from: u64,
    keys: u64,
    pause: Duration,
    body: impl Fn(u64, u64) -> Vec<u8> + Sync,
) {
    use std::io::Write;
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (out, body) = (&out, &body);
            scope.spawn(move || {
                for i in from.. {
                    let hook = goad::NewHook {
                        headers: vec![("x-key".into(), (i % keys).to_string())],
                        ..goad::NewHook::new(format!("s{t}"), body(t, i))
                    };
                    let id = engine.commit(hook).unwrap();
                    writeln!(out.lock().unwrap(), "ACK {id} {t} {i}").unwrap();
                    std::thread::park_timeout(pause);
                }
            });
        }
    });
}

/// Checks that each lane's hooks, committed as `commit_and_ack_forever`
/// commits them (thread `t`'s hook `i`, body `t-i-…`, in lane
/// `x-key: i % keys`), were first delivered in commit order, given each
/// delivery's hook id and body in the order delivered; returns how many
/// lanes were delivered.
pub fn assert_lanes_first_in_commit_order<'a>(
    deliveries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    keys: u64,
) -> u64 {
    let mut first_seen = std::collections::HashSet::new();
    let mut last_in_lane = std::collections::HashMap::new();
    for (id, body) in deliveries {
        if !first_seen.insert(id) {
            continue;
        }
        let body = String::from_utf8_lossy(body);
        let mut numbers = body.split('-').map(|n| n.parse::<u64>().unwrap());
        let (t, i) = (numbers.next().unwrap(), numbers.next().unwrap());
        if let Some(last) = last_in_lane.insert((t, i % keys), i) {
            assert!(
                last < i,
                "lane {t}/{}: hook {i} first delivered after hook {last}",
                i % keys
            );
        }
    }
    last_in_lane.len() as u64
}

/// Waits for `cond` until `within` passes; panics naming `what` if it never holds.
pub fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::yield_now();
        std::thread::park_timeout(Duration::from_millis(2));
    }
}

/// Checks that an attempt ended by its deadline: its `error` is one of
/// `errors` (the sink's own failure at the deadline, and the shard's
/// `attempt_timeout`: which comes first is a race), and no worker stays
/// stuck in it.
pub fn assert_ended_by_its_deadline(engine: &Engine, error: &str, errors: [&str; 2]) {
    assert!(errors.contains(&error), "{error}");
    wait_until("no worker stuck", Duration::from_secs(5), || {
        engine.stats()[0].abandoned_workers == 0
    });
}

pub fn rows(engine: &Engine) -> Vec<RowView> {
    engine.rows().expect("rows")
}

pub fn dead(engine: &Engine) -> Vec<RowView> {
    rows(engine)
        .into_iter()
        .filter(|r| r.record.status == goad::RowStatus::Dead)
        .collect()
}

/// Commits one hook to each of two sources of tenant `acme`, `a` delivering
/// to `sink_a` and `b` to `sink_b`, with at most two attempts a row; waits
/// until both rows are dead-lettered and returns their attempts and
/// reasons, sorted.
pub fn dead_within_two_attempts(
    dir: &Path,
    sink_a: SinkConfig,
    sink_b: SinkConfig,
) -> Vec<(u32, String)> {
    let mut c = config(dir);
    c.retry.max_attempts = 2;
    c.sources.push(source("a", "acme", vec![sink_a]));
    c.sources.push(source("b", "acme", vec![sink_b]));
    let engine = Engine::open(c).unwrap();
    engine.commit(goad::NewHook::new("a", "x")).unwrap();
    engine.commit(goad::NewHook::new("b", "x")).unwrap();
    wait_until("both rows dead-lettered", Duration::from_secs(20), || {
        engine.tick().unwrap();
        dead(&engine).len() == 2
    });
    dead_attempts_and_reasons(&engine)
}

/// Asserts the two rows of [`dead_within_two_attempts`] for a sink that
/// refused a message over `max_message_bytes` 100 at once and one whose
/// credentials were missing (retried): `missing` is that failure's text.
pub fn assert_too_large_and_missing_credentials(reasons: &[(u32, String)], missing: &str) {
    assert!(
        reasons[0].0 == 1 && reasons[0].1.contains("over max_message_bytes 100"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].0 == 2 && reasons[1].1.contains(missing),
        "{reasons:?}"
    );
}

/// The dead rows' attempts and reasons, sorted.
pub fn dead_attempts_and_reasons(engine: &Engine) -> Vec<(u32, String)> {
    let mut out: Vec<(u32, String)> = dead(engine)
        .iter()
        .map(|r| {
            (
                r.record.attempts,
                r.record.error.clone().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Commits `count` hooks to `source` (bodies `0`, `1`, …) and waits until
/// each is dead-lettered (its sink refuses them); returns their ids.
pub fn commit_refused(engine: &Engine, source: &str, count: usize) -> Vec<String> {
    let ids = (0..count)
        .map(|i| {
            engine
                .commit(goad::NewHook::new(source, format!("{i}")))
                .unwrap()
        })
        .collect();
    wait_until("every row dead-lettered", Duration::from_secs(20), || {
        dead(engine).len() == count
    });
    ids
}

/// Replays every dead row (there are `count`) and waits until every hook
/// is delivered.
pub fn replay_until_delivered(engine: &Engine, count: u64) {
    let replayed = engine.replay(&goad::store::DeadFilter::default()).unwrap();
    assert_eq!(replayed.moved, count);
    wait_until("every hook delivered", Duration::from_secs(20), || {
        engine.hook_count().unwrap() == 0
    });
}

/// A sink that holds each delivery until `open` gets one permit (a dropped
/// sender fails the rest) and counts those that passed.
pub struct Gate {
    pub sink: Arc<dyn Sink>,
    pub open: crossbeam_channel::Sender<()>,
    pub passed: Arc<AtomicU32>,
}

/// An engine whose sinks of type `gate` hold each delivery on `gate`.
pub fn gated_engine(config: Config, gate: &Gate) -> Engine {
    Engine::builder(config)
        .sink("gate", gate.sink.clone())
        .open()
        .expect("the engine opens")
}

pub fn gate() -> Gate {
    let (open, permits) = crossbeam_channel::unbounded::<()>();
    let passed = Arc::new(AtomicU32::new(0));
    let counted = passed.clone();
    let sink = sink(move |_| {
        permits.recv().map_err(SinkError::transient)?;
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    Gate { sink, open, passed }
}

/// One attempt at a time per sink, `breaker_failures` failures to open a
/// breaker, and its open period and every backoff ten minutes: a test that
/// wakes a sink sees its rows wait for nothing else.
pub fn waits_of_ten_minutes(c: &mut Config, breaker_failures: u32) {
    c.dispatch.sink_concurrency = 1;
    breakers_open_ten_minutes(c, breaker_failures);
    c.retry.base_ms = 600_000;
    c.retry.max_ms = 600_000;
}

/// `breaker_failures` failures to open a breaker, open ten minutes.
pub fn breakers_open_ten_minutes(c: &mut Config, breaker_failures: u32) {
    c.dispatch.breaker_failures = breaker_failures;
    c.dispatch.breaker_open_ms = 600_000;
    c.dispatch.breaker_max_open_ms = 600_000;
}

/// A receiver whose status can be changed while it runs.
pub fn switchable(status: u16) -> (Receiver, Arc<AtomicU16>) {
    let current = Arc::new(AtomicU16::new(status));
    let c = current.clone();
    let receiver = Receiver::start(move |_| Reply::status(c.load(Ordering::SeqCst))).unwrap();
    (receiver, current)
}

/// What the file system holding `path` has free, as `df` reports it.
pub fn df_available_bytes(path: &Path) -> u64 {
    df_bytes(path, "avail")
}

/// `df`'s `column` (`avail`, `size`) for the file system holding `path`, in bytes.
pub fn df_bytes(path: &Path, column: &str) -> u64 {
    let out = std::process::Command::new("df")
        .arg(format!("--output={column}"))
        .arg("-B1")
        .arg(path)
        .output()
        .expect("df runs");
    assert!(out.status.success(), "df: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().nth(1).expect("df prints a value");
    line.trim().parse().expect("df prints bytes")
}

/// One of the store's named trees, opened raw.
pub fn tree(store: &ShardStore, name: &str) -> heed::Database<'static, Bytes, Bytes> {
    let wtxn = store.env().write_txn().unwrap();
    store
        .env()
        .create_databases_and_commit(wtxn, |opener, wtxn| {
            opener
                .create_database::<Bytes, Bytes>(wtxn, Some(name))
                .map(heed::CommitOrAbort::<_, ()>::Commit)
        })
        .unwrap()
        .unwrap_commit()
}
