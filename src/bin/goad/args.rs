//! The `goad` command's arguments: its subcommands and their options.

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand};
use goad::core::ReasonKinds;
use goad::limits::{DEFAULT_MAX_BODY_BYTES, DEMO_MAX_COMMITTERS, DEMO_MAX_HOOKS};
use goad::node::client::{encode, ClientError, ClientTlsFiles, NodeClient};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "goad",
    version,
    about = "A thread-per-core webhook dispatch engine"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the engine in-process against loopback receivers and print a summary.
    Demo {
        /// Hooks to commit.
        #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u64).range(1..=DEMO_MAX_HOOKS))]
        hooks: u64,
        /// Threads committing at once.
        #[arg(long, default_value_t = 16, value_parser = RangedU64ValueParser::<usize>::new().range(1..=DEMO_MAX_COMMITTERS))]
        committers: usize,
        /// Body size of each hook, up to the engine's default `max_body_bytes` (1 MiB).
        #[arg(long, default_value_t = 1_024, value_parser = RangedU64ValueParser::<usize>::new().range(0..=DEFAULT_MAX_BODY_BYTES))]
        body_bytes: usize,
    },
    /// Run a node: the engine behind an HTTP API (ingest, hooks, sinks, dead letters, replays, metrics; docs/http-api.md).
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
        /// The config file (TOML) to check.
        #[arg(long)]
        config: PathBuf,
        /// Also read what the config names outside itself, as a start
        /// does: token and secret variables, TLS and CA files, key files,
        /// a data_dir that is a file;
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
    /// sink's state: due, in_flight, in_lane, held, parked, dead,
    /// undecodable, delivered or purged.
    Hook {
        #[command(flatten)]
        node: NodeArgs,
        /// The hook's id.
        #[arg(value_parser = non_empty())]
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
        /// Then wait up to this long (30s, 10m, 1h) until it holds no
        /// pending row, printing the count as it falls: exit 0 once
        /// drained, 1 if rows are still pending then.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, conflicts_with = "end")]
        wait: Option<std::time::Duration>,
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
        #[command(flatten)]
        listing: SourceListing,
        /// Only the sinks failing now: their breaker open or half-open, or
        /// their latest attempt failed (a failure since their last delivery).
        #[arg(long, conflicts_with_all = ["limit", "cursor"])]
        failing: bool,
    },
    /// A node's sources as its config stands: each one's ingest path, how
    /// ingest checks it, how it dedupes and where its sinks deliver.
    Sources {
        #[command(flatten)]
        node: NodeArgs,
        #[command(flatten)]
        listing: SourceListing,
    },
    /// Wake a sink whose receiver is back: close its circuit breaker and
    /// make its rows waiting out a backoff or the breaker due now
    /// (attempts kept); prints how many and whether the breaker was open.
    Wake {
        #[command(flatten)]
        node: NodeArgs,
        /// The sink's source.
        #[arg(long, value_parser = non_empty())]
        source: String,
        /// The sink's index in the source's `sinks` (from 0).
        #[arg(long)]
        sink: u16,
    },
}

#[derive(Subcommand)]
pub enum DlqCommand {
    /// List dead letters, newest first.
    List {
        #[command(flatten)]
        node: NodeArgs,
        #[command(flatten)]
        filter: DeadLetterFilter,
        /// The most dead letters to list on this page (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The `next_cursor` of the previous page.
        #[arg(long, value_parser = non_empty())]
        cursor: Option<String>,
    },
    /// Show one dead letter with its hook's headers and body.
    Show {
        #[command(flatten)]
        node: NodeArgs,
        /// The dead letter's `id`, as `list` gives it.
        #[arg(value_parser = non_empty())]
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
        #[arg(long, value_parser = non_empty())]
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
        #[arg(value_parser = non_empty())]
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
        /// The `next_cursor` of the previous page.
        #[arg(long, conflicts_with = "id", value_parser = non_empty())]
        cursor: Option<String>,
    },
}

/// Which dead letters a `dlq` command takes.
#[derive(Args)]
pub struct DeadLetterFilter {
    /// Only this source's.
    #[arg(long, value_parser = non_empty())]
    pub source: Option<String>,
    /// Only this tenant's.
    #[arg(long, value_parser = non_empty())]
    pub tenant: Option<String>,
    /// Only this hook's (its id, as ingest answered it).
    #[arg(long, value_parser = non_empty())]
    pub hook: Option<String>,
    /// Only the rows of the sink at this index of their source.
    #[arg(long)]
    pub sink: Option<u16>,
    /// Only the rows that died of this: permanent, max_attempts,
    /// retry_horizon, source_gone, sink_gone or undecodable, or several
    /// separated by commas.
    #[arg(long)]
    pub reason: Option<ReasonKinds>,
    /// Only rows dead at or after this time: a duration ago (30m, 2h,
    /// 1day), an RFC 3339 time (2026-12-05T10:00:00Z) or unix ms.
    #[arg(long = "since", alias = "since-ms", value_name = "WHEN", value_parser = when_ms)]
    pub since_ms: Option<u64>,
    /// Only rows dead at or before this time: as --since.
    #[arg(long = "until", alias = "until-ms", value_name = "WHEN", value_parser = when_ms)]
    pub until_ms: Option<u64>,
}

/// An id, name or cursor: an empty one (an unset shell variable) is
/// refused here, not sent to match nothing.
fn non_empty() -> clap::builder::NonEmptyStringValueParser {
    clap::builder::NonEmptyStringValueParser::new()
}

/// A time a filter names, as unix ms: unix ms, an RFC 3339 time, or a
/// duration (humantime's: `90s`, `30m`, `2h 30m`, `1day`) before now by
/// this host's clock.
fn when_ms(text: &str) -> Result<u64, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map_err(|e| format!("{e}"));
    }
    if let Ok(at) = humantime::parse_rfc3339_weak(text) {
        let since_epoch = at.duration_since(std::time::UNIX_EPOCH);
        return Ok(since_epoch.map_or(0, |d| d.as_millis() as u64));
    }
    match humantime::parse_duration(text) {
        Ok(ago) => Ok(goad::runtime::wall_ms().saturating_sub(ago.as_millis() as u64)),
        Err(_) => Err(format!(
            "{text:?} is not a duration ago (30m, 2h, 1day), an RFC 3339 time (2026-12-05T10:00:00Z) nor unix ms"
        )),
    }
}

impl DeadLetterFilter {
    /// The filter and `more` parameters as a query string.
    pub fn query(&self, more: &[(&str, Option<String>)]) -> String {
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

/// `goad sinks` and `goad sources`: only one source's, or one tenant's,
/// whole or a page at a time.
#[derive(Args)]
pub struct SourceListing {
    /// Only this source's.
    #[arg(long, value_parser = non_empty())]
    source: Option<String>,
    /// Only this tenant's.
    #[arg(long, value_parser = non_empty())]
    tenant: Option<String>,
    /// At most this many (1 to 1000); all without it.
    #[arg(long)]
    limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    #[arg(long, value_parser = non_empty())]
    cursor: Option<String>,
}

impl SourceListing {
    /// The listing's query string.
    pub fn query(&self) -> String {
        let params = [
            ("source_id", self.source.clone()),
            ("tenant", self.tenant.clone()),
            ("limit", self.limit.map(|n| n.to_string())),
            ("cursor", self.cursor.clone()),
        ];
        query(params.iter())
    }
}

/// The parameters that have a value as a query string (`?a=1&b=2`, or
/// empty), values percent-encoded.
pub fn query<'a>(params: impl Iterator<Item = &'a (&'a str, Option<String>)>) -> String {
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
pub struct NodeArgs {
    /// The node's base URL (http:// or https://), or its HOST:PORT for
    /// http:// (the form of its `listen`).
    #[arg(long, env = "GOAD_NODE", default_value = "http://127.0.0.1:7878", value_parser = node_url)]
    pub node: String,
    /// The environment variable holding the node's admin token.
    #[arg(long, default_value = "GOAD_ADMIN_TOKEN")]
    pub token_env: String,
    /// An https:// node: trust the certificates of this PEM file (the CA
    /// that signed the node's) instead of Mozilla's roots.
    #[arg(long, env = "GOAD_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// An https:// node that asks for one (`http.tls_client_ca_file`):
    /// present this PEM certificate chain...
    #[arg(long, env = "GOAD_CLIENT_CERT")]
    pub client_cert: Option<PathBuf>,
    /// ...and this PEM private key.
    #[arg(long, env = "GOAD_CLIENT_KEY")]
    pub client_key: Option<PathBuf>,
}

/// A node's base URL from `--node`: an `http://` or `https://` URL (a
/// path kept, for a node behind a proxy's prefix), or `HOST:PORT`, read
/// as `http://HOST:PORT`.
fn node_url(text: &str) -> Result<String, String> {
    let url = match text.contains("://") {
        true => text.to_string(),
        false => format!("http://{text}"),
    };
    let uri = url.parse::<ureq::http::Uri>().ok();
    match uri.as_ref().map(|u| (u.scheme_str(), u.host())) {
        Some((Some("http" | "https"), Some(host))) if !host.is_empty() => Ok(url),
        _ => Err(
            "not a node's address: give http://HOST:PORT, https://HOST:PORT or HOST:PORT".into(),
        ),
    }
}

impl NodeArgs {
    pub fn client(&self) -> Result<NodeClient, ClientError> {
        let files = ClientTlsFiles {
            ca_file: self.ca_file.as_deref(),
            client_cert: self.client_cert.as_deref(),
            client_key: self.client_key.as_deref(),
        };
        let client = NodeClient::new(self.node.clone(), None)
            .with_token_from(&self.token_env)
            .with_tls(files);
        client.map_err(|e| ClientError(e.to_string()))
    }
}
