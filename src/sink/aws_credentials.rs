//! Where the AWS credentials of an SQS sink or an S3 claim bucket come
//! from (`credentials` in its config), for signing (see `sigv4`):
//!
//! - `env` (the default): three environment variables, read at every
//!   request, so rotated keys apply at once;
//! - `instance`: the EC2 instance's role, from the instance metadata
//!   service (IMDSv2: a session token, then the role's credentials), at
//!   `AWS_EC2_METADATA_SERVICE_ENDPOINT` or `http://169.254.169.254`;
//! - `container`: an ECS task's role (or EKS Pod Identity), from
//!   `AWS_CONTAINER_CREDENTIALS_FULL_URI`, or
//!   `http://169.254.170.2$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, with the
//!   token of `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` or
//!   `AWS_CONTAINER_AUTHORIZATION_TOKEN` when set;
//! - `web_identity`: an EKS service account's role (IRSA): the token in
//!   `AWS_WEB_IDENTITY_TOKEN_FILE` exchanged for the credentials of
//!   `AWS_ROLE_ARN` by STS's `AssumeRoleWithWebIdentity` (unsigned), at
//!   `AWS_ENDPOINT_URL_STS`, `AWS_ENDPOINT_URL` (see `aws_endpoint`) or
//!   `https://sts.<region>.amazonaws.com`;
//! - `profile`: the `AWS_PROFILE` profile (else `default`): its keys in the
//!   shared credentials file, its SSO role or its `credential_process`, or
//!   the role it names (see `aws_profile`).
//!
//! These are the variables AWS's SDKs read, and the platforms set them.
//! Fetched credentials are kept while fresh (see `expiring`). Nothing is
//! stored: a restart fetches again. With `role_arn`, the credentials of
//! any of these assume that role (see `assume_role`).

use super::assume_role::{AssumedRole, RoleToAssume, DEFAULT_ROLE_SESSION_NAME};
use super::aws_endpoint::AwsService;
use super::aws_profile::profile_credentials;
use super::aws_xml;
use super::client::{form, ok_body, Client};
use super::expiring::{Expiring, Unfetched};
use crate::bounded_read::read_text_at_most;
use crate::limits::{CREDENTIALS_LIFETIME_MS, HTTP_TIMEOUT_MS, MAX_KEY_FILE_BYTES};
use aws_credential_types::Credentials;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The values of `credentials`.
pub const CREDENTIAL_SOURCES: &[&str] =
    &["env", "instance", "container", "web_identity", "profile"];

/// Where a sink's or a bucket's credentials come from.
#[derive(Debug, Clone)]
pub enum AwsCredentials {
    /// Environment variables, read at every request.
    Env(EnvCredentials),
    /// Fetched from AWS, and kept until shortly before they expire.
    Fetched(Arc<FetchedCredentials>),
    /// A role's, assumed with other credentials.
    Assumed(Arc<AssumedRole>),
}

impl AwsCredentials {
    /// The credentials of a validated `credentials` option: `env` (or
    /// none) reads `env`; the others fetch for `region` (STS's).
    pub fn new(source: Option<&str>, env: EnvCredentials, region: &str) -> AwsCredentials {
        let source = match source.unwrap_or("env") {
            "instance" => CredentialSource::Instance,
            "container" => CredentialSource::Container,
            "web_identity" => CredentialSource::WebIdentity,
            "profile" => CredentialSource::Profile,
            _ => return AwsCredentials::Env(env),
        };
        AwsCredentials::Fetched(Arc::new(FetchedCredentials {
            source,
            region: region.to_string(),
            client: Client::for_aws(HTTP_TIMEOUT_MS, 1),
            held: Expiring::new(),
        }))
    }

    /// These credentials, or those of `role` assumed with them at the STS
    /// endpoint of `region`.
    pub fn assuming(self, role: Option<RoleToAssume>, region: &str) -> AwsCredentials {
        match role {
            Some(role) => AwsCredentials::Assumed(Arc::new(AssumedRole::new(role, self, region))),
            None => self,
        }
    }

    /// Whether `other` takes its credentials from the same place (the
    /// same variables, service and region, or the same role assumed with
    /// the same credentials): the ones these hold would do for it.
    pub(crate) fn same_source(&self, other: &AwsCredentials) -> bool {
        match (self, other) {
            (AwsCredentials::Env(a), AwsCredentials::Env(b)) => a == b,
            (AwsCredentials::Fetched(a), AwsCredentials::Fetched(b)) => {
                a.source == b.source && a.region == b.region
            }
            (AwsCredentials::Assumed(a), AwsCredentials::Assumed(b)) => a.same_role(b),
            _ => false,
        }
    }

    /// What sets holders apart: the role an assumed role's are of, else
    /// whether they are fetched (few holders share each).
    pub(crate) fn sharing_key(&self) -> &str {
        match self {
            AwsCredentials::Env(_) => "env",
            AwsCredentials::Fetched(_) => "fetched",
            AwsCredentials::Assumed(role) => role.role_arn(),
        }
    }

    /// What the environment lacks for these credentials, which are read
    /// at each request, not at a start: `env` credentials' variables (an
    /// assumed role's base ones too) not set, or holding what no request
    /// can carry, or a profile that cannot be found. Fetched credentials
    /// are not fetched.
    pub fn environment_problem(&self) -> Option<CredentialsError> {
        match self {
            AwsCredentials::Env(env) => env.read().err(),
            AwsCredentials::Fetched(fetched) => fetched.environment_problem(),
            AwsCredentials::Assumed(role) => role.base().environment_problem(),
        }
    }

    /// The credentials an assumed role's are asked for with.
    pub(crate) fn base(&self) -> Option<&AwsCredentials> {
        match self {
            AwsCredentials::Assumed(role) => Some(role.base()),
            _ => None,
        }
    }

    /// Credentials to sign a request at `now`, for an attempt due to time
    /// out at `deadline` (see `expiring`).
    pub fn get(
        &self,
        now: SystemTime,
        deadline: Option<Instant>,
    ) -> Result<Credentials, CredentialsError> {
        match self {
            AwsCredentials::Env(env) => env.read(),
            AwsCredentials::Fetched(fetched) => fetched.get(now, deadline),
            AwsCredentials::Assumed(role) => role.get(now, deadline),
        }
    }
}

/// The environment variables holding a sink's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Read when set (temporary credentials).
    pub session_token: String,
}

impl Default for EnvCredentials {
    fn default() -> Self {
        EnvCredentials {
            access_key_id: "AWS_ACCESS_KEY_ID".into(),
            secret_access_key: "AWS_SECRET_ACCESS_KEY".into(),
            session_token: "AWS_SESSION_TOKEN".into(),
        }
    }
}

impl EnvCredentials {
    /// The variables a config names, each defaulting to AWS's own.
    pub fn named(
        access_key_id: &Option<String>,
        secret_access_key: &Option<String>,
        session_token: &Option<String>,
    ) -> EnvCredentials {
        let defaults = EnvCredentials::default();
        EnvCredentials {
            access_key_id: access_key_id.clone().unwrap_or(defaults.access_key_id),
            secret_access_key: secret_access_key
                .clone()
                .unwrap_or(defaults.secret_access_key),
            session_token: session_token.clone().unwrap_or(defaults.session_token),
        }
    }

    pub(super) fn read(&self) -> Result<Credentials, CredentialsError> {
        let token = std::env::var(&self.session_token).ok();
        let credentials = Credentials::new(
            variable(&self.access_key_id)?,
            variable(&self.secret_access_key)?,
            token.filter(|t| !t.is_empty()),
            None,
            "environment",
        );
        sendable(credentials).map_err(|unsendable| CredentialsError::Unsendable {
            from: match unsendable {
                Unsendable::AccessKeyId => self.access_key_id.clone(),
                Unsendable::SessionToken => self.session_token.clone(),
            },
            unsendable,
        })
    }
}

/// Which of a set of credentials no request can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsendable {
    /// The access key id (in the `authorization` header).
    AccessKeyId,
    /// The session token (`x-amz-security-token`).
    SessionToken,
}

impl fmt::Display for Unsendable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            Unsendable::AccessKeyId => "the access key id",
            Unsendable::SessionToken => "the session token",
        };
        write!(
            f,
            "{what} is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no request can carry"
        )
    }
}

impl std::error::Error for Unsendable {}

/// `credentials`, if the requests they sign can carry them. Else which
/// part cannot (not the value): such credentials would fail every request
/// they sign, so they are not kept, and the attempt fails, transient.
pub(super) fn sendable(credentials: Credentials) -> Result<Credentials, Unsendable> {
    let sendable = super::http::sendable_credential;
    if !sendable(credentials.access_key_id()) {
        return Err(Unsendable::AccessKeyId);
    }
    if credentials.session_token().is_some_and(|t| !sendable(t)) {
        return Err(Unsendable::SessionToken);
    }
    Ok(credentials)
}

/// An environment variable that must be set.
fn variable(name: &str) -> Result<String, CredentialsError> {
    std::env::var(name).map_err(|_| CredentialsError::NotSet {
        variable: name.to_string(),
    })
}

/// Where fetched credentials come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialSource {
    Instance,
    Container,
    WebIdentity,
    Profile,
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CredentialSource::Instance => "the instance metadata service",
            CredentialSource::Container => "the container credentials endpoint",
            CredentialSource::WebIdentity => "STS (AssumeRoleWithWebIdentity)",
            CredentialSource::Profile => "the AWS profile",
        })
    }
}

/// Credentials fetched from `source`, kept while fresh.
pub struct FetchedCredentials {
    source: CredentialSource,
    region: String,
    client: Client,
    held: Expiring<Credentials>,
}

/// The source only: no credentials in logs.
impl fmt::Debug for FetchedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FetchedCredentials({})", self.source)
    }
}

impl FetchedCredentials {
    fn get(
        &self,
        now: SystemTime,
        deadline: Option<Instant>,
    ) -> Result<Credentials, CredentialsError> {
        self.held.get(now, deadline, "AWS credentials", || {
            let fetched = self.fetch(now)?;
            let expiry = fetched.expiry().expect("fetched credentials expire");
            Ok((fetched, expiry))
        })
    }

    fn fetch(&self, now: SystemTime) -> Result<Credentials, CredentialsError> {
        let fetched = match self.source {
            CredentialSource::Instance => instance_credentials(&self.client, now),
            CredentialSource::Container => container_credentials(&self.client, now),
            CredentialSource::WebIdentity => self.fetch_web_identity(now),
            CredentialSource::Profile => profile_credentials(now, &self.region, &self.client),
        };
        let fetched = fetched.and_then(|c| sendable(c).map_err(|e| Fetch::Failed(e.into())));
        fetched.map_err(|cause| self.error(cause))
    }

    /// What keeps a profile's credentials from being found at all (see
    /// `aws_profile::profile_problem`); the other sources are only known
    /// by fetching: `None`.
    fn environment_problem(&self) -> Option<CredentialsError> {
        match self.source {
            CredentialSource::Profile => {
                super::aws_profile::profile_problem().map(|e| self.error(e))
            }
            _ => None,
        }
    }

    /// A failure to fetch from this source, as its error says it.
    fn error(&self, cause: Fetch) -> CredentialsError {
        match cause {
            Fetch::NotSet(variable) => CredentialsError::NotSet { variable },
            Fetch::Failed(cause) => CredentialsError::Fetch {
                from: self.source,
                cause,
            },
        }
    }

    /// STS's `AssumeRoleWithWebIdentity` with the service account's token.
    fn fetch_web_identity(&self, now: SystemTime) -> Result<Credentials, Fetch> {
        let token = read_file(&env("AWS_WEB_IDENTITY_TOKEN_FILE")?)?;
        let role_arn = env("AWS_ROLE_ARN")?;
        let session = std::env::var("AWS_ROLE_SESSION_NAME")
            .unwrap_or_else(|_| DEFAULT_ROLE_SESSION_NAME.into());
        let form = form(&[
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", &role_arn),
            ("RoleSessionName", &session),
            ("WebIdentityToken", token.trim()),
        ]);
        let answer = self
            .client
            .post(sts_endpoint(&self.region))
            .header("content-type", "application/x-www-form-urlencoded")
            .send(form);
        sts_credentials(answer, now, "web_identity").map_err(Fetch::Failed)
    }
}

/// IMDSv2: a session token, the role's name, its credentials. A session
/// token that does not come in time is most often a container's on an
/// instance whose metadata hop limit is 1 (its answer is dropped a hop
/// short): the error says so.
pub(super) fn instance_credentials(client: &Client, now: SystemTime) -> Result<Credentials, Fetch> {
    let endpoint = std::env::var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .unwrap_or_else(|_| "http://169.254.169.254".into());
    let endpoint = endpoint.trim_end_matches('/');
    let token = client
        .put(format!("{endpoint}/latest/api/token"))
        .header("x-aws-ec2-metadata-token-ttl-seconds", "21600")
        .send_empty();
    if let Err(e @ ureq::Error::Timeout(_)) = &token {
        return Err(Fetch::failed(format!(
            "no IMDSv2 session token ({e}): from a container, the instance's metadata \
             hop limit must be 2 or more (aws ec2 modify-instance-metadata-options \
             --http-put-response-hop-limit 2)"
        )));
    }
    let token = read(token)?;
    let roles_url = format!("{endpoint}/latest/meta-data/iam/security-credentials/");
    let metadata = |url: &str| {
        let request = client
            .get(url)
            .header("x-aws-ec2-metadata-token", token.trim());
        read(request.call())
    };
    let roles = metadata(&roles_url)?;
    let role = roles.lines().next().unwrap_or_default().trim();
    if role.is_empty() {
        return Err(Fetch::Failed("the instance has no role".into()));
    }
    let document = metadata(&format!("{roles_url}{role}"))?;
    from_json(&document, now)
}

/// The container endpoint, with its authorization token when set.
pub(super) fn container_credentials(
    client: &Client,
    now: SystemTime,
) -> Result<Credentials, Fetch> {
    let url = match std::env::var("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        Ok(url) => url,
        Err(_) => {
            let relative = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")?;
            format!("http://169.254.170.2{relative}")
        }
    };
    let token = match std::env::var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
        Ok(file) => Some(read_file(&file)?),
        Err(_) => std::env::var("AWS_CONTAINER_AUTHORIZATION_TOKEN").ok(),
    };
    let mut request = client.get(&url);
    if let Some(token) = token {
        request = request.header("authorization", token.trim());
    }
    from_json(&read(request.call())?, now)
}

/// Where STS requests go: the endpoint the environment names for STS
/// (see [`super::aws_endpoint`]) or STS's endpoint in `region`, as
/// `<origin>/`.
pub(super) fn sts_endpoint(region: &str) -> String {
    let endpoint = AwsService::Sts.configured_endpoint();
    let endpoint = endpoint.unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
    format!("{endpoint}/")
}

/// The credentials of STS's answer to an `AssumeRole*` call (its
/// `Credentials` element), named `provider`.
pub(super) fn sts_credentials(
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    now: SystemTime,
    provider: &'static str,
) -> Result<Credentials, super::BoxError> {
    let answer = ok_body(response)?;
    let field =
        |tag: &str| aws_xml::text(&answer, tag).ok_or_else(|| format!("no {tag} in STS's answer"));
    let expires_at = parse_expiration(field("Expiration")?)?;
    Ok(Credentials::new(
        field("AccessKeyId")?,
        field("SecretAccessKey")?,
        Some(field("SessionToken")?.to_string()),
        Some(expires_at.max(now)),
        provider,
    ))
}

/// Why fetching failed, before the source is named.
pub(super) enum Fetch {
    NotSet(String),
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl Fetch {
    /// A failure told by `why`.
    pub(super) fn failed(why: String) -> Fetch {
        Fetch::Failed(why.into())
    }
}

/// The body of a 200 answer; anything else is a failure.
fn read(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<String, Fetch> {
    ok_body(response).map_err(Fetch::Failed)
}

pub(super) fn env(name: &str) -> Result<String, Fetch> {
    std::env::var(name).map_err(|_| Fetch::NotSet(name.to_string()))
}

pub(super) fn read_file(path: &str) -> Result<String, Fetch> {
    read_text_at_most(path, MAX_KEY_FILE_BYTES)
        .map_err(|e| Fetch::failed(format!("cannot read {path}: {e}")))
}

/// The credentials document of the instance metadata service, the
/// container endpoint and a `credential_process`: `AccessKeyId`,
/// `SecretAccessKey`, `Token` (or `SessionToken`), `Expiration` (RFC 3339;
/// when absent, `CREDENTIALS_LIFETIME_MS` from now).
pub(super) fn from_json(document: &str, now: SystemTime) -> Result<Credentials, Fetch> {
    let document: Value = serde_json::from_str(document).map_err(|e| Fetch::Failed(e.into()))?;
    let field = |name: &str| {
        document
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| Fetch::failed(format!("no {name} in the credentials document")))
    };
    let expires_at = match document.get("Expiration").and_then(Value::as_str) {
        Some(at) => parse_expiration(at).map_err(Fetch::Failed)?,
        None => now + Duration::from_millis(CREDENTIALS_LIFETIME_MS),
    };
    Ok(Credentials::new(
        field("AccessKeyId")?,
        field("SecretAccessKey")?,
        ["Token", "SessionToken"]
            .iter()
            .find_map(|name| document.get(*name).and_then(Value::as_str))
            .map(str::to_string),
        Some(expires_at),
        "fetched",
    ))
}

fn parse_expiration(at: &str) -> Result<SystemTime, super::BoxError> {
    humantime::parse_rfc3339_weak(at).map_err(|e| format!("an Expiration of {at:?}: {e}").into())
}

/// No credentials to sign with: the attempt fails, transient (the
/// environment or the source may come back).
#[derive(Debug)]
pub enum CredentialsError {
    /// A variable the credentials come from is not set.
    NotSet { variable: String },
    /// A variable the credentials come from holds what no request can
    /// carry.
    Unsendable {
        from: String,
        unsendable: Unsendable,
    },
    /// The source did not give credentials.
    Fetch {
        from: CredentialSource,
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// STS did not give the role's credentials (or the credentials to ask
    /// with were missing).
    Assume {
        role_arn: String,
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Another attempt's fetch, which this one waited for, failed or had
    /// not ended by this attempt's deadline.
    Unfetched(Unfetched),
}

impl From<Unfetched> for CredentialsError {
    fn from(unfetched: Unfetched) -> CredentialsError {
        CredentialsError::Unfetched(unfetched)
    }
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsError::NotSet { variable } => {
                write!(f, "no AWS credentials: {variable} is not set")
            }
            CredentialsError::Unsendable { from, unsendable } => {
                write!(f, "no AWS credentials in {from}: {unsendable}")
            }
            CredentialsError::Fetch { from, cause } => {
                write!(f, "cannot get AWS credentials from {from}: {cause}")
            }
            CredentialsError::Assume { role_arn, cause } => {
                write!(f, "cannot assume role {role_arn}: {cause}")
            }
            CredentialsError::Unfetched(unfetched) => unfetched.fmt(f),
        }
    }
}

impl std::error::Error for CredentialsError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::receiver::{Receiver, Reply};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Fetched credentials are kept while fresh, and serve past a failed
    /// refresh until they expire; credentials whose session token no
    /// request can carry are not kept, so the next fetch asks again.
    #[test]
    fn fetched_credentials_are_kept_while_fresh_and_serve_past_a_failed_refresh_until_they_expire()
    {
        let failing = Arc::new(AtomicBool::new(false));
        let broken = Arc::new(AtomicBool::new(false));
        let (fails, breaks) = (failing.clone(), broken.clone());
        let endpoint = Receiver::start(move |_| {
            if fails.load(Ordering::SeqCst) {
                return Reply::status(503);
            }
            let token = match breaks.load(Ordering::SeqCst) {
                true => "T\\nx-injected: 1",
                false => "T",
            };
            let document = format!(
                r#"{{"AccessKeyId":"AK","SecretAccessKey":"S","Token":"{token}",
                "Expiration":"2030-01-01T00:00:00Z"}}"#
            );
            Reply::status(200).with_body(document)
        })
        .unwrap();
        std::env::set_var("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url("/"));
        let credentials = AwsCredentials::new(Some("container"), EnvCredentials::default(), "");
        let expiry = humantime::parse_rfc3339("2030-01-01T00:00:00Z").unwrap();
        let minutes_before = |minutes: u64| expiry - Duration::from_secs(60 * minutes);
        let key = |now| {
            credentials
                .get(now, None)
                .map(|c| c.access_key_id().to_string())
        };
        assert_eq!(key(minutes_before(60)).ok().as_deref(), Some("AK"));
        assert_eq!(key(minutes_before(6)).ok().as_deref(), Some("AK"));
        assert_eq!(endpoint.received().len(), 1, "fresh: kept");
        failing.store(true, Ordering::SeqCst);
        let refresh_failed = key(minutes_before(4));
        assert_eq!(refresh_failed.ok().as_deref(), Some("AK"));
        assert_eq!(endpoint.received().len(), 2, "due: fetched again");
        let expired = key(expiry + Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert_eq!(
            expired,
            "cannot get AWS credentials from the container credentials endpoint: HTTP status 503"
        );
        failing.store(false, Ordering::SeqCst);
        broken.store(true, Ordering::SeqCst);
        let unsendable = key(expiry + Duration::from_secs(2)).unwrap_err();
        assert_eq!(
            unsendable.to_string(),
            "cannot get AWS credentials from the container credentials endpoint: the session token is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no request can carry"
        );
        broken.store(false, Ordering::SeqCst);
        let asked = endpoint.received().len();
        assert!(key(expiry + Duration::from_secs(3)).is_ok());
        assert_eq!(
            endpoint.received().len(),
            asked + 1,
            "not kept: asked again"
        );
    }

    /// Credentials from the environment that no request can carry name the
    /// variable, not the value.
    #[test]
    fn environment_credentials_no_request_can_carry_name_their_variable() {
        let env = EnvCredentials::named(
            &Some("GOAD_TEST_UNSENDABLE_KEY".into()),
            &Some("GOAD_TEST_UNSENDABLE_SECRET".into()),
            &Some("GOAD_TEST_UNSENDABLE_TOKEN".into()),
        );
        std::env::set_var("GOAD_TEST_UNSENDABLE_KEY", "AK");
        std::env::set_var("GOAD_TEST_UNSENDABLE_SECRET", "S\n");
        std::env::set_var("GOAD_TEST_UNSENDABLE_TOKEN", "T\r\n");
        assert_eq!(
            env.read().unwrap_err().to_string(),
            "no AWS credentials in GOAD_TEST_UNSENDABLE_TOKEN: the session token is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no request can carry"
        );
        std::env::set_var("GOAD_TEST_UNSENDABLE_TOKEN", "T");
        std::env::set_var("GOAD_TEST_UNSENDABLE_KEY", "");
        assert_eq!(
            env.read().unwrap_err().to_string(),
            "no AWS credentials in GOAD_TEST_UNSENDABLE_KEY: the access key id is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no request can carry"
        );
        std::env::set_var("GOAD_TEST_UNSENDABLE_KEY", "AK");
        // The secret signs; it is never sent.
        assert_eq!(env.read().unwrap().secret_access_key(), "S\n");
    }

    #[test]
    fn documents_give_credentials_and_their_expiry() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let imds = r#"{"Code":"Success","AccessKeyId":"AK","SecretAccessKey":"S","Token":"T","Expiration":"2026-12-01T23:18:27Z"}"#;
        let c = from_json(imds, now).ok().unwrap();
        assert_eq!(
            (c.access_key_id(), c.secret_access_key(), c.session_token()),
            ("AK", "S", Some("T"))
        );
        let expected = humantime::parse_rfc3339("2026-12-01T23:18:27Z").unwrap();
        assert_eq!(c.expiry(), Some(expected));
        let forever = from_json(r#"{"AccessKeyId":"AK","SecretAccessKey":"S"}"#, now)
            .ok()
            .unwrap();
        let lifetime = Duration::from_millis(CREDENTIALS_LIFETIME_MS);
        assert_eq!(forever.expiry(), Some(now + lifetime));
        assert!(from_json(r#"{"AccessKeyId":"AK"}"#, now).is_err());
        let process =
            r#"{"Version":1,"AccessKeyId":"AK","SecretAccessKey":"S","SessionToken":"P"}"#;
        assert_eq!(
            from_json(process, now).ok().unwrap().session_token(),
            Some("P")
        );
        assert!(parse_expiration("2026-12-01T00:18:27.535519Z").is_ok());
    }
}
