//! What an HTTP status means for a delivery: 2xx is ok; 400, 401, 403, 404,
//! 410, 413 and 422 are permanent; 408, 429 and 5xx honour a future
//! `Retry-After` (delay-seconds or an HTTP-date); anything else, including
//! 3xx (redirects are not followed), is a transient failure. A failure
//! quotes the start of the answer's body, where receivers say why, and a
//! redirect where it points (a receiver that moved, or that sends plain
//! HTTP to HTTPS, is then mended by setting the sink's `url` to it).

use super::client::shown_url;
use super::SinkError;
use std::fmt;
use std::time::{Duration, SystemTime};
use ureq::http::header::{LOCATION, RETRY_AFTER};
use ureq::http::{HeaderMap, Uri};

/// An HTTP answer that was not a success: its status, where it redirects
/// (a 3xx's `Location`, shown without its query) and an [`excerpt`] of
/// its body (empty for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadStatus {
    pub status: u16,
    pub redirect_to: Option<String>,
    pub answer: String,
}

impl fmt::Display for BadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP status {}", self.status)?;
        if let Some(to) = &self.redirect_to {
            write!(f, " redirecting to {to} (redirects are not followed: set the sink's url to where it should deliver)")?;
        }
        detail(f, &self.answer)
    }
}

/// Writes `: <text>`, or nothing for an empty `text`: an error's detail,
/// where the answer gave one.
pub(super) fn detail(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    match text.is_empty() {
        true => Ok(()),
        false => write!(f, ": {text}"),
    }
}

/// How much of an answer's body an error quotes.
pub(super) const EXCERPT_BYTES: usize = 256;

/// The start of a sink's answer, as text, for an error message: its first
/// [`EXCERPT_BYTES`], each run of whitespace and control characters one
/// space (an HTML error page, a pretty-printed JSON error), and "…" where
/// it was cut.
pub(super) fn excerpt(reply: &[u8]) -> String {
    let cut = reply.len().min(EXCERPT_BYTES);
    let text = String::from_utf8_lossy(&reply[..cut]);
    let words = text.split(|c: char| c.is_whitespace() || c.is_control());
    let mut out = words
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if reply.len() > cut {
        out.push('…');
    }
    out
}

impl std::error::Error for BadStatus {}

const PERMANENT: &[u16] = &[400, 401, 403, 404, 410, 413, 422];

/// Maps a status, its headers (`Retry-After`, a redirect's `Location`)
/// and its body to the attempt's result.
pub fn classify(
    status: u16,
    headers: &HeaderMap,
    answer: &[u8],
    now: SystemTime,
) -> Result<(), SinkError> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let bad = BadStatus {
        status,
        redirect_to: header(LOCATION)
            .filter(|_| (300..400).contains(&status))
            .map(shown_location),
        answer: excerpt(answer),
    };
    if PERMANENT.contains(&status) {
        return Err(SinkError::permanent(bad));
    }
    let honours_retry_after = status == 408 || status == 429 || (500..600).contains(&status);
    match header(RETRY_AFTER)
        .filter(|_| honours_retry_after)
        .and_then(|v| retry_after_ms(v, now))
    {
        Some(after_ms) => Err(SinkError::retry_after(after_ms, bad)),
        None => Err(SinkError::transient(bad)),
    }
}

/// A redirect's `Location` as an error shows it: an absolute URL without
/// its user information and query (see `shown_url`), a relative one's
/// path, either cut at [`EXCERPT_BYTES`].
fn shown_location(location: &str) -> String {
    let shown = match location.parse::<Uri>() {
        Ok(uri) if uri.host().is_some() => shown_url(location),
        Ok(uri) => uri.path().to_string(),
        Err(_) => "(not a URL)".to_string(),
    };
    excerpt(shown.as_bytes())
}

/// A `Retry-After` value as milliseconds from `now`, if it is in the future.
/// Delay-seconds too large for a `u64` saturate (the core caps every wait).
pub fn retry_after_ms(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return (seconds > 0).then(|| seconds.saturating_mul(1000));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    at.duration_since(now)
        .ok()
        .filter(|d| *d > Duration::ZERO)
        .map(|d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::FailureClass;

    /// Headers of these names and values.
    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        (pairs.iter())
            .map(|(name, value)| (*name, value.parse().unwrap()))
            .map(|(name, value)| (ureq::http::HeaderName::from_static(name), value))
            .collect()
    }

    fn class(status: u16, retry_after: Option<&str>) -> Option<FailureClass> {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_700);
        let retry_after: Vec<_> = retry_after
            .map(|v| ("retry-after", v))
            .into_iter()
            .collect();
        classify(status, &headers(&retry_after), b"", now)
            .err()
            .map(|e| e.into_failure().class)
    }

    #[test]
    fn an_answers_excerpt_is_one_line_and_says_where_it_was_cut() {
        assert_eq!(excerpt(b""), "");
        assert_eq!(excerpt(b" \r\n\t "), "");
        assert_eq!(excerpt(b"line one\r\n\tline\x00two "), "line one line two");
        assert_eq!(excerpt(b"caf\xc3\xa9 \xff!"), "caf\u{e9} \u{fffd}!");
        let exact = [b'a'; EXCERPT_BYTES];
        assert_eq!(excerpt(&exact), "a".repeat(EXCERPT_BYTES));
        let longer = [b'a'; EXCERPT_BYTES + 1];
        assert_eq!(excerpt(&longer), format!("{}…", "a".repeat(EXCERPT_BYTES)));
        let failed = classify(
            409,
            &HeaderMap::new(),
            b"{\"error\": \"conflict\"}",
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(
            failed.unwrap_err().into_failure().message,
            "HTTP status 409: {\"error\": \"conflict\"}"
        );
    }

    #[test]
    fn success_permanent_and_transient_statuses() {
        for s in [200, 201, 204, 299] {
            assert_eq!(class(s, None), None, "{s}");
        }
        for s in [400, 401, 403, 404, 410, 413, 422] {
            assert_eq!(class(s, Some("5")), Some(FailureClass::Permanent), "{s}");
        }
        for s in [302, 307, 405, 409, 418, 408, 429, 500, 503] {
            assert_eq!(class(s, None), Some(FailureClass::Transient), "{s}");
        }
    }

    #[test]
    fn retry_after_in_seconds_or_as_an_http_date() {
        assert_eq!(
            class(503, Some("120")),
            Some(FailureClass::RetryAfter { after_ms: 120_000 })
        );
        assert_eq!(
            class(429, Some("1")),
            Some(FailureClass::RetryAfter { after_ms: 1_000 })
        );
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT: 77 s after "now".
        assert_eq!(
            class(408, Some("Sun, 06 Nov 1994 08:49:37 GMT")),
            Some(FailureClass::RetryAfter { after_ms: 77_000 })
        );
        assert_eq!(class(503, Some("0")), Some(FailureClass::Transient));
        assert_eq!(
            class(503, Some("Sun, 06 Nov 1994 08:00:00 GMT")),
            Some(FailureClass::Transient)
        );
        assert_eq!(class(503, Some("soon")), Some(FailureClass::Transient));
        assert_eq!(class(503, Some("-5")), Some(FailureClass::Transient));
        assert_eq!(
            class(429, Some("99999999999999999999999")),
            Some(FailureClass::RetryAfter { after_ms: u64::MAX })
        );
        assert_eq!(class(302, Some("10")), Some(FailureClass::Transient));
    }

    #[test]
    fn a_redirect_says_where_it_points() {
        let error = |status, pairs: &[(&'static str, &str)]| {
            let failed = classify(
                status,
                &headers(pairs),
                b"<html>Moved</html>",
                SystemTime::UNIX_EPOCH,
            );
            failed.unwrap_err().to_string()
        };
        let told = "(redirects are not followed: set the sink's url to where it should deliver)";
        assert_eq!(
            error(301, &[("location", "https://user:pw@r.example:8443/hooks?key=s3cret")]),
            format!("HTTP status 301 redirecting to https://r.example:8443/hooks {told}: <html>Moved</html>")
        );
        assert_eq!(
            error(308, &[("location", "/v2/hooks?key=s3cret")]),
            format!("HTTP status 308 redirecting to /v2/hooks {told}: <html>Moved</html>")
        );
        let long = format!("/{}", "a".repeat(300));
        assert_eq!(
            error(302, &[("location", &long)]),
            format!(
                "HTTP status 302 redirecting to {}… {told}: <html>Moved</html>",
                &long[..EXCERPT_BYTES]
            )
        );
        // No Location, or one on a status that is no redirect: the status alone.
        assert_eq!(error(302, &[]), "HTTP status 302: <html>Moved</html>");
        assert_eq!(
            error(503, &[("location", "/elsewhere")]),
            "HTTP status 503: <html>Moved</html>"
        );
    }
}
