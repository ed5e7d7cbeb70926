//! Providers' checks of a new endpoint, answered at ingest instead of
//! stored as hooks. Slack enables an app's Events API URL only once it
//! answers a signed `url_verification` request with the request's
//! `challenge`: a source whose `ingest_signature` is `slack` answers it
//! (after the signature check, as any hook's) with `200 {"challenge": …}`,
//! and commits nothing.

use serde::Deserialize;

/// The body of Slack's check.
#[derive(Deserialize)]
struct UrlVerification {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
}

/// The challenge to answer, when `body` is Slack's `url_verification`.
pub fn slack_challenge(body: &[u8]) -> Option<String> {
    let check: UrlVerification = serde_json::from_slice(body).ok()?;
    (check.kind == "url_verification").then_some(check.challenge)
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
}
