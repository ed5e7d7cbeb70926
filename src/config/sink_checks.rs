//! The checks of a source's sinks: the options each type accepts, a
//! sink's retry policy, filter, rate, ordering key and timeout, and the
//! rules of HTTP, SQS and Pub/Sub sinks (how an HTTP sink authorizes its
//! requests is `sink_auth`'s).

use super::aws_role::aws_role;
use super::sink_auth::{
    one_authorization, validate_aws_signing, validate_google_id_token, validate_oauth2,
};
use super::validate::{
    check_http_url, check_region, credentials, env_name, env_name_list, invalid, is_http_url,
    positive, stored_header, unknown_name, url_fits, usable_path, validate_retry_policy,
};
use super::{Config, ConfigError, SinkConfig, SourceConfig};
use crate::core::LaneBy;
use crate::limits::MAX_CALLS_PER_S;
use crate::sink::aws_credentials::CREDENTIAL_SOURCES;
use crate::sink::gcp_token::TOKEN_SOURCES;
use crate::sink::sqs::{default_group, is_fifo, is_group_id, queue_name};

/// The sink types goad itself provides.
pub const BUILTIN_SINK_TYPES: &[&str] = &["http", "sqs", "pubsub"];

/// The options of each built-in sink type (the other options are refused).
const HTTP_OPTIONS: &[&str] = &[
    "url",
    "url_env",
    "method",
    "headers",
    "headers_env",
    "timeout_ms",
    "secret_env",
    "max_response_bytes",
    "ca_file",
    "client_cert_file",
    "client_key_file",
    "oauth2",
    "aws_service",
    "google_id_token",
];

/// The options that sign requests to AWS (an SQS sink's, an HTTP sink's
/// with `aws_service`): the region and where the credentials come from.
pub(super) const AWS_SIGNING_OPTIONS: &[&str] = &[
    "region",
    "credentials",
    "access_key_id_env",
    "secret_access_key_env",
    "session_token_env",
    "role_arn",
    "external_id",
    "role_session_name",
];

const SQS_OPTIONS: &[&str] = &[
    "queue_url",
    "inline_max_bytes",
    "endpoint",
    "message_group_id",
    "max_message_bytes",
    "timeout_ms",
];

const PUBSUB_OPTIONS: &[&str] = &[
    "credentials",
    "project",
    "inline_max_bytes",
    "topic",
    "endpoint",
    "token_env",
    "max_message_bytes",
    "timeout_ms",
];

impl Config {
    pub(super) fn validate_sink(
        &self,
        at: &str,
        source: &SourceConfig,
        sink: &SinkConfig,
        host_sinks: &[&str],
    ) -> Result<(), ConfigError> {
        if let Some(retry) = &sink.retry {
            validate_retry_policy(&format!("{at}.retry"), &retry.over(self.retry))?;
        }
        if let Some(filter) = &sink.filter {
            stored_header(format!("{at}.filter.header"), &filter.header)?;
            if filter.values.is_empty() {
                let rule = "a list of at least one value";
                return Err(invalid(format!("{at}.filter.values"), rule, "[]"));
            }
        }
        if let Some(rate) = sink.max_calls_per_s {
            if !(1..=MAX_CALLS_PER_S).contains(&rate) {
                let rule = format!("an integer from 1 to {MAX_CALLS_PER_S}");
                return Err(invalid(format!("{at}.max_calls_per_s"), rule, rate));
            }
        }
        validate_ordering_key(at, sink)?;
        validate_type_and_options(at, sink, host_sinks)?;
        if let Some(timeout_ms) = sink.timeout_ms {
            let max = self.dispatch.attempt_timeout_ms;
            if timeout_ms < 1 || timeout_ms >= max {
                let rule =
                    format!("an integer from 1 to below dispatch.attempt_timeout_ms ({max})");
                return Err(invalid(format!("{at}.timeout_ms"), rule, timeout_ms));
            }
        }
        match sink.kind.as_str() {
            "http" => self.validate_http_sink(at, sink),
            "sqs" => validate_sqs_sink(at, source, sink),
            "pubsub" => validate_pubsub_sink(at, sink),
            _ => Ok(()),
        }
    }

    fn validate_http_sink(&self, at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
        match (&sink.url, &sink.url_env) {
            (Some(_), Some(_)) => {
                let rule = "absent with url (the URL is one or the other)";
                return Err(invalid(format!("{at}.url_env"), rule, "set"));
            }
            // Read and checked when the sink is built, as a secret is.
            (None, Some(var)) => env_name(format!("{at}.url_env"), var)?,
            (url, None) => {
                let url = url.as_deref().unwrap_or("");
                check_http_url(format!("{at}.url"), url)?;
                tls_files_need_https(at, sink, url)?;
            }
        }
        if let Some(method) = &sink.method {
            let methods = ["post", "put", "patch"];
            if !methods.contains(&method.to_ascii_lowercase().as_str()) {
                return Err(unknown_name(
                    format!("{at}.method"),
                    "one of post, put, patch",
                    method,
                    &methods,
                ));
            }
        }
        if let Some(bytes) = sink.max_response_bytes {
            positive(&format!("{at}.max_response_bytes"), bytes)?;
        }
        match (&sink.client_cert_file, &sink.client_key_file) {
            (Some(file), None) => {
                let rule = "set with client_key_file (a certificate and its key)";
                return Err(invalid(format!("{at}.client_cert_file"), rule, file));
            }
            (None, Some(file)) => {
                let rule = "set with client_cert_file (a certificate and its key)";
                return Err(invalid(format!("{at}.client_key_file"), rule, file));
            }
            _ => {}
        }
        validate_operator_headers(at, sink)?;
        if let Some(oauth2) = &sink.oauth2 {
            validate_oauth2(at, oauth2)?;
        }
        validate_aws_signing(at, sink)?;
        if let Some(id_token) = &sink.google_id_token {
            validate_google_id_token(at, id_token)?;
        }
        one_authorization(at, sink)?;
        if let Some(secrets) = &sink.secret_env {
            env_name_list(format!("{at}.secret_env"), secrets)?;
        }
        Ok(())
    }
}

/// A sink's `ordering_key`: only on an ordered sink, and a header goad
/// stores with the hook.
fn validate_ordering_key(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    let Some(key) = &sink.ordering_key else {
        return Ok(());
    };
    let key_at = format!("{at}.ordering_key");
    if !sink.ordered {
        return Err(invalid(key_at, "set only with ordered = true", key));
    }
    match LaneBy::parse(Some(key)) {
        Some(LaneBy::Header(name)) if crate::sink::never_forwarded(&name) => Err(invalid(
            key_at,
            "a header goad stores with the hook (credential and framing headers are not stored)",
            key,
        )),
        Some(_) => Ok(()),
        None => Err(invalid(
            key_at,
            "\"header:<name>\", a header name of letters, digits, '-', '_' or '.'",
            key,
        )),
    }
}

/// A sink's `type` (goad's or one the host registered) and the options
/// set on it, each one its type takes.
fn validate_type_and_options(
    at: &str,
    sink: &SinkConfig,
    host_sinks: &[&str],
) -> Result<(), ConfigError> {
    let builtin = BUILTIN_SINK_TYPES.contains(&sink.kind.as_str());
    if !builtin && !host_sinks.contains(&sink.kind.as_str()) {
        let mut known: Vec<&str> = BUILTIN_SINK_TYPES.to_vec();
        known.extend_from_slice(host_sinks);
        return Err(unknown_name(
            format!("{at}.type"),
            format!("one of {known:?}"),
            &sink.kind,
            &known,
        ));
    }
    let accepted: &[&[&str]] = match sink.kind.as_str() {
        "http" => &[HTTP_OPTIONS, AWS_SIGNING_OPTIONS],
        "sqs" => &[SQS_OPTIONS, AWS_SIGNING_OPTIONS],
        "pubsub" => &[PUBSUB_OPTIONS],
        _ => &[],
    };
    let accepts = |key: &&str| accepted.iter().any(|options| options.contains(key));
    let set = options_set(sink);
    if let Some((key, _)) = set.iter().find(|(k, on)| *on && !accepts(k)) {
        return Err(invalid(
            format!("{at}.{key}"),
            format!("absent for a sink of type {:?}", sink.kind),
            "set",
        ));
    }
    Ok(())
}

/// Each sink option's name, and whether the entry sets it.
pub(super) fn options_set(sink: &SinkConfig) -> Vec<(&'static str, bool)> {
    vec![
        ("url", sink.url.is_some()),
        ("url_env", sink.url_env.is_some()),
        ("method", sink.method.is_some()),
        ("headers", !sink.headers.is_empty()),
        ("headers_env", !sink.headers_env.is_empty()),
        ("timeout_ms", sink.timeout_ms.is_some()),
        ("secret_env", sink.secret_env.is_some()),
        ("max_response_bytes", sink.max_response_bytes.is_some()),
        ("ca_file", sink.ca_file.is_some()),
        ("client_cert_file", sink.client_cert_file.is_some()),
        ("client_key_file", sink.client_key_file.is_some()),
        ("queue_url", sink.queue_url.is_some()),
        ("region", sink.region.is_some()),
        ("endpoint", sink.endpoint.is_some()),
        ("message_group_id", sink.message_group_id.is_some()),
        ("inline_max_bytes", sink.inline_max_bytes.is_some()),
        ("max_message_bytes", sink.max_message_bytes.is_some()),
        ("credentials", sink.credentials.is_some()),
        ("access_key_id_env", sink.access_key_id_env.is_some()),
        (
            "secret_access_key_env",
            sink.secret_access_key_env.is_some(),
        ),
        ("session_token_env", sink.session_token_env.is_some()),
        ("role_arn", sink.role_arn.is_some()),
        ("external_id", sink.external_id.is_some()),
        ("role_session_name", sink.role_session_name.is_some()),
        ("project", sink.project.is_some()),
        ("topic", sink.topic.is_some()),
        ("token_env", sink.token_env.is_some()),
        ("oauth2", sink.oauth2.is_some()),
        ("aws_service", sink.aws_service.is_some()),
        ("google_id_token", sink.google_id_token.is_some()),
    ]
}

/// An HTTP sink's `headers` and `headers_env`: valid names, none that
/// goad or the HTTP client sets itself, none twice (names are
/// case-insensitive), valid values and variable names.
fn validate_operator_headers(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    let named = sink
        .headers
        .keys()
        .map(|name| ("headers", name))
        .chain(sink.headers_env.keys().map(|name| ("headers_env", name)));
    let mut seen: Vec<String> = Vec::new();
    for (field, name) in named {
        if ureq::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(invalid(
                format!("{at}.{field}"),
                "valid HTTP header names",
                name,
            ));
        }
        let lowercase = name.to_ascii_lowercase();
        if crate::sink::reserved_header(&lowercase) {
            let rule = "a header goad does not set itself (not a framing or hop-by-hop \
                        header, x-goad-* or webhook-*)";
            return Err(invalid(format!("{at}.{field}"), rule, name));
        }
        if seen.contains(&lowercase) {
            let rule = "header names given once across headers and headers_env (in any case)";
            return Err(invalid(format!("{at}.{field}"), rule, name));
        }
        seen.push(lowercase);
    }
    for (name, value) in &sink.headers {
        let Some(rule) = crate::sink::http::unsendable_header_rule(name, value) else {
            continue;
        };
        let key = format!("{at}.headers.{name}");
        // A credential is not shown: errors are logged.
        if crate::sink::is_credential(&name.to_ascii_lowercase()) {
            let value = "a value not shown here (a credential)".into();
            return Err(ConfigError::Invalid {
                key,
                rule: rule.into(),
                value,
            });
        }
        return Err(invalid(key, rule, value));
    }
    for (name, var) in &sink.headers_env {
        env_name(format!("{at}.headers_env.{name}"), var)?;
    }
    Ok(())
}

/// An HTTP sink's TLS files, which only an https:// `url` uses.
pub(crate) fn tls_files_need_https(
    at: &str,
    sink: &SinkConfig,
    url: &str,
) -> Result<(), ConfigError> {
    let tls_files = [
        ("ca_file", &sink.ca_file),
        ("client_cert_file", &sink.client_cert_file),
        ("client_key_file", &sink.client_key_file),
    ];
    for (field, file) in tls_files {
        usable_path(format!("{at}.{field}"), file.as_deref())?;
    }
    let https = url.to_ascii_lowercase().starts_with("https://");
    match tls_files.into_iter().find(|(_, file)| file.is_some()) {
        Some((field, Some(file))) if !https => {
            let rule = "absent with an http:// url (only TLS uses it)";
            Err(invalid(format!("{at}.{field}"), rule, file))
        }
        _ => Ok(()),
    }
}

fn validate_sqs_sink(
    at: &str,
    source: &SourceConfig,
    sink: &SinkConfig,
) -> Result<(), ConfigError> {
    let queue_url = sink.queue_url.as_deref().unwrap_or("");
    url_fits(&format!("{at}.queue_url"), queue_url)?;
    if !is_http_url(queue_url) || queue_name(queue_url).is_none() {
        return Err(invalid(
            format!("{at}.queue_url"),
            "an http:// or https:// queue URL ending in the queue's name",
            queue_url,
        ));
    }
    validate_queue_options(at, sink)?;
    check_region(format!("{at}.region"), sink.region.as_ref())?;
    let key = format!("{at}.message_group_id");
    match &sink.message_group_id {
        Some(group) if !is_group_id(group) => {
            let rule = "1 to 128 letters, digits and punctuation (SQS's MessageGroupId)";
            return Err(invalid(key, rule, group));
        }
        None if queue_name(queue_url).is_some_and(is_fifo)
            && !is_group_id(&default_group(&source.tenant, &source.id)) =>
        {
            let rule = "set for this FIFO queue: its default, \"<tenant>/<source>\", is over SQS's 128 characters";
            return Err(invalid(key, rule, "absent"));
        }
        _ => {}
    }
    aws_credentials(at, sink)
}

/// An AWS-signing sink's credentials (`credentials` and the variables it
/// reads) and the role it assumes with them.
pub(super) fn aws_credentials(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    credentials(
        at,
        &sink.credentials,
        CREDENTIAL_SOURCES,
        [
            ("access_key_id_env", &sink.access_key_id_env),
            ("secret_access_key_env", &sink.secret_access_key_env),
            ("session_token_env", &sink.session_token_env),
        ],
    )?;
    aws_role(
        at,
        &sink.role_arn,
        &sink.external_id,
        &sink.role_session_name,
    )
}

fn validate_pubsub_sink(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    for (key, value) in [("project", &sink.project), ("topic", &sink.topic)] {
        let value = value.as_deref().unwrap_or("");
        if value.is_empty() || value.len() > 255 {
            return Err(invalid(format!("{at}.{key}"), "1 to 255 characters", value));
        }
    }
    validate_queue_options(at, sink)?;
    credentials(
        at,
        &sink.credentials,
        TOKEN_SOURCES,
        [("token_env", &sink.token_env)],
    )
}

/// The options the queue sinks (sqs, pubsub) share: `endpoint`,
/// `inline_max_bytes` and `max_message_bytes`.
fn validate_queue_options(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    if let Some(bytes) = sink.inline_max_bytes {
        positive(&format!("{at}.inline_max_bytes"), bytes)?;
    }
    if let Some(endpoint) = &sink.endpoint {
        check_http_url(format!("{at}.endpoint"), endpoint)?;
    }
    if let Some(bytes) = sink.max_message_bytes {
        positive(&format!("{at}.max_message_bytes"), bytes)?;
    }
    Ok(())
}
