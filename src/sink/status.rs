//! What an HTTP status means for a delivery: 2xx is ok; 400, 401, 403, 404,
//! 410, 413 and 422 are permanent; 408, 429 and 5xx honour a future
//! `Retry-After` (delay-seconds or an HTTP-date); anything else, including
//! 3xx (redirects are not followed), is a transient failure.

use super::SinkError;
use std::fmt;
use std::time::{Duration, SystemTime};

/// An HTTP answer that was not a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadStatus(pub u16);

impl fmt::Display for BadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP status {}", self.0)
    }
}

impl std::error::Error for BadStatus {}

const PERMANENT: &[u16] = &[400, 401, 403, 404, 410, 413, 422];

/// Maps a status and its `Retry-After` header (if any) to the attempt's result.
pub fn classify(status: u16, retry_after: Option<&str>, now: SystemTime) -> Result<(), SinkError> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    if PERMANENT.contains(&status) {
        return Err(SinkError::permanent(BadStatus(status)));
    }
    let honours_retry_after = status == 408 || status == 429 || (500..600).contains(&status);
    match retry_after
        .filter(|_| honours_retry_after)
        .and_then(|v| retry_after_ms(v, now))
    {
        Some(after_ms) => Err(SinkError::retry_after(after_ms, BadStatus(status))),
        None => Err(SinkError::transient(BadStatus(status))),
    }
}

/// A `Retry-After` value as milliseconds from `now`, if it is in the future.
pub fn retry_after_ms(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
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

    fn class(status: u16, retry_after: Option<&str>) -> Option<FailureClass> {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_700);
        classify(status, retry_after, now)
            .err()
            .map(|e| e.into_failure().class)
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
        assert_eq!(class(302, Some("10")), Some(FailureClass::Transient));
    }
}
