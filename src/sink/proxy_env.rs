//! The egress proxy the environment names, checked before goad's clients
//! take it. ureq reads `ALL_PROXY`, `HTTPS_PROXY` and `HTTP_PROXY` (each
//! in capitals, then in lower case) in that order and uses the first that
//! parses as a proxy's URL, passing over any before it that does not: a
//! mistyped variable would send every request around the proxy its
//! operator named (directly, or through a later variable's proxy).

use crate::config::{invalid, ConfigError};
use std::env::VarError;

/// The variables ureq reads for a proxy, in its order.
const PROXY_VARIABLES: [&str; 6] = [
    "ALL_PROXY",
    "all_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
];

/// Refuses a proxy variable that ureq would pass over: set, not empty (an
/// empty one names no proxy), and not a proxy's URL or not UTF-8, before
/// the one that names the proxy in use (if any). A refused value that may
/// hold a password (it has an `@`) is not shown.
pub(crate) fn check_proxy_variables() -> Result<(), ConfigError> {
    for var in PROXY_VARIABLES {
        let value = match std::env::var(var) {
            Ok(value) if value.is_empty() => continue,
            Ok(value) => value,
            Err(VarError::NotPresent) => continue,
            Err(VarError::NotUnicode(_)) => {
                return Err(refused(var, "a proxy's URL in UTF-8", "bytes that are not"))
            }
        };
        match ureq::Proxy::new(&value) {
            Ok(_) => return Ok(()),
            Err(_) if value.contains('@') => {
                return Err(refused(
                    var,
                    RULE,
                    "a value not shown here (it may hold a password)",
                ))
            }
            Err(_) => return Err(invalid(format!("the environment's {var}"), RULE, value)),
        }
    }
    Ok(())
}

/// What a proxy variable must hold.
const RULE: &str = "a proxy's URL, as http://HOST:PORT or socks5h://HOST:PORT (or https, \
                    socks5, socks4a, socks4; user:password@ before the host for credentials)";

/// The refusal of `var`, its value described rather than shown.
fn refused(var: &str, rule: &str, described: &str) -> ConfigError {
    ConfigError::Invalid {
        key: format!("the environment's {var}"),
        rule: rule.into(),
        value: described.into(),
    }
}
