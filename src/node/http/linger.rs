//! Closing a connection in stages (RFC 9112 §9.6): once its last answer
//! is written, the node shuts its sending half, so the client reads the
//! answer and then the end of the stream, and reads and drops whatever the
//! client still sends until the client closes too, `LINGER_MS` pass or
//! `LINGER_BYTES` have been dropped; then it closes.
//!
//! Closing at once with bytes unread makes the kernel reset the
//! connection: a client still sending (a body over `max_body_bytes`,
//! answered 413 from its head, or the rest of a request answered 408)
//! then fails its send and never reads the answer (Python's
//! `http.client` posting 2 MB to a node that takes 64 KiB raised
//! `BrokenPipeError` instead of returning the 413), and a reset can
//! overtake an answer still on its way.

use crate::limits::{LINGER_BYTES, LINGER_MS};
use mio::net::TcpStream;
use std::io::{self, Read};
use std::net::Shutdown;
use std::time::{Duration, Instant};

/// A connection whose answers are written and whose sending half is shut.
#[derive(Debug)]
pub(super) struct Linger {
    until: Instant,
    dropped_bytes: usize,
}

impl Linger {
    /// Shuts the sending half of `stream`, whose answers are all written.
    pub(super) fn begin(stream: &TcpStream) -> io::Result<Linger> {
        stream.shutdown(Shutdown::Write)?;
        Ok(Linger {
            until: Instant::now() + Duration::from_millis(LINGER_MS),
            dropped_bytes: 0,
        })
    }

    /// Reads and drops what the client sent, until the socket would block;
    /// true once the connection is to close: the client closed its half,
    /// the read failed, or `LINGER_BYTES` were dropped.
    pub(super) fn drop_input(&mut self, stream: &mut TcpStream, scratch: &mut [u8]) -> bool {
        loop {
            match stream.read(scratch) {
                Ok(0) => return true,
                Ok(n) => {
                    self.dropped_bytes += n;
                    if self.dropped_bytes >= LINGER_BYTES {
                        return true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }

    /// Whether its time is up.
    pub(super) fn is_over(&self) -> bool {
        Instant::now() >= self.until
    }
}
