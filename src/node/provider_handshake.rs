//! Providers' checks of a new endpoint, answered at ingest instead of
//! stored as hooks. Slack enables an app's Events API URL only once it
//! answers a signed `url_verification` request with the request's
//! `challenge`: a source whose `ingest_signature` is `slack` answers it
//! (after the signature check, as any hook's) with `200 {"challenge": …}`,
//! and commits nothing. Zoom validates an endpoint (when it is set, and
//! every 72 hours) with a signed `endpoint.url_validation`: a `zoom`
//! source answers `{"plainToken", "encryptedToken"}`, the token's
//! HMAC-SHA256 under the secret. Meta (Facebook, Instagram, WhatsApp) checks a
//! subscription with a `GET` of the URL carrying the token the subscription
//! was made with: a source with `ingest_verify_token_env` answers it.

use super::auth::secret_matches;
use super::http::{Request, Response};
use serde::Deserialize;

/// The body of Slack's check.
#[derive(Deserialize)]
struct UrlVerification {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
}

/// The body of Zoom's check.
#[derive(Deserialize)]
struct UrlValidation {
    event: String,
    payload: UrlValidationPayload,
}

#[derive(Deserialize)]
struct UrlValidationPayload {
    #[serde(rename = "plainToken")]
    plain_token: String,
}

/// The token to answer, when `body` is Zoom's `endpoint.url_validation`.
pub fn zoom_plain_token(body: &[u8]) -> Option<String> {
    if !holds(body, b"endpoint.url_validation") {
        return None;
    }
    let check: UrlValidation = serde_json::from_slice(body).ok()?;
    (check.event == "endpoint.url_validation").then_some(check.payload.plain_token)
}

/// The challenge to answer, when `body` is Slack's `url_verification`.
pub fn slack_challenge(body: &[u8]) -> Option<String> {
    if !holds(body, b"url_verification") {
        return None;
    }
    let check: UrlVerification = serde_json::from_slice(body).ok()?;
    (check.kind == "url_verification").then_some(check.challenge)
}

/// Whether `body` holds `word`: the events that are not checks (all but a
/// few) are not parsed.
fn holds(body: &[u8], word: &[u8]) -> bool {
    body.windows(word.len()).any(|w| w == word)
}

/// The answer to Meta's check of a subscription: `GET
/// …?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…` is answered
/// 200 with the challenge as the body when the token is `verify_token`.
pub fn subscription_answer(request: &Request, verify_token: &str) -> Response {
    let mode = request.query_param("hub.mode").unwrap_or_default();
    if mode != "subscribe" {
        let message = format!("a subscription check has hub.mode=subscribe, got {mode:?}");
        return Response::error(400, "bad_subscription_check", &message);
    }
    let token = request.query_param("hub.verify_token").unwrap_or_default();
    if !secret_matches(&token, verify_token) {
        let message = "hub.verify_token is not the token of the source's ingest_verify_token_env";
        return Response::error(403, "bad_verify_token", message);
    }
    match request.query_param("hub.challenge") {
        Some(challenge) if !challenge.is_empty() => {
            Response::text(200, "text/plain; charset=utf-8", challenge)
        }
        _ => Response::error(
            400,
            "bad_subscription_check",
            "a subscription check has a hub.challenge to answer",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_url_verification_carries_a_challenge() {
        // Slack's documented example.
        let check = br#"{"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}"#;
        assert_eq!(
            slack_challenge(check).as_deref(),
            Some("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
        );
        let event =
            br#"{"type": "event_callback", "challenge": "x", "event": {"type": "app_mention"}}"#;
        assert_eq!(slack_challenge(event), None);
        assert_eq!(slack_challenge(br#"{"type": "url_verification"}"#), None);
        assert_eq!(slack_challenge(b"not json"), None);
    }

    #[test]
    fn only_an_endpoint_url_validation_carries_a_plain_token() {
        // Zoom's documented example.
        let check = br#"{"payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"}, "event_ts": 1654503849680, "event": "endpoint.url_validation"}"#;
        assert_eq!(
            zoom_plain_token(check).as_deref(),
            Some("qgg8vlvZRS6UYooatFL8Aw")
        );
        let event = br#"{"event": "meeting.started", "payload": {"plainToken": "x"}}"#;
        assert_eq!(zoom_plain_token(event), None);
        assert_eq!(
            zoom_plain_token(br#"{"event": "endpoint.url_validation"}"#),
            None
        );
    }
}
