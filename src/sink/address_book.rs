//! Hosts' addresses as looked up, kept for every HTTP client of the
//! process. ureq 3 resolves a request's host before it looks for a pooled
//! connection, so with its default resolver every delivery to a named host
//! costs a `getaddrinfo`: reading `/etc/hosts` and, for a name it does not
//! hold, a query to the DNS server (several, with a search list) — per
//! delivery, on a keep-alive connection that needs no address at all. The
//! book keeps each host's addresses for `DNS_CACHE_MS`, as a JVM does
//! without a security manager (the system's resolver does not report
//! record TTLs), so a receiver that moves is reached at its new address
//! within that time (a pooled connection to the old one is used until it
//! closes).
//!
//! Then one caller looks the host up again while the others go on with the
//! addresses in hand, and when that look-up fails because the DNS server
//! is down or slow, they serve on up to `DNS_STALE_MAX_MS` after they
//! were looked up (a warning when the first refresh fails, a line when
//! one succeeds again, not one every `DNS_CACHE_MS`), as RFC 8767
//! ("serve-stale") has resolvers do: the receiver is most likely where it
//! was, and a DNS outage would otherwise fail every delivery to it after
//! `DNS_CACHE_MS`, pooled connections and all. A name that no longer
//! resolves (the DNS answered that it has no address) is not served
//! stale: its old addresses may be someone else's by now, and a hook must
//! not go there. A first look-up that fails is not kept.
//!
//! One book serves the process ([`AddressBook::shared`]): sinks and token
//! services on one host share its look-ups, and a sink a reload builds
//! anew finds the addresses its predecessor looked up, DNS outage or not.
//! Entries a day old are dropped as the book grows, so hosts no sink asks
//! for any more do not stay.

use crate::limits::{DNS_CACHE_MS, DNS_STALE_MAX_MS};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The fewest entries the book holds before it drops those a day old; it
/// does again each time it has doubled since.
const SWEEP_MIN_ENTRIES: usize = 1_024;

/// Hosts' addresses, looked up with `system`.
#[derive(Debug)]
pub(super) struct AddressBook {
    system: Box<dyn Resolver>,
    entries: Mutex<Entries>,
}

#[derive(Debug)]
struct Entries {
    /// By `scheme://host:port`.
    by_host: HashMap<String, Entry>,
    /// Drop the entries a day old when a new one makes this many.
    sweep_at: usize,
}

/// A host's addresses as last looked up.
#[derive(Debug)]
struct Entry {
    addresses: ResolvedSocketAddrs,
    /// When they were looked up.
    resolved_at: Instant,
    /// When to look them up again: `DNS_CACHE_MS` after the last look-up,
    /// whether it brought them or failed (but not past `DNS_STALE_MAX_MS`
    /// after they were looked up).
    refresh_at: Instant,
    /// A caller is looking them up again.
    refreshing: bool,
}

impl Entry {
    /// Whether a refresh failed since they were looked up (they are
    /// served stale), which put off the next one: told once, when the
    /// first fails, and once more when a look-up brings them again.
    fn is_stale(&self) -> bool {
        self.refresh_at > self.resolved_at + Duration::from_millis(DNS_CACHE_MS)
    }

    /// Whether, at `now`, they are too old to serve even stale.
    fn is_expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.resolved_at) >= Duration::from_millis(DNS_STALE_MAX_MS)
    }
}

impl AddressBook {
    /// The process's book, over the system's resolver.
    pub(super) fn shared() -> Arc<AddressBook> {
        static SHARED: LazyLock<Arc<AddressBook>> =
            LazyLock::new(|| Arc::new(AddressBook::over(Box::new(DefaultResolver::default()))));
        SHARED.clone()
    }

    /// A book of its own, over `system`.
    pub(super) fn over(system: Box<dyn Resolver>) -> AddressBook {
        AddressBook {
            system,
            entries: Mutex::new(Entries {
                by_host: HashMap::new(),
                sweep_at: SWEEP_MIN_ENTRIES,
            }),
        }
    }

    /// The addresses of `uri`'s host at `now`: the ones in hand until
    /// their refresh, or while another caller refreshes them, or when a
    /// refresh fails, up to `DNS_STALE_MAX_MS` old; else looked up.
    pub(super) fn addresses(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
        now: Instant,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let key = format!("{}://{host}", uri.scheme_str().unwrap_or_default());
        let refreshing = {
            let mut entries = self.entries.lock();
            match entries.by_host.get_mut(&key) {
                None => false,
                Some(entry) if now < entry.refresh_at => return Ok(entry.addresses.clone()),
                Some(entry) if entry.is_expired(now) => {
                    entries.by_host.remove(&key);
                    false
                }
                Some(entry) if entry.refreshing => return Ok(entry.addresses.clone()),
                Some(entry) => {
                    entry.refreshing = true;
                    true
                }
            }
        };
        // Looked up without the lock: a slow DNS server holds up only the
        // caller asking it.
        match self.look_up(uri, config, timeout) {
            Ok(addresses) => {
                self.keep(key, uri, &addresses, now);
                Ok(addresses)
            }
            Err(error) if refreshing => self.refresh_failed(&key, uri, error, now),
            Err(error) => Err(error),
        }
    }

    /// The system's answer for `uri`'s host. A look-up that panics (ureq's
    /// starts a thread to bound it by `timeout`, and `thread::spawn`
    /// panics when the process may start no more) is a failure that says
    /// nothing of the DNS: [`LookUpPanicked`].
    fn look_up(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        crate::panics::catch(|| self.system.resolve(uri, config, timeout)).unwrap_or_else(|panic| {
            let error = std::io::Error::other(LookUpPanicked(panic));
            Err(ureq::Error::Io(error))
        })
    }

    /// Keeps `addresses`, looked up for `uri` at `now`, under `key`.
    fn keep(&self, key: String, uri: &Uri, addresses: &ResolvedSocketAddrs, now: Instant) {
        let entry = Entry {
            addresses: addresses.clone(),
            resolved_at: now,
            refresh_at: now + Duration::from_millis(DNS_CACHE_MS),
            refreshing: false,
        };
        let mut entries = self.entries.lock();
        let before = entries.by_host.insert(key, entry);
        if entries.by_host.len() >= entries.sweep_at {
            entries.by_host.retain(|_, entry| !entry.is_expired(now));
            entries.sweep_at = (2 * entries.by_host.len()).max(SWEEP_MIN_ENTRIES);
        }
        drop(entries);
        if let Some(before) = before.filter(Entry::is_stale) {
            let stale_s = now.saturating_duration_since(before.resolved_at).as_secs();
            crate::log::info(
                "looked a host up again after serving its addresses from before",
                &[
                    ("host", &uri.host().unwrap_or_default()),
                    ("looked_up_s_ago", &stale_s),
                ],
            );
        }
    }

    /// Looking `uri`'s host up again at `now` failed with `error`: the
    /// addresses in hand serve on if the DNS server is down or slow, and
    /// go if it says the name no longer resolves.
    fn refresh_failed(
        &self,
        key: &str,
        uri: &Uri,
        error: ureq::Error,
        now: Instant,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.by_host.get_mut(key) else {
            return Err(error);
        };
        if !dns_unavailable(&error) {
            entries.by_host.remove(key);
            return Err(error);
        }
        let first_failure = !entry.is_stale();
        entry.refreshing = false;
        entry.refresh_at = (now + Duration::from_millis(DNS_CACHE_MS))
            .min(entry.resolved_at + Duration::from_millis(DNS_STALE_MAX_MS));
        if first_failure {
            let age_s = now.saturating_duration_since(entry.resolved_at).as_secs();
            crate::log::warn(
                "cannot look up a host; using its addresses looked up before, for up to a day",
                &[
                    ("host", &uri.host().unwrap_or_default()),
                    ("looked_up_s_ago", &age_s),
                    ("error", &error),
                ],
            );
        }
        Ok(entry.addresses.clone())
    }

    /// How many hosts' addresses it serves from before at `now`: looking
    /// them up again failed (the DNS server down or slow), and they are
    /// not a day old yet.
    pub(super) fn stale_hosts(&self, now: Instant) -> usize {
        let entries = self.entries.lock();
        let stale = entries.by_host.values();
        stale.filter(|e| e.is_stale() && !e.is_expired(now)).count()
    }

    /// How many hosts the book holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().by_host.len()
    }
}

/// A look-up that panicked, with the panic's text.
#[derive(Debug)]
struct LookUpPanicked(String);

impl std::fmt::Display for LookUpPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "looking the host up panicked: {}", self.0)
    }
}

impl std::error::Error for LookUpPanicked {}

/// Whether a failed look-up says the DNS server is down or slow (RFC
/// 8767's case for stale addresses) rather than that the name has no
/// address: a timeout, or `getaddrinfo`'s `EAI_AGAIN`, which std's error
/// carries only as its text (glibc's and musl's; a process that never
/// calls `setlocale` has them untranslated). A look-up that panicked
/// counts too: the addresses in hand are as good as they were.
fn dns_unavailable(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(e) if e.get_ref().is_some_and(|e| e.is::<LookUpPanicked>()) => true,
        ureq::Error::Io(e) => {
            let text = e.to_string();
            text.ends_with("Temporary failure in name resolution") || text.ends_with(": Try again")
        }
        _ => false,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Answers every host with `addresses`, counting look-ups; fails with
    /// `failure`'s error while it has one. Each look-up, once counted,
    /// waits for `gate` (a test holding it holds the look-ups up), for 5 s
    /// at most: a caller that should not have looked up fails its test
    /// rather than hang it.
    #[derive(Debug, Clone)]
    pub(in crate::sink) struct Counting {
        lookups: Arc<AtomicU32>,
        addresses: Vec<SocketAddr>,
        failure: Arc<Mutex<Option<Failure>>>,
        gate: Arc<Mutex<()>>,
    }

    /// A look-up's failure, made anew for each look-up.
    type Failure = fn() -> ureq::Error;

    impl Counting {
        fn fail_with(&self, failure: Option<Failure>) {
            *self.failure.lock() = failure;
        }

        pub(in crate::sink) fn lookups(&self) -> u32 {
            self.lookups.load(Ordering::SeqCst)
        }
    }

    /// `getaddrinfo`'s failure as std reports it.
    fn gai(text: &str) -> ureq::Error {
        let message = format!("failed to lookup address information: {text}");
        ureq::Error::Io(std::io::Error::other(message))
    }

    /// glibc's `EAI_AGAIN`: no DNS server answered, or one failed.
    fn dns_down() -> ureq::Error {
        gai("Temporary failure in name resolution")
    }

    /// glibc's `EAI_NONAME`: the DNS says the name does not exist.
    fn no_such_name() -> ureq::Error {
        gai("Name or service not known")
    }

    impl Resolver for Counting {
        fn resolve(
            &self,
            _: &Uri,
            _: &Config,
            _: NextTimeout,
        ) -> Result<ResolvedSocketAddrs, ureq::Error> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            drop(self.gate.try_lock_for(Duration::from_secs(5)));
            if let Some(failure) = *self.failure.lock() {
                return Err(failure());
            }
            let mut out = self.empty();
            self.addresses.iter().for_each(|&a| out.push(a));
            Ok(out)
        }
    }

    /// A book of its own over a stand-in that answers every host with
    /// `addresses`.
    pub(in crate::sink) fn book(addresses: &[&str]) -> (Arc<AddressBook>, Counting) {
        let counting = Counting {
            lookups: Arc::new(AtomicU32::new(0)),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
            failure: Arc::new(Mutex::new(None)),
            gate: Arc::new(Mutex::new(())),
        };
        let book = AddressBook::over(Box::new(counting.clone()));
        (Arc::new(book), counting)
    }

    fn ips(r: Result<ResolvedSocketAddrs, ureq::Error>) -> Vec<String> {
        r.unwrap().iter().map(|a| a.to_string()).collect()
    }

    /// `book`'s addresses for `uri` at `ms` after `t0`.
    fn at(
        book: &AddressBook,
        uri: &Uri,
        t0: Instant,
        ms: u64,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let now = t0 + Duration::from_millis(ms);
        book.addresses(uri, &Config::default(), NextTimeout::default(), now)
    }

    #[test]
    fn a_hosts_addresses_are_looked_up_once_per_cache_period_and_a_first_failure_is_not_kept() {
        let (book, system) = book(&["93.184.215.14:443"]);
        let t0 = Instant::now();
        let uri: Uri = "https://hooks.example.com/a".parse().unwrap();
        let other: Uri = "https://hooks.example.com:8443/b".parse().unwrap();
        assert_eq!(ips(at(&book, &uri, t0, 0)), ["93.184.215.14:443"]);
        assert_eq!(
            ips(at(&book, &uri, t0, DNS_CACHE_MS - 1)),
            ["93.184.215.14:443"]
        );
        assert_eq!(system.lookups(), 1);
        // Another port is another entry.
        at(&book, &other, t0, 1).unwrap();
        assert_eq!(system.lookups(), 2);
        // Due: looked up again.
        at(&book, &uri, t0, DNS_CACHE_MS).unwrap();
        at(&book, &uri, t0, 2 * DNS_CACHE_MS - 1).unwrap();
        assert_eq!(system.lookups(), 3);
        // A host never looked up: its failure is returned and not kept.
        system.fail_with(Some(dns_down));
        let new: Uri = "https://new.example.com/".parse().unwrap();
        failures_are_not_kept_and_a_recovery_is(&book, &system, &new, t0, 0);
    }

    /// At `ms` and the ms after, `uri`'s look-up fails each time, nothing
    /// kept; once the system answers again, its answer is kept.
    fn failures_are_not_kept_and_a_recovery_is(
        book: &AddressBook,
        system: &Counting,
        uri: &Uri,
        t0: Instant,
        ms: u64,
    ) {
        let before = system.lookups();
        assert!(at(book, uri, t0, ms).is_err());
        assert!(at(book, uri, t0, ms + 1).is_err());
        assert_eq!(system.lookups(), before + 2);
        system.fail_with(None);
        at(book, uri, t0, ms + 2).unwrap();
        at(book, uri, t0, ms + 3).unwrap();
        assert_eq!(system.lookups(), before + 3);
    }

    /// A book that looked `uri` up at `t0` (as `93.184.215.14:443`), over
    /// a system that fails with `failure` from then on.
    fn looked_up_then_failing(failure: Failure) -> (Arc<AddressBook>, Counting, Uri, Instant) {
        let (book, system) = book(&["93.184.215.14:443"]);
        let t0 = Instant::now();
        let uri: Uri = "https://hooks.example.com/a".parse().unwrap();
        at(&book, &uri, t0, 0).unwrap();
        system.fail_with(Some(failure));
        (book, system, uri, t0)
    }

    /// A DNS outage: the addresses in hand serve on, looked up again each
    /// cache period, for up to a day after they were looked up.
    #[test]
    fn when_looking_a_host_up_again_fails_its_addresses_serve_for_up_to_a_day() {
        let (book, system, uri, t0) = looked_up_then_failing(dns_down);
        let stale_at = |ms| book.stale_hosts(t0 + Duration::from_millis(ms));
        assert_eq!(stale_at(DNS_CACHE_MS), 0);
        assert_eq!(
            ips(at(&book, &uri, t0, DNS_CACHE_MS)),
            ["93.184.215.14:443"]
        );
        assert_eq!(system.lookups(), 2);
        assert_eq!(stale_at(DNS_CACHE_MS), 1);
        // Not asked again until a cache period after the failure.
        assert_eq!(
            ips(at(&book, &uri, t0, 2 * DNS_CACHE_MS - 1)),
            ["93.184.215.14:443"]
        );
        assert_eq!(system.lookups(), 2);
        // A look-up that times out is the DNS server's silence too.
        system.fail_with(Some(|| ureq::Error::Timeout(ureq::Timeout::Resolve)));
        assert_eq!(
            ips(at(&book, &uri, t0, 2 * DNS_CACHE_MS)),
            ["93.184.215.14:443"]
        );
        assert_eq!(system.lookups(), 3);
        let last_served_ms = DNS_STALE_MAX_MS - 1;
        assert_eq!(
            ips(at(&book, &uri, t0, last_served_ms)),
            ["93.184.215.14:443"]
        );
        assert_eq!(system.lookups(), 4);
        assert_eq!(
            (stale_at(last_served_ms), stale_at(DNS_STALE_MAX_MS)),
            (1, 0)
        );
        // A day after they were looked up they are dropped, and the
        // failure is the answer until the DNS server is back.
        failures_are_not_kept_and_a_recovery_is(&book, &system, &uri, t0, DNS_STALE_MAX_MS);
    }

    /// What a look-up does when the process may start no more threads.
    fn cannot_spawn() -> ureq::Error {
        panic!("failed to spawn thread: Resource temporarily unavailable")
    }

    /// A look-up that panics is a failure, not a panic; a refresh that
    /// panics serves the addresses in hand and is tried again a cache
    /// period later, as one the DNS server failed is, rather than leave
    /// the host `refreshing`, looked up by nobody for a day.
    #[test]
    fn a_look_up_that_panics_fails_and_a_refresh_that_panics_serves_the_addresses_in_hand() {
        let (book, system, uri, t0) = looked_up_then_failing(cannot_spawn);
        let served = || ips(at(&book, &uri, t0, DNS_CACHE_MS));
        assert_eq!(served(), ["93.184.215.14:443"]);
        assert_eq!(system.lookups(), 2);
        let stale_at = |ms| book.stale_hosts(t0 + Duration::from_millis(ms));
        assert_eq!(stale_at(DNS_CACHE_MS), 1);
        system.fail_with(None);
        at(&book, &uri, t0, 2 * DNS_CACHE_MS).unwrap();
        assert_eq!(system.lookups(), 3);
        assert_eq!(stale_at(2 * DNS_CACHE_MS), 0, "looked up again");
        system.fail_with(Some(cannot_spawn));
        let new: Uri = "https://new.example.com/".parse().unwrap();
        let failed = at(&book, &new, t0, 0).unwrap_err();
        assert_eq!(
            failed.to_string(),
            "io: looking the host up panicked: \
             failed to spawn thread: Resource temporarily unavailable"
        );
    }

    /// A name the DNS says no longer exists is not served from before: its
    /// old addresses may be someone else's now.
    #[test]
    fn a_name_that_no_longer_resolves_loses_its_addresses() {
        let (book, system, uri, t0) = looked_up_then_failing(no_such_name);
        let refused = at(&book, &uri, t0, DNS_CACHE_MS).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "io: failed to lookup address information: Name or service not known"
        );
        // Gone: the next caller looks the name up itself.
        assert!(at(&book, &uri, t0, DNS_CACHE_MS + 1).is_err());
        assert_eq!(system.lookups(), 3);
    }

    #[test]
    fn only_a_timeout_or_a_temporary_failure_says_the_dns_is_unavailable() {
        assert!(dns_unavailable(&dns_down()));
        assert!(dns_unavailable(&gai("Try again")), "musl's EAI_AGAIN");
        let timed_out = ureq::Error::Timeout(ureq::Timeout::Global);
        assert!(dns_unavailable(&timed_out));
        assert!(!dns_unavailable(&no_such_name()));
        let musl_no_name = gai("Name does not resolve");
        assert!(!dns_unavailable(&musl_no_name));
        assert!(!dns_unavailable(&gai(
            "No address associated with hostname"
        )));
        assert!(!dns_unavailable(&ureq::Error::HostNotFound));
    }

    /// When a host is due to be looked up again, one caller does; the
    /// others meanwhile go on with the addresses in hand, without waiting
    /// for the DNS server.
    #[test]
    fn while_one_caller_looks_a_host_up_again_the_others_use_its_addresses_in_hand() {
        let (book, system) = book(&["93.184.215.14:443"]);
        let t0 = Instant::now();
        let uri: Uri = "https://hooks.example.com/a".parse().unwrap();
        at(&book, &uri, t0, 0).unwrap();
        let held = system.gate.lock();
        let refresher = {
            let (book, uri) = (book.clone(), uri.clone());
            std::thread::spawn(move || ips(at(&book, &uri, t0, DNS_CACHE_MS)))
        };
        crate::test_support::wait_until("the refresh's look-up", || system.lookups() == 2);
        for ms in [DNS_CACHE_MS, DNS_CACHE_MS + 1, 2 * DNS_CACHE_MS] {
            assert_eq!(ips(at(&book, &uri, t0, ms)), ["93.184.215.14:443"]);
        }
        assert_eq!(system.lookups(), 2, "only the refreshing caller looked up");
        drop(held);
        assert_eq!(refresher.join().unwrap(), ["93.184.215.14:443"]);
        // The refresh is kept: nobody looks up until its cache period ends.
        at(&book, &uri, t0, 2 * DNS_CACHE_MS - 1).unwrap();
        assert_eq!(system.lookups(), 2);
    }

    /// Hosts nobody asks for any more go once they are a day old and the
    /// book has grown to `SWEEP_MIN_ENTRIES`, or to twice what the last
    /// sweep left.
    #[test]
    fn hosts_a_day_old_are_dropped_as_the_book_grows() {
        let (book, _) = book(&["93.184.215.14:443"]);
        let t0 = Instant::now();
        let mut hosts = 0..;
        let mut look_up = |count: usize, ms: u64| {
            for n in hosts.by_ref().take(count) {
                let uri: Uri = format!("https://h{n}.example.com/").parse().unwrap();
                at(&book, &uri, t0, ms).unwrap();
            }
            book.len()
        };
        const DAY_MS: u64 = DNS_STALE_MAX_MS;
        assert_eq!(look_up(SWEEP_MIN_ENTRIES - 2, 0), SWEEP_MIN_ENTRIES - 2);
        assert_eq!(look_up(1, 1), SWEEP_MIN_ENTRIES - 1);
        // The entry that reaches the threshold a day after the first ones
        // sweeps them: left are the one a millisecond younger, and itself.
        assert_eq!(look_up(1, DAY_MS), 2);
        // The next sweep waits for SWEEP_MIN_ENTRIES again, although both
        // are a day old by then.
        assert_eq!(
            look_up(SWEEP_MIN_ENTRIES - 3, 2 * DAY_MS),
            SWEEP_MIN_ENTRIES - 1
        );
        let left = SWEEP_MIN_ENTRIES - 2;
        assert_eq!(look_up(1, 2 * DAY_MS), left);
        // Then for twice what it left.
        assert_eq!(look_up(left - 1, 3 * DAY_MS), 2 * left - 1);
        assert_eq!(look_up(1, 3 * DAY_MS), left);
    }
}
