//! A source's `ingest_jwt` at run time: each ingest's bearer token checked
//! on the HTTP loop against the keys in hand of the source's `jwks_url`
//! (a `Jwks` that every source naming the URL shares) for the source's
//! issuers, audience and claims.

use super::http::Response;
use super::jwks::Jwks;
use super::jwt::{self, Expected, Refusal};
use crate::config::IngestJwt;
use std::sync::Arc;

/// Seconds a sender is asked to wait while the keys are being fetched.
const RETRY_AFTER_S: u64 = 5;

/// One source's check of its tokens.
#[derive(Debug, Clone)]
pub struct JwtCheck {
    source_id: String,
    config: IngestJwt,
    issuers: Vec<String>,
    jwks: Arc<Jwks>,
}

impl JwtCheck {
    /// The check of `config` for source `source_id`, with the keys of
    /// `jwks` (`config.jwks_url`'s).
    pub fn new(source_id: &str, config: &IngestJwt, jwks: Arc<Jwks>) -> JwtCheck {
        assert_eq!(jwks.url(), config.jwks_url, "source {source_id}'s key set");
        JwtCheck {
            source_id: source_id.to_string(),
            config: config.clone(),
            issuers: config.issuer.to_vec(),
            jwks,
        }
    }

    pub fn source_id(&self) -> &str {
        &self.source_id
    }

    pub fn config(&self) -> &IngestJwt {
        &self.config
    }

    /// The key set this source's tokens are checked with.
    pub fn jwks(&self) -> &Arc<Jwks> {
        &self.jwks
    }

    /// The refusal of a request whose `authorization` carries no token
    /// this source takes at `now_s` (Unix seconds): 401 saying why, or 503
    /// while the keys to check it with are being fetched.
    pub fn refusal(&self, authorization: Option<&str>, now_s: u64) -> Option<Response> {
        let url = &self.config.jwks_url;
        let Some(token) = super::auth::bearer_token(authorization) else {
            let why = format!("this source needs a bearer token: a JWT signed by a key of {url}");
            return Some(super::routes::unauthorized(&why));
        };
        let Some(set) = self.jwks.keys_in_hand() else {
            return Some(self.keys_unavailable());
        };
        let expected = Expected {
            issuers: &self.issuers,
            audience: &self.config.audience,
            claims: &self.config.claims,
        };
        match jwt::verify(token, &set, &expected, now_s) {
            Ok(()) => None,
            Err(Refusal::Invalid(why)) => Some(super::routes::unauthorized(&why)),
            Err(Refusal::UnknownKey(kid)) => {
                if self.jwks.fetch_again() {
                    let why = format!("the token's key {kid:?} is not among the keys of {url} in hand; they are being fetched again");
                    return Some(Response::unavailable(
                        "signing_key_unknown",
                        &why,
                        RETRY_AFTER_S,
                    ));
                }
                let why = format!("the token's key {kid:?} is not among the keys of {url}");
                Some(super::routes::unauthorized(&why))
            }
        }
    }

    /// 503 until the keys are first fetched, with why the last try failed.
    fn keys_unavailable(&self) -> Response {
        let url = &self.config.jwks_url;
        let why = match self.jwks.failure() {
            Some(failure) => format!("the keys to check this source's tokens with could not be fetched from {url}: {failure}"),
            None => format!("the keys to check this source's tokens with are being fetched from {url}"),
        };
        Response::unavailable("signing_keys_unavailable", &why, RETRY_AFTER_S)
    }
}
