//! A Google service-account key file — the JSON file that Google Cloud's
//! console and `gcloud iam service-accounts keys create` write and that
//! `GOOGLE_APPLICATION_CREDENTIALS` names — and the signed JWT (RS256) it
//! makes to ask Google's token endpoint for an access token (the OAuth 2
//! JWT bearer grant, RFC 7523).

use super::client::{form, ok_body, Client};
use super::jwt_key::JwtKey;
use super::BoxError;
use crate::bounded_read::read_text_at_most;
use crate::limits::MAX_KEY_FILE_BYTES;
use serde::Deserialize;
use serde_json::json;
use std::fmt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Google's token endpoint, where a key file (or a user's) names none.
pub(super) const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// How long an assertion is valid: the most Google accepts.
const ASSERTION_LIFETIME_S: u64 = 3600;

/// A service account's identity and private key.
pub struct ServiceAccountKey {
    pub client_email: String,
    pub token_uri: String,
    /// Named by the file's `private_key_id`.
    key: JwtKey,
}

/// The same account, token endpoint and key (a key pair by its public key).
impl PartialEq for ServiceAccountKey {
    fn eq(&self, other: &ServiceAccountKey) -> bool {
        let ServiceAccountKey {
            client_email,
            token_uri,
            key,
        } = self;
        *client_email == other.client_email
            && *token_uri == other.token_uri
            && key.kid() == other.key.kid()
            && key.public_key() == other.key.public_key()
    }
}

/// The account only: no key in logs.
impl fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceAccountKey({})", self.client_email)
    }
}

/// The fields of a key file goad reads.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    client_email: String,
    private_key: String,
    private_key_id: Option<String>,
    token_uri: Option<String>,
}

impl ServiceAccountKey {
    /// The key in the file at `path`; the error names the file and what is
    /// wrong with it.
    pub fn read(path: &Path) -> Result<ServiceAccountKey, String> {
        let text = read_text_at_most(path, MAX_KEY_FILE_BYTES)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        ServiceAccountKey::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<ServiceAccountKey, String> {
        let file: KeyFile = serde_json::from_str(text)
            .map_err(|e| format!("not a service-account key file ({e})"))?;
        if file.kind != "service_account" {
            return Err(format!(
                "its type is {:?}, not \"service_account\"",
                file.kind
            ));
        }
        let key = JwtKey::from_pem(file.private_key.as_bytes())
            .map_err(|why| format!("its private_key is {why}"))?
            .with_kid(file.private_key_id);
        Ok(ServiceAccountKey {
            client_email: file.client_email,
            token_uri: file.token_uri.unwrap_or_else(|| GOOGLE_TOKEN_URI.into()),
            key,
        })
    }

    /// The token endpoint's answer (its body) to the OAuth 2 JWT bearer
    /// grant of `assertion(asked, now)`, asked with `client`.
    pub fn exchange(
        &self,
        client: &Client,
        asked: (&str, &str),
        now: SystemTime,
    ) -> Result<String, BoxError> {
        let assertion = self.assertion(asked, now)?;
        let body = form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", &assertion),
        ]);
        let request = (client.post(&self.token_uri))
            .header("content-type", "application/x-www-form-urlencoded");
        ok_body(request.send(body))
    }

    /// A JWT asserting this account at `now` to the token endpoint, with
    /// what it asks for: `("scope", s)`, an access token of scope `s`, or
    /// `("target_audience", a)`, an ID token for audience `a`.
    pub fn assertion(&self, asked: (&str, &str), now: SystemTime) -> Result<String, BoxError> {
        let issued_s = now.duration_since(UNIX_EPOCH)?.as_secs();
        let mut claims = json!({
            "iss": self.client_email,
            "aud": self.token_uri,
            "iat": issued_s,
            "exp": issued_s + ASSERTION_LIFETIME_S,
        });
        claims[asked.0] = asked.1.into();
        self.key.sign(&claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    use serde_json::Value;
    use std::time::Duration;

    const TEST_KEY_PEM: &str =
        include_str!("../../tests/fixtures/google-service-account-test-key.pem");

    fn key_file(private_key: &str, token_uri: Option<&str>) -> String {
        let mut file = json!({
            "type": "service_account",
            "project_id": "p",
            "private_key_id": "k1",
            "private_key": private_key,
            "client_email": "goad@p.iam.gserviceaccount.com",
        });
        if let Some(uri) = token_uri {
            file["token_uri"] = uri.into();
        }
        file.to_string()
    }

    fn decoded(part: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn an_assertion_is_signed_by_the_key_and_claims_the_account_scope_and_hour() {
        let key = ServiceAccountKey::parse(&key_file(TEST_KEY_PEM, None)).unwrap();
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let jwt = key.assertion(("scope", "https://s"), now).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(
            decoded(parts[0]),
            json!({"alg": "RS256", "typ": "JWT", "kid": "k1"})
        );
        assert_eq!(
            decoded(parts[1]),
            json!({
                "iss": "goad@p.iam.gserviceaccount.com",
                "scope": "https://s",
                "aud": "https://oauth2.googleapis.com/token",
                "iat": 1_700_000_000u64,
                "exp": 1_700_003_600u64,
            })
        );
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.key.public_key());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &signature).unwrap();
        let tampered = format!("{}.{}", parts[0], parts[0]);
        assert!(public.verify(tampered.as_bytes(), &signature).is_err());
    }

    #[test]
    fn a_file_that_is_not_a_usable_key_is_named_with_what_is_wrong() {
        let wrong = |text: &str| ServiceAccountKey::parse(text).unwrap_err();
        assert!(wrong("{}").starts_with("not a service-account key file (missing field"));
        let user = key_file(TEST_KEY_PEM, None).replace("service_account", "authorized_user");
        assert_eq!(
            wrong(&user),
            "its type is \"authorized_user\", not \"service_account\""
        );
        assert_eq!(
            wrong(&key_file("MIIB", None)),
            "its private_key is not a PEM \"PRIVATE KEY\" (PKCS #8)"
        );
        let not_rsa = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(wrong(&key_file(not_rsa, None))
            .starts_with("its private_key is not a usable RSA or P-256 key ("));
        let missing = ServiceAccountKey::read(Path::new("/nonexistent/key.json")).unwrap_err();
        assert!(missing.starts_with("cannot read /nonexistent/key.json: "));
        let own_uri = key_file(TEST_KEY_PEM, Some("http://127.0.0.1:9/token"));
        let key = ServiceAccountKey::parse(&own_uri).unwrap();
        assert_eq!(key.token_uri, "http://127.0.0.1:9/token");
        assert_eq!(
            format!("{key:?}"),
            "ServiceAccountKey(goad@p.iam.gserviceaccount.com)"
        );
    }
}
