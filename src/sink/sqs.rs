//! The SQS sink, a batching sink: a batch of up to 10 attempts is one
//! `AmazonSQS.SendMessageBatch` in the JSON protocol (`POST /` to the
//! queue's endpoint, `content-type: application/x-amz-json-1.0`,
//! `x-amz-target`), signed with SigV4 for service `sqs` (see `sigv4`); a
//! batch whose messages together pass `max_message_bytes` (SQS's limit
//! for one message and for a batch's total) goes in several requests. Each
//! message is goad's JSON envelope of the hook with its attributes (see
//! `message`); a body over the sink's `inline_max_bytes` goes to the claim
//! check and the message carries its reference. A message still larger
//! than `max_message_bytes` is dead-lettered at once.
//!
//! A queue whose name ends `.fifo` is FIFO: each message carries
//! `MessageGroupId` (the sink's `message_group_id`, by default
//! `<tenant>/<source>`) and `MessageDeduplicationId` (the hook id, or
//! `<id>:replay:<replay id>` for a replayed row, so a replay is not
//! dropped as a duplicate). A standard queue gets neither unless a group is
//! set.
//!
//! Answers, per message: listed `Successful` with the MD5 of the body sent
//! is delivered; an MD5 that differs, or a message the answer does not
//! name, is transient; listed `Failed` is permanent for the codes no retry
//! can fix (`InvalidMessageContents`, `InvalidParameterValue`,
//! `InvalidParameterValueException`) and transient otherwise. A request
//! that fails fails each of its messages alike: an SQS error document
//! (`{"__type": "...#Code", "message": ...}`) by the same codes (a queue
//! that does not exist yet, throttling: transient), another 200, a
//! transport error or missing credentials transient. goad never creates
//! the queue.

use super::aws_credentials::AwsCredentials;
use super::client::{failed_answer, Client};
use super::message::attributes;
use super::message::message_json;
use super::queue::{deliver_in_requests, deliver_one};
use super::sigv4::{sign_headers, SignError, Unsigned};
use super::status::{detail, BadStatus};
use super::{answer_of, excerpt, Delivery, MessageTooLarge, Sink, SinkError};
use crate::limits::SQS_BATCH_MAX_ENTRIES;
use md5::{Digest, Md5};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU16;
use std::time::{Instant, SystemTime};

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
    pub credentials: AwsCredentials,
    /// The source's `forward_headers` allowlist, if any.
    pub forward_allow: Option<Vec<String>>,
    /// Bodies larger than this go to the claim check.
    pub inline_max_bytes: u64,
    /// Idle keep-alive connections to keep (at least the sink's concurrency).
    pub idle_connections: usize,
}

impl SqsSinkOptions {
    /// Whether a sink built from `other` would do what one built from
    /// these does: every option equal, credentials from the same place.
    pub(crate) fn same_as(&self, other: &SqsSinkOptions) -> bool {
        let SqsSinkOptions {
            queue_url,
            endpoint,
            region,
            message_group_id,
            max_message_bytes,
            timeout_ms,
            credentials,
            forward_allow,
            inline_max_bytes,
            idle_connections,
        } = self;
        *queue_url == other.queue_url
            && *endpoint == other.endpoint
            && *region == other.region
            && *message_group_id == other.message_group_id
            && *max_message_bytes == other.max_message_bytes
            && *timeout_ms == other.timeout_ms
            && credentials.same_source(&other.credentials)
            && *forward_allow == other.forward_allow
            && *inline_max_bytes == other.inline_max_bytes
            && *idle_connections == other.idle_connections
    }
}

/// An SQS queue.
pub struct SqsSink {
    client: Client,
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

/// Whether the queue of this name (see [`queue_name`]) is FIFO.
pub fn is_fifo(queue_name: &str) -> bool {
    queue_name.ends_with(".fifo")
}

/// A FIFO queue's `MessageGroupId` when the sink sets none: the hook's
/// tenant and source.
pub fn default_group(tenant: &str, source_id: &str) -> String {
    format!("{tenant}/{source_id}")
}

/// Whether SQS takes `group` as a `MessageGroupId`: 1 to 128 letters,
/// digits and punctuation (`!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~`).
pub fn is_group_id(group: &str) -> bool {
    (1..=128).contains(&group.len()) && group.bytes().all(|b| b.is_ascii_graphic())
}

/// The region an AWS queue URL names: `sqs.<region>.amazonaws.com` (and
/// `.com.cn`), `sqs-fips.<region>.amazonaws.com`, the dual-stack
/// `sqs.<region>.api.aws`, an interface VPC endpoint's
/// `<id>.sqs.<region>.vpce.amazonaws.com`, or the legacy
/// `<region>.queue.amazonaws.com`.
pub fn region_of(queue_url: &str) -> Option<String> {
    let uri = queue_url.parse::<ureq::http::Uri>().ok()?;
    let labels: Vec<&str> = uri.host()?.split('.').collect();
    let sqs = |w: &[&str]| matches!(w, ["sqs" | "sqs-fips", _, "amazonaws" | "api" | "vpce"]);
    let region = match labels.as_slice() {
        [region, "queue", "amazonaws", ..] => region,
        _ => labels.windows(3).find(|w| sqs(w))?.get(1)?,
    };
    Some(region.to_string())
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
        let fifo = is_fifo(queue_name(&options.queue_url)?);
        Some(SqsSink {
            client: Client::for_aws(options.timeout_ms, options.idle_connections),
            post_url: format!("{endpoint}/"),
            options,
            fifo,
        })
    }

    /// One delivery's message: its `SendMessageBatch` entry (but its `Id`)
    /// and the MD5 of its body, and its size as SQS counts it.
    fn message(&self, delivery: &Delivery<'_>) -> Result<(Message, u64), SinkError> {
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
        let body_md5 = md5_hex(&body);
        let mut entry = Map::new();
        entry.insert("MessageBody".into(), json!(body));
        let attributes: Map<String, Value> = attributes
            .into_iter()
            .map(|(name, value)| {
                let typed = json!({"DataType": "String", "StringValue": value});
                (name.to_string(), typed)
            })
            .collect();
        entry.insert("MessageAttributes".into(), Value::Object(attributes));
        let group = match &self.options.message_group_id {
            Some(group) => Some(group.clone()),
            None if self.fifo => Some(default_group(&hook.tenant, &hook.source_id)),
            None => None,
        };
        if let Some(group) = group {
            entry.insert("MessageGroupId".into(), json!(group));
        }
        if self.fifo {
            let dedupe = match delivery.replay_id {
                Some(replay) => format!("{}:replay:{replay}", hook.id),
                None => hook.id.clone(),
            };
            entry.insert("MessageDeduplicationId".into(), json!(dedupe));
        }
        Ok((Message { entry, body_md5 }, size_bytes as u64))
    }

    /// One `SendMessageBatch` of `messages`, by `deadline`; entry `Id`s
    /// are their indexes.
    fn send_batch(&self, messages: Vec<Message>, deadline: Instant) -> Vec<Result<(), SinkError>> {
        let mut md5s = Vec::with_capacity(messages.len());
        let entries: Vec<Value> = messages
            .into_iter()
            .enumerate()
            .map(
                |(
                    index,
                    Message {
                        mut entry,
                        body_md5,
                    },
                )| {
                    md5s.push(body_md5);
                    entry.insert("Id".into(), json!(index.to_string()));
                    Value::Object(entry)
                },
            )
            .collect();
        let request = json!({"QueueUrl": self.options.queue_url, "Entries": entries});
        match self.post(&request.to_string(), deadline) {
            Ok((status, reply)) => settle(status, &reply, &md5s),
            Err(failure) => failure
                .for_each_of(md5s.len())
                .into_iter()
                .map(Err)
                .collect(),
        }
    }

    /// Signs and sends a `SendMessageBatch` request, by `deadline`: the
    /// answer's status and body.
    fn post(&self, request: &str, deadline: Instant) -> Result<(u16, Vec<u8>), SinkError> {
        let headers = [
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", "AmazonSQS.SendMessageBatch"),
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
            Some(deadline),
        )
        .map_err(SignError::failure)?;
        let post = || {
            let mut post = self.client.post(&self.post_url);
            for (name, value) in headers {
                post = post.header(name, value);
            }
            for (name, value) in &signed {
                post = post.header(name.as_str(), value.as_str());
            }
            post
        };
        answer_of(post, request.as_bytes(), deadline)
    }
}

/// A message of a batch, ready to send.
struct Message {
    entry: Map<String, Value>,
    body_md5: String,
}

fn md5_hex(text: &str) -> String {
    hex::encode(Md5::digest(text.as_bytes()))
}

impl Sink for SqsSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        deliver_one(self, delivery)
    }

    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        deliver_in_requests(
            deliveries,
            usize::from(SQS_BATCH_MAX_ENTRIES),
            self.options.max_message_bytes,
            |delivery| self.message(delivery),
            |messages, deadline| self.send_batch(messages, deadline),
        )
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        Some(self.options.inline_max_bytes)
    }

    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        NonZeroU16::new(SQS_BATCH_MAX_ENTRIES)
    }
}

/// What an answer to a `SendMessageBatch` means for each of its messages,
/// whose bodies had the MD5s `md5s` (entry `Id`s are their indexes).
fn settle(status: u16, reply: &[u8], md5s: &[String]) -> Vec<Result<(), SinkError>> {
    let document: Option<Value> = serde_json::from_slice(reply).ok();
    let field = |name: &str| {
        document
            .as_ref()
            .and_then(|d| d.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if status != 200 {
        return request_failure(
            status,
            reply,
            field("__type"),
            field("message").or(field("Message")),
        )
        .for_each_of(md5s.len())
        .into_iter()
        .map(Err)
        .collect();
    }
    let entries = |list: &str| -> Option<HashMap<String, Value>> {
        let list = document.as_ref()?.get(list)?.as_array()?;
        let by_id = list
            .iter()
            .filter_map(|entry| Some((entry.get("Id")?.as_str()?.to_string(), entry.clone())));
        Some(by_id.collect())
    };
    // An empty list may be left out of the answer, but not both.
    let (successful, failed) = match (entries("Successful"), entries("Failed")) {
        (None, None) => {
            let unexpected = SinkError::transient(SqsAnswer::Unexpected(excerpt(reply)));
            return unexpected
                .for_each_of(md5s.len())
                .into_iter()
                .map(Err)
                .collect();
        }
        (successful, failed) => (successful.unwrap_or_default(), failed.unwrap_or_default()),
    };
    md5s.iter()
        .enumerate()
        .map(|(index, expected)| {
            let id = index.to_string();
            entry_result(successful.get(&id), failed.get(&id), expected)
        })
        .collect()
}

/// One message's result: listed `successful` with the MD5 of the body
/// sent (`expected`), listed `failed` with SQS's code, or in neither list.
fn entry_result(
    successful: Option<&Value>,
    failed: Option<&Value>,
    expected: &str,
) -> Result<(), SinkError> {
    let text = |entry: &Value, name: &str| {
        entry
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if let Some(entry) = successful {
        let got = text(entry, "MD5OfMessageBody");
        if got == expected {
            return Ok(());
        }
        let expected = expected.to_string();
        return Err(SinkError::transient(SqsAnswer::Md5Mismatch {
            expected,
            got,
        }));
    }
    let Some(entry) = failed else {
        return Err(SinkError::transient(SqsAnswer::Unanswered));
    };
    let refused = SqsAnswer::Refused {
        code: text(entry, "Code"),
        message: text(entry, "Message"),
    };
    Err(classify(refused))
}

/// A request SQS did not take: an SQS error document (`__type` as
/// `...#Code` or the bare code), or another answer.
fn request_failure(
    status: u16,
    reply: &[u8],
    kind: Option<String>,
    message: Option<String>,
) -> SinkError {
    let Some(kind) = kind else {
        return SinkError::transient(SqsAnswer::Status(failed_answer(status, reply)));
    };
    // "com.amazonaws.sqs#QueueDoesNotExist", or the bare code.
    let code = kind.rsplit('#').next().unwrap_or(&kind).to_string();
    classify(SqsAnswer::Error {
        status,
        code,
        message: message.unwrap_or_default(),
    })
}

/// An SQS error, permanent for the codes no retry can fix.
fn classify(answer: SqsAnswer) -> SinkError {
    match &answer {
        SqsAnswer::Error { code, .. } | SqsAnswer::Refused { code, .. }
            if PERMANENT_CODES.contains(&code.as_str()) =>
        {
            SinkError::permanent(answer)
        }
        _ => SinkError::transient(answer),
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
    /// SQS refused one message of a batch.
    Refused { code: String, message: String },
    /// The queue stored something else than what was sent.
    Md5Mismatch { expected: String, got: String },
    /// A batch answer that names neither success nor failure of a message.
    Unanswered,
    /// A 200 that is not a `SendMessageBatch` answer.
    Unexpected(String),
    /// Another status, without an SQS error document (an AWS XML error is
    /// quoted by its code and message: see `client::failed_answer`).
    Status(BadStatus),
}

impl fmt::Display for SqsAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqsAnswer::Error {
                status,
                code,
                message,
            } => {
                write!(f, "SQS error {code} (HTTP status {status})")?;
                detail(f, message)
            }
            SqsAnswer::Refused { code, message } => {
                write!(f, "SQS refused the message: {code}")?;
                detail(f, message)
            }
            SqsAnswer::Unanswered => write!(f, "SQS's batch answer does not name the message"),
            SqsAnswer::Md5Mismatch { expected, got } => write!(
                f,
                "SQS stored a message body with MD5 {got}, not the {expected} sent"
            ),
            SqsAnswer::Unexpected(body) => write!(f, "unexpected SQS answer: {body}"),
            SqsAnswer::Status(bad) => bad.fmt(f),
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
        for (url, region) in [
            ("https://us-east-2.queue.amazonaws.com/1/q", "us-east-2"),
            ("https://sqs.cn-north-1.amazonaws.com.cn/1/q", "cn-north-1"),
            (
                "https://sqs-fips.us-gov-west-1.amazonaws.com/1/q",
                "us-gov-west-1",
            ),
            ("https://sqs.ap-south-1.api.aws/1/q", "ap-south-1"),
            (
                "https://vpce-0a1b-c2d3.sqs.eu-central-1.vpce.amazonaws.com/1/q",
                "eu-central-1",
            ),
        ] {
            assert_eq!(region_of(url).as_deref(), Some(region), "{url}");
        }
        assert_eq!(region_of("https://sqs.example.com/1/q"), None);
        let local = "http://127.0.0.1:5000/123456789012/q/";
        assert_eq!((queue_name(local), region_of(local)), (Some("q"), None));
        assert_eq!(queue_name("http://127.0.0.1:5000/"), None);
        assert_eq!(origin(local).as_deref(), Some("http://127.0.0.1:5000"));
    }

    /// The classes of the answer to a batch of two messages with bodies
    /// `{}` and `[]`: `None` for delivered.
    fn classes(status: u16, reply: &str) -> Vec<Option<FailureClass>> {
        let md5s = [md5_hex("{}"), md5_hex("[]")];
        settle(status, reply.as_bytes(), &md5s)
            .into_iter()
            .map(|r| r.err().map(|e| e.into_failure().class))
            .collect()
    }

    #[test]
    fn each_message_of_a_batch_settles_on_its_own_entry_of_the_answer() {
        use FailureClass::{Permanent, Transient};
        let braces = "99914b932bd37a50b983c5e7c90ae93b";
        let brackets = md5_hex("[]");
        let both = format!(
            r#"{{"Successful":[{{"Id":"1","MessageId":"b","MD5OfMessageBody":"{brackets}"}},
                {{"Id":"0","MessageId":"a","MD5OfMessageBody":"{braces}"}}],"Failed":[]}}"#
        );
        assert_eq!(classes(200, &both), [None, None], "by Id, in any order");
        let wrong = format!(
            r#"{{"Successful":[{{"Id":"0","MessageId":"a","MD5OfMessageBody":"{brackets}"}}]}}"#
        );
        assert_eq!(classes(200, &wrong), [Some(Transient), Some(Transient)]);
        let failures = settle(200, wrong.as_bytes(), &[md5_hex("{}"), brackets.clone()]);
        let texts: Vec<String> = failures
            .into_iter()
            .map(|r| r.unwrap_err().to_string())
            .collect();
        assert_eq!(
            texts,
            [
                format!("SQS stored a message body with MD5 {brackets}, not the {braces} sent"),
                "SQS's batch answer does not name the message".to_string()
            ]
        );
        let refused = format!(
            r#"{{"Successful":[{{"Id":"0","MessageId":"a","MD5OfMessageBody":"{braces}"}}],
                "Failed":[{{"Id":"1","SenderFault":true,"Code":"InvalidParameterValue","Message":"bad"}}]}}"#
        );
        assert_eq!(classes(200, &refused), [None, Some(Permanent)]);
        let throttled = r#"{"Failed":[{"Id":"0","SenderFault":false,"Code":"ServiceUnavailable","Message":"x"},{"Id":"1","SenderFault":true,"Code":"InvalidMessageContents","Message":"y"}]}"#;
        assert_eq!(classes(200, throttled), [Some(Transient), Some(Permanent)]);
        assert_eq!(classes(200, "{}"), [Some(Transient), Some(Transient)]);
        // A failed entry's `Message` is optional.
        let bare = r#"{"Failed":[{"Id":"0","SenderFault":true,"Code":"InvalidMessageContents"}]}"#;
        let failure = settle(200, bare.as_bytes(), &[md5_hex("{}")]).remove(0);
        let failure = failure.unwrap_err().to_string();
        let expected = "permanent: SQS refused the message: InvalidMessageContents";
        assert_eq!(failure, expected);
    }

    #[test]
    fn a_failed_request_fails_every_message_alike() {
        use FailureClass::{Permanent, Transient};
        let missing = r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no"}"#;
        assert_eq!(classes(400, missing), [Some(Transient), Some(Transient)]);
        let bad = r#"{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"bad"}"#;
        assert_eq!(classes(400, bad), [Some(Permanent), Some(Permanent)]);
        let text = |status, reply: &[u8]| -> Vec<String> {
            (settle(status, reply, &[md5_hex("{}")]).into_iter())
                .map(|r| r.unwrap_err().to_string())
                .collect()
        };
        assert_eq!(text(500, b"kaboom"), ["HTTP status 500: kaboom"]);
        assert_eq!(text(503, b""), ["HTTP status 503"], "an empty answer");
        let bare = br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist"}"#;
        let bare_text = "SQS error QueueDoesNotExist (HTTP status 400)";
        assert_eq!(text(400, bare), [bare_text], "no message");
    }
}
