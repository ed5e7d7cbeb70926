//! A source entry of the config (`[[sources]]`): how ingest takes its hooks
//! (tokens, a provider's signature or handshake, an issuer's JWTs, dedupe
//! keys) and its sinks, each with its type's options.

use super::RetryConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hasher as _;
use std::path::PathBuf;

/// A sink's own retry policy (`retry = { … }` on a sink entry): each key
/// set replaces `[retry]`'s for that sink's rows.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct SinkRetryConfig {
    pub base_ms: Option<u64>,
    pub max_ms: Option<u64>,
    pub max_attempts: Option<u32>,
    pub jitter: Option<bool>,
    pub max_elapsed_ms: Option<u64>,
}

impl SinkRetryConfig {
    /// `policy` with this sink's keys in place of its own.
    pub fn over(&self, policy: RetryConfig) -> RetryConfig {
        RetryConfig {
            base_ms: self.base_ms.unwrap_or(policy.base_ms),
            max_ms: self.max_ms.unwrap_or(policy.max_ms),
            max_attempts: self.max_attempts.unwrap_or(policy.max_attempts),
            jitter: self.jitter.unwrap_or(policy.jitter),
            max_elapsed_ms: self.max_elapsed_ms.unwrap_or(policy.max_elapsed_ms),
        }
    }
}

/// A source: where hooks are committed, and the sinks each hook goes to.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct SourceConfig {
    pub id: String,
    #[serde(default = "default_tenant")]
    pub tenant: String,
    /// Environment variable with the bearer token ingest needs (node only),
    /// or several, each holding a token ingest takes, while one is rotated.
    pub ingest_token_env: Option<OneOrMany>,
    /// Environment variable with the token a provider's subscription check
    /// carries (node only): Meta's `GET …?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`
    /// is answered with the challenge when the token is this one.
    pub ingest_verify_token_env: Option<String>,
    /// A provider's check of a new endpoint that ingest answers (node
    /// only): one of `node::provider_handshake::HANDSHAKES` —
    /// `microsoft_graph` (its `validationToken`), `event_grid` (Azure Event
    /// Grid's subscription validation and the CloudEvents webhook handshake).
    pub ingest_handshake: Option<String>,
    /// How the provider signs its hooks (node only): one of
    /// `node::provider_signature::SCHEMES`, or an HMAC of the body in a
    /// header of the provider's choosing. Ingest accepts only hooks signed
    /// with (or, for a token scheme, carrying) a secret of `ingest_secret_env`.
    pub ingest_signature: Option<IngestSignature>,
    /// The environment variable(s) holding the provider's signing secret
    /// (several while one is rotated).
    pub ingest_secret_env: Option<OneOrMany>,
    /// Hooks carry an OpenID Connect token its issuer signed (node only):
    /// Google Pub/Sub push, Microsoft Entra, … (see [`IngestJwt`]).
    pub ingest_jwt: Option<IngestJwt>,
    /// Provider headers forwarded to sinks: absent = all but the never-forwarded
    /// set; a list = only these (still minus that set).
    pub forward_headers: Option<Vec<String>>,
    /// The ingest header whose value is the hook's dedupe key (node only):
    /// absent = `Idempotency-Key`; a provider's delivery id
    /// (`x-github-delivery`, `x-shopify-webhook-id`, `webhook-id`) makes its
    /// redeliveries share one idempotency key downstream.
    pub dedupe_header: Option<String>,
    /// Instead of `dedupe_header` (node only): where in a JSON body the
    /// dedupe key is, as an RFC 6901 pointer — `/id` for Stripe's event
    /// id, `/event_id` for Slack's, `/message/messageId` for a Pub/Sub
    /// push. A body without it (or not JSON) makes a hook without one.
    pub dedupe_json_pointer: Option<String>,
    /// A hook whose dedupe key this source committed less than this long
    /// ago is not stored again: its commit answers the first hook's id.
    /// Absent or 0: every hook is stored.
    pub dedupe_window_ms: Option<u64>,
    /// Hooks a second ingest takes at most (node only), a second's worth
    /// at once; more are answered 429 `rate_limited`. Absent: no bound.
    pub max_ingest_per_s: Option<u32>,
    #[serde(default)]
    pub sinks: Vec<SinkConfig>,
}

impl SourceConfig {
    /// A source of `tenant` with these sinks, no token nor signature, and
    /// every provider header forwarded.
    pub fn new(
        id: impl Into<String>,
        tenant: impl Into<String>,
        sinks: Vec<SinkConfig>,
    ) -> SourceConfig {
        SourceConfig {
            id: id.into(),
            tenant: tenant.into(),
            ingest_token_env: None,
            ingest_verify_token_env: None,
            ingest_handshake: None,
            ingest_signature: None,
            ingest_secret_env: None,
            ingest_jwt: None,
            forward_headers: None,
            dedupe_header: None,
            dedupe_json_pointer: None,
            dedupe_window_ms: None,
            max_ingest_per_s: None,
            sinks,
        }
    }
}

fn default_tenant() -> String {
    "default".to_string()
}

/// One sink entry of a source. `type` selects the sink; the other keys are
/// that sink's options (validation rejects options of another type).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct SinkConfig {
    /// `http`, `sqs`, `pubsub`, or the name of a sink the host registered
    /// with the engine.
    #[serde(rename = "type")]
    pub kind: String,
    /// http: the endpoint.
    pub url: Option<String>,
    /// http, instead of `url`: the environment variable holding the
    /// endpoint, for a URL that is a secret (Slack's or Discord's incoming
    /// webhooks); read when the sink is built, never printed.
    pub url_env: Option<String>,
    /// http: `post` (default), `put` or `patch`.
    pub method: Option<String>,
    /// http: extra request headers, which win over forwarded provider headers
    /// (and a `content-type` over the hook's).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// http: extra request headers whose values are secrets: header name →
    /// the environment variable holding its value (read when the sink is
    /// built, never stored nor printed).
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// http: per-phase timeout (connect, send, receive), default 5,000 ms.
    pub timeout_ms: Option<u64>,
    /// http: the environment variable(s) holding Standard Webhooks secrets.
    pub secret_env: Option<OneOrMany>,
    /// http: response bytes read before the rest is dropped, default 65,536.
    pub max_response_bytes: Option<u64>,
    /// http, with an https:// url: a PEM file of the root certificates the
    /// endpoint's certificate must chain to, instead of Mozilla's roots (a
    /// private CA); read when the sink is built.
    pub ca_file: Option<PathBuf>,
    /// http, with an https:// url: the PEM certificate chain (and, in
    /// `client_key_file`, its private key) presented to an endpoint that
    /// asks for one (mutual TLS); read when the sink is built.
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    /// sqs: the queue's URL (`https://sqs.<region>.amazonaws.com/<account>/<name>`;
    /// a name ending `.fifo` is a FIFO queue).
    pub queue_url: Option<String>,
    /// sqs: the signing region; by default read from an AWS queue URL's
    /// host, else the environment's (`AWS_REGION`…, see
    /// `sink::aws_region`). http, with `aws_service`: the region to sign
    /// for, by default the environment's.
    pub region: Option<String>,
    /// sqs, pubsub: where requests go; by default the queue URL's origin
    /// (sqs) or `https://pubsub.googleapis.com`.
    pub endpoint: Option<String>,
    /// sqs: a FIFO queue's message group, by default `<tenant>/<source>`.
    pub message_group_id: Option<String>,
    /// sqs, pubsub: bodies larger than this go to the claim check and the
    /// message carries a reference (default 65,536).
    pub inline_max_bytes: Option<u64>,
    /// sqs, pubsub: the largest message (body and attributes), default
    /// 1,048,576 (sqs) or 10,000,000 (pubsub); a larger one is
    /// dead-lettered at once.
    pub max_message_bytes: Option<u64>,
    /// sqs, and http with `aws_service`: where the credentials come from:
    /// `env` (the default), `instance`, `container`, `web_identity` or
    /// `profile`; pubsub: where the token
    /// comes from: `env` (the default, `token_env`), `metadata`,
    /// `service_account` (the key file `GOOGLE_APPLICATION_CREDENTIALS`
    /// names) or `external_account` (the workload identity federation
    /// configuration it names).
    pub credentials: Option<String>,
    /// sqs (and http with `aws_service`), with `env`: the environment variables holding the credentials,
    /// by default `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and (if set)
    /// `AWS_SESSION_TOKEN`.
    pub access_key_id_env: Option<String>,
    pub secret_access_key_env: Option<String>,
    pub session_token_env: Option<String>,
    /// sqs (and http with `aws_service`): an IAM role to assume (STS
    /// `AssumeRole`, signed with the credentials above), whose temporary
    /// credentials sign the sink's requests: a queue in another account, say.
    pub role_arn: Option<String>,
    /// sqs, with `role_arn`: the external id the role's trust policy asks for.
    pub external_id: Option<String>,
    /// sqs, with `role_arn`: the session's name in the role's CloudTrail
    /// records (`goad` by default).
    pub role_session_name: Option<String>,
    /// pubsub: the Google Cloud project and the topic to publish to.
    pub project: Option<String>,
    pub topic: Option<String>,
    /// pubsub: the environment variable holding an OAuth 2 access token,
    /// read at every attempt; without it no `authorization` is sent (the
    /// Pub/Sub emulator).
    pub token_env: Option<String>,
    /// Deliver in commit order, one at a time per lane (see `store::lanes`).
    #[serde(default)]
    pub ordered: bool,
    /// `header:<name>`: a lane per value of that header (needs `ordered`).
    pub ordering_key: Option<String>,
    /// Calls (requests: one attempt, or one batch) that start per second at
    /// most, per tenant's key of this sink, evenly spaced; none by default.
    pub max_calls_per_s: Option<u32>,
    /// This sink's retry policy where it differs from `[retry]`.
    pub retry: Option<SinkRetryConfig>,
    /// Only hooks whose header has one of these values get a row for this
    /// sink (event types: GitHub's `x-github-event`, say); decided at commit.
    pub filter: Option<HeaderFilter>,
    /// http: an OAuth 2 client-credentials grant whose token each request
    /// carries (`authorization: Bearer`).
    pub oauth2: Option<OAuth2Config>,
    /// http: sign each request with AWS Signature Version 4 for this
    /// service (`lambda` for a function URL with `AWS_IAM` auth,
    /// `execute-api` for API Gateway with IAM authorization) in `region`,
    /// with credentials as an SQS sink's.
    pub aws_service: Option<String>,
    /// http: a Google-signed ID token for this audience in each request
    /// (`authorization: Bearer`), as Cloud Run, Cloud Functions and IAP
    /// ask of their callers.
    pub google_id_token: Option<GoogleIdTokenConfig>,
    /// Hold its rows: none is attempted while paused; they wait, and new
    /// hooks still get theirs (live at a reload).
    #[serde(default)]
    pub paused: bool,
}

/// An HTTP sink's `oauth2`: where and as whom goad asks for tokens.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct OAuth2Config {
    /// The authorization server's token endpoint.
    pub token_url: String,
    pub client_id: String,
    /// The environment variable holding the client's secret (read when the
    /// sink is built); with `client_auth = "private_key_jwt"`, none.
    pub client_secret_env: Option<String>,
    pub scope: Option<String>,
    /// Asked for by some servers (Auth0) to name the receiver's API.
    pub audience: Option<String>,
    /// How the client authenticates to the token endpoint.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// With `private_key_jwt`: the client's private key (PEM PKCS #8, RSA
    /// or P-256; read when the sink is built), whose public key the
    /// authorization server holds.
    pub private_key_file: Option<PathBuf>,
    /// With `private_key_jwt`: the key's id there (`kid`), if it wants one.
    pub key_id: Option<String>,
    /// With `private_key_jwt`: the key's certificate (PEM), whose
    /// thumbprints the assertion names it by (`x5t`, `x5t#S256`), as
    /// Microsoft Entra ID wants of a certificate credential.
    pub certificate_file: Option<PathBuf>,
}

impl OAuth2Config {
    /// A grant of `client_id` with the secret in `client_secret_env`, its
    /// authentication by HTTP Basic, no scope nor audience.
    pub fn new(
        token_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret_env: impl Into<String>,
    ) -> OAuth2Config {
        OAuth2Config {
            token_url: token_url.into(),
            client_id: client_id.into(),
            client_secret_env: Some(client_secret_env.into()),
            scope: None,
            audience: None,
            client_auth: ClientAuth::Basic,
            private_key_file: None,
            key_id: None,
            certificate_file: None,
        }
    }
}

/// An HTTP sink's `google_id_token`: for whom, and whose.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct GoogleIdTokenConfig {
    /// The token's `aud`: the receiving service's URL (Cloud Run, Cloud
    /// Functions) or OAuth client id (IAP).
    pub audience: String,
    /// `metadata` (the default: the account the node runs as, on Google
    /// Cloud) or `service_account` (the key file
    /// `GOOGLE_APPLICATION_CREDENTIALS` names).
    pub credentials: Option<String>,
}

/// How an OAuth 2 client authenticates to the token endpoint: its secret
/// by HTTP Basic (the default) or in the form's fields (RFC 6749 §2.3.1),
/// or a JWT signed with its private key (`private_key_jwt`, RFC 7523 §2.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    #[default]
    Basic,
    Body,
    PrivateKeyJwt,
}

impl<'de> Deserialize<'de> for ClientAuth {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        use ClientAuth::*;
        let names = &["basic", "body", "private_key_jwt"];
        super::suggest::named(de, names, &[Basic, Body, PrivateKeyJwt])
    }
}

/// A sink's `filter`: a header and the values it takes.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct HeaderFilter {
    /// A header stored with the hook (any case).
    pub header: String,
    /// The values (exact) whose hooks the sink takes.
    pub values: Vec<String>,
}

impl HeaderFilter {
    /// Whether a hook with these headers passes: its first `header` has
    /// one of the values.
    pub fn passes(&self, headers: &[(String, String)]) -> bool {
        headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&self.header))
            .is_some_and(|(_, value)| self.values.contains(value))
    }
}

impl SinkConfig {
    /// Whether this sink and `other` deliver every hook to one place:
    /// goad's sinks of one type and method naming one destination (`url`
    /// or `url_env`; `queue_url`, `project` and `topic`, at one
    /// `endpoint`), neither with a `filter`. A host's sinks are its own to
    /// tell apart.
    pub(crate) fn delivers_as(&self, other: &SinkConfig) -> bool {
        fn place(s: &SinkConfig) -> impl PartialEq + '_ {
            let named = (&s.url, &s.url_env, &s.queue_url, &s.project, &s.topic);
            (&s.kind, named, &s.endpoint)
        }
        fn method(s: &SinkConfig) -> &str {
            s.method.as_deref().unwrap_or("post")
        }
        super::sink_checks::BUILTIN_SINK_TYPES.contains(&self.kind.as_str())
            && self.filter.is_none()
            && other.filter.is_none()
            && place(self) == place(other)
            && method(self).eq_ignore_ascii_case(method(other))
    }

    /// Where the sink delivers, as a number that stays the same from one
    /// config (and goad release) to the next: a hash of its type, method,
    /// destination (`url` or `url_env`; `queue_url`, `project`, `topic`
    /// and `endpoint`) and `filter`. A hook's record keeps its sinks'
    /// places, so a reload or restart that moves, inserts or removes
    /// sinks sends each stored row to the sink it was written for, not
    /// to whichever now holds its index (`Catalog::bind`).
    pub fn place(&self) -> u64 {
        let mut hasher = crate::fnv::Fnv1a::default();
        let mut field = |value: Option<&str>| {
            let bytes = value.map_or(&[][..], str::as_bytes);
            hasher.write_u8(u8::from(value.is_some()));
            hasher.write(&(bytes.len() as u64).to_be_bytes());
            hasher.write(bytes);
        };
        field(Some(&self.kind));
        field(Some(
            &self
                .method
                .as_deref()
                .unwrap_or("post")
                .to_ascii_lowercase(),
        ));
        for destination in [
            &self.url,
            &self.url_env,
            &self.queue_url,
            &self.project,
            &self.topic,
            &self.endpoint,
        ] {
            field(destination.as_deref());
        }
        field(
            self.filter
                .as_ref()
                .map(|f| f.header.to_ascii_lowercase())
                .as_deref(),
        );
        for value in self.filter.iter().flat_map(|f| &f.values) {
            field(Some(value));
        }
        hasher.finish()
    }

    /// A warning for each credential written in the sink's entry itself
    /// (`at` names it), where whoever reads the config file reads it: a
    /// credential header's value in `headers`, a password in `url`.
    pub(crate) fn written_credentials(&self, at: &str) -> Vec<String> {
        let headers = self
            .headers
            .keys()
            .filter(|name| crate::sink::is_credential(&name.to_ascii_lowercase()));
        let mut warnings: Vec<String> = headers
            .map(|name| {
                format!(
                    "{at}.headers.{name} is a credential written in the config file, where whoever reads the file reads it: keep it in the environment and name its variable in headers_env"
                )
            })
            .collect();
        let uri = (self.url.as_deref()).and_then(|url| url.parse::<ureq::http::Uri>().ok());
        let user_info = uri.as_ref().and_then(crate::sink::http::user_info_and_host);
        if user_info.is_some_and(|(user_info, _)| user_info.contains(':')) {
            warnings.push(format!(
                "{at}.url holds a password, written in the config file where whoever reads the file reads it: keep the URL in the environment and name its variable in url_env"
            ));
        }
        warnings
    }

    /// An HTTP sink posting to `url` with every other option at its default.
    pub fn http(url: impl Into<String>) -> SinkConfig {
        SinkConfig {
            url: Some(url.into()),
            ..SinkConfig::of_kind("http")
        }
    }

    /// An SQS sink sending to `queue_url` with every other option at its default.
    pub fn sqs(queue_url: impl Into<String>) -> SinkConfig {
        SinkConfig {
            queue_url: Some(queue_url.into()),
            ..SinkConfig::of_kind("sqs")
        }
    }

    /// A Pub/Sub sink publishing to `topic` of `project`, other options at their defaults.
    pub fn pubsub(project: impl Into<String>, topic: impl Into<String>) -> SinkConfig {
        SinkConfig {
            project: Some(project.into()),
            topic: Some(topic.into()),
            ..SinkConfig::of_kind("pubsub")
        }
    }

    /// A sink of `kind` (a host-registered sink's name) with no options.
    pub fn of_kind(kind: impl Into<String>) -> SinkConfig {
        SinkConfig {
            kind: kind.into(),
            url: None,
            url_env: None,
            method: None,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            timeout_ms: None,
            secret_env: None,
            max_response_bytes: None,
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
            queue_url: None,
            region: None,
            endpoint: None,
            message_group_id: None,
            inline_max_bytes: None,
            max_message_bytes: None,
            credentials: None,
            access_key_id_env: None,
            secret_access_key_env: None,
            session_token_env: None,
            role_arn: None,
            external_id: None,
            role_session_name: None,
            project: None,
            topic: None,
            token_env: None,
            ordered: false,
            ordering_key: None,
            max_calls_per_s: None,
            retry: None,
            filter: None,
            oauth2: None,
            aws_service: None,
            google_id_token: None,
            paused: false,
        }
    }
}

/// A source's `ingest_signature`: a provider's scheme by name
/// (`ingest_signature = "github"`), or a table for any provider that sends
/// an HMAC of the body in a header (`ingest_signature = { header =
/// "linear-signature" }`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum IngestSignature {
    Scheme(String),
    Hmac(HmacSignature),
}

/// An HMAC of the request body, under the source's secret, in `header`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct HmacSignature {
    /// The header carrying the signature.
    pub header: String,
    /// Text before the signature in the header's value (`sha256=`), none by default.
    pub prefix: Option<String>,
    /// `hex` (the default) or `base64`.
    pub encoding: Option<String>,
    /// `sha256` (the default), `sha1` or `sha512`.
    pub algorithm: Option<String>,
}

impl From<&str> for IngestSignature {
    fn from(scheme: &str) -> IngestSignature {
        IngestSignature::Scheme(scheme.to_string())
    }
}

impl std::fmt::Display for IngestSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IngestSignature::Scheme(name) => f.write_str(name),
            IngestSignature::Hmac(hmac) => write!(f, "an HMAC in {}", hmac.header),
        }
    }
}

/// A string is a scheme's name, a table an [`HmacSignature`] (whose
/// unknown keys are errors naming them, which an untagged enum would
/// lose).
impl<'de> Deserialize<'de> for IngestSignature {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<IngestSignature, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = IngestSignature;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scheme's name or a table { header, prefix, encoding, algorithm }")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<IngestSignature, E> {
                Ok(IngestSignature::from(name))
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                map: M,
            ) -> Result<IngestSignature, M::Error> {
                let table = serde::de::value::MapAccessDeserializer::new(map);
                HmacSignature::deserialize(table).map(IngestSignature::Hmac)
            }
        }
        de.deserialize_any(Either)
    }
}

/// A source's `ingest_jwt`: each hook carries `Authorization: Bearer
/// <JWT>`, signed (RS256 or ES256) by a key the issuer publishes at
/// `jwks_url`, issued by one of `issuer`, for `audience`, and carrying
/// each of `claims` with that value.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct IngestJwt {
    /// Where the issuer publishes its keys (a JSON Web Key Set): HTTPS, or
    /// HTTP to a loopback address.
    pub jwks_url: String,
    /// The token's `iss`: this, or one of these.
    pub issuer: OneOrMany,
    /// A value the token's `aud` must hold: the name the sender was given
    /// for this endpoint (Pub/Sub's push audience, by default its URL).
    pub audience: String,
    /// Claims the token must carry with these values (strings, booleans,
    /// integers): who may send, as `email = "pusher@p.iam.gserviceaccount.com"`.
    #[serde(default)]
    pub claims: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(untagged, expecting = "expected a string, or a list of strings")]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn to_vec(&self) -> Vec<String> {
        self.as_slice().to_vec()
    }

    pub fn as_slice(&self) -> &[String] {
        match self {
            OneOrMany::One(s) => std::slice::from_ref(s),
            OneOrMany::Many(v) => v,
        }
    }
}

impl From<&str> for OneOrMany {
    fn from(s: &str) -> OneOrMany {
        OneOrMany::One(s.to_string())
    }
}

impl fmt::Display for OneOrMany {
    /// As the config writes it: `"A"` or `["A", "B"]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OneOrMany::One(s) => write!(f, "{s:?}"),
            OneOrMany::Many(v) => write!(f, "{v:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink's place is stored in its hooks' records, so it must not
    /// change from one goad release to the next: these are the values
    /// every release computes. Its options beyond where it delivers leave
    /// it as it is; its destination, method and filter do not.
    #[test]
    fn a_sinks_place_is_the_same_in_every_release_and_follows_where_it_delivers() {
        let a = SinkConfig::http("https://a/");
        assert_eq!(a.place(), 0x5fab_6428_2cda_e5d9);
        let filtered = SinkConfig {
            filter: Some(HeaderFilter {
                header: "X-Event".into(),
                values: vec!["push".into()],
            }),
            ..a.clone()
        };
        assert_eq!(filtered.place(), 0xcd72_a957_8e06_eebb);
        let other_options = SinkConfig {
            timeout_ms: Some(1_000),
            headers: BTreeMap::from([("x-a".into(), "1".into())]),
            paused: true,
            ..a.clone()
        };
        assert_eq!(other_options.place(), a.place());
        let put = SinkConfig {
            method: Some("PUT".into()),
            ..a.clone()
        };
        let moved = [
            put,
            SinkConfig::http("https://b/"),
            SinkConfig::of_kind("http"),
        ];
        for other in moved {
            assert_ne!(other.place(), a.place(), "{other:?}");
        }
    }
}
