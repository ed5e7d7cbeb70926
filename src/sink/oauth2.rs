//! OAuth 2 for goad's clients: reading a token endpoint's answer (RFC 6749
//! §5.1), and an HTTP sink's client-credentials grant (§4.4): the receiver
//! wants `authorization: Bearer <token>`, and goad gets the token from the
//! receiver's authorization server with the sink's client id and secret,
//! keeps it while fresh (see `expiring`), and drops it when the receiver
//! answers 401 to it, so the next attempt asks for a new one. The token
//! endpoint is held to the sink's `egress` rule, as the receiver is.

use super::client::{form, ok_body, Client};
use super::egress::{Egress, PrivateAddress};
use super::expiring::{expires_after, Expiring};
use super::jwt_key::JwtKey;
use super::BoxError;
use crate::config::{ClientAuth, OAuth2Config};
use crate::limits::{HTTP_TIMEOUT_MS, OAUTH2_DEFAULT_LIFETIME_S};
use crate::tls_provider::ureq_tls;
use base64::prelude::{Engine as _, BASE64_STANDARD};
use serde_json::Value;
use std::fmt;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The token and its expiry from a token endpoint's answer: `access_token`,
/// and `expires_in` seconds, a number or a string of one as Microsoft's
/// v1 endpoint writes it (when it is missing, as the RFC allows,
/// `OAUTH2_DEFAULT_LIFETIME_S`); a `token_type` other than Bearer is
/// refused (goad sends only Bearer tokens).
pub(super) fn token_answer(
    answer: &str,
    now: SystemTime,
) -> Result<(String, SystemTime), BoxError> {
    let answer: Value = serde_json::from_str(answer)?;
    let Some(token) = answer.get("access_token").and_then(Value::as_str) else {
        return Err("no access_token in its answer".into());
    };
    let token = sendable_bearer(token.to_string())?;
    let kind = answer.get("token_type").and_then(Value::as_str);
    if let Some(kind) = kind.filter(|kind| !kind.eq_ignore_ascii_case("bearer")) {
        return Err(format!("its token_type is {kind:?}, not Bearer").into());
    }
    let lifetime_s = answer
        .get("expires_in")
        .and_then(|expires_in| match expires_in {
            Value::String(seconds) => seconds.parse().ok(),
            seconds => seconds.as_u64(),
        });
    let lifetime_s = lifetime_s.unwrap_or(OAUTH2_DEFAULT_LIFETIME_S);
    Ok((token, expires_after(now, lifetime_s)))
}

/// `token`, if an `authorization: Bearer` header can carry it: not empty,
/// and printable ASCII (no line break, no letter beyond ASCII). Else the
/// token is not held (the next attempt asks again) and the error says
/// why, without it: sent, an empty token is refused by the receiver as a
/// 401, and one that no header can carry fails every attempt until it
/// expires.
pub(super) fn sendable_bearer(token: String) -> Result<String, BoxError> {
    match super::http::sendable_credential(&token) {
        true => Ok(token),
        false => Err("the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry".into()),
    }
}

/// An HTTP sink's client-credentials grant.
pub struct ClientCredentials {
    token_url: String,
    client_id: String,
    credential: ClientCredential,
    scope: Option<String>,
    audience: Option<String>,
    client_auth: ClientAuth,
    egress: Egress,
    client: Client,
    held: Expiring<String>,
}

/// What the client proves itself with: its secret, or a private key whose
/// public key the authorization server holds.
pub enum ClientCredential {
    Secret(String),
    Key(Box<JwtKey>),
}

impl ClientCredential {
    fn same_as(&self, other: &ClientCredential) -> bool {
        match (self, other) {
            (ClientCredential::Secret(a), ClientCredential::Secret(b)) => a == b,
            (ClientCredential::Key(a), ClientCredential::Key(b)) => {
                a.kid() == b.kid() && a.public_key() == b.public_key()
            }
            _ => false,
        }
    }
}

/// The endpoint and client only: no secret nor token in logs.
impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ClientCredentials({} for {})",
            self.token_url, self.client_id
        )
    }
}

/// A token to send, and whether it was fetched for this attempt (a 401 to
/// a fresh token is the receiver's refusal, not an expired token).
pub struct Token {
    pub value: String,
    pub fresh: bool,
}

/// No token to send: the attempt fails, transient.
#[derive(Debug)]
pub struct NoToken {
    token_url: String,
    cause: BoxError,
    /// The endpoint is refused by `egress.deny_private_addresses`, which
    /// makes the attempt's failure permanent, as for a receiver.
    pub refused_by_egress: bool,
}

impl fmt::Display for NoToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (token_url, cause) = (&self.token_url, &self.cause);
        write!(f, "cannot get an OAuth 2 token from {token_url}: {cause}")
    }
}

impl std::error::Error for NoToken {}

impl NoToken {
    /// Why `token_url` gave no token (the URL shown without its user
    /// information and query, which may hold secrets); a refusal of the
    /// egress rule is told as the receiver's would be.
    fn new(token_url: &str, cause: BoxError) -> NoToken {
        let refusal = (cause.downcast_ref::<ureq::Error>())
            .and_then(PrivateAddress::of)
            .map(ToString::to_string);
        NoToken {
            token_url: super::client::shown_url(token_url),
            refused_by_egress: refusal.is_some(),
            cause: refusal.map_or(cause, Into::into),
        }
    }
}

impl ClientCredentials {
    /// The grant `config` describes, with the client's secret (read from
    /// its variable) or key (read from its file), asking the token
    /// endpoint only where `egress` (the sink's) allows.
    pub fn new(
        config: &OAuth2Config,
        credential: ClientCredential,
        egress: Egress,
    ) -> ClientCredentials {
        ClientCredentials {
            token_url: config.token_url.clone(),
            client_id: config.client_id.clone(),
            credential,
            scope: config.scope.clone(),
            audience: config.audience.clone(),
            client_auth: config.client_auth,
            client: Client::with_tls(HTTP_TIMEOUT_MS, 1, ureq_tls().build(), egress.clone()),
            egress,
            held: Expiring::new(),
        }
    }

    /// Whether `other` asks the same endpoint for the same client's token
    /// with the same secret and parameters, under the same egress rule
    /// (its token would do for this, and it may ask where this may).
    pub(crate) fn same_grant(&self, other: &ClientCredentials) -> bool {
        let ClientCredentials {
            token_url,
            client_id,
            credential,
            scope,
            audience,
            client_auth,
            egress,
            client: _,
            held: _,
        } = self;
        *token_url == other.token_url
            && *client_id == other.client_id
            && credential.same_as(&other.credential)
            && *scope == other.scope
            && *audience == other.audience
            && *client_auth == other.client_auth
            && *egress == other.egress
    }

    /// The endpoint it asks.
    pub(crate) fn token_url(&self) -> &str {
        &self.token_url
    }

    /// The token to send at `now`: the one held while fresh, else a new
    /// one (while another caller fetches it, waited for until about
    /// `deadline`, the attempt's: see `expiring`).
    pub fn token(&self, now: SystemTime, deadline: Instant) -> Result<Token, NoToken> {
        let mut fresh = false;
        let value = self.held.get(now, Some(deadline), "an OAuth 2 token", || {
            fresh = true;
            token_answer(&self.ask(now)?, now)
        });
        let value = value.map_err(|cause| NoToken::new(&self.token_url, cause))?;
        Ok(Token { value, fresh })
    }

    /// The receiver refused `token`: it is not sent again.
    pub fn refused(&self, token: &str) {
        self.held.forget_if(|held| held == token);
    }

    /// The token endpoint's answer to the grant at `now`.
    fn ask(&self, now: SystemTime) -> Result<String, BoxError> {
        let mut fields = vec![("grant_type", "client_credentials")];
        fields.extend(self.scope.as_deref().map(|s| ("scope", s)));
        fields.extend(self.audience.as_deref().map(|a| ("audience", a)));
        let mut request = self
            .client
            .post(&self.token_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        let assertion;
        match (&self.credential, self.client_auth) {
            (ClientCredential::Key(key), _) => {
                assertion = self.client_assertion(key, now)?;
                fields.push(("client_id", &self.client_id));
                fields.push(("client_assertion_type", CLIENT_ASSERTION_TYPE));
                fields.push(("client_assertion", &assertion));
            }
            (ClientCredential::Secret(secret), ClientAuth::Body) => {
                fields.push(("client_id", &self.client_id));
                fields.push(("client_secret", secret));
            }
            // RFC 6749 §2.3.1: each part form-encoded, then Basic.
            (ClientCredential::Secret(secret), _) => {
                let pair = format!(
                    "{}:{}",
                    super::client::percent_encoded(&self.client_id),
                    super::client::percent_encoded(secret)
                );
                let basic = format!("Basic {}", BASE64_STANDARD.encode(pair));
                request = request.header("authorization", basic);
            }
        }
        ok_body(request.send(form(&fields)))
    }

    /// RFC 7523 §3: a JWT of the client, for the token endpoint, valid
    /// `CLIENT_ASSERTION_LIFETIME_S`, with an id of its own (`jti`: some
    /// servers refuse an assertion used twice).
    fn client_assertion(&self, key: &JwtKey, now: SystemTime) -> Result<String, BoxError> {
        let issued_s = now.duration_since(UNIX_EPOCH)?.as_secs();
        key.sign(&serde_json::json!({
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self.token_url,
            "jti": uuid::Uuid::now_v7().to_string(),
            "iat": issued_s,
            "exp": issued_s + CLIENT_ASSERTION_LIFETIME_S,
        }))
    }
}

/// The `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long a client assertion is valid: long enough for the request.
const CLIENT_ASSERTION_LIFETIME_S: u64 = 300;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_token_answer_gives_the_token_and_its_expiry() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let at = |s: u64| now + Duration::from_secs(s);
        let answer = r#"{"access_token": "t", "token_type": "bearer", "expires_in": 60}"#;
        assert_eq!(token_answer(answer, now).unwrap(), ("t".into(), at(60)));
        // Microsoft's v1 endpoint writes its numbers as strings.
        let answer = r#"{"access_token": "t", "token_type": "Bearer", "expires_in": "299"}"#;
        assert_eq!(token_answer(answer, now).unwrap(), ("t".into(), at(299)));
        let answer = r#"{"access_token": "t"}"#;
        let lifetime_s = OAUTH2_DEFAULT_LIFETIME_S;
        assert_eq!(
            token_answer(answer, now).unwrap(),
            ("t".into(), at(lifetime_s))
        );
        // A lifetime past what a clock holds is as long as a token is kept.
        let answer = r#"{"access_token": "t", "expires_in": 18446744073709551615}"#;
        assert_eq!(
            token_answer(answer, now).unwrap(),
            ("t".into(), at(crate::limits::FETCHED_MAX_LIFETIME_S))
        );
        let refused = [
            (
                r#"{"token_type": "Bearer"}"#,
                "no access_token in its answer",
            ),
            (
                r#"{"access_token": "t", "token_type": "mac"}"#,
                r#"its token_type is "mac", not Bearer"#,
            ),
            (
                r#"{"access_token": ""}"#,
                "the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry",
            ),
            (
                r#"{"access_token": "t\r\nx-injected: 1"}"#,
                "the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry",
            ),
            (
                r#"{"access_token": "tök"}"#,
                "the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry",
            ),
        ];
        for (answer, why) in refused {
            assert_eq!(token_answer(answer, now).unwrap_err().to_string(), why);
        }
    }
}
