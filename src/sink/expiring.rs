//! A value fetched from a service that expires (AWS credentials, a Google
//! access token), kept until `CREDENTIALS_REFRESH_MS` before it expires.
//! One caller fetches while the others wait on the lock (they are IO
//! workers, which may block); when a fetch fails, the value in hand serves
//! until it expires, with a warning in the log.

use crate::limits::CREDENTIALS_REFRESH_MS;
use parking_lot::Mutex;
use std::fmt::Display;
use std::time::{Duration, SystemTime};

/// The value held and when it expires.
pub(crate) struct Expiring<T> {
    held: Mutex<Option<(T, SystemTime)>>,
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
        let refresh = Duration::from_millis(CREDENTIALS_REFRESH_MS);
        if let Some((value, _)) = held.as_ref().filter(|(_, at)| now + refresh < *at) {
            return Ok(value.clone());
        }
        let error = match fetch() {
            Ok(fetched) => return Ok(held.insert(fetched).0.clone()),
            Err(e) => e,
        };
        match held.as_ref().filter(|(_, at)| now < *at) {
            Some((value, _)) => {
                crate::log::warn(
                    "cannot refresh; using the one in hand until it expires",
                    &[("what", &what), ("error", &error)],
                );
                Ok(value.clone())
            }
            None => Err(error),
        }
    }
}
