//! The checks of how a source takes hooks (node only): a provider's
//! signature (`ingest_signature` with `ingest_secret_env`), the endpoint
//! checks it answers (`ingest_handshake`) and an issuer's tokens
//! (`ingest_jwt`).

use super::validate::{env_name_list, invalid, unknown_name, url_fits};
use super::{ConfigError, IngestJwt, IngestSignature, SourceConfig};

/// A source's `ingest_handshake`: a known one.
pub(super) fn validate_ingest_handshake(
    at: &str,
    source: &SourceConfig,
) -> Result<(), ConfigError> {
    use crate::node::provider_handshake::{Handshake, HANDSHAKES};
    match &source.ingest_handshake {
        Some(name) if Handshake::named(name).is_none() => {
            let names: Vec<&str> = HANDSHAKES.iter().map(|(name, _)| *name).collect();
            Err(unknown_name(
                format!("{at}.ingest_handshake"),
                format!("one of {names:?}"),
                name,
                &names,
            ))
        }
        _ => Ok(()),
    }
}

/// A source's `ingest_jwt`: keys fetched over HTTPS (or from the node's
/// own host), an issuer and an audience to check, claims of plain values,
/// and no `ingest_token_env`, which reads the same header.
pub(super) fn validate_ingest_jwt(
    at: &str,
    source: &SourceConfig,
    jwt: &IngestJwt,
) -> Result<(), ConfigError> {
    let key = format!("{at}.ingest_jwt");
    url_fits(&format!("{key}.jwks_url"), &jwt.jwks_url)?;
    if !is_key_set_url(&jwt.jwks_url) {
        let rule = "an https:// URL (or http:// to a loopback address) of the issuer's keys";
        return Err(invalid(format!("{key}.jwks_url"), rule, &jwt.jwks_url));
    }
    let issuers = jwt.issuer.to_vec();
    if issuers.is_empty() || issuers.iter().any(String::is_empty) {
        let rule = "the issuer's name (the tokens' iss), or a list of them";
        return Err(invalid(format!("{key}.issuer"), rule, issuers));
    }
    if jwt.audience.is_empty() {
        let rule = "the audience the sender puts in its tokens' aud (often this endpoint's URL)";
        return Err(invalid(format!("{key}.audience"), rule, &jwt.audience));
    }
    for (name, value) in &jwt.claims {
        if !(value.is_string() || value.is_boolean() || value.is_i64() || value.is_u64()) {
            let rule = "a string, a boolean or an integer the claim must equal";
            return Err(invalid(
                format!("{key}.claims.{name}"),
                rule,
                format_args!("{value}"),
            ));
        }
    }
    if let Some(var) = &source.ingest_token_env {
        let rule = "not set with ingest_jwt (both read the Authorization header)";
        return Err(invalid(
            format!("{at}.ingest_token_env"),
            rule,
            format_args!("{var}"),
        ));
    }
    Ok(())
}

/// Whether `url` is `https://…`, or `http://` to a loopback host (a key
/// set fetched in the clear could be anyone's).
fn is_key_set_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => !host.is_empty(),
        Some("http") => loopback,
        _ => false,
    }
}

/// A source's `ingest_signature` and `ingest_secret_env`: a known scheme
/// or a table of known values, and the two together.
pub(super) fn validate_ingest_signature(
    at: &str,
    source: &SourceConfig,
) -> Result<(), ConfigError> {
    use crate::node::provider_signature::{ALGORITHMS, ENCODINGS, SCHEMES};
    let key = format!("{at}.ingest_signature");
    match &source.ingest_signature {
        Some(IngestSignature::Scheme(name)) if !SCHEMES.contains(&name.as_str()) => {
            let rule =
                format!("one of {SCHEMES:?} or a table {{ header, prefix, encoding, algorithm }}");
            return Err(unknown_name(key, rule, name, SCHEMES));
        }
        Some(IngestSignature::Hmac(table)) => {
            let header = &table.header;
            if ureq::http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(invalid(format!("{key}.header"), "a header name", header));
            }
            let options = [
                ("encoding", &table.encoding, ENCODINGS),
                ("algorithm", &table.algorithm, ALGORITHMS),
            ];
            for (name, value, allowed) in options {
                if let Some(value) = value.as_deref().filter(|v| !allowed.contains(v)) {
                    return Err(unknown_name(
                        format!("{key}.{name}"),
                        format!("one of {allowed:?}"),
                        value,
                        allowed,
                    ));
                }
            }
        }
        _ => {}
    }
    match (&source.ingest_signature, &source.ingest_secret_env) {
        (Some(scheme), None) => {
            let rule = "set with ingest_secret_env (the provider's signing secret)";
            Err(invalid(key, rule, scheme.to_string()))
        }
        (None, Some(_)) => {
            let rule = "set with ingest_secret_env (how the provider signs)";
            Err(invalid(key, rule, "absent"))
        }
        (Some(_), Some(vars)) => env_name_list(format!("{at}.ingest_secret_env"), vars),
        (None, None) => Ok(()),
    }
}
