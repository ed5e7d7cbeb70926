//! A role to assume (`role_arn` of an SQS sink or of the S3 claim bucket):
//! STS's `AssumeRole`, signed with the credentials `credentials` names,
//! gives the role's temporary credentials, which sign the sink's requests —
//! a queue or a bucket in another account, or a role that only goad's
//! writes may take. They are kept while fresh (see `expiring`), so STS is
//! asked once an hour per sink, not per request.

use super::aws_credentials::{sts_credentials, sts_endpoint, AwsCredentials, CredentialsError};
use super::client::{form, Client};
use super::expiring::Expiring;
use super::sigv4::{sign_with, Unsigned};
use crate::limits::{ASSUMED_ROLE_DURATION_S, HTTP_TIMEOUT_MS};
use aws_credential_types::Credentials;
use std::fmt;
use std::time::{Instant, SystemTime};

/// The session name a role's sessions get unless the config names one.
pub const DEFAULT_ROLE_SESSION_NAME: &str = "goad";

/// Which role to assume, as the config says (validated there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleToAssume {
    pub role_arn: String,
    /// The external id the role's trust policy asks for, if any.
    pub external_id: Option<String>,
    /// The session's name in the role's CloudTrail records.
    pub session_name: String,
}

impl RoleToAssume {
    /// The role of a config's `role_arn`, `external_id` and
    /// `role_session_name`; `None` without `role_arn`.
    pub fn named(
        role_arn: &Option<String>,
        external_id: &Option<String>,
        session_name: &Option<String>,
    ) -> Option<RoleToAssume> {
        Some(RoleToAssume {
            role_arn: role_arn.clone()?,
            external_id: external_id.clone(),
            session_name: session_name
                .clone()
                .unwrap_or_else(|| DEFAULT_ROLE_SESSION_NAME.into()),
        })
    }
}

/// A role's credentials, asked of STS with `base` and kept while fresh.
pub struct AssumedRole {
    role: RoleToAssume,
    base: AwsCredentials,
    region: String,
    client: Client,
    held: Expiring<Credentials>,
}

/// The role only: no credentials in logs.
impl fmt::Debug for AssumedRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AssumedRole({})", self.role.role_arn)
    }
}

impl AssumedRole {
    /// `role`, assumed with `base` at the STS endpoint of `region`.
    pub fn new(role: RoleToAssume, base: AwsCredentials, region: &str) -> AssumedRole {
        AssumedRole {
            role,
            base,
            region: region.to_string(),
            client: Client::for_aws(HTTP_TIMEOUT_MS, 1),
            held: Expiring::new(),
        }
    }

    /// Whether `other` assumes the same role, at the same region's STS,
    /// with credentials from the same place.
    pub(crate) fn same_role(&self, other: &AssumedRole) -> bool {
        self.role == other.role && self.region == other.region && self.base.same_source(&other.base)
    }

    /// The role's ARN.
    pub(crate) fn role_arn(&self) -> &str {
        &self.role.role_arn
    }

    /// The credentials it is assumed with.
    pub(crate) fn base(&self) -> &AwsCredentials {
        &self.base
    }

    /// The role's credentials at `now`, for an attempt due to time out at
    /// `deadline`.
    pub fn get(
        &self,
        now: SystemTime,
        deadline: Option<Instant>,
    ) -> Result<Credentials, CredentialsError> {
        let what = format_args!("the credentials of role {}", self.role.role_arn);
        self.held.get(now, deadline, &what, || {
            let assumed = self
                .assume(now, deadline)
                .map_err(|cause| CredentialsError::Assume {
                    role_arn: self.role.role_arn.clone(),
                    cause,
                })?;
            let expiry = assumed.expiry().expect("STS's credentials expire");
            Ok((assumed, expiry))
        })
    }

    /// One `AssumeRole` call, signed with the base credentials.
    fn assume(
        &self,
        now: SystemTime,
        deadline: Option<Instant>,
    ) -> Result<Credentials, super::BoxError> {
        // The base credentials' own error says where they failed.
        let base = self.base.get(now, deadline)?;
        let assumed = assume(&self.role, base, &self.region, &self.client, now)?;
        Ok(super::aws_credentials::sendable(assumed)?)
    }
}

/// `role`'s credentials, asked of the STS endpoint of `region` in one
/// `AssumeRole` call signed with `base`.
pub(super) fn assume(
    role: &RoleToAssume,
    base: Credentials,
    region: &str,
    client: &Client,
    now: SystemTime,
) -> Result<Credentials, super::BoxError> {
    let duration_s = ASSUMED_ROLE_DURATION_S.to_string();
    let mut fields = vec![
        ("Action", "AssumeRole"),
        ("Version", "2011-06-15"),
        ("RoleArn", role.role_arn.as_str()),
        ("RoleSessionName", role.session_name.as_str()),
        ("DurationSeconds", duration_s.as_str()),
    ];
    if let Some(external_id) = &role.external_id {
        fields.push(("ExternalId", external_id));
    }
    let body = form(&fields);
    let url = sts_endpoint(region);
    let headers = [("content-type", "application/x-www-form-urlencoded")];
    let unsigned = Unsigned {
        method: "POST",
        url: &url,
        headers: &headers,
        body: body.as_bytes(),
    };
    let signed = sign_with(base, region, "sts", &unsigned, now)?;
    let mut post = client.post(&url);
    for (name, value) in headers.iter().copied() {
        post = post.header(name, value);
    }
    for (name, value) in &signed {
        post = post.header(name.as_str(), value.as_str());
    }
    sts_credentials(post.send(body), now, "assumed_role")
}
