//! goad's configuration: the `goad.toml` schema, its defaults and its loading.
//!
//! Every key has the reference system's default (see `DESIGN.md` §4 and the
//! reference notes §2). [`Config::validate`] checks every rule and names the
//! dotted key and the bad value; an unknown key is an error at parse time.
//! Secrets are never part of the config: a sink or source names the
//! environment variable that holds one.
//!
//! This module holds the node's and the dispatch's sections; a source entry
//! and its sinks are [`SourceConfig`] and [`SinkConfig`].

mod aws_role;
mod ingest_auth;
mod sink_auth;
mod sink_checks;
mod source;
mod sources;
pub(crate) mod suggest;
mod validate;

use crate::bounded_read::read_text_at_most;
use crate::limits::MAX_CONFIG_FILE_BYTES;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use sink_checks::tls_files_need_https;
pub use source::{
    ClientAuth, GoogleIdTokenConfig, HeaderFilter, HmacSignature, IngestJwt, IngestSignature,
    OAuth2Config, OneOrMany, SinkConfig, SinkRetryConfig, SourceConfig,
};
pub use sources::Sources;
pub(crate) use validate::{ascii_url, is_http_url, secret_value, url_fits};
pub(crate) use validate::{invalid, is_region, REGION_RULE};
pub use validate::{is_id, ConfigError};

/// The whole node configuration.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the shard environments live (`<data_dir>/shard-<k>/`).
    pub data_dir: PathBuf,
    /// The node's HTTP listen address (`goad serve`).
    pub listen: String,
    /// Shard threads; 0 means one per core for a new data directory, and
    /// the count a data directory was made with for one that has stores
    /// (`runtime::shards_to_open`). Fixed when a data directory is created.
    pub shards: usize,
    /// Whether each shard thread is pinned to a core (shard k to the k-th
    /// core the process may run on). Off lets the OS place the shards:
    /// faster where the store's disk interrupts another CPU than a shard's
    /// after every sync (docs/performance.md, "Shards pinned or not").
    pub pin_shards: bool,
    /// Ingest bodies above this get 413 from the node; also the largest hook `commit` takes.
    pub max_body_bytes: u64,
    /// The most a shard's store may hold (its LMDB map; the file grows as it
    /// fills). New hooks may fill 7/8 of it: past that, commits are refused
    /// (503 `store_full`) until deliveries free room.
    pub max_shard_bytes: u64,
    /// What new hooks leave free on the file system holding `data_dir`,
    /// for the writes that record deliveries: past it, commits are refused
    /// (503 `disk_full`) until room is freed (see `store::fill`).
    pub min_free_disk_bytes: u64,
    /// The environment variable holding the admin API's bearer token (or
    /// several, each holding a token the API takes, while one is rotated).
    pub admin_token_env: Option<OneOrMany>,
    pub http: HttpConfig,
    pub replay: ReplayConfig,
    pub dead_letters: DeadLettersConfig,
    pub claim_check: ClaimCheckConfig,
    pub egress: EgressConfig,
    pub metrics: MetricsConfig,
    pub notifications: NotificationsConfig,
    pub dispatch: DispatchConfig,
    pub retry: RetryConfig,
    pub sources: Sources,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("goad-data"),
            listen: "127.0.0.1:7878".to_string(),
            shards: 0,
            pin_shards: true,
            max_body_bytes: crate::limits::DEFAULT_MAX_BODY_BYTES,
            max_shard_bytes: crate::limits::DEFAULT_MAX_SHARD_BYTES,
            min_free_disk_bytes: crate::limits::DEFAULT_MIN_FREE_DISK_BYTES,
            admin_token_env: None,
            http: HttpConfig::default(),
            replay: ReplayConfig::default(),
            dead_letters: DeadLettersConfig::default(),
            claim_check: ClaimCheckConfig::default(),
            egress: EgressConfig::default(),
            metrics: MetricsConfig::default(),
            notifications: NotificationsConfig::default(),
            dispatch: DispatchConfig::default(),
            retry: RetryConfig::default(),
            sources: Sources::default(),
        }
    }
}

/// The node's HTTP front (`[http]`; goad's addition to DESIGN §4).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct HttpConfig {
    /// A request's head and body must arrive within this from its first byte
    /// (slow clients get 408 and are closed).
    pub read_timeout_ms: u64,
    /// A keep-alive connection with no request in progress is closed after this.
    pub idle_timeout_ms: u64,
    /// Open connections; more are refused with 503 and closed.
    pub max_connections: usize,
    /// The request bytes the connections may hold at once, across them:
    /// a request larger than a head waits, unread, until its size fits
    /// (see `node::http::read_budget`).
    pub max_buffered_bytes: u64,
    /// Serve HTTPS: the PEM certificate chain (the node's first) and the
    /// PEM private key, both or neither; read at start and at each reload.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    /// With HTTPS: a PEM file of root certificates every client must
    /// present a certificate chaining to (mutual TLS); read at start and
    /// at each reload.
    pub tls_client_ca_file: Option<PathBuf>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            max_connections: 1_024,
            max_buffered_bytes: 256 * 1024 * 1024,
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
        }
    }
}

/// The claim check (`[claim_check]`): where the bodies too large to go
/// inline in a queue sink's message are kept (see `claim_check`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct ClaimCheckConfig {
    /// The directory of the claims; by default `<data_dir>/claims`.
    pub dir: Option<PathBuf>,
    /// A claim not checked in again for this long is deleted (7 days by
    /// default): consumers must redeem claims within it.
    pub retention_ms: u64,
    /// An S3-compatible bucket to keep claims in instead of `dir`: objects
    /// `<s3_prefix><tenant>/<sha256>`.
    pub s3_bucket: Option<String>,
    /// The bucket's region (signing); by default the environment's
    /// (`AWS_REGION`…, see `sink::aws_region`), one of which `s3_bucket`
    /// needs.
    pub s3_region: Option<String>,
    /// Where S3 requests go (path-style), by default
    /// `https://s3.<region>.amazonaws.com`.
    pub s3_endpoint: Option<String>,
    pub s3_prefix: Option<String>,
    /// Where the bucket's credentials come from: `env` (the default),
    /// `instance`, `container`, `web_identity` or `profile`.
    pub credentials: Option<String>,
    /// With `env`, the environment variables holding the bucket's
    /// credentials, by default `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
    /// and `AWS_SESSION_TOKEN`.
    pub access_key_id_env: Option<String>,
    pub secret_access_key_env: Option<String>,
    pub session_token_env: Option<String>,
    /// A role to assume for the bucket, as for an SQS sink (`role_arn`,
    /// `external_id`, `role_session_name`).
    pub role_arn: Option<String>,
    pub external_id: Option<String>,
    pub role_session_name: Option<String>,
}

impl Default for ClaimCheckConfig {
    fn default() -> Self {
        ClaimCheckConfig {
            dir: None,
            retention_ms: crate::limits::CLAIM_RETENTION_MS,
            s3_bucket: None,
            s3_region: None,
            s3_endpoint: None,
            s3_prefix: None,
            credentials: None,
            access_key_id_env: None,
            secret_access_key_env: None,
            session_token_env: None,
            role_arn: None,
            external_id: None,
            role_session_name: None,
        }
    }
}

impl Config {
    /// The defaults with source `s` of tenant `t` delivering to `sinks`, for tests.
    #[cfg(test)]
    pub(crate) fn with_one_source(sinks: Vec<SinkConfig>) -> Config {
        let mut config = Config::default();
        config.sources.push(SourceConfig::new("s", "t", sinks));
        config
    }

    /// The claim check's directory.
    pub fn claim_dir(&self) -> PathBuf {
        self.claim_check
            .dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("claims"))
    }
}

/// Replay pacing (used by the node's replay jobs).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct ReplayConfig {
    /// Rows revived per second.
    pub rate: u32,
    /// Replays back off while the oldest due row is older than this.
    pub max_lag_ms: u64,
    /// A replay that is done is forgotten (its file and counters deleted)
    /// this long after it finished: replays of one hook each, as a
    /// "retry this delivery" button makes them, do not pile up.
    pub retention_ms: u64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            rate: 1_000,
            max_lag_ms: 2_000,
            retention_ms: crate::limits::DEFAULT_REPLAY_RETENTION_MS,
        }
    }
}

/// Dead letters (`[dead_letters]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct DeadLettersConfig {
    /// Rows dead longer than this are deleted by their shard, each hook
    /// with its last row; 0 (the default) keeps them until replayed or purged.
    pub retention_ms: u64,
}

/// Where HTTP sinks may connect (`[egress]`, goad's addition).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct EgressConfig {
    /// HTTP sinks connect to public addresses only: an attempt whose host
    /// resolves to loopback, private, link-local (the cloud metadata
    /// service) or other non-public addresses fails permanently. Off by
    /// default (receivers on the node's own networks are common).
    pub deny_private_addresses: bool,
    /// Private networks HTTP sinks may reach all the same, as
    /// `address/prefix length` (`10.20.0.0/16`, `fd00:1::/48`) or single
    /// addresses: the operator's own receivers beside customers' URLs.
    /// Nothing is denied without `deny_private_addresses`.
    pub allow_private_networks: Vec<String>,
}

/// A node's notices to its operator (`[notifications]`, goad's addition).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct NotificationsConfig {
    /// A configured source to which the node commits a `row.dead` event
    /// for every row dead-lettered (but that source's own), delivered by
    /// its sinks as any hook: a chat webhook, an incident tool, a queue.
    pub source: Option<String>,
    /// After a sink's row is told dead, its further dead rows within this
    /// window are told together, in one `rows.dead` event at the window's
    /// end (a window that told of rows opens another; 0: each row alone),
    /// so a receiver down for a day is not a storm of notices.
    pub coalesce_ms: u64,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            source: None,
            coalesce_ms: 60_000,
        }
    }
}

/// What a node's `/metrics` shows (`[metrics]`, goad's addition).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct MetricsConfig {
    /// Which series each configured sink has.
    pub per_sink: PerSinkMetrics,
    /// Whether `/metrics` needs the admin token as the admin routes do
    /// (its series name tenants and sources); open by default, as
    /// Prometheus endpoints are.
    pub needs_admin_token: bool,
}

/// A sink's series in `/metrics`: each of its two histograms is ~30
/// series, so a node with thousands of sinks may keep only the counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PerSinkMetrics {
    /// Outcomes, breaker, attempt durations and delivery latencies.
    #[default]
    All,
    /// Outcomes and breaker: five series a sink.
    Counts,
    /// None (`/v1/sinks` still answers with everything).
    Off,
}

impl<'de> Deserialize<'de> for PerSinkMetrics {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        use PerSinkMetrics::*;
        suggest::named(de, &["all", "counts", "off"], &[All, Counts, Off])
    }
}

/// The dispatch pipeline's limits (`[dispatch]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct DispatchConfig {
    /// Rows claimed per scan of the due index (one page).
    pub batch: u32,
    /// Attempts running at once on the node.
    pub concurrency: u32,
    /// Claimed, unfinished rows on the node.
    pub max_inflight: u32,
    /// Sum of the stored hook sizes of claimed, unfinished rows on the node.
    pub max_inflight_bytes: u64,
    /// An attempt still running after this fails as `attempt_timeout`.
    pub attempt_timeout_ms: u64,
    /// Attempts running at once for one sink key {tenant, source, sink index, sink type}.
    pub sink_concurrency: u32,
    /// Consecutive failures that open a key's breaker; 0 disables breakers.
    pub breaker_failures: u32,
    /// First open period of a breaker.
    pub breaker_open_ms: u64,
    /// Longest open period (the period doubles per consecutive open).
    pub breaker_max_open_ms: u64,
    /// Per-tenant windows: `default` and one table per tenant id.
    pub tenants: BTreeMap<String, TenantLimitsConfig>,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            batch: 128,
            concurrency: 32,
            max_inflight: 4_096,
            max_inflight_bytes: 128 * 1024 * 1024,
            attempt_timeout_ms: 30_000,
            sink_concurrency: 8,
            breaker_failures: 5,
            breaker_open_ms: 30_000,
            breaker_max_open_ms: 300_000,
            tenants: BTreeMap::new(),
        }
    }
}

/// The limits of one tenant, as written (missing fields fall back to
/// `dispatch.tenants.default`, then to [`TenantLimits::DEFAULT`]).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct TenantLimitsConfig {
    pub max_inflight: Option<u32>,
    pub max_inflight_bytes: Option<u64>,
    pub concurrency: Option<u32>,
    pub max_stored_bytes: Option<u64>,
}

/// The resolved limits of one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantLimits {
    /// Claimed, unfinished rows of the tenant.
    pub max_inflight: u32,
    /// Sum of stored hook sizes of the tenant's claimed rows.
    pub max_inflight_bytes: u64,
    /// The tenant's attempts running at once.
    pub concurrency: u32,
    /// The bytes the tenant's stored hooks (pending or dead) may hold in a
    /// shard's store before its ingest is refused; 0: no bound but the
    /// store's own.
    pub max_stored_bytes: u64,
}

impl TenantLimits {
    /// A tenant may hold a quarter of the default node window and half of its
    /// attempts, so one slow tenant leaves most of the node to the others
    /// while a lone busy tenant still keeps a loopback sink saturated.
    pub const DEFAULT: TenantLimits = TenantLimits {
        max_inflight: 1_024,
        max_inflight_bytes: 32 * 1024 * 1024,
        concurrency: 16,
        max_stored_bytes: 0,
    };
}

impl DispatchConfig {
    /// The limits of `tenant`: its own table, then `default`, then [`TenantLimits::DEFAULT`].
    pub fn tenant_limits(&self, tenant: &str) -> TenantLimits {
        let base = self.tenants.get("default");
        let own = self.tenants.get(tenant);
        let pick = |f: fn(&TenantLimitsConfig) -> Option<u64>, fallback: u64| {
            own.and_then(f)
                .or_else(|| base.and_then(f))
                .unwrap_or(fallback)
        };
        let d = TenantLimits::DEFAULT;
        TenantLimits {
            max_inflight: pick(|t| t.max_inflight.map(u64::from), d.max_inflight.into()) as u32,
            max_inflight_bytes: pick(|t| t.max_inflight_bytes, d.max_inflight_bytes),
            concurrency: pick(|t| t.concurrency.map(u64::from), d.concurrency.into()) as u32,
            max_stored_bytes: pick(|t| t.max_stored_bytes, d.max_stored_bytes),
        }
    }
}

/// The retry policy (`[retry]`): exponential backoff with jitter.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub struct RetryConfig {
    /// Delay after the first failed attempt.
    pub base_ms: u64,
    /// Cap of a delay before jitter.
    pub max_ms: u64,
    /// Total attempts a row gets; the last failure dead-letters it.
    pub max_attempts: u32,
    /// Multiply each delay by a random factor in [0.5, 1.0).
    pub jitter: bool,
    /// The horizon: no row is retried or parked past its first attempt + this.
    pub max_elapsed_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            base_ms: 100,
            max_ms: 300_000,
            max_attempts: 84,
            jitter: true,
            max_elapsed_ms: 24 * 60 * 60 * 1000,
        }
    }
}

impl Config {
    /// Parses a TOML document; unknown keys and ill-typed values are errors
    /// that name the dotted key (an unknown one with the known key nearest
    /// to it, when one is near). Does not validate ranges (see [`Config::validate`]).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        // toml's messages end their span's picture with a line break.
        let shown = |e: &toml::de::Error| e.to_string().trim_end().to_string();
        let de = toml::Deserializer::parse(text).map_err(|e| ConfigError::Parse {
            key: String::new(),
            message: shown(&e),
        })?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let mut message = shown(e.inner());
            let path: Vec<_> = e.path().iter().cloned().collect();
            if let Some(hint) = suggest::hint(e.inner().message(), &path) {
                message += &format!("\n{hint}");
            }
            ConfigError::Parse {
                key: e.path().to_string(),
                message,
            }
        })
    }

    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with_sinks(path, &[])
    }

    /// [`Config::load`] for an engine whose host registered sinks of the
    /// types `host_sinks` (see [`Config::validate_with_sinks`]).
    pub fn load_with_sinks(path: &Path, host_sinks: &[&str]) -> Result<Config, ConfigError> {
        let text = read_text_at_most(path, MAX_CONFIG_FILE_BYTES);
        let text = text.map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let config = Config::from_toml(&text)?;
        config.validate_with_sinks(host_sinks)?;
        Ok(config)
    }

    /// The shard count for a new data directory: `shards`, or one per
    /// core when 0 (an engine opens one that has stores with the count it
    /// was made with: `runtime::shards_to_open`).
    pub fn shard_count(&self) -> usize {
        if self.shards > 0 {
            self.shards
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    /// The source with this id.
    pub fn source(&self, id: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.id == id)
    }

    /// What is valid but most likely a mistake, one sentence each: no
    /// source at all (a node that takes no hook), a source without
    /// sinks, whose hooks are acknowledged and stored nowhere, and two
    /// sinks of a source that deliver every hook to one place (a sink
    /// copied and not changed; to a FIFO queue, SQS drops the second as a
    /// duplicate of the first). `goad check` prints these;
    /// a node logs them at start and after each reload.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.sources.is_empty() {
            warnings.push(
                "no sources: every ingest is answered 404 unknown_source (a source is a [[sources]] table with its id and its sinks)".to_string(),
            );
        }
        for (i, source) in self.sources.iter().enumerate() {
            if source.sinks.is_empty() {
                warnings.push(format!(
                    "sources[{i}] ({:?}) has no sinks: its hooks are answered 202 and stored nowhere",
                    source.id
                ));
            }
            for (k, sink) in source.sinks.iter().enumerate() {
                warnings.extend(sink.written_credentials(&format!("sources[{i}].sinks[{k}]")));
                let mut earlier = source.sinks[..k].iter();
                if let Some(twin) = earlier.position(|other| other.delivers_as(sink)) {
                    warnings.push(format!(
                        "sources[{i}].sinks[{k}] delivers to the place sources[{i}].sinks[{twin}] does, and neither has a filter: each hook goes there twice"
                    ));
                }
            }
        }
        warnings
    }
}
