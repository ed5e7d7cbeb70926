//! Bearer tokens: the admin token and each source's ingest token, read from
//! the environment variables the config names (never from the config
//! itself) and compared in constant time.

use crate::config::{env_value, Config, ConfigError};
use std::collections::HashMap;
use subtle::ConstantTimeEq;

/// The tokens of one config.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    pub admin: Option<String>,
    /// Every configured source, with its ingest token if it has one.
    pub sources: HashMap<String, Option<String>>,
}

impl Tokens {
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
            sources.insert(source.id.clone(), token);
        }
        Ok(Tokens { admin, sources })
    }
}

/// Whether the request's `Authorization: Bearer <token>` matches `expected`.
pub fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    let presented = authorization
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .unwrap_or("");
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_matches() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }
}
