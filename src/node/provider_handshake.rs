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
//! Twitch checks an EventSub callback with a signed
//! `webhook_callback_verification`: a `twitch` source answers its
//! challenge. The checks that carry no secret a source answers only when
//! its `ingest_handshake` names them: Microsoft Graph's `validationToken`,
//! Azure Event Grid's subscription validation and the CloudEvents webhook
//! handshake (`OPTIONS`) its CloudEvents schema uses, Dropbox's `GET
//! ?challenge=` and Okta's `GET` with `x-okta-verification-challenge`.
//! Each answer echoes what the request carries, so it tells a caller
//! nothing it did not know.

use super::auth::secret_matches;
use super::http::{Request, Response};
use serde::Deserialize;

/// The values of a source's `ingest_handshake`, and what each names.
pub const HANDSHAKES: [(&str, Handshake); 4] = [
    ("microsoft_graph", Handshake::MicrosoftGraph),
    ("event_grid", Handshake::EventGrid),
    ("dropbox", Handshake::Dropbox),
    ("okta", Handshake::Okta),
];

/// A provider's check of a new endpoint, answered for a source whose
/// `ingest_handshake` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    MicrosoftGraph,
    EventGrid,
    Dropbox,
    Okta,
}

impl Handshake {
    /// The handshake an `ingest_handshake` names, if any.
    pub fn named(name: &str) -> Option<Handshake> {
        HANDSHAKES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, handshake)| *handshake)
    }

    /// The answer to a `POST` of the ingest path that is this provider's
    /// check: Microsoft Graph's `?validationToken=…` (200, the token as
    /// `text/plain`), Event Grid's `aeg-event-type: SubscriptionValidation`
    /// (200 `{"validationResponse": <its data.validationCode>}`). `None`
    /// for a hook.
    pub fn answer_post(self, request: &Request) -> Option<Response> {
        match self {
            Handshake::MicrosoftGraph => {
                let token = request.query_param("validationToken")?;
                Some(Response::text(200, "text/plain; charset=utf-8", token))
            }
            Handshake::EventGrid => {
                let kind = request.header("aeg-event-type")?;
                if !kind.eq_ignore_ascii_case("SubscriptionValidation") {
                    return None;
                }
                Some(match event_grid_validation_code(&request.body) {
                    Some(code) => {
                        Response::json(200, &serde_json::json!({ "validationResponse": code }))
                    }
                    None => Response::error(
                        400,
                        "bad_subscription_check",
                        "an Event Grid subscription validation carries data.validationCode \
                         in its first event",
                    ),
                })
            }
            Handshake::Dropbox | Handshake::Okta => None,
        }
    }

    /// The answer to a `GET` of the ingest path, this provider's check:
    /// Dropbox's `?challenge=…` (200, the challenge as `text/plain`, not
    /// to be sniffed as anything else), Okta's
    /// `x-okta-verification-challenge` (200 `{"verification": …}`); 400
    /// `bad_subscription_check` for a `GET` without it. `None` for a
    /// provider that checks otherwise.
    pub fn answer_get(self, request: &Request) -> Option<Response> {
        let refused = |message: &str| Response::error(400, "bad_subscription_check", message);
        match self {
            Handshake::Dropbox => Some(match request.query_param("challenge") {
                Some(challenge) if !challenge.is_empty() => {
                    Response::text(200, "text/plain; charset=utf-8", challenge)
                        .with_header("x-content-type-options", "nosniff".to_string())
                }
                _ => refused("a Dropbox check carries ?challenge="),
            }),
            Handshake::Okta => Some(match request.header("x-okta-verification-challenge") {
                Some(challenge) if !challenge.is_empty() => {
                    Response::json(200, &serde_json::json!({ "verification": challenge }))
                }
                _ => refused("an Okta check carries x-okta-verification-challenge"),
            }),
            Handshake::MicrosoftGraph | Handshake::EventGrid => None,
        }
    }

    /// The answer to an `OPTIONS` of the ingest path: the CloudEvents
    /// webhook handshake (`WebHook-Request-Origin`, answered with
    /// `WebHook-Allowed-Origin` and any rate) for `event_grid`.
    pub fn answer_options(self, request: &Request) -> Option<Response> {
        match self {
            Handshake::EventGrid => {
                let origin = request.header("webhook-request-origin")?.to_string();
                let response = Response::text(200, "text/plain; charset=utf-8", String::new());
                Some(
                    response
                        .with_header("webhook-allowed-origin", origin)
                        .with_header("webhook-allowed-rate", "*".to_string()),
                )
            }
            Handshake::MicrosoftGraph | Handshake::Dropbox | Handshake::Okta => None,
        }
    }
}

/// Event Grid's validation event, as much as is read of it.
#[derive(Deserialize)]
struct ValidationEvent {
    data: ValidationData,
}

#[derive(Deserialize)]
struct ValidationData {
    #[serde(rename = "validationCode")]
    validation_code: String,
}

/// The code of the first event of an Event Grid subscription validation.
fn event_grid_validation_code(body: &[u8]) -> Option<String> {
    let events: Vec<ValidationEvent> = serde_json::from_slice(body).ok()?;
    Some(events.into_iter().next()?.data.validation_code)
}

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

/// The challenge of Twitch's `webhook_callback_verification` body.
pub fn twitch_challenge(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Verification {
        challenge: String,
    }
    let check: Verification = serde_json::from_slice(body).ok()?;
    Some(check.challenge)
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
    fn event_grids_validation_code_is_its_first_events() {
        // Event Grid's documented example.
        let check = br#"[{"id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66", "topic": "/subscriptions/xx/resourceGroups/yy", "subject": "", "data": {"validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6", "validationUrl": "https://rp-eastus2.eventgrid.azure.net:553/eventsubscriptions/myeventsub/validate?id=0000000000-0000-0000-0000-00000000000000&t=2022-10-28T04:23:35.1981776Z&apiVersion=2018-05-01-preview&token=1A1A1A1A"}, "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent", "eventTime": "2022-10-28T04:23:35.1981776Z", "metadataVersion": "1", "dataVersion": "1"}]"#;
        assert_eq!(
            event_grid_validation_code(check).as_deref(),
            Some("512d38b6-c7b8-40c8-89fe-f46f9e9622b6")
        );
        assert_eq!(event_grid_validation_code(b"[]"), None);
        assert_eq!(event_grid_validation_code(br#"[{"data": {}}]"#), None);
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
