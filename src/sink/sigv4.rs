//! AWS Signature Version 4 for the SQS sink: AWS's own signer (the
//! `aws-sigv4` crate, without the SDK), with credentials read from the
//! environment at every attempt, so rotated keys apply at once and no
//! secret is kept in goad's config or store.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use std::fmt;
use std::time::SystemTime;

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
}

/// A credential variable that is not set: the attempt fails (transient, so
/// a fixed environment takes over on the next attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoCredentials {
    pub variable: String,
}

impl fmt::Display for NoCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no AWS credentials: {} is not set", self.variable)
    }
}

impl std::error::Error for NoCredentials {}

impl EnvCredentials {
    fn read(&self) -> Result<Credentials, NoCredentials> {
        let var = |name: &str| {
            std::env::var(name).map_err(|_| NoCredentials {
                variable: name.to_string(),
            })
        };
        let token = std::env::var(&self.session_token).ok();
        Ok(Credentials::new(
            var(&self.access_key_id)?,
            var(&self.secret_access_key)?,
            token.filter(|t| !t.is_empty()),
            None,
            "environment",
        ))
    }
}

/// Why a request could not be signed.
#[derive(Debug)]
pub enum SignError {
    NoCredentials(NoCredentials),
    Signing(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignError::NoCredentials(e) => write!(f, "{e}"),
            SignError::Signing(e) => write!(f, "cannot sign the request: {e}"),
        }
    }
}

impl std::error::Error for SignError {}

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
/// own.
pub fn sign_headers(
    credentials: &EnvCredentials,
    region: &str,
    service: &str,
    request: &Unsigned<'_>,
    now: SystemTime,
) -> Result<Vec<(String, String)>, SignError> {
    let identity: Identity = credentials.read().map_err(SignError::NoCredentials)?.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(now)
        .settings(settings_for(service))
        .build()
        .map_err(|e| SignError::Signing(e.into()))?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        request.headers.iter().copied(),
        SignableBody::Bytes(request.body),
    )
    .map_err(|e| SignError::Signing(e.into()))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| SignError::Signing(e.into()))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect())
}
