//! The headers a hook may carry: those an HTTP request can, as many as a
//! request to a node may have, so that every sink can deliver them. A
//! host's hook is checked as it is committed (a node's ingest makes only
//! such hooks, but for a header whose ISO-8859-1 bytes grow past a line
//! once read as text): a header no request could send is refused with the
//! hook, by name, rather than dead-lettering each of its rows at its first
//! attempt. The content type and the dedupe key are sent as headers too,
//! the dedupe key twice: alone, and after the hook's tenant and source as
//! its idempotency key.

use super::{CommitError, NewHook};
use crate::limits::{HTTP_MAX_HEADER_LINE_BYTES, MAX_HEADERS};
use crate::sink::http::{header_line_bytes, header_value, GOAD_DEDUPE_KEY, GOAD_IDEMPOTENCY_KEY};
use crate::store::Hook;
use ureq::http::HeaderName;

/// Checks the headers, content type and dedupe key of a hook of `tenant`.
pub(super) fn check(hook: &NewHook, tenant: &str) -> Result<(), CommitError> {
    if let Some((name, _)) = hook.headers.get(MAX_HEADERS) {
        let why = format!("is one more than the {MAX_HEADERS} headers a hook may carry");
        return Err(bad(name, why));
    }
    for (name, value) in &hook.headers {
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            let why = "is not an HTTP header name (a token of letters, digits and !#$%&'*+-.^_`|~)";
            return Err(bad(name, why.into()));
        }
        fits(name, value)?;
    }
    if let Some(content_type) = &hook.content_type {
        fits("content-type", content_type)?;
    }
    if let Some(key) = &hook.dedupe_key {
        dedupe_key_fits(tenant, &hook.source_id, key)?;
    }
    Ok(())
}

/// Checks that `key` may be the dedupe key of a hook of `tenant` and
/// `source_id`: as its own header, and within its idempotency key's.
pub(crate) fn dedupe_key_fits(tenant: &str, source_id: &str, key: &str) -> Result<(), CommitError> {
    fits(GOAD_DEDUPE_KEY.as_str(), key)?;
    let name = GOAD_IDEMPOTENCY_KEY;
    let idempotency_key = Hook::idempotency_key_of(tenant, source_id, key);
    match too_long(header_line_bytes(name.as_str(), idempotency_key.as_bytes())) {
        Some(why) => Err(bad(
            name.as_str(),
            format!("(the tenant, the source and the dedupe key) {why}"),
        )),
        None => Ok(()),
    }
}

/// `value` is one an HTTP request can carry under `name`, on a line an
/// HTTP sink sends.
fn fits(name: &str, value: &str) -> Result<(), CommitError> {
    if header_value(value).is_err() {
        let why = "has a value with a control character (CR, LF, NUL, …), which HTTP cannot carry";
        return Err(bad(name, why.into()));
    }
    match too_long(header_line_bytes(name, value.as_bytes())) {
        Some(why) => Err(bad(name, why)),
        None => Ok(()),
    }
}

/// Why a header line of `line_bytes` cannot be sent, if it cannot.
fn too_long(line_bytes: usize) -> Option<String> {
    (line_bytes > HTTP_MAX_HEADER_LINE_BYTES).then(|| {
        format!(
            "is a line of {line_bytes} bytes, longer than the {HTTP_MAX_HEADER_LINE_BYTES} an HTTP sink sends"
        )
    })
}

fn bad(name: &str, why: String) -> CommitError {
    CommitError::BadHeader {
        name: name.to_string(),
        why,
    }
}
