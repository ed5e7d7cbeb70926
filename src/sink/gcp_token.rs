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
//!   `metadata.google.internal`;
//! - `service_account`: a token for the service account whose key file
//!   `GOOGLE_APPLICATION_CREDENTIALS` names (read when the sink is built,
//!   so at start and at each reload), from the token endpoint the file
//!   names, for a JWT signed with the file's key (see `gcp_key`);
//! - `external_account`: workload identity federation, the configuration
//!   file `GOOGLE_APPLICATION_CREDENTIALS` names (read likewise): the
//!   platform's own token exchanged at Google's STS, and a service
//!   account's token asked with it (see `gcp_external`);
//! - `authorized_user`: a user's credentials, from the file
//!   `GOOGLE_APPLICATION_CREDENTIALS` names or else the one `gcloud auth
//!   application-default login` writes (read likewise): a token for its
//!   refresh token, and the file's quota project, if any, named in each
//!   publish (see `gcp_user`).
//!
//! Fetched tokens are kept while fresh (see `expiring`).

use super::client::{ok_body, Client};
use super::expiring::Expiring;
use super::gcp_external::ExternalAccount;
use super::gcp_key::ServiceAccountKey;
use super::gcp_user::AuthorizedUser;
use super::oauth2::{sendable_bearer, token_answer};
use super::{BoxError, SinkError};
use crate::limits::HTTP_TIMEOUT_MS;
use std::fmt;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

/// The values of a Pub/Sub sink's `credentials`.
pub const TOKEN_SOURCES: &[&str] = &[
    "env",
    "metadata",
    "service_account",
    "external_account",
    "authorized_user",
];

/// The variable naming the file of `credentials = "service_account"`,
/// `"external_account"` or `"authorized_user"`, as Google's libraries read it.
pub const KEY_FILE_VARIABLE: &str = "GOOGLE_APPLICATION_CREDENTIALS";

/// The OAuth 2 scope of Pub/Sub's API.
const PUBSUB_SCOPE: &str = "https://www.googleapis.com/auth/pubsub";

/// Where a Pub/Sub sink's token comes from.
#[derive(Debug)]
pub enum PubSubAuth {
    /// No token (the emulator).
    Anonymous,
    /// The token in this environment variable.
    Env(String),
    /// A token fetched from Google, kept while fresh.
    Fetched(Box<FetchedToken>),
}

impl PubSubAuth {
    /// The auth of a validated `credentials` option and `token_env`; with
    /// `service_account` or `external_account`, the file is read now, and
    /// the error says why it cannot be used.
    pub fn new(credentials: Option<&str>, token_env: Option<&str>) -> Result<PubSubAuth, String> {
        let from = match credentials.map(TokenSource::read).transpose()?.flatten() {
            Some(from) => from,
            None => {
                return Ok(match token_env {
                    Some(variable) => PubSubAuth::Env(variable.to_string()),
                    None => PubSubAuth::Anonymous,
                })
            }
        };
        Ok(PubSubAuth::Fetched(Box::new(FetchedToken {
            from,
            client: Client::new(HTTP_TIMEOUT_MS, 1),
            held: Expiring::new(),
        })))
    }

    /// Whether `other` takes its token from the same place (the same
    /// variable, server, key, federated identity or user): the token these
    /// hold would do for it.
    pub(crate) fn same_source(&self, other: &PubSubAuth) -> bool {
        match (self, other) {
            (PubSubAuth::Anonymous, PubSubAuth::Anonymous) => true,
            (PubSubAuth::Env(a), PubSubAuth::Env(b)) => a == b,
            (PubSubAuth::Fetched(a), PubSubAuth::Fetched(b)) => a.from == b.from,
            _ => false,
        }
    }

    /// The project a user's calls are billed to (`x-goog-user-project`),
    /// if the credentials name one.
    pub fn quota_project(&self) -> Option<&str> {
        match self {
            PubSubAuth::Fetched(fetched) => match &fetched.from {
                TokenSource::User(user) => user.quota_project_id.as_deref(),
                _ => None,
            },
            _ => None,
        }
    }

    /// What the environment lacks for the token, which is read at each
    /// request, not at a start: a `token_env` variable not set, or holding
    /// what no header can carry. A fetched token is not fetched: `None`.
    pub fn environment_problem(&self) -> Option<SinkError> {
        match self {
            PubSubAuth::Env(_) => self.token(SystemTime::now(), Instant::now()).err(),
            PubSubAuth::Anonymous | PubSubAuth::Fetched(_) => None,
        }
    }

    /// The token to send at `now`, if any, for an attempt due to time out
    /// at `deadline` (see `expiring`).
    pub fn token(&self, now: SystemTime, deadline: Instant) -> Result<Option<String>, SinkError> {
        match self {
            PubSubAuth::Anonymous => Ok(None),
            PubSubAuth::Env(variable) => {
                let token = std::env::var(variable).map_err(|_| {
                    SinkError::transient(NoToken::NotSet {
                        variable: variable.clone(),
                    })
                })?;
                let unsendable = |cause| {
                    let from = format!("${variable}");
                    SinkError::transient(NoToken::Fetch { from, cause })
                };
                sendable_bearer(token).map(Some).map_err(unsendable)
            }
            PubSubAuth::Fetched(fetched) => {
                fetched.token(now, deadline).map(Some).map_err(|cause| {
                    SinkError::transient(NoToken::Fetch {
                        from: fetched.from.to_string(),
                        cause,
                    })
                })
            }
        }
    }
}

/// The file `GOOGLE_APPLICATION_CREDENTIALS` names.
pub(super) fn key_file() -> Result<PathBuf, String> {
    std::env::var_os(KEY_FILE_VARIABLE)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{KEY_FILE_VARIABLE} is not set"))
}

/// Where a fetched token comes from (a Pub/Sub sink's access token, an
/// HTTP sink's ID token).
#[derive(Debug, PartialEq)]
pub(super) enum TokenSource {
    Metadata,
    ServiceAccount(Box<ServiceAccountKey>),
    External(Box<ExternalAccount>),
    User(Box<AuthorizedUser>),
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Metadata => f.write_str("the metadata server"),
            TokenSource::ServiceAccount(key) => {
                write!(f, "{} for {}", key.token_uri, key.client_email)
            }
            TokenSource::External(account) => write!(f, "{account}"),
            TokenSource::User(user) => write!(f, "{user}"),
        }
    }
}

impl TokenSource {
    /// The source a validated `credentials` value names, its file read
    /// now (the error says why it cannot be used); `None` for `env`.
    pub(super) fn read(credentials: &str) -> Result<Option<TokenSource>, String> {
        Ok(Some(match credentials {
            "metadata" => TokenSource::Metadata,
            "service_account" => {
                TokenSource::ServiceAccount(Box::new(ServiceAccountKey::read(&key_file()?)?))
            }
            "external_account" => {
                TokenSource::External(Box::new(ExternalAccount::read(&key_file()?)?))
            }
            "authorized_user" => {
                let path = match key_file() {
                    Ok(path) => path,
                    Err(_) => AuthorizedUser::gcloud_file(
                        std::env::var_os("CLOUDSDK_CONFIG"),
                        std::env::var_os("HOME"),
                    )
                    .ok_or_else(|| format!("neither {KEY_FILE_VARIABLE} nor HOME is set"))?,
                };
                TokenSource::User(Box::new(AuthorizedUser::read(&path)?))
            }
            _ => return Ok(None),
        }))
    }
}

/// Tokens fetched from `from`, kept while fresh.
pub struct FetchedToken {
    from: TokenSource,
    client: Client,
    held: Expiring<String>,
}

/// The source only: no token in logs.
impl fmt::Debug for FetchedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FetchedToken({})", self.from)
    }
}

impl FetchedToken {
    fn token(&self, now: SystemTime, deadline: Instant) -> Result<String, BoxError> {
        self.held
            .get(now, Some(deadline), "a Google access token", || {
                let answer = match &self.from {
                    TokenSource::Metadata => self.ask_metadata()?,
                    TokenSource::ServiceAccount(key) => {
                        key.exchange(&self.client, ("scope", PUBSUB_SCOPE), now)?
                    }
                    TokenSource::User(user) => user.ask(&self.client)?,
                    TokenSource::External(account) => {
                        return account.token(&self.client, PUBSUB_SCOPE, now);
                    }
                };
                token_answer(&answer, now)
            })
    }

    /// The metadata server's token for the workload's account.
    fn ask_metadata(&self) -> Result<String, BoxError> {
        ask_metadata(&self.client, "token")
    }
}

/// The metadata server's answer at `path` under the workload's default
/// service account: the server at `GCE_METADATA_HOST` (the variable
/// Google's libraries read), or `metadata.google.internal`.
pub(super) fn ask_metadata(client: &Client, path: &str) -> Result<String, BoxError> {
    let host =
        std::env::var("GCE_METADATA_HOST").unwrap_or_else(|_| "metadata.google.internal".into());
    let url = format!("http://{host}/computeMetadata/v1/instance/service-accounts/default/{path}");
    ok_body(client.get(url).header("metadata-flavor", "Google").call())
}

/// No token to send: the attempt fails, transient (the environment or
/// Google's service may come back).
#[derive(Debug)]
pub enum NoToken {
    /// The sink's token variable is not set.
    NotSet { variable: String },
    /// Google did not give a token.
    Fetch { from: String, cause: BoxError },
}

impl fmt::Display for NoToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoToken::NotSet { variable } => {
                write!(f, "no Pub/Sub access token: {variable} is not set")
            }
            NoToken::Fetch { from, cause } => {
                write!(f, "cannot get a Pub/Sub access token from {from}: {cause}")
            }
        }
    }
}

impl std::error::Error for NoToken {}
