//! The key set an issuer publishes at a `jwks_url`, held once for every
//! source whose `ingest_jwt` names that URL (a node of a thousand Pub/Sub
//! push sources fetches Google's keys once, not a thousand times, and
//! starts one fetch thread, not a thousand), and kept by a reload for
//! the sources that still name it. It is fetched on a short-lived thread
//! (never on the HTTP loop) — when the node starts or reloads, once the
//! keys in hand are stale, and when a token names a key they lack (an
//! issuer publishing a new one), at most once every `JWKS_MIN_REFETCH_MS`.
//! A failed fetch keeps the keys in hand: an issuer's outage does not
//! stop ingest.

use super::jwt::KeySet;
use crate::limits::{HTTP_TIMEOUT_MS, JWKS_DEFAULT_FRESH_S, JWKS_MAX_FRESH_S, JWKS_MIN_REFETCH_MS};
use crate::sink::client::{ok_body, Client};
use crate::sink::BoxError;
use parking_lot::Mutex;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The key set at one URL, and its fetches.
pub struct Jwks {
    url: String,
    client: Client,
    keys: Mutex<Keys>,
    /// Fetches of the key set that succeeded and that failed.
    fetched: AtomicU64,
    failed: AtomicU64,
}

/// Where the keys come from; no key in logs.
impl fmt::Debug for Jwks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Jwks({})", self.url)
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

impl Jwks {
    pub fn new(url: &str) -> Jwks {
        Jwks {
            url: url.to_string(),
            client: Client::new(HTTP_TIMEOUT_MS, 1),
            keys: Mutex::default(),
            fetched: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The fetches of the key set so far: (succeeded, failed).
    pub fn fetches(&self) -> (u64, u64) {
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (count(&self.fetched), count(&self.failed))
    }

    /// The keys in hand, if any, having started fetching them if stale
    /// (one lock a request).
    pub fn keys_in_hand(self: &Arc<Self>) -> Option<Arc<KeySet>> {
        let mut keys = self.keys.lock();
        let stale = keys.fresh_until.is_none_or(|t| Instant::now() >= t);
        if stale {
            self.fetch_in_background(&mut keys);
        }
        keys.set.clone()
    }

    /// Starts fetching the keys again, as for a token naming a key the
    /// set in hand lacks, unless a fetch is under way or the last began
    /// within `JWKS_MIN_REFETCH_MS`; whether a fetch is under way once it
    /// returns.
    pub fn fetch_again(self: &Arc<Self>) -> bool {
        self.fetch_in_background(&mut self.keys.lock())
    }

    /// Why no keys are in hand: the last fetch's failure, if one failed.
    pub fn failure(&self) -> Option<String> {
        self.keys.lock().failure.clone()
    }

    fn fetch_in_background(self: &Arc<Self>, keys: &mut Keys) -> bool {
        let now = Instant::now();
        let recent = keys
            .last_try
            .is_some_and(|t| now < t + Duration::from_millis(JWKS_MIN_REFETCH_MS));
        if keys.fetching || recent {
            return keys.fetching;
        }
        let jwks = self.clone();
        let spawned = std::thread::Builder::new()
            .name("goad-jwks".into())
            .spawn(move || jwks.fetch());
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
        let url = &self.url;
        match fetched {
            Ok((set, fresh_s)) => {
                self.fetched.fetch_add(1, Ordering::Relaxed);
                let count = set.len();
                keys.set = Some(Arc::new(set));
                keys.fresh_until = Some(Instant::now() + Duration::from_secs(fresh_s));
                keys.failure = None;
                crate::log::info(
                    "fetched the key set of sources' ingest_jwt",
                    &[("jwks_url", url), ("keys", &count), ("fresh_s", &fresh_s)],
                );
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let held = if keys.set.is_some() {
                    "the keys in hand serve"
                } else {
                    "the tokens of the sources naming it are answered 503 until a fetch succeeds"
                };
                crate::log::warn(
                    "cannot fetch the key set of sources' ingest_jwt",
                    &[("jwks_url", url), ("error", &e), ("meanwhile", &held)],
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

    /// The key set at the URL, and for how long to use it.
    fn fetched(&self) -> Result<(KeySet, u64), BoxError> {
        let answer = self.client.get(&self.url).call();
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
