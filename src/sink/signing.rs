//! Standard Webhooks signatures: `webhook-signature` is a space-separated
//! list of `v1,<base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))>`, one per
//! secret. A secret `whsec_<base64>` is the decoded bytes; any other
//! non-empty string is used as raw bytes.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use subtle::ConstantTimeEq;

/// A secret that cannot sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadSecret {
    Empty,
    NotBase64,
}

impl fmt::Display for BadSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadSecret::Empty => write!(f, "the secret is empty"),
            BadSecret::NotBase64 => write!(f, "a whsec_ secret must be base64 after the prefix"),
        }
    }
}

impl std::error::Error for BadSecret {}

/// A signing key.
#[derive(Clone)]
pub struct SigningKey(Vec<u8>);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(..)")
    }
}

impl SigningKey {
    pub fn parse(secret: &str) -> Result<SigningKey, BadSecret> {
        if secret.is_empty() {
            return Err(BadSecret::Empty);
        }
        match secret.strip_prefix("whsec_") {
            Some(b64) => {
                let key = STANDARD.decode(b64).map_err(|_| BadSecret::NotBase64)?;
                if key.is_empty() {
                    return Err(BadSecret::Empty);
                }
                Ok(SigningKey(key))
            }
            None => Ok(SigningKey(secret.as_bytes().to_vec())),
        }
    }

    /// The key's bytes (a `whsec_` secret decoded).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// `v1,<base64 signature>` of one message.
    pub fn sign(&self, id: &str, timestamp_s: u64, body: &[u8]) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp_s.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }

    /// Whether a `webhook-signature` header carries this key's signature of
    /// the message (any of its space-separated entries; compared in
    /// constant time): what a consumer checks.
    pub fn verify(&self, header: &str, id: &str, timestamp_s: u64, body: &[u8]) -> bool {
        let expected = self.sign(id, timestamp_s, body);
        header
            .split(' ')
            .any(|entry| bool::from(entry.as_bytes().ct_eq(expected.as_bytes())))
    }
}

/// The `webhook-signature` header value for all keys, in order.
pub fn signature_header(keys: &[SigningKey], id: &str, timestamp_s: u64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| k.sign(id, timestamp_s, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // The example from the Standard Webhooks specification's test suite.
        let key = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            key.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn one_signature_per_key_and_bad_secrets_rejected() {
        let keys = [
            SigningKey::parse("raw-secret").unwrap(),
            SigningKey::parse("whsec_c2Vjb25k").unwrap(),
        ];
        let header = signature_header(&keys, "id", 1, b"b");
        assert_eq!(header.split(' ').count(), 2);
        assert!(header.split(' ').all(|s| s.starts_with("v1,")));
        assert!(keys[1].verify(&header, "id", 1, b"b"));
        assert!(!keys[1].verify(&header, "id", 2, b"b"), "another timestamp");
        assert!(!keys[1].verify(&header, "id", 1, b"c"), "another body");
        let other = SigningKey::parse("whsec_b3RoZXI=").unwrap();
        assert!(!other.verify(&header, "id", 1, b"b"), "another key");
        assert_eq!(SigningKey::parse("").unwrap_err(), BadSecret::Empty);
        assert_eq!(
            SigningKey::parse("whsec_!!!").unwrap_err(),
            BadSecret::NotBase64
        );
    }
}
