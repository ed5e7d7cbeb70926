//! Receivers over raw TCP, for what a real server does not do on demand:
//! reading one request off a connection, and a receiver slower than an
//! attempt's deadline.

use super::{assert_ended_by_its_deadline, config, rows, source, wait_until};
use goad::{Config, Engine, NewHook, SinkConfig};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// One request read whole: its method and headers (names in lower case).
pub struct RawRequest {
    pub method: String,
    pub headers: Vec<(String, String)>,
}

/// One whole request read from `stream`, its body read too; `None` at the
/// end of the stream.
pub fn read_request(stream: &mut TcpStream) -> Option<RawRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(head) = request.parse(&buf).unwrap() {
            let method = request.method.unwrap().to_string();
            let headers: Vec<(String, String)> = request
                .headers
                .iter()
                .map(|h| {
                    let value = String::from_utf8(h.value.to_vec()).unwrap();
                    (h.name.to_ascii_lowercase(), value)
                })
                .collect();
            let length: usize = headers
                .iter()
                .find(|(name, _)| name == "content-length")
                .map_or(0, |(_, value)| value.parse().unwrap());
            while buf.len() < head + length {
                let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(RawRequest { method, headers });
        }
        let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// How long the dripping receiver waits before its answer's head, then
/// the bytes of its body it sends, one every `DRIP_MS`.
pub const DRIP_HEAD_AFTER_MS: u64 = 1_500;
pub const DRIP_BYTES: u64 = 30;
pub const DRIP_MS: u64 = 50;

/// A receiver (its URL) that answers each request with a 200 head after
/// `DRIP_HEAD_AFTER_MS`, then its body of `DRIP_BYTES` bytes one at a
/// time, every `DRIP_MS`: 3 s in all, no phase of the exchange longer than
/// 1.5 s (within a sink's per-phase timeout of 1.9 s, past an attempt
/// deadline of 2 s). For each request it tells how long after it a write
/// failed because the client had closed the connection (`None`: the whole
/// answer went out). A `HEAD` is answered 404 at once, as a bucket without
/// the object asked for.
pub fn dripping_receiver() -> (String, crossbeam_channel::Receiver<Option<Duration>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tell, told) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let (mut stream, tell) = (stream.unwrap(), tell.clone());
            std::thread::spawn(move || {
                while let Some(request) = read_request(&mut stream) {
                    if request.method == "HEAD" {
                        let missing = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
                        stream.write_all(missing).unwrap();
                        continue;
                    }
                    let started = Instant::now();
                    // The receiver's pace, not a wait for the test.
                    std::thread::sleep(Duration::from_millis(DRIP_HEAD_AFTER_MS));
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {DRIP_BYTES}\r\n\r\n");
                    let mut sent = stream.write_all(head.as_bytes());
                    for _ in 0..DRIP_BYTES {
                        if sent.is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(DRIP_MS));
                        sent = stream.write_all(b".");
                    }
                    let _ = tell.send(sent.is_err().then(|| started.elapsed()));
                }
            });
        }
    });
    (url, told)
}

/// How goad's sinks say a request was cut off by its attempt's deadline.
pub const CUT_OFF: &str = "no answer by the attempt's deadline (dispatch.attempt_timeout_ms)";

/// How goad's queue sinks say an answer's body was cut off by its
/// attempt's deadline (its head had come: the dripping receiver's).
pub const ANSWER_CUT_OFF: &str = "the answer (HTTP status 200) could not be read: \
     it had not ended by the attempt's deadline (dispatch.attempt_timeout_ms)";

/// Delivers a hook to the sink `sink` makes of the dripping receiver's URL
/// (with a per-phase timeout of 1.9 s; it may point the config there too)
/// in attempts of 2 s, a minute apart, and checks the attempt: the
/// deadline falls in the middle of the receiver's 3-s answer, so the
/// request is cut off by it, the attempt fails (as `attempt_timeout`, or
/// as `cut_off`, the sink's own error, when the shard's timer came late)
/// and its worker is not left stuck.
pub fn assert_a_dripping_receiver_is_cut_off_by_the_deadline(
    sink: impl FnOnce(&str, &mut Config) -> SinkConfig,
    cut_off: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let (url, cut_after) = dripping_receiver();
    let mut c = config(dir.path());
    c.dispatch.attempt_timeout_ms = 2_000;
    c.retry.base_ms = 60_000;
    c.retry.max_ms = 60_000;
    let sink = SinkConfig {
        timeout_ms: Some(1_900),
        ..sink(&url, &mut c)
    };
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    engine
        .commit(NewHook::new("s", "a body of 20 bytes.."))
        .unwrap();
    let cut_after = cut_after
        .recv_timeout(Duration::from_secs(10))
        .expect("the receiver's answer ended")
        .expect("the request was cut off before the answer ended");
    // No bound on when: a busy machine delays the receiver's next write.
    eprintln!("cut off {cut_after:?} after the request (its deadline: 2 s)");
    wait_until("the attempt failed", Duration::from_secs(5), || {
        rows(&engine)[0].record.attempts == 1
    });
    // Cut off 250 ms past the deadline: the shard's timer came first,
    // unless this thread was held up that long.
    let error = rows(&engine)[0].record.error.clone().unwrap();
    let errors = ["attempt_timeout: no result after 2000 ms", cut_off];
    assert_ended_by_its_deadline(&engine, &error, errors);
    assert_eq!(engine.stats()[0].core.delivered, 0);
}
