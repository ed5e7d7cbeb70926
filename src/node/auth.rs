//! Ingest and admin authentication: the admin token, each source's ingest
//! token and its provider's signing secrets, read from the environment
//! variables the config names (never from the config itself); tokens are
//! compared in constant time (signatures: see `provider_signature`).

use super::ingest_rate::IngestRate;
use super::provider_handshake::Handshake;
use super::provider_signature::SignatureCheck;
use crate::config::{env_value, Config, ConfigError, IngestSignature};
use std::collections::HashMap;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The tokens of one config.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    pub admin: Option<String>,
    /// Every configured source, with what its ingest needs.
    pub sources: HashMap<String, SourceIngest>,
}

/// What ingest into one source needs, and which header names its hooks'
/// dedupe key.
#[derive(Debug, Clone, Default)]
pub struct SourceIngest {
    /// `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The token a provider's subscription check carries.
    pub verify_token: Option<String>,
    /// The provider's check of a new endpoint that ingest answers.
    pub handshake: Option<Handshake>,
    /// A body signed by the provider.
    pub signature: Option<SignatureCheck>,
    /// Lower case: the source's `dedupe_header`, or `idempotency-key`.
    pub dedupe_header: String,
    /// The source's `max_ingest_per_s`, if it has one.
    pub rate: Option<Arc<IngestRate>>,
}

impl Tokens {
    /// A reload's tokens: a source whose `max_ingest_per_s` did not change
    /// keeps its bucket (a reload must not hand a flooding provider a
    /// fresh second's worth).
    pub fn keep_rates_of(mut self, old: &Tokens) -> Tokens {
        for (id, ingest) in &mut self.sources {
            let kept = old.sources.get(id).and_then(|o| o.rate.as_ref());
            if let (Some(rate), Some(kept)) = (&ingest.rate, kept) {
                if kept.same_rate_as(rate) {
                    ingest.rate = Some(kept.clone());
                }
            }
        }
        self
    }

    /// Reads every token `config` names; a named variable that is unset or
    /// empty is an error (an operator who configured a token expects it).
    pub fn from_config(config: &Config) -> Result<Tokens, ConfigError> {
        let admin = match &config.admin_token_env {
            Some(var) => Some(env_value("admin_token_env".into(), var)?),
            None => None,
        };
        let mut sources = HashMap::new();
        for (i, source) in config.sources.iter().enumerate() {
            let token = match &source.ingest_token_env {
                Some(var) => Some(env_value(format!("sources[{i}].ingest_token_env"), var)?),
                None => None,
            };
            let verify_token = match &source.ingest_verify_token_env {
                Some(var) => Some(env_value(
                    format!("sources[{i}].ingest_verify_token_env"),
                    var,
                )?),
                None => None,
            };
            let signature = match (&source.ingest_signature, &source.ingest_secret_env) {
                (Some(scheme), Some(vars)) => Some(signature_check(i, scheme, &vars.to_vec())?),
                _ => None,
            };
            let dedupe_header = source
                .dedupe_header
                .as_deref()
                .unwrap_or("idempotency-key")
                .to_ascii_lowercase();
            let now_ms = crate::runtime::wall_ms();
            let rate = source
                .max_ingest_per_s
                .map(|per_s| Arc::new(IngestRate::new(per_s, now_ms)));
            let handshake = source
                .ingest_handshake
                .as_deref()
                .and_then(Handshake::named);
            let ingest = SourceIngest {
                token,
                verify_token,
                handshake,
                signature,
                dedupe_header,
                rate,
            };
            sources.insert(source.id.clone(), ingest);
        }
        Ok(Tokens { admin, sources })
    }
}

/// Source `i`'s check of `scheme` with the secrets of `vars`; a variable
/// that is unset, empty or no secret of the scheme is an error naming it.
fn signature_check(
    i: usize,
    scheme: &IngestSignature,
    vars: &[String],
) -> Result<SignatureCheck, ConfigError> {
    let key = format!("sources[{i}].ingest_secret_env");
    let secrets = vars
        .iter()
        .map(|var| env_value(key.clone(), var))
        .collect::<Result<Vec<_>, _>>()?;
    SignatureCheck::new(scheme, &secrets).map_err(|why| ConfigError::Invalid {
        key: key.clone(),
        rule: format!("variables holding {scheme} secrets ({why})"),
        value: format!("{vars:?}"),
    })
}

/// Whether the request's `Authorization: Bearer <token>` matches `expected`.
pub fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    let presented = authorization
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .unwrap_or("");
    secret_matches(presented, expected)
}

/// Whether `presented` is the secret `expected`, compared in constant time.
pub fn secret_matches(presented: &str, expected: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signing_secret_that_is_unset_or_not_of_the_scheme_names_the_key() {
        let mut source = crate::config::SourceConfig::new("s", "t", vec![]);
        source.ingest_signature = Some("standard_webhooks".into());
        source.ingest_secret_env = Some(crate::config::OneOrMany::One(
            "GOAD_AUTH_TEST_SECRET".into(),
        ));
        let config = Config {
            sources: vec![source],
            ..Config::default()
        };
        let refused = |config: &Config| Tokens::from_config(config).unwrap_err().to_string();
        assert_eq!(
            refused(&config),
            "sources[0].ingest_secret_env must be the name of a set, non-empty environment \
             variable, got \"GOAD_AUTH_TEST_SECRET\" (not set)"
        );
        std::env::set_var("GOAD_AUTH_TEST_SECRET", "whsec_!!!");
        assert_eq!(
            refused(&config),
            "sources[0].ingest_secret_env must be variables holding standard_webhooks secrets \
             (a whsec_ secret must be base64 after the prefix), got [\"GOAD_AUTH_TEST_SECRET\"]"
        );
        std::env::set_var("GOAD_AUTH_TEST_SECRET", "whsec_c2VjcmV0");
        let tokens = Tokens::from_config(&config).unwrap();
        assert!(tokens.sources["s"].signature.is_some());
    }

    #[test]
    fn only_the_exact_bearer_token_matches() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }
}
