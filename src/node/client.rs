//! The operator subcommands' HTTP client (`goad dlq`, `goad pressure`,
//! `goad stats`, `goad backup`, ...): one request to a node's admin API, the JSON answer back.

use std::time::Duration;

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

impl NodeClient {
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
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(wait))
            .build()
            .into();
        let url = format!("{}{}", self.base_url.trim_end_matches('/'), path_and_query);
        let response = match method {
            "POST" => self
                .authorized(agent.post(&url))
                .header("content-type", "application/json")
                .send(body.map(|b| b.to_string()).unwrap_or_default()),
            "DELETE" => self.authorized(agent.delete(&url)).call(),
            _ => self.authorized(agent.get(&url)).call(),
        };
        let mut response = response.map_err(|e| ClientError(format!("{url}: {e}")))?;
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
            return Err(ClientError(format!(
                "{url}: HTTP {status} {code}: {message}"
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
