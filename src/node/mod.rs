//! `goad serve`: the engine as a standalone node behind the HTTP API of
//! DESIGN §5.
//!
//! Threads: the HTTP loop ([`http::Server`]); one that opens the engine
//! (recovery) so the node answers `/healthz` and `/readyz` meanwhile; two
//! admin workers for the routes that read or move many rows (so the loop
//! never waits on them); the replay pacer; a short-lived one per SIGHUP,
//! which reloads the config file, and one per fetch of an issuer's keys
//! (`jwks`). Ingest never leaves the loop thread until
//! the engine's shard answers the commit.

mod admin;
mod auth;
mod backup;
pub mod client;
mod dead_letters;
mod dead_summary;
mod drain;
mod free_memory;
mod hook_status;
pub mod http;
mod ingest_counts;
mod ingest_rate;
mod json_body;
mod jwks;
mod jwt;
mod jwt_check;
mod listing;
mod metrics;
mod notify;
mod open_admin;
pub mod open_files;
#[cfg(target_os = "linux")]
mod process_metrics;
pub mod provider_handshake;
pub mod provider_signature;
mod reload_counts;
pub mod replay;
mod replay_routes;
mod routes;
mod sinks;
mod sources;
mod systemd;
mod wake;

use crate::config::{Config, ConfigError};
use crate::runtime::{Engine, OpenError};
use crate::sink::Sink;
use crate::store::ShardStore;
use auth::Tokens;
use http::tls::SharedTls;
use http::{Server, Stopper};
use ingest_counts::IngestCounts;
use parking_lot::{Condvar, Mutex, RwLock};
use replay::Replays;
use std::collections::HashMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to run a node.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub config: Config,
    /// The file `POST /v1/reload` re-reads; `None` runs on embedded defaults.
    pub config_path: Option<PathBuf>,
    /// Listen on a non-loopback address without an admin token.
    pub allow_open_admin: bool,
    /// Tell the service manager `NOTIFY_SOCKET` names, if any, when the
    /// node is ready, reloads and stops, and feed its watchdog
    /// (sd_notify(3); `goad serve` does): leave it off in a host that
    /// tells systemd of its own readiness.
    pub notify_systemd: bool,
}

impl NodeOptions {
    /// A node on `config` alone: no config file to reload (`POST
    /// /v1/reload` answers that there is none), its admin API refused on
    /// a non-loopback address without a token, and no service manager
    /// told of it. Set the other fields for more.
    pub fn new(config: Config) -> NodeOptions {
        NodeOptions {
            config,
            config_path: None,
            allow_open_admin: false,
            notify_systemd: false,
        }
    }
}

/// Why a node did not start or stopped with an error.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeError {
    Config(ConfigError),
    /// A non-loopback listen address without an admin token.
    OpenAdmin {
        listen: String,
    },
    Listen {
        listen: String,
        source: std::io::Error,
    },
    Open(OpenError),
    Io(std::io::Error),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Config(e) => write!(f, "{e}"),
            NodeError::OpenAdmin { listen } => write!(
                f,
                "listen = {listen:?} is not a loopback address and no admin token is set: set admin_token_env (and the variable it names), or pass --allow-open-admin to serve the admin API unauthenticated"
            ),
            NodeError::Listen { listen, source } => {
                write!(f, "cannot listen on {listen}: {source}{}", listen_hint(source))
            }
            NodeError::Open(e) => write!(f, "cannot open the engine: {e}"),
            NodeError::Io(e) => write!(f, "the HTTP loop failed: {e}"),
        }
    }
}

impl std::error::Error for NodeError {}

/// What most often makes `listen`'s address one a node cannot take.
fn listen_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            " (a port below net.ipv4.ip_unprivileged_port_start, 1024 by default, takes root or \
             CAP_NET_BIND_SERVICE: under systemd, AmbientCapabilities=CAP_NET_BIND_SERVICE)"
        }
        std::io::ErrorKind::AddrInUse => {
            " (another process listens there, perhaps a node on the same config: ss -ltnp \
             names it)"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            " (no network interface of this machine has that address: 0.0.0.0 listens on all)"
        }
        _ => "",
    }
}

/// Reads what `config` names outside itself, as a start does: the
/// variables of its tokens and secrets, the HTTPS front's certificate and
/// key, HTTP sinks' `ca_file`s and a Pub/Sub sink's key file, whether its
/// data directory can be written; opens no store and starts nothing
/// (`goad check --environment`); and, as a start
/// does, resolves `listen` and refuses an admin API open beyond loopback
/// unless `allow_open_admin`. A config error names the key.
///
/// It also fetches each `ingest_jwt` key set (once for the sources that
/// share its URL). A fetch that fails
/// is a warning, returned, not an error: a node starts without the keys
/// (that source's hooks are answered 503 until a fetch succeeds), so an
/// issuer's outage must not stop a start that checks first. So are the
/// credentials sinks and the claim bucket read from the environment at
/// each request (AWS keys, a Pub/Sub `token_env`) that are not set or no
/// request can carry.
pub fn check_environment(
    config: &Config,
    allow_open_admin: bool,
) -> Result<Vec<String>, NodeError> {
    let tokens = Tokens::from_config(config).map_err(NodeError::Config)?;
    crate::store::refuse_unusable_data_dir(&config.data_dir)
        .map_err(|e| NodeError::Open(OpenError::Store(e)))?;
    listen_addr(config, &tokens, allow_open_admin)?;
    http::tls::from_config(&config.http).map_err(NodeError::Config)?;
    let claims = crate::claim_check::ClaimStore::from_config(config).map_err(NodeError::Config)?;
    let claims = Arc::new(claims);
    let sinks =
        crate::sink::SinkRegistry::build(config, &Default::default(), &claims, &Default::default())
            .map_err(NodeError::Config)?;
    let credentials = (sinks.credential_problems(config, &claims).into_iter()).map(|problem| {
        format!("{problem}; a node starts, and its requests fail until it is fixed")
    });
    let jwt_sources = (config.sources.iter().enumerate())
        .filter_map(|(i, source)| Some((i, source, source.ingest_jwt.as_ref()?)));
    let mut fetched = HashMap::new();
    let warnings = jwt_sources.filter_map(|(i, source, jwt)| {
        let url = jwt.jwks_url.as_str();
        let fetch = || jwks::Jwks::new(url).fetch_once().map_err(|e| e.to_string());
        let e = fetched.entry(url).or_insert_with(fetch).clone().err()?;
        Some(format!(
            "sources[{i}].ingest_jwt.jwks_url {:?}: cannot fetch a key set goad can use ({e}); \
             a node answers source {:?}'s hooks 503 until it can",
            jwt.jwks_url, source.id
        ))
    });
    Ok(credentials.chain(warnings).collect())
}

/// The refusal a start would meet for `config`'s admin API open beyond
/// loopback (without `--allow-open-admin`), as far as the file tells:
/// `listen` an IP address (a name is looked up only at start) and no
/// `admin_token_env`.
pub fn open_admin_refusal(config: &Config) -> Option<NodeError> {
    let addr: SocketAddr = config.listen.parse().ok()?;
    let open = !addr.ip().is_loopback() && config.admin_token_env.is_none();
    open.then(|| NodeError::OpenAdmin {
        listen: config.listen.clone(),
    })
}

/// The address `config` listens on, unless it serves the admin API
/// without a token beyond loopback and `allow_open_admin` is not given.
fn listen_addr(
    config: &Config,
    tokens: &Tokens,
    allow_open_admin: bool,
) -> Result<SocketAddr, NodeError> {
    let addr = resolve(&config.listen)?;
    if !addr.ip().is_loopback() && tokens.admin.is_none() && !allow_open_admin {
        return Err(NodeError::OpenAdmin {
            listen: config.listen.clone(),
        });
    }
    Ok(addr)
}

/// What every node thread shares.
pub(crate) struct NodeState {
    /// Set once the engine is open (recovery finished).
    engine: OnceLock<Arc<Engine>>,
    /// Signalled when `engine` is set or opening failed.
    opened: (Mutex<bool>, Condvar),
    config: RwLock<Config>,
    config_path: Option<PathBuf>,
    /// Held by the reload under way (see `admin::reload_config`).
    reloading: Mutex<()>,
    reloads: reload_counts::ReloadCounts,
    tokens: RwLock<Tokens>,
    /// Whether the node listens on a loopback address (see `open_admin`).
    listens_on_loopback: bool,
    /// Whether it was started with `--allow-open-admin`: beyond loopback,
    /// without it, no reload may drop the admin token.
    allow_open_admin: bool,
    /// The front's TLS config, when it serves HTTPS (a reload renews it).
    tls: Option<SharedTls>,
    admin: admin::AdminQueues,
    /// Whether the node takes no new hooks (see `drain`).
    drain: drain::Drain,
    replays: Replays,
    ingest: IngestCounts,
    /// What the HTTP front did with its connections.
    front: Arc<http::FrontCounts>,
    notifier: Arc<notify::Notifier>,
    /// The service manager told of the node's state, if any.
    systemd: Option<systemd::Systemd>,
}

impl NodeState {
    /// A node's state before its engine opens, listening on `addr`.
    fn new(
        config: &Config,
        config_path: Option<PathBuf>,
        tokens: Tokens,
        addr: SocketAddr,
        allow_open_admin: bool,
        tls: Option<SharedTls>,
        admin: admin::AdminQueues,
    ) -> NodeState {
        NodeState {
            systemd: None,
            engine: OnceLock::new(),
            opened: (Mutex::new(false), Condvar::new()),
            replays: Replays::new(&config.data_dir),
            drain: drain::Drain::load(&config.data_dir),
            ingest: IngestCounts::default(),
            front: Arc::default(),
            notifier: notify::Notifier::new(&config.notifications),
            config: RwLock::new(config.clone()),
            config_path,
            reloading: Mutex::new(()),
            reloads: Default::default(),
            tokens: RwLock::new(tokens),
            listens_on_loopback: addr.ip().is_loopback(),
            allow_open_admin,
            tls,
            admin,
        }
    }

    fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.get()
    }

    /// Whether the admin API takes requests without a token from beyond
    /// loopback; if so it is logged, as the node starts and after each
    /// reload.
    fn warn_if_admin_open(&self) {
        if self.tokens.read().admin.is_none() && !self.listens_on_loopback {
            let why = "no admin token, and --allow-open-admin: anyone who reaches this address may replay, purge and reconfigure";
            let listen = self.config.read().listen.clone();
            crate::log::warn(
                "the admin API is open",
                &[("listen", &listen), ("why", &why)],
            );
        }
    }

    /// The config as it stands, for a request that reads it a while (a
    /// listing of 100,000 sources takes a second): a copy, cheap as a
    /// config's copies share their sources, so that a reload's write of
    /// the config, and the readers queued behind it, do not wait for it.
    fn config_now(&self) -> Config {
        self.config.read().clone()
    }
}

/// A running node.
pub struct Node {
    addr: SocketAddr,
    stopper: Stopper,
    state: Arc<NodeState>,
    server: Option<JoinHandle<Result<(), NodeError>>>,
}

impl Node {
    /// Validates the config, binds the listen address and starts serving;
    /// the engine opens (recovers) in the background, and `/readyz` says
    /// when it has.
    pub fn start(options: NodeOptions) -> Result<Node, NodeError> {
        Node::start_with_sinks(options, Vec::new())
    }

    /// `start` with the host's Rust sinks: config sink entries with
    /// `type = name` use them.
    pub fn start_with_sinks(
        options: NodeOptions,
        host_sinks: Vec<(String, Arc<dyn Sink>)>,
    ) -> Result<Node, NodeError> {
        let config = options.config;
        let names: Vec<&str> = host_sinks.iter().map(|(n, _)| n.as_str()).collect();
        config
            .validate_with_sinks(&names)
            .map_err(NodeError::Config)?;
        let tokens = Tokens::from_config(&config).map_err(NodeError::Config)?;
        // Before listening: the engine opens after, and would stop the node.
        crate::store::refuse_unusable_data_dir(&config.data_dir)
            .map_err(|e| NodeError::Open(OpenError::Store(e)))?;
        let addr = listen_addr(&config, &tokens, options.allow_open_admin)?;
        let tls = http::tls::from_config(&config.http).map_err(NodeError::Config)?;
        let tls = tls.map(|config| Arc::new(RwLock::new(config)));
        tokens.fetch_stale_keys();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (admin_queues, admin_jobs) = admin::admin_queues();
        let mut state = NodeState::new(
            &config,
            options.config_path,
            tokens,
            addr,
            options.allow_open_admin,
            tls.clone(),
            admin_queues,
        );
        if options.notify_systemd {
            state.systemd = systemd::Systemd::from_environment();
        }
        let state = Arc::new(state);
        let handler = Arc::new(routes::NodeHandler::new(state.clone()));
        let server = Server::bind(
            addr,
            config.http.clone(),
            tls,
            config.max_body_bytes,
            handler,
            state.front.clone(),
        )
        .map_err(|source| NodeError::Listen {
            listen: config.listen.clone(),
            source,
        })?;
        let addr = server.local_addr().map_err(NodeError::Io)?;
        let stopper = server.stopper();
        admin::start_workers(&state, admin_jobs);
        let opener = {
            let state = state.clone();
            let stopper = stopper.clone();
            std::thread::Builder::new()
                .name("goad-open".into())
                .spawn(move || open_engine(&state, config, host_sinks, &stopper))
                .map_err(NodeError::Io)?
        };
        let server = std::thread::Builder::new()
            .name("goad-http".into())
            .spawn(move || {
                let served = server.run().map_err(NodeError::Io);
                let opened = opener.join().unwrap_or(Ok(()));
                served.and(opened)
            })
            .map_err(NodeError::Io)?;
        crate::log::info("node listening", &[("addr", &addr), ("scheme", &scheme)]);
        state.warn_if_admin_open();
        Ok(Node {
            addr,
            stopper,
            state,
            server: Some(server),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until the engine is open; false if it is not within `wait`.
    pub fn wait_ready(&self, wait: Duration) -> bool {
        let deadline = crate::runtime::deadline_after(wait);
        let (done, opened) = &self.state.opened;
        let mut done = done.lock();
        while !*done && !opened.wait_until(&mut done, deadline).timed_out() {}
        self.state.engine().is_some()
    }

    /// The engine, once open (for embedding and tests).
    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.state.engine().cloned()
    }

    /// Begins a graceful stop (as SIGTERM does).
    pub fn stop(&self) {
        self.stopper.stop();
    }

    /// Waits until the node stopped: the HTTP loop answered what was in
    /// flight, replays paused, and the engine shut down (synced).
    pub fn wait(mut self) -> Result<(), NodeError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), NodeError> {
        let Some(server) = self.server.take() else {
            return Ok(());
        };
        let served = server.join().unwrap_or_else(|_| {
            Err(NodeError::Io(std::io::Error::other(
                "the HTTP loop panicked",
            )))
        });
        self.state.replays.stop();
        self.state.notifier.stop();
        if let Some(engine) = self.state.engine() {
            engine.shutdown();
        }
        crate::log::info("node stopped", &[]);
        served
    }
}

/// Dropping a node stops it gracefully and waits.
impl Drop for Node {
    fn drop(&mut self) {
        if self.server.is_some() {
            self.stop();
            let _ = self.finish();
        }
    }
}

/// The address `listen` names; an error says why there is none (its host
/// does not resolve here, say).
fn resolve(listen: &str) -> Result<SocketAddr, NodeError> {
    let invalid = |why: String| {
        NodeError::Config(ConfigError::Invalid {
            key: "listen".into(),
            rule: format!("a host:port address of this machine's ({why})"),
            value: format!("{listen:?}"),
        })
    };
    listen
        .to_socket_addrs()
        .map_err(|e| invalid(format!("its host does not resolve here: {e}")))?
        .next()
        .ok_or_else(|| invalid("its host resolves to no address".into()))
}

/// Opens the engine (recovering claimed rows), then resumes replays. On
/// failure the node stops with the error.
fn open_engine(
    state: &Arc<NodeState>,
    config: Config,
    host_sinks: Vec<(String, Arc<dyn Sink>)>,
    stopper: &Stopper,
) -> Result<(), NodeError> {
    let opened = try_open_engine(state, config, host_sinks, stopper);
    // Whatever happened, `wait_ready` may stop waiting.
    let (done, signal) = &state.opened;
    *done.lock() = true;
    signal.notify_all();
    opened
}

fn try_open_engine(
    state: &Arc<NodeState>,
    config: Config,
    host_sinks: Vec<(String, Arc<dyn Sink>)>,
    stopper: &Stopper,
) -> Result<(), NodeError> {
    let started = Instant::now();
    // As the process sees it: a relative `data_dir` is the working
    // directory's.
    let data_dir = std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone());
    // Said once opened, so that a mistyped data_dir is seen for what it is
    // (a store it cannot read fails the open itself).
    let is_new = !ShardStore::has_store(&config.data_dir, 0).unwrap_or(false);
    let (outcomes, breakers) = (state.notifier.clone(), state.notifier.clone());
    let builder = host_sinks
        .into_iter()
        .fold(Engine::builder(config), |b, (name, sink)| {
            b.sink(name, sink)
        })
        .on_outcome(move |event| outcomes.observe(event))
        .on_breaker(move |event, at_ms| breakers.observe_breaker(event, at_ms));
    match builder.open() {
        Ok(engine) => {
            let engine = Arc::new(engine);
            open_files::warn_if_short(&state.config.read(), engine.sink_connections_bound());
            let recovered: u64 = engine.stats().iter().map(|s| s.recovered).sum();
            let _ = state.engine.set(engine.clone());
            if is_new {
                crate::log::info(
                    "the data directory held no stores: made new, empty ones",
                    &[
                        ("data_dir", &data_dir.display()),
                        ("shards", &engine.stats().len()),
                    ],
                );
            }
            crate::log::info(
                "engine ready",
                &[
                    ("data_dir", &data_dir.display()),
                    ("shards", &engine.stats().len()),
                    ("recovered_rows", &recovered),
                    ("open_ms", &started.elapsed().as_millis()),
                ],
            );
            log_config_warnings(&state.config.read(), &engine);
            if state.drain.is_on() {
                crate::log::warn(
                    "the node is draining (a DRAINING file in its data directory): it takes no new hooks until DELETE /v1/drain",
                    &[],
                );
            }
            state.replays.start(state.clone());
            state.notifier.start(engine).map_err(NodeError::Io)?;
            if let Some(systemd) = &state.systemd {
                systemd.ready(&format!("serving: {recovered} rows recovered"));
            }
            Ok(())
        }
        Err(e) => {
            // `Node::wait` returns the error, and whoever waits reports it.
            stopper.stop();
            Err(NodeError::Open(e))
        }
    }
}

/// Logs what the node's config holds that is most likely a mistake, and
/// the credentials its sinks read at each request that the environment
/// lacks.
fn log_config_warnings(config: &Config, engine: &Engine) {
    let missing = engine.credential_problems().into_iter();
    let missing = missing.map(|problem| format!("{problem}; its requests fail until it is fixed"));
    for warning in config.warnings().into_iter().chain(missing) {
        crate::log::warn("config warning", &[("warning", &warning)]);
    }
}
