//! A value fetched from a service that expires (AWS credentials, a Google
//! or OAuth 2 access token), kept until `CREDENTIALS_REFRESH_MS` before it
//! expires, or half its lifetime for one that lives less than twice that.
//! One caller fetches while the others wait on the lock (they are IO
//! workers, which may block); when a fetch fails, the value in hand serves
//! until it expires, with a warning in the log.

use crate::limits::CREDENTIALS_REFRESH_MS;
use parking_lot::Mutex;
use std::fmt::Display;
use std::time::{Duration, SystemTime};

/// The value held, when it was fetched and when it expires.
pub(crate) struct Expiring<T> {
    held: Mutex<Option<Held<T>>>,
}

struct Held<T> {
    value: T,
    fetched_at: SystemTime,
    expires_at: SystemTime,
}

impl<T> Held<T> {
    /// Whether it is still the one to use at `now`.
    fn is_fresh(&self, now: SystemTime) -> bool {
        let lifetime = (self.expires_at.duration_since(self.fetched_at)).unwrap_or_default();
        let refresh = Duration::from_millis(CREDENTIALS_REFRESH_MS).min(lifetime / 2);
        now + refresh < self.expires_at
    }
}

impl<T: Clone> Expiring<T> {
    pub fn new() -> Expiring<T> {
        Expiring {
            held: Mutex::new(None),
        }
    }

    /// The value at `now`: the one held while fresh, else what `fetch`
    /// returns (the value and its expiry), else the one held while it has
    /// not expired, else `fetch`'s error. `what` names the value in the log.
    pub fn get<E: Display>(
        &self,
        now: SystemTime,
        what: &str,
        fetch: impl FnOnce() -> Result<(T, SystemTime), E>,
    ) -> Result<T, E> {
        let mut held = self.held.lock();
        if let Some(fresh) = held.as_ref().filter(|h| h.is_fresh(now)) {
            return Ok(fresh.value.clone());
        }
        let error = match fetch() {
            Ok((value, expires_at)) => {
                let fetched = Held {
                    value,
                    fetched_at: now,
                    expires_at,
                };
                return Ok(held.insert(fetched).value.clone());
            }
            Err(e) => e,
        };
        match held.as_ref().filter(|h| now < h.expires_at) {
            Some(Held { value, .. }) => {
                crate::log::warn(
                    "cannot refresh; using the one in hand until it expires",
                    &[("what", &what), ("error", &error)],
                );
                Ok(value.clone())
            }
            None => Err(error),
        }
    }

    /// Drops the value held if `refused` says it is the one refused (a
    /// newer one another caller fetched is kept).
    pub fn forget_if(&self, refused: impl FnOnce(&T) -> bool) {
        let mut held = self.held.lock();
        if held.as_ref().is_some_and(|h| refused(&h.value)) {
            *held = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn a_value_is_fetched_again_before_it_expires_and_when_forgotten() {
        let held = Expiring::new();
        let fetches = std::cell::Cell::new(0);
        let get = |now: u64, lifetime_s: u64| {
            held.get(at(now), "a token", || {
                fetches.set(fetches.get() + 1);
                Ok::<_, String>((format!("t{}", fetches.get()), at(now + lifetime_s)))
            })
        };
        // An hour's token: kept until 5 minutes before it expires.
        assert_eq!(get(0, 3_600).unwrap(), "t1");
        assert_eq!(get(3_299, 3_600).unwrap(), "t1");
        assert_eq!(get(3_300, 60).unwrap(), "t2");
        // A minute's token: kept for half its life, not fetched every time.
        assert_eq!(get(3_329, 60).unwrap(), "t2");
        assert_eq!(get(3_330, 60).unwrap(), "t3");
        held.forget_if(|v| v == "t2");
        assert_eq!(get(3_331, 60).unwrap(), "t3", "a newer one is kept");
        held.forget_if(|v| v == "t3");
        assert_eq!(get(3_332, 60).unwrap(), "t4");
    }
}
