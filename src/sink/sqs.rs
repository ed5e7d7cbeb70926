//! The SQS sink: one `AmazonSQS.SendMessage` per attempt, in the JSON
//! protocol (`POST /` to the queue's endpoint, `content-type:
//! application/x-amz-json-1.0`, `x-amz-target`), signed with SigV4 for
//! service `sqs` (see `sigv4`). The message is goad's JSON envelope of the
//! hook with its attributes (see `message`); a body over the sink's
//! `inline_max_bytes` goes to the claim check and the message carries its
//! reference. A message still larger than `max_message_bytes` is
//! dead-lettered at once.
//!
//! A queue whose name ends `.fifo` is FIFO: each message carries
//! `MessageGroupId` (the sink's `message_group_id`, by default
//! `<tenant>/<source>`) and `MessageDeduplicationId` (the hook id, or
//! `<id>:replay:<replay id>` for a replayed row, so a replay is not
//! dropped as a duplicate). A standard queue gets neither unless a group is
//! set.
//!
//! Answers: 200 with a `MessageId` and the MD5 of the body sent is
//! delivered; an MD5 that differs, another 200, a transport error or
//! missing credentials are transient; an SQS error document
//! (`{"__type": "...#Code", "message": ...}`) is permanent for the codes
//! no retry can fix (`InvalidMessageContents`, `InvalidParameterValue`,
//! `InvalidParameterValueException`) and transient otherwise (a queue that
//! does not exist yet, throttling); any other answer is transient. goad
//! never creates the queue.

use super::message::attributes;
use super::message::message_json;
use super::sigv4::{sign_headers, EnvCredentials, SignError, Unsigned};
use super::{agent, answer_of, excerpt, Delivery, MessageTooLarge, Sink, SinkError};
use md5::{Digest, Md5};
use serde_json::{json, Map, Value};
use std::fmt;
use std::time::SystemTime;

/// The SQS error codes that retrying cannot fix.
const PERMANENT_CODES: &[&str] = &[
    "InvalidMessageContents",
    "InvalidParameterValue",
    "InvalidParameterValueException",
];

/// What an SQS sink needs, resolved from its config entry.
#[derive(Debug, Clone)]
pub struct SqsSinkOptions {
    pub queue_url: String,
    /// Where requests go (by default the queue URL's origin).
    pub endpoint: Option<String>,
    pub region: String,
    pub message_group_id: Option<String>,
    pub max_message_bytes: u64,
    pub timeout_ms: u64,
    pub credentials: EnvCredentials,
    /// The source's `forward_headers` allowlist, if any.
    pub forward_allow: Option<Vec<String>>,
    /// Bodies larger than this go to the claim check.
    pub inline_max_bytes: u64,
    /// Idle keep-alive connections to keep (at least the sink's concurrency).
    pub idle_connections: usize,
}

/// An SQS queue.
pub struct SqsSink {
    agent: ureq::Agent,
    /// `<endpoint>/`, where every request goes.
    post_url: String,
    options: SqsSinkOptions,
    fifo: bool,
}

/// The queue's name: the last segment of its URL's path.
pub fn queue_name(queue_url: &str) -> Option<&str> {
    let (_scheme, rest) = queue_url.split_once("://")?;
    let (_authority, path) = rest.split_once('/')?;
    let path = path.split(['?', '#']).next()?;
    let name = path.trim_end_matches('/').rsplit('/').next()?;
    (!name.is_empty()).then_some(name)
}

/// The region an AWS queue URL names (`sqs.<region>.amazonaws.com`, or the
/// legacy `<region>.queue.amazonaws.com`).
pub fn region_of(queue_url: &str) -> Option<String> {
    let uri = queue_url.parse::<ureq::http::Uri>().ok()?;
    let host = uri.host()?;
    let labels: Vec<&str> = host.split('.').collect();
    match labels.as_slice() {
        ["sqs", region, "amazonaws", ..] | [region, "queue", "amazonaws", ..] => {
            Some(region.to_string())
        }
        _ => None,
    }
}

/// The origin (`scheme://authority`) of a URL.
fn origin(url: &str) -> Option<String> {
    let uri = url.parse::<ureq::http::Uri>().ok()?;
    Some(format!("{}://{}", uri.scheme_str()?, uri.authority()?))
}

impl SqsSink {
    /// The sink of `options`; `None` when its queue URL or endpoint is not
    /// an http(s) URL (the config's validation refuses both first).
    pub fn new(options: SqsSinkOptions) -> Option<SqsSink> {
        let endpoint = match &options.endpoint {
            Some(endpoint) => origin(endpoint)?,
            None => origin(&options.queue_url)?,
        };
        let fifo = queue_name(&options.queue_url)?.ends_with(".fifo");
        Some(SqsSink {
            agent: agent(options.timeout_ms, options.idle_connections),
            post_url: format!("{endpoint}/"),
            options,
            fifo,
        })
    }

    /// The `SendMessage` request body of one delivery.
    fn send_message(&self, delivery: &Delivery<'_>) -> Result<(String, String), SinkError> {
        let hook = delivery.hook;
        let body = message_json(delivery, self.options.forward_allow.as_deref());
        let attributes = attributes(delivery);
        let size_bytes = body.len()
            + attributes
                .iter()
                .map(|(name, value)| name.len() + "String".len() + value.len())
                .sum::<usize>();
        let max_bytes = self.options.max_message_bytes;
        if size_bytes as u64 > max_bytes {
            return Err(SinkError::permanent(MessageTooLarge {
                size_bytes,
                max_bytes,
            }));
        }
        let mut request = Map::new();
        request.insert("QueueUrl".into(), json!(self.options.queue_url));
        request.insert("MessageBody".into(), json!(body));
        let attributes: Map<String, Value> = attributes
            .into_iter()
            .map(|(name, value)| {
                let typed = json!({"DataType": "String", "StringValue": value});
                (name.to_string(), typed)
            })
            .collect();
        request.insert("MessageAttributes".into(), Value::Object(attributes));
        let group = match &self.options.message_group_id {
            Some(group) => Some(group.clone()),
            None if self.fifo => Some(format!("{}/{}", hook.tenant, hook.source_id)),
            None => None,
        };
        if let Some(group) = group {
            request.insert("MessageGroupId".into(), json!(group));
        }
        if self.fifo {
            let dedupe = match delivery.replay_id {
                Some(replay) => format!("{}:replay:{replay}", hook.id),
                None => hook.id.clone(),
            };
            request.insert("MessageDeduplicationId".into(), json!(dedupe));
        }
        Ok((Value::Object(request).to_string(), body))
    }
}

impl Sink for SqsSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        let (request, message_body) = self.send_message(delivery)?;
        let headers = [
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", "AmazonSQS.SendMessage"),
        ];
        let unsigned = Unsigned {
            method: "POST",
            url: &self.post_url,
            headers: &headers,
            body: request.as_bytes(),
        };
        let signed = sign_headers(
            &self.options.credentials,
            &self.options.region,
            "sqs",
            &unsigned,
            SystemTime::now(),
        )
        .map_err(|e| match e {
            SignError::NoCredentials(e) => SinkError::transient(e),
            other => SinkError::permanent(other),
        })?;
        let mut post = self.agent.post(&self.post_url);
        for (name, value) in headers {
            post = post.header(name, value);
        }
        for (name, value) in &signed {
            post = post.header(name.as_str(), value.as_str());
        }
        let (status, reply) = answer_of(post, request.as_bytes())?;
        settle(status, &reply, &message_body)
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        Some(self.options.inline_max_bytes)
    }
}

/// What an answer to `SendMessage` of `message_body` means.
fn settle(status: u16, reply: &[u8], message_body: &str) -> Result<(), SinkError> {
    let document: Option<Value> = serde_json::from_slice(reply).ok();
    let field = |name: &str| {
        document
            .as_ref()
            .and_then(|d| d.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if status == 200 {
        let expected: String = Md5::digest(message_body.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        return match (field("MessageId"), field("MD5OfMessageBody")) {
            (Some(_), Some(got)) if got == expected => Ok(()),
            (Some(_), Some(got)) => Err(SinkError::transient(SqsAnswer::Md5Mismatch {
                expected,
                got,
            })),
            _ => Err(SinkError::transient(SqsAnswer::Unexpected(excerpt(reply)))),
        };
    }
    let Some(kind) = field("__type") else {
        return Err(SinkError::transient(SqsAnswer::Status {
            status,
            body: excerpt(reply),
        }));
    };
    // "com.amazonaws.sqs#QueueDoesNotExist", or the bare code.
    let code = kind.rsplit('#').next().unwrap_or(&kind).to_string();
    let message = field("message")
        .or_else(|| field("Message"))
        .unwrap_or_default();
    let error = SqsAnswer::Error {
        status,
        code,
        message,
    };
    match &error {
        SqsAnswer::Error { code, .. } if PERMANENT_CODES.contains(&code.as_str()) => {
            Err(SinkError::permanent(error))
        }
        _ => Err(SinkError::transient(error)),
    }
}

/// An SQS answer that is not a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqsAnswer {
    /// An SQS error document.
    Error {
        status: u16,
        code: String,
        message: String,
    },
    /// The queue stored something else than what was sent.
    Md5Mismatch { expected: String, got: String },
    /// A 200 that is not a `SendMessage` answer.
    Unexpected(String),
    /// Another status, without an SQS error document.
    Status { status: u16, body: String },
}

impl fmt::Display for SqsAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqsAnswer::Error {
                status,
                code,
                message,
            } => write!(f, "SQS error {code} (HTTP status {status}): {message}"),
            SqsAnswer::Md5Mismatch { expected, got } => write!(
                f,
                "SQS stored a message body with MD5 {got}, not the {expected} sent"
            ),
            SqsAnswer::Unexpected(body) => write!(f, "unexpected SQS answer: {body}"),
            SqsAnswer::Status { status, body } => write!(f, "HTTP status {status}: {body}"),
        }
    }
}

impl std::error::Error for SqsAnswer {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::FailureClass;

    #[test]
    fn queue_names_and_regions_come_from_the_queue_url() {
        let aws = "https://sqs.eu-west-1.amazonaws.com/123456789012/hooks.fifo";
        assert_eq!(queue_name(aws), Some("hooks.fifo"));
        assert_eq!(region_of(aws).as_deref(), Some("eu-west-1"));
        let legacy = "https://us-east-2.queue.amazonaws.com/1/q";
        assert_eq!(region_of(legacy).as_deref(), Some("us-east-2"));
        let local = "http://127.0.0.1:5000/123456789012/q/";
        assert_eq!((queue_name(local), region_of(local)), (Some("q"), None));
        assert_eq!(queue_name("http://127.0.0.1:5000/"), None);
        assert_eq!(origin(local).as_deref(), Some("http://127.0.0.1:5000"));
    }

    fn class(status: u16, reply: &str) -> Option<FailureClass> {
        settle(status, reply.as_bytes(), "{}")
            .err()
            .map(|e| e.into_failure().class)
    }

    #[test]
    fn answers_map_to_delivered_permanent_or_transient() {
        let md5_of_braces = "99914b932bd37a50b983c5e7c90ae93b";
        let ok = format!(r#"{{"MessageId":"m","MD5OfMessageBody":"{md5_of_braces}"}}"#);
        assert_eq!(class(200, &ok), None);
        let wrong = r#"{"MessageId":"m","MD5OfMessageBody":"00000000000000000000000000000000"}"#;
        assert_eq!(class(200, wrong), Some(FailureClass::Transient));
        let failure = settle(200, wrong.as_bytes(), "{}").unwrap_err().to_string();
        assert!(failure.contains(md5_of_braces), "{failure}");
        assert_eq!(class(200, "{}"), Some(FailureClass::Transient));
        let missing = r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no"}"#;
        assert_eq!(class(400, missing), Some(FailureClass::Transient));
        let bad = r#"{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"bad"}"#;
        assert_eq!(class(400, bad), Some(FailureClass::Permanent));
        let contents = r#"{"__type":"InvalidMessageContents","message":"x"}"#;
        assert_eq!(class(400, contents), Some(FailureClass::Permanent));
        assert_eq!(class(500, "kaboom"), Some(FailureClass::Transient));
        let failure = settle(500, b"kaboom", "{}").unwrap_err().to_string();
        assert_eq!(failure, "HTTP status 500: kaboom");
    }
}
