//! A raw HTTP/1.1 client for the node tests: requests written byte for byte
//! (so malformed ones can be sent), responses parsed with `httparse`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a client waits for a response.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    /// Lowercased names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "the body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON error code of an error reply.
    pub fn error_code(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Responses read off a connection, over plain TCP or TLS.
#[derive(Default)]
pub struct Replies {
    buf: Vec<u8>,
}

impl Replies {
    /// Whether bytes of a response not taken yet were read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next response on `stream`, or `None` if the node closed the
    /// connection first (a read a signal interrupted is made again).
    pub fn next(&mut self, stream: &mut impl Read) -> Option<HttpReply> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut response = httparse::Response::new(&mut headers);
            let parsed = response.parse(&self.buf).unwrap_or_else(|e| {
                let got = String::from_utf8_lossy(&self.buf);
                panic!("not a well-formed response ({e}): {got:?}")
            });
            if let httparse::Status::Complete(head) = parsed {
                let headers = goad::demo::receiver::lowercase_headers(response.headers);
                let status = response.code.unwrap();
                let length: usize = headers
                    .iter()
                    .find(|(n, _)| n == "content-length")
                    .map(|(_, v)| v.parse().unwrap())
                    .unwrap_or(0);
                if self.buf.len() >= head + length {
                    let body = self.buf[head..head + length].to_vec();
                    self.buf.drain(..head + length);
                    return Some(HttpReply {
                        status,
                        headers,
                        body,
                    });
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) if self.buf.is_empty() && e.kind() != std::io::ErrorKind::WouldBlock => {
                    return None
                }
                Err(e) => panic!("reading a response: {e}"),
            }
        }
    }
}

/// One client connection (keep-alive).
pub struct Client {
    stream: TcpStream,
    replies: Replies,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).expect("connect to the node")
    }

    pub fn try_connect(addr: SocketAddr) -> Option<Client> {
        Some(Client::from_stream(TcpStream::connect(addr).ok()?))
    }

    /// A client on a connection already open, reading with a 30 s timeout.
    pub fn from_stream(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set a read timeout");
        Client {
            stream,
            replies: Replies::default(),
        }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).expect("write the request");
    }

    /// Whether the node sends anything within `wait` (what it sends is
    /// left for [`Client::reply`]).
    pub fn answers_within(&mut self, wait: Duration) -> bool {
        self.stream
            .set_read_timeout(Some(wait))
            .expect("set a read timeout");
        let mut byte = [0u8; 1];
        let answered = !self.replies.is_empty() || self.stream.peek(&mut byte).is_ok_and(|n| n > 0);
        (self.stream)
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set a read timeout");
        answered
    }

    /// Sends `raw` on a connection of its own and reads the answer.
    pub fn send_and_reply(mut self, raw: &[u8]) -> HttpReply {
        self.send(raw);
        self.reply().expect("a response")
    }

    /// The next response, or `None` if the node closed the connection first.
    pub fn reply(&mut self) -> Option<HttpReply> {
        self.replies.next(&mut self.stream)
    }

    /// True once the node has closed the connection (reads EOF, or a
    /// reset); false if a byte arrives or the read times out first.
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    /// Closes the writing half: the node reads the end of the stream.
    pub fn finish_sending(&mut self) {
        self.stream
            .shutdown(std::net::Shutdown::Write)
            .expect("shut the writing half");
    }

    /// A request and its response; `None` if the connection failed or closed.
    pub fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Option<HttpReply> {
        self.stream
            .write_all(&raw_request(method, path, headers, body))
            .ok()?;
        self.reply()
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpReply {
        self.send(&raw_request(method, path, headers, body));
        self.reply().expect("a response")
    }
}

/// The bytes of a well-formed request with a Content-Length.
pub fn raw_request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// One request on a new connection.
pub fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpReply {
    Client::connect(addr).request(method, path, headers, body)
}

pub fn get(addr: SocketAddr, path: &str) -> HttpReply {
    call(addr, "GET", path, &[], b"")
}

/// Asserts that a GET of each path is refused with 400 and its error code.
pub fn assert_gets_refused(addr: SocketAddr, refusals: &[(&str, &str)]) {
    for &(path, code) in refusals {
        let refused = get(addr, path);
        assert_eq!(
            (refused.status, refused.error_code()),
            (400, code.to_string()),
            "{path}"
        );
    }
}
