//! A user's Google credentials — the `authorized_user` file that `gcloud
//! auth application-default login` writes — and the access token its
//! refresh token gets from Google's token endpoint (the OAuth 2 refresh
//! token grant, RFC 6749 §6). For a developer's node; a deployed one runs
//! as a service account (`metadata`, `service_account`,
//! `external_account`).

use super::client::{form, ok_body, Client};
use super::gcp_key::GOOGLE_TOKEN_URI;
use super::BoxError;
use crate::bounded_read::read_text_at_most;
use crate::limits::MAX_KEY_FILE_BYTES;
use serde::Deserialize;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The file gcloud writes, under its configuration directory.
const GCLOUD_ADC_FILE: &str = "application_default_credentials.json";

/// A user's OAuth client and refresh token.
#[derive(PartialEq, Eq)]
pub struct AuthorizedUser {
    client_id: String,
    client_secret: String,
    refresh_token: String,
    token_uri: String,
    /// The project billed for the user's calls (`x-goog-user-project`).
    pub quota_project_id: Option<String>,
    /// The file it came from, for errors and logs.
    path: PathBuf,
}

/// The file only: no secret in logs.
impl fmt::Debug for AuthorizedUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthorizedUser({})", self.path.display())
    }
}

impl fmt::Display for AuthorizedUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} for the user of {}",
            self.token_uri,
            self.path.display()
        )
    }
}

/// The fields of the file goad reads.
#[derive(Deserialize)]
struct UserFile {
    #[serde(rename = "type")]
    kind: String,
    client_id: String,
    client_secret: String,
    refresh_token: String,
    token_uri: Option<String>,
    quota_project_id: Option<String>,
}

impl AuthorizedUser {
    /// Where gcloud keeps it: `$CLOUDSDK_CONFIG` or `~/.config/gcloud`.
    pub fn gcloud_file(
        cloudsdk_config: Option<OsString>,
        home: Option<OsString>,
    ) -> Option<PathBuf> {
        let dir = match (cloudsdk_config, home) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => Path::new(&home).join(".config").join("gcloud"),
            (None, None) => return None,
        };
        Some(dir.join(GCLOUD_ADC_FILE))
    }

    /// The credentials in the file at `path`; the error names the file and
    /// what is wrong with it.
    pub fn read(path: &Path) -> Result<AuthorizedUser, String> {
        let text = read_text_at_most(path, MAX_KEY_FILE_BYTES)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let file: UserFile = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not an authorized_user file ({e})", path.display()))?;
        if file.kind != "authorized_user" {
            return Err(format!(
                "{}: its type is {:?}, not \"authorized_user\"",
                path.display(),
                file.kind
            ));
        }
        // An empty one bills no other project: as if it were not there.
        let project = file.quota_project_id.filter(|project| !project.is_empty());
        if project
            .as_deref()
            .is_some_and(|p| !super::http::sendable_credential(p))
        {
            return Err(format!(
                "{}: its quota_project_id holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no x-goog-user-project header can carry",
                path.display()
            ));
        }
        Ok(AuthorizedUser {
            client_id: file.client_id,
            client_secret: file.client_secret,
            refresh_token: file.refresh_token,
            token_uri: file.token_uri.unwrap_or_else(|| GOOGLE_TOKEN_URI.into()),
            quota_project_id: project,
            path: path.to_path_buf(),
        })
    }

    /// The token endpoint's answer to the refresh token.
    pub fn ask(&self, client: &Client) -> Result<String, BoxError> {
        let body = form(&[
            ("grant_type", "refresh_token"),
            ("client_id", &self.client_id),
            ("client_secret", &self.client_secret),
            ("refresh_token", &self.refresh_token),
        ]);
        let request = client
            .post(&self.token_uri)
            .header("content-type", "application/x-www-form-urlencoded");
        ok_body(request.send(body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcloud_keeps_it_in_its_configuration_directory() {
        assert_eq!(
            AuthorizedUser::gcloud_file(Some("/etc/gc".into()), Some("/home/u".into())),
            Some(PathBuf::from(
                "/etc/gc/application_default_credentials.json"
            ))
        );
        assert_eq!(
            AuthorizedUser::gcloud_file(None, Some("/home/u".into())),
            Some(PathBuf::from(
                "/home/u/.config/gcloud/application_default_credentials.json"
            ))
        );
        assert_eq!(AuthorizedUser::gcloud_file(None, None), None);
    }

    #[test]
    fn a_file_of_another_type_or_without_a_refresh_token_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adc.json");
        let cases = [
            (
                r#"{"type": "service_account", "client_id": "c", "client_secret": "s", "refresh_token": "r"}"#,
                "its type is \"service_account\", not \"authorized_user\"",
            ),
            (
                r#"{"type": "authorized_user", "client_id": "c", "client_secret": "s"}"#,
                "not an authorized_user file (missing field `refresh_token`",
            ),
            (
                r#"{"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r", "quota_project_id": "billed\nx-injected: 1"}"#,
                "its quota_project_id holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no x-goog-user-project header can carry",
            ),
        ];
        for (text, why) in cases {
            std::fs::write(&path, text).unwrap();
            let error = AuthorizedUser::read(&path).unwrap_err();
            assert!(
                error.starts_with(&format!("{}: {why}", path.display())),
                "{error}"
            );
        }
        std::fs::write(
            &path,
            r#"{"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r", "quota_project_id": "billed"}"#,
        )
        .unwrap();
        let user = AuthorizedUser::read(&path).unwrap();
        assert_eq!(user.quota_project_id.as_deref(), Some("billed"));
        let unbilled = r#"{"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r", "quota_project_id": ""}"#;
        std::fs::write(&path, unbilled).unwrap();
        assert_eq!(AuthorizedUser::read(&path).unwrap().quota_project_id, None);
        assert_eq!(
            format!("{user:?}"),
            format!("AuthorizedUser({})", path.display())
        );
    }
}
