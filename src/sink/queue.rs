//! What the queue sinks (SQS, Pub/Sub) share: sending a request and
//! reading its answer, and the error of a message too large to send.

use super::SinkError;
use std::fmt;

/// The most of an answer a queue sink reads (an answer is a few hundred bytes).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// Sends a queue sink's request and reads its answer (up to
/// `MAX_ANSWER_BYTES`, so the connection can be reused): the status and the
/// body. A transport error is a transient failure.
pub(super) fn answer_of(
    request: ureq::RequestBuilder<ureq::typestate::WithBody>,
    body: &[u8],
) -> Result<(u16, Vec<u8>), SinkError> {
    let response = request.send(body).map_err(SinkError::transient)?;
    let status = response.status().as_u16();
    let reply = response
        .into_body()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_vec()
        .unwrap_or_default();
    Ok((status, reply))
}

/// The start of a sink's answer, as text, for an error message.
pub(super) fn excerpt(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(&reply[..reply.len().min(256)]);
    text.trim().to_string()
}

/// A message over the sink's `max_message_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTooLarge {
    pub size_bytes: usize,
    pub max_bytes: u64,
}

impl fmt::Display for MessageTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message of {} bytes over max_message_bytes {}",
            self.size_bytes, self.max_bytes
        )
    }
}

impl std::error::Error for MessageTooLarge {}
