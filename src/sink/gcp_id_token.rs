//! An HTTP sink's Google ID token (`google_id_token`): a JWT Google signs
//! for the sink's audience, sent as `authorization: Bearer`, as Cloud Run,
//! Cloud Functions and Identity-Aware Proxy ask of a caller. Where it
//! comes from, as its `credentials` says:
//!
//! - `metadata` (the default): the metadata server's token for the
//!   account the node runs as on Google Cloud (see `gcp_token`);
//! - `service_account`: the token endpoint's, for a JWT asking for that
//!   audience signed with the key of the file
//!   `GOOGLE_APPLICATION_CREDENTIALS` names (read when the sink is built);
//! - `external_account`: workload identity federation with a service
//!   account to impersonate, the configuration file
//!   `GOOGLE_APPLICATION_CREDENTIALS` names (read likewise): the service
//!   account's ID token from IAM credentials (see `gcp_external`).
//!
//! A token is kept until shortly before the `exp` it carries (see
//! `expiring`); one the receiver answers 401 while held a while is
//! dropped, and the next attempt asks for another, as for `oauth2`.

use super::client::{percent_encoded, Client};
use super::expiring::{expires_after, expires_at_unix_s, Expiring};
use super::gcp_key::ServiceAccountKey;
use super::gcp_token::{ask_metadata, key_file, TokenSource};
use super::oauth2::{sendable_bearer, Token};
use super::BoxError;
use crate::config::GoogleIdTokenConfig;
use crate::limits::{HTTP_TIMEOUT_MS, OAUTH2_DEFAULT_LIFETIME_S};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;
use std::fmt;
use std::time::{Instant, SystemTime};

/// The values of `google_id_token.credentials`.
pub const ID_TOKEN_SOURCES: &[&str] = &["metadata", "service_account", "external_account"];

/// ID tokens for one audience, kept while fresh.
pub struct GoogleIdToken {
    audience: String,
    from: TokenSource,
    client: Client,
    held: Expiring<String>,
}

/// The audience and source only: no token in logs.
impl fmt::Debug for GoogleIdToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GoogleIdToken({} from {})", self.audience, self.from)
    }
}

/// No token to send: the attempt fails, transient (the metadata server or
/// the token endpoint may come back).
#[derive(Debug)]
pub struct NoIdToken {
    from: String,
    cause: BoxError,
}

impl fmt::Display for NoIdToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (from, cause) = (&self.from, &self.cause);
        write!(f, "cannot get a Google ID token from {from}: {cause}")
    }
}

impl std::error::Error for NoIdToken {}

impl GoogleIdToken {
    /// The tokens of a validated `google_id_token`; with
    /// `service_account` or `external_account`, the file is read now, and
    /// the error says why it cannot be used.
    pub fn new(config: &GoogleIdTokenConfig) -> Result<GoogleIdToken, String> {
        let credentials = config.credentials.as_deref().unwrap_or("metadata");
        let from = TokenSource::read(credentials)?.unwrap_or(TokenSource::Metadata);
        match &from {
            TokenSource::External(account) if !account.impersonates() => {
                let path = key_file()?;
                return Err(format!("{}: it names no service_account_impersonation_url, and an ID token is a service account's", path.display()));
            }
            TokenSource::User(_) => {
                return Err("a user's credentials give no ID token for an audience".into())
            }
            _ => {}
        }
        Ok(GoogleIdToken {
            audience: config.audience.clone(),
            from,
            client: Client::new(HTTP_TIMEOUT_MS, 1),
            held: Expiring::new(),
        })
    }

    /// The audience its tokens are for.
    pub(crate) fn audience(&self) -> &str {
        &self.audience
    }

    /// The same audience from the same source: its token would do.
    pub(crate) fn same_as(&self, other: &GoogleIdToken) -> bool {
        self.audience == other.audience && self.from == other.from
    }

    /// The token to send at `now`: the one held while fresh, else a new
    /// one (while another caller fetches it, waited for until about
    /// `deadline`, the attempt's: see `expiring`).
    pub fn token(&self, now: SystemTime, deadline: Instant) -> Result<Token, NoIdToken> {
        let mut fresh = false;
        let value = self.held.get(now, Some(deadline), "a Google ID token", || {
            fresh = true;
            let token = match &self.from {
                TokenSource::Metadata => self.ask_metadata()?,
                TokenSource::ServiceAccount(key) => self.ask_token_endpoint(key, now)?,
                TokenSource::External(account) => {
                    account.id_token(&self.client, &self.audience, now)?
                }
                TokenSource::User(_) => unreachable!("GoogleIdToken::new refuses a user's"),
            };
            let token = sendable_bearer(token)?;
            let expires_at = expiry_of(&token, now)
                .unwrap_or_else(|| expires_after(now, OAUTH2_DEFAULT_LIFETIME_S));
            Ok::<_, BoxError>((token, expires_at))
        });
        let value = value.map_err(|cause| NoIdToken {
            from: self.from.to_string(),
            cause,
        })?;
        Ok(Token { value, fresh })
    }

    /// The receiver refused `token`: it is not sent again.
    pub fn refused(&self, token: &str) {
        self.held.forget_if(|held| held == token);
    }

    /// The metadata server's token for the workload's account (its claims
    /// in full: `format=full`, as Google's libraries ask).
    fn ask_metadata(&self) -> Result<String, BoxError> {
        let audience = percent_encoded(&self.audience);
        let token = ask_metadata(
            &self.client,
            &format!("identity?audience={audience}&format=full"),
        )?;
        Ok(token.trim().to_string())
    }

    /// The token endpoint's ID token for a JWT signed with `key`.
    fn ask_token_endpoint(
        &self,
        key: &ServiceAccountKey,
        now: SystemTime,
    ) -> Result<String, BoxError> {
        let asked = ("target_audience", self.audience.as_str());
        let answer: Value = serde_json::from_str(&key.exchange(&self.client, asked, now)?)?;
        match answer.get("id_token").and_then(Value::as_str) {
            Some(token) => Ok(token.to_string()),
            None => Err("no id_token in its answer".into()),
        }
    }
}

/// When a JWT fetched at `now` expires, by its `exp` claim.
fn expiry_of(token: &str, now: SystemTime) -> Option<SystemTime> {
    let payload = URL_SAFE_NO_PAD.decode(token.split('.').nth(1)?).ok()?;
    let exp = serde_json::from_slice::<Value>(&payload)
        .ok()?
        .get("exp")?
        .as_u64()?;
    Some(expires_at_unix_s(now, exp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_tokens_expiry_is_its_exp_up_to_the_longest_a_fetched_token_lives() {
        let now = UNIX_EPOCH + Duration::from_secs(1_799_996_400);
        let with_exp = |exp: &str| {
            let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"aud":"https://a","exp":{exp}}}"#));
            expiry_of(&format!("e30.{payload}.sig"), now)
        };
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(with_exp("1800000000"), Some(at));
        // An exp past what a clock holds is as far as a token is kept.
        let latest = now + Duration::from_secs(crate::limits::FETCHED_MAX_LIFETIME_S);
        assert_eq!(with_exp("18446744073709551615"), Some(latest));
        assert_eq!(expiry_of("not-a-jwt", now), None);
        assert_eq!(with_exp("\"soon\""), None);
    }
}
