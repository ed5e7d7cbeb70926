//! The message goad sends to a queue or a topic (the SQS and Pub/Sub
//! sinks): the hook as a versioned JSON document, and the attributes that
//! go beside it.
//!
//! Version 1 (`"v": 1`): `v, id, source_id, tenant_id, received_at` (RFC
//! 3339, UTC, milliseconds), `content_type` (or null), `size` (body bytes),
//! `dedupe_key` and `replay_id` (or null), `idempotency_key`, `headers` (the
//! forwarded provider headers, lowercased, repeats joined with ", "),
//! `sha256` (lowercase hex of the body), and either `body_base64` or, for a
//! body in the claim check, `claim` (its `urn:goad:claim:v1:…` reference). `v` changes only
//! when a field changes meaning or goes away; consumers ignore keys they do
//! not know.
//!
//! Attributes: `goad_id`, `goad_source_id`, `goad_tenant_id`,
//! `goad_message_version` ("1"), `goad_idempotency_key`, `content_type`
//! ("application/json", the message's), and `goad_dedupe_key`,
//! `goad_replay_id` when the hook has them.

use super::forward::forwarded;
use super::Delivery;
use crate::claim_check::ClaimRef;
use base64::Engine as _;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

/// The version of the message's fields.
pub const MESSAGE_VERSION: u32 = 1;

#[derive(Serialize)]
struct Message<'a> {
    v: u32,
    id: &'a str,
    source_id: &'a str,
    tenant_id: &'a str,
    received_at: String,
    content_type: Option<&'a str>,
    size: usize,
    dedupe_key: Option<&'a str>,
    replay_id: Option<&'a str>,
    idempotency_key: String,
    headers: BTreeMap<String, String>,
    sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    claim: Option<String>,
}

/// The message of one delivery, as JSON text: the body inline, or the
/// reference of its claim.
pub fn message_json(delivery: &Delivery<'_>, forward_allow: Option<&[String]>) -> String {
    let claim = delivery.claim;
    let hook = delivery.hook;
    let received_at = UNIX_EPOCH + Duration::from_millis(hook.received_at_ms);
    let sha256 = crate::claim_check::body_sha256(&hook.body);
    let message = Message {
        v: MESSAGE_VERSION,
        id: &hook.id,
        source_id: &hook.source_id,
        tenant_id: &hook.tenant,
        received_at: humantime::format_rfc3339_millis(received_at).to_string(),
        content_type: hook.content_type.as_deref(),
        size: hook.body.len(),
        dedupe_key: hook.dedupe_key.as_deref(),
        replay_id: delivery.replay_id,
        idempotency_key: hook.idempotency_key(),
        headers: forwarded(&hook.headers, forward_allow)
            .into_iter()
            .collect(),
        sha256,
        body_base64: claim
            .is_none()
            .then(|| base64::engine::general_purpose::STANDARD.encode(&hook.body)),
        claim: claim.map(ClaimRef::urn),
    };
    serde_json::to_string(&message).expect("a message serializes")
}

/// The attributes of one delivery's message, in a fixed order.
pub fn attributes(delivery: &Delivery<'_>) -> Vec<(&'static str, String)> {
    let hook = delivery.hook;
    let mut out = vec![
        ("goad_id", hook.id.clone()),
        ("goad_source_id", hook.source_id.to_string()),
        ("goad_tenant_id", hook.tenant.to_string()),
        ("goad_message_version", MESSAGE_VERSION.to_string()),
        ("goad_idempotency_key", hook.idempotency_key()),
        ("content_type", "application/json".to_string()),
    ];
    if let Some(key) = &hook.dedupe_key {
        out.push(("goad_dedupe_key", key.clone()));
    }
    if let Some(replay) = delivery.replay_id {
        out.push(("goad_replay_id", replay.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Hook;

    fn hook() -> Hook {
        Hook {
            id: "0190".into(),
            seq: 1,
            tenant: "acme".into(),
            source_id: "stripe".into(),
            received_at_ms: 1_700_000_000_123,
            content_type: Some("application/json".into()),
            dedupe_key: Some("evt_1".into()),
            headers: vec![
                ("X-Stripe-Event".into(), "a".into()),
                ("x-stripe-event".into(), "b".into()),
                ("authorization".into(), "secret".into()),
            ],
            body: b"{}".to_vec(),
        }
    }

    #[test]
    fn the_message_carries_the_hook_and_its_attributes_name_it() {
        let hook = hook();
        let delivery = Delivery {
            hook: &hook,
            attempt: 1,
            sink_index: 0,
            replay_id: Some("r1"),
            claim: None,
            deadline: std::time::Instant::now(),
        };
        let message: serde_json::Value =
            serde_json::from_str(&message_json(&delivery, None)).unwrap();
        assert_eq!(
            message,
            serde_json::json!({
                "v": 1,
                "id": "0190",
                "source_id": "stripe",
                "tenant_id": "acme",
                "received_at": "2023-11-14T22:13:20.123Z",
                "content_type": "application/json",
                "size": 2,
                "dedupe_key": "evt_1",
                "replay_id": "r1",
                "idempotency_key": "acme:stripe:evt_1",
                "headers": {"x-stripe-event": "a, b"},
                "sha256": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
                "body_base64": "e30=",
            })
        );
        let claim = crate::claim_check::ClaimRef {
            tenant: "acme".into(),
            sha256: "44".into(),
        };
        let with_claim = Delivery {
            claim: Some(&claim),
            ..delivery
        };
        let claimed: serde_json::Value =
            serde_json::from_str(&message_json(&with_claim, None)).unwrap();
        assert_eq!(claimed["claim"], "urn:goad:claim:v1:acme:44");
        assert!(claimed.get("body_base64").is_none());
        assert_eq!(claimed["sha256"], message["sha256"]);
        assert_eq!(
            attributes(&delivery),
            [
                ("goad_id", "0190".to_string()),
                ("goad_source_id", "stripe".into()),
                ("goad_tenant_id", "acme".into()),
                ("goad_message_version", "1".into()),
                ("goad_idempotency_key", "acme:stripe:evt_1".into()),
                ("content_type", "application/json".into()),
                ("goad_dedupe_key", "evt_1".into()),
                ("goad_replay_id", "r1".into()),
            ]
        );
    }
}
