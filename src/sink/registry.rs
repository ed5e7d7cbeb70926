//! The sinks of every source, built from the config and the host's own
//! sinks. Built again on reconfiguration, keeping each sink whose options
//! did not change; options are never stored with rows, so a fixed sink
//! applies to its backlog.

use super::assume_role::RoleToAssume;
use super::aws_credentials::{AwsCredentials, EnvCredentials};
use super::aws_endpoint::{AwsService, ConfiguredEndpoints};
use super::aws_region::EnvironmentRegion;
use super::client::{client_certificate, root_certificates};
use super::egress::Egress;
use super::gcp_id_token::GoogleIdToken;
use super::gcp_token::{PubSubAuth, KEY_FILE_VARIABLE};
use super::http::{HttpSink, HttpSinkOptions, InvalidHttpSink, Method};
use super::jwt_key::JwtKey;
use super::oauth2::{ClientCredential, ClientCredentials};
use super::pubsub::{PubSubSink, PubSubSinkOptions};
use super::pubsub_emulator::emulator_endpoint;
use super::shared_clients::{PooledClient, SharedClients};
use super::shared_credentials::SharedCredentials;
use super::signing::SigningKey;
use super::sigv4::AwsSigning;
use super::sqs::{region_of, SqsSink, SqsSinkOptions};
use super::ClaimingSink;
use super::Sink;
use crate::claim_check::ClaimStore;
use crate::config::{
    ascii_url, invalid, is_http_url, secret_value, tls_files_need_https, url_fits, Config,
    ConfigError, SinkConfig, SourceConfig,
};
use crate::core::{Catalog, LaneBy, SinkKey};
use crate::limits::{
    HTTP_MAX_RESPONSE_BYTES, HTTP_TIMEOUT_MS, INLINE_MAX_BYTES, MAX_BATCH_ENTRIES, PUBSUB_ENDPOINT,
    PUBSUB_MAX_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES,
};
use crate::pem::PemFile;
use std::collections::{HashMap, HashSet};
use std::num::NonZeroU16;
use std::sync::Arc;
use ureq::tls::{ClientCert, RootCerts};

/// Host sinks by type name.
pub type HostSinks = HashMap<String, Arc<dyn Sink>>;

/// Every source's sinks, in index order (looked up per attempt, by `&str`).
#[derive(Default, Clone)]
pub struct SinkRegistry {
    sinks: HashMap<Arc<str>, Vec<Built>>,
}

/// A sink, with its batch size as it said when built and, for a sink goad
/// builds from options, what it was built from.
#[derive(Clone)]
struct Built {
    sink: Arc<dyn Sink>,
    /// Its `type`, which a row's key names too.
    kind: Arc<str>,
    batch_max_entries: Option<NonZeroU16>,
    recipe: Option<Recipe>,
}

/// The options a sink of goad's was built from. A reload reads every
/// sink's options again (its secrets and files too) and keeps the sink it
/// has when they are the same, so an unchanged sink keeps its kept-alive
/// connections and its OAuth 2 token, AWS credentials or Google token; a
/// changed one is built anew.
#[derive(Clone)]
enum Recipe {
    /// With the client its sink sends through (see `shared_clients`).
    Http(HttpSinkOptions, PooledClient),
    Sqs(SqsSinkOptions),
    PubSub(PubSubSinkOptions),
}

impl Recipe {
    fn same_as(&self, other: &Recipe) -> bool {
        match (self, other) {
            (Recipe::Http(a, a_client), Recipe::Http(b, b_client)) => {
                a.same_as(b) && a_client.idle_connections == b_client.idle_connections
            }
            (Recipe::Sqs(a), Recipe::Sqs(b)) => a.same_as(b),
            (Recipe::PubSub(a), Recipe::PubSub(b)) => a.same_as(b),
            _ => false,
        }
    }
}

/// The sinks of the registry a reload replaces, each kept at most once.
struct Kept<'a> {
    previous: &'a SinkRegistry,
    taken: HashSet<(&'a str, usize)>,
}

impl<'a> Kept<'a> {
    /// A sink of `source_id` built from the same options, not kept yet.
    fn take(&mut self, source_id: &str, recipe: &Recipe) -> Option<Built> {
        let (source_id, sinks) = self.previous.sinks.get_key_value(source_id)?;
        let (index, built) = sinks.iter().enumerate().find(|(index, built)| {
            !self.taken.contains(&(&**source_id, *index))
                && built.recipe.as_ref().is_some_and(|r| r.same_as(recipe))
        })?;
        self.taken.insert((source_id, index));
        Some(built.clone())
    }

    /// The sink of `source` built from `recipe`: the one kept, else a new one.
    fn or_build(
        &mut self,
        source: &SourceConfig,
        recipe: Recipe,
        entry: &SinkConfig,
        claims: &Arc<ClaimStore>,
        at: &str,
    ) -> Result<Built, ConfigError> {
        if let Some(built) = self.take(&source.id, &recipe) {
            return Ok(built);
        }
        let sink = built_from(&recipe, entry, at)?;
        claiming(sink, Some(recipe), claims, &entry.kind, at)
    }
}

impl SinkRegistry {
    /// Builds every sink, keeping those of `previous` (the registry a
    /// reload replaces) whose options did not change. Secrets are read
    /// from the environment now; a missing or bad one is a config error
    /// naming its key, as is a proxy variable goad's clients would pass
    /// over or roots named that do not load (when any client is
    /// built: a host's sinks are the host's; `AWS_CA_BUNDLE` when an AWS
    /// service's is).
    pub fn build(
        config: &Config,
        host: &HostSinks,
        claims: &Arc<ClaimStore>,
        previous: &SinkRegistry,
    ) -> Result<SinkRegistry, ConfigError> {
        let mut sinks = HashMap::new();
        let mut kept = Kept {
            previous,
            taken: HashSet::new(),
        };
        let egress = Egress::of(&config.egress)?;
        let goads_own = || {
            let entries = config.sources.iter().flat_map(|s| &s.sinks);
            entries.filter(|entry| host.get(&entry.kind).is_none())
        };
        let in_s3 = claims.aws_credentials().is_some();
        if goads_own().next().is_some() || in_s3 {
            super::client::check_client_environment()?;
        }
        let aws = |entry: &SinkConfig| entry.kind == "sqs" || entry.aws_service.is_some();
        let mut endpoints = ConfiguredEndpoints::default();
        if goads_own().any(aws) || in_s3 {
            crate::trusted_roots::check_aws_roots()?;
            endpoints = ConfiguredEndpoints::read()?;
        }
        let mut shared = previous.shared_credentials();
        let mut regions = EnvironmentRegion::default();
        let mut clients = previous.shared_clients(config.dispatch.concurrency as usize);
        if let Some(bucket) = claims.aws_credentials() {
            shared.aws(bucket.clone());
        }
        for (i, source) in config.sources.iter().enumerate() {
            for (j, entry) in source.sinks.iter().enumerate() {
                let at = format!("sources[{i}].sinks[{j}]");
                let built = match host.get(&entry.kind) {
                    Some(sink) => claiming(sink.clone(), None, claims, &entry.kind, &at)?,
                    None => match entry.kind.as_str() {
                        "http" => {
                            let options = http_options(
                                config,
                                &egress,
                                &mut shared,
                                &mut regions,
                                source,
                                entry,
                                &at,
                            )?;
                            let client = clients.client(options.connections());
                            let recipe = Recipe::Http(options, client);
                            kept.or_build(source, recipe, entry, claims, &at)?
                        }
                        "sqs" => {
                            let options = sqs_options(
                                config,
                                &mut shared,
                                &mut regions,
                                &endpoints,
                                source,
                                entry,
                                &at,
                            )?;
                            kept.or_build(source, Recipe::Sqs(options), entry, claims, &at)?
                        }
                        "pubsub" => {
                            let options = pubsub_options(config, &mut shared, source, entry, &at)?;
                            kept.or_build(source, Recipe::PubSub(options), entry, claims, &at)?
                        }
                        _ => {
                            return Err(ConfigError::Invalid {
                                key: format!("{at}.type"),
                                rule: "http, sqs, pubsub or a sink registered by the host".into(),
                                value: format!("{:?}", entry.kind),
                            });
                        }
                    },
                };
                sinks
                    .entry(Arc::from(source.id.as_str()))
                    .or_insert_with(Vec::new)
                    .push(built);
            }
        }
        Ok(SinkRegistry { sinks })
    }

    /// The credentials its sinks hold, to share with a registry that
    /// replaces it.
    fn shared_credentials(&self) -> SharedCredentials {
        let mut shared = SharedCredentials::default();
        let recipes = self
            .sinks
            .values()
            .flatten()
            .filter_map(|b| b.recipe.as_ref());
        for recipe in recipes {
            match recipe {
                Recipe::Http(options, _) => {
                    if let Some(grant) = &options.oauth2 {
                        shared.oauth2(grant.clone());
                    }
                    if let Some(tokens) = &options.google_id_token {
                        shared.id_token(tokens.clone());
                    }
                    if let Some(signing) = &options.aws_signing {
                        shared.aws(signing.credentials.clone());
                    }
                }
                Recipe::Sqs(options) => _ = shared.aws(options.credentials.clone()),
                Recipe::PubSub(options) => _ = shared.pubsub(options.auth.clone()),
            }
        }
        shared
    }

    /// Its HTTP sinks' clients, to share with a registry that replaces it;
    /// new ones keep at least `pool_connections` idle.
    fn shared_clients(&self, pool_connections: usize) -> SharedClients {
        let mut clients = SharedClients::new(pool_connections);
        for built in self.sinks.values().flatten() {
            if let Some(Recipe::Http(options, client)) = &built.recipe {
                clients.hold(options.connections(), client.clone());
            }
        }
        clients
    }

    /// The most connections goad's sinks can keep open at once, with each
    /// sink running up to `sink_concurrency` calls: a pool keeps no more
    /// connections idle than its sinks ran at once, and no more than its
    /// size, and HTTP sinks posting to one host share a pool (a host's own
    /// sinks' connections are the host's to count).
    pub(crate) fn connections_bound(&self, sink_concurrency: usize) -> usize {
        let mut http = Vec::new();
        let mut own = 0;
        for built in self.sinks.values().flatten() {
            match &built.recipe {
                Some(Recipe::Http(options, client)) => {
                    http.push((options.connections(), client.idle_connections));
                }
                Some(
                    Recipe::Sqs(SqsSinkOptions {
                        idle_connections, ..
                    })
                    | Recipe::PubSub(PubSubSinkOptions {
                        idle_connections, ..
                    }),
                ) => own += (*idle_connections).min(sink_concurrency),
                None => {}
            }
        }
        let pools = super::shared_clients::pools(http).into_iter();
        own + pools
            .map(|(idle, sinks)| idle.min(sinks.saturating_mul(sink_concurrency)))
            .sum::<usize>()
    }

    /// What the environment lacks for the credentials `config`'s sinks
    /// and `claims`' bucket read at each request — AWS keys from variables
    /// (an assumed role's base keys too) and a Pub/Sub `token_env` — one
    /// line each, naming the sink (`sources[i].sinks[j]`) or `claim_check`.
    /// A start does not need them, and the requests that need them fail
    /// until they are there: `goad check --environment` warns of each, and
    /// a node logs them as it starts and after a reload. Nothing is
    /// fetched.
    pub fn credential_problems(&self, config: &Config, claims: &ClaimStore) -> Vec<String> {
        let aws = |c: &AwsCredentials| c.environment_problem().map(|e| e.to_string());
        let mut problems = Vec::new();
        for (i, source) in config.sources.iter().enumerate() {
            let built = self.sinks.get(source.id.as_str()).into_iter().flatten();
            for (j, built) in built.enumerate() {
                let problem = match &built.recipe {
                    Some(Recipe::Sqs(options)) => aws(&options.credentials),
                    Some(Recipe::Http(options, _)) => {
                        (options.aws_signing.as_ref()).and_then(|s| aws(&s.credentials))
                    }
                    Some(Recipe::PubSub(options)) => {
                        options.auth.environment_problem().map(|e| e.to_string())
                    }
                    None => None,
                };
                problems.extend(problem.map(|e| format!("sources[{i}].sinks[{j}]: {e}")));
            }
        }
        let bucket = claims.aws_credentials().and_then(aws);
        problems.extend(bucket.map(|e| format!("claim_check: {e}")));
        problems
    }

    /// The sink a key's call goes to: none when its source has no sink of
    /// its type at its index (a reload removed or moved it while the call
    /// waited for a worker), so a row is never sent to another sink.
    pub fn get(&self, key: &SinkKey) -> Option<&Arc<dyn Sink>> {
        let sinks = self.sinks.get(&key.source_id)?;
        let built = sinks.get(usize::from(key.sink_index))?;
        (built.kind == key.sink_type).then_some(&built.sink)
    }

    /// The sources of `config` as the core sees them, with these sinks'
    /// batch sizes (and the fingerprint of their paces computed, here
    /// rather than on every shard).
    pub fn catalog(&self, config: &Config) -> Catalog {
        let catalog = Catalog::from_config(config).with_batches(|source_id, sink_index| {
            let sinks = self.sinks.get(source_id)?;
            sinks.get(usize::from(sink_index))?.batch_max_entries
        });
        catalog.paces_fingerprint();
        catalog
    }
}

/// A sink of goad's built from its options.
fn built_from(recipe: &Recipe, entry: &SinkConfig, at: &str) -> Result<Arc<dyn Sink>, ConfigError> {
    match recipe {
        Recipe::Http(options, client) => {
            let invalid = |e| {
                let (field, rule, value) = match e {
                    InvalidHttpSink::Url { url, .. } => ("url", "a valid URL", url),
                    InvalidHttpSink::Header { name, .. } => ("headers", "valid HTTP headers", name),
                    InvalidHttpSink::ReservedHeader { name } => {
                        ("headers", "headers goad does not set itself", name)
                    }
                };
                ConfigError::Invalid {
                    key: format!("{at}.{field}"),
                    rule: rule.into(),
                    value: format!("{value:?}"),
                }
            };
            let sink = HttpSink::with_client(options.clone(), client.agent.clone());
            Ok(Arc::new(sink.map_err(invalid)?))
        }
        Recipe::Sqs(options) => {
            let sink = SqsSink::new(options.clone()).ok_or_else(|| ConfigError::Invalid {
                key: format!("{at}.queue_url"),
                rule: "an http:// or https:// queue URL".into(),
                value: format!("{:?}", entry.queue_url),
            })?;
            Ok(Arc::new(sink))
        }
        Recipe::PubSub(options) => Ok(Arc::new(PubSubSink::new(options.clone()))),
    }
}

/// `sink` behind the claim check, with its batch size.
fn claiming(
    sink: Arc<dyn Sink>,
    recipe: Option<Recipe>,
    claims: &Arc<ClaimStore>,
    kind: &str,
    at: &str,
) -> Result<Built, ConfigError> {
    let sink: Arc<dyn Sink> = Arc::new(ClaimingSink::new(sink, claims.clone()));
    let batch_max_entries = batch_max_entries(sink.as_ref(), kind, at)?;
    Ok(Built {
        sink,
        kind: Arc::from(kind),
        batch_max_entries,
        recipe,
    })
}

/// A sink's batch size, capped at `MAX_BATCH_ENTRIES`. It is asked once,
/// here; a host sink that panics in it is a config error.
fn batch_max_entries(
    sink: &dyn Sink,
    kind: &str,
    at: &str,
) -> Result<Option<NonZeroU16>, ConfigError> {
    let asked = crate::panics::catch(|| sink.batch_max_entries()).map_err(|message| {
        ConfigError::Invalid {
            key: format!("{at}.type"),
            rule: "a sink whose batch_max_entries answers".into(),
            value: format!("{kind:?} (it panicked: {message})"),
        }
    })?;
    let cap = NonZeroU16::new(MAX_BATCH_ENTRIES).expect("a positive limit");
    Ok(asked.map(|max| max.min(cap)))
}

/// An HTTP sink's client-credentials grant, its secret read now.
fn oauth2_grant(
    egress: &Egress,
    entry: &SinkConfig,
    at: &str,
) -> Result<Option<Arc<ClientCredentials>>, ConfigError> {
    let Some(o) = &entry.oauth2 else {
        return Ok(None);
    };
    let credential = match (&o.private_key_file, &o.client_secret_env) {
        (Some(path), _) => {
            let file = PemFile {
                key: &format!("{at}.oauth2.private_key_file"),
                holds: "the client's PEM private key (PKCS #8, RSA or P-256)",
                path,
            };
            let key = file.load(JwtKey::from_pem)?.with_kid(o.key_id.clone());
            let key = match &o.certificate_file {
                Some(path) => certified(key, path, &format!("{at}.oauth2.certificate_file"))?,
                None => key,
            };
            ClientCredential::Key(Box::new(key))
        }
        (None, var) => ClientCredential::Secret(secret_value(
            format!("{at}.oauth2.client_secret_env"),
            var.as_deref().unwrap_or_default(),
        )?),
    };
    Ok(Some(Arc::new(ClientCredentials::new(
        o,
        credential,
        egress.clone(),
    ))))
}

/// `key` named by the thumbprints of the certificate at `path` (its
/// first), which must be `key`'s; an error names `config_key`.
fn certified(key: JwtKey, path: &std::path::Path, config_key: &str) -> Result<JwtKey, ConfigError> {
    let file = PemFile {
        key: config_key,
        holds: "the PEM certificate of private_key_file's key",
        path,
    };
    let certificates = file.load(crate::pem::certificates)?;
    key.with_certificate(&certificates[0])
        .map_err(|why| file.refused(why))
}

/// An HTTP sink's ID tokens, if it has `google_id_token`; a key file that
/// cannot be used is an error naming its `credentials` key.
fn google_id_token(
    entry: &SinkConfig,
    at: &str,
) -> Result<Option<Arc<GoogleIdToken>>, ConfigError> {
    let Some(config) = &entry.google_id_token else {
        return Ok(None);
    };
    let id_token = GoogleIdToken::new(config).map_err(|why| {
        let credentials = config.credentials.as_deref().unwrap_or_default();
        let file = match credentials {
            "service_account" => "service-account key file",
            _ => "external_account configuration",
        };
        ConfigError::Invalid {
            key: format!("{at}.google_id_token.credentials"),
            rule: format!(
                "{credentials:?} only with a usable {file} at {KEY_FILE_VARIABLE} ({why})"
            ),
            value: format!("{credentials:?}"),
        }
    })?;
    Ok(Some(Arc::new(id_token)))
}

fn http_options(
    config: &Config,
    egress: &Egress,
    shared: &mut SharedCredentials,
    regions: &mut EnvironmentRegion,
    source: &SourceConfig,
    entry: &SinkConfig,
    at: &str,
) -> Result<HttpSinkOptions, ConfigError> {
    // In the order a config's errors are met: the first one is reported.
    Ok(HttpSinkOptions {
        method: http_method(entry, at)?,
        keys: signing_keys(entry, at)?,
        headers: http_headers(entry, at)?,
        roots: http_roots(entry, at)?,
        client_certificate: http_client_certificate(entry, at)?,
        url: ascii_url(&http_url(entry, at)?).into_owned(),
        timeout_ms: sink_timeout_ms(config, entry),
        max_response_bytes: entry.max_response_bytes.unwrap_or(HTTP_MAX_RESPONSE_BYTES),
        forward_allow: source.forward_headers.clone(),
        idle_connections: idle_connections(config),
        egress: egress.clone(),
        oauth2: oauth2_grant(egress, entry, at)?.map(|grant| shared.oauth2(grant)),
        google_id_token: google_id_token(entry, at)?.map(|tokens| shared.id_token(tokens)),
        aws_signing: match &entry.aws_service {
            Some(service) => {
                let needed = " with aws_service (the region to sign for)";
                let region = regions.or(entry.region.clone(), &format!("{at}.region"), needed)?;
                Some(AwsSigning {
                    service: service.clone(),
                    credentials: aws_credentials(shared, entry, &region),
                    region,
                })
            }
            None => None,
        },
    })
}

/// An HTTP sink's `method` (POST by default, any case).
fn http_method(entry: &SinkConfig, at: &str) -> Result<Method, ConfigError> {
    match entry
        .method
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("post") => Ok(Method::Post),
        Some("put") => Ok(Method::Put),
        Some("patch") => Ok(Method::Patch),
        Some(other) => Err(ConfigError::Invalid {
            key: format!("{at}.method"),
            rule: "one of post, put, patch".into(),
            value: format!("{other:?}"),
        }),
    }
}

/// The keys an HTTP sink signs with, from the variables `secret_env` names.
fn signing_keys(entry: &SinkConfig, at: &str) -> Result<Vec<SigningKey>, ConfigError> {
    let vars = entry
        .secret_env
        .as_ref()
        .map(|s| s.to_vec())
        .unwrap_or_default();
    vars.iter()
        .map(|var| {
            let key = format!("{at}.secret_env");
            let secret = secret_value(key.clone(), var)?;
            SigningKey::parse(&secret).map_err(|e| ConfigError::Invalid {
                key,
                rule: format!("a variable holding a valid secret ({e})"),
                value: format!("{var:?}"),
            })
        })
        .collect()
}

/// An HTTP sink's own headers, names lowercased: `headers`, then those
/// whose values `headers_env` reads from the environment.
fn http_headers(entry: &SinkConfig, at: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut headers: Vec<(String, String)> = entry
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
        .collect();
    for (name, var) in &entry.headers_env {
        let key = format!("{at}.headers_env.{name}");
        let value = secret_value(key.clone(), var)?;
        // The value is a secret: the error names only its variable.
        if let Some(rule) = super::http::unsendable_header_rule(name, &value) {
            return Err(invalid(key, format!("a variable holding {rule}"), var));
        }
        headers.push((name.to_ascii_lowercase(), value));
    }
    Ok(headers)
}

/// The roots an HTTPS sink trusts: its `ca_file`'s, or the default ones.
fn http_roots(entry: &SinkConfig, at: &str) -> Result<RootCerts, ConfigError> {
    match &entry.ca_file {
        None => Ok(crate::trusted_roots::default_roots()),
        Some(path) => root_certificates(&PemFile {
            key: &format!("{at}.ca_file"),
            holds: "a PEM file of root certificates",
            path,
        }),
    }
}

/// The certificate an HTTPS sink presents, when it names one and its key.
fn http_client_certificate(
    entry: &SinkConfig,
    at: &str,
) -> Result<Option<ClientCert>, ConfigError> {
    let (Some(cert_path), Some(key_path)) = (&entry.client_cert_file, &entry.client_key_file)
    else {
        return Ok(None);
    };
    let certificate = client_certificate(
        &PemFile {
            key: &format!("{at}.client_cert_file"),
            holds: "a PEM certificate chain",
            path: cert_path,
        },
        &PemFile {
            key: &format!("{at}.client_key_file"),
            holds: "the client certificate's PEM private key",
            path: key_path,
        },
    )?;
    Ok(Some(certificate))
}

/// An HTTP sink's URL: its `url`, or the value of its `url_env` variable,
/// checked as the config checks a `url` (an error names the variable, not
/// the URL, which may be a secret).
fn http_url(entry: &SinkConfig, at: &str) -> Result<String, ConfigError> {
    let Some(var) = &entry.url_env else {
        return Ok(entry.url.clone().unwrap_or_default());
    };
    let key = format!("{at}.url_env");
    let url = secret_value(key.clone(), var)?;
    url_fits(&key, &url)?;
    if !is_http_url(&url) {
        return Err(ConfigError::Invalid {
            key,
            rule: "a variable holding an http:// or https:// URL with a host".into(),
            value: format!("{var:?}"),
        });
    }
    tls_files_need_https(at, entry, &url)?;
    Ok(url)
}

fn sqs_options(
    config: &Config,
    shared: &mut SharedCredentials,
    regions: &mut EnvironmentRegion,
    endpoints: &ConfiguredEndpoints,
    source: &SourceConfig,
    entry: &SinkConfig,
    at: &str,
) -> Result<SqsSinkOptions, ConfigError> {
    let queue_url = entry.queue_url.clone().unwrap_or_default();
    let configured = entry.region.clone().or_else(|| region_of(&queue_url));
    let needed = " where the queue URL's host names no AWS region";
    let region = regions.or(configured, &format!("{at}.region"), needed)?;
    Ok(SqsSinkOptions {
        credentials: aws_credentials(shared, entry, &region),
        region,
        queue_url,
        endpoint: (entry.endpoint.clone()).or_else(|| endpoints.of(AwsService::Sqs)),
        message_group_id: entry.message_group_id.clone(),
        max_message_bytes: entry.max_message_bytes.unwrap_or(SQS_MAX_MESSAGE_BYTES),
        timeout_ms: sink_timeout_ms(config, entry),
        forward_allow: source.forward_headers.clone(),
        inline_max_bytes: entry.inline_max_bytes.unwrap_or(INLINE_MAX_BYTES),
        idle_connections: idle_connections(config),
    })
}

/// The credentials a sink entry signs its requests for `region` with:
/// from where its `credentials` says, of the role it names if it does;
/// `shared`'s where it holds the same.
fn aws_credentials(
    shared: &mut SharedCredentials,
    entry: &SinkConfig,
    region: &str,
) -> AwsCredentials {
    let env = EnvCredentials::named(
        &entry.access_key_id_env,
        &entry.secret_access_key_env,
        &entry.session_token_env,
    );
    let role = RoleToAssume::named(
        &entry.role_arn,
        &entry.external_id,
        &entry.role_session_name,
    );
    let base = shared.aws(AwsCredentials::new(
        entry.credentials.as_deref(),
        env,
        region,
    ));
    shared.aws(base.assuming(role, region))
}

fn pubsub_options(
    config: &Config,
    shared: &mut SharedCredentials,
    source: &SourceConfig,
    entry: &SinkConfig,
    at: &str,
) -> Result<PubSubSinkOptions, ConfigError> {
    let emulator = match &entry.endpoint {
        Some(_) => None,
        None => emulator_endpoint()?,
    };
    let auth = match emulator {
        Some(_) => PubSubAuth::Anonymous,
        None => pubsub_auth(entry, at)?,
    };
    Ok(PubSubSinkOptions {
        endpoint: (entry.endpoint.clone())
            .or(emulator)
            .unwrap_or_else(|| PUBSUB_ENDPOINT.into()),
        project: entry.project.clone().unwrap_or_default(),
        topic: entry.topic.clone().unwrap_or_default(),
        auth: shared.pubsub(Arc::new(auth)),
        max_message_bytes: entry.max_message_bytes.unwrap_or(PUBSUB_MAX_MESSAGE_BYTES),
        timeout_ms: sink_timeout_ms(config, entry),
        forward_allow: source.forward_headers.clone(),
        inline_max_bytes: entry.inline_max_bytes.unwrap_or(INLINE_MAX_BYTES),
        idle_connections: idle_connections(config),
        lane_by: entry
            .ordered
            .then(|| LaneBy::parse(entry.ordering_key.as_deref()))
            .flatten(),
    })
}

/// Where a Pub/Sub sink entry's token comes from, as its `credentials`
/// and `token_env` say; an error naming `credentials` if its file does
/// not serve.
fn pubsub_auth(entry: &SinkConfig, at: &str) -> Result<PubSubAuth, ConfigError> {
    let credentials = entry.credentials.as_deref();
    PubSubAuth::new(credentials, entry.token_env.as_deref()).map_err(|why| ConfigError::Invalid {
        key: format!("{at}.credentials"),
        rule: format!(
            "{:?} only with a usable {} ({why})",
            credentials.unwrap_or_default(),
            match credentials {
                Some("external_account") => {
                    format!("external_account configuration at {KEY_FILE_VARIABLE}")
                }
                Some("authorized_user") => format!(
                    "authorized_user file at {KEY_FILE_VARIABLE} or gcloud's application \
                         default credentials"
                ),
                _ => format!("key file at {KEY_FILE_VARIABLE}"),
            }
        ),
        value: format!("{:?}", credentials.unwrap_or_default()),
    })
}

/// A sink's per-phase timeout: its own, or the default below the attempt timeout.
fn sink_timeout_ms(config: &Config, entry: &SinkConfig) -> u64 {
    entry
        .timeout_ms
        .unwrap_or(HTTP_TIMEOUT_MS.min(config.dispatch.attempt_timeout_ms))
}

/// Idle connections a sink keeps: at least one per attempt it may run.
fn idle_connections(config: &Config) -> usize {
    config.dispatch.sink_concurrency.max(8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OneOrMany;
    use crate::sink::{Delivery, SinkError};

    /// A host sink batching as `batch` says.
    struct Batching(fn() -> Option<NonZeroU16>);

    impl Sink for Batching {
        fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
            Ok(())
        }

        fn batch_max_entries(&self) -> Option<NonZeroU16> {
            (self.0)()
        }
    }

    fn build(batch: fn() -> Option<NonZeroU16>) -> Result<Catalog, ConfigError> {
        let sinks = vec![
            SinkConfig::of_kind("host"),
            SinkConfig::sqs("https://sqs.us-east-1.amazonaws.com/1/q"),
        ];
        let config = Config::with_one_source(sinks);
        let host: HostSinks = [(
            "host".to_string(),
            Arc::new(Batching(batch)) as Arc<dyn Sink>,
        )]
        .into_iter()
        .collect();
        let claims = Arc::new(ClaimStore::new(std::env::temp_dir(), 1));
        Ok(
            SinkRegistry::build(&config, &host, &claims, &SinkRegistry::default())?
                .catalog(&config),
        )
    }

    /// Source "s"'s sinks built from `sinks`, keeping those of `previous`.
    fn rebuilt(sinks: Vec<SinkConfig>, previous: &SinkRegistry) -> SinkRegistry {
        rebuilt_with(Config::with_one_source(sinks), previous)
    }

    fn rebuilt_with(config: Config, previous: &SinkRegistry) -> SinkRegistry {
        let claims = Arc::new(ClaimStore::new(std::env::temp_dir(), 1));
        SinkRegistry::build(&config, &HostSinks::new(), &claims, previous).unwrap()
    }

    /// Which sinks of `b` are `a`'s, by index: `Some(i)` when `b`'s sink
    /// is the very sink `a` has at `i`.
    fn kept_from(a: &SinkRegistry, b: &SinkRegistry, sinks: usize) -> Vec<Option<usize>> {
        let (a, b) = (&a.sinks["s"], &b.sinks["s"]);
        (0..sinks)
            .map(|j| (0..sinks).find(|&i| Arc::ptr_eq(&a[i].sink, &b[j].sink)))
            .collect()
    }

    fn key(sink_index: u16, sink_type: &str) -> SinkKey {
        SinkKey {
            tenant: Arc::from("t"),
            source_id: Arc::from("s"),
            sink_index,
            sink_type: Arc::from(sink_type),
        }
    }

    /// A call waiting for a worker across a reload that put a sink of
    /// another type at its key's index finds no sink, rather than that one.
    #[test]
    fn a_key_finds_only_a_sink_of_its_own_type_at_its_index() {
        let queue = || SinkConfig::sqs("https://sqs.us-east-1.amazonaws.com/1/q");
        let endpoint = || SinkConfig::http("http://a.example/hooks");
        let first = rebuilt(vec![endpoint(), queue()], &SinkRegistry::default());
        assert!(first.get(&key(0, "http")).is_some());
        assert!(first.get(&key(1, "sqs")).is_some());
        let swapped = rebuilt(vec![queue(), endpoint()], &first);
        assert!(swapped.get(&key(0, "http")).is_none());
        assert!(swapped.get(&key(1, "sqs")).is_none());
        assert!(swapped.get(&key(2, "http")).is_none(), "past the last sink");
        let http = swapped.get(&key(1, "http")).unwrap();
        assert!(Arc::ptr_eq(http, first.get(&key(0, "http")).unwrap()));
    }

    #[test]
    fn a_rebuild_keeps_each_sink_whose_options_did_not_change_and_builds_the_others() {
        let variable = "GOAD_TEST_REGISTRY_SIGNING_SECRET";
        std::env::set_var(variable, "first secret");
        let signed = || SinkConfig {
            secret_env: Some(OneOrMany::One(variable.into())),
            ..SinkConfig::http("http://a.example/hooks")
        };
        let other = || SinkConfig::http("http://b.example/hooks");
        let queue = || SinkConfig::sqs("https://sqs.us-east-1.amazonaws.com/1/q");
        let first = rebuilt(vec![signed(), queue(), other()], &SinkRegistry::default());
        let same = rebuilt(vec![signed(), queue(), other()], &first);
        assert_eq!(kept_from(&first, &same, 3), [Some(0), Some(1), Some(2)]);

        let reordered = rebuilt(vec![other(), signed(), queue()], &same);
        assert_eq!(
            kept_from(&same, &reordered, 3),
            [Some(2), Some(0), Some(1)],
            "each sink kept at its new index"
        );

        std::env::set_var(variable, "second secret");
        let rotated = rebuilt(vec![other(), signed(), queue()], &reordered);
        assert_eq!(
            kept_from(&reordered, &rotated, 3),
            [Some(0), None, Some(2)],
            "a new secret builds its sink anew"
        );
        let moved = rebuilt(
            vec![
                SinkConfig::http("http://c.example/hooks"),
                signed(),
                queue(),
            ],
            &rotated,
        );
        assert_eq!(kept_from(&rotated, &moved, 3), [None, Some(1), Some(2)]);

        let twins = rebuilt(vec![other(), other()], &SinkRegistry::default());
        let twins_again = rebuilt(vec![other(), other()], &twins);
        assert_eq!(
            kept_from(&twins, &twins_again, 2),
            [Some(0), Some(1)],
            "two like sinks keep one each"
        );
    }

    /// An HTTP sink's shared pool keeps as many connections idle as the
    /// node runs attempts at once: a reload raising `dispatch.concurrency`
    /// builds the sink anew with a larger pool; one lowering it keeps it.
    #[test]
    fn a_rebuild_raising_the_concurrency_gives_http_sinks_a_larger_pool() {
        let with_concurrency = |concurrency: u32| {
            let mut config = Config::with_one_source(vec![
                SinkConfig::http("http://a.example/hooks"),
                SinkConfig::sqs("https://sqs.us-east-1.amazonaws.com/1/q"),
            ]);
            config.dispatch.concurrency = concurrency;
            config
        };
        let first = rebuilt_with(with_concurrency(16), &SinkRegistry::default());
        let raised = rebuilt_with(with_concurrency(64), &first);
        assert_eq!(kept_from(&first, &raised, 2), [None, Some(1)]);
        let lowered = rebuilt_with(with_concurrency(4), &raised);
        assert_eq!(kept_from(&raised, &lowered, 2), [Some(0), Some(1)]);
    }

    /// What the sinks can keep open: a hundred HTTP sinks posting to one
    /// host share a pool of `dispatch.concurrency`; two to another keep
    /// what they run at once; one to the first host with other timeouts,
    /// and a queue sink, keep their own.
    #[test]
    fn sinks_keep_open_at_most_their_pools_or_what_they_run_at_once() {
        let slack = |i| SinkConfig::http(format!("https://hooks.slack.com/services/{i}"));
        let mut sources: Vec<SourceConfig> = (0..100)
            .map(|i| SourceConfig::new(format!("s{i}"), "t", vec![slack(i)]))
            .collect();
        let few = ["https://a.example/1", "https://a.example/2"].map(SinkConfig::http);
        sources.push(SourceConfig::new("few", "t", few.into()));
        let patient = SinkConfig {
            timeout_ms: Some(60_000),
            ..slack(100)
        };
        sources.push(SourceConfig::new("patient", "t", vec![patient]));
        let queue = SinkConfig::sqs("https://sqs.us-east-1.amazonaws.com/1/q");
        sources.push(SourceConfig::new("queue", "t", vec![queue]));
        let mut config = Config::default();
        config.dispatch.concurrency = 32;
        config.sources = sources.into();
        let registry = rebuilt_with(config, &SinkRegistry::default());
        assert_eq!(registry.connections_bound(8), 32 + 2 * 8 + 8 + 8);
        assert_eq!(registry.connections_bound(1), 32 + 2 + 1 + 1);
    }

    #[test]
    fn each_sink_says_its_batch_size_once_capped_and_a_panic_is_a_config_error() {
        let catalog = build(|| NonZeroU16::new(u16::MAX)).unwrap();
        let sizes = [0, 1].map(|i| catalog.batch_max_entries("s", i).map(NonZeroU16::get));
        assert_eq!(
            sizes,
            [Some(MAX_BATCH_ENTRIES), Some(10)],
            "capped; SQS's 10"
        );
        let unbatched = build(|| None).unwrap();
        assert_eq!(unbatched.batch_max_entries("s", 0), None);
        let error = build(|| panic!("no size")).err().unwrap().to_string();
        assert!(
            error.contains("sources[0].sinks[0].type") && error.contains("it panicked: no size"),
            "{error}"
        );
    }
}
