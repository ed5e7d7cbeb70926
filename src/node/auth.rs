//! Ingest and admin authentication: the admin token, each source's ingest
//! token and its provider's signing secrets, read from the environment
//! variables the config names (never from the config itself); tokens are
//! compared in constant time (signatures: see `provider_signature`; an
//! issuer's tokens: `jwks`).

use super::ingest_rate::IngestRate;
use super::jwks::Jwks;
use super::jwt_check::JwtCheck;
use super::provider_handshake::Handshake;
use super::provider_signature::SignatureCheck;
use crate::config::{invalid, secret_value, Config, ConfigError, IngestSignature, OneOrMany};
use crate::runtime::hook_headers::dedupe_key_fits;
use std::collections::HashMap;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The tokens of one config.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    pub admin: Option<BearerTokens>,
    /// Every configured source, with what its ingest needs.
    pub sources: HashMap<String, SourceIngest>,
}

/// Where a source's hooks carry their dedupe key.
#[derive(Debug, Clone)]
pub enum DedupeKeyAt {
    /// This header's value (lower case: the source's `dedupe_header`, or
    /// `idempotency-key`).
    Header(String),
    /// The JSON body's string or number at this RFC 6901 pointer (one a
    /// hook may carry: a string with a control character, or too long for
    /// its header lines, makes a hook without a key rather than a refused
    /// one, as a body without the key does), for hooks of `tenant` and
    /// `source_id` (whose idempotency key carries it too). A body whose
    /// `content-encoding` is gzip or deflate is looked into decoded (up to
    /// `DEDUPE_DECODED_MAX_BYTES`); one of another encoding has no key.
    JsonPointer {
        pointer: String,
        tenant: String,
        source_id: String,
    },
}

impl Default for DedupeKeyAt {
    fn default() -> DedupeKeyAt {
        DedupeKeyAt::Header("idempotency-key".into())
    }
}

impl DedupeKeyAt {
    /// The dedupe key of a request with these `headers` and `body`, if it
    /// has one.
    pub fn key(&self, header: impl Fn(&str) -> Option<String>, body: &[u8]) -> Option<String> {
        match self {
            DedupeKeyAt::Header(name) => header(name),
            DedupeKeyAt::JsonPointer {
                pointer,
                tenant,
                source_id,
            } => {
                let body = json_of(body, header("content-encoding").as_deref())?;
                let key = match body.pointer(pointer)? {
                    serde_json::Value::String(key) => key.clone(),
                    serde_json::Value::Number(key) => key.to_string(),
                    _ => return None,
                };
                dedupe_key_fits(tenant, source_id, &key)
                    .is_ok()
                    .then_some(key)
            }
        }
    }
}

/// The JSON value of a body sent with `encoding` (its `content-encoding`:
/// none, identity, gzip or deflate, whose decoding stops at
/// `DEDUPE_DECODED_MAX_BYTES`); `None` for a body that is not JSON once
/// decoded, or of another encoding.
fn json_of(body: &[u8], encoding: Option<&str>) -> Option<serde_json::Value> {
    let limit = crate::limits::DEDUPE_DECODED_MAX_BYTES;
    let encoding = encoding.map(|e| e.trim().to_ascii_lowercase());
    let decoded: Box<dyn std::io::Read + '_> = match encoding.as_deref() {
        None | Some("" | "identity") => return serde_json::from_slice(body).ok(),
        Some("gzip" | "x-gzip") => Box::new(flate2::read::MultiGzDecoder::new(body)),
        Some("deflate") => Box::new(flate2::read::ZlibDecoder::new(body)),
        Some(_) => return None,
    };
    let decoded = std::io::BufReader::new(std::io::Read::take(decoded, limit));
    serde_json::from_reader(decoded).ok()
}

/// What ingest into one source needs, and where its hooks' dedupe key is.
#[derive(Debug, Clone, Default)]
pub struct SourceIngest {
    /// `Authorization: Bearer <token>`.
    pub token: Option<BearerTokens>,
    /// The token a provider's subscription check carries.
    pub verify_token: Option<String>,
    /// The provider's check of a new endpoint that ingest answers.
    pub handshake: Option<Handshake>,
    /// A body signed by the provider.
    pub signature: Option<SignatureCheck>,
    /// A bearer token the issuer signed, checked with its published keys.
    pub jwt: Option<JwtCheck>,
    /// Where a hook's dedupe key is.
    pub dedupe: DedupeKeyAt,
    /// The source's `max_ingest_per_s`, if it has one.
    pub rate: Option<Arc<IngestRate>>,
}

impl Tokens {
    /// A reload's tokens: a source whose `max_ingest_per_s` did not change
    /// keeps its bucket (a reload must not hand a flooding provider a
    /// fresh second's worth), and the sources of an `ingest_jwt` key set
    /// that `old` holds take its keys and their freshness.
    pub fn keep_state_of(mut self, old: &Tokens) -> Tokens {
        let kept_key_sets = old.key_sets();
        for (id, ingest) in &mut self.sources {
            if let Some(jwt) = &mut ingest.jwt {
                if let Some(kept) = kept_key_sets.get(jwt.jwks().url()) {
                    *jwt = JwtCheck::new(id, jwt.config(), Arc::clone(kept));
                }
            }
            let Some(old) = old.sources.get(id) else {
                continue;
            };
            if let (Some(rate), Some(kept)) = (&ingest.rate, &old.rate) {
                if kept.same_rate_as(rate) {
                    ingest.rate = Some(kept.clone());
                }
            }
        }
        self
    }

    /// Each `ingest_jwt` key set the sources share, by URL.
    pub fn key_sets(&self) -> HashMap<&str, &Arc<Jwks>> {
        (self.sources.values())
            .filter_map(|ingest| ingest.jwt.as_ref())
            .map(|jwt| (jwt.jwks().url(), jwt.jwks()))
            .collect()
    }

    /// Starts fetching every `ingest_jwt` key set that has none fresh (a
    /// node's start and reload: its first tokens are then checked at once).
    pub fn fetch_stale_keys(&self) {
        for jwks in self.key_sets().values() {
            jwks.keys_in_hand();
        }
    }

    /// Reads every token `config` names; a named variable that is unset or
    /// empty is an error (an operator who configured a token expects it).
    /// With an `ingest_jwt` key set to fetch, so is a proxy variable its
    /// client would pass over, or roots named that do not load
    /// (as where sinks are built: a node of no sink fetches key sets too).
    pub fn from_config(config: &Config) -> Result<Tokens, ConfigError> {
        if config.sources.iter().any(|s| s.ingest_jwt.is_some()) {
            crate::sink::client::check_client_environment()?;
        }
        let admin = match &config.admin_token_env {
            Some(vars) => Some(BearerTokens::from_env("admin_token_env", vars)?),
            None => None,
        };
        let mut sources = HashMap::new();
        let mut key_sets: HashMap<&str, Arc<Jwks>> = HashMap::new();
        for (i, source) in config.sources.iter().enumerate() {
            let token = match &source.ingest_token_env {
                Some(vars) => Some(BearerTokens::from_env(
                    &format!("sources[{i}].ingest_token_env"),
                    vars,
                )?),
                None => None,
            };
            let verify_token = match &source.ingest_verify_token_env {
                Some(var) => Some(secret_value(
                    format!("sources[{i}].ingest_verify_token_env"),
                    var,
                )?),
                None => None,
            };
            let signature = match (&source.ingest_signature, &source.ingest_secret_env) {
                (Some(scheme), Some(vars)) => Some(signature_check(i, scheme, vars.as_slice())?),
                _ => None,
            };
            let dedupe = match &source.dedupe_json_pointer {
                Some(pointer) => DedupeKeyAt::JsonPointer {
                    pointer: pointer.clone(),
                    tenant: source.tenant.clone(),
                    source_id: source.id.clone(),
                },
                None => DedupeKeyAt::Header(
                    (source.dedupe_header.as_deref())
                        .unwrap_or("idempotency-key")
                        .to_ascii_lowercase(),
                ),
            };
            let now_ms = crate::runtime::wall_ms();
            let rate = source
                .max_ingest_per_s
                .map(|per_s| Arc::new(IngestRate::new(per_s, now_ms)));
            let handshake = source
                .ingest_handshake
                .as_deref()
                .and_then(Handshake::named);
            let jwt = source.ingest_jwt.as_ref().map(|jwt| {
                let url = jwt.jwks_url.as_str();
                let jwks = key_sets
                    .entry(url)
                    .or_insert_with(|| Arc::new(Jwks::new(url)));
                JwtCheck::new(&source.id, jwt, jwks.clone())
            });
            let ingest = SourceIngest {
                token,
                verify_token,
                handshake,
                signature,
                jwt,
                dedupe,
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
        .map(|var| secret_value(key.clone(), var))
        .collect::<Result<Vec<_>, _>>()?;
    SignatureCheck::new(scheme, &secrets).map_err(|why| ConfigError::Invalid {
        key: key.clone(),
        rule: format!("variables holding {scheme} secrets ({why})"),
        value: format!("{vars:?}"),
    })
}

/// The bearer tokens a request may carry: one, or several while one is
/// rotated (a client moved to the new token while others still send the
/// old one).
#[derive(Debug, Clone)]
pub struct BearerTokens(Vec<String>);

impl BearerTokens {
    /// The tokens in the variables `vars`, which the config's `key` names.
    /// A token no request could present is refused: one with a space or
    /// a line break at an end (see [`secret_value`]) or a control
    /// character.
    fn from_env(key: &str, vars: &OneOrMany) -> Result<BearerTokens, ConfigError> {
        let token = |var: &String| {
            let token = secret_value(key.into(), var)?;
            match token.chars().any(char::is_control) {
                false => Ok(token),
                true => Err(invalid(
                    key,
                    "a variable holding a token with no control character (no request can \
                     present one)",
                    var,
                )),
            }
        };
        let tokens = vars.as_slice().iter().map(token);
        Ok(BearerTokens(tokens.collect::<Result<_, _>>()?))
    }

    /// Whether `authorization` is `Bearer <one of the tokens>`. Every
    /// token is compared, in constant time, so the time taken does not
    /// say which one nearly matched.
    pub fn admit(&self, authorization: Option<&str>) -> bool {
        let presented = bearer_token(authorization).unwrap_or("");
        (self.0.iter()).fold(false, |admitted, token| {
            admitted | secret_matches(presented, token)
        })
    }
}

/// The token of an `Authorization: Bearer <token>` value: the scheme in
/// any case and one or more spaces before the token, as RFC 9110 §11.4
/// writes credentials (`BEARER  t` is a client's `Bearer t`).
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether `presented` is the secret `expected`, compared in constant time.
pub fn secret_matches(presented: &str, expected: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config of one source, `s` of tenant `t`, as `edit` makes it.
    fn one_source(edit: impl FnOnce(&mut crate::config::SourceConfig)) -> Config {
        let mut source = crate::config::SourceConfig::new("s", "t", vec![]);
        edit(&mut source);
        Config {
            sources: vec![source].into(),
            ..Config::default()
        }
    }

    #[test]
    fn a_token_no_request_can_present_is_refused_naming_its_variable() {
        let at_an_end = "a secret with no space or line break at either end (a secret's file \
                         may leave one)";
        let control = "a token with no control character (no request can present one)";
        for (var, token, rule) in [
            ("GOAD_AUTH_TEST_LINE_BREAK", "s3cret\n", at_an_end),
            ("GOAD_AUTH_TEST_SPACE", " s3cret", at_an_end),
            ("GOAD_AUTH_TEST_BELL", "s3\u{7}cret", control),
        ] {
            std::env::set_var(var, token);
            let vars = OneOrMany::One(var.into());
            let refused = BearerTokens::from_env("admin_token_env", &vars).unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!("admin_token_env must be a variable holding {rule}, got \"{var}\"")
            );
        }
        // A header carries a space inside, and UTF-8 (which curl sends).
        std::env::set_var("GOAD_AUTH_TEST_FINE", "s3 crét");
        let vars = OneOrMany::One("GOAD_AUTH_TEST_FINE".into());
        let tokens = BearerTokens::from_env("admin_token_env", &vars).unwrap();
        assert!(tokens.admit(Some("Bearer s3 crét")));
    }

    #[test]
    fn a_signing_secret_that_is_unset_or_not_of_the_scheme_names_the_key() {
        let config = one_source(|source| {
            source.ingest_signature = Some("standard_webhooks".into());
            source.ingest_secret_env = Some(OneOrMany::One("GOAD_AUTH_TEST_SECRET".into()));
        });
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
    fn a_secret_with_a_line_break_at_its_end_is_refused() {
        let config = one_source(|source| {
            source.ingest_signature = Some("gitlab".into());
            source.ingest_secret_env = Some(OneOrMany::One("GOAD_AUTH_TEST_GITLAB".into()));
        });
        std::env::set_var("GOAD_AUTH_TEST_GITLAB", "gitlab-secret\n");
        assert_eq!(
            Tokens::from_config(&config).unwrap_err().to_string(),
            "sources[0].ingest_secret_env must be a variable holding a secret with no space or \
             line break at either end (a secret's file may leave one), got \"GOAD_AUTH_TEST_GITLAB\""
        );
        std::env::set_var("GOAD_AUTH_TEST_GITLAB", "gitlab-secret");
        assert!(Tokens::from_config(&config).is_ok());
    }

    #[test]
    fn a_dedupe_key_is_the_header_or_the_bodys_value_at_the_pointer() {
        let header = |name: &str| (name == "x-id").then(|| "h-1".to_string());
        let at_header = DedupeKeyAt::Header("x-id".into());
        assert_eq!(at_header.key(header, b"{}"), Some("h-1".into()));
        let at = |pointer: &str| DedupeKeyAt::JsonPointer {
            pointer: pointer.into(),
            tenant: "acme".into(),
            source_id: "stripe".into(),
        };
        let at_id = at("/id");
        assert_eq!(
            at_id.key(header, br#"{"id": "evt_1"}"#),
            Some("evt_1".into())
        );
        assert_eq!(at_id.key(header, br#"{"id": 42}"#), Some("42".into()));
        assert_eq!(at_id.key(header, br#"{"id": {"n": 1}}"#), None);
        assert_eq!(at_id.key(header, br#"{"other": "evt_1"}"#), None);
        assert_eq!(at_id.key(header, b"id=evt_1"), None);
        // A value no header could carry: the hook has no key, and is taken.
        assert_eq!(at_id.key(header, br#"{"id": "evt\n1"}"#), None);
        let long = format!(r#"{{"id": "{}"}}"#, "e".repeat(16 * 1024));
        assert_eq!(at_id.key(header, long.as_bytes()), None);
        // Its idempotency key's line (`acme:stripe:` before it) is the
        // longer one: 16,384 bytes at most.
        let id_of = |bytes: usize| format!(r#"{{"id": "{}"}}"#, "e".repeat(bytes));
        assert_eq!(
            at_id.key(header, id_of(16_346).as_bytes()).map(|k| k.len()),
            Some(16_346)
        );
        assert_eq!(at_id.key(header, id_of(16_347).as_bytes()), None);
        assert_eq!(
            at_id.key(header, br#"{"id": "\u00e9vt"}"#),
            Some("évt".into())
        );
        let nested = at("/message/messageId");
        let push = br#"{"message": {"data": "e30=", "messageId": "136969346945"}}"#;
        assert_eq!(nested.key(header, push), Some("136969346945".into()));
    }

    #[test]
    fn a_gzip_or_deflate_body_is_looked_into_decoded_up_to_a_bound() {
        use flate2::write::{GzEncoder, ZlibEncoder};
        use flate2::Compression;
        use std::io::Write;
        let gzip = |json: &[u8]| {
            let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
            encoder.write_all(json).unwrap();
            encoder.finish().unwrap()
        };
        let deflate = |json: &[u8]| {
            let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
            encoder.write_all(json).unwrap();
            encoder.finish().unwrap()
        };
        let at_id = DedupeKeyAt::JsonPointer {
            pointer: "/id".into(),
            tenant: "acme".into(),
            source_id: "stripe".into(),
        };
        let encoded = |encoding: &'static str| {
            move |name: &str| (name == "content-encoding").then(|| encoding.to_string())
        };
        let event = br#"{"id": "evt_1"}"#;
        assert_eq!(
            at_id.key(encoded("gzip"), &gzip(event)),
            Some("evt_1".into())
        );
        assert_eq!(
            at_id.key(encoded(" X-GZIP "), &gzip(event)),
            Some("evt_1".into())
        );
        assert_eq!(
            at_id.key(encoded("deflate"), &deflate(event)),
            Some("evt_1".into())
        );
        assert_eq!(at_id.key(encoded("identity"), event), Some("evt_1".into()));
        assert_eq!(at_id.key(encoded("br"), event), None, "not decoded");
        assert_eq!(at_id.key(encoded("gzip"), event), None, "not gzip");
        // Past the bound decoded: a bomb, or a body too large to look into.
        let limit = crate::limits::DEDUPE_DECODED_MAX_BYTES as usize;
        let padded = |spaces: usize| [&b" ".repeat(spaces)[..], event].concat();
        let within = gzip(&padded(limit - event.len()));
        assert_eq!(at_id.key(encoded("gzip"), &within), Some("evt_1".into()));
        let past = gzip(&padded(limit - event.len() + 1));
        assert!(past.len() < 8 * 1024, "{} bytes", past.len());
        assert_eq!(at_id.key(encoded("gzip"), &past), None);
    }

    #[test]
    fn only_the_exact_bearer_token_matches() {
        let one = BearerTokens(vec!["s3cret".into()]);
        assert!(one.admit(Some("Bearer s3cret")));
        assert!(one.admit(Some("bearer s3cret")));
        assert!(one.admit(Some("BEARER  s3cret")));
        assert!(!one.admit(Some("Bearers3cret")));
        assert!(!one.admit(Some("Bearer")));
        assert!(!one.admit(Some("Bearer s3cre")));
        assert!(!one.admit(Some("Bearer s3cret2")));
        assert!(!one.admit(Some("Basic s3cret")));
        assert!(!one.admit(None));
    }

    #[test]
    fn while_a_token_is_rotated_either_is_admitted() {
        let both = BearerTokens(vec!["old-token".into(), "new-token".into()]);
        assert!(both.admit(Some("Bearer old-token")));
        assert!(both.admit(Some("Bearer new-token")));
        assert!(!both.admit(Some("Bearer other")));
        assert!(!both.admit(Some("Bearer ")));
        assert!(!both.admit(None));
    }

    #[test]
    fn each_token_variable_must_be_set_and_is_named_when_not() {
        let config = one_source(|source| {
            source.ingest_token_env = Some(OneOrMany::Many(vec![
                "GOAD_AUTH_TEST_TOKEN_OLD".into(),
                "GOAD_AUTH_TEST_TOKEN_NEW".into(),
            ]));
        });
        std::env::set_var("GOAD_AUTH_TEST_TOKEN_OLD", "old-token");
        assert_eq!(
            Tokens::from_config(&config).unwrap_err().to_string(),
            "sources[0].ingest_token_env must be the name of a set, non-empty environment \
             variable, got \"GOAD_AUTH_TEST_TOKEN_NEW\" (not set)"
        );
        std::env::set_var("GOAD_AUTH_TEST_TOKEN_NEW", "new-token");
        let tokens = Tokens::from_config(&config).unwrap();
        let ingest = tokens.sources["s"].token.as_ref().unwrap();
        assert!(ingest.admit(Some("Bearer old-token")));
        assert!(ingest.admit(Some("Bearer new-token")));
    }
}
