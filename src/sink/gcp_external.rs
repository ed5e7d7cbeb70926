//! Workload identity federation: a Google credential configuration file
//! of `type` `external_account` — what `gcloud iam workload-identity-pools
//! create-cred-config` writes and `GOOGLE_APPLICATION_CREDENTIALS` names —
//! lets a node outside Google Cloud (on AWS, Azure, Kubernetes, on
//! premises) publish without a service-account key:
//!
//! 1. the subject token (an OIDC token of the node's own platform) is read
//!    from the file or URL of `credential_source`, as text or as a field of
//!    a JSON document (`format`), at each exchange, so a rotated token is
//!    used;
//! 2. Google's STS (`token_url`) exchanges it for a federated access token
//!    (RFC 8693 token exchange, for the pool provider `audience`);
//! 3. with `service_account_impersonation_url`, that token asks IAM
//!    credentials for a service account's access token of Pub/Sub's scope
//!    (or, for an HTTP sink's `google_id_token`, its ID token).
//!
//! The file is read when the sink is built; sources of other kinds (AWS's
//! signed `GetCallerIdentity`, executables) are refused there, naming what
//! is supported.

use super::client::{form, ok_body, Client};
use super::BoxError;
use crate::bounded_read::read_text_at_most;
use crate::limits::MAX_KEY_FILE_BYTES;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::SystemTime;

/// The scope of the federated token: STS grants only this one.
const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long an impersonated token is asked to last (the most IAM grants
/// without an organization policy raising it).
const IMPERSONATED_LIFETIME: &str = "3600s";

/// A federated identity, as its configuration file says.
#[derive(PartialEq, Eq)]
pub struct ExternalAccount {
    audience: String,
    subject_token_type: String,
    token_url: String,
    impersonation_url: Option<String>,
    source: SubjectTokenSource,
}

/// The audience only: no URLs' secrets or tokens in logs.
impl fmt::Debug for ExternalAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExternalAccount({})", self.audience)
    }
}

impl fmt::Display for ExternalAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {}", self.token_url, self.audience)
    }
}

/// Where the subject token is read, and in what form.
#[derive(PartialEq, Eq)]
enum SubjectTokenSource {
    File(String, TokenFormat),
    Url {
        url: String,
        headers: BTreeMap<String, String>,
        format: TokenFormat,
    },
}

/// The whole text (trimmed), or one field of a JSON document.
#[derive(PartialEq, Eq)]
enum TokenFormat {
    Text,
    Json(String),
}

/// The fields of a configuration file goad reads.
#[derive(Deserialize)]
struct ConfigFile {
    #[serde(rename = "type")]
    kind: String,
    audience: String,
    subject_token_type: String,
    token_url: Option<String>,
    service_account_impersonation_url: Option<String>,
    credential_source: CredentialSource,
}

#[derive(Deserialize)]
struct CredentialSource {
    file: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    format: Option<FormatField>,
    environment_id: Option<String>,
    executable: Option<Value>,
}

#[derive(Deserialize)]
struct FormatField {
    #[serde(rename = "type")]
    kind: String,
    subject_token_field_name: Option<String>,
}

/// Google's STS, where a file names none.
const GOOGLE_STS_URL: &str = "https://sts.googleapis.com/v1/token";

impl ExternalAccount {
    /// The identity the file at `path` configures; the error names the
    /// file and what is wrong with it.
    pub fn read(path: &Path) -> Result<ExternalAccount, String> {
        let text = read_text_at_most(path, MAX_KEY_FILE_BYTES)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        ExternalAccount::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<ExternalAccount, String> {
        let file: ConfigFile = serde_json::from_str(text)
            .map_err(|e| format!("not an external_account configuration ({e})"))?;
        if file.kind != "external_account" {
            let kind = file.kind;
            return Err(format!("its type is {kind:?}, not \"external_account\""));
        }
        let source = file.credential_source;
        if let Some(id) = source.environment_id.filter(|_| source.url.is_none()) {
            return Err(unsupported(&format!("an environment_id of {id:?}")));
        }
        if source.executable.is_some() {
            return Err(unsupported("an executable"));
        }
        let format = match source.format {
            None => TokenFormat::Text,
            Some(f) if f.kind == "text" => TokenFormat::Text,
            Some(f) if f.kind == "json" => match f.subject_token_field_name {
                Some(field) => TokenFormat::Json(field),
                None => return Err("its json format names no subject_token_field_name".into()),
            },
            Some(f) => return Err(format!("its format type is {:?}, not text or json", f.kind)),
        };
        let source = match (source.file, source.url) {
            (Some(file), None) => SubjectTokenSource::File(file, format),
            (None, Some(url)) => SubjectTokenSource::Url {
                url,
                headers: source.headers,
                format,
            },
            _ => return Err(unsupported("neither one file nor one url")),
        };
        Ok(ExternalAccount {
            audience: file.audience,
            subject_token_type: file.subject_token_type,
            token_url: file.token_url.unwrap_or_else(|| GOOGLE_STS_URL.into()),
            impersonation_url: file.service_account_impersonation_url,
            source,
        })
    }

    /// An access token of `scope` and when it expires: the subject token
    /// exchanged at STS, then, with impersonation, the service account's.
    pub fn token(
        &self,
        client: &Client,
        scope: &str,
        now: SystemTime,
    ) -> Result<(String, SystemTime), BoxError> {
        let federated = self.federated_token(client, now)?;
        let Some(url) = &self.impersonation_url else {
            return Ok(federated);
        };
        let request = json!({"scope": [scope], "lifetime": IMPERSONATED_LIFETIME});
        let answer: Value = serde_json::from_str(&ask_iam(client, url, &federated.0, &request)?)?;
        let token = answer.get("accessToken").and_then(Value::as_str);
        let expiry = answer.get("expireTime").and_then(Value::as_str);
        match (token, expiry) {
            (Some(token), Some(at)) => {
                let at = humantime::parse_rfc3339_weak(at)
                    .map_err(|e| format!("an expireTime of {at:?}: {e}"))?;
                Ok((token.to_string(), at.max(now)))
            }
            _ => Err("no accessToken and expireTime in IAM credentials' answer".into()),
        }
    }

    /// Whether the identity impersonates a service account, which an ID
    /// token needs (a federated token has no ID token of its own).
    pub fn impersonates(&self) -> bool {
        self.impersonation_url.is_some()
    }

    /// A Google ID token for `audience`: the impersonated service
    /// account's, which IAM credentials' `generateIdToken` gives for the
    /// federated token, as Google's libraries ask for one.
    pub fn id_token(
        &self,
        client: &Client,
        audience: &str,
        now: SystemTime,
    ) -> Result<String, BoxError> {
        let url = (self.impersonation_url.as_deref())
            .and_then(|url| url.strip_suffix(":generateAccessToken"))
            .ok_or("the configuration's service_account_impersonation_url names no service account's :generateAccessToken")?;
        let federated = self.federated_token(client, now)?;
        let request = json!({"audience": audience, "includeEmail": true});
        let url = format!("{url}:generateIdToken");
        let answer: Value = serde_json::from_str(&ask_iam(client, &url, &federated.0, &request)?)?;
        match answer.get("token").and_then(Value::as_str) {
            Some(token) => Ok(token.to_string()),
            None => Err("no token in IAM credentials' answer".into()),
        }
    }

    /// The subject token exchanged at STS: a federated access token and
    /// when it expires.
    fn federated_token(
        &self,
        client: &Client,
        now: SystemTime,
    ) -> Result<(String, SystemTime), BoxError> {
        let subject_token = self.subject_token(client)?;
        let exchange = form(&[
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("audience", &self.audience),
            ("scope", CLOUD_PLATFORM_SCOPE),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("subject_token", &subject_token),
            ("subject_token_type", &self.subject_token_type),
        ]);
        let answer = client
            .post(&self.token_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .send(exchange);
        super::oauth2::token_answer(&ok_body(answer)?, now)
    }

    /// The subject token, read now.
    fn subject_token(&self, client: &Client) -> Result<String, BoxError> {
        let (text, format) = match &self.source {
            SubjectTokenSource::File(path, format) => {
                let text = read_text_at_most(path, MAX_KEY_FILE_BYTES)
                    .map_err(|e| format!("cannot read the subject token {path}: {e}"))?;
                (text, format)
            }
            SubjectTokenSource::Url {
                url,
                headers,
                format,
            } => {
                let mut request = client.get(url);
                for (name, value) in headers {
                    request = request.header(name, value);
                }
                let text = ok_body(request.call())
                    .map_err(|e| format!("cannot get the subject token from {url}: {e}"))?;
                (text, format)
            }
        };
        let token = match format {
            TokenFormat::Text => text.trim().to_string(),
            TokenFormat::Json(field) => {
                let document: Value = serde_json::from_str(&text)?;
                let token = document.get(field).and_then(Value::as_str);
                token
                    .ok_or_else(|| format!("no {field} in the subject token's document"))?
                    .to_string()
            }
        };
        match token.is_empty() {
            true => Err("the subject token is empty".into()),
            false => Ok(token),
        }
    }
}

/// IAM credentials' answer to `request` at `url`, asked with the
/// federated token `bearer`.
fn ask_iam(client: &Client, url: &str, bearer: &str, request: &Value) -> Result<String, BoxError> {
    let answer = client
        .post(url)
        .header("authorization", &format!("Bearer {bearer}"))
        .header("content-type", "application/json")
        .send(request.to_string());
    ok_body(answer)
}

fn unsupported(what: &str) -> String {
    format!(
        "its credential_source has {what}: goad reads a subject token from a file or a url \
         (text or json format)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(source: Value) -> String {
        json!({
            "type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "credential_source": source,
        })
        .to_string()
    }

    #[test]
    fn configurations_name_what_goad_cannot_read() {
        let error = |source: Value| ExternalAccount::parse(&config(source)).err().unwrap();
        let account = ExternalAccount::parse(&config(json!({"file": "/t"}))).unwrap();
        assert_eq!(account.token_url, GOOGLE_STS_URL);
        assert!(account.impersonation_url.is_none());
        assert_eq!(
            error(json!({"environment_id": "aws1", "region_url": "http://x"})),
            "its credential_source has an environment_id of \"aws1\": goad reads a subject \
             token from a file or a url (text or json format)"
        );
        assert_eq!(
            error(json!({"executable": {"command": "x"}})),
            "its credential_source has an executable: goad reads a subject token from a file \
             or a url (text or json format)"
        );
        assert_eq!(
            error(json!({"file": "/t", "format": {"type": "json"}})),
            "its json format names no subject_token_field_name"
        );
        assert_eq!(
            error(json!({"file": "/t", "format": {"type": "xml"}})),
            "its format type is \"xml\", not text or json"
        );
        let key = ExternalAccount::parse(r#"{"type":"service_account"}"#).err();
        assert!(key
            .unwrap()
            .starts_with("not an external_account configuration"));
        let mut other = serde_json::from_str::<Value>(&config(json!({"file": "/t"}))).unwrap();
        other["type"] = "authorized_user".into();
        assert_eq!(
            ExternalAccount::parse(&other.to_string()).err().unwrap(),
            "its type is \"authorized_user\", not \"external_account\""
        );
    }
}
