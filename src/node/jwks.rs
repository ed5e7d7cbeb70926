//! A source's `ingest_jwt` at run time: the issuer's keys, fetched from
//! its `jwks_url` on a short-lived thread (never on the HTTP loop) — when
//! the node starts or reloads, once they are stale, and when a token names
//! a key they lack (an issuer publishing a new one), at most once every
//! `JWKS_MIN_REFETCH_MS` — and each ingest's bearer token checked against
//! the keys in hand on the loop. A failed fetch keeps the keys in hand: an
//! issuer's outage does not stop ingest.

use super::http::Response;
use super::jwt::{self, Expected, KeySet, Refusal};
use crate::config::IngestJwt;
use crate::limits::{HTTP_TIMEOUT_MS, JWKS_DEFAULT_FRESH_S, JWKS_MAX_FRESH_S, JWKS_MIN_REFETCH_MS};
use crate::sink::client::{agent, ok_body};
use crate::sink::BoxError;
use parking_lot::Mutex;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds a sender is asked to wait while the keys are being fetched.
const RETRY_AFTER_S: u64 = 5;

/// One source's check of its tokens, with the issuer's keys.
pub struct JwtCheck {
    source_id: String,
    config: IngestJwt,
    issuers: Vec<String>,
    agent: ureq::Agent,
    keys: Mutex<Keys>,
    /// Fetches of the key set that succeeded and that failed.
    fetched: AtomicU64,
    failed: AtomicU64,
}

/// The source and where its keys come from; no key in logs.
impl fmt::Debug for JwtCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JwtCheck({} from {})",
            self.source_id, self.config.jwks_url
        )
    }
}

/// The keys in hand and the fetches.
#[derive(Default)]
struct Keys {
    set: Option<Arc<KeySet>>,
    /// When the set in hand is to be fetched again.
    fresh_until: Option<Instant>,
    last_try: Option<Instant>,
    fetching: bool,
    /// Why the last fetch failed, if it did.
    failure: Option<String>,
}

impl JwtCheck {
    pub fn new(source_id: &str, config: &IngestJwt) -> JwtCheck {
        JwtCheck {
            source_id: source_id.to_string(),
            config: config.clone(),
            issuers: config.issuer.to_vec(),
            agent: agent(HTTP_TIMEOUT_MS, 1),
            keys: Mutex::default(),
            fetched: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    pub fn source_id(&self) -> &str {
        &self.source_id
    }

    /// The fetches of the key set so far: (succeeded, failed).
    pub fn fetches(&self) -> (u64, u64) {
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (count(&self.fetched), count(&self.failed))
    }

    pub fn config(&self) -> &IngestJwt {
        &self.config
    }

    /// Starts fetching the keys unless those in hand are fresh (or a fetch
    /// is under way, or the last began within `JWKS_MIN_REFETCH_MS`).
    pub fn refresh_if_stale(self: &Arc<Self>) {
        self.keys_in_hand();
    }

    /// The keys in hand, if any, having started fetching them if stale
    /// (one lock a request).
    fn keys_in_hand(self: &Arc<Self>) -> Option<Arc<KeySet>> {
        let mut keys = self.keys.lock();
        let stale = keys.fresh_until.is_none_or(|t| Instant::now() >= t);
        if stale {
            self.fetch_in_background(&mut keys);
        }
        keys.set.clone()
    }

    /// The refusal of a request whose `authorization` carries no token
    /// this source takes at `now_s` (Unix seconds): 401 saying why, or 503
    /// while the keys to check it with are being fetched.
    pub fn refusal(self: &Arc<Self>, authorization: Option<&str>, now_s: u64) -> Option<Response> {
        let Some(token) = super::auth::bearer_token(authorization) else {
            let url = &self.config.jwks_url;
            let why = format!("this source needs a bearer token: a JWT signed by a key of {url}");
            return Some(super::routes::unauthorized(&why));
        };
        let Some(set) = self.keys_in_hand() else {
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
                let url = &self.config.jwks_url;
                let fetching = self.fetch_in_background(&mut self.keys.lock());
                if fetching {
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
        let why = match &self.keys.lock().failure {
            Some(failure) => format!("the keys to check this source's tokens with could not be fetched from {url}: {failure}"),
            None => format!("the keys to check this source's tokens with are being fetched from {url}"),
        };
        Response::unavailable("signing_keys_unavailable", &why, RETRY_AFTER_S)
    }

    /// Starts a fetch on a thread of its own unless one is under way or
    /// the last began within `JWKS_MIN_REFETCH_MS`; whether a fetch is
    /// under way once it returns.
    fn fetch_in_background(self: &Arc<Self>, keys: &mut Keys) -> bool {
        let now = Instant::now();
        let recent = keys
            .last_try
            .is_some_and(|t| now < t + Duration::from_millis(JWKS_MIN_REFETCH_MS));
        if keys.fetching || recent {
            return keys.fetching;
        }
        let check = self.clone();
        let spawned = std::thread::Builder::new()
            .name("goad-jwks".into())
            .spawn(move || check.fetch());
        if let Err(e) = spawned {
            crate::log::error("cannot start a thread to fetch a key set", &[("error", &e)]);
            return false;
        }
        keys.fetching = true;
        keys.last_try = Some(now);
        true
    }

    /// Fetches the keys and keeps them, or the failure (a fetch that
    /// panics is one).
    fn fetch(&self) {
        let fetched = crate::panics::catch(|| self.fetched())
            .unwrap_or_else(|panic| Err(format!("the fetch panicked: {panic}").into()));
        let mut keys = self.keys.lock();
        keys.fetching = false;
        let (source, url) = (&self.source_id, &self.config.jwks_url);
        match fetched {
            Ok((set, fresh_s)) => {
                self.fetched.fetch_add(1, Ordering::Relaxed);
                let count = set.len();
                keys.set = Some(Arc::new(set));
                keys.fresh_until = Some(Instant::now() + Duration::from_secs(fresh_s));
                keys.failure = None;
                crate::log::info(
                    "fetched the keys of a source's ingest_jwt",
                    &[
                        ("source", source),
                        ("jwks_url", url),
                        ("keys", &count),
                        ("fresh_s", &fresh_s),
                    ],
                );
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let held = if keys.set.is_some() {
                    "the keys in hand serve"
                } else {
                    "its tokens are answered 503 until a fetch succeeds"
                };
                crate::log::warn(
                    "cannot fetch the keys of a source's ingest_jwt",
                    &[
                        ("source", source),
                        ("jwks_url", url),
                        ("error", &e),
                        ("meanwhile", &held),
                    ],
                );
                keys.failure = Some(e.to_string());
            }
        }
    }

    /// Fetches the key set once, keeping nothing, as `goad check
    /// --environment` does: whether it can be fetched and used.
    pub fn fetch_once(&self) -> Result<(), BoxError> {
        self.fetched().map(|_| ())
    }

    /// The key set at `jwks_url`, and for how long to use it.
    fn fetched(&self) -> Result<(KeySet, u64), BoxError> {
        let answer = self.agent.get(&self.config.jwks_url).call();
        let max_age_s = answer.as_ref().ok().and_then(|a| {
            let cache_control = a.headers().get("cache-control")?.to_str().ok()?;
            max_age_s(cache_control)
        });
        let set = KeySet::parse(&ok_body(answer)?)?;
        let fresh_s = max_age_s
            .unwrap_or(JWKS_DEFAULT_FRESH_S)
            .min(JWKS_MAX_FRESH_S);
        Ok((set, fresh_s))
    }
}

/// A `Cache-Control` value's `max-age`, in seconds (0 for `no-cache` or
/// `no-store`).
fn max_age_s(cache_control: &str) -> Option<u64> {
    cache_control
        .split(',')
        .map(str::trim)
        .find_map(|directive| {
            let directive = directive.to_ascii_lowercase();
            match directive.split_once('=') {
                Some(("max-age", seconds)) => seconds.trim_matches('"').parse().ok(),
                None if directive == "no-cache" || directive == "no-store" => Some(0),
                _ => None,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_sets_lifetime_is_its_answers_max_age() {
        assert_eq!(
            max_age_s("public, max-age=20155, must-revalidate, no-transform"),
            Some(20_155)
        );
        assert_eq!(max_age_s("Max-Age=\"60\""), Some(60));
        assert_eq!(max_age_s("no-store"), Some(0));
        assert_eq!(max_age_s("public"), None);
        assert_eq!(max_age_s("max-age=soon"), None);
    }
}
