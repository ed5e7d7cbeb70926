//! A value fetched from a service that expires (AWS credentials, a Google
//! or OAuth 2 access token), kept until `CREDENTIALS_REFRESH_MS` before it
//! expires, or half its lifetime for one that lives less than twice that.
//! One caller fetches at a time. Meanwhile the others go on with the value
//! in hand while it has not expired, rather than wait out a slow service
//! (each waiting attempt would have had its deadline shortened by the
//! fetch, or passed); with none in hand they wait for the fetch (they are
//! IO workers, which may block) and take what it brought, or its failure,
//! but not past their attempt's deadline: a service that does not answer
//! then holds up only the one worker asking it (until its HTTP client's
//! timeouts end the request), and one that fails is asked once for all
//! the attempts waiting, not by each of them in turn. When a refresh
//! fails, the value in hand serves until it expires, with a warning in the
//! log, and the service is asked again after a `CREDENTIALS_REFRESH_TRIES`th
//! of the refresh margin: not by each caller in turn, which would ask a
//! failing identity provider once per attempt.

use crate::limits::{
    CREDENTIALS_REFRESH_MS, CREDENTIALS_REFRESH_TRIES, FETCHED_MAX_LIFETIME_S,
    REQUEST_PAST_DEADLINE_MS,
};
use parking_lot::{Mutex, MutexGuard};
use std::fmt::{self, Display};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The value held, when it was fetched and when it expires.
pub(crate) struct Expiring<T> {
    held: Mutex<Option<Held<T>>>,
    /// Held by the one caller fetching; the last fetch's failure, if it
    /// failed.
    fetching: Mutex<Option<String>>,
    /// Fetches ended.
    fetches: AtomicU64,
}

struct Held<T> {
    value: T,
    fetched_at: SystemTime,
    expires_at: SystemTime,
    /// After a refresh failed: when the next is tried.
    retry_at: Option<SystemTime>,
}

impl<T> Held<T> {
    /// How long before it expires it is refreshed.
    fn refresh_margin(&self) -> Duration {
        let lifetime = (self.expires_at.duration_since(self.fetched_at)).unwrap_or_default();
        Duration::from_millis(CREDENTIALS_REFRESH_MS).min(lifetime / 2)
    }

    /// Whether it is the one to use at `now` without asking for another:
    /// before its refresh margin, or, after a failed refresh, before the
    /// next try, while it has not expired.
    fn is_fresh(&self, now: SystemTime) -> bool {
        let retrying = self.retry_at.is_some_and(|at| now < at);
        now < self.expires_at && (now + self.refresh_margin() < self.expires_at || retrying)
    }
}

impl<T: Clone> Expiring<T> {
    pub fn new() -> Expiring<T> {
        Expiring {
            held: Mutex::new(None),
            fetching: Mutex::new(None),
            fetches: AtomicU64::new(0),
        }
    }

    /// The value at `now`: the one held while fresh, else what `fetch`
    /// returns (the value and its expiry), else the one held while it has
    /// not expired, else `fetch`'s error. While another caller fetches, the
    /// one held serves if it has not expired; with none, this caller waits
    /// for that fetch until a little past its attempt's `deadline` (the
    /// shard's timer fails the attempt first), or for as long as it takes
    /// without one, and takes its value or its failure. `what` names the
    /// value in the log and in the error.
    pub fn get<E: Display + From<Unfetched>>(
        &self,
        now: SystemTime,
        deadline: Option<Instant>,
        what: &(impl Display + ?Sized),
        fetch: impl FnOnce() -> Result<(T, SystemTime), E>,
    ) -> Result<T, E> {
        let in_hand = match self.fresh_or_unexpired(now) {
            Ok(fresh) => return Ok(fresh),
            Err(unexpired) => unexpired,
        };
        let (mut last_failure, fetches_before_wait) = match (self.fetching.try_lock(), &in_hand) {
            (Some(fetching), _) => (fetching, None),
            (None, Some(value)) => return Ok(value.clone()),
            (None, None) => self.wait_for_fetch(deadline, what)?,
        };
        // The caller that fetched before may have brought a fresh one, or
        // failed while this one waited.
        let in_hand = match self.fresh_or_unexpired(now) {
            Ok(fresh) => return Ok(fresh),
            Err(unexpired) => unexpired,
        };
        let ended = self.fetches.load(Ordering::Acquire);
        let one_ended_in_the_wait = fetches_before_wait.is_some_and(|before| before != ended);
        if let (true, Some(failure)) = (one_ended_in_the_wait, last_failure.as_ref()) {
            return Err(Unfetched::Failed(failure.clone()).into());
        }
        let fetched = fetch();
        *last_failure = fetched.as_ref().err().map(ToString::to_string);
        self.fetches.fetch_add(1, Ordering::Release);
        match fetched {
            Ok((value, expires_at)) => {
                *self.held.lock() = Some(Held {
                    value: value.clone(),
                    fetched_at: now,
                    expires_at,
                    retry_at: None,
                });
                Ok(value)
            }
            Err(error) => match in_hand {
                Some(value) => {
                    let next_try_s = self.try_again_later(now);
                    crate::log::warn(
                        "cannot refresh; using the one in hand until it expires",
                        &[
                            ("what", &what),
                            ("error", &error),
                            ("next_try_s", &next_try_s),
                        ],
                    );
                    Ok(value)
                }
                None => Err(error),
            },
        }
    }

    /// After a refresh failed at `now`, the value held serves without
    /// another try for a `CREDENTIALS_REFRESH_TRIES`th of its refresh
    /// margin (rather than each caller asking a failing service in turn
    /// until it expires); returns that time, in seconds.
    fn try_again_later(&self, now: SystemTime) -> u64 {
        let mut held = self.held.lock();
        let Some(held) = held.as_mut() else {
            return 0;
        };
        let wait = held.refresh_margin() / CREDENTIALS_REFRESH_TRIES;
        held.retry_at = Some(now + wait);
        wait.as_secs()
    }

    /// Waits for the fetch under way to end, until a little past
    /// `deadline` if given: then the turn to fetch, and how many fetches
    /// had ended before the wait.
    fn wait_for_fetch(
        &self,
        deadline: Option<Instant>,
        what: &(impl Display + ?Sized),
    ) -> Result<(MutexGuard<'_, Option<String>>, Option<u64>), Unfetched> {
        let since = self.fetches.load(Ordering::Acquire);
        let fetching = match deadline {
            Some(deadline) => {
                let past = Duration::from_millis(REQUEST_PAST_DEADLINE_MS);
                let waited = self.fetching.try_lock_until(deadline + past);
                waited.ok_or_else(|| Unfetched::StillFetching {
                    what: what.to_string(),
                })?
            }
            None => self.fetching.lock(),
        };
        Ok((fetching, Some(since)))
    }

    /// The value held if fresh at `now`; else, as the error, the value
    /// held if it has not expired.
    fn fresh_or_unexpired(&self, now: SystemTime) -> Result<T, Option<T>> {
        match self.held.lock().as_ref() {
            Some(held) if held.is_fresh(now) => Ok(held.value.clone()),
            Some(held) if now < held.expires_at => Err(Some(held.value.clone())),
            _ => Err(None),
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

/// When a value fetched at `now` whose answer gives it `lifetime_s` to
/// live expires: at most `FETCHED_MAX_LIFETIME_S` on.
pub(crate) fn expires_after(now: SystemTime, lifetime_s: u64) -> SystemTime {
    now + Duration::from_secs(lifetime_s.min(FETCHED_MAX_LIFETIME_S))
}

/// When a value fetched at `now` whose answer says it expires at `unix_s`
/// (seconds since the Unix epoch) expires: at most `FETCHED_MAX_LIFETIME_S`
/// on.
pub(crate) fn expires_at_unix_s(now: SystemTime, unix_s: u64) -> SystemTime {
    let latest = expires_after(now, FETCHED_MAX_LIFETIME_S);
    let named = UNIX_EPOCH.checked_add(Duration::from_secs(unix_s));
    named.map_or(latest, |at| at.min(latest))
}

/// Why a caller with no value in hand, which waited for another caller's
/// fetch, has none.
#[derive(Debug)]
pub enum Unfetched {
    /// The fetch had not ended by the caller's attempt's deadline.
    StillFetching { what: String },
    /// The fetch failed, as this says (its error's text).
    Failed(String),
}

impl Display for Unfetched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfetched::StillFetching { what } => write!(
                f,
                "another attempt's request for {what} had not ended by this attempt's deadline (dispatch.attempt_timeout_ms)"
            ),
            Unfetched::Failed(error) => f.write_str(error),
        }
    }
}

impl std::error::Error for Unfetched {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::BoxError;
    use std::sync::Arc;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn a_value_is_fetched_again_before_it_expires_and_when_forgotten() {
        let held = Expiring::new();
        let fetches = std::cell::Cell::new(0);
        let get = |now: u64, lifetime_s: u64| {
            held.get(at(now), None, "a token", || {
                fetches.set(fetches.get() + 1);
                Ok::<_, BoxError>((format!("t{}", fetches.get()), at(now + lifetime_s)))
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

    /// While a refresh fails, the value in hand serves, and the service is
    /// asked again each tenth of the refresh margin, not by every caller
    /// in turn; once it has expired, the failure is the answer.
    #[test]
    fn a_failing_refresh_is_tried_again_each_tenth_of_the_margin() {
        let held = Expiring::new();
        let (fetches, failing) = (std::cell::Cell::new(0), std::cell::Cell::new(true));
        let get = |now: u64| {
            held.get(at(now), None, "a token", || {
                fetches.set(fetches.get() + 1);
                match failing.get() {
                    true => Err::<_, BoxError>("HTTP status 503".into()),
                    false => Ok((format!("t{}", fetches.get()), at(now + 3_600))),
                }
            })
        };
        failing.set(false);
        assert_eq!(get(0).unwrap(), "t1");
        // Refreshed from 3,300 s (5 minutes before it expires): tried at
        // 3,300, 3,330, 3,360 and 3,390 by a hundred callers.
        failing.set(true);
        for now in 3_300..3_400 {
            assert_eq!(get(now).unwrap(), "t1");
        }
        assert_eq!(fetches.get(), 5);
        // The service is back: the next try brings a new one.
        failing.set(false);
        assert_eq!(get(3_419).unwrap(), "t1");
        assert_eq!(get(3_420).unwrap(), "t6");
        // Failing to the end: the one in hand serves until it expires
        // (at 7,020 s), asked for ten times meanwhile.
        failing.set(true);
        for now in (6_720..7_020).step_by(10) {
            assert_eq!(get(now).unwrap(), "t6");
        }
        assert_eq!(fetches.get(), 16);
        let expired = get(7_020).map_err(|e| e.to_string());
        assert_eq!(expired, Err("HTTP status 503".into()));
    }

    /// `held.get` at `now_s` by `deadline` on a thread of its own, with a
    /// fetch that fails: its answer, errors as text.
    fn get_on_a_thread(
        held: &Arc<Expiring<String>>,
        now_s: u64,
        deadline: Option<Instant>,
    ) -> crossbeam_channel::Receiver<Result<String, String>> {
        let (answer, answered) = crossbeam_channel::bounded(1);
        let held = held.clone();
        std::thread::spawn(move || {
            let got = held.get(at(now_s), deadline, "a token", || {
                Err::<_, BoxError>("a second fetch".into())
            });
            answer.send(got.map_err(|e| e.to_string())).unwrap();
        });
        answered
    }

    /// A first fetch on a thread of its own that waits for `let_go`
    /// (once it has said so on `fetching`), then brings `t1` for an hour.
    fn slow_first_fetch(
        held: &Arc<Expiring<String>>,
        let_go: crossbeam_channel::Receiver<()>,
    ) -> std::thread::JoinHandle<Result<String, BoxError>> {
        let (fetching, in_fetch) = crossbeam_channel::bounded(1);
        let held = held.clone();
        let fetcher = std::thread::spawn(move || {
            held.get(at(0), None, "a token", || {
                fetching.send(()).unwrap();
                let_go.recv().unwrap();
                Ok::<_, BoxError>(("t1".into(), at(3_600)))
            })
        });
        in_fetch.recv().unwrap();
        fetcher
    }

    #[test]
    fn while_one_caller_fetches_the_others_go_on_with_the_value_in_hand() {
        let held = Arc::new(Expiring::new());
        let first = held.get(at(0), None, "a token", || {
            Ok::<_, BoxError>(("t1".into(), at(3_600)))
        });
        assert_eq!(first.unwrap(), "t1");
        // Due for a refresh at 3,300 s; the service takes its time.
        let (let_go, gate) = crossbeam_channel::bounded::<()>(0);
        let (fetching, in_fetch) = crossbeam_channel::bounded(1);
        let refresher = {
            let held = held.clone();
            std::thread::spawn(move || {
                held.get(at(3_300), None, "a token", || {
                    fetching.send(()).unwrap();
                    gate.recv().unwrap();
                    Ok::<_, BoxError>(("t2".into(), at(7_200)))
                })
            })
        };
        in_fetch.recv().unwrap();
        let meanwhile = get_on_a_thread(&held, 3_301, None);
        let answer = meanwhile.recv_timeout(Duration::from_secs(10));
        assert_eq!(answer, Ok(Ok("t1".into())), "not held up by the fetch");
        // Past t1's expiry a caller waits for the fetch, and takes its value.
        let expired = get_on_a_thread(&held, 3_600, None);
        let_go.send(()).unwrap();
        assert_eq!(refresher.join().unwrap().unwrap(), "t2");
        let answer = expired.recv_timeout(Duration::from_secs(10));
        assert_eq!(answer, Ok(Ok("t2".into())));
    }

    /// With no value in hand, a caller waits for another's fetch only
    /// until a little past its attempt's deadline, and fails saying so;
    /// the fetch goes on, and its value serves the callers after it.
    #[test]
    fn a_caller_with_a_deadline_waits_for_anothers_fetch_only_until_it() {
        let held = Arc::new(Expiring::new());
        let (let_go, gate) = crossbeam_channel::bounded::<()>(0);
        let fetcher = slow_first_fetch(&held, gate);
        let started = Instant::now();
        let deadline = started + Duration::from_millis(100);
        let waiter = get_on_a_thread(&held, 1, Some(deadline));
        let answer = waiter.recv_timeout(Duration::from_secs(10)).unwrap();
        let waited = started.elapsed();
        assert_eq!(
            answer,
            Err("another attempt's request for a token had not ended by this attempt's deadline (dispatch.attempt_timeout_ms)".into())
        );
        let past = Duration::from_millis(REQUEST_PAST_DEADLINE_MS);
        assert!(waited >= Duration::from_millis(100) + past, "{waited:?}");
        let_go.send(()).unwrap();
        assert_eq!(fetcher.join().unwrap().unwrap(), "t1");
        let after = get_on_a_thread(&held, 2, Some(Instant::now()));
        assert_eq!(
            after.recv_timeout(Duration::from_secs(10)),
            Ok(Ok("t1".into()))
        );
    }
}
