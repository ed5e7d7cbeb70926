//! What the queue sinks (SQS, Pub/Sub) share: packing a batch's messages
//! into requests, sending a request and reading its answer, and the error
//! of a message too large to send.

use super::client::{ended_by_peer, request_timeout, send_past_stale_connections, transport_error};
use super::{Delivery, Sink, SinkError};
use std::fmt;
use std::time::Instant;

/// The most of an answer a queue sink reads (an answer is a few hundred bytes).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// Sends a queue sink's request, as `request` builds it, and reads its
/// answer (up to `MAX_ANSWER_BYTES`, so the connection can be reused): the
/// status and the body. A request that met a kept-alive connection closed
/// as it was reused is built and sent again (see
/// [`send_past_stale_connections`]). The whole exchange ends a little past
/// `deadline`, its attempts' (see [`request_timeout`]). A transport error,
/// or an answer whose body cannot be read (whether the queue took the
/// messages is then unknown), is a transient failure.
pub(super) fn answer_of(
    request: impl Fn() -> ureq::RequestBuilder<ureq::typestate::WithBody>,
    body: &[u8],
    deadline: Instant,
) -> Result<(u16, Vec<u8>), SinkError> {
    let response = send_past_stale_connections(|| {
        request()
            .config()
            .timeout_global(request_timeout(deadline))
            .build()
            .send(body)
    })
    .map_err(|e| SinkError::transient(transport_error(e)))?;
    let status = response.status().as_u16();
    let reply = response
        .into_body()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_vec()
        .map_err(|e| unread_answer(status, e))?;
    Ok((status, reply))
}

/// The failure of an answer of `status` whose body could not be read:
/// longer than any queue's answer, cut short or too slow.
fn unread_answer(status: u16, e: ureq::Error) -> SinkError {
    let why = match e {
        ureq::Error::BodyExceedsLimit(limit_bytes) => format!(
            "it is over {} KiB, longer than any answer of a queue's",
            limit_bytes / 1024
        ),
        ureq::Error::Timeout(ureq::Timeout::Global) => {
            "it had not ended by the attempt's deadline (dispatch.attempt_timeout_ms)".into()
        }
        e if ended_by_peer(&e) => format!("the connection ended before it did ({e})"),
        e => e.to_string(),
    };
    SinkError::transient(format!(
        "the answer (HTTP status {status}) could not be read: {why}"
    ))
}

/// A batch's messages, prepared by `prepare` (its message and its size as
/// the queue counts it, or the entry's own failure), sent by `send` in
/// requests of up to `max_entries` messages and `max_request_bytes` (a
/// message that alone is larger goes alone), in order. `send` answers one
/// result per message it is given, by the deadline it is given (the
/// attempts'). Returns one result per delivery.
pub(super) fn deliver_in_requests<M>(
    deliveries: &[Delivery<'_>],
    max_entries: usize,
    max_request_bytes: u64,
    prepare: impl Fn(&Delivery<'_>) -> Result<(M, u64), SinkError>,
    send: impl Fn(Vec<M>, Instant) -> Vec<Result<(), SinkError>>,
) -> Vec<Result<(), SinkError>> {
    let mut results: Vec<Option<Result<(), SinkError>>> = deliveries.iter().map(|_| None).collect();
    let mut prepared = Vec::new();
    for (index, delivery) in deliveries.iter().enumerate() {
        match prepare(delivery) {
            Ok((message, size_bytes)) => prepared.push((index, message, size_bytes)),
            Err(e) => results[index] = Some(Err(e)),
        }
    }
    let mut prepared = prepared.into_iter().peekable();
    while let Some((index, message, size_bytes)) = prepared.next() {
        let (mut indexes, mut messages, mut bytes) = (vec![index], vec![message], size_bytes);
        while messages.len() < max_entries {
            let fits = |(_, _, size): &(usize, M, u64)| bytes + size <= max_request_bytes;
            let Some((index, message, size_bytes)) = prepared.next_if(fits) else {
                break;
            };
            indexes.push(index);
            messages.push(message);
            bytes += size_bytes;
        }
        let count = messages.len();
        let answers = send(messages, deliveries[index].deadline);
        assert_eq!(answers.len(), count, "one answer per message sent");
        for (index, answer) in indexes.into_iter().zip(answers) {
            results[index] = Some(answer);
        }
    }
    results
        .into_iter()
        .map(|r| r.expect("every entry prepared or answered"))
        .collect()
}

/// One attempt as a batch of one, for a sink that sends only batches.
pub(super) fn deliver_one(sink: &dyn Sink, delivery: &Delivery<'_>) -> Result<(), SinkError> {
    let mut results = sink.deliver_batch(std::slice::from_ref(delivery));
    results.pop().expect("one result per delivery")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{first_attempts, hooks_with_bodies};
    use std::cell::RefCell;

    /// Bodies are sizes ("x" fails to prepare); returns each request's
    /// bodies and each delivery's result as "ok" or its error.
    fn pack(bodies: &[&str], max_entries: usize, max_bytes: u64) -> (Vec<String>, Vec<String>) {
        let hooks = hooks_with_bodies(bodies);
        let deliveries = first_attempts(&hooks);
        let requests = RefCell::new(Vec::new());
        let results = deliver_in_requests(
            &deliveries,
            max_entries,
            max_bytes,
            |d| {
                let body = String::from_utf8(d.hook.body.clone()).unwrap();
                match body.parse::<u64>() {
                    Ok(size) => Ok((body, size)),
                    Err(_) => Err(SinkError::permanent(format!("cannot send {body}"))),
                }
            },
            |messages, _| {
                requests.borrow_mut().push(messages.join(","));
                messages.iter().map(|_| Ok(())).collect()
            },
        );
        let results = results
            .into_iter()
            .map(|r| r.map_or_else(|e| e.to_string(), |()| "ok".into()))
            .collect();
        (requests.into_inner(), results)
    }

    #[test]
    fn messages_go_in_order_in_requests_within_the_entry_and_byte_limits() {
        let (requests, results) = pack(&["1", "2", "3", "4", "5"], 2, 100);
        assert_eq!(requests, ["1,2", "3,4", "5"]);
        assert_eq!(results, ["ok"; 5]);
        let (requests, _) = pack(&["60", "30", "20", "150", "10"], 10, 100);
        assert_eq!(requests, ["60,30", "20", "150", "10"], "a large one alone");
    }

    #[test]
    fn a_message_that_cannot_be_prepared_fails_alone() {
        let (requests, results) = pack(&["1", "x", "2"], 10, 100);
        assert_eq!(requests, ["1,2"]);
        assert_eq!(results, ["ok", "permanent: cannot send x", "ok"]);
    }
}
