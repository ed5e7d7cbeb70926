//! The Google Cloud Pub/Sub sink, a batching sink: a batch of up to 1,000
//! attempts is one `publish` (`POST
//! {endpoint}/v1/projects/{project}/topics/{topic}:publish`, JSON), or
//! several when its messages together pass `max_message_bytes` (by
//! default Pub/Sub's 10 MB, its limit for a request too). A message's
//! `data` is goad's JSON envelope of the hook (base64, as Pub/Sub carries
//! bytes; a body over `inline_max_bytes` in the claim check) and its
//! attributes goad's (see `message`). A row of an ordered sink with a lane
//! key (`ordering_key = "header:<name>"`) carries that key as the
//! message's `orderingKey`: goad already publishes one lane's messages one
//! at a time in order, as Pub/Sub's ordering needs. Such a sink does not
//! batch: Pub/Sub refuses a publish whose messages' ordering keys differ
//! (`FAILED_PRECONDITION`), and a batch's rows are the heads of as many
//! lanes; its lanes publish up to `sink_concurrency` at once instead.
//! A message Pub/Sub would refuse for its size (over `max_message_bytes`,
//! an attribute value over 1,024 bytes — a long dedupe key — or an
//! ordering key over 1,024) fails alone as permanent and is not sent, as
//! the refusal of one message is the refusal of its whole publish.
//!
//! Authentication: an OAuth 2 access token (`authorization: Bearer`) from
//! the sink's `token_env` variable, the metadata server, a service
//! account's key, workload identity federation or a user's credentials
//! (with their quota project in `x-goog-user-project`), or none (the
//! Pub/Sub emulator); see `gcp_token`.
//!
//! Answers, for every message of the request alike (a publish is all or
//! nothing): 200 with one message id per message is delivered; another
//! 200 is transient; a Google error document (`{"error": {"code",
//! "message", "status"}}`) is permanent for `INVALID_ARGUMENT` and
//! transient otherwise (a topic not found yet, permissions being granted,
//! quotas); any other answer is transient. A topic without subscriptions takes the message and
//! drops it: Pub/Sub does not say so.

use super::client::{failed_answer, percent_encoded, Client};
use super::gcp_token::PubSubAuth;
use super::message::attributes;
use super::message::message_json;
use super::queue::{deliver_in_requests, deliver_one};
use super::status::{detail, BadStatus};
use super::{answer_of, excerpt, Delivery, MessageTooLarge, Sink, SinkError};
use crate::core::LaneBy;
use crate::limits::{
    PUBSUB_BATCH_MAX_ENTRIES, PUBSUB_MAX_ATTRIBUTE_VALUE_BYTES, PUBSUB_MAX_ORDERING_KEY_BYTES,
};
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::fmt;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// What a Pub/Sub sink needs, resolved from its config entry.
#[derive(Debug, Clone)]
pub struct PubSubSinkOptions {
    pub endpoint: String,
    pub project: String,
    pub topic: String,
    /// Where the access token comes from.
    pub auth: Arc<PubSubAuth>,
    pub max_message_bytes: u64,
    pub timeout_ms: u64,
    /// The source's `forward_headers` allowlist, if any.
    pub forward_allow: Option<Vec<String>>,
    /// Bodies larger than this go to the claim check.
    pub inline_max_bytes: u64,
    pub idle_connections: usize,
    /// How an ordered sink's lanes are keyed: a header's value is sent as
    /// the message's ordering key.
    pub lane_by: Option<LaneBy>,
}

impl PubSubSinkOptions {
    /// Whether a sink built from `other` would do what one built from
    /// these does: every option equal, its token from the same place.
    pub(crate) fn same_as(&self, other: &PubSubSinkOptions) -> bool {
        let PubSubSinkOptions {
            endpoint,
            project,
            topic,
            auth,
            max_message_bytes,
            timeout_ms,
            forward_allow,
            inline_max_bytes,
            idle_connections,
            lane_by,
        } = self;
        *endpoint == other.endpoint
            && *project == other.project
            && *topic == other.topic
            && auth.same_source(&other.auth)
            && *max_message_bytes == other.max_message_bytes
            && *timeout_ms == other.timeout_ms
            && *forward_allow == other.forward_allow
            && *inline_max_bytes == other.inline_max_bytes
            && *idle_connections == other.idle_connections
            && *lane_by == other.lane_by
    }
}

/// A Pub/Sub topic.
pub struct PubSubSink {
    client: Client,
    /// The topic's `:publish` URL.
    publish_url: String,
    options: PubSubSinkOptions,
}

impl PubSubSink {
    pub fn new(options: PubSubSinkOptions) -> PubSubSink {
        let publish_url = format!(
            "{}/v1/projects/{}/topics/{}:publish",
            options.endpoint.trim_end_matches('/'),
            percent_encoded(&options.project),
            percent_encoded(&options.topic)
        );
        PubSubSink {
            client: Client::new(options.timeout_ms, options.idle_connections),
            publish_url,
            options,
        }
    }

    /// One delivery's message and its size as Pub/Sub counts it.
    fn message(&self, delivery: &Delivery<'_>) -> Result<(Value, u64), SinkError> {
        let message = message_json(delivery, self.options.forward_allow.as_deref());
        let data = base64::engine::general_purpose::STANDARD.encode(message);
        let attributes = attributes(delivery);
        let lane_key = self
            .options
            .lane_by
            .as_ref()
            .map(|by| by.key(&delivery.hook.headers));
        let ordering_key = lane_key.as_deref().filter(|key| !key.is_empty());
        if let Some(over) = over_limit(&attributes, ordering_key) {
            return Err(SinkError::permanent(over));
        }
        let size_bytes = data.len()
            + attributes
                .iter()
                .map(|(name, value)| name.len() + value.len())
                .sum::<usize>()
            + ordering_key.map_or(0, str::len);
        let max_bytes = self.options.max_message_bytes;
        if size_bytes as u64 > max_bytes {
            return Err(SinkError::permanent(MessageTooLarge {
                size_bytes,
                max_bytes,
            }));
        }
        let attributes: Map<String, Value> = attributes
            .into_iter()
            .map(|(name, value)| (name.to_string(), json!(value)))
            .collect();
        let mut message = json!({"data": data, "attributes": attributes});
        if let Some(key) = ordering_key {
            message["orderingKey"] = json!(key);
        }
        Ok((message, size_bytes as u64))
    }

    /// One publish of `messages`, by `deadline`: each is delivered, or
    /// each fails alike.
    fn publish(&self, messages: Vec<Value>, deadline: Instant) -> Vec<Result<(), SinkError>> {
        let count = messages.len();
        let request = json!({ "messages": messages }).to_string();
        match self
            .post(&request, deadline)
            .and_then(|(status, reply)| settle(status, &reply, count))
        {
            Ok(()) => (0..count).map(|_| Ok(())).collect(),
            Err(failure) => failure.for_each_of(count).into_iter().map(Err).collect(),
        }
    }

    /// Sends a publish request with the access token, by `deadline`: the
    /// answer's status and body.
    fn post(&self, request: &str, deadline: Instant) -> Result<(u16, Vec<u8>), SinkError> {
        let token = self.options.auth.token(SystemTime::now(), deadline)?;
        let post = || {
            let mut post = self
                .client
                .post(&self.publish_url)
                .header("content-type", "application/json");
            if let Some(token) = &token {
                post = post.header("authorization", format!("Bearer {token}"));
            }
            if let Some(project) = self.options.auth.quota_project() {
                post = post.header("x-goog-user-project", project);
            }
            post
        };
        answer_of(post, request.as_bytes(), deadline)
    }
}

impl Sink for PubSubSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        deliver_one(self, delivery)
    }

    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        deliver_in_requests(
            deliveries,
            usize::from(PUBSUB_BATCH_MAX_ENTRIES),
            self.options.max_message_bytes,
            |delivery| self.message(delivery),
            |messages, deadline| self.publish(messages, deadline),
        )
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        Some(self.options.inline_max_bytes)
    }

    /// None for a sink whose lanes are keyed: its messages' ordering keys
    /// differ, and a publish takes one.
    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        match self.options.lane_by {
            Some(_) => None,
            None => NonZeroU16::new(PUBSUB_BATCH_MAX_ENTRIES),
        }
    }
}

/// The first of a message's attribute values and ordering key that is
/// longer than Pub/Sub takes.
fn over_limit(
    attributes: &[(&'static str, String)],
    ordering_key: Option<&str>,
) -> Option<OverLimit> {
    let attributes = attributes.iter().map(|(name, value)| {
        (
            format!("attribute {name}"),
            value.len(),
            PUBSUB_MAX_ATTRIBUTE_VALUE_BYTES,
        )
    });
    let ordering_key = (ordering_key.into_iter()).map(|key| {
        (
            "the ordering key".to_string(),
            key.len(),
            PUBSUB_MAX_ORDERING_KEY_BYTES,
        )
    });
    (attributes.chain(ordering_key))
        .find(|&(_, size_bytes, max_bytes)| size_bytes > max_bytes)
        .map(|(field, size_bytes, max_bytes)| OverLimit {
            field,
            size_bytes,
            max_bytes,
        })
}

/// A field of a message longer than Pub/Sub takes: the message is not
/// sent, as Pub/Sub would refuse its whole publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverLimit {
    pub field: String,
    pub size_bytes: usize,
    pub max_bytes: usize,
}

impl fmt::Display for OverLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let OverLimit {
            field,
            size_bytes,
            max_bytes,
        } = self;
        write!(
            f,
            "not published: {field} is {size_bytes} bytes, over the {max_bytes} Pub/Sub takes"
        )
    }
}

impl std::error::Error for OverLimit {}

/// What an answer to a publish of `count` messages means for all of them.
fn settle(status: u16, reply: &[u8], count: usize) -> Result<(), SinkError> {
    let document: Option<Value> = serde_json::from_slice(reply).ok();
    if status == 200 {
        let ids = document
            .as_ref()
            .and_then(|d| d.get("messageIds"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        return match ids {
            ids if ids == count => Ok(()),
            _ => Err(SinkError::transient(PubSubAnswer::Unexpected(excerpt(
                reply,
            )))),
        };
    }
    let error = document.as_ref().and_then(|d| d.get("error"));
    let Some(google) = error.and_then(|e| e.get("status")).and_then(Value::as_str) else {
        return Err(SinkError::transient(PubSubAnswer::Status(failed_answer(
            status, reply,
        ))));
    };
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let answer = PubSubAnswer::Error {
        status,
        google_status: google.to_string(),
        message: message.to_string(),
    };
    if google == "INVALID_ARGUMENT" {
        Err(SinkError::permanent(answer))
    } else {
        Err(SinkError::transient(answer))
    }
}

/// A Pub/Sub answer that is not a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PubSubAnswer {
    /// A Google error document.
    Error {
        status: u16,
        google_status: String,
        message: String,
    },
    /// A 200 that is not the answer to the publish sent.
    Unexpected(String),
    /// Another status, without a Google error document.
    Status(BadStatus),
}

impl fmt::Display for PubSubAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PubSubAnswer::Error {
                status,
                google_status,
                message,
            } => {
                write!(f, "Pub/Sub error {google_status} (HTTP status {status})")?;
                detail(f, message)
            }
            PubSubAnswer::Unexpected(body) => write!(f, "unexpected Pub/Sub answer: {body}"),
            PubSubAnswer::Status(bad) => bad.fmt(f),
        }
    }
}

impl std::error::Error for PubSubAnswer {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::FailureClass;

    /// Scenario 52.
    #[test]
    fn project_and_topic_are_one_path_segment_each() {
        let sink = PubSubSink::new(PubSubSinkOptions {
            endpoint: "http://127.0.0.1:8085/".into(),
            project: "p/../x".into(),
            topic: "a b".into(),
            auth: Arc::new(PubSubAuth::Anonymous),
            max_message_bytes: 100,
            timeout_ms: 1_000,
            forward_allow: None,
            inline_max_bytes: 1,
            idle_connections: 1,
            lane_by: None,
        });
        assert_eq!(
            sink.publish_url,
            "http://127.0.0.1:8085/v1/projects/p%2F..%2Fx/topics/a%20b:publish"
        );
    }

    fn class(status: u16, reply: &str) -> Option<FailureClass> {
        settle(status, reply.as_bytes(), 1)
            .err()
            .map(|e| e.into_failure().class)
    }

    /// Scenarios 53 and 54.
    #[test]
    fn answers_map_to_delivered_permanent_or_transient() {
        assert_eq!(class(200, r#"{"messageIds":["1"]}"#), None);
        assert_eq!(class(200, "{}"), Some(FailureClass::Transient));
        let two = br#"{"messageIds":["1","2"]}"#;
        assert!(settle(200, two, 2).is_ok());
        assert!(settle(200, two, 3).is_err(), "an id per message published");
        let unexpected = settle(200, b"{}", 1).unwrap_err().to_string();
        assert_eq!(unexpected, "unexpected Pub/Sub answer: {}");
        let not_found =
            r#"{"error":{"code":404,"message":"Resource not found","status":"NOT_FOUND"}}"#;
        assert_eq!(class(404, not_found), Some(FailureClass::Transient));
        let invalid = r#"{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(class(400, invalid), Some(FailureClass::Permanent));
        let failure = settle(400, invalid.as_bytes(), 1).unwrap_err().to_string();
        assert_eq!(
            failure,
            "permanent: Pub/Sub error INVALID_ARGUMENT (HTTP status 400): bad"
        );
        assert_eq!(class(500, "kaboom"), Some(FailureClass::Transient));
        let text = |status, reply: &[u8]| settle(status, reply, 1).unwrap_err().to_string();
        assert_eq!(
            text(502, b"<h1>Bad\n gateway</h1>"),
            "HTTP status 502: <h1>Bad gateway</h1>"
        );
        assert_eq!(text(503, b""), "HTTP status 503", "an empty answer");
        let bare = br#"{"error":{"code":503,"status":"UNAVAILABLE"}}"#;
        let bare_text = "Pub/Sub error UNAVAILABLE (HTTP status 503)";
        assert_eq!(text(503, bare), bare_text, "no message");
    }
}
