//! Standard Webhooks signatures: `webhook-signature` is a space-separated
//! list of signatures of `"<id>.<timestamp>.<body>"`, one per key:
//!
//! - symmetric, `v1,<base64(HMAC-SHA256(key, …))>`: a secret `whsec_<base64>`
//!   is the decoded bytes; any other non-empty string is used as raw bytes;
//! - asymmetric, `v1a,<base64(Ed25519 signature)>`: a secret
//!   `whsk_<base64>` is an Ed25519 private key (its 32-byte seed, or the
//!   seed and its public key, 64 bytes, as libsodium keeps it). Receivers
//!   verify with the public key, `whpk_<base64>` of its 32 bytes, and hold
//!   nothing that could sign.
//!
//! A [`SigningKey`] is what goad holds to sign; a [`Verifier`] what a
//! receiver (or goad's own ingest) holds to check.

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;
use std::sync::Arc;
use subtle::ConstantTimeEq;

const SECRET_PREFIX: &str = "whsec_";
const PRIVATE_KEY_PREFIX: &str = "whsk_";
const PUBLIC_KEY_PREFIX: &str = "whpk_";
const SEED_BYTES: usize = 32;
const PUBLIC_KEY_BYTES: usize = 32;

/// A secret that cannot sign or verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadSecret {
    Empty,
    /// Not base64 after this prefix.
    NotBase64(&'static str),
    /// A `whsk_` key that is not an Ed25519 key.
    NotAPrivateKey,
    /// A `whpk_` key that is not 32 bytes.
    NotAPublicKey,
    /// A public key where a signing key is needed.
    PublicKeyCannotSign,
}

impl fmt::Display for BadSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadSecret::Empty => write!(f, "the secret is empty"),
            BadSecret::NotBase64(prefix) => {
                write!(f, "a {prefix} secret must be base64 after the prefix")
            }
            BadSecret::NotAPrivateKey => write!(
                f,
                "a {PRIVATE_KEY_PREFIX} key must be an Ed25519 seed (32 bytes) or a seed and its \
                 public key (64 bytes)"
            ),
            BadSecret::NotAPublicKey => {
                write!(
                    f,
                    "a {PUBLIC_KEY_PREFIX} key must be an Ed25519 public key (32 bytes)"
                )
            }
            BadSecret::PublicKeyCannotSign => write!(
                f,
                "a {PUBLIC_KEY_PREFIX} key is a receiver's public key and cannot sign: give the \
                 {PRIVATE_KEY_PREFIX} key it was made with"
            ),
        }
    }
}

impl std::error::Error for BadSecret {}

/// The bytes after `prefix`, base64-decoded and not empty.
fn decoded(prefix: &'static str, b64: &str) -> Result<Vec<u8>, BadSecret> {
    let bytes = STANDARD
        .decode(b64)
        .map_err(|_| BadSecret::NotBase64(prefix))?;
    match bytes.is_empty() {
        true => Err(BadSecret::Empty),
        false => Ok(bytes),
    }
}

/// What is signed: `<id>.<timestamp>.` then the body, the timestamp as the
/// `webhook-timestamp` header's text.
fn signed_prefix(id: &str, timestamp: &str) -> String {
    format!("{id}.{timestamp}.")
}

/// The signed content in one piece, as Ed25519 takes it.
fn signed_content(id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    [signed_prefix(id, timestamp).as_bytes(), body].concat()
}

fn hmac(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(signed_prefix(id, timestamp).as_bytes());
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// A key goad signs with.
#[derive(Clone)]
pub enum SigningKey {
    Symmetric(Vec<u8>),
    Asymmetric(Arc<Ed25519KeyPair>),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SigningKey::Symmetric(_) => write!(f, "SigningKey(v1, ..)"),
            SigningKey::Asymmetric(_) => write!(f, "SigningKey(v1a, {})", self.verifier()),
        }
    }
}

impl SigningKey {
    pub fn parse(secret: &str) -> Result<SigningKey, BadSecret> {
        if secret.is_empty() {
            return Err(BadSecret::Empty);
        }
        if let Some(b64) = secret.strip_prefix(SECRET_PREFIX) {
            return decoded(SECRET_PREFIX, b64).map(SigningKey::Symmetric);
        }
        if let Some(b64) = secret.strip_prefix(PRIVATE_KEY_PREFIX) {
            let key = decoded(PRIVATE_KEY_PREFIX, b64)?;
            let pair = match key.len() {
                SEED_BYTES => Ed25519KeyPair::from_seed_unchecked(&key),
                64 => Ed25519KeyPair::from_seed_and_public_key(&key[..32], &key[32..]),
                _ => return Err(BadSecret::NotAPrivateKey),
            };
            let pair = pair.map_err(|_| BadSecret::NotAPrivateKey)?;
            return Ok(SigningKey::Asymmetric(Arc::new(pair)));
        }
        if secret.starts_with(PUBLIC_KEY_PREFIX) {
            return Err(BadSecret::PublicKeyCannotSign);
        }
        Ok(SigningKey::Symmetric(secret.as_bytes().to_vec()))
    }

    /// A new Ed25519 key from the system's randomness: its `whsk_` text
    /// (the seed and the public key, 64 bytes) and its verifier.
    pub fn generate() -> Result<(String, Verifier), aws_lc_rs::error::Unspecified> {
        let mut seed = [0u8; SEED_BYTES];
        SystemRandom::new().fill(&mut seed)?;
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|_| aws_lc_rs::error::Unspecified)?;
        let mut both = seed.to_vec();
        both.extend_from_slice(pair.public_key().as_ref());
        let key = SigningKey::Asymmetric(Arc::new(pair));
        Ok((
            format!("{PRIVATE_KEY_PREFIX}{}", STANDARD.encode(both)),
            key.verifier(),
        ))
    }

    /// A new `whsec_` secret of 32 random bytes.
    pub fn generate_secret() -> Result<String, aws_lc_rs::error::Unspecified> {
        let mut secret = [0u8; 32];
        SystemRandom::new().fill(&mut secret)?;
        Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(secret)))
    }

    /// This key's signature of one message: `v1,…` or `v1a,…`.
    pub fn sign(&self, id: &str, timestamp_s: u64, body: &[u8]) -> String {
        let timestamp = timestamp_s.to_string();
        match self {
            SigningKey::Symmetric(key) => {
                format!("v1,{}", STANDARD.encode(hmac(key, id, &timestamp, body)))
            }
            SigningKey::Asymmetric(pair) => {
                let signature = pair.sign(&signed_content(id, &timestamp, body));
                format!("v1a,{}", STANDARD.encode(signature.as_ref()))
            }
        }
    }

    /// What a receiver checks this key's signatures with: the same secret,
    /// or the public key of a private one.
    pub fn verifier(&self) -> Verifier {
        match self {
            SigningKey::Symmetric(key) => Verifier::Symmetric(key.clone()),
            SigningKey::Asymmetric(pair) => {
                let mut public = [0u8; PUBLIC_KEY_BYTES];
                public.copy_from_slice(pair.public_key().as_ref());
                Verifier::Public(public)
            }
        }
    }
}

/// What a receiver holds to check signatures: a shared secret (`v1`), or
/// an Ed25519 public key (`v1a`).
#[derive(Clone, PartialEq, Eq)]
pub enum Verifier {
    Symmetric(Vec<u8>),
    Public([u8; PUBLIC_KEY_BYTES]),
}

/// A public key is shown, a secret is not.
impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verifier::Symmetric(_) => write!(f, "Verifier(v1, ..)"),
            Verifier::Public(_) => write!(f, "Verifier(v1a, {self})"),
        }
    }
}

/// A public key's `whpk_` text (a secret's is not shown).
impl fmt::Display for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verifier::Symmetric(_) => f.write_str("a shared secret"),
            Verifier::Public(key) => write!(f, "{PUBLIC_KEY_PREFIX}{}", STANDARD.encode(key)),
        }
    }
}

impl Verifier {
    /// A `whpk_` public key, or a secret as [`SigningKey::parse`] reads it
    /// (a `whsk_` private key gives its public key).
    pub fn parse(text: &str) -> Result<Verifier, BadSecret> {
        match text.strip_prefix(PUBLIC_KEY_PREFIX) {
            Some(b64) => {
                let key = decoded(PUBLIC_KEY_PREFIX, b64)?;
                let key = <[u8; PUBLIC_KEY_BYTES]>::try_from(key.as_slice())
                    .map_err(|_| BadSecret::NotAPublicKey)?;
                Ok(Verifier::Public(key))
            }
            None => SigningKey::parse(text).map(|key| key.verifier()),
        }
    }

    /// Whether a `webhook-signature` header carries a signature of the
    /// message this verifier accepts (any of its space-separated entries;
    /// a secret's compared in constant time). `timestamp` is the
    /// `webhook-timestamp` header's text, as signed.
    pub fn verify(&self, header: &str, id: &str, timestamp: &str, body: &[u8]) -> bool {
        let signatures = header.split(' ').filter_map(|entry| entry.split_once(','));
        match self {
            Verifier::Symmetric(key) => {
                let expected = STANDARD.encode(hmac(key, id, timestamp, body));
                signatures
                    .filter(|(version, _)| *version == "v1")
                    .any(|(_, b64)| bool::from(b64.as_bytes().ct_eq(expected.as_bytes())))
            }
            Verifier::Public(key) => {
                let public = UnparsedPublicKey::new(&ED25519, key);
                let content = signed_content(id, timestamp, body);
                signatures
                    .filter(|(version, _)| *version == "v1a")
                    .filter_map(|(_, b64)| STANDARD.decode(b64).ok())
                    .any(|signature| public.verify(&content, &signature).is_ok())
            }
        }
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
        let verifier = keys[1].verifier();
        assert!(verifier.verify(&header, "id", "1", b"b"));
        assert!(
            !verifier.verify(&header, "id", "2", b"b"),
            "another timestamp"
        );
        assert!(!verifier.verify(&header, "id", "1", b"c"), "another body");
        let other = Verifier::parse("whsec_b3RoZXI=").unwrap();
        // The timestamp as its header's text: signed as "0123", it is not "123".
        let padded = format!(
            "v1,{}",
            STANDARD.encode(hmac(b"second", "id", "0123", b"b"))
        );
        assert!(verifier.verify(&padded, "id", "0123", b"b"));
        assert!(!verifier.verify(&padded, "id", "123", b"b"));
        assert!(!other.verify(&header, "id", "1", b"b"), "another key");
        assert_eq!(SigningKey::parse("").unwrap_err(), BadSecret::Empty);
        assert_eq!(
            SigningKey::parse("whsec_!!!").unwrap_err(),
            BadSecret::NotBase64("whsec_")
        );
    }

    /// RFC 8032's first Ed25519 test key, as a `whsk_` seed and as seed and
    /// public key: its public key is the RFC's, its `v1a` signatures verify
    /// with that key alone and not over another message, and a `v1`
    /// signature of the same bytes is no `v1a` one.
    #[test]
    fn an_ed25519_key_signs_v1a_which_its_public_key_verifies() {
        let seed = hex::decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        let public = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
        let seed = seed.unwrap();
        let both = [seed.clone(), hex::decode(public).unwrap()].concat();
        let whpk = format!("whpk_{}", STANDARD.encode(hex::decode(public).unwrap()));
        for secret in [&seed, &both] {
            let key = SigningKey::parse(&format!("whsk_{}", STANDARD.encode(secret))).unwrap();
            assert_eq!(key.verifier().to_string(), whpk);
            let header = key.sign("msg_1", 1_700_000_000, b"{}");
            assert!(header.starts_with("v1a,"), "{header}");
            let receiver = Verifier::parse(&whpk).unwrap();
            assert!(receiver.verify(&header, "msg_1", "1700000000", b"{}"));
            assert!(!receiver.verify(&header, "msg_1", "1700000000", b"[]"));
            assert!(!receiver.verify(&header, "msg_2", "1700000000", b"{}"));
            let as_v1 = header.replacen("v1a,", "v1,", 1);
            assert!(!receiver.verify(&as_v1, "msg_1", "1700000000", b"{}"));
        }
        let wrong_public = [seed.clone(), vec![0; 32]].concat();
        let refused = SigningKey::parse(&format!("whsk_{}", STANDARD.encode(wrong_public)));
        assert_eq!(refused.unwrap_err(), BadSecret::NotAPrivateKey);
        assert_eq!(
            SigningKey::parse(&whpk).unwrap_err(),
            BadSecret::PublicKeyCannotSign
        );
        assert_eq!(
            Verifier::parse("whpk_AAAA").unwrap_err(),
            BadSecret::NotAPublicKey
        );
    }

    #[test]
    fn a_generated_key_signs_what_its_verifier_accepts() {
        let (text, verifier) = SigningKey::generate().unwrap();
        let key = SigningKey::parse(&text).unwrap();
        assert_eq!(key.verifier(), verifier);
        let header = key.sign("id", 1, b"body");
        assert!(Verifier::parse(&verifier.to_string())
            .unwrap()
            .verify(&header, "id", "1", b"body"));
        let secret = SigningKey::generate_secret().unwrap();
        assert_eq!(
            STANDARD.decode(&secret["whsec_".len()..]).unwrap().len(),
            32
        );
        assert_ne!(SigningKey::generate().unwrap().0, text, "random");
    }
}
