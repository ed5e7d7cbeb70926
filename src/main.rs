//! The `goad` command.

use clap::{Args, Parser, Subcommand};
use goad::core::ReasonKinds;
use goad::node::client::{encode, ClientError, ClientTlsFiles, NodeClient};
use goad::{say, Config, Node, NodeOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "goad",
    version,
    about = "A thread-per-core webhook dispatch engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the engine in-process against loopback receivers and print a summary.
    Demo {
        /// Hooks to commit.
        #[arg(long, default_value_t = 4_000)]
        hooks: u64,
        /// Threads committing at once.
        #[arg(long, default_value_t = 16)]
        committers: usize,
        /// Body size of each hook.
        #[arg(long, default_value_t = 1_024)]
        body_bytes: usize,
    },
    /// Run a node: the HTTP API of DESIGN.md §5 in front of the engine.
    Serve {
        /// The config file; without it, embedded defaults (data in
        /// ./goad-data, listen 127.0.0.1:7878, no sources).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve the admin API on a non-loopback address without an admin token.
        #[arg(long)]
        allow_open_admin: bool,
    },
    /// Validate a config file: exit 0, or print the error and exit 2.
    Check {
        #[arg(long)]
        config: PathBuf,
        /// Also read what the config names outside itself, as a start
        /// does: token and secret variables, TLS and CA files, key files;
        /// resolve `listen`, refusing an admin API without a token beyond
        /// loopback as `goad serve` does; and fetch each `ingest_jwt` key
        /// set, warning of one it cannot fetch (a start goes on without).
        #[arg(long)]
        environment: bool,
        /// With --environment: as `goad serve --allow-open-admin`.
        #[arg(long, requires = "environment")]
        allow_open_admin: bool,
    },
    /// Make a signing secret for an HTTP sink's `secret_env`: an Ed25519
    /// key (`whsk_…`, signatures `v1a`) and the public key its receivers
    /// verify with (`whpk_…`), or with --hmac a shared secret (`whsec_…`,
    /// signatures `v1`).
    Keygen {
        /// A shared secret instead of a key pair.
        #[arg(long)]
        hmac: bool,
    },
    /// Check a stopped node's data directory: every row in exactly one
    /// index, every record readable. Exit 0 if sound, 1 if not, 2 if it
    /// cannot be checked (a node is running on it, say).
    Verify {
        /// The node's config file (for `data_dir` and `shards`); without
        /// it, the embedded defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Check this directory instead of the config's `data_dir` (a
        /// backup, say).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Move a stopped node's data directory to another shard count (one
    /// per core on a bigger machine, say): each tenant's hooks and rows go
    /// to its shard under the new count, as they are. The old shards are
    /// kept in <data_dir>/before-reshard/. Exit 0 when done, 2 if it cannot
    /// be done (a node runs on it, the store is unsound, ...).
    Reshard {
        /// The node's config file (for `data_dir` and `max_shard_bytes`);
        /// without it, the embedded defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The new shard count (0: one per core); set the config's
        /// `shards` to it before starting the node.
        #[arg(long)]
        shards: usize,
    },
    /// Show a hook on a node by the id its ingest returned, with each
    /// sink's state: due, in_flight, in_lane, dead, delivered or purged.
    Hook {
        #[command(flatten)]
        node: NodeArgs,
        /// The hook's id.
        id: String,
        /// Write only the body, as committed, to stdout.
        #[arg(long)]
        body: bool,
    },
    /// Back up a running node's data directory: the node writes each
    /// shard's store as its last commit left it, the directory's other
    /// files and backup.json (last) to a new or empty directory on its
    /// host. Start a node on that directory to restore it.
    Backup {
        #[command(flatten)]
        node: NodeArgs,
        /// The directory to write (a relative path is taken from here).
        #[arg(long)]
        to: PathBuf,
    },
    /// Drain a node: it takes no new hooks (503 draining, /readyz 503)
    /// and delivers those it holds; prints how many rows it still holds.
    Drain {
        #[command(flatten)]
        node: NodeArgs,
        /// Take hooks again.
        #[arg(long, conflicts_with = "status")]
        end: bool,
        /// Only show whether it drains and what it holds.
        #[arg(long)]
        status: bool,
    },
    /// Re-read a node's config file, as SIGHUP does: prints the keys it
    /// applied and those that need a restart; an invalid file changes
    /// nothing and is named with its error.
    Reload(NodeArgs),
    /// Dead letters on a node.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// A node's pressure: the oldest due row's lag and whether the window is full.
    Pressure(NodeArgs),
    /// A node's gauges per shard and per tenant.
    Stats(NodeArgs),
    /// A node's sinks: each one's outcomes since the node started, its
    /// latest failure and its breaker.
    Sinks {
        #[command(flatten)]
        node: NodeArgs,
        /// Only this source's.
        #[arg(long)]
        source: Option<String>,
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// A node's sources as its config stands: each one's ingest path, how
    /// ingest checks it, how it dedupes and where its sinks deliver.
    Sources(NodeArgs),
    /// Wake a sink whose receiver is back: close its circuit breaker and
    /// make its rows waiting out a backoff or the breaker due now
    /// (attempts kept); prints how many and whether the breaker was open.
    Wake {
        #[command(flatten)]
        node: NodeArgs,
        /// The sink's source.
        #[arg(long)]
        source: String,
        /// The sink's index in the source's `sinks` (from 0).
        #[arg(long)]
        sink: u16,
    },
}

#[derive(Subcommand)]
enum DlqCommand {
    /// List dead letters, newest first.
    List {
        #[command(flatten)]
        node: NodeArgs,
        #[command(flatten)]
        filter: DeadLetterFilter,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The `next_cursor` of the previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Show one dead letter with its hook's headers and body.
    Show {
        #[command(flatten)]
        node: NodeArgs,
        /// The dead letter's `id`, as `list` gives it.
        id: String,
        /// Write only the body, as committed, to stdout.
        #[arg(long)]
        body: bool,
    },
    /// Delete matching dead letters for good (with their hooks).
    Purge {
        #[command(flatten)]
        node: NodeArgs,
        #[command(flatten)]
        filter: DeadLetterFilter,
        /// Delete every dead letter: required when no filter is given, so
        /// a forgotten one deletes nothing.
        #[arg(long)]
        all: bool,
    },
    /// Dead-letter every pending row of a source as `source_gone` (to
    /// delete a source that still has a backlog); prints how many.
    Add {
        #[command(flatten)]
        node: NodeArgs,
        /// The source whose pending rows to dead-letter.
        #[arg(long)]
        source: String,
    },
    /// Replay matching dead letters through the pipeline.
    Replay {
        #[command(flatten)]
        node: NodeArgs,
        #[command(flatten)]
        filter: DeadLetterFilter,
    },
    /// The node's replays with their progress, newest first; or one, by
    /// the id `replay` printed, paused or resumed.
    Replays {
        #[command(flatten)]
        node: NodeArgs,
        /// Only this replay.
        id: Option<String>,
        /// Stop it moving rows (those it moved are delivered as any).
        #[arg(long, requires = "id", conflicts_with = "resume")]
        pause: bool,
        /// Let a paused replay (by itself or by --pause) go on.
        #[arg(long, requires = "id")]
        resume: bool,
        /// Only the replays in this state: running, done or paused.
        #[arg(long, conflicts_with = "id")]
        state: Option<String>,
        /// The most replays to list (1 to 1000).
        #[arg(long, default_value_t = 100, conflicts_with = "id")]
        limit: usize,
    },
}

/// Which dead letters a `dlq` command takes.
#[derive(Args)]
struct DeadLetterFilter {
    /// Only this source's.
    #[arg(long)]
    source: Option<String>,
    /// Only this tenant's.
    #[arg(long)]
    tenant: Option<String>,
    /// Only this hook's (its id, as ingest answered it).
    #[arg(long)]
    hook: Option<String>,
    /// Only the rows of the sink at this index of their source.
    #[arg(long)]
    sink: Option<u16>,
    /// Only the rows that died of this: permanent, max_attempts,
    /// retry_horizon, source_gone, sink_gone or undecodable, or several
    /// separated by commas.
    #[arg(long)]
    reason: Option<ReasonKinds>,
    /// Only rows dead at or after this time (unix ms).
    #[arg(long)]
    since_ms: Option<u64>,
    /// Only rows dead at or before this time (unix ms).
    #[arg(long)]
    until_ms: Option<u64>,
}

impl DeadLetterFilter {
    /// The filter and `more` parameters as a query string.
    fn query(&self, more: &[(&str, Option<String>)]) -> String {
        let mine = [
            ("source_id", self.source.clone()),
            ("tenant", self.tenant.clone()),
            ("hook_id", self.hook.clone()),
            ("sink_index", self.sink.map(|i| i.to_string())),
            ("reason", self.reason.map(|k| k.to_string())),
            ("since_ms", self.since_ms.map(|t| t.to_string())),
            ("until_ms", self.until_ms.map(|t| t.to_string())),
        ];
        query(mine.iter().chain(more))
    }
}

/// The parameters that have a value as a query string (`?a=1&b=2`, or
/// empty), values percent-encoded.
fn query<'a>(params: impl Iterator<Item = &'a (&'a str, Option<String>)>) -> String {
    let pairs: Vec<String> = params
        .filter_map(|(name, value)| Some(format!("{name}={}", encode(value.as_ref()?))))
        .collect();
    if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    }
}

#[derive(Args)]
struct NodeArgs {
    /// The node's base URL.
    #[arg(long, env = "GOAD_NODE", default_value = "http://127.0.0.1:7878")]
    node: String,
    /// The environment variable holding the node's admin token.
    #[arg(long, default_value = "GOAD_ADMIN_TOKEN")]
    token_env: String,
    /// An https:// node: trust the certificates of this PEM file (the CA
    /// that signed the node's) instead of Mozilla's roots.
    #[arg(long, env = "GOAD_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// An https:// node that asks for one (`http.tls_client_ca_file`):
    /// present this PEM certificate chain...
    #[arg(long, env = "GOAD_CLIENT_CERT")]
    client_cert: Option<PathBuf>,
    /// ...and this PEM private key.
    #[arg(long, env = "GOAD_CLIENT_KEY")]
    client_key: Option<PathBuf>,
}

impl NodeArgs {
    fn client(&self) -> Result<NodeClient, ClientError> {
        let token = std::env::var(&self.token_env)
            .ok()
            .filter(|t| !t.is_empty());
        let files = ClientTlsFiles {
            ca_file: self.ca_file.as_deref(),
            client_cert: self.client_cert.as_deref(),
            client_key: self.client_key.as_deref(),
        };
        let client = NodeClient::new(self.node.clone(), token).with_tls(files);
        client.map_err(|e| ClientError(e.to_string()))
    }
}

/// Prints a new signing secret, each line after the comment saying what it is for.
fn keygen(hmac: bool) -> ExitCode {
    use goad::sink::signing::SigningKey;
    let made = match hmac {
        true => SigningKey::generate_secret().map(|secret| {
            format!("# the sink's secret_env variable and its receivers hold this shared secret:\n{secret}")
        }),
        false => SigningKey::generate().map(|(private, public)| {
            format!(
                "# the sink's secret_env variable holds this private key (keep it secret):\n{private}\n\
                 # its receivers verify the v1a signatures with this public key:\n{public}"
            )
        }),
    };
    match made {
        Ok(text) => {
            say!("{text}");
            ExitCode::SUCCESS
        }
        Err(_) => {
            eprintln!("goad keygen: the system gave no randomness");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Demo {
            hooks,
            committers,
            body_bytes,
        } => match goad::demo::run(&goad::demo::DemoOptions {
            hooks,
            committers,
            body_bytes,
        }) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("goad demo: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve {
            config,
            allow_open_admin,
        } => serve(config, allow_open_admin),
        Command::Check {
            config,
            environment,
            allow_open_admin,
        } => check(&config, environment.then_some(allow_open_admin)),
        Command::Keygen { hmac } => keygen(hmac),
        Command::Verify { config, data_dir } => verify(config, data_dir),
        Command::Reshard { config, shards } => reshard(config, shards),
        Command::Hook { node, id, body } => {
            show(&node, &format!("/v1/hooks/{}", encode(&id)), body)
        }
        Command::Backup { node, to } => backup(&node, &to),
        Command::Drain { node, end, status } => {
            let method = match (end, status) {
                (_, true) => "GET",
                (true, _) => "DELETE",
                _ => "POST",
            };
            print_call(&node, method, "/v1/drain", None)
        }
        Command::Reload(node) => print_call(&node, "POST", "/v1/reload", None),
        Command::Dlq { command } => match command {
            DlqCommand::List {
                node,
                filter,
                limit,
                cursor,
            } => {
                let query = filter.query(&[("limit", Some(limit.to_string())), ("cursor", cursor)]);
                print_call(&node, "GET", &format!("/v1/dead-letters{query}"), None)
            }
            DlqCommand::Add { node, source } => {
                let path = format!("/v1/sources/{}/dead-letter", encode(&source));
                print_call(&node, "POST", &path, None)
            }
            DlqCommand::Show { node, id, body } => {
                show(&node, &format!("/v1/dead-letters/{}", encode(&id)), body)
            }
            DlqCommand::Purge { node, filter, all } => {
                let query = filter.query(&[]);
                match (query.is_empty(), all) {
                    (true, false) => usage("goad dlq purge: give a filter (--source, --tenant, --hook, --sink, --reason, --since-ms, --until-ms), or --all to delete every dead letter"),
                    (false, true) => usage("goad dlq purge: --all deletes every dead letter; give it no filter"),
                    _ => print_call(&node, "DELETE", &format!("/v1/dead-letters{query}"), None),
                }
            }
            DlqCommand::Replay { node, filter } => {
                let body = serde_json::json!({
                    "source_id": filter.source,
                    "tenant": filter.tenant,
                    "hook_id": filter.hook,
                    "sink_index": filter.sink,
                    "reason": filter.reason,
                    "since_ms": filter.since_ms,
                    "until_ms": filter.until_ms,
                });
                print_call(&node, "POST", "/v1/replays", Some(&body))
            }
            DlqCommand::Replays {
                node,
                id,
                pause,
                resume,
                state,
                limit,
            } => match (id, pause, resume) {
                (None, ..) => {
                    let params = [("state", state), ("limit", Some(limit.to_string()))];
                    let path = format!("/v1/replays{}", query(params.iter()));
                    print_call(&node, "GET", &path, None)
                }
                (Some(id), false, false) => {
                    print_call(&node, "GET", &format!("/v1/replays/{}", encode(&id)), None)
                }
                (Some(id), pause, _) => {
                    let action = if pause { "pause" } else { "resume" };
                    let path = format!("/v1/replays/{}/{action}", encode(&id));
                    print_call(&node, "POST", &path, None)
                }
            },
        },
        Command::Pressure(node) => print_call(&node, "GET", "/v1/pressure", None),
        Command::Stats(node) => print_call(&node, "GET", "/v1/stats", None),
        Command::Sources(node) => print_call(&node, "GET", "/v1/sources", None),
        Command::Wake { node, source, sink } => {
            let path = format!("/v1/sources/{}/sinks/{sink}/wake", encode(&source));
            print_call(&node, "POST", &path, None)
        }
        Command::Sinks {
            node,
            source,
            tenant,
        } => {
            let query = query([("source_id", source), ("tenant", tenant)].iter());
            print_call(&node, "GET", &format!("/v1/sinks{query}"), None)
        }
    }
}

/// `goad check`: the file, and with `environment` what it names.
/// `goad check`; `environment`: with `--environment`, whether
/// `--allow-open-admin` was given.
fn check(path: &std::path::Path, environment: Option<bool>) -> ExitCode {
    let checked = Config::load(path)
        .map_err(|e| e.to_string())
        .and_then(|c| match environment {
            Some(allow_open_admin) => goad::node::check_environment(&c, allow_open_admin)
                .map(|warnings| {
                    warnings.iter().for_each(|w| eprintln!("warning: {w}"));
                    c
                })
                .map_err(|e| e.to_string()),
            None => Ok(c),
        });
    match checked {
        Ok(c) => {
            let what = if environment.is_some() {
                "; its variables and files read"
            } else {
                ""
            };
            let sinks = c.sources.iter().map(|s| s.sinks.len()).sum();
            let (sources, sinks) = (counted(c.sources.len(), "source"), counted(sinks, "sink"));
            say!("{}: ok ({sources}, {sinks}{what})", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// "1 source", "2 sources".
fn counted(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// The config at `path`, or the embedded defaults; an invalid file is
/// logged and exits 2.
fn config_or_default(path: &Option<PathBuf>) -> Result<Config, ExitCode> {
    match path {
        Some(path) => Config::load(path).map_err(|e| {
            goad::log::error("invalid config", &[("error", &e)]);
            ExitCode::from(2)
        }),
        None => Ok(Config::default()),
    }
}

fn serve(config_path: Option<PathBuf>, allow_open_admin: bool) -> ExitCode {
    let config = match config_or_default(&config_path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    goad::node::open_files::raise_soft_limit();
    let node = match Node::start(NodeOptions {
        config,
        config_path,
        allow_open_admin,
    }) {
        Ok(node) => node,
        Err(e) => {
            goad::log::error("cannot start the node", &[("error", &e)]);
            return ExitCode::from(2);
        }
    };
    match node.wait() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            goad::log::error("the node stopped with an error", &[("error", &e)]);
            ExitCode::FAILURE
        }
    }
}

fn verify(config_path: Option<PathBuf>, data_dir: Option<PathBuf>) -> ExitCode {
    let mut config = match config_or_default(&config_path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(dir) = data_dir {
        config.data_dir = dir;
    }
    if !config.data_dir.is_dir() {
        eprintln!(
            "goad verify: no data directory at {}",
            config.data_dir.display()
        );
        return ExitCode::from(2);
    }
    let shards = match goad::store::verify_data_dir(&config.data_dir, config.shard_count()) {
        Ok(shards) => shards,
        Err(e) => {
            eprintln!("goad verify: {e}");
            return ExitCode::from(2);
        }
    };
    let mut sound = true;
    for (k, shard) in shards.iter().enumerate() {
        let verdict = match shard.problem_count {
            0 => "sound".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        };
        say!(
            "shard {k}: {} hooks; rows {} due, {} in flight, {} waiting in lanes, {} dead: {verdict}",
            shard.hooks, shard.due, shard.in_flight, shard.lane_members, shard.dead
        );
        for problem in &shard.problems {
            say!("  - {problem}");
        }
        let unlisted = shard.problem_count - shard.problems.len() as u64;
        if unlisted > 0 {
            say!("  - and {unlisted} more");
        }
        sound &= shard.problem_count == 0;
    }
    if sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn reshard(config_path: Option<PathBuf>, shards: usize) -> ExitCode {
    let config = match config_or_default(&config_path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let to_shards = Config {
        shards,
        ..config.clone()
    }
    .shard_count();
    let now_ms = goad::runtime::wall_ms();
    match goad::store::reshard(
        &config.data_dir,
        to_shards,
        config.max_shard_bytes,
        goad::Engine::shard_of,
        now_ms,
    ) {
        Ok(done) => {
            say!(
                "resharded {} from {} to {} shards: {} hooks, {} rows; the old shards are in {} \
                 (delete them once the node runs); set shards = {} in the config",
                config.data_dir.display(),
                done.from_shards,
                done.to_shards,
                done.hooks,
                done.rows,
                done.kept_at.display(),
                done.to_shards
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("goad reshard: {e}");
            ExitCode::from(2)
        }
    }
}

/// `goad hook` and `goad dlq show`: the node's JSON answer for `path`, or
/// with `body` only the hook's body.
fn show(node: &NodeArgs, path: &str, body: bool) -> ExitCode {
    match body {
        false => print_call(node, "GET", path, None),
        true => print_body(node, path),
    }
}

/// `--body`: the body of the hook `path` shows, decoded, on stdout.
fn print_body(node: &NodeArgs, path: &str) -> ExitCode {
    use base64::Engine as _;
    use std::io::Write as _;
    let letter = node.client().and_then(|c| c.call("GET", path, None));
    let body = letter.and_then(|letter| {
        let encoded = letter["body_base64"].as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| ClientError(format!("{path}: the body is not base64: {e}")))
    });
    match body.map(|body| std::io::stdout().write_all(&body)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        // A reader that went away (`| head -c 100`) is no error.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("goad: writing the body: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("goad: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `goad backup`: the node writes the backup; this waits up to an hour.
fn backup(node: &NodeArgs, to: &std::path::Path) -> ExitCode {
    const BACKUP_WAIT: Duration = Duration::from_secs(3_600);
    let to = match std::path::absolute(to) {
        Ok(to) => to,
        Err(e) => {
            eprintln!("goad: --to {}: {e}", to.display());
            return ExitCode::from(2);
        }
    };
    let body = serde_json::json!({"to": to});
    let answer =
        (node.client()).and_then(|c| c.call_within("POST", "/v1/backup", Some(&body), BACKUP_WAIT));
    print_answer(answer)
}

fn print_call(
    node: &NodeArgs,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> ExitCode {
    print_answer(node.client().and_then(|c| c.call(method, path, body)))
}

/// A command given wrongly: `why` on stderr, exit 2.
fn usage(why: &str) -> ExitCode {
    eprintln!("{why}");
    ExitCode::from(2)
}

/// A node's JSON answer on stdout, or its error on stderr (exit 1).
fn print_answer(answer: Result<serde_json::Value, ClientError>) -> ExitCode {
    match answer {
        Ok(value) => {
            say!(
                "{}",
                serde_json::to_string_pretty(&value).expect("JSON values print")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("goad: {e}");
            ExitCode::FAILURE
        }
    }
}
