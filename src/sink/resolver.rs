//! How goad's HTTP clients find a host's addresses: from the process's
//! [`AddressBook`] (kept a while, and served through a DNS outage), of
//! which each client passes on only those its [`Egress`] allows (see
//! [`super::egress`]).

use super::address_book::AddressBook;
use super::egress::{Egress, PrivateAddress};
use super::proxy_env::{ProxyUnreached, Scheme};
use std::sync::Arc;
use std::time::Instant;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The resolver of one client (one sink's keep-alive pool), for URLs of
/// one scheme.
#[derive(Debug)]
pub struct CachingResolver {
    book: Arc<AddressBook>,
    egress: Egress,
    scheme: Scheme,
}

impl CachingResolver {
    pub fn new(egress: Egress, scheme: Scheme) -> CachingResolver {
        CachingResolver {
            book: AddressBook::shared(),
            egress,
            scheme,
        }
    }
}

impl Resolver for CachingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.book.addresses(uri, config, timeout, Instant::now());
        // The proxy's host, resolved for a connection through it, is let
        // through (it resolves and connects the receiver, under its own
        // policy); a failure to look it up is said as the proxy's.
        if let Some(proxy) = config.proxy().filter(|proxy| proxy.uri() == uri) {
            return resolved.map_err(|e| ProxyUnreached::error(proxy, self.scheme, e));
        }
        let resolved = resolved?;
        if self.egress.is_open() {
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
    use super::super::address_book::tests::book;
    use super::*;

    /// A resolver over a book of its own that answers every host with
    /// `addresses`.
    fn resolver(addresses: &[&str], egress: Egress) -> CachingResolver {
        let (book, _) = book(addresses);
        CachingResolver {
            book,
            egress,
            scheme: Scheme::Http,
        }
    }

    /// The refusal `r` answers for `uri`'s host, as text.
    fn refusal(r: &CachingResolver, uri: &Uri) -> String {
        let e = (r.resolve(uri, &Config::default(), NextTimeout::default())).unwrap_err();
        PrivateAddress::of(&e).expect("a refusal").to_string()
    }

    fn ips(r: Result<ResolvedSocketAddrs, ureq::Error>) -> Vec<String> {
        r.unwrap().iter().map(|a| a.to_string()).collect()
    }

    /// Every client of the process shares one book (a sink a reload builds
    /// anew finds the addresses its predecessor looked up, a DNS outage
    /// or not), each passing on what its own egress allows.
    #[test]
    fn one_book_serves_every_client_each_through_its_own_egress() {
        let a = CachingResolver::new(Egress::open(), Scheme::Http);
        let b = CachingResolver::new(Egress::public_and(Vec::new()), Scheme::Http);
        assert!(Arc::ptr_eq(&a.book, &b.book));
        let (book, system) = book(&["10.0.0.7:80", "93.184.215.14:80"]);
        let open = CachingResolver {
            book: book.clone(),
            egress: Egress::open(),
            scheme: Scheme::Http,
        };
        let public_only = CachingResolver {
            book,
            egress: Egress::public_and(Vec::new()),
            scheme: Scheme::Http,
        };
        let config = Config::default();
        let uri: Uri = "http://mixed.example.com/".parse().unwrap();
        let resolved = open.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["10.0.0.7:80", "93.184.215.14:80"]);
        let resolved = public_only.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["93.184.215.14:80"]);
        let resolved = open.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["10.0.0.7:80", "93.184.215.14:80"]);
        assert_eq!(system.lookups(), 1);
    }

    #[test]
    fn public_only_keeps_the_public_addresses_and_refuses_a_host_with_none() {
        let config = Config::default();
        let uri: Uri = "http://mixed.example.com/".parse().unwrap();
        let public_only = || Egress::public_and(Vec::new());
        let mixed = ["10.0.0.7:80", "93.184.215.14:80", "[::1]:80"];
        let r = resolver(&mixed, public_only());
        let resolved = r.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["93.184.215.14:80"]);
        let r = resolver(&["169.254.169.254:80", "[fd00::1]:80"], public_only());
        assert_eq!(
            refusal(&r, &uri),
            "mixed.example.com resolves only to private addresses \
             (169.254.169.254, fd00::1), which egress.deny_private_addresses refuses"
        );
        let r = resolver(&["10.0.0.7:80"], Egress::open());
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
        let r = resolver(&mixed, egress.clone());
        let resolved = r.resolve(&uri, &config, NextTimeout::default());
        assert_eq!(ips(resolved), ["10.20.3.4:80", "93.184.215.14:80"]);
        let r = resolver(&["10.21.0.1:80"], egress);
        assert_eq!(
            refusal(&r, &uri),
            "internal.example.com resolves only to private addresses (10.21.0.1), \
             which egress.deny_private_addresses refuses \
             (none is in egress.allow_private_networks)"
        );
    }
}
