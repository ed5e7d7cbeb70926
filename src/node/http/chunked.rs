//! The chunked transfer coding of a request body (RFC 9112 §7.1), decoded
//! from a connection's read buffer with `httparse`'s chunk-size parser.
//!
//! Bounded: the decoded body at most `max_body_bytes` (413 as soon as a
//! chunk size says it would be more); chunk extensions are skipped, and
//! trailer fields read (at most `MAX_HEADERS`) and dropped: goad keeps the
//! head's headers only.

use super::response::Response;
use crate::limits::MAX_HEADERS;

/// A decoded body and how many bytes of the buffer its coding took.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded {
    pub body: Vec<u8>,
    pub used: usize,
}

/// Decodes the chunked body at the start of `buf`: `None` until its last
/// chunk and trailer section have arrived.
pub fn decode(buf: &[u8], max_body_bytes: u64) -> Result<Option<Decoded>, Response> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let (size_line, size) = match httparse::parse_chunk_size(&buf[at..]) {
            Ok(httparse::Status::Complete(parsed)) => parsed,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(bad_chunk("a chunk size line is malformed")),
        };
        if size > max_body_bytes - body.len() as u64 {
            return Err(Response::error(
                413,
                "body_too_large",
                &format!("the chunked body is over max_body_bytes ({max_body_bytes})"),
            ));
        }
        at += size_line;
        if size == 0 {
            break;
        }
        let end = at + size as usize;
        let Some(data) = buf.get(at..end + 2) else {
            return Ok(None);
        };
        if !data.ends_with(b"\r\n") {
            return Err(bad_chunk("a chunk's data is not followed by CRLF"));
        }
        body.extend_from_slice(&data[..size as usize]);
        at = end + 2;
    }
    let mut trailers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(&buf[at..], &mut trailers) {
        Ok(httparse::Status::Complete((trailer_len, _))) => Ok(Some(Decoded {
            body,
            used: at + trailer_len,
        })),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err(bad_chunk("the trailer section is malformed")),
    }
}

fn bad_chunk(message: &str) -> Response {
    Response::error(400, "bad_chunked_body", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(raw: &[u8]) -> Decoded {
        decode(raw, 100).unwrap().expect("a whole body")
    }

    fn status(raw: &[u8]) -> u16 {
        decode(raw, 100).unwrap_err().status
    }

    #[test]
    fn chunks_extensions_and_trailers_decode_to_the_body() {
        let raw = b"3\r\nabc\r\n5;name=value\r\ndefgh\r\n0\r\n\r\nNEXT";
        assert_eq!(
            decoded(raw),
            Decoded {
                body: b"abcdefgh".to_vec(),
                used: raw.len() - 4
            }
        );
        let raw = b"2\r\nhi\r\n0\r\nX-Checksum: 1\r\n\r\n";
        assert_eq!(decoded(raw).body, b"hi");
        assert_eq!(decoded(raw).used, raw.len());
        assert_eq!(decoded(b"0\r\n\r\n").body, b"");
    }

    #[test]
    fn a_body_cut_anywhere_waits_for_more() {
        let raw = b"3\r\nabc\r\n0\r\nX: 1\r\n\r\n";
        for cut in 0..raw.len() {
            assert_eq!(decode(&raw[..cut], 100).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn bad_framing_and_oversized_bodies_are_refused() {
        assert_eq!(status(b"zz\r\nabc\r\n0\r\n\r\n"), 400);
        assert_eq!(status(b"3\r\nabcXX0\r\n\r\n"), 400);
        assert_eq!(status(b"0\r\nbad trailer\r\n\r\n"), 400);
        assert_eq!(
            status(b"65\r\n"),
            413,
            "101 bytes, over 100 at its size line"
        );
        let mut two = b"32\r\n".to_vec();
        two.extend([b'x'; 50]);
        two.extend(b"\r\n33\r\n");
        assert_eq!(status(&two), 413, "50 then 51 bytes");
        assert_eq!(status(b"fffffffffffffffffff\r\n"), 400, "a size past u64");
    }
}
