//! `egress.deny_private_addresses`: HTTP sinks that never connect to an
//! address inside the node's own networks, so a receiver URL (perhaps a
//! customer's) cannot reach the cloud's metadata service, the node's
//! admin API or another internal service — but for the networks
//! `egress.allow_private_networks` names (an internal receiver of the
//! operator's own). The check is on the addresses a host name resolves to
//! when the connection is made, so a name that resolves to a public
//! address at configuration and a private one later (DNS rebinding) is
//! refused too (by [`super::resolver`]). Through a proxy, the proxy
//! resolves and connects: its own policy governs, and its own address may
//! be private.

use crate::config::{ConfigError, EgressConfig};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Where an HTTP client may connect: anywhere, or (denying private
/// addresses) to public addresses and the allowed private networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Egress {
    deny_private: bool,
    allowed: Vec<Network>,
}

impl Egress {
    /// Every address allowed.
    pub fn open() -> Egress {
        Egress::default()
    }

    /// Public addresses and `allowed`'s networks only.
    pub fn public_and(allowed: Vec<Network>) -> Egress {
        Egress {
            deny_private: true,
            allowed,
        }
    }

    /// The policy of a config's `[egress]`; an error names the entry of
    /// `allow_private_networks` that is not a network.
    pub fn of(config: &EgressConfig) -> Result<Egress, ConfigError> {
        let allowed = (config.allow_private_networks.iter().enumerate())
            .map(|(i, text)| {
                text.parse().map_err(|rule: String| {
                    crate::config::invalid(
                        format!("egress.allow_private_networks[{i}]"),
                        rule,
                        text,
                    )
                })
            })
            .collect::<Result<Vec<Network>, ConfigError>>()?;
        Ok(Egress {
            deny_private: config.deny_private_addresses,
            allowed,
        })
    }

    /// Whether a connection to `ip` is refused.
    pub fn refuses(&self, ip: IpAddr) -> bool {
        self.deny_private && is_private(ip) && !self.allowed.iter().any(|n| n.contains(ip))
    }

    /// Whether every address is allowed.
    pub fn is_open(&self) -> bool {
        !self.deny_private
    }

    /// Whether any private network is allowed.
    pub fn allows_networks(&self) -> bool {
        !self.allowed.is_empty()
    }
}

/// A network as `address/prefix length` (CIDR notation; an address alone
/// is the network of just that address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    base: IpAddr,
    prefix_len: u8,
}

impl Network {
    /// Whether `ip` is in this network (an IPv4 address mapped into IPv6 is
    /// its IPv4 self, as for `is_private`).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.base.is_ipv4() && masked(ip, self.prefix_len) == self.base
    }
}

/// `ip` with every bit past the first `prefix_len` cleared.
fn masked(ip: IpAddr, prefix_len: u8) -> IpAddr {
    let keep = |width: u8| match prefix_len {
        0 => 0,
        n => u128::MAX << (width - n),
    };
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from_bits(v4.to_bits() & keep(32) as u32)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & keep(128))),
    }
}

/// Parses `10.20.0.0/16`, `fd00:1::/48` or an address alone; the error is
/// the rule broken, for a [`ConfigError`].
impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Network, String> {
        const FORM: &str = "a network as address/prefix length (10.20.0.0/16, fd00:1::/48)";
        let (address, digits) = text.split_once('/').unwrap_or((text, ""));
        let base: IpAddr = address.parse().map_err(|_| FORM.to_string())?;
        let width = if base.is_ipv4() { 32 } else { 128 };
        let prefix_len = match digits {
            "" if !text.contains('/') => width,
            _ => (digits.parse::<u8>().ok())
                .filter(|&n| n <= width && digits.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| FORM.to_string())?,
        };
        let network = masked(base, prefix_len);
        if network != base {
            return Err(format!(
                "a network whose address has no bits set past its prefix length \
                 ({network}/{prefix_len})"
            ));
        }
        Ok(Network { base, prefix_len })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix_len)
    }
}

/// Whether `ip` is an address a public receiver does not have: loopback,
/// unspecified, private (RFC 1918), shared (carrier-grade NAT), link-local
/// (where cloud metadata services answer), unique-local, multicast,
/// broadcast, documentation or reserved; an IPv4 address mapped into IPv6
/// as its IPv4 self.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_private_v4(v4),
            None => is_private_v6(v6),
        },
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
        || (first == 0x0064 && ip.segments()[1] == 0xff9b) // NAT64 of an IPv4 address
}

/// An attempt refused because its receiver's host resolved only to
/// private addresses.
#[derive(Debug)]
pub struct PrivateAddress {
    pub host: String,
    pub addresses: Vec<IpAddr>,
    /// Whether `egress.allow_private_networks` names any network (none
    /// holds these addresses).
    pub networks_allowed: bool,
}

impl std::fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addresses: Vec<String> = self.addresses.iter().map(IpAddr::to_string).collect();
        write!(
            f,
            "{} resolves only to private addresses ({}), which egress.deny_private_addresses refuses",
            self.host,
            addresses.join(", ")
        )?;
        match self.networks_allowed {
            true => write!(f, " (none is in egress.allow_private_networks)"),
            false => Ok(()),
        }
    }
}

impl std::error::Error for PrivateAddress {}

impl PrivateAddress {
    /// The refusal inside a ureq error, if that is what `e` is.
    pub fn of(e: &ureq::Error) -> Option<&PrivateAddress> {
        match e {
            ureq::Error::Io(io) => io.get_ref()?.downcast_ref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_told_from_public_ones() {
        let private = [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.7",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2001:db8::1",
        ];
        let public = [
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ];
        for ip in private {
            assert!(is_private(ip.parse().unwrap()), "{ip} is private");
        }
        for ip in public {
            assert!(!is_private(ip.parse().unwrap()), "{ip} is public");
        }
    }

    fn network(text: &str) -> Network {
        text.parse().unwrap()
    }

    #[test]
    fn a_network_holds_the_addresses_under_its_prefix() {
        let cases = [
            ("10.20.0.0/16", "10.20.0.0", true),
            ("10.20.0.0/16", "10.20.255.255", true),
            ("10.20.0.0/16", "10.21.0.0", false),
            ("10.20.0.0/16", "10.19.255.255", false),
            ("10.20.0.0/16", "::ffff:10.20.1.2", true),
            ("10.20.0.0/16", "fd00::1", false),
            ("172.16.0.0/12", "172.31.1.1", true),
            ("172.16.0.0/12", "172.32.0.1", false),
            ("192.168.1.7", "192.168.1.7", true),
            ("192.168.1.7", "192.168.1.8", false),
            ("192.168.1.7/32", "192.168.1.7", true),
            ("0.0.0.0/0", "127.0.0.1", true),
            ("0.0.0.0/0", "::1", false),
            ("fd00:1::/48", "fd00:1:0:ffff::9", true),
            ("fd00:1::/48", "fd00:2::1", false),
            ("fd00:1::/48", "10.0.0.1", false),
            ("::1", "::1", true),
            ("::/0", "fe80::1", true),
        ];
        for (net, ip, held) in cases {
            let holds = network(net).contains(ip.parse().unwrap());
            assert_eq!(holds, held, "{net} holds {ip}");
        }
        assert_eq!(network("10.20.0.0/16").to_string(), "10.20.0.0/16");
        assert_eq!(network("fd00:1::").to_string(), "fd00:1::/128");
    }

    #[test]
    fn a_network_that_does_not_parse_says_what_was_meant() {
        let form = "a network as address/prefix length (10.20.0.0/16, fd00:1::/48)";
        for bad in [
            "",
            "10.20.0.0/",
            "10.20.0.0/33",
            "10.20.0.0/+8",
            "10.20.0.0/16/8",
            "fd00::/129",
            "internal.example.com",
            "10.20/16",
        ] {
            assert_eq!(bad.parse::<Network>(), Err(form.to_string()), "{bad:?}");
        }
        let masked = |m: &str| {
            format!("a network whose address has no bits set past its prefix length ({m})")
        };
        assert_eq!(
            "10.20.1.0/16".parse::<Network>(),
            Err(masked("10.20.0.0/16"))
        );
        assert_eq!(
            "fd00:1::1/48".parse::<Network>(),
            Err(masked("fd00:1::/48"))
        );
    }

    /// Denying private addresses refuses them but for the allowed
    /// networks; public addresses always pass; an open egress refuses none.
    #[test]
    fn egress_refuses_private_addresses_outside_the_allowed_networks() {
        let egress = Egress::public_and(vec![network("10.20.0.0/16"), network("::1")]);
        let refused = |ip: &str| egress.refuses(ip.parse().unwrap());
        assert!(!refused("10.20.9.9") && !refused("::1") && !refused("8.8.8.8"));
        assert!(refused("10.21.0.1") && refused("127.0.0.1") && refused("169.254.169.254"));
        assert!(!Egress::open().refuses("127.0.0.1".parse().unwrap()));
        let config = EgressConfig {
            deny_private_addresses: true,
            allow_private_networks: vec!["10.20.0.0/16".into(), "::1".into()],
        };
        assert_eq!(Egress::of(&config).unwrap(), egress);
    }
}
