//! The operator subcommands' HTTP client (`goad dlq`, `goad pressure`,
//! `goad stats`, `goad backup`, ...): one request to a node's admin API, the JSON answer back.

use crate::config::{invalid, ConfigError};
use crate::pem::PemFile;
use crate::sink::client::{agent_of, client_certificate, root_certificates};
use crate::sink::http::sendable_credential;
use crate::sink::proxy_env::{environment_proxy, ProxyUnreached, Scheme};
use crate::sink::Egress;
use crate::tls_provider::ureq_tls;
use std::path::Path;
use std::time::Duration;
use ureq::tls::TlsConfig;

/// The largest answer read: a page of dead letters, or one with a large
/// body in base64.
const MAX_ANSWER_BYTES: u64 = 1 << 30;

/// How long a call waits for its answer.
const CALL_WAIT: Duration = Duration::from_secs(60);

/// Where the node is and how to authenticate.
#[derive(Debug, Clone)]
pub struct NodeClient {
    /// e.g. `http://127.0.0.1:7878`
    pub base_url: String,
    pub admin_token: Option<String>,
    /// The environment variable the admin token was read from, which a
    /// refusal of it names (see [`NodeClient::with_token_from`]).
    token_variable: Option<String>,
    /// For an https:// node: the roots it trusts, the certificate it
    /// presents (see [`NodeClient::with_tls`]).
    tls: TlsConfig,
}

/// The files [`NodeClient::with_tls`] reads; its errors name them by the
/// `goad` options that give them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientTlsFiles<'a> {
    /// `--ca-file`: trust the certificates of this PEM file instead of
    /// Mozilla's roots (a node whose certificate a private CA signed).
    pub ca_file: Option<&'a Path>,
    /// `--client-cert` and `--client-key`: present this PEM certificate
    /// chain and private key (a node with `http.tls_client_ca_file`).
    pub client_cert: Option<&'a Path>,
    pub client_key: Option<&'a Path>,
}

/// A failed call: the node's JSON error when it answered, else the transport error.
#[derive(Debug)]
pub struct ClientError(pub String);

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ClientError {}

/// Why no answer came from `url`, with what to do for the common
/// mistakes: a refused connection (no node there), a plain request to a
/// node that serves HTTPS (its TLS alert is no HTTP answer) or a TLS one
/// to a node that serves plain HTTP, a node whose certificate a private
/// CA signed.
fn unreached(url: &str, e: &ureq::Error) -> String {
    use rustls::{CertificateError, Error, InvalidMessage};
    if let Some(unreached) = ProxyUnreached::of(e) {
        return format!("{url}: {unreached}");
    }
    let hint = match e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            " (no node listens there: give its address with --node or GOAD_NODE)"
        }
        ureq::Error::Protocol(_) if url.starts_with("http://") => {
            " (a node that serves HTTPS answers a plain request so: give its address as https://…)"
        }
        e => match crate::sink::client::tls_error(e) {
            Some(Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
                " (a node whose certificate a private CA signed: give that CA's certificate with --ca-file or GOAD_CA_FILE)"
            }
            Some(Error::InvalidMessage(InvalidMessage::InvalidContentType)) => {
                " (a node that serves plain HTTP answers so: give its address as http://…)"
            }
            _ => "",
        },
    };
    format!("{url}: {e}{hint}")
}

impl NodeClient {
    /// A client of the node at `base_url`, trusting Mozilla's roots for
    /// an https:// one.
    pub fn new(base_url: impl Into<String>, admin_token: Option<String>) -> NodeClient {
        NodeClient {
            base_url: base_url.into(),
            admin_token,
            token_variable: None,
            tls: ureq_tls().build(),
        }
    }

    /// This client, with the admin token of the environment variable
    /// `var` (none when it is unset or empty); a 401 then says which.
    pub fn with_token_from(mut self, var: &str) -> NodeClient {
        self.admin_token = std::env::var(var).ok().filter(|t| !t.is_empty());
        self.token_variable = Some(var.to_string());
        self
    }

    /// Why the node refused the admin token (a 401), as far as this
    /// client can tell.
    fn token_refused(&self) -> String {
        match (&self.admin_token, &self.token_variable) {
            (None, Some(var)) => format!(
                "{var} is not set: put the node's admin token in it, or name the variable holding it with --token-env"
            ),
            (Some(_), Some(var)) => format!("the token in {var} is not one the node takes"),
            (None, None) => "no admin token was given".to_string(),
            (Some(_), None) => "the token given is not one the node takes".to_string(),
        }
    }

    /// This client, with TLS as `files` say; a file that does not load, or
    /// a certificate without its key, is an error naming its option.
    pub fn with_tls(mut self, files: ClientTlsFiles<'_>) -> Result<NodeClient, ConfigError> {
        crate::trusted_roots::check_default_roots()?;
        let mut tls = ureq_tls();
        if let Some(path) = files.ca_file {
            let holds = "a PEM file of root certificates";
            let ca = PemFile {
                key: "--ca-file",
                holds,
                path,
            };
            tls = tls.root_certs(root_certificates(&ca)?);
        }
        match (files.client_cert, files.client_key) {
            (Some(cert), Some(key)) => {
                let holds = "a PEM certificate chain";
                let chain = PemFile {
                    key: "--client-cert",
                    holds,
                    path: cert,
                };
                let holds = "a PEM private key";
                let key = PemFile {
                    key: "--client-key",
                    holds,
                    path: key,
                };
                tls = tls.client_cert(Some(client_certificate(&chain, &key)?));
            }
            (Some(cert), None) => {
                let rule = "given with --client-key (a certificate and its key)";
                return Err(invalid("--client-cert", rule, cert));
            }
            (None, Some(key)) => {
                let rule = "given with --client-cert (a certificate and its key)";
                return Err(invalid("--client-key", rule, key));
            }
            (None, None) => {}
        }
        self.tls = tls.build();
        Ok(self)
    }

    /// The request with the admin token, if there is one.
    fn authorized<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.admin_token {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// `GET` or `DELETE` `path` (with its query), or `POST path` with a
    /// JSON body, answered within a minute.
    pub fn call(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, ClientError> {
        self.call_within(method, path_and_query, body, CALL_WAIT)
    }

    /// [`NodeClient::call`], answered within `wait`.
    pub fn call_within(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
        wait: Duration,
    ) -> Result<serde_json::Value, ClientError> {
        // ureq sends nothing but printable ASCII in an authorization
        // header, and a node reads its value trimmed.
        let unsendable = |t: &str| !sendable_credential(t) || t.trim() != t;
        if self.admin_token.as_deref().is_some_and(unsendable) {
            let held = match &self.token_variable {
                Some(var) => format!("the token in {var}"),
                None => "the token given".to_string(),
            };
            let rule = "printable ASCII, no space at either end (nor a line break)";
            let why = format!("{held} is not one this command can send: {rule}");
            return Err(ClientError(why));
        }
        // The environment's proxy, as a sink's: never for this machine.
        let scheme = Scheme::of(&self.base_url);
        let proxy = environment_proxy(scheme).map_err(|e| ClientError(e.to_string()))?;
        let config = ureq::Agent::config_builder()
            .proxy(proxy)
            .tls_config(self.tls.clone())
            .http_status_as_error(false)
            .timeout_global(Some(wait))
            .build();
        let agent = agent_of(config, Egress::open(), scheme);
        let url = format!("{}{}", self.base_url.trim_end_matches('/'), path_and_query);
        let response = match method {
            "POST" => self
                .authorized(agent.post(&url))
                .header("content-type", "application/json")
                .send(body.map(|b| b.to_string()).unwrap_or_default()),
            "DELETE" => self.authorized(agent.delete(&url)).call(),
            _ => self.authorized(agent.get(&url)).call(),
        };
        let mut response = response.map_err(|e| ClientError(unreached(&url, &e)))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|e| ClientError(format!("{url}: reading the answer: {e}")))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|_| ClientError(format!("{url}: HTTP {status}, not JSON: {text}")))?;
        if status >= 400 {
            let message = value["message"].as_str().unwrap_or(&text);
            let code = value["error"].as_str().unwrap_or("error");
            let why = match status {
                401 => format!(" ({})", self.token_refused()),
                _ => String::new(),
            };
            return Err(ClientError(format!(
                "{url}: HTTP {status} {code}: {message}{why}"
            )));
        }
        Ok(value)
    }
}

/// Percent-encodes a query value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
