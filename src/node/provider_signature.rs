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
//! | `svix` (Clerk, Resend and the other senders on Svix) | the same, named `svix-signature`, `svix-id`, `svix-timestamp` | `<id>.<ts>.<body>` | base64 |
//! | `twitch` (EventSub) | `twitch-eventsub-message-signature: sha256=<sig>`, `…-message-id`, `…-message-timestamp` (RFC 3339) | `<id><ts><body>` | hex |
//! | a table `{ header, prefix, encoding, algorithm }` | `<header>: <prefix><sig>` | body | hex or base64 |
//!
//! Those signatures are HMAC-SHA256 under the secret (a table may name
//! SHA-1 or SHA-512), compared in constant time. A secret is the
//! variable's bytes, or for `standard_webhooks` and `svix` a
//! `whsec_<base64>` key. A
//! signed timestamp must lie within [`TOLERANCE_S`] of now (Twitch's,
//! [`TWITCH_TOLERANCE_S`], as Twitch asks), so a captured request cannot
//! be replayed later.
//!
//! Two providers send the secret itself instead, in a header of their own:
//! `gitlab` (`x-gitlab-token`) and `telegram`
//! (`x-telegram-bot-api-secret-token`); those headers are credentials,
//! never stored with a hook nor forwarded.

use super::http::Response;
use crate::config::{HmacSignature, IngestSignature};
use crate::sink::signing::Verifier;
use crate::sink::PROVIDER_TOKENS;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use std::fmt;
use subtle::ConstantTimeEq;

/// The schemes `ingest_signature` names.
pub const SCHEMES: &[&str] = &[
    "github",
    "stripe",
    "slack",
    "shopify",
    "standard_webhooks",
    "svix",
    "gitlab",
    "telegram",
    "zoom",
    "twitch",
];

/// An `ingest_signature` table's `encoding`s, the default first.
pub const ENCODINGS: &[&str] = &["hex", "base64"];

/// An `ingest_signature` table's `algorithm`s, the default first.
pub const ALGORITHMS: &[&str] = &["sha256", "sha1", "sha512"];

/// How far a signed timestamp may be from now, either way (the 5 minutes
/// Stripe, Slack and Standard Webhooks recommend).
pub const TOLERANCE_S: u64 = 300;

/// Twitch's: it asks receivers to refuse messages over 10 minutes old.
pub const TWITCH_TOLERANCE_S: u64 = 600;

/// Twitch EventSub's headers.
const TWITCH_ID: &str = "twitch-eventsub-message-id";
const TWITCH_TIMESTAMP: &str = "twitch-eventsub-message-timestamp";
const TWITCH_SIGNATURE: &str = "twitch-eventsub-message-signature";
const TWITCH_TYPE: &str = "twitch-eventsub-message-type";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Scheme {
    GitHub,
    Stripe,
    /// `v0=<hex>` of `v0:<timestamp>:<body>`, in these two headers (Slack's, Zoom's).
    V0 {
        signature: &'static str,
        timestamp: &'static str,
    },
    Shopify,
    /// Its secrets (`v1`) and public keys (`v1a`), and its headers' names.
    StandardWebhooks(Vec<Verifier>, &'static StandardHeaders),
    /// The secret itself, in this header (one of [`PROVIDER_TOKENS`]).
    Token(&'static str),
    BodyHmac(BodyHmac),
    /// Twitch EventSub's `sha256=<hex>` of `<id><timestamp><body>`.
    Twitch,
}

/// Slack's signature headers.
const SLACK: Scheme = Scheme::V0 {
    signature: "x-slack-signature",
    timestamp: "x-slack-request-timestamp",
};

/// Zoom's: Slack's scheme under its own names.
const ZOOM: Scheme = Scheme::V0 {
    signature: "x-zm-signature",
    timestamp: "x-zm-request-timestamp",
};

/// The headers of a Standard Webhooks signature: the standard's own, or
/// Svix's (the same scheme, which Svix sent before it was a standard).
#[derive(Debug, PartialEq, Eq)]
struct StandardHeaders {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

const STANDARD_WEBHOOKS: StandardHeaders = StandardHeaders {
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};

const SVIX: StandardHeaders = StandardHeaders {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

/// An `ingest_signature` table: an HMAC of the body in `header`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BodyHmac {
    /// Lower case.
    header: String,
    prefix: String,
    base64: bool,
    algorithm: Algorithm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Sha256,
    Sha1,
    Sha512,
}

impl Algorithm {
    /// The HMAC of the concatenated `parts` under `key`.
    fn mac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        fn of<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
            parts.iter().for_each(|part| mac.update(part));
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Algorithm::Sha256 => of::<Hmac<Sha256>>(key, parts),
            Algorithm::Sha1 => of::<Hmac<Sha1>>(key, parts),
            Algorithm::Sha512 => of::<Hmac<Sha512>>(key, parts),
        }
    }
}

impl BodyHmac {
    /// The check a table describes; the error names the value no check has.
    fn of(table: &HmacSignature) -> Result<BodyHmac, String> {
        let encoding = table.encoding.as_deref().unwrap_or(ENCODINGS[0]);
        let algorithm = match table.algorithm.as_deref().unwrap_or(ALGORITHMS[0]) {
            "sha256" => Algorithm::Sha256,
            "sha1" => Algorithm::Sha1,
            "sha512" => Algorithm::Sha512,
            other => return Err(format!("no algorithm {other:?}")),
        };
        if !ENCODINGS.contains(&encoding) {
            return Err(format!("no encoding {encoding:?}"));
        }
        Ok(BodyHmac {
            header: table.header.to_ascii_lowercase(),
            prefix: table.prefix.clone().unwrap_or_default(),
            base64: encoding == "base64",
            algorithm,
        })
    }

    /// The signature a header's value carries, if it is one.
    fn signature(&self, value: &str) -> Option<Vec<u8>> {
        let text = value.trim().strip_prefix(self.prefix.as_str())?;
        match self.base64 {
            true => STANDARD.decode(text).ok().filter(|bytes| !bytes.is_empty()),
            false => hex_bytes(text),
        }
    }
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
pub enum Refusal<'a> {
    Missing(&'a str),
    Malformed(&'a str),
    /// The signed timestamp is this far from now, past the tolerance.
    Stale {
        header: &'a str,
        off_s: u64,
        tolerance_s: u64,
    },
    /// Well formed, but signed with none of the source's secrets (or over
    /// other bytes).
    Mismatch(&'a str),
    /// A token scheme's header holds none of the source's secrets.
    NotASecret(&'a str),
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Missing(header) => write!(f, "this source needs a signed hook: no {header}"),
            Refusal::Malformed(header) => write!(f, "{header} is not a signature of this scheme"),
            Refusal::Stale {
                header,
                off_s,
                tolerance_s,
            } => write!(
                f,
                "{header} is {off_s} s from now, more than the {tolerance_s} s allowed"
            ),
            Refusal::Mismatch(header) => {
                write!(
                    f,
                    "{header} does not match the body under any of the source's secrets"
                )
            }
            Refusal::NotASecret(header) => {
                write!(f, "{header} is none of the source's secrets")
            }
        }
    }
}

/// The request's headers by lowercase name.
pub type Headers<'a> = &'a dyn Fn(&str) -> Option<&'a str>;

/// The value of the header `name`, which the scheme requires.
fn required<'h, 'c>(headers: Headers<'h>, name: &'c str) -> Result<&'h str, Refusal<'c>> {
    headers(name).ok_or(Refusal::Missing(name))
}

impl SignatureCheck {
    /// The check `signature` describes (a scheme of [`SCHEMES`] or a
    /// table) with these secrets; the error says why a secret cannot be
    /// one of that scheme, or which value of the table no check has.
    pub fn new(signature: &IngestSignature, secrets: &[String]) -> Result<SignatureCheck, String> {
        let scheme = match signature {
            IngestSignature::Hmac(table) => Scheme::BodyHmac(BodyHmac::of(table)?),
            IngestSignature::Scheme(name) => match name.as_str() {
                "github" => Scheme::GitHub,
                "stripe" => Scheme::Stripe,
                "slack" => SLACK,
                "zoom" => ZOOM,
                "shopify" => Scheme::Shopify,
                standard @ ("standard_webhooks" | "svix") => {
                    let keys = secrets.iter().map(|secret| Verifier::parse(secret));
                    let keys = keys.collect::<Result<_, _>>().map_err(|e| e.to_string())?;
                    let names = match standard {
                        "svix" => &SVIX,
                        _ => &STANDARD_WEBHOOKS,
                    };
                    let scheme = Scheme::StandardWebhooks(keys, names);
                    let secrets = Vec::new();
                    return Ok(SignatureCheck { scheme, secrets });
                }
                "gitlab" => Scheme::Token(PROVIDER_TOKENS[0]),
                "telegram" => Scheme::Token(PROVIDER_TOKENS[1]),
                "twitch" => Scheme::Twitch,
                other => return Err(format!("no signature scheme {other:?}")),
            },
        };
        let secrets = secrets.iter().map(|s| s.as_bytes().to_vec()).collect();
        Ok(SignatureCheck { scheme, secrets })
    }

    /// The answer to the provider's check of its endpoint, when the
    /// request (its `headers` and `body`; one this check verified) is one:
    /// Slack's `url_verification` (`{"challenge"}`), Zoom's
    /// `endpoint.url_validation` (`{"plainToken", "encryptedToken"}`: the
    /// token's HMAC under the secret Zoom signed the request with, the one
    /// it holds now), Twitch's
    /// `webhook_callback_verification` (the challenge as plain text).
    pub fn endpoint_check_answer(&self, headers: Headers<'_>, body: &[u8]) -> Option<Response> {
        use super::provider_handshake::{slack_challenge, twitch_challenge, zoom_plain_token};
        match self.scheme {
            SLACK => {
                let challenge = slack_challenge(body)?;
                Some(Response::json(
                    200,
                    &serde_json::json!({ "challenge": challenge }),
                ))
            }
            ZOOM => {
                let plain = zoom_plain_token(body)?;
                let secret = self.zoom_signing_secret(headers, body)?;
                let encrypted = hex::encode(Algorithm::Sha256.mac(secret, &[plain.as_bytes()]));
                let answer =
                    serde_json::json!({ "plainToken": plain, "encryptedToken": encrypted });
                Some(Response::json(200, &answer))
            }
            Scheme::Twitch => {
                let kind = headers(TWITCH_TYPE)?;
                if kind != "webhook_callback_verification" {
                    return None;
                }
                let answer = match twitch_challenge(body) {
                    Some(challenge) => Response::text(200, "text/plain; charset=utf-8", challenge),
                    None => Response::error(
                        400,
                        "bad_subscription_check",
                        "a webhook_callback_verification carries a challenge",
                    ),
                };
                Some(answer)
            }
            _ => None,
        }
    }

    /// Whether the request (its `headers` and `body`) is signed with one
    /// of the secrets, at `now_s` (unix seconds).
    pub fn verify(&self, headers: Headers<'_>, body: &[u8], now_s: u64) -> Result<(), Refusal<'_>> {
        let sha256 = Algorithm::Sha256;
        match &self.scheme {
            Scheme::GitHub => {
                let name = "x-hub-signature-256";
                let signature = sha256_hex(headers, name)?;
                self.any_secret(sha256, name, &[signature], &[body])
            }
            Scheme::Stripe => self.verify_stripe(headers, body, now_s),
            Scheme::V0 {
                signature: name,
                timestamp: stamp,
            } => {
                let (signature, t) = v0_signature(headers, name, stamp)?;
                let timestamp = t.parse::<u64>().map_err(|_| Refusal::Malformed(stamp))?;
                fresh(stamp, timestamp, now_s, TOLERANCE_S)?;
                let signed = [b"v0:", t.as_bytes(), b":", body];
                self.any_secret(sha256, name, &[signature], &signed)
            }
            Scheme::Shopify => {
                let name = "x-shopify-hmac-sha256";
                let signature = STANDARD
                    .decode(required(headers, name)?)
                    .map_err(|_| Refusal::Malformed(name))?;
                self.any_secret(sha256, name, &[signature], &[body])
            }
            Scheme::StandardWebhooks(keys, names) => {
                verify_standard_webhooks(keys, names, headers, body, now_s)
            }
            Scheme::BodyHmac(hmac) => {
                let name = hmac.header.as_str();
                let signature = hmac
                    .signature(required(headers, name)?)
                    .ok_or(Refusal::Malformed(name))?;
                self.any_secret(hmac.algorithm, name, &[signature], &[body])
            }
            Scheme::Twitch => self.verify_twitch(headers, body, now_s),
            Scheme::Token(name) => {
                let token = required(headers, name)?.as_bytes();
                let known = self
                    .secrets
                    .iter()
                    .any(|secret| bool::from(token.ct_eq(secret)));
                known.then_some(()).ok_or(Refusal::NotASecret(name))
            }
        }
    }

    /// Stripe's `stripe-signature`: `t=<unix s>,v1=<hex>[,v1=…]` over
    /// `t.body`.
    fn verify_stripe(
        &self,
        headers: Headers<'_>,
        body: &[u8],
        now_s: u64,
    ) -> Result<(), Refusal<'_>> {
        let name = "stripe-signature";
        let (mut timestamp, mut signatures) = (None, Vec::new());
        for pair in required(headers, name)?.split(',') {
            match pair.trim().split_once('=') {
                Some(("t", t)) => timestamp = t.parse::<u64>().ok(),
                Some(("v1", hex)) => signatures.extend(hex_bytes(hex)),
                _ => {}
            }
        }
        let timestamp = timestamp
            .filter(|_| !signatures.is_empty())
            .ok_or(Refusal::Malformed(name))?;
        fresh(name, timestamp, now_s, TOLERANCE_S)?;
        let t = timestamp.to_string();
        let signed = [t.as_bytes(), b".", body];
        self.any_secret(Algorithm::Sha256, name, &signatures, &signed)
    }

    /// Twitch's EventSub: the HMAC of its message id, RFC 3339 timestamp and body.
    fn verify_twitch(
        &self,
        headers: Headers<'_>,
        body: &[u8],
        now_s: u64,
    ) -> Result<(), Refusal<'_>> {
        let signature = sha256_hex(headers, TWITCH_SIGNATURE)?;
        let id = required(headers, TWITCH_ID)?;
        let t = required(headers, TWITCH_TIMESTAMP)?;
        let at = humantime::parse_rfc3339(t).map_err(|_| Refusal::Malformed(TWITCH_TIMESTAMP))?;
        let timestamp = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        fresh(TWITCH_TIMESTAMP, timestamp, now_s, TWITCH_TOLERANCE_S)?;
        let signed = [id.as_bytes(), t.as_bytes(), body];
        self.any_secret(Algorithm::Sha256, TWITCH_SIGNATURE, &[signature], &signed)
    }

    /// Ok if any of `signatures` is the HMAC (by `algorithm`) of the
    /// concatenated `signed` parts under any secret.
    fn any_secret<'c>(
        &self,
        algorithm: Algorithm,
        header: &'c str,
        signatures: &[Vec<u8>],
        signed: &[&[u8]],
    ) -> Result<(), Refusal<'c>> {
        let matched = self.signing_secret(algorithm, signatures, signed);
        matched.map(|_| ()).ok_or(Refusal::Mismatch(header))
    }

    /// The secret of the source's that made one of `signatures` of `signed`.
    fn signing_secret(
        &self,
        algorithm: Algorithm,
        signatures: &[Vec<u8>],
        signed: &[&[u8]],
    ) -> Option<&[u8]> {
        let secret = self.secrets.iter().find(|secret| {
            let expected = algorithm.mac(secret, signed);
            signatures
                .iter()
                .any(|signature| bool::from(signature.as_slice().ct_eq(&expected)))
        });
        secret.map(Vec::as_slice)
    }

    /// The secret Zoom signed a `V0` request with: the one it holds now,
    /// which it expects its endpoint check answered with.
    fn zoom_signing_secret(&self, headers: Headers<'_>, body: &[u8]) -> Option<&[u8]> {
        let Scheme::V0 {
            signature,
            timestamp,
        } = ZOOM
        else {
            unreachable!("Zoom signs as Slack does");
        };
        let (signature, t) = v0_signature(headers, signature, timestamp).ok()?;
        let signed = [b"v0:", t.as_bytes(), b":", body];
        self.signing_secret(Algorithm::Sha256, &[signature], &signed)
    }
}

/// A `V0` request's signature (the `name` header's `v0=` hex) and the
/// `stamp` header's timestamp, as sent.
fn v0_signature<'h, 'n>(
    headers: Headers<'h>,
    name: &'n str,
    stamp: &'n str,
) -> Result<(Vec<u8>, &'h str), Refusal<'n>> {
    let signature = required(headers, name)?
        .strip_prefix("v0=")
        .and_then(hex_bytes)
        .ok_or(Refusal::Malformed(name))?;
    Ok((signature, required(headers, stamp)?))
}

/// Standard Webhooks (and Svix's): a `v1,` (HMAC) or `v1a,` (Ed25519)
/// signature of `id.timestamp.body` by any of `keys`.
fn verify_standard_webhooks<'a>(
    keys: &[Verifier],
    names: &'a StandardHeaders,
    headers: Headers<'_>,
    body: &[u8],
    now_s: u64,
) -> Result<(), Refusal<'a>> {
    let (name, stamp) = (names.signature, names.timestamp);
    let id = required(headers, names.id)?;
    let t = required(headers, stamp)?;
    let timestamp = t.parse::<u64>().map_err(|_| Refusal::Malformed(stamp))?;
    fresh(stamp, timestamp, now_s, TOLERANCE_S)?;
    let signatures = required(headers, name)?;
    let versioned = |entry: &str| entry.starts_with("v1,") || entry.starts_with("v1a,");
    if !signatures.split(' ').any(versioned) {
        return Err(Refusal::Malformed(name));
    }
    let signed = keys.iter().any(|key| key.verify(signatures, id, t, body));
    signed.then_some(()).ok_or(Refusal::Mismatch(name))
}

/// The bytes of a `sha256=<hex>` signature header (GitHub's, Twitch's).
fn sha256_hex<'c>(headers: Headers<'_>, name: &'c str) -> Result<Vec<u8>, Refusal<'c>> {
    required(headers, name)?
        .strip_prefix("sha256=")
        .and_then(hex_bytes)
        .ok_or(Refusal::Malformed(name))
}

/// The bytes of a hex signature; an empty one is none (it would only
/// ever fail to match, as if a secret were wrong).
fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    hex::decode(hex).ok().filter(|bytes| !bytes.is_empty())
}

/// Ok if `timestamp` lies within `tolerance_s` of `now_s`.
fn fresh(header: &str, timestamp: u64, now_s: u64, tolerance_s: u64) -> Result<(), Refusal<'_>> {
    let off_s = timestamp.abs_diff(now_s);
    match off_s <= tolerance_s {
        true => Ok(()),
        false => Err(Refusal::Stale {
            header,
            off_s,
            tolerance_s,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_S: u64 = 1_700_000_000;

    fn check(scheme: &str, secret: &str) -> SignatureCheck {
        SignatureCheck::new(&scheme.into(), &[secret.to_string()]).unwrap()
    }

    fn verify_at<'c>(
        check: &'c SignatureCheck,
        pairs: &[(&'static str, String)],
        body: &[u8],
        now_s: u64,
    ) -> Result<(), Refusal<'c>> {
        let lookup = |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        check.verify(&lookup, body, now_s)
    }

    fn verify<'c>(
        check: &'c SignatureCheck,
        pairs: &[(&'static str, String)],
        body: &[u8],
    ) -> Result<(), Refusal<'c>> {
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
        for malformed in ["sha1=00", "sha256=", "sha256=zz"] {
            let header = [("x-hub-signature-256", malformed.to_string())];
            assert_eq!(
                verify(&github, &header, b"x"),
                Err(Refusal::Malformed("x-hub-signature-256")),
                "{malformed}"
            );
        }
    }

    fn table(header: &str, prefix: &str, encoding: &str, algorithm: &str) -> IngestSignature {
        IngestSignature::Hmac(HmacSignature {
            header: header.to_string(),
            prefix: Some(prefix.to_string()).filter(|p| !p.is_empty()),
            encoding: Some(encoding.to_string()),
            algorithm: Some(algorithm.to_string()),
        })
    }

    /// RFC 2202's and RFC 4231's second test case (key "Jefe"), through a
    /// table of each algorithm and encoding: the header's name is matched
    /// in any case, its prefix is required, and a signature of another
    /// algorithm does not match.
    #[test]
    fn a_table_checks_the_rfc_vectors_of_each_algorithm() {
        let body = b"what do ya want for nothing?";
        let sha256 = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let sha1 = "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79";
        let sha512 = "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
                      9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737";
        let b64 = |hex: &str| STANDARD.encode(hex::decode(hex).unwrap());
        let cases = [
            ("Linear-Signature", "", "hex", "sha256", sha256.to_string()),
            ("linear-signature", "sha1=", "hex", "sha1", sha1.to_string()),
            ("linear-signature", "", "hex", "sha512", sha512.to_string()),
            (
                "linear-signature",
                "sha256=",
                "base64",
                "sha256",
                b64(sha256),
            ),
        ];
        for (name, prefix, encoding, algorithm, encoded) in cases {
            let signature = table(name, prefix, encoding, algorithm);
            let check = SignatureCheck::new(&signature, &["Jefe".to_string()]).unwrap();
            let header = [("linear-signature", format!("{prefix}{encoded}"))];
            assert_eq!(verify(&check, &header, body), Ok(()), "{signature:?}");
            assert_eq!(
                verify(&check, &header, b"what do ya want for something?"),
                Err(Refusal::Mismatch("linear-signature"))
            );
            if !prefix.is_empty() {
                assert_eq!(
                    verify(&check, &[("linear-signature", encoded)], body),
                    Err(Refusal::Malformed("linear-signature")),
                    "{signature:?} without its prefix"
                );
            }
            assert_eq!(
                verify(&check, &[], body),
                Err(Refusal::Missing("linear-signature"))
            );
        }
        let sha256_check = SignatureCheck::new(&table("s", "", "hex", "sha256"), &["Jefe".into()]);
        let sha1_signature = [("s", sha1.to_string())];
        assert_eq!(
            verify(&sha256_check.unwrap(), &sha1_signature, body),
            Err(Refusal::Mismatch("s"))
        );
        assert!(SignatureCheck::new(&table("s", "", "base32", "sha256"), &[]).is_err());
        assert!(SignatureCheck::new(&table("s", "", "hex", "md5"), &[]).is_err());
    }

    /// GitLab's and Telegram's token headers: the secret itself, any of
    /// the source's (a rotation).
    #[test]
    fn a_token_scheme_takes_any_of_the_secrets_in_its_header() {
        let secrets = ["old-token".to_string(), "new-token".to_string()];
        for (scheme, header) in [
            ("gitlab", "x-gitlab-token"),
            ("telegram", "x-telegram-bot-api-secret-token"),
        ] {
            let check = SignatureCheck::new(&scheme.into(), &secrets).unwrap();
            for secret in &secrets {
                assert_eq!(verify(&check, &[(header, secret.clone())], b"{}"), Ok(()));
            }
            assert_eq!(
                verify(&check, &[(header, "new-token2".into())], b"{}"),
                Err(Refusal::NotASecret(header))
            );
            assert_eq!(verify(&check, &[], b"{}"), Err(Refusal::Missing(header)));
        }
    }

    /// A `standard_webhooks` source given a `whpk_` public key takes the
    /// `v1a` signatures of its private key, beside a shared secret's `v1`
    /// (a provider moving to asymmetric signatures); a header with
    /// neither version is malformed, another key's signature a mismatch.
    #[test]
    fn a_public_key_takes_the_v1a_signatures_of_its_private_key() {
        use crate::sink::signing::SigningKey;
        let (private, public) = SigningKey::generate().unwrap();
        let (other, _) = SigningKey::generate().unwrap();
        let secrets = [public.to_string(), "whsec_c2lnbmluZy1zZWNyZXQ=".to_string()];
        let check = SignatureCheck::new(&"standard_webhooks".into(), &secrets).unwrap();
        let body = br#"{"type":"invoice.paid"}"#;
        let headers = |signature: String| {
            [
                ("webhook-id", "msg_1".to_string()),
                ("webhook-timestamp", NOW_S.to_string()),
                ("webhook-signature", signature),
            ]
        };
        let signed_by = |secret: &str| {
            let key = SigningKey::parse(secret).unwrap();
            headers(key.sign("msg_1", NOW_S, body))
        };
        assert_eq!(verify(&check, &signed_by(&private), body), Ok(()));
        assert_eq!(verify(&check, &signed_by(&secrets[1]), body), Ok(()));
        assert_eq!(
            verify(&check, &signed_by(&other), body),
            Err(Refusal::Mismatch("webhook-signature"))
        );
        assert_eq!(
            verify(&check, &signed_by(&private), b"{}"),
            Err(Refusal::Mismatch("webhook-signature"))
        );
        assert_eq!(
            verify(&check, &headers("v2,abc".into()), body),
            Err(Refusal::Malformed("webhook-signature"))
        );
    }

    /// Standard Webhooks' reference vector (Svix's own), through the
    /// ingest check under each scheme's header names; each scheme reads
    /// only its own names.
    #[test]
    fn the_standard_webhooks_vector_verifies_within_the_tolerance_only() {
        let key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let signed_at = 1_614_265_330;
        for (scheme, names, other) in [
            ("standard_webhooks", &STANDARD_WEBHOOKS, &SVIX),
            ("svix", &SVIX, &STANDARD_WEBHOOKS),
        ] {
            let check = SignatureCheck::new(&scheme.into(), &[key.to_string()]).unwrap();
            let headers = |names: &StandardHeaders| {
                [
                    (names.id, "msg_p5jXN8AQM9LWM0D4loKWxJek".to_string()),
                    (names.timestamp, signed_at.to_string()),
                    (
                        names.signature,
                        "v1,bm9ldHZhbGlk v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
                            .to_string(),
                    ),
                ]
            };
            let pairs = headers(names);
            let lookup_at = |now_s: u64| verify_at(&check, &pairs, body, now_s);
            assert_eq!(lookup_at(signed_at + TOLERANCE_S), Ok(()), "{scheme}");
            assert_eq!(
                lookup_at(signed_at + TOLERANCE_S + 1),
                Err(Refusal::Stale {
                    header: names.timestamp,
                    off_s: TOLERANCE_S + 1,
                    tolerance_s: TOLERANCE_S
                })
            );
            assert_eq!(
                verify_at(&check, &headers(other), body, signed_at),
                Err(Refusal::Missing(names.id))
            );
        }
        assert!(SignatureCheck::new(&"standard_webhooks".into(), &["whsec_!".into()]).is_err());
        assert!(SignatureCheck::new(&"paypal".into(), &["s".into()]).is_err());
    }

    /// Twitch EventSub: the HMAC of id, timestamp and body (computed
    /// apart, with Python's `hmac`), its RFC 3339 timestamp with
    /// nanoseconds within Twitch's 10 minutes only, and its callback
    /// verification answered with the challenge once verified.
    #[test]
    fn a_twitch_message_verifies_and_its_verification_is_answered() {
        let twitch = check("twitch", "s3cRe7-s3cRe7");
        let body = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"1","condition":{"broadcaster_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}"#;
        let signature = "sha256=cea2f017753c755ee46dd6427c425555ad4e8e9b1aa4b890e6da941ea0ef434e";
        let sent_s = 1_573_899_072;
        let headers = |kind: &str| {
            [
                (
                    TWITCH_ID,
                    "e76c6bd4-55c9-4987-8304-da1588d8988b".to_string(),
                ),
                (
                    TWITCH_TIMESTAMP,
                    "2019-11-16T10:11:12.634234626Z".to_string(),
                ),
                (TWITCH_SIGNATURE, signature.to_string()),
                (TWITCH_TYPE, kind.to_string()),
            ]
        };
        let verification = headers("webhook_callback_verification");
        let at = |now_s| verify_at(&twitch, &verification, body, now_s);
        assert_eq!(at(sent_s), Ok(()));
        assert_eq!(at(sent_s + TWITCH_TOLERANCE_S), Ok(()));
        assert_eq!(
            at(sent_s + TWITCH_TOLERANCE_S + 1),
            Err(Refusal::Stale {
                header: TWITCH_TIMESTAMP,
                off_s: TWITCH_TOLERANCE_S + 1,
                tolerance_s: TWITCH_TOLERANCE_S
            })
        );
        assert_eq!(
            verify_at(&twitch, &verification, b"{}", sent_s),
            Err(Refusal::Mismatch(TWITCH_SIGNATURE))
        );
        let mut unix_time = verification.clone();
        unix_time[1].1 = sent_s.to_string();
        assert_eq!(
            verify_at(&twitch, &unix_time, body, sent_s),
            Err(Refusal::Malformed(TWITCH_TIMESTAMP))
        );
        let answer = |pairs: &[(&'static str, String)], body: &[u8]| {
            let find = |name: &str| {
                let pair = pairs.iter().find(|(n, _)| *n == name);
                pair.map(|(_, v)| v.as_str())
            };
            let response = twitch.endpoint_check_answer(&find, body)?;
            Some((response.status, String::from_utf8(response.body).unwrap()))
        };
        assert_eq!(
            answer(&verification, body),
            Some((200, "pogchamp-kappa-360noscope-vohiyo".to_string()))
        );
        assert_eq!(answer(&headers("notification"), body), None);
        assert_eq!(
            answer(&verification, b"{}").map(|(status, _)| status),
            Some(400)
        );
    }
}
