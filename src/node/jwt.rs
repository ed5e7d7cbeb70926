//! OpenID Connect tokens at ingest (a source's `ingest_jwt`): an issuer's
//! JSON Web Key Set (RFC 7517) read into verifying keys, and a bearer
//! token (RFC 7519) checked against them — its signature (RS256 or ES256:
//! `none`, HMAC and other algorithms are refused, so a token cannot choose
//! how it is checked), its lifetime, issuer and audience, and the claims
//! the source names. Fetching the keys is `jwks`'s.

use crate::limits::JWT_CLOCK_SKEW_S;
use aws_lc_rs::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The signing keys of an issuer's key set.
pub struct KeySet {
    keys: Vec<Key>,
}

struct Key {
    kid: Option<String>,
    verifier: Verifier,
}

/// A public key, by the one algorithm it verifies.
enum Verifier {
    Rs256(RsaPublicKeyComponents<Vec<u8>>),
    /// An uncompressed P-256 point.
    Es256(Vec<u8>),
}

impl Verifier {
    fn alg(&self) -> &'static str {
        match self {
            Verifier::Rs256(_) => "RS256",
            Verifier::Es256(_) => "ES256",
        }
    }

    fn verifies(&self, signed: &[u8], signature: &[u8]) -> bool {
        match self {
            Verifier::Rs256(key) => key
                .verify(&RSA_PKCS1_2048_8192_SHA256, signed, signature)
                .is_ok(),
            Verifier::Es256(point) => UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(signed, signature)
                .is_ok(),
        }
    }
}

impl KeySet {
    /// The RS256 and ES256 signing keys of a JWKS document; keys of other
    /// types, curves, algorithms or uses are skipped. A set with none is
    /// an error, as is a document that is not a key set.
    pub fn parse(document: &str) -> Result<KeySet, String> {
        let document: Value =
            serde_json::from_str(document).map_err(|e| format!("not JSON: {e}"))?;
        let Some(entries) = document.get("keys").and_then(Value::as_array) else {
            return Err("not a JSON Web Key Set (no \"keys\" list)".into());
        };
        let keys: Vec<Key> = entries.iter().filter_map(Key::read).collect();
        if keys.is_empty() {
            let n = entries.len();
            return Err(format!(
                "none of its {n} keys is an RS256 or ES256 signing key"
            ));
        }
        Ok(KeySet { keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

impl Key {
    /// A signing key goad can verify with, or `None`.
    fn read(jwk: &Value) -> Option<Key> {
        let field = |name: &str| jwk.get(name).and_then(Value::as_str);
        let bytes = |name: &str| URL_SAFE_NO_PAD.decode(field(name)?).ok();
        if field("use").is_some_and(|u| u != "sig") {
            return None;
        }
        let verifier = match (field("kty")?, field("crv")) {
            ("RSA", _) => {
                let n = bytes("n")?;
                let n = n.iter().position(|b| *b != 0).map(|i| n[i..].to_vec())?;
                Verifier::Rs256(RsaPublicKeyComponents { n, e: bytes("e")? })
            }
            ("EC", Some("P-256")) => {
                let (x, y) = (bytes("x")?, bytes("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return None;
                }
                Verifier::Es256([&[4][..], &x, &y].concat())
            }
            _ => return None,
        };
        if field("alg").is_some_and(|alg| alg != verifier.alg()) {
            return None;
        }
        let kid = field("kid").map(str::to_string);
        Some(Key { kid, verifier })
    }
}

/// What a source asks of a token.
pub struct Expected<'a> {
    /// One of these is its `iss`.
    pub issuers: &'a [String],
    /// Its `aud` is this, or a list holding it.
    pub audience: &'a str,
    /// It carries each of these claims with this value.
    pub claims: &'a BTreeMap<String, Value>,
}

/// Why a token is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It names (by `kid`) a key the set does not hold: the issuer may
    /// have published a new one since the set was fetched.
    UnknownKey(String),
    /// What is wrong with it, to tell its sender.
    Invalid(String),
}

fn invalid(why: impl Into<String>) -> Refusal {
    Refusal::Invalid(why.into())
}

/// Checks `token` at `now_s` (Unix seconds): signed by a key of `keys`,
/// not expired nor early (within `JWT_CLOCK_SKEW_S`), and as `expected`.
pub fn verify(token: &str, keys: &KeySet, expected: &Expected, now_s: u64) -> Result<(), Refusal> {
    let parts: Vec<&str> = token.split('.').collect();
    let [header, payload, signature] = parts[..] else {
        return Err(invalid(
            "the bearer token is not a JWT (three base64url parts)",
        ));
    };
    let header = json_part(header, "header")?;
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
    if alg != "RS256" && alg != "ES256" {
        return Err(invalid(format!(
            "the token's alg is {alg:?}; only RS256 and ES256 are taken"
        )));
    }
    let kid = header.get("kid").and_then(Value::as_str);
    let named: Vec<&Key> = match kid {
        Some(kid) => keys
            .keys
            .iter()
            .filter(|k| k.kid.as_deref() == Some(kid))
            .collect(),
        None => keys.keys.iter().collect(),
    };
    if let (Some(kid), true) = (kid, named.is_empty()) {
        return Err(Refusal::UnknownKey(kid.to_string()));
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| invalid("the token's signature is not base64url"))?;
    let signed = &token.as_bytes()[..token.len() - parts[2].len() - 1];
    let by_alg = named.iter().filter(|k| k.verifier.alg() == alg);
    if !by_alg
        .clone()
        .any(|k| k.verifier.verifies(signed, &signature))
    {
        let which = kid.map_or(String::new(), |kid| format!(" {kid:?}"));
        return Err(invalid(match (by_alg.count(), kid) {
            (0, Some(kid)) => format!("the issuer's key {kid:?} is not an {alg} key"),
            (0, None) => format!("the issuer has no {alg} key"),
            _ => {
                format!("the token's signature does not verify with the issuer's {alg} key{which}")
            }
        }));
    }
    let claims = json_part(payload, "payload")?;
    check_times(&claims, now_s)?;
    check_claims(&claims, expected)
}

/// A part of the token: base64url JSON object.
fn json_part(part: &str, name: &str) -> Result<Map<String, Value>, Refusal> {
    let decoded = URL_SAFE_NO_PAD.decode(part).ok();
    let object = decoded.and_then(|bytes| serde_json::from_slice(&bytes).ok());
    object.ok_or_else(|| invalid(format!("the token's {name} is not base64url JSON")))
}

/// `exp` (required) not past, `nbf` (if any) reached.
fn check_times(claims: &Map<String, Value>, now_s: u64) -> Result<(), Refusal> {
    let seconds = |name: &str| match claims.get(name) {
        None => Ok(None),
        // A NumericDate may have a fraction: its whole seconds serve.
        Some(v) => match v.as_f64().filter(|s| *s >= 0.0) {
            Some(s) => Ok(Some(s as u64)),
            None => Err(invalid(format!("the token's {name} is {v}, not a time"))),
        },
    };
    let Some(exp) = seconds("exp")? else {
        return Err(invalid("the token has no exp (expiry)"));
    };
    if now_s > exp.saturating_add(JWT_CLOCK_SKEW_S) {
        return Err(invalid(format!("the token expired {} s ago", now_s - exp)));
    }
    if let Some(nbf) = seconds("nbf")? {
        if nbf > now_s + JWT_CLOCK_SKEW_S {
            let wait_s = nbf - now_s;
            return Err(invalid(format!(
                "the token is not valid for {wait_s} s more"
            )));
        }
    }
    Ok(())
}

/// `iss`, `aud` and the source's own claims.
fn check_claims(claims: &Map<String, Value>, expected: &Expected) -> Result<(), Refusal> {
    let shown = |name: &str| claims.get(name).map_or("absent".into(), Value::to_string);
    let iss = claims.get("iss").and_then(Value::as_str);
    if !iss.is_some_and(|iss| expected.issuers.iter().any(|i| i == iss)) {
        return Err(invalid(format!(
            "the token's iss is {}, not one of {:?}",
            shown("iss"),
            expected.issuers
        )));
    }
    let audience = expected.audience;
    let for_us = match claims.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return Err(invalid(format!(
            "the token's aud is {}, not {audience:?}",
            shown("aud")
        )));
    }
    for (name, value) in expected.claims {
        if claims.get(name) != Some(value) {
            let shown = shown(name);
            return Err(invalid(format!(
                "the token's {name} is {shown}, not {value}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
    };
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::PrivatePkcs8KeyDer;
    use serde_json::json;

    const NOW_S: u64 = 1_800_000_000;

    fn rsa_key() -> RsaKeyPair {
        let pem = include_str!("../../tests/fixtures/google-service-account-test-key.pem");
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).unwrap();
        RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap()
    }

    fn ec_key() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap()
    }

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn rsa_jwk(key: &RsaKeyPair, kid: &str) -> Value {
        let public = RsaPublicKeyComponents::<Vec<u8>>::from(key.public_key());
        json!({
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": b64(&public.n), "e": b64(&public.e),
        })
    }

    fn ec_jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
        let point = key.public_key().as_ref();
        json!({
            "kty": "EC", "crv": "P-256", "kid": kid,
            "x": b64(&point[1..33]), "y": b64(&point[33..]),
        })
    }

    /// `header.payload` signed with `sign`.
    fn token(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
        let signed = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        format!("{signed}.{}", b64(&sign(signed.as_bytes())))
    }

    fn rs256(key: &RsaKeyPair) -> impl Fn(&[u8]) -> Vec<u8> + '_ {
        |message| {
            let mut signature = vec![0; key.public_key().modulus_len()];
            let rng = SystemRandom::new();
            key.sign(
                &aws_lc_rs::signature::RSA_PKCS1_SHA256,
                &rng,
                message,
                &mut signature,
            )
            .unwrap();
            signature
        }
    }

    fn es256(key: &EcdsaKeyPair) -> impl Fn(&[u8]) -> Vec<u8> + '_ {
        |message| {
            key.sign(&SystemRandom::new(), message)
                .unwrap()
                .as_ref()
                .to_vec()
        }
    }

    fn google_claims() -> Value {
        json!({
            "iss": "https://accounts.google.com",
            "aud": "https://goad.example/v1/sources/push/hooks",
            "email": "pusher@p.iam.gserviceaccount.com",
            "email_verified": true,
            "iat": NOW_S - 10,
            "exp": NOW_S + 3_590,
        })
    }

    fn check(token: &str, keys: &KeySet, now_s: u64) -> Result<(), Refusal> {
        let issuers = [
            "https://accounts.google.com".to_string(),
            "accounts.google.com".to_string(),
        ];
        let claims = BTreeMap::from([
            (
                "email".to_string(),
                json!("pusher@p.iam.gserviceaccount.com"),
            ),
            ("email_verified".to_string(), json!(true)),
        ]);
        let expected = Expected {
            issuers: &issuers,
            audience: "https://goad.example/v1/sources/push/hooks",
            claims: &claims,
        };
        verify(token, keys, &expected, now_s)
    }

    fn refused(why: &str) -> Result<(), Refusal> {
        Err(Refusal::Invalid(why.to_string()))
    }

    /// A key set of one RSA and one EC key (and keys goad skips): tokens
    /// each signs, as Google's and Entra's are, verify; each thing wrong
    /// with a token is refused saying what.
    #[test]
    fn a_token_verifies_only_when_signed_by_a_key_of_the_set_for_this_source() {
        let (rsa, ec) = (rsa_key(), ec_key());
        let set = json!({"keys": [
            rsa_jwk(&rsa, "r1"),
            ec_jwk(&ec, "e1"),
            {"kty": "oct", "k": "c2VjcmV0", "kid": "h1"},
            {"kty": "RSA", "use": "enc", "kid": "x1", "n": "AQAB", "e": "AQAB"},
            {"kty": "EC", "crv": "P-384", "kid": "x2", "x": "AA", "y": "AA"},
        ]});
        let keys = KeySet::parse(&set.to_string()).unwrap();
        assert_eq!(keys.len(), 2);
        let claims = google_claims();
        let rs = |claims: &Value| {
            token(
                &json!({"alg": "RS256", "kid": "r1", "typ": "JWT"}),
                claims,
                rs256(&rsa),
            )
        };
        assert_eq!(check(&rs(&claims), &keys, NOW_S), Ok(()));
        let es = token(&json!({"alg": "ES256", "kid": "e1"}), &claims, es256(&ec));
        assert_eq!(check(&es, &keys, NOW_S), Ok(()));
        // No kid: any key of its algorithm may have signed it.
        let no_kid = token(&json!({"alg": "ES256"}), &claims, es256(&ec));
        assert_eq!(check(&no_kid, &keys, NOW_S), Ok(()));
        // An audience list holding this source's.
        let mut listed = claims.clone();
        listed["aud"] = json!(["other", "https://goad.example/v1/sources/push/hooks"]);
        assert_eq!(check(&rs(&listed), &keys, NOW_S), Ok(()));

        // Signed by another key, or under another kid's name.
        let other = token(&json!({"alg": "RS256", "kid": "r1"}), &claims, es256(&ec));
        assert_eq!(
            check(&other, &keys, NOW_S),
            refused("the token's signature does not verify with the issuer's RS256 key \"r1\"")
        );
        let swapped = token(&json!({"alg": "RS256", "kid": "e1"}), &claims, rs256(&rsa));
        assert_eq!(
            check(&swapped, &keys, NOW_S),
            refused("the issuer's key \"e1\" is not an RS256 key")
        );
        let rotated = token(&json!({"alg": "RS256", "kid": "r2"}), &claims, rs256(&rsa));
        assert_eq!(
            check(&rotated, &keys, NOW_S),
            Err(Refusal::UnknownKey("r2".into()))
        );
        // Its claims changed after signing.
        let signed = rs(&claims);
        let parts: Vec<&str> = signed.split('.').collect();
        let mut forged = claims.clone();
        forged["email"] = json!("intruder@q.iam.gserviceaccount.com");
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            b64(forged.to_string().as_bytes()),
            parts[2]
        );
        assert_eq!(
            check(&tampered, &keys, NOW_S),
            refused("the token's signature does not verify with the issuer's RS256 key \"r1\"")
        );
        // An algorithm the token chooses: none, or an HMAC keyed by a public key.
        let none = format!("{}.{}.", b64(br#"{"alg":"none"}"#), parts[1]);
        assert_eq!(
            check(&none, &keys, NOW_S),
            refused("the token's alg is \"none\"; only RS256 and ES256 are taken")
        );
        let hs = token(&json!({"alg": "HS256", "kid": "r1"}), &claims, |_| {
            vec![0; 32]
        });
        assert_eq!(
            check(&hs, &keys, NOW_S),
            refused("the token's alg is \"HS256\"; only RS256 and ES256 are taken")
        );
        assert_eq!(
            check("opaque-token", &keys, NOW_S),
            refused("the bearer token is not a JWT (three base64url parts)")
        );
        assert_eq!(
            check("a.b.c", &keys, NOW_S),
            refused("the token's header is not base64url JSON")
        );

        // Its times: within the clock skew, and past it.
        let exp = NOW_S + 3_590;
        assert_eq!(check(&rs(&claims), &keys, exp + 60), Ok(()));
        assert_eq!(
            check(&rs(&claims), &keys, exp + 61),
            refused("the token expired 61 s ago")
        );
        let mut early = claims.clone();
        early["nbf"] = json!(NOW_S + 61);
        assert_eq!(
            check(&rs(&early), &keys, NOW_S),
            refused("the token is not valid for 61 s more")
        );
        early["nbf"] = json!(NOW_S + 60);
        assert_eq!(check(&rs(&early), &keys, NOW_S), Ok(()));
        let mut endless = claims.clone();
        endless.as_object_mut().unwrap().remove("exp");
        assert_eq!(
            check(&rs(&endless), &keys, NOW_S),
            refused("the token has no exp (expiry)")
        );
        // A far future (past u64 seconds) is a far future, not a wrapped past.
        endless["exp"] = json!(1e30);
        assert_eq!(check(&rs(&endless), &keys, NOW_S), Ok(()));
        endless["exp"] = json!("tomorrow");
        assert_eq!(
            check(&rs(&endless), &keys, NOW_S),
            refused("the token's exp is \"tomorrow\", not a time")
        );

        // Who issued it, for whom, and its sender.
        let with = |name: &str, value: Value| {
            let mut claims = claims.clone();
            claims[name] = value;
            check(&rs(&claims), &keys, NOW_S)
        };
        assert_eq!(with("iss", json!("https://evil.example")), refused("the token's iss is \"https://evil.example\", not one of [\"https://accounts.google.com\", \"accounts.google.com\"]"));
        assert_eq!(with("aud", json!("https://other.example/hook")), refused("the token's aud is \"https://other.example/hook\", not \"https://goad.example/v1/sources/push/hooks\""));
        assert_eq!(with("email", json!("intruder@q.iam.gserviceaccount.com")), refused("the token's email is \"intruder@q.iam.gserviceaccount.com\", not \"pusher@p.iam.gserviceaccount.com\""));
        assert_eq!(
            with("email_verified", json!(false)),
            refused("the token's email_verified is false, not true")
        );
        let mut anonymous = claims.clone();
        anonymous.as_object_mut().unwrap().remove("email");
        assert_eq!(
            check(&rs(&anonymous), &keys, NOW_S),
            refused("the token's email is absent, not \"pusher@p.iam.gserviceaccount.com\"")
        );
    }

    /// A document that is not a key set, or holds no key goad verifies
    /// with, is an error saying so.
    #[test]
    fn a_key_set_without_a_usable_key_is_refused() {
        let wrong = |text: &str| KeySet::parse(text).err().unwrap();
        assert!(wrong("<html>").starts_with("not JSON: "));
        assert_eq!(wrong("{}"), "not a JSON Web Key Set (no \"keys\" list)");
        assert_eq!(
            wrong(
                r#"{"keys": [{"kty": "oct", "k": "AA"}, {"kty": "RSA", "alg": "RS512", "n": "AQAB", "e": "AQAB"}]}"#
            ),
            "none of its 2 keys is an RS256 or ES256 signing key"
        );
    }
}
