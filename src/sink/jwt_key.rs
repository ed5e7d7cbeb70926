//! A private key that signs the JWTs goad sends: a Google service
//! account's assertion (RS256), an OAuth 2 client's `private_key_jwt`
//! assertion (RFC 7523: RS256 or ES256).

use super::BoxError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivatePkcs8KeyDer;
use serde_json::{Map, Value};

/// A signing key and the id (`kid`) its JWTs name it by.
pub struct JwtKey {
    kid: Option<String>,
    pair: Pair,
}

enum Pair {
    Rs256(RsaKeyPair),
    Es256(EcdsaKeyPair),
}

impl JwtKey {
    /// The key of a PEM "PRIVATE KEY" (PKCS #8): RSA, or EC on P-256,
    /// named by no `kid` (see `with_kid`).
    pub fn from_pem(pem: &[u8]) -> Result<JwtKey, String> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem)
            .map_err(|_| "not a PEM \"PRIVATE KEY\" (PKCS #8)")?;
        let der = der.secret_pkcs8_der();
        let pair = match RsaKeyPair::from_pkcs8(der) {
            Ok(rsa) => Pair::Rs256(rsa),
            Err(rsa_refusal) => {
                let signing = &ECDSA_P256_SHA256_FIXED_SIGNING;
                let ec = EcdsaKeyPair::from_pkcs8(signing, der, &SystemRandom::new());
                let ec =
                    ec.map_err(|_| format!("not a usable RSA or P-256 key ({rsa_refusal})"))?;
                Pair::Es256(ec)
            }
        };
        Ok(JwtKey { kid: None, pair })
    }

    /// This key, named `kid`.
    pub fn with_kid(self, kid: Option<String>) -> JwtKey {
        JwtKey { kid, ..self }
    }

    /// The public key's bytes (two keys sign alike when these are equal).
    pub fn public_key(&self) -> &[u8] {
        match &self.pair {
            Pair::Rs256(rsa) => rsa.public().as_ref(),
            Pair::Es256(ec) => ec.public_key().as_ref(),
        }
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// A JWT of `claims`: header `{"alg", "typ": "JWT", "kid"}`, signed.
    pub fn sign(&self, claims: &Value) -> Result<String, BoxError> {
        let mut header = Map::new();
        let alg = match self.pair {
            Pair::Rs256(_) => "RS256",
            Pair::Es256(_) => "ES256",
        };
        header.insert("alg".into(), alg.into());
        header.insert("typ".into(), "JWT".into());
        if let Some(kid) = &self.kid {
            header.insert("kid".into(), kid.as_str().into());
        }
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(Value::Object(header).to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let signature = match &self.pair {
            Pair::Rs256(rsa) => {
                let mut signature = vec![0; rsa.public().modulus_len()];
                rsa.sign(&RSA_PKCS1_SHA256, &rng, signed.as_bytes(), &mut signature)
                    .map_err(|_| "cannot sign the JWT")?;
                signature
            }
            Pair::Es256(ec) => (ec.sign(&rng, signed.as_bytes()))
                .map_err(|_| "cannot sign the JWT")?
                .as_ref()
                .to_vec(),
        };
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    /// A P-256 key as PEM, as `openssl genpkey` writes one.
    fn ec_pem() -> String {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
    }

    #[test]
    fn an_ec_key_signs_es256_jwts_its_public_key_verifies() {
        let key = JwtKey::from_pem(ec_pem().as_bytes())
            .unwrap()
            .with_kid(Some("k2".into()));
        let jwt = key.sign(&serde_json::json!({"sub": "goad"})).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(
            header,
            serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": "k2"})
        );
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &signature).unwrap();
    }

    #[test]
    fn a_pem_that_is_no_usable_key_says_why() {
        let wrong = |pem: &str| JwtKey::from_pem(pem.as_bytes()).err().unwrap();
        assert_eq!(wrong("hello"), "not a PEM \"PRIVATE KEY\" (PKCS #8)");
        let junk = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(wrong(junk).starts_with("not a usable RSA or P-256 key ("));
    }
}
