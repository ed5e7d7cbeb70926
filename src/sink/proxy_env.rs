//! The egress proxy the environment names, as goad's clients take it.
//!
//! A request goes through the proxy named for its URL's scheme, as curl
//! reads the variables: `HTTPS_PROXY` for an https:// URL, `HTTP_PROXY`
//! for an http:// one, `ALL_PROXY` for either when its own is not set
//! (each variable in capitals, then in lower case, as ureq and Go read
//! them). ureq itself takes the first of `ALL_PROXY`, `HTTPS_PROXY` and
//! `HTTP_PROXY` for every URL: with only `HTTPS_PROXY` set, it would send
//! a request to an instance's metadata service (`http://169.254.169.254`)
//! to the proxy, which curl and Go send directly. ureq also passes over
//! a variable that does not parse as a proxy's URL, for the next one or
//! none: a mistyped variable would send every request around the proxy
//! its operator named. goad refuses such a variable instead
//! ([`check_proxy_variables`]).
//!
//! ureq reads `NO_PROXY` its own way: a name as that name alone
//! (`example.com` not matching `www.example.com`), spaces kept, no
//! address ranges. Operators write it as curl and Go read it (Kubernetes
//! clusters set `NO_PROXY=.svc,.cluster.local,10.0.0.0/8` for every
//! program alike), so goad gives ureq the proxy with `NO_PROXY` read that
//! way ([`environment_proxy`]): a name matches itself and its subdomains,
//! a leading `.` or `*.` only its subdomains, an entry's port and the
//! spaces around it are passed over, an IPv4 range (`10.0.0.0/8`) matches
//! the addresses written in its range, `*` every host. As in Go, this
//! machine's own names (`localhost`, loopback addresses) are never
//! proxied: a proxy would reach its own. Like both, an entry matches the
//! host as the URL writes it, not the addresses a name resolves to.

use crate::config::{invalid, ConfigError};
use std::env::VarError;
use std::net::{IpAddr, Ipv4Addr};

/// A URL's scheme, as far as its proxy goes: http://, or https:// (any
/// other; goad's clients reach no other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// The scheme of `url`.
    pub(crate) fn of(url: &str) -> Scheme {
        match url.get(..5) {
            Some(start) if start.eq_ignore_ascii_case("http:") => Scheme::Http,
            _ => Scheme::Https,
        }
    }

    /// The variable that names this scheme's proxy: the first of its
    /// variables, in the order read, that is set and not empty (an empty
    /// one names none).
    fn naming_variable(self) -> Option<&'static str> {
        let variables = match self {
            Scheme::Http => ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"],
            Scheme::Https => ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"],
        };
        let is_set = |var: &&str| std::env::var_os(var).is_some_and(|value| !value.is_empty());
        variables.into_iter().find(is_set)
    }
}

/// Hosts never proxied, in ureq's `NO_PROXY` syntax (`127.` a prefix).
const THIS_MACHINE: [&str; 3] = ["localhost", "127.", "[::1]"];

/// What a proxy variable must hold.
const RULE: &str = "a proxy's URL, as http://HOST:PORT or socks5h://HOST:PORT (or https, \
                    socks5, socks4a, socks4; user:password@ before the host for credentials)";

/// Refuses a proxy variable that ureq would pass over: set, not empty (an
/// empty one names no proxy), and not a proxy's URL or not UTF-8, before
/// the one that names the proxy in use for either scheme (if any). A
/// refused value that may hold a password (it has an `@`) is not shown.
pub(crate) fn check_proxy_variables() -> Result<(), ConfigError> {
    named_proxy(Scheme::Http)?;
    named_proxy(Scheme::Https).map(drop)
}

/// The environment's proxy for URLs of `scheme`, with `NO_PROXY` read as
/// the module docs say; none if no variable names one, and an error for
/// a variable [`check_proxy_variables`] refuses.
pub(crate) fn environment_proxy(scheme: Scheme) -> Result<Option<ureq::Proxy>, ConfigError> {
    let Some(named) = named_proxy(scheme)? else {
        return Ok(None);
    };
    let mut proxy = ureq::Proxy::builder(named.protocol())
        .host(named.host())
        .port(named.port())
        .resolve_target(named.resolve_target());
    if let Some(user) = named.username() {
        proxy = proxy.username(user);
    }
    if let Some(password) = named.password() {
        proxy = proxy.password(password);
    }
    let no_proxy = ["NO_PROXY", "no_proxy"]
        .iter()
        .find_map(|var| std::env::var(var).ok())
        .unwrap_or_default();
    let direct = THIS_MACHINE.map(String::from).into_iter();
    for entry in direct.chain(ureq_no_proxy(&no_proxy)) {
        proxy = proxy.no_proxy(&entry);
    }
    // Rebuilt from what parsed, it parses; were it not to, every request
    // would still go through the proxy, none around it.
    Ok(Some(proxy.build().unwrap_or(named)))
}

/// The proxy the first of `scheme`'s proxy variables that is set names,
/// or the refusal of one that names none.
fn named_proxy(scheme: Scheme) -> Result<Option<ureq::Proxy>, ConfigError> {
    let Some(var) = scheme.naming_variable() else {
        return Ok(None);
    };
    let value = match std::env::var(var) {
        Ok(value) => value,
        Err(VarError::NotUnicode(_)) => {
            return Err(refused(var, "a proxy's URL in UTF-8", "bytes that are not"))
        }
        Err(VarError::NotPresent) => return Ok(None),
    };
    match ureq::Proxy::new(&value) {
        Ok(proxy) => Ok(Some(proxy)),
        Err(_) if value.contains('@') => Err(refused(
            var,
            RULE,
            "a value not shown here (it may hold a password)",
        )),
        Err(_) => Err(invalid(format!("the environment's {var}"), RULE, value)),
    }
}

/// A connection through the environment's proxy that the proxy did not
/// make: its host does not resolve, or it refuses the connection, or no
/// route leads to it, or no connection came in time. Said as such, where
/// the system's words (`Connection refused`, `timeout: connect`) would
/// read as the receiver's.
#[derive(Debug)]
pub(crate) struct ProxyUnreached {
    /// The proxy's `host:port`.
    proxy: String,
    /// The variable that names it.
    variable: Option<&'static str>,
    /// What failed, in the system's words.
    cause: ureq::Error,
}

impl ProxyUnreached {
    /// `cause`, a failure of a connection through `proxy`, the
    /// environment's proxy for URLs of `scheme`, as a ureq error.
    pub(crate) fn error(proxy: &ureq::Proxy, scheme: Scheme, cause: ureq::Error) -> ureq::Error {
        let unreached = ProxyUnreached {
            proxy: format!("{}:{}", proxy.host(), proxy.port()),
            variable: scheme.naming_variable(),
            cause,
        };
        ureq::Error::Io(std::io::Error::other(unreached))
    }

    /// Whether `e`, a proxied connection's failure, is the proxy's: no
    /// connection made (refused, no route), or none in time.
    pub(crate) fn is_proxys(e: &ureq::Error) -> bool {
        use std::io::ErrorKind::*;
        let unreached = [ConnectionRefused, HostUnreachable, NetworkUnreachable];
        match e {
            ureq::Error::Io(io) => unreached.contains(&io.kind()),
            ureq::Error::Timeout(ureq::Timeout::Connect) => true,
            _ => false,
        }
    }

    /// The failure `e` is, if it is one.
    pub(crate) fn of(e: &ureq::Error) -> Option<&ProxyUnreached> {
        match e {
            ureq::Error::Io(io) => io.get_ref()?.downcast_ref(),
            _ => None,
        }
    }
}

impl std::fmt::Display for ProxyUnreached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the egress proxy {}", self.proxy)?;
        if let Some(variable) = self.variable {
            write!(f, " ({variable})")?;
        }
        match &self.cause {
            ureq::Error::Timeout(_) => write!(
                f,
                " made no connection in time ({}): it does not answer, or cannot reach the receiver",
                self.cause
            ),
            ureq::Error::Io(e) => write!(f, " could not be reached: {e}"),
            e => write!(f, " could not be reached: {e}"),
        }
    }
}

impl std::error::Error for ProxyUnreached {}

/// The refusal of `var`, its value described rather than shown.
fn refused(var: &str, rule: &str, described: &str) -> ConfigError {
    ConfigError::Invalid {
        key: format!("the environment's {var}"),
        rule: rule.into(),
        value: described.into(),
    }
}

/// A `NO_PROXY` value as curl and Go read it, in ureq's syntax: exact
/// hosts, `.suffix`es and `prefix.`es (see the module docs). An IPv6
/// range, which no prefix of the written address can stand for, is
/// passed over.
fn ureq_no_proxy(value: &str) -> Vec<String> {
    let mut entries = Vec::new();
    for entry in value.split(',').map(|e| e.trim().to_ascii_lowercase()) {
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            entries.push(entry);
        } else if let Some((address, bits)) = entry.split_once('/') {
            let range = address.parse::<Ipv4Addr>().ok().zip(bits.parse().ok());
            if let Some((address, bits)) = range.filter(|&(_, bits)| bits <= 32) {
                entries.extend(ipv4_prefixes(address, bits));
            }
        } else if let Some(subdomains) = entry.strip_prefix("*.").or(entry.strip_prefix('.')) {
            entries.push(format!(".{subdomains}"));
        } else {
            let host = without_port(&entry);
            match host.trim_start_matches('[').trim_end_matches(']').parse() {
                Ok(ip) => entries.push(written_address(ip)),
                Err(_) => entries.extend([format!(".{host}"), host.to_string()]),
            }
        }
    }
    entries
}

/// An address as a URL's host writes it (IPv6 in brackets).
fn written_address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

/// `host:port`'s host (`[v6]:port`'s `[v6]`); anything else as it is.
fn without_port(entry: &str) -> &str {
    match entry.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.contains(':') => host,
        Some((host, port)) if port.parse::<u16>().is_ok() && host.ends_with(']') => host,
        _ => entry,
    }
}

/// The written addresses of `address/bits` as host prefixes (`10.` for
/// `10.0.0.0/8`; `172.16.` to `172.31.` for `172.16.0.0/12`), or the one
/// address for a `/32`.
fn ipv4_prefixes(address: Ipv4Addr, bits: u8) -> Vec<String> {
    if bits == 0 {
        return vec!["*".to_string()];
    }
    let octets = address.octets();
    // The octets the range fixes, the last of them perhaps in part.
    let whole = usize::from(bits.div_ceil(8));
    let free_bits = whole as u8 * 8 - bits;
    let base = octets[whole - 1] & (0xff << free_bits);
    (0..1u16 << free_bits)
        .map(|low| {
            let mut fixed: Vec<String> = octets[..whole - 1].iter().map(u8::to_string).collect();
            fixed.push((base | low as u8).to_string());
            let joined = fixed.join(".");
            if whole == 4 {
                joined
            } else {
                joined + "."
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_is_read_as_curl_and_go_read_it() {
        let read = |value: &str| ureq_no_proxy(value);
        assert_eq!(read("Example.com"), [".example.com", "example.com"]);
        assert_eq!(
            read(" a.test , b.test:8080,,"),
            [".a.test", "a.test", ".b.test", "b.test"]
        );
        assert_eq!(read(".svc,*.cluster.local"), [".svc", ".cluster.local"]);
        assert_eq!(read("*"), ["*"]);
        assert_eq!(
            read("169.254.169.254,::1,[fd00::1]:443"),
            ["169.254.169.254", "[::1]", "[fd00::1]"]
        );
        assert_eq!(read("10.0.0.0/8,192.168.1.7/32"), ["10.", "192.168.1.7"]);
        assert_eq!(read("0.0.0.0/0"), ["*"]);
        assert_eq!(read("fd00::/8,10.0.0.0/33,x/8"), Vec::<String>::new());
    }

    #[test]
    fn a_urls_scheme_is_read_in_either_case() {
        assert_eq!(Scheme::of("http://169.254.169.254/latest"), Scheme::Http);
        assert_eq!(Scheme::of("HTTP://a.example"), Scheme::Http);
        assert_eq!(Scheme::of("https://a.example"), Scheme::Https);
        assert_eq!(Scheme::of("Https://a.example"), Scheme::Https);
    }

    #[test]
    fn an_ipv4_range_is_the_prefixes_of_its_written_addresses() {
        let prefixes = ipv4_prefixes(Ipv4Addr::new(172, 16, 0, 0), 12);
        let expected: Vec<String> = (16..=31).map(|o| format!("172.{o}.")).collect();
        assert_eq!(prefixes, expected);
        assert_eq!(ipv4_prefixes(Ipv4Addr::new(10, 96, 7, 9), 24), ["10.96.7."]);
        assert_eq!(
            ipv4_prefixes(Ipv4Addr::new(10, 1, 2, 3), 31),
            ["10.1.2.2", "10.1.2.3"]
        );
        assert_eq!(ipv4_prefixes(Ipv4Addr::new(128, 0, 0, 0), 1).len(), 128);
    }
}
