//! A private key that signs the JWTs goad sends: a Google service
//! account's assertion (RS256), an OAuth 2 client's `private_key_jwt`
//! assertion (RFC 7523: RS256 or ES256), named by a `kid` or by its
//! certificate's thumbprints (`x5t`, `x5t#S256`: RFC 7515 §4.1.7–8, how
//! Microsoft Entra ID finds a client's certificate credential).

use super::BoxError;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use serde_json::{Map, Value};
use sha2::Digest as _;

/// A signing key and what its JWTs name it by: an id (`kid`), and the
/// thumbprints of its certificate.
pub struct JwtKey {
    kid: Option<String>,
    thumbprints: Option<Thumbprints>,
    pair: Pair,
}

/// A certificate's SHA-1 and SHA-256 thumbprints, base64url.
struct Thumbprints {
    sha1: String,
    sha256: String,
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
                let ec = EcdsaKeyPair::from_pkcs8(signing, der);
                let ec =
                    ec.map_err(|_| format!("not a usable RSA or P-256 key ({rsa_refusal})"))?;
                Pair::Es256(ec)
            }
        };
        Ok(JwtKey {
            kid: None,
            thumbprints: None,
            pair,
        })
    }

    /// This key, named `kid`.
    pub fn with_kid(self, kid: Option<String>) -> JwtKey {
        JwtKey { kid, ..self }
    }

    /// This key, named by the thumbprints of `certificate` (DER), which
    /// must be the certificate of this key.
    pub fn with_certificate(self, certificate: &CertificateDer) -> Result<JwtKey, String> {
        let parsed = webpki::EndEntityCert::try_from(certificate)
            .map_err(|e| format!("not an X.509 certificate ({e:?})"))?;
        // The SubjectPublicKeyInfo ends with its BIT STRING: the key's
        // public bytes, as aws-lc-rs gives them.
        let spki = parsed.subject_public_key_info();
        if !spki.as_ref().ends_with(self.public_key()) {
            return Err("its public key is not private_key_file's".into());
        }
        let thumbprints = Thumbprints {
            sha1: URL_SAFE_NO_PAD.encode(sha1::Sha1::digest(certificate)),
            sha256: URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(certificate)),
        };
        Ok(JwtKey {
            thumbprints: Some(thumbprints),
            ..self
        })
    }

    /// The public key's bytes (two keys sign alike when these are equal).
    pub fn public_key(&self) -> &[u8] {
        match &self.pair {
            Pair::Rs256(rsa) => rsa.public_key().as_ref(),
            Pair::Es256(ec) => ec.public_key().as_ref(),
        }
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// A JWT of `claims`: header `{"alg", "typ": "JWT", "kid", "x5t",
    /// "x5t#S256"}` (those it has), signed.
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
        if let Some(thumbprints) = &self.thumbprints {
            header.insert("x5t".into(), thumbprints.sha1.as_str().into());
            header.insert("x5t#S256".into(), thumbprints.sha256.as_str().into());
        }
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(Value::Object(header).to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let signature = match &self.pair {
            Pair::Rs256(rsa) => {
                let mut signature = vec![0; rsa.public_key().modulus_len()];
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
    use aws_lc_rs::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

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
