//! A loopback HTTP/1.1 receiver: the sink end of the demo, the integration
//! tests and the load tools. One thread per connection, keep-alive, requests
//! parsed with `httparse`; a behaviour function decides each answer (status,
//! headers, a delay, or no answer at all). It speaks TLS when started with
//! a certificate (`start_tls`).

use crate::node::http::tls::server_config;
use parking_lot::{Condvar, Mutex};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest request head the receiver reads.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest request body the receiver reads.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Most headers of a request the receiver reads: a hook's 64 and the
/// dozen or so goad and a sink's config add.
const MAX_HEADERS: usize = 128;

/// A request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Lowercased names, arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
    /// The status it was answered with.
    pub status: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// How to answer one request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The response body (empty by default).
    pub body: Vec<u8>,
    /// Wait this long before answering (a slow endpoint).
    pub delay: Duration,
    /// Never answer: hold the connection until the receiver stops.
    pub hang: bool,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
            hang: false,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Reply {
        self.body = body.into();
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    pub fn hang() -> Reply {
        Reply {
            hang: true,
            ..Reply::status(200)
        }
    }
}

type Behaviour = dyn Fn(&Received) -> Reply + Send + Sync;

struct Shared {
    behaviour: Box<Behaviour>,
    record: bool,
    received: Mutex<Vec<Received>>,
    arrived: Condvar,
    count: AtomicU64,
    ok_count: AtomicU64,
    stop: AtomicBool,
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    tls: bool,
}

impl Receiver {
    /// Starts a receiver on 127.0.0.1 (a free port) that records every request.
    pub fn start(
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Receiver> {
        Receiver::start_with(behaviour, true)
    }

    /// Starts a receiver on 127.0.0.1 (a free port); `record` keeps every
    /// request (else only counts them).
    pub fn start_with(
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
        record: bool,
    ) -> std::io::Result<Receiver> {
        Receiver::start_on("127.0.0.1:0", behaviour, record)
    }

    /// Starts a receiver listening on `addr`.
    pub fn start_on(
        addr: &str,
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
        record: bool,
    ) -> std::io::Result<Receiver> {
        Receiver::start_serving(addr, None, behaviour, record)
    }

    /// Starts a receiver on 127.0.0.1 (a free port) that speaks TLS with
    /// the certificate chain and private key of these PEM texts, and
    /// records every request.
    pub fn start_tls(
        certificate_chain_pem: &[u8],
        private_key_pem: &[u8],
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Receiver> {
        let (chain, key) = (certificate_chain_pem, private_key_pem);
        Receiver::start_tls_on("127.0.0.1:0", chain, key, None, behaviour, true)
    }

    /// `start_tls` that accepts only clients presenting a certificate that
    /// chains to the roots of the PEM text `client_roots_pem` (mutual TLS).
    pub fn start_mutual_tls(
        certificate_chain_pem: &[u8],
        private_key_pem: &[u8],
        client_roots_pem: &[u8],
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Receiver> {
        let (chain, key, clients) = (certificate_chain_pem, private_key_pem, client_roots_pem);
        Receiver::start_tls_on("127.0.0.1:0", chain, key, Some(clients), behaviour, true)
    }

    /// `start_tls` (or with `client_roots_pem`, `start_mutual_tls`)
    /// listening on `addr`; `record` as for `start_with`.
    pub fn start_tls_on(
        addr: &str,
        certificate_chain_pem: &[u8],
        private_key_pem: &[u8],
        client_roots_pem: Option<&[u8]>,
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
        record: bool,
    ) -> std::io::Result<Receiver> {
        let config = server_config(certificate_chain_pem, private_key_pem, client_roots_pem)
            .map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidInput, why))?;
        Receiver::start_serving(addr, Some(Arc::new(config)), behaviour, record)
    }

    fn start_serving(
        addr: &str,
        tls_config: Option<Arc<ServerConfig>>,
        behaviour: impl Fn(&Received) -> Reply + Send + Sync + 'static,
        record: bool,
    ) -> std::io::Result<Receiver> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            behaviour: Box::new(behaviour),
            record,
            received: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            count: AtomicU64::new(0),
            ok_count: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let accept = shared.clone();
        let tls = tls_config.is_some();
        std::thread::Builder::new()
            .name("goad-receiver".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if accept.stop.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let _ = stream.set_nodelay(true);
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                    let conn = accept.clone();
                    let config = tls_config.clone();
                    let _ = std::thread::Builder::new()
                        .name("goad-receiver-conn".into())
                        .stack_size(256 * 1024)
                        .spawn(move || match config.map(ServerConnection::new) {
                            None => serve(stream, &conn),
                            Some(Ok(tls)) => serve(StreamOwned::new(tls, stream), &conn),
                            Some(Err(_)) => {}
                        });
                }
            })?;
        Ok(Receiver { addr, shared, tls })
    }

    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.addr, path)
    }

    /// Requests answered so far (any status, hung ones excluded).
    pub fn count(&self) -> u64 {
        self.shared.count.load(Ordering::Acquire)
    }

    /// Requests answered with a 2xx.
    pub fn ok_count(&self) -> u64 {
        self.shared.ok_count.load(Ordering::Acquire)
    }

    /// A copy of every recorded request.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().clone()
    }

    /// Waits until `count() >= n` or the deadline passes; returns whether it did.
    pub fn wait_for(&self, n: u64, within: Duration) -> bool {
        let deadline = crate::runtime::deadline_after(within);
        let mut guard = self.shared.received.lock();
        while self.count() < n {
            if self
                .shared
                .arrived
                .wait_until(&mut guard, deadline)
                .timed_out()
            {
                return self.count() >= n;
            }
        }
        true
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Answers the requests of one connection (plain or TLS) until it closes.
fn serve(mut stream: impl Read + Write, shared: &Shared) {
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let (request, used) = loop {
            if let Some(parsed) = parse(&buf) {
                break parsed;
            }
            if buf.len() > MAX_HEAD_BYTES + MAX_BODY_BYTES
                || !read_more(&mut stream, &mut buf, &mut chunk, shared)
            {
                return;
            }
        };
        buf.drain(..used);
        let reply = (shared.behaviour)(&request);
        if reply.hang {
            while !shared.stop.load(Ordering::Acquire) {
                if !read_more(&mut stream, &mut buf, &mut chunk, shared) {
                    return;
                }
            }
            return;
        }
        if !reply.delay.is_zero() {
            std::thread::sleep(reply.delay);
        }
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-length: {}\r\n",
            reply.status,
            reason(reply.status),
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let ok = (200..300).contains(&reply.status);
        if shared.record {
            shared.received.lock().push(Received {
                status: reply.status,
                ..request
            });
        }
        let written = stream.write_all(head.as_bytes());
        if written
            .and_then(|()| stream.write_all(&reply.body))
            .and_then(|()| stream.flush())
            .is_err()
        {
            return;
        }
        if ok {
            shared.ok_count.fetch_add(1, Ordering::AcqRel);
        }
        shared.count.fetch_add(1, Ordering::AcqRel);
        let _guard = shared.received.lock();
        shared.arrived.notify_all();
    }
}

/// Reads more bytes; false on EOF, error, or stop.
fn read_more(stream: &mut impl Read, buf: &mut Vec<u8>, chunk: &mut [u8], shared: &Shared) -> bool {
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return false;
        }
        match stream.read(chunk) {
            Ok(0) => return false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return true;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return false,
        }
    }
}

/// Parsed headers as owned (lowercase name, value) pairs, in order.
pub fn lowercase_headers(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect()
}

/// A complete request at the start of `buf` and how many bytes it used.
fn parse(buf: &[u8]) -> Option<(Received, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    let headers = lowercase_headers(req.headers);
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    if length > MAX_BODY_BYTES || buf.len() < head_len + length {
        return None;
    }
    let received = Received {
        method: req.method.unwrap_or("").to_string(),
        path: req.path.unwrap_or("").to_string(),
        headers,
        body: buf[head_len..head_len + length].to_vec(),
        at: Instant::now(),
        status: 0,
    };
    Some((received, head_len + length))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
