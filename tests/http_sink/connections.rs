//! Keep-alive connections: a request on a connection the receiver closed
//! is sent again, and a reconfiguration keeps an unchanged sink's
//! connection.

use super::*;
use std::sync::Mutex;

/// A receiver over raw TCP, so it can end a kept-alive connection the
/// moment a request arrives: it answers 200 with keep-alive, but closes
/// the connection unanswered on the requests `unanswered` numbers (from 0,
/// across connections). It records each request's connection (numbered
/// from 0), `webhook-id` and `x-goad-attempt`.
struct ClosingReceiver {
    url: String,
    seen: Arc<Mutex<Vec<(usize, String, String)>>>,
}

impl ClosingReceiver {
    fn start(unanswered: &'static [usize]) -> ClosingReceiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        std::thread::spawn(move || {
            for (connection, stream) in listener.incoming().enumerate() {
                let seen = recorded.clone();
                std::thread::spawn(move || {
                    let mut stream = stream.unwrap();
                    while let Some((id, attempt)) = read_request(&mut stream) {
                        let mut seen = seen.lock().unwrap();
                        let number = seen.len();
                        seen.push((connection, id, attempt));
                        if unanswered.contains(&number) {
                            return;
                        }
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        stream.write_all(ok).unwrap();
                    }
                });
            }
        });
        ClosingReceiver { url, seen }
    }

    fn seen(&self) -> Vec<(usize, String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

/// An engine whose source `s` delivers to `url`; a failed attempt waits a
/// minute, so a test sees each attempt once.
fn engine_delivering_to(dir: &std::path::Path, url: &str) -> Engine {
    let mut c = config(dir);
    c.retry.base_ms = 60_000;
    c.retry.max_ms = 60_000;
    c.sources
        .push(source("s", "t", vec![SinkConfig::http(url)]));
    Engine::open(c).unwrap()
}

/// One whole request from `stream`: its `webhook-id` and `x-goad-attempt`;
/// `None` at the end of the stream.
fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, String)> {
    let request = raw::read_request(stream)?;
    let header = |name: &str| {
        let (_, value) = request.headers.iter().find(|(n, _)| n == name).unwrap();
        value.clone()
    };
    Some((header("webhook-id"), header("x-goad-attempt")))
}

/// The keep-alive race: a receiver closes an idle connection just as goad
/// reuses it (its idle timeout), so the connection ends with no answer and
/// the request never reached the receiver's application. goad sends it
/// again at once on a new connection, as the same attempt: no failure, no
/// backoff, no second attempt counted.
#[test]
fn a_request_on_a_kept_alive_connection_closed_as_it_was_reused_is_sent_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = ClosingReceiver::start(&[1]);
    let engine = engine_delivering_to(dir.path(), &receiver.url);
    // Each tick waits for its hook's row to settle (its count could be 0
    // if the row settled before the call), so the receiver's log is whole.
    let first = engine.commit(NewHook::new("s", "first")).unwrap();
    engine.tick().unwrap();
    let second = engine.commit(NewHook::new("s", "second")).unwrap();
    engine.tick().unwrap();
    let one = || "1".to_string();
    assert_eq!(
        receiver.seen(),
        [
            (0, first, one()),
            (0, second.clone(), one()),
            (1, second, one())
        ]
    );
    assert_eq!(rows(&engine).len(), 0, "both delivered");
}

/// A new connection that ends without an answer is the receiver's failure:
/// the attempt fails (transient, retried later), and is not sent again at
/// once.
#[test]
fn a_new_connection_closed_without_an_answer_fails_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = ClosingReceiver::start(&[0]);
    let engine = engine_delivering_to(dir.path(), &receiver.url);
    let id = engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(receiver.seen(), [(0, id, "1".to_string())]);
    let rows = rows(&engine);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].record.attempts, 1);
    assert_eq!(rows[0].record.status, RowStatus::Pending);
    let error = rows[0].record.error.as_deref().unwrap();
    assert_eq!(
        error,
        "the connection ended with no answer (io: Peer disconnected)"
    );
}

/// A reconfiguration keeps an unchanged sink, and with it its kept-alive
/// connection: the receiver sees the next delivery on the same
/// connection. A sink whose options changed is built anew, but goes on
/// over its connections unless what they are changed (its timeouts here),
/// which take new ones.
#[test]
fn a_reconfiguration_keeps_an_unchanged_sinks_connection() {
    let receiver = ClosingReceiver::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source(
        "s",
        "t",
        vec![SinkConfig::http(receiver.url.clone())],
    ));
    let engine = Engine::open(c.clone()).unwrap();
    commit_and_tick(&engine, "before");
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "after an unchanged reconfiguration");
    c.sources[0].sinks[0]
        .headers
        .insert("x-team".into(), "payments".into());
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "after a changed header");
    c.sources[0].sinks[0].timeout_ms = Some(4_000);
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "after changed timeouts");
    let connections: Vec<usize> = receiver.seen().into_iter().map(|(c, _, _)| c).collect();
    assert_eq!(connections, [0, 0, 0, 1]);
}

/// Sinks of different sources posting to one host share its kept-alive
/// connections: deliveries through each, one after the other, go over
/// one connection; a sink with other timeouts has its own.
#[test]
fn sinks_posting_to_one_host_share_its_connections() {
    let receiver = ClosingReceiver::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let to = |path: &str| SinkConfig::http(receiver.url.replace("/hooks", path));
    let slower = SinkConfig {
        timeout_ms: Some(4_000),
        ..to("/slower")
    };
    c.sources.push(source("a", "t", vec![to("/a")]));
    c.sources.push(source("b", "u", vec![to("/b"), slower]));
    let engine = Engine::open(c).unwrap();
    for (id, body) in [("a", "1"), ("b", "2"), ("a", "3")] {
        engine.commit(NewHook::new(id, body)).unwrap();
        engine.tick().unwrap();
    }
    let seen = receiver.seen();
    let connections: std::collections::BTreeSet<usize> = seen.iter().map(|(c, _, _)| *c).collect();
    assert_eq!(seen.len(), 4, "a, b and slower for 2, a again");
    assert_eq!(connections.len(), 2, "{seen:?}");
}
