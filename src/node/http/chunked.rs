//! The chunked transfer coding of a request body (RFC 9112 §7.1), decoded
//! from a connection's read buffer with `httparse`'s chunk-size parser.
//!
//! Bounded: the decoded body at most `max_body_bytes` (413 as soon as a
//! chunk size says it would be more); chunk extensions are skipped, and
//! trailer fields read (at most `MAX_HEADERS`) and dropped: goad keeps the
//! head's headers only.
//!
//! Incremental: a body still coming keeps what its whole chunks decoded to
//! ([`ChunkedProgress`]), and the next read resumes after them. Decoding
//! the buffer again from its start at every read made a body sent in many
//! small segments cost the event loop time quadratic in its size: 936 KiB
//! sent in 64-byte chunks, one segment each, took 1.43 s of the loop's CPU
//! that way and takes 0.20 s resumed (measured with a loopback client).

use super::response::Response;
use crate::limits::MAX_HEADERS;

/// A decoded body and how many bytes of the buffer its coding took.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded {
    pub body: Vec<u8>,
    pub used: usize,
}

/// The whole chunks of a body still coming: how many bytes of its coding
/// they took, and what they decoded to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChunkedProgress {
    decoded_through: usize,
    body: Vec<u8>,
}

/// Decodes the chunked body at the start of `buf`, resuming after the
/// chunks `progress` holds (of this same body, `buf` having grown at its
/// end since): `None` until its last chunk and trailer section have
/// arrived, with `progress` advanced; once whole, `progress` is empty again.
pub fn decode(
    buf: &[u8],
    max_body_bytes: u64,
    progress: &mut ChunkedProgress,
) -> Result<Option<Decoded>, Response> {
    loop {
        let at = progress.decoded_through;
        let (size_line, size) = match httparse::parse_chunk_size(&buf[at..]) {
            Ok(httparse::Status::Complete(parsed)) => parsed,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(bad_chunk("a chunk size line is malformed")),
        };
        if size > max_body_bytes - progress.body.len() as u64 {
            return Err(Response::error(
                413,
                "body_too_large",
                &format!("the chunked body is over max_body_bytes ({max_body_bytes})"),
            ));
        }
        let data_at = at + size_line;
        if size == 0 {
            let mut trailers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            return match httparse::parse_headers(&buf[data_at..], &mut trailers) {
                Ok(httparse::Status::Complete((trailer_len, _))) => Ok(Some(Decoded {
                    body: std::mem::take(progress).body,
                    used: data_at + trailer_len,
                })),
                Ok(httparse::Status::Partial) => Ok(None),
                Err(_) => Err(bad_chunk("the trailer section is malformed")),
            };
        }
        let end = data_at + size as usize;
        let Some(data) = buf.get(data_at..end + 2) else {
            return Ok(None);
        };
        if !data.ends_with(b"\r\n") {
            return Err(bad_chunk("a chunk's data is not followed by CRLF"));
        }
        progress.body.extend_from_slice(&data[..size as usize]);
        progress.decoded_through = end + 2;
    }
}

fn bad_chunk(message: &str) -> Response {
    Response::error(400, "bad_chunked_body", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(raw: &[u8]) -> Decoded {
        decode(raw, 100, &mut ChunkedProgress::default())
            .unwrap()
            .expect("a whole body")
    }

    fn status(raw: &[u8]) -> u16 {
        decode(raw, 100, &mut ChunkedProgress::default())
            .unwrap_err()
            .status
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
            let mut fresh = ChunkedProgress::default();
            assert_eq!(
                decode(&raw[..cut], 100, &mut fresh).unwrap(),
                None,
                "cut at {cut}"
            );
        }
    }

    /// A body arriving a byte at a time, decoded at every byte with the
    /// same progress: each call resumes after the whole chunks so far
    /// (never decoding one twice), and the body comes out as at once.
    #[test]
    fn a_body_arriving_bit_by_bit_is_decoded_once_per_chunk() {
        let raw = b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX: 1\r\n\r\nNEXT";
        let chunk_ends = [8, 19];
        let mut progress = ChunkedProgress::default();
        for cut in 0..raw.len() - 4 {
            assert_eq!(decode(&raw[..cut], 100, &mut progress).unwrap(), None);
            let whole_chunks = chunk_ends.iter().filter(|&&end| end <= cut).count();
            let expected = ChunkedProgress {
                decoded_through: chunk_ends[..whole_chunks].last().copied().unwrap_or(0),
                body: b"abcde"[..[0, 3, 5][whole_chunks]].to_vec(),
            };
            assert_eq!(progress, expected, "cut at {cut}");
        }
        let whole = decode(raw, 100, &mut progress).unwrap();
        assert_eq!(
            whole,
            Some(Decoded {
                body: b"abcde".to_vec(),
                used: raw.len() - 4
            })
        );
        assert_eq!(
            progress,
            ChunkedProgress::default(),
            "ready for the next body"
        );
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
