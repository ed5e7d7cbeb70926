//! How goad's HTTP clients find a host's addresses. ureq 3 resolves a
//! request's host before it looks for a pooled connection, so with its
//! default resolver every delivery to a named host costs a `getaddrinfo`:
//! reading `/etc/hosts` and, for a name it does not hold, a query to the
//! DNS server (several, with a search list) — per delivery, on a keep-alive
//! connection that needs no address at all. This resolver keeps each
//! host's addresses for `DNS_CACHE_MS`, as a JVM does without a security
//! manager (the system's resolver does not report record TTLs), so a
//! receiver that moves is reached at its new address within that time (a
//! pooled connection to the old one is used until it closes). Failed
//! look-ups are not kept. It passes on only the addresses its [`Egress`]
//! allows (see [`super::egress`]).

use super::egress::{Egress, PrivateAddress};
use crate::limits::DNS_CACHE_MS;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The resolver of one client (one sink's keep-alive pool).
#[derive(Debug)]
pub struct CachingResolver {
    system: Box<dyn Resolver>,
    egress: Egress,
    /// By `host:port`: when resolved, and the addresses.
    cache: Mutex<HashMap<String, (Instant, ResolvedSocketAddrs)>>,
}

impl CachingResolver {
    pub fn new(egress: Egress) -> CachingResolver {
        CachingResolver::over(Box::new(DefaultResolver::default()), egress)
    }

    fn over(system: Box<dyn Resolver>, egress: Egress) -> CachingResolver {
        CachingResolver {
            system,
            egress,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The addresses of `uri`'s host at `now`: kept ones while fresh.
    fn addresses(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
        now: Instant,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let key = format!("{}://{host}", uri.scheme_str().unwrap_or_default());
        let fresh_for = Duration::from_millis(DNS_CACHE_MS);
        if let Some((at, addresses)) = self.cache.lock().get(&key) {
            if now.duration_since(*at) < fresh_for {
                return Ok(addresses.clone());
            }
        }
        // Looked up without the lock: a slow DNS server holds up only its host.
        let addresses = self.system.resolve(uri, config, timeout)?;
        self.cache.lock().insert(key, (now, addresses.clone()));
        Ok(addresses)
    }
}

impl Resolver for CachingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.addresses(uri, config, timeout, Instant::now())?;
        let is_proxy = config.proxy().is_some_and(|proxy| proxy.uri() == uri);
        if self.egress.is_open() || is_proxy {
            return Ok(resolved);
        }
        let mut allowed = self.empty();
        let mut refused = Vec::new();
        for &addr in &resolved {
            match self.egress.refuses(addr.ip()) {
                true => refused.push(addr.ip()),
                false => allowed.push(addr),
            }
        }
        if allowed.is_empty() {
            let refusal = PrivateAddress {
                host: uri.host().unwrap_or_default().to_string(),
                addresses: refused,
                networks_allowed: self.egress.allows_networks(),
            };
            let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, refusal);
            return Err(ureq::Error::Io(io));
        }
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Answers every host with `addresses`, counting look-ups; fails while
    /// `failing`.
    #[derive(Debug, Clone)]
    struct Counting {
        lookups: Arc<AtomicU32>,
        addresses: Vec<SocketAddr>,
        failing: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Resolver for Counting {
        fn resolve(
            &self,
            _: &Uri,
            _: &Config,
            _: NextTimeout,
        ) -> Result<ResolvedSocketAddrs, ureq::Error> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            if self.failing.load(Ordering::SeqCst) {
                return Err(ureq::Error::HostNotFound);
            }
            let mut out = self.empty();
            self.addresses.iter().for_each(|&a| out.push(a));
            Ok(out)
        }
    }

    fn resolver(addresses: &[&str], egress: Egress) -> (CachingResolver, Counting) {
        let counting = Counting {
            lookups: Arc::new(AtomicU32::new(0)),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
            failing: Arc::new(false.into()),
        };
        (
            CachingResolver::over(Box::new(counting.clone()), egress),
            counting,
        )
    }

    /// The refusal `r` answers for `uri`'s host, as text.
    fn refusal(r: &CachingResolver, uri: &Uri) -> String {
        let e = (r.resolve(uri, &Config::default(), NextTimeout::default())).unwrap_err();
        PrivateAddress::of(&e).expect("a refusal").to_string()
    }

    fn ips(r: Result<ResolvedSocketAddrs, ureq::Error>) -> Vec<String> {
        r.unwrap().iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_hosts_addresses_are_looked_up_once_per_cache_period_and_failures_are_not_kept() {
        let (r, system) = resolver(&["93.184.215.14:443"], Egress::open());
        let config = Config::default();
        let t0 = Instant::now();
        let uri: Uri = "https://hooks.example.com/a".parse().unwrap();
        let other: Uri = "https://hooks.example.com:8443/b".parse().unwrap();
        let at = |uri: &Uri, ms: u64| {
            r.addresses(
                uri,
                &config,
                NextTimeout::default(),
                t0 + Duration::from_millis(ms),
            )
        };
        assert_eq!(ips(at(&uri, 0)), ["93.184.215.14:443"]);
        assert_eq!(ips(at(&uri, DNS_CACHE_MS - 1)), ["93.184.215.14:443"]);
        assert_eq!(system.lookups.load(Ordering::SeqCst), 1);
        // Another port is another entry.
        at(&other, 1).unwrap();
        assert_eq!(system.lookups.load(Ordering::SeqCst), 2);
        // Stale: looked up again; a failure is returned and not kept.
        system.failing.store(true, Ordering::SeqCst);
        assert!(at(&uri, DNS_CACHE_MS).is_err());
        assert!(at(&uri, DNS_CACHE_MS + 1).is_err());
        assert_eq!(system.lookups.load(Ordering::SeqCst), 4);
        system.failing.store(false, Ordering::SeqCst);
        at(&uri, DNS_CACHE_MS + 2).unwrap();
        at(&uri, DNS_CACHE_MS + 3).unwrap();
        assert_eq!(system.lookups.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn public_only_keeps_the_public_addresses_and_refuses_a_host_with_none() {
        let config = Config::default();
        let uri: Uri = "http://mixed.example.com/".parse().unwrap();
        let public_only = || Egress::public_and(Vec::new());
        let mixed = ["10.0.0.7:80", "93.184.215.14:80", "[::1]:80"];
        let (r, _) = resolver(&mixed, public_only());
        let resolved = r.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["93.184.215.14:80"]);
        let (r, _) = resolver(&["169.254.169.254:80", "[fd00::1]:80"], public_only());
        assert_eq!(
            refusal(&r, &uri),
            "mixed.example.com resolves only to private addresses \
             (169.254.169.254, fd00::1), which egress.deny_private_addresses refuses"
        );
        let (r, _) = resolver(&["10.0.0.7:80"], Egress::open());
        assert_eq!(
            ips(r.resolve(&uri, &config, NextTimeout::default())),
            ["10.0.0.7:80"]
        );
    }

    /// An allowed private network's addresses pass with the public ones;
    /// a refusal says that none was in the allowed networks.
    #[test]
    fn allowed_private_networks_pass_and_a_refusal_names_them() {
        let config = Config::default();
        let uri: Uri = "http://internal.example.com/".parse().unwrap();
        let egress = Egress::public_and(vec!["10.20.0.0/16".parse().unwrap()]);
        let mixed = [
            "10.20.3.4:80",
            "10.21.0.1:80",
            "93.184.215.14:80",
            "[::1]:80",
        ];
        let (r, _) = resolver(&mixed, egress.clone());
        let resolved = r.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["10.20.3.4:80", "93.184.215.14:80"]);
        let (r, _) = resolver(&["10.21.0.1:80"], egress);
        assert_eq!(
            refusal(&r, &uri),
            "internal.example.com resolves only to private addresses (10.21.0.1), \
             which egress.deny_private_addresses refuses \
             (none is in egress.allow_private_networks)"
        );
    }
}
