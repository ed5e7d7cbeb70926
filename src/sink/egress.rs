//! `egress.deny_private_addresses`: HTTP sinks that never connect to an
//! address inside the node's own networks, so a receiver URL (perhaps a
//! customer's) cannot reach the cloud's metadata service, the node's
//! admin API or another internal service. The check is on the addresses a
//! host name resolves to when the connection is made, so a name that
//! resolves to a public address at configuration and a private one later
//! (DNS rebinding) is refused too (by [`super::resolver`]). Through a
//! proxy, the proxy resolves and connects: its own policy governs, and its
//! own address may be private.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
}

impl std::fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addresses: Vec<String> = self.addresses.iter().map(IpAddr::to_string).collect();
        write!(
            f,
            "{} resolves only to private addresses ({}), which egress.deny_private_addresses refuses",
            self.host,
            addresses.join(", ")
        )
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
}
