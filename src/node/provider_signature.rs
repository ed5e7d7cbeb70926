//! Providers' signatures, checked at ingest: a source with
//! `ingest_signature` accepts only hooks signed with one of the secrets of
//! its `ingest_secret_env` variables, the way that provider signs them.
//! Most webhook providers cannot send a bearer token, but all of these sign
//! every request with a shared secret:
//!
//! | scheme | header(s) | signed bytes | encoding |
//! |---|---|---|---|
//! | `github` | `x-hub-signature-256: sha256=<sig>` | body | hex |
//! | `stripe` | `stripe-signature: t=<ts>,v1=<sig>[,v1=…]` | `<ts>.<body>` | hex |
//! | `slack` | `x-slack-signature: v0=<sig>`, `x-slack-request-timestamp` | `v0:<ts>:<body>` | hex |
//! | `shopify` | `x-shopify-hmac-sha256: <sig>` | body | base64 |
//! | `standard_webhooks` | `webhook-signature: v1,<sig> …`, `webhook-id`, `webhook-timestamp` | `<id>.<ts>.<body>` | base64 |
//!
//! Every signature is HMAC-SHA256 under the secret, compared in constant
//! time. A secret is the variable's bytes, or for `standard_webhooks` a
//! `whsec_<base64>` key. A signed timestamp (unix seconds) must lie within
//! [`TOLERANCE_S`] of now, so a captured request cannot be replayed later.

use crate::sink::signing::SigningKey;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use subtle::ConstantTimeEq;

/// The schemes `ingest_signature` names.
pub const SCHEMES: &[&str] = &["github", "stripe", "slack", "shopify", "standard_webhooks"];

/// How far a signed timestamp may be from now, either way (the 5 minutes
/// Stripe, Slack and Standard Webhooks recommend).
pub const TOLERANCE_S: u64 = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    GitHub,
    Stripe,
    Slack,
    Shopify,
    StandardWebhooks,
}

/// A source's check: its provider's scheme and the secrets it accepts
/// (several while one is rotated).
#[derive(Clone)]
pub struct SignatureCheck {
    scheme: Scheme,
    secrets: Vec<Vec<u8>>,
}

impl fmt::Debug for SignatureCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SignatureCheck({:?}, {} secrets)",
            self.scheme,
            self.secrets.len()
        )
    }
}

/// Why a request's signature does not verify (its text is the 401's
/// message, which names what to fix and never a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Missing(&'static str),
    Malformed(&'static str),
    /// The signed timestamp is this far from now.
    Stale {
        header: &'static str,
        off_s: u64,
    },
    /// Well formed, but signed with none of the source's secrets (or over
    /// other bytes).
    Mismatch(&'static str),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Missing(header) => write!(f, "this source needs a signed hook: no {header}"),
            Refusal::Malformed(header) => write!(f, "{header} is not a signature of this scheme"),
            Refusal::Stale { header, off_s } => write!(
                f,
                "{header} is {off_s} s from now, more than the {TOLERANCE_S} s allowed"
            ),
            Refusal::Mismatch(header) => {
                write!(
                    f,
                    "{header} does not match the body under any of the source's secrets"
                )
            }
        }
    }
}

/// The request's headers by lowercase name.
pub type Headers<'a> = &'a dyn Fn(&str) -> Option<&'a str>;

impl SignatureCheck {
    /// The check of `scheme` (one of [`SCHEMES`]) with these secrets; the
    /// error says why a secret cannot be one of that scheme.
    pub fn new(scheme: &str, secrets: &[String]) -> Result<SignatureCheck, String> {
        let scheme = match scheme {
            "github" => Scheme::GitHub,
            "stripe" => Scheme::Stripe,
            "slack" => Scheme::Slack,
            "shopify" => Scheme::Shopify,
            "standard_webhooks" => Scheme::StandardWebhooks,
            other => return Err(format!("no signature scheme {other:?}")),
        };
        let secrets = secrets
            .iter()
            .map(|secret| match scheme {
                Scheme::StandardWebhooks => SigningKey::parse(secret)
                    .map(|key| key.as_bytes().to_vec())
                    .map_err(|e| e.to_string()),
                _ => Ok(secret.as_bytes().to_vec()),
            })
            .collect::<Result<_, _>>()?;
        Ok(SignatureCheck { scheme, secrets })
    }

    /// Whether the request (its `headers` and `body`) is signed with one
    /// of the secrets, at `now_s` (unix seconds).
    pub fn verify(&self, headers: Headers<'_>, body: &[u8], now_s: u64) -> Result<(), Refusal> {
        let required = |name: &'static str| headers(name).ok_or(Refusal::Missing(name));
        match self.scheme {
            Scheme::GitHub => {
                let name = "x-hub-signature-256";
                let signature = required(name)?
                    .strip_prefix("sha256=")
                    .and_then(|hex| hex::decode(hex).ok())
                    .ok_or(Refusal::Malformed(name))?;
                self.any_secret(name, &[signature], &[body])
            }
            Scheme::Stripe => {
                let name = "stripe-signature";
                let (mut timestamp, mut signatures) = (None, Vec::new());
                for pair in required(name)?.split(',') {
                    match pair.trim().split_once('=') {
                        Some(("t", t)) => timestamp = t.parse::<u64>().ok(),
                        Some(("v1", hex)) => signatures.extend(hex::decode(hex).ok()),
                        _ => {}
                    }
                }
                let timestamp = timestamp
                    .filter(|_| !signatures.is_empty())
                    .ok_or(Refusal::Malformed(name))?;
                fresh(name, timestamp, now_s)?;
                let t = timestamp.to_string();
                self.any_secret(name, &signatures, &[t.as_bytes(), b".", body])
            }
            Scheme::Slack => {
                let (name, stamp) = ("x-slack-signature", "x-slack-request-timestamp");
                let signature = required(name)?
                    .strip_prefix("v0=")
                    .and_then(|hex| hex::decode(hex).ok())
                    .ok_or(Refusal::Malformed(name))?;
                let t = required(stamp)?;
                let timestamp = t.parse::<u64>().map_err(|_| Refusal::Malformed(stamp))?;
                fresh(stamp, timestamp, now_s)?;
                self.any_secret(name, &[signature], &[b"v0:", t.as_bytes(), b":", body])
            }
            Scheme::Shopify => {
                let name = "x-shopify-hmac-sha256";
                let signature = STANDARD
                    .decode(required(name)?)
                    .map_err(|_| Refusal::Malformed(name))?;
                self.any_secret(name, &[signature], &[body])
            }
            Scheme::StandardWebhooks => {
                let (name, stamp) = ("webhook-signature", "webhook-timestamp");
                let id = required("webhook-id")?;
                let t = required(stamp)?;
                let timestamp = t.parse::<u64>().map_err(|_| Refusal::Malformed(stamp))?;
                fresh(stamp, timestamp, now_s)?;
                let signatures: Vec<Vec<u8>> = required(name)?
                    .split(' ')
                    .filter_map(|entry| entry.strip_prefix("v1,"))
                    .filter_map(|b64| STANDARD.decode(b64).ok())
                    .collect();
                if signatures.is_empty() {
                    return Err(Refusal::Malformed(name));
                }
                let signed = [id.as_bytes(), b".", t.as_bytes(), b".", body];
                self.any_secret(name, &signatures, &signed)
            }
        }
    }

    /// Ok if any of `signatures` is the HMAC of the concatenated `signed`
    /// parts under any secret.
    fn any_secret(
        &self,
        header: &'static str,
        signatures: &[Vec<u8>],
        signed: &[&[u8]],
    ) -> Result<(), Refusal> {
        let matched = self.secrets.iter().any(|secret| {
            let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key");
            signed.iter().for_each(|part| mac.update(part));
            let expected = mac.finalize().into_bytes();
            signatures
                .iter()
                .any(|signature| bool::from(signature.as_slice().ct_eq(expected.as_slice())))
        });
        matched.then_some(()).ok_or(Refusal::Mismatch(header))
    }
}

/// Ok if `timestamp` lies within the tolerance of `now_s`.
fn fresh(header: &'static str, timestamp: u64, now_s: u64) -> Result<(), Refusal> {
    let off_s = timestamp.abs_diff(now_s);
    match off_s <= TOLERANCE_S {
        true => Ok(()),
        false => Err(Refusal::Stale { header, off_s }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_S: u64 = 1_700_000_000;

    fn check(scheme: &str, secret: &str) -> SignatureCheck {
        SignatureCheck::new(scheme, &[secret.to_string()]).unwrap()
    }

    fn verify_at(
        check: &SignatureCheck,
        pairs: &[(&'static str, String)],
        body: &[u8],
        now_s: u64,
    ) -> Result<(), Refusal> {
        let lookup = |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        check.verify(&lookup, body, now_s)
    }

    fn verify(
        check: &SignatureCheck,
        pairs: &[(&'static str, String)],
        body: &[u8],
    ) -> Result<(), Refusal> {
        verify_at(check, pairs, body, NOW_S)
    }

    /// GitHub's documented example: secret "It's a Secret to Everybody",
    /// payload "Hello, World!".
    #[test]
    fn githubs_example_verifies_and_another_body_does_not() {
        let github = check("github", "It's a Secret to Everybody");
        let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let header = [("x-hub-signature-256", signature.to_string())];
        assert_eq!(verify(&github, &header, b"Hello, World!"), Ok(()));
        assert_eq!(
            verify(&github, &header, b"Hello, World?"),
            Err(Refusal::Mismatch("x-hub-signature-256"))
        );
        assert_eq!(
            verify(&github, &[], b"Hello, World!"),
            Err(Refusal::Missing("x-hub-signature-256"))
        );
        let sha1 = [("x-hub-signature-256", "sha1=00".to_string())];
        assert_eq!(
            verify(&github, &sha1, b"x"),
            Err(Refusal::Malformed("x-hub-signature-256"))
        );
    }

    /// Standard Webhooks' reference vector, through the ingest check.
    #[test]
    fn the_standard_webhooks_vector_verifies_within_the_tolerance_only() {
        let key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let check = SignatureCheck::new("standard_webhooks", &[key.to_string()]).unwrap();
        let headers = |timestamp: u64| {
            [
                ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".to_string()),
                ("webhook-timestamp", timestamp.to_string()),
                (
                    "webhook-signature",
                    "v1,bm9ldHZhbGlk v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".to_string(),
                ),
            ]
        };
        let body = br#"{"test": 2432232314}"#;
        let signed_at = 1_614_265_330;
        let pairs = headers(signed_at);
        let lookup_at = |now_s: u64| verify_at(&check, &pairs, body, now_s);
        assert_eq!(lookup_at(signed_at + TOLERANCE_S), Ok(()));
        assert_eq!(
            lookup_at(signed_at + TOLERANCE_S + 1),
            Err(Refusal::Stale {
                header: "webhook-timestamp",
                off_s: TOLERANCE_S + 1
            })
        );
        assert!(SignatureCheck::new("standard_webhooks", &["whsec_!".into()]).is_err());
        assert!(SignatureCheck::new("paypal", &["s".into()]).is_err());
    }
}
