//! The node's HTTP/1.1 front: one mio event loop thread over non-blocking
//! sockets, keep-alive, one request in progress per connection (pipelined
//! requests wait in the buffer, so responses keep their order).
//!
//! The loop never blocks on the engine: a [`Handler`] answers a request at
//! once or takes a [`Replier`] and answers later from any thread (a commit
//! answers from its shard once durable); the reply wakes the loop through a
//! mio `Waker`. Slow clients are bounded by `http.read_timeout_ms` from a
//! request's first byte (408, closed), idle keep-alive connections by
//! `http.idle_timeout_ms` (as are connections whose client takes none of
//! their answers for as long), and the connection count by
//! `http.max_connections` (503, closed; so is a connection the process has
//! no descriptor for: see `spare_fd`). A client that pipelines requests
//! without reading the answers gets no more answered once
//! `MAX_PENDING_OUTPUT_BYTES` of them wait: the node stops reading it, so
//! its sends block, and goes on as it reads. A connection closed after an
//! answer is closed in stages (see `linger`). With TLS, each connection's hello
//! is answered by a signer thread (see `handshake`), not the loop.
//!
//! Stopping (SIGTERM, SIGINT or [`Stopper::stop`]): the listener closes,
//! idle connections close, requests in progress are answered with
//! `connection: close`, and `run` returns once they are (or after
//! `HTTP_DRAIN_MS`).

use super::conn::{read_into, write_answer, write_out, Answer, Conn};
use super::front_counts::FrontCounts;
use super::handshake::{read_hello, Answered, Hello, Signers, Tls};
use super::linger::Linger;
use super::read_budget::ReadBudget;
use super::request::Request;
use super::response::Response;
use super::spare_fd::{Refusal, SpareFd};
use super::tls::SharedTls;
use crate::config::HttpConfig;
use crate::limits::{HTTP_DRAIN_MS, MAX_HEAD_BYTES, READ_CHUNK_BYTES, REFUSALS_LINGERING};
use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
const SIGNALS: Token = Token(usize::MAX - 3);

/// How often the loop checks connection deadlines when nothing happens
/// (and, after `accept` failed for want of resources, tries again to take
/// waiting connections).
const DEADLINE_CHECK: Duration = Duration::from_millis(100);

/// Answers requests. Runs on the loop thread: it must not block.
pub trait Handler: Send + Sync + 'static {
    /// Answer now with `Some`, or take a [`Replier`] from `later` and
    /// answer with it from any thread.
    fn handle(&self, request: Request, later: Later<'_>) -> Option<Response>;

    /// The answer to a request whose body is still to come, when its head
    /// alone refuses it (no such route, no credentials): given before its
    /// body is read or given room in the read budget, and the connection
    /// closes. `None` (the default): its body is read and the whole
    /// request handled, head and all. It must not block the loop.
    fn refuse_head(&self, _head: &Request) -> Option<Response> {
        None
    }

    /// The process got SIGHUP. It must not block the loop.
    fn hangup(&self) {}

    /// The loop begins to stop (a signal, or [`Stopper::stop`]). It must
    /// not block the loop.
    fn stopping(&self) {}

    /// How often the loop must say it turns ([`Handler::turning`]), if at
    /// all.
    fn turning_every(&self) -> Option<Duration> {
        None
    }

    /// The loop turns, at least every [`Handler::turning_every`]. It must
    /// not block the loop.
    fn turning(&self) {}
}

/// The means to answer a request later.
pub struct Later<'a> {
    target: (usize, u64),
    wake: &'a Arc<Wake>,
    taken: &'a mut bool,
}

impl Later<'_> {
    pub fn replier(self) -> Replier {
        *self.taken = true;
        Replier {
            target: Some(self.target),
            wake: self.wake.clone(),
        }
    }
}

/// Answers one request from any thread. Dropped unanswered, it answers 500.
pub struct Replier {
    target: Option<(usize, u64)>,
    wake: Arc<Wake>,
}

struct Wake {
    replies: Sender<(usize, u64, Response)>,
    waker: Waker,
    pending: AtomicBool,
    stop: AtomicBool,
}

impl Wake {
    fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.waker.wake();
        }
    }
}

impl Replier {
    pub fn send(mut self, response: Response) {
        if let Some((slot, id)) = self.target.take() {
            let _ = self.wake.replies.send((slot, id, response));
            self.wake.wake();
        }
    }
}

impl Drop for Replier {
    fn drop(&mut self) {
        if let Some((slot, id)) = self.target.take() {
            let response = Response::error(500, "internal", "the request was dropped unanswered");
            let _ = self.wake.replies.send((slot, id, response));
            self.wake.wake();
        }
    }
}

/// 503 `too_many_connections`, saying why.
fn too_many_connections(why: &str) -> Response {
    Response::unavailable("too_many_connections", why, 1)
}

/// Refuses a connection the node cannot take, at once: its `refusal` over
/// a `plain` connection (a TLS client could not read a plain answer: it
/// is only closed).
fn refuse(mut stream: TcpStream, plain: bool, refusal: &Response) {
    if plain {
        let mut out = Vec::new();
        refusal.write_to(&mut out, false);
        let _ = stream.write(&out);
    }
}

/// Whether an `accept` error is one connection's: its client gave up
/// first, or a network error of its that Linux passes on (accept(2) asks
/// that these be taken like `EAGAIN`, and the next connection accepted).
fn only_that_connection(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::EPROTO
                | libc::EPERM
                | libc::ENETDOWN
                | libc::ENETUNREACH
                | libc::ENONET
                | libc::EHOSTDOWN
                | libc::EHOSTUNREACH
                | libc::ENOPROTOOPT
                | libc::EOPNOTSUPP
        )
    )
}

/// Stops a running server from another thread.
#[derive(Clone)]
pub struct Stopper(Arc<Wake>);

impl Stopper {
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::Release);
        let _ = self.0.waker.wake();
    }
}

/// Hands a request to the handler. A handler that panics answers 500 and
/// the loop goes on: the panic is a bug in one request's handling, and the
/// other connections need not lose their node for it.
fn answer(
    handler: &dyn Handler,
    request: Request,
    target: (usize, u64),
    wake: &Arc<Wake>,
) -> Answer {
    let mut taken = false;
    let later = Later {
        target,
        wake,
        taken: &mut taken,
    };
    match crate::panics::catch(|| handler.handle(request, later)) {
        Ok(Some(response)) => Answer::Now(response),
        Ok(None) if taken => Answer::Later(target.1),
        Ok(None) => Answer::Failed(Response::error(
            500,
            "internal",
            "the request was not answered",
        )),
        Err(panic) => Answer::Failed(handler_panicked(&panic)),
    }
}

/// The handler's refusal of a request from its `head` alone, if any (a
/// `HEAD`, answered as its `GET`, has no body to spare).
fn screen(handler: &dyn Handler, head: &Request) -> Option<Response> {
    if head.method == "HEAD" {
        return None;
    }
    crate::panics::catch(|| handler.refuse_head(head))
        .unwrap_or_else(|panic| Some(handler_panicked(&panic)))
}

/// The 500 of a request whose handler panicked (logged).
fn handler_panicked(panic: &str) -> Response {
    crate::log::error("a request handler panicked", &[("panic", &panic)]);
    Response::error(500, "internal", "internal error while handling the request")
}

/// A bound server, ready to run.
pub struct Server {
    poll: Poll,
    listener: Option<TcpListener>,
    signals: Signals,
    wake: Arc<Wake>,
    replies: Receiver<(usize, u64, Response)>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections with a slot, `refusing` of them taken only to be
    /// refused (see `admit`).
    open: usize,
    refusing: usize,
    next_id: u64,
    http: HttpConfig,
    /// Every connection speaks TLS with the config in hand, when set,
    /// its hello answered by the signers.
    tls: Option<(SharedTls, Signers)>,
    handshakes: Receiver<Answered>,
    /// The id of the latest connection accepted.
    last_conn: u64,
    max_body_bytes: u64,
    /// The request bytes the connections hold, bounded by
    /// `http.max_buffered_bytes`.
    budget: ReadBudget,
    /// Connections whose wait for the budget ended: they read on.
    granted: Vec<usize>,
    handler: Arc<dyn Handler>,
    stopping_since: Option<Instant>,
    /// Where reads land before they join a connection's buffer (allocated once).
    scratch: Box<[u8]>,
    spare: SpareFd,
    counts: Arc<FrontCounts>,
    /// `accept` failed for want of resources since the last connection
    /// taken (logged once for the lot).
    accept_failing: bool,
    /// Connections may wait in the backlog unanswered: `accept` failed for
    /// want of memory, or of descriptors with the spare not to be had.
    accept_stalled: bool,
}

impl Server {
    /// Binds `addr` and registers SIGTERM and SIGINT (stop) and SIGHUP
    /// (told to the handler); with `tls`, every connection speaks TLS. The
    /// loop counts what it does with connections in `counts`.
    pub fn bind(
        addr: SocketAddr,
        http: HttpConfig,
        tls: Option<SharedTls>,
        max_body_bytes: u64,
        handler: Arc<dyn Handler>,
        counts: Arc<FrontCounts>,
    ) -> io::Result<Server> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)?;
        // Unbounded, yet bounded by the connections: each has one request
        // in progress, so at most `http.max_connections` replies wait here;
        // and a shard answering a commit must never block on the loop.
        let (tx, rx) = crossbeam_channel::unbounded();
        let wake = Arc::new(Wake {
            replies: tx,
            waker: Waker::new(poll.registry(), WAKER)?,
            pending: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        // One answered hello per connection at most, as above.
        let (answered, handshakes) = crossbeam_channel::unbounded();
        let tls = match tls {
            Some(shared) => {
                let woken = wake.clone();
                let signers = Signers::start(answered, Arc::new(move || woken.wake()))?;
                Some((shared, signers))
            }
            None => None,
        };
        let budget = ReadBudget::new(http.max_buffered_bytes);
        Ok(Server {
            poll,
            listener: Some(listener),
            signals,
            wake,
            replies: rx,
            conns: Vec::new(),
            free: Vec::new(),
            open: 0,
            refusing: 0,
            next_id: 0,
            http,
            tls,
            handshakes,
            last_conn: 0,
            max_body_bytes,
            budget,
            granted: Vec::new(),
            handler,
            stopping_since: None,
            scratch: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            spare: SpareFd::new(),
            counts,
            accept_failing: false,
            accept_stalled: false,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.listener {
            Some(l) => l.local_addr(),
            None => Err(io::Error::other("the listener is closed")),
        }
    }

    pub fn stopper(&self) -> Stopper {
        Stopper(self.wake.clone())
    }

    /// Serves until stopped and drained.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut last_check = Instant::now();
        let turning_every = self.handler.turning_every();
        let mut last_turning = None;
        loop {
            self.drive_granted();
            // With no connection and none waiting unanswered, nothing has a
            // deadline: the loop sleeps until an event (or until it must
            // say it turns).
            let checks = self.open > 0 || self.accept_stalled || self.stopping_since.is_some();
            let sleep = match (checks.then_some(DEADLINE_CHECK), turning_every) {
                (Some(check), Some(every)) => Some(check.min(every)),
                (check, every) => check.or(every),
            };
            match self.poll.poll(&mut events, sleep) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {
                        self.wake.pending.store(false, Ordering::Release);
                        self.take_replies();
                        self.take_handshakes();
                    }
                    SIGNALS => {
                        for signal in self.signals.pending() {
                            if signal == SIGHUP {
                                self.handler.hangup();
                                continue;
                            }
                            crate::log::info("stopping on signal", &[("signal", &signal)]);
                            self.begin_stop();
                        }
                    }
                    Token(slot) => {
                        if let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) {
                            conn.fin_announced |= event.is_read_closed();
                        }
                        self.drive(slot, true)
                    }
                }
            }
            if self.wake.stop.load(Ordering::Acquire) && self.stopping_since.is_none() {
                self.begin_stop();
            }
            if let Some(every) = turning_every {
                if last_turning.is_none_or(|at: Instant| at.elapsed() >= every) {
                    last_turning = Some(Instant::now());
                    self.handler.turning();
                }
            }
            if last_check.elapsed() >= DEADLINE_CHECK {
                last_check = Instant::now();
                self.check_deadlines();
                if self.accept_stalled {
                    self.accept();
                }
            }
            if let Some(since) = self.stopping_since {
                if self.open == 0 || since.elapsed() >= Duration::from_millis(HTTP_DRAIN_MS) {
                    return Ok(());
                }
            }
        }
    }

    fn begin_stop(&mut self) {
        if self.stopping_since.is_some() {
            return;
        }
        self.stopping_since = Some(Instant::now());
        self.handler.stopping();
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        for slot in 0..self.conns.len() {
            if self.conns[slot].as_ref().is_some_and(Conn::is_idle) {
                self.close(slot);
            }
        }
    }

    fn accept(&mut self) {
        self.accept_stalled = false;
        loop {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((stream, _)) => {
                    self.accept_failing = false;
                    self.admit(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if SpareFd::is_exhaustion(&e) => {
                    if !self.refuse_without_fds() {
                        return;
                    }
                }
                // That connection's own failure: take the next.
                Err(e) if only_that_connection(&e) => continue,
                Err(e) => {
                    // The system's (memory, socket buffers): waiting
                    // connections are tried again at the next check.
                    if !std::mem::replace(&mut self.accept_failing, true) {
                        let retry_ms = DEADLINE_CHECK.as_millis();
                        crate::log::warn(
                            "accept failed",
                            &[("error", &e), ("retry_ms", &retry_ms)],
                        );
                    }
                    self.accept_stalled = true;
                    return;
                }
            }
        }
    }

    /// Out of file descriptors: refuses a waiting connection with 503 by
    /// the spare descriptor (warning once until an accept succeeds).
    /// Returns whether to go on accepting.
    fn refuse_without_fds(&mut self) -> bool {
        let message = format!(
            "the node is out of file descriptors, with {} connections open",
            self.open
        );
        if !std::mem::replace(&mut self.accept_failing, true) {
            let limit = crate::node::open_files::soft_limit();
            let limit = limit.map_or("unlimited".into(), |n| n.to_string());
            crate::log::warn(
                "out of file descriptors: new connections are refused with 503 until some close (raise the open-files limit, or lower http.max_connections)",
                &[("open_connections", &self.open), ("open_files_limit", &limit)],
            );
        }
        let Some(listener) = &self.listener else {
            return false;
        };
        let plain = self.tls.is_none();
        let refused = &self.counts.refused_without_fds;
        let refuse = |s| {
            FrontCounts::add(refused);
            refuse(s, plain, &too_many_connections(&message))
        };
        match (self.spare).refuse_one(listener, refuse) {
            Refusal::Refused => true,
            Refusal::NoneWaiting => false,
            Refusal::NoSpare => {
                self.accept_stalled = true;
                false
            }
        }
    }

    /// Takes an accepted connection on, or refuses it with 503 at
    /// `http.max_connections`: the 503 written and the connection closed in
    /// stages, as after any last answer, for up to `REFUSALS_LINGERING`
    /// connections at once, beyond which (and over TLS, which would need a
    /// handshake first) it is closed at once.
    fn admit(&mut self, mut stream: TcpStream) {
        if self.at_cap() {
            // A connection closing in stages gives its place.
            let lingering = (self.conns.iter()).position(|conn| {
                conn.as_ref()
                    .is_some_and(|conn| conn.lingering.is_some() && !conn.refused)
            });
            if let Some(slot) = lingering {
                self.close(slot);
            }
        }
        let refusal = self.at_cap().then(|| {
            FrontCounts::add(&self.counts.refused_at_cap);
            too_many_connections(&format!(
                "the node has {} connections open (http.max_connections)",
                self.open - self.refusing
            ))
        });
        if let Some(refusal) = &refusal {
            if self.tls.is_some() || self.refusing >= REFUSALS_LINGERING {
                refuse(stream, self.tls.is_none(), refusal);
                return;
            }
        }
        let _ = stream.set_nodelay(true);
        let tls = self.tls.as_ref().map(|_| Tls::Hello(Box::default()));
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, Token(slot), Interest::READABLE)
        {
            crate::log::warn("cannot register a connection", &[("error", &e)]);
            self.free.push(slot);
            return;
        }
        self.open += 1;
        self.counts.open.store(self.open as u64, Ordering::Relaxed);
        self.last_conn += 1;
        let mut conn = Conn::new(self.last_conn, stream, tls);
        match refusal {
            Some(refusal) => {
                self.refusing += 1;
                conn.refused = true;
                refusal.write_to(&mut conn.output, false);
                conn.close_after_write = true;
                self.conns[slot] = Some(conn);
                self.drive(slot, false);
            }
            None => {
                FrontCounts::add(&self.counts.accepted);
                self.conns[slot] = Some(conn);
            }
        }
    }

    /// Whether the connections served (not those being refused) are at
    /// `http.max_connections`.
    fn at_cap(&self) -> bool {
        self.open - self.refusing >= self.http.max_connections
    }

    fn take_replies(&mut self) {
        while let Ok((slot, id, response)) = self.replies.try_recv() {
            let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if conn.waiting != Some(id) {
                continue;
            }
            conn.waiting = None;
            conn.returned_bytes += std::mem::take(&mut conn.answering_bytes);
            let keep_alive = conn.waiting_keep_alive && self.stopping_since.is_none();
            write_answer(&mut conn.output, &response, keep_alive, conn.waiting_head);
            conn.close_after_write |= !keep_alive;
            self.drive(slot, false);
        }
    }

    /// Sessions the signers made: each connection still waiting for its
    /// own goes on with it (the server's answer goes out); one that could
    /// not be made closes its connection, after the alert saying why.
    fn take_handshakes(&mut self) {
        while let Ok(((slot, id), answered)) = self.handshakes.try_recv() {
            let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if conn.id != id || !matches!(conn.tls, Some(Tls::Signing)) {
                continue;
            }
            match answered {
                Ok(session) => {
                    conn.tls = Some(Tls::Session(Box::new(session)));
                    // Bytes that came while it was signed raised their
                    // (edge) event then: read them now.
                    self.drive(slot, true);
                }
                Err(alert) => {
                    if let Some(mut alert) = alert {
                        let _ = alert.write_all(&mut conn.stream);
                    }
                    self.close(slot);
                }
            }
        }
    }

    /// Reads a connection's TLS hello and, once it is whole, has a signer
    /// answer it.
    fn read_hello(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(Tls::Hello(acceptor)) = conn.tls.as_mut() else {
            return;
        };
        match read_hello(acceptor, &mut conn.stream) {
            Hello::Partial => {}
            Hello::Whole(accepted) => {
                conn.tls = Some(Tls::Signing);
                if let Some((shared, signers)) = &self.tls {
                    let config = shared.read().clone();
                    signers.answer((slot, conn.id), accepted, config);
                }
            }
            Hello::Refused => self.close(slot),
        }
    }

    /// Reads what arrived (when `readable`), answers what is complete and
    /// writes what is pending; closes the connection when it is done.
    fn drive(&mut self, slot: usize, readable: bool) {
        let max_request_bytes = MAX_HEAD_BYTES + self.max_body_bytes as usize;
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if conn.in_hello() {
            return self.read_hello(slot);
        }
        if let Some(linger) = conn.lingering.as_mut() {
            if linger.drop_input(&mut conn.stream, &mut self.scratch) {
                self.close(slot);
            }
            return;
        }
        let mut failed = false;
        let mut read = readable || conn.waiting.is_none();
        loop {
            let full = read
                && !conn.budget_waiting
                && match read_into(conn, &mut self.scratch, conn.read_limit(max_request_bytes)) {
                    Ok(full) => full,
                    Err(_) => {
                        failed = true;
                        false
                    }
                };
            let stopping = self.stopping_since.is_some();
            let (handler, wake, next_id) = (&self.handler, &self.wake, &mut self.next_id);
            let held_back = !failed
                && conn.answer_buffered(
                    self.max_body_bytes,
                    stopping,
                    |head| screen(handler.as_ref(), head),
                    |request| {
                        *next_id += 1;
                        answer(handler.as_ref(), request, (slot, *next_id), wake)
                    },
                );
            if let Some(bytes) = conn.needs_grant() {
                match self.budget.ask(slot, conn.id, bytes) {
                    Some(granted) => {
                        // Read on (its body may wait in the socket), and
                        // parse again: a `100 Continue` waited for this.
                        conn.take_grant(granted);
                        read = true;
                        continue;
                    }
                    None => {
                        conn.budget_waiting = true;
                        FrontCounts::add(&self.counts.budget_waits);
                    }
                }
            }
            // A read that stopped at the buffer bound may have left bytes in
            // the socket, which no new event will announce: read again once
            // the buffered requests are answered.
            let may_read = !conn.budget_waiting && conn.waiting.is_none();
            if full && !held_back && may_read && !conn.close_after_write {
                continue;
            }
            if conn.peer_closed && conn.waiting.is_none() && !held_back {
                conn.close_after_write = true;
            }
            failed |= write_out(conn).is_err();
            if conn.written == conn.output.len() {
                conn.output.clear();
                conn.written = 0;
            }
            // Requests held back while the answers filled the output go on
            // once writing made room: no event would announce them.
            if failed || !held_back || conn.output_full() {
                break;
            }
            read = true;
        }
        let returned_bytes = std::mem::take(&mut conn.returned_bytes);
        let done = !conn.output_pending();
        let close = failed || (done && conn.close_after_write);
        if !close {
            failed |= watch_writable(self.poll.registry(), conn, slot, !done).is_err();
        }
        let stopping = self.stopping_since.is_some();
        if close && !failed && !conn.peer_closed && !stopping {
            self.linger(slot);
        } else if close || failed || (stopping && conn.is_idle()) {
            self.close(slot);
        }
        self.give_back(returned_bytes);
    }

    /// Closes `slot`'s connection, whose answers are all written, in
    /// stages (see `linger`): its sending half now, the rest once its
    /// client closes or its lingering ends.
    fn linger(&mut self, slot: usize) {
        self.take_budget_back(slot);
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        conn.say_close();
        match Linger::begin(&conn.stream) {
            Ok(linger) => {
                conn.drop_input();
                conn.output = Vec::new();
                conn.written = 0;
                conn.lingering = Some(linger);
                // What arrived before now raises no new event.
                self.drive(slot, true);
            }
            Err(_) => self.close(slot),
        }
    }

    /// Takes back the read budget `slot`'s connection holds or waits for.
    fn take_budget_back(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if std::mem::take(&mut conn.budget_waiting) {
            self.budget.forget(slot, conn.id);
        }
        let held = [
            &mut conn.granted_bytes,
            &mut conn.answering_bytes,
            &mut conn.returned_bytes,
        ];
        let bytes = held.into_iter().map(std::mem::take).sum();
        self.give_back(bytes);
    }

    /// Gives `bytes` back to the read budget: the connections then granted
    /// their wait's bytes read on (`drive_granted`), their read timeout
    /// started anew (the node, not their client, held them up).
    fn give_back(&mut self, bytes: usize) {
        if bytes > 0 {
            for (slot, conn_id, granted) in self.budget.give_back(bytes) {
                let conn = self.conns[slot].as_mut().filter(|c| c.id == conn_id);
                let conn =
                    conn.expect("a connection waiting for the budget is forgotten as it closes");
                conn.take_grant(granted);
                conn.request_started = Some(Instant::now());
                self.granted.push(slot);
            }
        }
        let granted_bytes = self.budget.granted_bytes() as u64;
        self.counts
            .buffered_bytes
            .store(granted_bytes, Ordering::Relaxed);
    }

    /// Drives the connections whose wait for the read budget ended.
    fn drive_granted(&mut self) {
        while let Some(slot) = self.granted.pop() {
            self.drive(slot, true);
        }
    }

    fn check_deadlines(&mut self) {
        let read_timeout = Duration::from_millis(self.http.read_timeout_ms);
        let idle_timeout = Duration::from_millis(self.http.idle_timeout_ms);
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if let Some(linger) = &conn.lingering {
                if linger.is_over() {
                    self.close(slot);
                }
                continue;
            }
            if conn.waiting.is_some() {
                continue;
            }
            if !conn.budget_waiting
                && conn
                    .request_started
                    .is_some_and(|t| t.elapsed() >= read_timeout)
            {
                FrontCounts::add(&self.counts.read_timeouts);
                conn.drop_input();
                Response::error(
                    408,
                    "request_timeout",
                    &format!(
                        "the request did not arrive within {} ms (http.read_timeout_ms)",
                        self.http.read_timeout_ms
                    ),
                )
                .write_to(&mut conn.output, false);
                conn.close_after_write = true;
                self.drive(slot, false);
            } else if (conn.is_idle() || conn.output_pending())
                && conn.last_active.elapsed() >= idle_timeout
            {
                // Idle, or its client has taken none of its answers for as
                // long (nor sent anything the node would read).
                self.close(slot);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        self.take_budget_back(slot);
        if let Some(mut conn) = self.conns[slot].take() {
            if conn.lingering.is_none() {
                conn.say_close();
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.free.push(slot);
            self.open -= 1;
            self.refusing -= usize::from(conn.refused);
            self.counts.open.store(self.open as u64, Ordering::Relaxed);
        }
    }
}

/// Asks for `conn`'s writable events only while it has output `pending`
/// (else every loop would wake for a socket that is always writable).
fn watch_writable(
    registry: &mio::Registry,
    conn: &mut Conn,
    slot: usize,
    pending: bool,
) -> io::Result<()> {
    if pending == conn.writable_interest {
        return Ok(());
    }
    conn.writable_interest = pending;
    let interest = match pending {
        true => Interest::READABLE | Interest::WRITABLE,
        false => Interest::READABLE,
    };
    registry.reregister(&mut conn.stream, Token(slot), interest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Panics on `/panic`, answers 200 otherwise.
    struct Fragile;

    impl Handler for Fragile {
        fn handle(&self, request: Request, _later: Later<'_>) -> Option<Response> {
            assert_ne!(request.path, "/panic", "a bug in a handler");
            Some(Response::text(200, "text/plain", "fine".into()))
        }
    }

    fn exchange(addr: SocketAddr, path: &str) -> String {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        reply
    }

    /// A handler that panics costs its request a 500 and its connection,
    /// not the loop: the next request is served.
    #[test]
    fn a_handler_that_panics_answers_500_and_the_loop_serves_on() {
        let addr = "127.0.0.1:0".parse().unwrap();
        let (http, handler) = (HttpConfig::default(), Arc::new(Fragile));
        let server = Server::bind(addr, http, None, 1_024, handler, Arc::default()).unwrap();
        let addr = server.local_addr().unwrap();
        let stopper = server.stopper();
        let loop_thread = std::thread::spawn(move || server.run());
        let failed = exchange(addr, "/panic");
        assert!(failed.starts_with("HTTP/1.1 500 "), "{failed}");
        assert!(
            failed.ends_with(
                r#"{"error":"internal","message":"internal error while handling the request"}"#
            ),
            "{failed}"
        );
        let served = exchange(addr, "/fine");
        assert!(served.starts_with("HTTP/1.1 200 "), "{served}");
        assert!(served.ends_with("fine"), "{served}");
        stopper.stop();
        loop_thread.join().unwrap().unwrap();
    }
}
