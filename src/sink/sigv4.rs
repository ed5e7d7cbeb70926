//! AWS Signature Version 4 for the SQS sink, the S3 claim bucket and the
//! HTTP sinks with an `aws_service` (a Lambda function URL, API Gateway): AWS's
//! own signer (the `aws-sigv4` crate, without the SDK), with credentials
//! from where the config says (see `aws_credentials`); no secret is kept in
//! goad's config or store.

use super::aws_credentials::{AwsCredentials, CredentialsError};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use std::fmt;
use std::time::{Instant, SystemTime};

/// Why a request could not be signed.
#[derive(Debug)]
pub enum SignError {
    Credentials(CredentialsError),
    Signing(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignError::Credentials(e) => write!(f, "{e}"),
            SignError::Signing(e) => write!(f, "cannot sign the request: {e}"),
        }
    }
}

impl std::error::Error for SignError {}

impl SignError {
    /// The attempt's failure: transient without credentials (they may come
    /// back), permanent when the request cannot be signed at all (the
    /// credentials were checked as they came: see
    /// `aws_credentials::sendable`).
    pub fn failure(self) -> super::SinkError {
        match self {
            SignError::Credentials(e) => super::SinkError::transient(e),
            other => super::SinkError::permanent(other),
        }
    }
}

/// An HTTP sink's signing: the service and region its requests are
/// signed for, and the credentials that sign them.
#[derive(Debug, Clone)]
pub struct AwsSigning {
    pub service: String,
    pub region: String,
    pub credentials: AwsCredentials,
}

impl AwsSigning {
    /// The same service and region, credentials from the same place.
    pub(crate) fn same_as(&self, other: &AwsSigning) -> bool {
        self.service == other.service
            && self.region == other.region
            && self.credentials.same_source(&other.credentials)
    }

    /// The headers that sign a request of `method` to `url` with this
    /// `content_type` and `body` at `now`, for an attempt due to time out
    /// at `deadline`. They sign its host, content type and body (and the
    /// `x-amz-*` headers they add), not goad's and the provider's other
    /// headers, which a proxy on the way may rewrite.
    pub fn headers(
        &self,
        method: &str,
        url: &str,
        content_type: &str,
        body: &[u8],
        now: SystemTime,
        deadline: Instant,
    ) -> Result<Vec<(String, String)>, SignError> {
        let headers = [("content-type", content_type)];
        let unsigned = Unsigned {
            method,
            url,
            headers: &headers,
            body,
        };
        sign_headers(
            &self.credentials,
            &self.region,
            &self.service,
            &unsigned,
            now,
            Some(deadline),
        )
    }
}

/// S3 signs its payload's hash in a header and its paths as they are (no
/// double encoding, no normalizing); the other services take the defaults.
fn settings_for(service: &str) -> SigningSettings {
    let mut settings = SigningSettings::default();
    if service == "s3" {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    }
    settings
}

/// What a request to sign is: its method, URL, headers and body.
pub struct Unsigned<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The headers that sign `request` for `service` in `region` at `now`
/// (`authorization`, `x-amz-date`, and `x-amz-security-token` with a
/// session token; for S3 also `x-amz-content-sha256`), to send beside its
/// own; credentials still to fetch are waited for until about `deadline`,
/// if given (see [`AwsCredentials::get`]).
pub fn sign_headers(
    credentials: &AwsCredentials,
    region: &str,
    service: &str,
    request: &Unsigned<'_>,
    now: SystemTime,
    deadline: Option<Instant>,
) -> Result<Vec<(String, String)>, SignError> {
    let credentials = credentials.get(now, deadline);
    let credentials = credentials.map_err(SignError::Credentials)?;
    sign_with(credentials, region, service, request, now).map_err(SignError::Signing)
}

/// `sign_headers` with credentials in hand.
pub(super) fn sign_with(
    credentials: Credentials,
    region: &str,
    service: &str,
    request: &Unsigned<'_>,
    now: SystemTime,
) -> Result<Vec<(String, String)>, super::BoxError> {
    let identity: Identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(now)
        .settings(settings_for(service))
        .build()?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        request.headers.iter().copied(),
        SignableBody::Bytes(request.body),
    )?;
    let (instructions, _signature) = sign(signable, &params)?.into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect())
}
