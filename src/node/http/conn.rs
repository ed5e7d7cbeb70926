//! One client connection of the HTTP front: its buffers, the request in
//! progress and the rules for reading, answering in order and writing.

use super::chunked::ChunkedProgress;
use super::handshake::Tls;
use super::linger::Linger;
use super::request::{parse, Parsed, Request, RequestBytes};
use super::response::Response;
use super::tls::{read_plaintext, write_records};
use crate::limits::{MAX_HEAD_BYTES, MAX_PENDING_OUTPUT_BYTES, RETAINED_INPUT_BYTES};
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::time::Instant;

pub(super) struct Conn {
    /// Tells this connection from an earlier one in its slot.
    pub(super) id: u64,
    pub(super) stream: TcpStream,
    /// Its TLS, when the front speaks TLS.
    pub(super) tls: Option<Tls>,
    pub(super) input: Vec<u8>,
    pub(super) output: Vec<u8>,
    pub(super) written: usize,
    /// The id of the request handed off whose answer has not come.
    pub(super) waiting: Option<u64>,
    /// Whether the handed-off request keeps the connection open.
    pub(super) waiting_keep_alive: bool,
    /// Whether the handed-off request was a `HEAD`: its answer goes
    /// without its body.
    pub(super) waiting_head: bool,
    pub(super) close_after_write: bool,
    /// The peer closed its half: answer what is in progress, then close.
    pub(super) peer_closed: bool,
    /// An event said the peer closed its half (its FIN arrived, maybe with
    /// the last bytes): reads go on to the read that returns 0, which no
    /// later event would announce.
    pub(super) fin_announced: bool,
    /// The first byte of the request in progress arrived then.
    pub(super) request_started: Option<Instant>,
    /// `100 Continue` was sent for the request in progress.
    pub(super) continue_sent: bool,
    /// The head of the request in progress was screened (see
    /// `answer_buffered`).
    screened: bool,
    /// The whole chunks of the request in progress, if its body is chunked.
    pub(super) chunked: ChunkedProgress,
    /// What the request in progress takes, as far as its head tells.
    pub(super) size: RequestBytes,
    /// Bytes of the front's read budget the request in progress holds.
    pub(super) granted_bytes: usize,
    /// The request in progress waits for bytes of the read budget: the
    /// connection is not read meanwhile.
    pub(super) budget_waiting: bool,
    /// Bytes of the read budget the request handed off holds until its
    /// answer comes.
    pub(super) answering_bytes: usize,
    /// Bytes of the read budget to give back: their requests were answered.
    pub(super) returned_bytes: usize,
    pub(super) last_active: Instant,
    pub(super) writable_interest: bool,
    /// Its answers are written and its sending half shut: what its client
    /// still sends is dropped until it closes (see `linger`).
    pub(super) lingering: Option<Linger>,
    /// Taken only to be answered 503 at `http.max_connections` and closed
    /// in stages: it does not count against the cap.
    pub(super) refused: bool,
}

impl Conn {
    pub(super) fn new(id: u64, stream: TcpStream, tls: Option<Tls>) -> Conn {
        Conn {
            id,
            stream,
            tls,
            input: Vec::new(),
            output: Vec::new(),
            written: 0,
            waiting: None,
            waiting_keep_alive: false,
            waiting_head: false,
            close_after_write: false,
            peer_closed: false,
            fin_announced: false,
            request_started: None,
            continue_sent: false,
            screened: false,
            chunked: ChunkedProgress::default(),
            size: RequestBytes::Unknown,
            granted_bytes: 0,
            budget_waiting: false,
            answering_bytes: 0,
            returned_bytes: 0,
            last_active: Instant::now(),
            writable_interest: false,
            lingering: None,
            refused: false,
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        self.waiting.is_none() && self.input.is_empty() && !self.output_pending()
    }

    /// Whether bytes wait to go out: answers, or TLS records.
    pub(super) fn output_pending(&self) -> bool {
        self.written < self.output.len()
            || matches!(&self.tls, Some(Tls::Session(t)) if t.wants_write())
    }

    /// Drops what is buffered, with what was known of the request in it.
    pub(super) fn drop_input(&mut self) {
        self.input = Vec::new();
        self.end_request();
        self.returned_bytes += std::mem::take(&mut self.granted_bytes);
    }

    /// Forgets what was known of the request in progress: it was answered
    /// or dropped.
    fn end_request(&mut self) {
        self.request_started = None;
        self.continue_sent = false;
        self.screened = false;
        self.chunked = ChunkedProgress::default();
        self.size = RequestBytes::Unknown;
    }

    /// How far the buffer may fill: a head and a byte (enough to tell a
    /// head too large), or the request in progress that holds
    /// `granted_bytes` of the read budget, to at most `max_request_bytes`
    /// (a head and a body).
    pub(super) fn read_limit(&self, max_request_bytes: usize) -> usize {
        self.granted_bytes
            .clamp(MAX_HEAD_BYTES + 1, max_request_bytes)
    }

    /// Takes `bytes` of the read budget for the request in progress,
    /// and room for all of it in the buffer when its size is known (the
    /// buffer does not grow by doubling as the body arrives).
    pub(super) fn take_grant(&mut self, bytes: usize) {
        self.granted_bytes = bytes;
        self.budget_waiting = false;
        if let RequestBytes::Exactly(n) = self.size {
            self.input.reserve_exact(n.saturating_sub(self.input.len()));
        }
    }

    /// The bytes the request in progress must ask of the read budget: it
    /// is larger than a head and holds none (nor waits for them).
    pub(super) fn needs_grant(&self) -> Option<usize> {
        let bytes = self.size.most()?;
        (self.lacks_grant(bytes) && !self.budget_waiting).then_some(bytes)
    }

    /// Whether a request of `bytes` must hold bytes of the read budget
    /// that it does not hold yet.
    fn lacks_grant(&self, bytes: usize) -> bool {
        bytes > MAX_HEAD_BYTES && self.granted_bytes == 0
    }

    /// Whether the answers not yet written reach `MAX_PENDING_OUTPUT_BYTES`:
    /// no further request is answered until the client reads them.
    pub(super) fn output_full(&self) -> bool {
        self.output.len() - self.written >= MAX_PENDING_OUTPUT_BYTES
    }

    /// Whether its TLS handshake waits for the client's hello or a signer:
    /// the loop neither reads requests nor writes.
    pub(super) fn in_hello(&self) -> bool {
        matches!(self.tls, Some(Tls::Hello(_) | Tls::Signing))
    }

    /// Tells a TLS peer the connection closes (best effort).
    pub(super) fn say_close(&mut self) {
        if let Some(Tls::Session(tls)) = self.tls.as_mut() {
            tls.send_close_notify();
            let _ = tls.write_tls(&mut self.stream);
        }
    }

    /// Parses and answers the buffered requests, in order, until one waits
    /// for a later answer, the input runs out, the connection must close or
    /// the answers fill the output (`output_full`); true in that last case,
    /// when requests are held back until the output has room. A request
    /// whose body is still to come has its head screened once, as soon
    /// as it is whole: a refusal (`screen` answers `Some`) is its answer,
    /// before its body is read, given room or asked for with `100
    /// Continue`, and the connection closes; so is one whose body is over
    /// `max_body_bytes` before it is answered 413.
    pub(super) fn answer_buffered(
        &mut self,
        max_body_bytes: u64,
        stopping: bool,
        mut screen: impl FnMut(&Request) -> Option<Response>,
        mut handle: impl FnMut(Request) -> Answer,
    ) -> bool {
        // Answered requests leave the buffer once, at the end: draining each
        // in turn moved all that followed it every time, quadratic in the
        // requests one read brought (150,000 pipelined `GET /healthz` that
        // arrived at once took 9–12 µs of the loop's CPU each that way,
        // 0.3–0.6 µs this way: measured with a loopback client).
        let mut answered_bytes = 0;
        let mut held_back = false;
        while self.waiting.is_none() && !self.close_after_write && answered_bytes < self.input.len()
        {
            if self.output_full() {
                held_back = true;
                break;
            }
            match parse(
                &self.input[answered_bytes..],
                max_body_bytes,
                &mut self.chunked,
            ) {
                Parsed::Partial {
                    continue_wanted,
                    size,
                    head,
                } => {
                    self.request_started.get_or_insert_with(Instant::now);
                    self.size = size;
                    if let Some(head) = head.filter(|_| !self.screened) {
                        self.screened = true;
                        if let Some(refusal) = screen(&head) {
                            self.refuse(&refusal);
                            answered_bytes = 0;
                            continue;
                        }
                    }
                    // The client is told to send its body once the node
                    // will read it: with its room in the read budget.
                    let unready = size.most().is_some_and(|n| self.lacks_grant(n));
                    if continue_wanted && !self.continue_sent && !unready {
                        self.output
                            .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        self.continue_sent = true;
                    }
                    break;
                }
                Parsed::Reject(response) => {
                    self.refuse(&response);
                    answered_bytes = 0;
                }
                Parsed::Oversized(head, too_large) => {
                    // A client that would be refused whatever its size is
                    // told so, not to send less.
                    self.refuse(&screen(&head).unwrap_or(too_large));
                    answered_bytes = 0;
                }
                Parsed::Complete(request, used) => {
                    answered_bytes += used;
                    self.answer(request, stopping, &mut handle);
                }
            }
        }
        self.input.drain(..answered_bytes);
        if self.input.is_empty() && self.input.capacity() > RETAINED_INPUT_BYTES {
            // A large body's room is not kept for the connection's next
            // (mostly small) requests: 256 kept-alive connections that had
            // each sent a 1 MiB hook held 274 MB so (12 MB this way).
            self.input = Vec::new();
        }
        held_back
    }

    /// Answers the request in progress with `response` and closes: what is
    /// buffered is dropped, unread.
    fn refuse(&mut self, response: &Response) {
        response.write_to(&mut self.output, false);
        self.close_after_write = true;
        self.drop_input();
    }

    /// Answers one whole request, now or later (`waiting`).
    fn answer(
        &mut self,
        mut request: Request,
        stopping: bool,
        handle: &mut impl FnMut(Request) -> Answer,
    ) {
        self.end_request();
        let held_bytes = std::mem::take(&mut self.granted_bytes);
        let keep_alive = request.keep_alive && !stopping;
        // HEAD is GET answered without the body (RFC 9110 §9.3.2): every
        // GET route takes it, as monitors that check with HEAD expect.
        let head = request.method == "HEAD";
        if head {
            request.method = "GET".to_string();
        }
        match handle(request) {
            Answer::Now(response) => {
                write_answer(&mut self.output, &response, keep_alive, head);
                self.close_after_write |= !keep_alive;
                self.returned_bytes += held_bytes;
            }
            Answer::Later(id) => {
                self.waiting = Some(id);
                self.waiting_keep_alive = keep_alive;
                self.waiting_head = head;
                self.answering_bytes = held_bytes;
            }
            Answer::Failed(response) => {
                write_answer(&mut self.output, &response, false, head);
                self.close_after_write = true;
                self.returned_bytes += held_bytes;
            }
        }
    }
}

/// Appends `response` to `out` as the answer to a request, without its
/// body if that request was a `HEAD`.
pub(super) fn write_answer(out: &mut Vec<u8>, response: &Response, keep_alive: bool, head: bool) {
    match head {
        true => response.write_head_to(out, keep_alive),
        false => response.write_to(out, keep_alive),
    }
}

/// What became of a request handed to the handler.
pub(super) enum Answer {
    /// Answered at once.
    Now(Response),
    /// A replier was taken: the answer comes later, with this request id.
    Later(u64),
    /// The handler failed (it panicked, or answered neither way): answer
    /// this and close the connection.
    Failed(Response),
}

/// Reads until the socket would block, the peer closed, or the buffer
/// reaches `max_buffer` (not past it); true when it stopped at that bound. A
/// connection whose handshake waits for its hello reads nothing here (the
/// server reads the hello).
pub(super) fn read_into(conn: &mut Conn, chunk: &mut [u8], max_buffer: usize) -> io::Result<bool> {
    match conn.tls.as_mut() {
        Some(Tls::Session(tls)) => {
            if conn.peer_closed {
                return Ok(false);
            }
            let before = conn.input.len();
            let end = read_plaintext(tls, &mut conn.stream, &mut conn.input, chunk, max_buffer)?;
            conn.peer_closed = end.closed;
            if conn.input.len() > before {
                conn.last_active = Instant::now();
            }
            return Ok(end.full);
        }
        Some(Tls::Hello(_) | Tls::Signing) => return Ok(false),
        None => {}
    }
    while !conn.peer_closed {
        if conn.input.len() >= max_buffer {
            return Ok(true);
        }
        let room = (max_buffer - conn.input.len()).min(chunk.len());
        match conn.stream.read(&mut chunk[..room]) {
            Ok(0) => conn.peer_closed = true,
            Ok(n) => {
                conn.input.extend_from_slice(&chunk[..n]);
                conn.last_active = Instant::now();
                if n < room && !conn.fin_announced {
                    // The socket had no more: skip the read that would say
                    // so. Bytes (or a FIN) arriving later raise a new
                    // (edge) event.
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

pub(super) fn write_out(conn: &mut Conn) -> io::Result<()> {
    let pending = conn.output_pending();
    match conn.tls.as_mut() {
        Some(Tls::Session(tls)) => {
            if pending {
                conn.written = write_records(tls, &mut conn.stream, &conn.output, conn.written)?;
                conn.last_active = Instant::now();
            }
            return Ok(());
        }
        Some(Tls::Hello(_) | Tls::Signing) => return Ok(()),
        None => {}
    }
    while conn.written < conn.output.len() {
        match conn.stream.write(&conn.output[conn.written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                conn.written += n;
                conn.last_active = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection over a loopback socket its client has left.
    fn conn() -> Conn {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        Conn::new(1, TcpStream::from_std(accepted), None)
    }

    fn ok(_: Request) -> Answer {
        Answer::Now(Response::text(202, "text/plain", "ok".into()))
    }

    /// A request whose body is still to come has its head screened once,
    /// however many reads its body takes; a refusal is its answer before
    /// the body: the connection closes, asking no room of the budget.
    #[test]
    fn a_head_is_screened_once_and_a_refusal_answers_before_the_body() {
        let head = b"POST /h HTTP/1.1\r\nhost: h\r\ncontent-length: 100000\r\n\r\n";
        let mut c = conn();
        let mut screened = 0;
        c.input.extend_from_slice(head);
        for _ in 0..3 {
            c.input.extend_from_slice(&[b'x'; 100]);
            let screen = |_: &Request| {
                screened += 1;
                None
            };
            assert!(!c.answer_buffered(1 << 20, false, screen, |_| unreachable!()));
        }
        assert_eq!((screened, c.close_after_write), (1, false));

        let mut c = conn();
        c.input.extend_from_slice(head);
        let refuse = |_: &Request| Some(Response::error(401, "unauthorized", "no token"));
        assert!(!c.answer_buffered(1 << 20, false, refuse, |_| unreachable!()));
        let answer = String::from_utf8_lossy(&c.output).into_owned();
        assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        assert!(c.close_after_write);
        assert_eq!((c.input.len(), c.needs_grant()), (0, None));
    }

    /// A request larger than a head asks its size of the read budget once
    /// its head is read; granted, it may fill the buffer to its end, which
    /// has room for all of it at once; answered, it gives its bytes back
    /// and leaves the connection no large buffer.
    #[test]
    fn a_large_request_holds_its_grant_until_answered_and_leaves_no_room_behind() {
        let max_body_bytes = 2 << 20;
        let mut c = conn();
        let body = vec![b'x'; 1 << 20];
        let head = format!(
            "POST /h HTTP/1.1\r\nhost: h\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let bytes = head.len() + body.len();
        c.input.extend_from_slice(head.as_bytes());
        c.input.extend_from_slice(&body[..1_000]);
        assert!(!c.answer_buffered(max_body_bytes, false, |_| None, |_| unreachable!()));
        assert_eq!(c.size, RequestBytes::Exactly(bytes));
        assert_eq!(c.read_limit(MAX_HEAD_BYTES + (2 << 20)), MAX_HEAD_BYTES + 1);
        assert_eq!(c.needs_grant(), Some(bytes));
        c.take_grant(bytes);
        assert_eq!(c.needs_grant(), None);
        assert!(c.input.capacity() >= bytes);
        assert_eq!(c.read_limit(MAX_HEAD_BYTES + (2 << 20)), bytes);
        c.input.extend_from_slice(&body[1_000..]);
        assert!(!c.answer_buffered(max_body_bytes, false, |_| None, ok));
        assert_eq!((c.granted_bytes, c.returned_bytes), (0, bytes));
        assert_eq!((c.input.capacity(), c.size), (0, RequestBytes::Unknown));
    }

    /// A request answered later holds its bytes until its answer comes;
    /// a small one asks none, and the buffer keeps its room for the next.
    #[test]
    fn a_request_answered_later_holds_its_bytes_and_a_small_one_asks_none() {
        let mut c = conn();
        let request = format!(
            "POST /h HTTP/1.1\r\nhost: h\r\ncontent-length: 20000\r\n\r\n{}",
            "y".repeat(20_000)
        );
        c.granted_bytes = request.len();
        c.input.extend_from_slice(request.as_bytes());
        assert!(!c.answer_buffered(1 << 20, false, |_| None, |_| Answer::Later(7)));
        assert_eq!(
            (c.waiting, c.answering_bytes, c.returned_bytes),
            (Some(7), request.len(), 0)
        );
        let mut c = conn();
        let head = b"POST /h HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\n\r\n";
        c.input.extend_from_slice(head);
        c.input.extend_from_slice(b"ab");
        assert!(!c.answer_buffered(1 << 20, false, |_| None, ok));
        let size = RequestBytes::Exactly(head.len() + 5);
        assert_eq!((c.size, c.needs_grant()), (size, None));
        c.input.extend_from_slice(b"cde");
        let room = c.input.capacity();
        assert!(!c.answer_buffered(1 << 20, false, |_| None, ok));
        assert_eq!((c.input.len(), c.input.capacity()), (0, room));
    }
}
