//! An admin API without a token, kept from browsers.
//!
//! Without `admin_token_env` (a developer's machine, where `goad serve`
//! listens on loopback) the admin API is open to every local process, and
//! so, but for these checks, to every web page the machine's browser
//! opens: a page may send a simple cross-site `POST` (no preflight asked)
//! to `http://127.0.0.1:7878/v1/drain` or `/v1/sources/x/dead-letter`, or
//! rebind its own DNS name to 127.0.0.1 and read `/v1/dead-letters/{id}`
//! (hook bodies) as its own origin. goad serves no pages, so no browser
//! is a client of its admin API: a request carrying `Origin` is refused,
//! and on a node listening on loopback so is one whose `Host` is a DNS
//! name other than `localhost` (a rebound name: curl, the goad CLI and
//! scripts reach a loopback node as `127.0.0.1`, `[::1]` or `localhost`).
//! With an admin token neither check is needed: a page cannot send it.

use super::http::{FrontCounts, Request, Response};

/// Why a request to an open admin API is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused<'r> {
    /// A browser sent it: it carries this `Origin`.
    BrowserRequest { origin: &'r str },
    /// It is addressed to this `Host`, a DNS name (one a page may have
    /// rebound to 127.0.0.1).
    ReboundHost { host: &'r str },
}

/// Why a request to an open admin API is refused, if it is.
pub fn refusal(request: &Request, listens_on_loopback: bool) -> Option<Refused<'_>> {
    if let Some(origin) = request.header("origin") {
        return Some(Refused::BrowserRequest { origin });
    }
    let host = request.header("host")?;
    if !listens_on_loopback || names_loopback(host) {
        return None;
    }
    Some(Refused::ReboundHost { host })
}

impl Refused<'_> {
    /// Counts the refusal in `front` and answers it: 403, saying why.
    pub fn answer(&self, front: &FrontCounts) -> Response {
        match self {
            Refused::BrowserRequest { origin } => {
                FrontCounts::add(&front.browser_requests_refused);
                let message = format!(
                    "the admin API has no token (admin_token_env), so it takes no request a browser sends; this one carries Origin: {origin}"
                );
                Response::error(403, "browser_request", &message)
            }
            Refused::ReboundHost { host } => {
                FrontCounts::add(&front.rebound_hosts_refused);
                let message = format!(
                    "the admin API has no token (admin_token_env), so on loopback it answers only requests addressed to 127.0.0.1, [::1] or localhost, not to a DNS name that may have been rebound: Host: {host}"
                );
                Response::error(403, "bad_host", &message)
            }
        }
    }
}

/// Whether a `Host` value names the node by an IP address or as
/// `localhost` (which browsers resolve to loopback themselves).
fn names_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => return bracketed.split(']').next().is_some_and(is_ip),
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    is_ip(&name) || name == "localhost" || name.ends_with(".localhost")
}

fn is_ip(name: &str) -> bool {
    name.parse::<std::net::IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_names_loopback_by_an_address_or_as_localhost() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:7878",
            "[::1]:7878",
            "[::1]",
            "localhost",
            "LOCALHOST:80",
            "localhost.",
            "goad.localhost:7878",
        ] {
            assert!(names_loopback(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:7878",
            "localhost.evil.example",
            "[evil]:1",
            "",
        ] {
            assert!(!names_loopback(host), "{host}");
        }
    }
}
