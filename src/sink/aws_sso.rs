//! An AWS profile's IAM Identity Center (SSO) role, as `aws configure sso`
//! writes one: `sso_account_id` and `sso_role_name` in the profile, and the
//! portal's `sso_region` in the `[sso-session <name>]` its `sso_session`
//! names (or, in the legacy form, in the profile beside `sso_start_url`).
//!
//! The access token is the one `aws sso login` cached, in
//! `$HOME/.aws/sso/cache/<SHA-1 of the session name, or of the start URL>.json`;
//! goad reads it at each fetch and does not refresh it: an expired token
//! fails the attempt saying to log in again. With it, the portal's
//! `GetRoleCredentials` (at `AWS_ENDPOINT_URL_SSO` or `AWS_ENDPOINT_URL`,
//! see `aws_endpoint`, else `https://portal.sso.<sso_region>.amazonaws.com`) gives the role's
//! temporary credentials, kept until shortly before they expire.

use super::aws_credentials::{env, Fetch};
use super::aws_endpoint::AwsService;
use super::client::{ok_body, percent_encoded, Client};
use crate::bounded_read::read_text_at_most;
use crate::limits::MAX_KEY_FILE_BYTES;
use aws_credential_types::Credentials;
use serde_json::Value;
use sha1::Digest as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A profile's SSO role.
pub(super) struct SsoRole {
    pub account_id: String,
    pub role_name: String,
    /// The portal's region.
    pub region: String,
    /// What names the cached token: the session's name, or the start URL.
    pub token_key: String,
}

impl SsoRole {
    /// The role's credentials at `now`, asked with the cached token.
    pub fn credentials(&self, client: &Client, now: SystemTime) -> Result<Credentials, Fetch> {
        let token = self.cached_token(now)?;
        let endpoint = AwsService::Sso.configured_endpoint();
        let endpoint =
            endpoint.unwrap_or_else(|| format!("https://portal.sso.{}.amazonaws.com", self.region));
        let url = format!(
            "{endpoint}/federation/credentials?account_id={}&role_name={}",
            percent_encoded(&self.account_id),
            percent_encoded(&self.role_name)
        );
        let answer = client
            .get(&url)
            .header("x-amz-sso_bearer_token", &token)
            .call();
        let body =
            ok_body(answer).map_err(|e| Fetch::failed(format!("GetRoleCredentials: {e}")))?;
        role_credentials(&body)
    }

    /// The access token `aws sso login` cached, unless it has expired.
    fn cached_token(&self, now: SystemTime) -> Result<String, Fetch> {
        let name = hex::encode(sha1::Sha1::digest(self.token_key.as_bytes()));
        let path = format!("{}/.aws/sso/cache/{name}.json", env("HOME")?);
        let text = read_text_at_most(&path, MAX_KEY_FILE_BYTES).map_err(|e| {
            Fetch::failed(format!(
                "cannot read the SSO token {path} ({e}): run `aws sso login`"
            ))
        })?;
        let cached: Value = serde_json::from_str(&text)
            .map_err(|e| Fetch::failed(format!("the SSO token {path} is not JSON: {e}")))?;
        let token = cached.get("accessToken").and_then(Value::as_str);
        let expires = cached.get("expiresAt").and_then(Value::as_str);
        let (Some(token), Some(expires)) = (token, expires) else {
            return Err(Fetch::failed(format!(
                "no accessToken and expiresAt in the SSO token {path}"
            )));
        };
        // botocore writes `…Z`; older CLIs wrote `…UTC`.
        let rfc3339 = match expires.strip_suffix("UTC") {
            Some(time) => format!("{time}Z"),
            None => expires.to_string(),
        };
        let expires_at = humantime::parse_rfc3339_weak(&rfc3339)
            .map_err(|e| Fetch::failed(format!("an expiresAt of {expires:?} in {path}: {e}")))?;
        if expires_at <= now {
            return Err(Fetch::failed(format!(
                "the SSO token {path} expired at {expires}: run `aws sso login`"
            )));
        }
        Ok(token.to_string())
    }
}

/// The credentials of `GetRoleCredentials`' answer.
fn role_credentials(body: &str) -> Result<Credentials, Fetch> {
    let answer: Value = serde_json::from_str(body)
        .map_err(|e| Fetch::failed(format!("GetRoleCredentials answered no JSON: {e}")))?;
    let role = &answer["roleCredentials"];
    let field = |name: &str| role.get(name).and_then(Value::as_str).map(str::to_string);
    match (
        field("accessKeyId"),
        field("secretAccessKey"),
        field("sessionToken"),
        role.get("expiration").and_then(Value::as_u64),
    ) {
        (Some(key_id), Some(secret), Some(token), Some(expiration_ms)) => Ok(Credentials::new(
            key_id,
            secret,
            Some(token),
            Some(UNIX_EPOCH + Duration::from_millis(expiration_ms)),
            "sso",
        )),
        _ => Err(Fetch::failed(
            "GetRoleCredentials answered no roleCredentials".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_credentials_are_read_from_the_portals_answer() {
        let body = r#"{"roleCredentials": {"accessKeyId": "ASIASSO", "secretAccessKey": "s",
                       "sessionToken": "t", "expiration": 1800000000000}}"#;
        let credentials = role_credentials(body).ok().unwrap();
        assert_eq!(credentials.access_key_id(), "ASIASSO");
        assert_eq!(credentials.session_token(), Some("t"));
        assert_eq!(
            credentials.expiry(),
            Some(UNIX_EPOCH + Duration::from_secs(1_800_000_000))
        );
        assert!(role_credentials(r#"{"roleCredentials": {}}"#).is_err());
    }
}
