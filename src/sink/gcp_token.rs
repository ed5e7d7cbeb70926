//! The access token a Pub/Sub sink sends (`authorization: Bearer`), as its
//! `credentials` says:
//!
//! - `env` (the default): the token in the sink's `token_env` variable,
//!   read at every attempt (a variable that is not set fails the attempt
//!   before anything is sent); without `token_env`, no token (the
//!   emulator);
//! - `metadata`: the token of the service account the workload runs as
//!   (GCE, GKE Workload Identity, Cloud Run), from the metadata server at
//!   `GCE_METADATA_HOST` (the variable Google's libraries read) or
//!   `metadata.google.internal`, kept while fresh (see `expiring`).

use super::client::{agent, ok_body};
use super::expiring::Expiring;
use super::{BoxError, SinkError};
use crate::limits::HTTP_TIMEOUT_MS;
use serde_json::Value;
use std::fmt;
use std::time::{Duration, SystemTime};

/// The values of a Pub/Sub sink's `credentials`.
pub const TOKEN_SOURCES: &[&str] = &["env", "metadata"];

/// Where a Pub/Sub sink's token comes from.
#[derive(Debug)]
pub enum PubSubAuth {
    /// No token (the emulator).
    Anonymous,
    /// The token in this environment variable.
    Env(String),
    /// The service account's token from the metadata server.
    Metadata(MetadataToken),
}

impl PubSubAuth {
    /// The auth of a validated `credentials` option and `token_env`.
    pub fn new(credentials: Option<&str>, token_env: Option<&str>) -> PubSubAuth {
        match (credentials, token_env) {
            (Some("metadata"), _) => PubSubAuth::Metadata(MetadataToken {
                agent: agent(HTTP_TIMEOUT_MS, 1),
                held: Expiring::new(),
            }),
            (_, Some(variable)) => PubSubAuth::Env(variable.to_string()),
            (_, None) => PubSubAuth::Anonymous,
        }
    }

    /// The token to send at `now`, if any.
    pub fn token(&self, now: SystemTime) -> Result<Option<String>, SinkError> {
        match self {
            PubSubAuth::Anonymous => Ok(None),
            PubSubAuth::Env(variable) => std::env::var(variable).map(Some).map_err(|_| {
                SinkError::transient(NoToken::NotSet {
                    variable: variable.clone(),
                })
            }),
            PubSubAuth::Metadata(metadata) => metadata
                .token(now)
                .map(Some)
                .map_err(|cause| SinkError::transient(NoToken::Metadata(cause))),
        }
    }
}

/// Tokens from the metadata server.
pub struct MetadataToken {
    agent: ureq::Agent,
    held: Expiring<String>,
}

/// No token in logs.
impl fmt::Debug for MetadataToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetadataToken")
    }
}

impl MetadataToken {
    fn token(&self, now: SystemTime) -> Result<String, BoxError> {
        self.held.get(now, "a Google access token", || {
            let host = std::env::var("GCE_METADATA_HOST")
                .unwrap_or_else(|_| "metadata.google.internal".into());
            let url =
                format!("http://{host}/computeMetadata/v1/instance/service-accounts/default/token");
            let request = self.agent.get(url).header("metadata-flavor", "Google");
            let answer: Value = serde_json::from_str(&ok_body(request.call())?)?;
            let token = answer.get("access_token").and_then(Value::as_str);
            let expires_in_s = answer.get("expires_in").and_then(Value::as_u64);
            match (token, expires_in_s) {
                (Some(token), Some(seconds)) => {
                    Ok((token.to_string(), now + Duration::from_secs(seconds)))
                }
                _ => Err("no access_token and expires_in in its answer".into()),
            }
        })
    }
}

/// No token to send: the attempt fails, transient (the environment or the
/// metadata server may come back).
#[derive(Debug)]
pub enum NoToken {
    /// The sink's token variable is not set.
    NotSet { variable: String },
    /// The metadata server did not give a token.
    Metadata(BoxError),
}

impl fmt::Display for NoToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoToken::NotSet { variable } => {
                write!(f, "no Pub/Sub access token: {variable} is not set")
            }
            NoToken::Metadata(cause) => write!(
                f,
                "cannot get a Pub/Sub access token from the metadata server: {cause}"
            ),
        }
    }
}

impl std::error::Error for NoToken {}
