//! The rules every config must pass, each naming the dotted key and the
//! value: the node's, the dispatch windows', the retry policy's and each
//! source's here; a source's ingest checks are `ingest_auth`'s, its sinks'
//! `sink_checks`' (and how an HTTP sink authorizes, `sink_auth`'s).

use super::aws_role::aws_role;
use super::ingest_auth::{
    validate_ingest_handshake, validate_ingest_jwt, validate_ingest_signature,
};
use super::{ClaimCheckConfig, Config, OneOrMany, RetryConfig, SourceConfig, TenantLimitsConfig};
use crate::limits::{
    HTTP_MAX_HEADER_LINE_BYTES, HTTP_MAX_URL_BYTES, MAX_ATTEMPT_TIMEOUT_MS, MAX_BREAKER_OPEN_MS,
    MAX_COALESCE_MS, MAX_CONCURRENCY, MAX_CONFIG_PROBLEMS, MAX_DEDUPE_WINDOW_MS, MAX_HEAD_BYTES,
    MAX_RETRY_DELAY_MS, MAX_SHARD_BYTES, MIN_DEAD_RETENTION_MS, MIN_FREE_DISK_CEILING_BYTES,
    MIN_FREE_DISK_FLOOR_BYTES, MIN_REPLAY_RETENTION_MS, MIN_SHARD_BYTES,
};
use crate::sink::aws_credentials::CREDENTIAL_SOURCES;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// A config that cannot be used. Every variant names the key.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The TOML is malformed, a key is unknown or a value has the wrong type.
    Parse { key: String, message: String },
    /// A value is out of its range: `"<key> must be <rule>, got <value>"`.
    Invalid {
        key: String,
        rule: String,
        value: String,
    },
    /// Several values are: each section's first, and each source's ids',
    /// own keys' and sinks' first, in the file's order, at most `MAX_CONFIG_PROBLEMS` of them, and how many
    /// more there were.
    Several {
        problems: Vec<ConfigError>,
        more: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, source } => {
                write!(f, "cannot read config {}: {source}", path.display())
            }
            ConfigError::Parse { key, message } if key.is_empty() || key == "." => {
                write!(f, "config: {message}")
            }
            ConfigError::Parse { key, message } => write!(f, "config key {key}: {message}"),
            ConfigError::Invalid { key, rule, value } => {
                write!(f, "{key} must be {rule}, got {value}")
            }
            ConfigError::Several { problems, more } => {
                let shown = problems.iter().map(ToString::to_string);
                write!(f, "{}", shown.collect::<Vec<_>>().join("\n"))?;
                match more {
                    0 => Ok(()),
                    n => write!(f, "\n…and {n} more"),
                }
            }
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl ConfigError {
    /// The dotted key the error is about (empty for a file that cannot be
    /// read; the first one's of several).
    pub fn key(&self) -> &str {
        match self {
            ConfigError::Read { .. } => "",
            ConfigError::Parse { key, .. } | ConfigError::Invalid { key, .. } => key,
            ConfigError::Several { problems, .. } => problems.first().map_or("", ConfigError::key),
        }
    }

    /// `problems` as one error: none is `Ok`, one is itself.
    fn of(mut problems: Vec<ConfigError>) -> Result<(), ConfigError> {
        match problems.len() {
            0 => Ok(()),
            1 => Err(problems.remove(0)),
            n => {
                problems.truncate(MAX_CONFIG_PROBLEMS);
                let more = n - problems.len();
                Err(ConfigError::Several { problems, more })
            }
        }
    }
}

pub(crate) fn invalid(
    key: impl Into<String>,
    rule: impl Into<String>,
    value: impl fmt::Debug,
) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        rule: rule.into(),
        value: format!("{value:?}"),
    }
}

/// A path key's value, where it is set, refused where it cannot be what
/// was meant: empty; beginning with `~`, which only a shell expands (goad
/// would make or read a directory named `~` in its working directory);
/// or with whitespace at an end (a name no one types on purpose).
pub(crate) fn usable_path(key: impl Into<String>, path: Option<&Path>) -> Result<(), ConfigError> {
    let Some(path) = path else {
        return Ok(());
    };
    let text = path.to_string_lossy();
    let rule = match () {
        _ if text.is_empty() => "a non-empty path",
        _ if text.starts_with('~') => {
            "a path without a leading ~ (only a shell expands it: write the home directory out)"
        }
        _ if text.trim() != text => "a path without whitespace at its start or end",
        _ => return Ok(()),
    };
    Err(invalid(key, rule, path))
}

/// `value`, the config's `key`, is none of the `known` names its `rule`
/// lists: the error names the nearest of them, if one is near (`"githib"
/// (did you mean "github"?)`).
pub(super) fn unknown_name(
    key: String,
    rule: impl Into<String>,
    value: &str,
    known: &[&str],
) -> ConfigError {
    let value = match super::suggest::nearest(value, known.iter().copied()) {
        Some(name) => format!("{value:?} (did you mean {name:?}?)"),
        None => format!("{value:?}"),
    };
    ConfigError::Invalid {
        key,
        rule: rule.into(),
        value,
    }
}

/// `vars`, the config's `key`: a variable's name, or a list of them that
/// is not empty (several while a secret is rotated).
pub(super) fn env_name_list(key: String, vars: &OneOrMany) -> Result<(), ConfigError> {
    let names = vars.as_slice();
    if names.is_empty() {
        let rule = "an environment variable name, or a non-empty list of them";
        return Err(invalid(key, rule, format_args!("{vars}")));
    }
    for (i, name) in names.iter().enumerate() {
        match vars {
            OneOrMany::One(_) => env_name(key.clone(), name)?,
            OneOrMany::Many(_) => env_name(format!("{key}[{i}]"), name)?,
        }
    }
    Ok(())
}

/// `var`, the config's `key`, must be an environment variable's name:
/// letters, digits, `_`, `.` and `-`, not beginning with a digit (the
/// names a shell, systemd or Kubernetes sets), and not shaped as a
/// well-known kind of secret ([`secret_kind`]). A value that is not a
/// name is not shown: it is most likely the secret itself, written where
/// its variable's name goes, and errors are logged.
pub(super) fn env_name(key: String, var: &str) -> Result<(), ConfigError> {
    let is_name_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    let named = var.bytes().all(is_name_byte) && !var.starts_with(|c: char| c.is_ascii_digit());
    let hint = match (var.is_empty(), named, secret_kind(var)) {
        (true, _, _) => return Err(invalid(key, ENV_NAME_RULE, "")),
        (false, true, None) => return Ok(()),
        (false, true, Some(kind)) => format!("it is shaped as {kind}: "),
        (false, false, _) => String::new(),
    };
    Err(ConfigError::Invalid {
        key,
        rule: ENV_NAME_RULE.into(),
        value: format!(
            "a value not shown here ({hint}is it the secret itself, not its variable's name?)"
        ),
    })
}

/// The kind of well-known secret `value` is shaped as, if any: each is
/// a variable's name by its characters, and no variable is named so.
fn secret_kind(value: &str) -> Option<&'static str> {
    const PREFIXES: [(&str, &str); 13] = [
        ("whsec_", "a webhook signing key"),
        ("whsk_", "a webhook signing key"),
        ("sk_live_", "a Stripe key"),
        ("sk_test_", "a Stripe key"),
        ("rk_live_", "a Stripe key"),
        ("ghp_", "a GitHub token"),
        ("gho_", "a GitHub token"),
        ("ghs_", "a GitHub token"),
        ("github_pat_", "a GitHub token"),
        ("xoxb-", "a Slack token"),
        ("xoxp-", "a Slack token"),
        ("glpat-", "a GitLab token"),
        ("AIza", "a Google API key"),
    ];
    if let Some((_, kind)) = PREFIXES
        .iter()
        .find(|(prefix, _)| value.starts_with(prefix))
    {
        return Some(kind);
    }
    if value.starts_with("eyJ") && value.matches('.').count() == 2 {
        return Some("a JSON Web Token");
    }
    let aws_key_id = value.len() == 20
        && (value.starts_with("AKIA") || value.starts_with("ASIA"))
        && (value.bytes()).all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    aws_key_id.then_some("an AWS access key id")
}

/// What [`env_name`] takes.
const ENV_NAME_RULE: &str =
    "an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit)";

/// The value of the environment variable `var`, which the config's `key`
/// names: a variable that is unset or empty is an error naming both (an
/// operator who named one expects it read).
fn env_value(key: String, var: &str) -> Result<String, ConfigError> {
    let why = match std::env::var(var) {
        Ok(value) if !value.is_empty() => return Ok(value),
        Ok(_) => "empty",
        Err(_) => "not set",
    };
    Err(ConfigError::Invalid {
        key,
        rule: "the name of a set, non-empty environment variable".into(),
        value: format!("{var:?} ({why})"),
    })
}

/// The secret in the variable `var`, which the config's `key` names: set,
/// not empty, and with no space or line break at either end (a secret's
/// file may leave one, and no provider or receiver signs with it).
pub(crate) fn secret_value(key: String, var: &str) -> Result<String, ConfigError> {
    let secret = env_value(key.clone(), var)?;
    match secret.trim() == secret {
        true => Ok(secret),
        false => Err(invalid(
            key,
            "a variable holding a secret with no space or line break at either end \
             (a secret's file may leave one)",
            var,
        )),
    }
}

/// `value` (at `key`) must lie in `range`; else the error says `rule`.
fn within<T: PartialOrd + fmt::Debug>(
    key: impl Into<String>,
    value: T,
    range: std::ops::RangeInclusive<T>,
    rule: impl Into<String>,
) -> Result<(), ConfigError> {
    if !range.contains(&value) {
        return Err(invalid(key, rule, value));
    }
    Ok(())
}

fn at_least<T: PartialOrd + fmt::Debug + Copy>(
    key: &str,
    value: T,
    min: T,
    rule: &str,
) -> Result<(), ConfigError> {
    if value < min {
        return Err(invalid(key, rule, value));
    }
    Ok(())
}

/// A `dispatch.tenants.<id>` entry: a tenant id (or `default`) and
/// positive limits.
fn validate_tenant_limits(
    tenant: &str,
    limits: &TenantLimitsConfig,
    max_body_bytes: u64,
) -> Result<(), ConfigError> {
    if tenant != "default" && !is_id(tenant) {
        return Err(invalid(
            format!("dispatch.tenants.{tenant}"),
            "a tenant id of [A-Za-z0-9_-], 1 to 128 characters",
            tenant,
        ));
    }
    let key = |k: &str| format!("dispatch.tenants.{tenant}.{k}");
    if let Some(v) = limits.max_inflight {
        positive(&key("max_inflight"), v)?;
    }
    if let Some(v) = limits.max_inflight_bytes {
        positive(&key("max_inflight_bytes"), v)?;
    }
    if let Some(v) = limits.concurrency {
        positive(&key("concurrency"), v)?;
    }
    match limits.max_stored_bytes {
        Some(v) if v > 0 && v < max_body_bytes => Err(invalid(
            key("max_stored_bytes"),
            format!("0 (no bound) or at least max_body_bytes ({max_body_bytes}): a smaller bound would refuse a hook goad takes"),
            v,
        )),
        _ => Ok(()),
    }
}

/// `value` must be 1 or more.
pub(super) fn positive<T: PartialOrd + fmt::Debug + Copy + From<u8>>(
    key: &str,
    value: T,
) -> Result<(), ConfigError> {
    at_least(key, value, T::from(1), "a positive integer")
}

/// Largest body a hook may have (the store records sizes as u32).
const MAX_BODY_LIMIT_BYTES: u64 = u32::MAX as u64;

impl Config {
    /// Checks every rule with goad's own sink types only.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with_sinks(&[])
    }

    /// Checks every rule; `host_sinks` are the sink type names the embedding
    /// host registered with the engine. Every section's first problem and
    /// every source's are named at once (its ids', its own keys' and each
    /// sink's: a bad id hides no bad URL), so one reading of the error
    /// mends them all.
    pub fn validate_with_sinks(&self, host_sinks: &[&str]) -> Result<(), ConfigError> {
        let sections = [
            self.validate_node(),
            self.validate_http(),
            self.validate_retention(),
            crate::sink::Egress::of(&self.egress).map(drop),
            self.validate_notifications(),
            self.validate_claim_check(),
            self.validate_dispatch(),
            self.validate_retry(),
        ];
        let mut ids = HashSet::with_capacity(self.sources.len());
        let mut problems: Vec<ConfigError> = sections.into_iter().filter_map(Result::err).collect();
        for (i, source) in self.sources.iter().enumerate() {
            let at = format!("sources[{i}]");
            let sinks = (source.sinks.iter().enumerate()).map(|(j, sink)| {
                self.validate_sink(&format!("{at}.sinks[{j}]"), source, sink, host_sinks)
            });
            let checks = [
                validate_source_ids(&at, source, &mut ids),
                validate_source(&at, source),
            ];
            problems.extend(checks.into_iter().chain(sinks).filter_map(Result::err));
        }
        ConfigError::of(problems)
    }

    /// The node's own keys: ingest bodies, the data directory and its
    /// store's bounds, the admin token, `listen`, `shards`.
    fn validate_node(&self) -> Result<(), ConfigError> {
        at_least(
            "max_body_bytes",
            self.max_body_bytes,
            1,
            "an integer from 1 to 4294967295",
        )?;
        if self.max_body_bytes > MAX_BODY_LIMIT_BYTES {
            return Err(invalid(
                "max_body_bytes",
                "an integer from 1 to 4294967295",
                self.max_body_bytes,
            ));
        }
        usable_path("data_dir", Some(&self.data_dir))?;
        if let Some(vars) = &self.admin_token_env {
            env_name_list("admin_token_env".into(), vars)?;
        }
        if self.metrics.needs_admin_token && self.admin_token_env.is_none() {
            let rule = "false without admin_token_env (there is no token to need)";
            return Err(invalid("metrics.needs_admin_token", rule, true));
        }
        if !is_host_and_port(&self.listen) {
            let rule = "a host:port address (a port from 0 to 65535)";
            return Err(invalid("listen", rule, &self.listen));
        }
        // A store must hold several of the largest hooks.
        let min_shard_bytes = MIN_SHARD_BYTES.max(8 * self.max_body_bytes);
        within(
            "max_shard_bytes",
            self.max_shard_bytes,
            min_shard_bytes..=MAX_SHARD_BYTES,
            format!(
                "an integer from {min_shard_bytes} (16 MiB, and 8 × max_body_bytes) to {MAX_SHARD_BYTES}"
            ),
        )?;
        within(
            "min_free_disk_bytes",
            self.min_free_disk_bytes,
            MIN_FREE_DISK_FLOOR_BYTES..=MIN_FREE_DISK_CEILING_BYTES,
            format!(
                "an integer from {MIN_FREE_DISK_FLOOR_BYTES} (64 MiB) to {MIN_FREE_DISK_CEILING_BYTES} (1 PiB)"
            ),
        )?;
        if self.shards > crate::limits::MAX_SHARDS {
            return Err(invalid(
                "shards",
                format!("0 (one per core) or at most {}", crate::limits::MAX_SHARDS),
                self.shards,
            ));
        }
        Ok(())
    }

    /// The `[http]` front: its timeouts, bounds and TLS files.
    fn validate_http(&self) -> Result<(), ConfigError> {
        positive("http.read_timeout_ms", self.http.read_timeout_ms)?;
        positive("http.idle_timeout_ms", self.http.idle_timeout_ms)?;
        positive("http.max_connections", self.http.max_connections)?;
        let largest_request = (MAX_HEAD_BYTES as u64).saturating_add(self.max_body_bytes);
        let rule = format!(
            "at least one largest request, max_body_bytes ({}) and a {MAX_HEAD_BYTES}-byte head: {largest_request}",
            self.max_body_bytes
        );
        at_least(
            "http.max_buffered_bytes",
            self.http.max_buffered_bytes,
            largest_request,
            &rule,
        )?;
        let http = &self.http;
        let tls_files = [
            ("http.tls_cert_file", &http.tls_cert_file),
            ("http.tls_key_file", &http.tls_key_file),
            ("http.tls_client_ca_file", &http.tls_client_ca_file),
        ];
        for (key, file) in tls_files {
            usable_path(key, file.as_deref())?;
        }
        match (&http.tls_cert_file, &http.tls_key_file) {
            (Some(_), None) => {
                return Err(invalid(
                    "http.tls_key_file",
                    "set with http.tls_cert_file",
                    "absent",
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "http.tls_cert_file",
                    "set with http.tls_key_file",
                    "absent",
                ))
            }
            _ => {}
        }
        if let (Some(file), None) = (&http.tls_client_ca_file, &http.tls_cert_file) {
            let rule =
                "absent without http.tls_cert_file (only HTTPS asks for client certificates)";
            return Err(invalid("http.tls_client_ca_file", rule, file));
        }
        Ok(())
    }

    /// How long replays and dead letters are kept, and a replay's rate.
    fn validate_retention(&self) -> Result<(), ConfigError> {
        within(
            "replay.rate",
            self.replay.rate,
            1..=100_000,
            "an integer from 1 to 100000",
        )?;
        if self.replay.retention_ms < MIN_REPLAY_RETENTION_MS {
            return Err(invalid(
                "replay.retention_ms",
                "at least 1000",
                self.replay.retention_ms,
            ));
        }
        let retention_ms = self.dead_letters.retention_ms;
        if (1..MIN_DEAD_RETENTION_MS).contains(&retention_ms) {
            return Err(invalid(
                "dead_letters.retention_ms",
                "0 (keep dead letters until replayed or purged) or at least 1000",
                retention_ms,
            ));
        }
        Ok(())
    }

    /// The `[notifications]` source and coalescing window.
    fn validate_notifications(&self) -> Result<(), ConfigError> {
        if self.notifications.coalesce_ms > MAX_COALESCE_MS {
            return Err(invalid(
                "notifications.coalesce_ms",
                "an integer from 0 (each dead row told alone) to 86400000 (a day)",
                self.notifications.coalesce_ms,
            ));
        }
        if let Some(source) = &self.notifications.source {
            if !self.sources.iter().any(|s| &s.id == source) {
                let rule = "the id of one of the sources";
                return Err(invalid("notifications.source", rule, source));
            }
        }
        Ok(())
    }

    fn validate_claim_check(&self) -> Result<(), ConfigError> {
        let c = &self.claim_check;
        positive("claim_check.retention_ms", c.retention_ms)?;
        usable_path("claim_check.dir", c.dir.as_deref())?;
        match &c.s3_bucket {
            None => refuse_s3_keys_without_bucket(c),
            Some(bucket) => validate_s3_claims(c, bucket),
        }
    }

    fn validate_dispatch(&self) -> Result<(), ConfigError> {
        let d = &self.dispatch;
        positive("dispatch.batch", d.batch)?;
        within(
            "dispatch.concurrency",
            d.concurrency,
            1..=MAX_CONCURRENCY,
            format!(
                "an integer from 1 to {MAX_CONCURRENCY} (each shard runs its attempts on as many threads)"
            ),
        )?;
        positive("dispatch.max_inflight", d.max_inflight)?;
        positive("dispatch.max_inflight_bytes", d.max_inflight_bytes)?;
        within(
            "dispatch.attempt_timeout_ms",
            d.attempt_timeout_ms,
            1..=MAX_ATTEMPT_TIMEOUT_MS,
            format!("an integer from 1 to {MAX_ATTEMPT_TIMEOUT_MS} (an hour)"),
        )?;
        if d.sink_concurrency < 1 || d.sink_concurrency > d.concurrency {
            let rule = format!(
                "an integer from 1 to dispatch.concurrency ({})",
                d.concurrency
            );
            return Err(invalid(
                "dispatch.sink_concurrency",
                rule,
                d.sink_concurrency,
            ));
        }
        within(
            "dispatch.breaker_open_ms",
            d.breaker_open_ms,
            1..=MAX_BREAKER_OPEN_MS,
            format!("an integer from 1 to {MAX_BREAKER_OPEN_MS} (a day)"),
        )?;
        within(
            "dispatch.breaker_max_open_ms",
            d.breaker_max_open_ms,
            d.breaker_open_ms..=MAX_BREAKER_OPEN_MS,
            format!(
                "an integer from dispatch.breaker_open_ms ({}) to {MAX_BREAKER_OPEN_MS} (a day)",
                d.breaker_open_ms
            ),
        )?;
        for (tenant, limits) in &d.tenants {
            validate_tenant_limits(tenant, limits, self.max_body_bytes)?;
        }
        Ok(())
    }

    fn validate_retry(&self) -> Result<(), ConfigError> {
        validate_retry_policy("retry", &self.retry)
    }
}

/// A source's id, unique among those before it in `ids`, and its tenant's.
fn validate_source_ids<'c>(
    at: &str,
    source: &'c SourceConfig,
    ids: &mut HashSet<&'c str>,
) -> Result<(), ConfigError> {
    if !is_id(&source.id) {
        return Err(invalid(
            format!("{at}.id"),
            "a source id of [A-Za-z0-9_-], 1 to 128 characters",
            &source.id,
        ));
    }
    if !ids.insert(source.id.as_str()) {
        return Err(invalid(
            format!("{at}.id"),
            "unique among sources",
            &source.id,
        ));
    }
    if !is_id(&source.tenant) {
        return Err(invalid(
            format!("{at}.tenant"),
            "a tenant id of [A-Za-z0-9_-], 1 to 128 characters",
            &source.tenant,
        ));
    }
    Ok(())
}

/// A source's own keys but its ids (its sinks are checked one by one).
fn validate_source(at: &str, source: &SourceConfig) -> Result<(), ConfigError> {
    if let Some(vars) = &source.ingest_token_env {
        env_name_list(format!("{at}.ingest_token_env"), vars)?;
    }
    if let Some(var) = &source.ingest_verify_token_env {
        env_name(format!("{at}.ingest_verify_token_env"), var)?;
    }
    validate_ingest_signature(at, source)?;
    validate_ingest_handshake(at, source)?;
    if let Some(jwt) = &source.ingest_jwt {
        validate_ingest_jwt(at, source, jwt)?;
    }
    if let Some(header) = &source.dedupe_header {
        stored_header(format!("{at}.dedupe_header"), header)?;
    }
    if let Some(pointer) = &source.dedupe_json_pointer {
        let key = format!("{at}.dedupe_json_pointer");
        if !pointer.starts_with('/') {
            let rule = "a JSON pointer (RFC 6901) to the key in the body: /id, /message/messageId";
            return Err(invalid(key, rule, pointer));
        }
        if source.dedupe_header.is_some() {
            let rule = "absent with dedupe_header (a hook's dedupe key comes from one place)";
            return Err(invalid(key, rule, pointer));
        }
    }
    // A name goad never forwards would be allowed in vain: say so.
    for (k, name) in source.forward_headers.iter().flatten().enumerate() {
        let rule = "a header name goad forwards (not a credential, a framing header, \
                    content-type, or goad's own x-goad-* and webhook-*)";
        passed_header(format!("{at}.forward_headers[{k}]"), name, rule)?;
    }
    if let Some(window_ms) = source.dedupe_window_ms {
        within(
            format!("{at}.dedupe_window_ms"),
            window_ms,
            1..=MAX_DEDUPE_WINDOW_MS,
            format!(
                "an integer from 1 to {MAX_DEDUPE_WINDOW_MS} (30 days); without it, \
                 every hook is stored"
            ),
        )?;
    }
    if let Some(per_s) = source.max_ingest_per_s {
        positive(&format!("{at}.max_ingest_per_s"), per_s)?;
    }
    if source.sinks.len() > crate::limits::MAX_SINKS_PER_SOURCE {
        let rule = format!("at most {} sinks", crate::limits::MAX_SINKS_PER_SOURCE);
        return Err(invalid(format!("{at}.sinks"), rule, source.sinks.len()));
    }
    Ok(())
}

/// The S3 keys of `[claim_check]` without `s3_bucket`: none may be set.
fn refuse_s3_keys_without_bucket(c: &ClaimCheckConfig) -> Result<(), ConfigError> {
    let s3_only = [
        ("s3_region", c.s3_region.is_some()),
        ("s3_endpoint", c.s3_endpoint.is_some()),
        ("s3_prefix", c.s3_prefix.is_some()),
        ("credentials", c.credentials.is_some()),
        ("access_key_id_env", c.access_key_id_env.is_some()),
        ("secret_access_key_env", c.secret_access_key_env.is_some()),
        ("session_token_env", c.session_token_env.is_some()),
        ("role_arn", c.role_arn.is_some()),
        ("external_id", c.external_id.is_some()),
        ("role_session_name", c.role_session_name.is_some()),
    ];
    match s3_only.iter().find(|(_, set)| *set) {
        Some((key, _)) => {
            let rule = "absent without claim_check.s3_bucket";
            Err(invalid(format!("claim_check.{key}"), rule, "set"))
        }
        None => Ok(()),
    }
}

/// `[claim_check]` with `s3_bucket`: claims go to that bucket, in a
/// region, with credentials as an SQS sink's.
fn validate_s3_claims(c: &ClaimCheckConfig, bucket: &str) -> Result<(), ConfigError> {
    if c.dir.is_some() {
        let rule = "absent with claim_check.s3_bucket (claims go to one place)";
        return Err(invalid("claim_check.dir", rule, "set"));
    }
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if !bucket_ok {
        let rule = "an S3 bucket name: 3 to 63 lowercase letters, digits, '.' or '-'";
        return Err(invalid("claim_check.s3_bucket", rule, bucket));
    }
    check_region("claim_check.s3_region".into(), c.s3_region.as_ref())?;
    if let Some(endpoint) = &c.s3_endpoint {
        check_http_url("claim_check.s3_endpoint".into(), endpoint)?;
    }
    if let Some(prefix) = &c.s3_prefix {
        let ok = prefix.len() <= 256 && !prefix.contains("..") && !prefix.starts_with('/');
        if !ok {
            let rule = "at most 256 characters, not starting with '/' nor holding '..'";
            return Err(invalid("claim_check.s3_prefix", rule, prefix));
        }
    }
    credentials(
        "claim_check",
        &c.credentials,
        CREDENTIAL_SOURCES,
        [
            ("access_key_id_env", &c.access_key_id_env),
            ("secret_access_key_env", &c.secret_access_key_env),
            ("session_token_env", &c.session_token_env),
        ],
    )?;
    aws_role(
        "claim_check",
        &c.role_arn,
        &c.external_id,
        &c.role_session_name,
    )
}

/// A retry policy, `[retry]` or a sink's (with `[retry]`'s keys where it
/// sets none), its keys under `at`.
pub(super) fn validate_retry_policy(at: &str, r: &RetryConfig) -> Result<(), ConfigError> {
    within(
        format!("{at}.base_ms"),
        r.base_ms,
        0..=MAX_RETRY_DELAY_MS,
        format!("an integer from 0 to {MAX_RETRY_DELAY_MS} (30 days)"),
    )?;
    within(
        format!("{at}.max_ms"),
        r.max_ms,
        r.base_ms..=MAX_RETRY_DELAY_MS,
        format!(
            "an integer from {at}.base_ms ({}) to {MAX_RETRY_DELAY_MS} (30 days)",
            r.base_ms
        ),
    )?;
    positive(&format!("{at}.max_attempts"), r.max_attempts)?;
    positive(&format!("{at}.max_elapsed_ms"), r.max_elapsed_ms)
}

/// `name` (at `key`) is a header goad stores with the hook: a valid name,
/// not a credential or framing header (those are never stored).
pub(super) fn stored_header(key: String, name: &str) -> Result<(), ConfigError> {
    let rule = "a header goad stores with the hook (not a credential or framing header)";
    passed_header(key, name, rule)
}

/// `name` (at `key`) is a valid header name that goad stores and forwards;
/// else the error says `rule`.
fn passed_header(key: String, name: &str, rule: &str) -> Result<(), ConfigError> {
    let lower = name.to_ascii_lowercase();
    let named = ureq::http::HeaderName::from_bytes(lower.as_bytes()).is_ok();
    if !named || crate::sink::never_forwarded(&lower) {
        return Err(invalid(key, rule, name));
    }
    Ok(())
}

/// The config's `key`, `url`: an http:// or https:// URL with a host, no
/// longer than goad can send a request to (see [`url_fits`]).
pub(crate) fn check_http_url(key: String, url: &str) -> Result<(), ConfigError> {
    url_fits(&key, url)?;
    if !is_http_url(url) {
        let has_port = (url.parse::<ureq::http::Uri>()).is_ok_and(|u| port_of(&u).is_some());
        let authority = url.split_once("://").map_or("", |(_, rest)| {
            rest.split(['/', '?', '#']).next().unwrap_or_default()
        });
        let host = authority.rsplit('@').next().unwrap_or_default();
        let rule = if !host.is_ascii() {
            "an http:// or https:// URL with a host, in ASCII: a name beyond it is written as \
             its punycode (xn--…)"
        } else if url.contains(char::is_whitespace) {
            "an http:// or https:// URL with a host, and no space or line break (a space in a \
             path or query is written %20)"
        } else if has_port {
            "an http:// or https:// URL with a host and a port from 1 to 65535"
        } else {
            "an http:// or https:// URL with a host"
        };
        return Err(invalid(key, rule, url));
    }
    Ok(())
}

/// A URL, the config's `key` or the value of a variable it names, is at
/// most [`HTTP_MAX_URL_BYTES`] long as it is sent ([`ascii_url`]): a
/// request to a longer one could not be sent. The error gives its
/// length, not the URL (which may be a secret, and would fill the
/// message).
pub(crate) fn url_fits(key: &str, url: &str) -> Result<(), ConfigError> {
    let sent_bytes = ascii_url(url).len();
    if sent_bytes <= HTTP_MAX_URL_BYTES {
        return Ok(());
    }
    let rule = format!(
        "a URL of at most {HTTP_MAX_URL_BYTES} bytes (its request line is sent as a header line, of at most {HTTP_MAX_HEADER_LINE_BYTES})"
    );
    Err(invalid(
        key,
        rule,
        format_args!("a URL of {sent_bytes} bytes"),
    ))
}

/// `url` as a request can carry it: each character beyond ASCII (in its
/// path or query: a host is ASCII, see [`check_http_url`])
/// percent-encoded as its UTF-8 bytes, as a browser sends `/café` as
/// `/caf%C3%A9`. A request target holds ASCII alone (RFC 9112 §3.2), and a
/// strict server refuses the raw bytes (400).
pub(crate) fn ascii_url(url: &str) -> std::borrow::Cow<'_, str> {
    percent_encoding::utf8_percent_encode(url, &percent_encoding::AsciiSet::EMPTY).into()
}

/// Whether `url` is an http:// or https:// URL with a host, and a port
/// from 1 to 65535 where it gives one.
pub(crate) fn is_http_url(url: &str) -> bool {
    url.parse::<ureq::http::Uri>().is_ok_and(|u| {
        matches!(u.scheme_str(), Some("http" | "https"))
            && u.host().is_some_and(|h| !h.is_empty())
            && port_of(&u).is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0))
    })
}

/// The port a URL's authority gives, as written (`Uri::port` is `None`
/// for one that is no `u16`); `None` where it gives none.
fn port_of(uri: &ureq::http::Uri) -> Option<&str> {
    let authority = uri.authority()?.as_str();
    let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = host_and_port.rsplit_once(':')?;
    // An IPv6 literal's colons are inside its brackets.
    let after_host = host.ends_with(']') || !host.starts_with('[');
    (after_host && !port.is_empty()).then_some(port)
}

/// Where credentials come from (`credentials`, one of `sources`), and the
/// variables that hold them with `env` (the only source that reads them).
pub(super) fn credentials<const N: usize>(
    at: &str,
    credentials: &Option<String>,
    sources: &[&str],
    env_options: [(&str, &Option<String>); N],
) -> Result<(), ConfigError> {
    let source = credentials.as_deref().unwrap_or("env");
    if !sources.contains(&source) {
        let rule = format!("one of {sources:?}");
        let key = format!("{at}.credentials");
        return Err(unknown_name(key, rule, source, sources));
    }
    if source != "env" {
        if let Some((key, _)) = env_options.iter().find(|(_, var)| var.is_some()) {
            let rule = format!("absent with credentials = {source:?} (only env reads variables)");
            return Err(invalid(format!("{at}.{key}"), rule, "set"));
        }
    }
    env_names(at, env_options)
}

/// Options naming environment variables: each set one a name.
fn env_names<const N: usize>(
    at: &str,
    options: [(&str, &Option<String>); N],
) -> Result<(), ConfigError> {
    for (key, var) in options {
        if let Some(var) = var {
            env_name(format!("{at}.{key}"), var)?;
        }
    }
    Ok(())
}

/// An AWS region name (`us-east-1`).
/// What a region's name is, for the errors that refuse one.
pub(crate) const REGION_RULE: &str = "an AWS region name of lowercase letters, digits and '-'";

/// Refuses a `region` set at `key` that is not a region's name. Where none
/// is set, the environment names one when the clients are built (see
/// `sink::aws_region`).
pub(super) fn check_region(key: String, region: Option<&String>) -> Result<(), ConfigError> {
    match region {
        Some(region) if !is_region(region) => Err(invalid(key, REGION_RULE, region)),
        _ => Ok(()),
    }
}

pub(crate) fn is_region(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Tenant and source ids: `[A-Za-z0-9_-]`, 1 to 128 characters.
pub fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `listen` is `host:port` with a host (a name, an IPv4 address
/// or a bracketed IPv6 one) and a port that fits 16 bits; the node
/// resolves the name as it starts (`goad check` does not look it up).
fn is_host_and_port(listen: &str) -> bool {
    let Some((host, port)) = listen.rsplit_once(':') else {
        return false;
    };
    let host_ok = match host.strip_prefix('[') {
        Some(bracketed) => bracketed
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok()),
        None => !host.is_empty() && !host.contains(':'),
    };
    host_ok && port.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listen_address_is_a_host_and_a_16_bit_port() {
        for listen in [
            "127.0.0.1:7878",
            "0.0.0.0:0",
            "[::1]:7878",
            "goad.internal:443",
        ] {
            assert!(super::is_host_and_port(listen), "{listen}");
        }
        for listen in [
            "127.0.0.1:65536",
            "127.0.0.1",
            ":7878",
            "::1:7878",
            "[nope]:1",
            "h:",
        ] {
            assert!(!super::is_host_and_port(listen), "{listen}");
        }
    }

    #[test]
    fn a_secret_of_a_well_known_shape_is_not_taken_for_a_variable_name() {
        for (value, kind) in [
            (
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "a webhook signing key",
            ),
            ("sk_live_51H8xYz", "a Stripe key"),
            ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "a GitHub token"),
            ("xoxb-1234-5678-abcd", "a Slack token"),
            (
                "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
                "a Google API key",
            ),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln",
                "a JSON Web Token",
            ),
            ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
            ("ASIAIOSFODNN7EXAMPLE", "an AWS access key id"),
        ] {
            assert_eq!(super::secret_kind(value), Some(kind), "{value}");
        }
        for name in [
            "GOAD_SECRET",
            "WHSEC_KEY",
            "AKIA_KEY_ID_VARIABLE",
            "AKIAIOSFODNN7EXAMPL",
            "eyJ.only-one-dot",
            "github.token",
            "ASIA_PACIFIC_1",
        ] {
            assert_eq!(super::secret_kind(name), None, "{name}");
        }
    }
}
