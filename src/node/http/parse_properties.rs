//! A connection's requests parsed from its bytes as they arrive, in reads
//! of any size (the chunked body resumed after its whole chunks), are the
//! requests parsed from all the bytes at once, and end in the same
//! refusal, a JSON error: seeded requests of each framing, some pipelined,
//! some with bytes changed, added or taken out. None makes the parser
//! panic.

use super::chunked::ChunkedProgress;
use super::request::{parse, Parsed, Request};
use crate::core::Rng;

/// The body bound of these requests: some chunked and mutated ones pass it.
const MAX_BODY_BYTES: u64 = 64;

/// A request of a random framing: none (GET), `Content-Length` or chunked
/// (chunks of 1-10 bytes, some with an extension, maybe a trailer).
fn request(rng: &mut Rng) -> Vec<u8> {
    let body: Vec<u8> = (0..rng.below(80)).map(|i| b'a' + (i % 26) as u8).collect();
    match rng.below(3) {
        0 => b"GET /v1/hooks?tenant=t HTTP/1.1\r\nHost: h\r\n\r\n".to_vec(),
        1 => {
            let head = format!(
                "POST /p HTTP/1.1\r\nhost: h\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            [head.as_bytes(), &body].concat()
        }
        _ => {
            let mut out =
                b"POST /c HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for chunk in body.chunks(1 + rng.below(10) as usize) {
                let extension = if rng.below(3) == 0 { ";e=v" } else { "" };
                out.extend(format!("{:x}{extension}\r\n", chunk.len()).as_bytes());
                out.extend(chunk);
                out.extend(b"\r\n");
            }
            out.extend(b"0\r\n");
            if rng.below(2) == 0 {
                out.extend(b"Checksum: 1\r\n");
            }
            out.extend(b"\r\n");
            out
        }
    }
}

/// Up to three bytes changed, added or taken out.
fn mutate(buf: &mut Vec<u8>, rng: &mut Rng) {
    for _ in 0..rng.below(4) {
        let at = rng.below(buf.len() as u64) as usize;
        match rng.below(3) {
            0 => buf[at] = rng.below(256) as u8,
            1 => buf.insert(at, b"\r\n0; fx:"[rng.below(8) as usize]),
            _ => drop(buf.remove(at)),
        }
    }
}

/// What a connection makes of its bytes.
#[derive(Debug, PartialEq)]
enum Parse {
    Request(Request),
    Refused(u16, Vec<u8>),
}

/// Parses `bytes` arriving in reads of `reads` bytes (the rest in one last
/// read), as a connection does: each request taken off the front once
/// whole, the first refusal the last.
fn parse_arriving(bytes: &[u8], reads: &[usize]) -> Vec<Parse> {
    let mut parsed = Vec::new();
    let mut progress = ChunkedProgress::default();
    let mut input = Vec::new();
    let mut arrived = 0;
    for read in reads.iter().copied().chain([bytes.len()]) {
        let upto = (arrived + read).min(bytes.len());
        input.extend_from_slice(&bytes[arrived..upto]);
        arrived = upto;
        while !input.is_empty() {
            match parse(&input, MAX_BODY_BYTES, &mut progress) {
                Parsed::Partial { .. } => break,
                Parsed::Complete(request, used) => {
                    input.drain(..used);
                    parsed.push(Parse::Request(request));
                }
                Parsed::Reject(response) | Parsed::Oversized(_, response) => {
                    parsed.push(Parse::Refused(response.status, response.body));
                    return parsed;
                }
            }
        }
    }
    parsed
}

#[test]
fn requests_arriving_in_reads_of_any_size_parse_as_they_do_whole() {
    let mut kinds = [0; 2];
    for seed in 0..20_000 {
        let mut rng = Rng::new(seed);
        let mut bytes = request(&mut rng);
        if rng.below(2) == 0 {
            bytes.extend(request(&mut rng));
        }
        mutate(&mut bytes, &mut rng);
        let whole = parse_arriving(&bytes, &[]);
        let reads: Vec<usize> = (0..bytes.len())
            .map(|_| 1 + rng.below(7) as usize)
            .collect();
        let arriving = parse_arriving(&bytes, &reads);
        assert_eq!(
            arriving,
            whole,
            "seed {seed}: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        if let Some(Parse::Refused(status, body)) = whole.last() {
            assert_is_a_json_error(*status, body);
        }
        let refused = matches!(whole.last(), Some(Parse::Refused(..)));
        kinds[usize::from(refused)] += 1;
    }
    // Both outcomes are well represented (the mutations are not all fatal).
    assert!(kinds.iter().all(|&n| n > 2_000), "{kinds:?}");
}

/// A refusal is an error status with a JSON body naming the error and
/// saying what is wrong.
fn assert_is_a_json_error(status: u16, body: &[u8]) {
    assert!((400..600).contains(&status), "{status}");
    let error: serde_json::Value = serde_json::from_slice(body).expect("a JSON body");
    assert!(
        error["error"].is_string() && error["message"].is_string(),
        "{error}"
    );
}
