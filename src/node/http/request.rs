//! Parsing one HTTP/1.1 request out of a connection's read buffer, with
//! `httparse` for the head, and the body framed by `Content-Length` or by
//! the chunked transfer coding (`http::chunked`).
//!
//! Bounded: the head (request line and headers) is at most
//! `MAX_HEAD_BYTES` with at most `MAX_HEADERS` headers, the body at most the
//! node's `max_body_bytes`, and a chunked body's framing (chunk sizes,
//! trailers) at most what is left of `MAX_HEAD_BYTES` after the head. A
//! request without either framing has no body. Framing that could be read
//! two ways is refused, as request smuggling needs: `Transfer-Encoding`
//! with `Content-Length` (400), a transfer coding other than `chunked`
//! alone (501), `Transfer-Encoding` on HTTP/1.0 (400).

use super::chunked::{self, ChunkedProgress};
use super::response::Response;
use crate::limits::{MAX_HEADERS, MAX_HEAD_BYTES};

/// A parsed request. Header names are lowercased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The connection stays open after the response.
    pub keep_alive: bool,
}

impl Request {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The members of a list header (RFC 9110 §5.6.1): every line of
    /// `name`, split at its commas, trimmed, empty members left out.
    pub fn list_members<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> {
        let lines = self.headers.iter().filter(move |(n, _)| n == name);
        let members = lines.flat_map(|(_, v)| v.split(','));
        members.map(str::trim).filter(|m| !m.is_empty())
    }

    /// A query parameter, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query_pairs()
            .find_map(|(k, v)| (k == name).then(|| percent_decode(v)))
    }

    /// The first query parameter whose name is not one of `known`: a
    /// route that filters by its parameters refuses it (a misspelt filter
    /// would otherwise match everything).
    pub fn unknown_query_param(&self, known: &[&str]) -> Option<String> {
        let names = self.query_pairs().map(|(k, _)| percent_decode(k));
        names
            .into_iter()
            .find(|name| !known.contains(&name.as_str()))
    }

    /// The first query parameter given more than once: a route refuses
    /// it (which of `?source_id=a&source_id=b` would a purge take?).
    pub fn repeated_query_param(&self) -> Option<String> {
        let mut seen = std::collections::HashSet::new();
        let names = self.query_pairs().map(|(k, _)| percent_decode(k));
        names.into_iter().find(|name| !seen.insert(name.clone()))
    }

    fn query_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        let pairs = self.query.split('&').filter(|pair| !pair.is_empty());
        pairs.map(|pair| pair.split_once('=').unwrap_or((pair, "")))
    }
}

/// What the buffer holds.
#[derive(Debug)]
pub enum Parsed {
    /// More bytes are needed. `continue_wanted`: the head is complete and
    /// asks for `100 Continue` before the client sends its body. `size`:
    /// what the whole request takes, as far as its head tells. `head`: the
    /// request without its body, once its head is complete.
    Partial {
        continue_wanted: bool,
        size: RequestBytes,
        head: Option<Request>,
    },
    /// A whole request, and how many bytes of the buffer it took.
    Complete(Request, usize),
    /// The request is malformed or over a bound: answer this and close.
    Reject(Response),
    /// The request's head is whole and its `Content-Length` is over
    /// `max_body_bytes`: answer this and close, unless its head is refused
    /// for what holds whatever its size (no route, no credentials).
    Oversized(Request, Response),
}

/// The bytes a request being read takes, head and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBytes {
    /// Its head is still coming.
    Unknown,
    /// Its head and its `Content-Length` body.
    Exactly(usize),
    /// A chunked body: at most its bound on the coding in the buffer
    /// (`MAX_HEAD_BYTES` and `max_body_bytes`) and `max_body_bytes` more
    /// for what it decodes to.
    AtMost(usize),
}

impl RequestBytes {
    /// The most it takes, when known.
    pub fn most(self) -> Option<usize> {
        match self {
            RequestBytes::Unknown => None,
            RequestBytes::Exactly(n) | RequestBytes::AtMost(n) => Some(n),
        }
    }
}

/// Parses the request at the start of `buf`; a chunked body resumes after
/// the chunks `progress` holds of it (see `chunked::decode`).
pub fn parse(buf: &[u8], max_body_bytes: u64, progress: &mut ChunkedProgress) -> Parsed {
    parse_request(buf, max_body_bytes, progress).unwrap_or_else(Parsed::Reject)
}

fn parse_request(
    buf: &[u8],
    max_body_bytes: u64,
    progress: &mut ChunkedProgress,
) -> Result<Parsed, Response> {
    let Some((mut request, head_len, version)) = parse_head(buf)? else {
        return Ok(Parsed::Partial {
            continue_wanted: false,
            size: RequestBytes::Unknown,
            head: None,
        });
    };
    let (body, size) = match framing(&request, version, max_body_bytes)? {
        Framing::Oversized(length) => {
            let response = Response::error(
                413,
                "body_too_large",
                &format!("the body of {length} bytes is over max_body_bytes ({max_body_bytes})"),
            );
            return Ok(Parsed::Oversized(request, response));
        }
        Framing::Length(length) => {
            let total = head_len + length as usize;
            let body = buf.get(head_len..total).map(|body| chunked::Decoded {
                body: body.to_vec(),
                used: total - head_len,
            });
            (body, RequestBytes::Exactly(total))
        }
        Framing::Chunked => (
            chunked::decode(&buf[head_len..], max_body_bytes, progress)?,
            RequestBytes::AtMost(MAX_HEAD_BYTES + 2 * max_body_bytes as usize),
        ),
    };
    let Some(body) = body else {
        // A chunked body still coming once the buffer holds a whole head
        // and body's worth has framing past its bound (and the connection
        // reads no further than that).
        if buf.len() >= MAX_HEAD_BYTES + max_body_bytes as usize {
            return Err(Response::error(
                413,
                "body_too_large",
                &format!(
                    "the chunked body's framing is over {MAX_HEAD_BYTES} bytes besides max_body_bytes ({max_body_bytes})"
                ),
            ));
        }
        let continue_wanted = version == 1
            && request
                .header("expect")
                .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"));
        return Ok(Parsed::Partial {
            continue_wanted,
            size,
            head: Some(request),
        });
    };
    request.body = body.body;
    Ok(Parsed::Complete(request, head_len + body.used))
}

/// 431 for a head over `MAX_HEAD_BYTES`, or 414 where its request line
/// alone is (the target, as the line's other parts are short).
fn head_too_large(buf: &[u8]) -> Response {
    let head = &buf[..buf.len().min(MAX_HEAD_BYTES)];
    match head.contains(&b'\n') {
        true => Response::error(
            431,
            "header_too_large",
            &format!("the request head is over {MAX_HEAD_BYTES} bytes"),
        ),
        false => Response::error(
            414,
            "uri_too_long",
            &format!("the request line is over {MAX_HEAD_BYTES} bytes"),
        ),
    }
}

/// Header fields a request carries at most once: which of two would a
/// proxy in front have read? (RFC 9112 §3.2 asks a 400 for two `Host`
/// lines; `Authorization` is no list, and the node read the first.)
const SINGLE_FIELDS: [&str; 2] = ["host", "authorization"];

/// The request head (without its body), its length and the HTTP minor
/// version; `None` while the head is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<(Request, usize, u8)>, Response> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD_BYTES => n,
        Ok(httparse::Status::Complete(_)) => return Err(head_too_large(buf)),
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(head_too_large(buf))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Response::error(
                431,
                "too_many_headers",
                &format!("the request has more than {MAX_HEADERS} headers"),
            ))
        }
        Err(httparse::Error::Version) => return unread_version(buf),
        Err(e) => {
            return Err(Response::error(
                400,
                "bad_request",
                &format!("malformed request: {e}"),
            ))
        }
    };
    let version = req.version.unwrap_or(1);
    let (path, query) = path_and_query(req.path.unwrap_or_default());
    let mut fields = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        fields.push((h.name.to_ascii_lowercase(), field_value(h.value)));
    }
    let mut request = Request {
        method: req.method.unwrap_or_default().to_string(),
        path: path.to_string(),
        query: query.to_string(),
        headers: fields,
        body: Vec::new(),
        keep_alive: false,
    };
    if let Some(name) = SINGLE_FIELDS
        .into_iter()
        .find(|&name| request.headers.iter().filter(|(n, _)| n == name).count() > 1)
    {
        return Err(Response::error(
            400,
            "repeated_header",
            &format!("the {name} header is given more than once"),
        ));
    }
    check_host(&request, version)?;
    // `Connection` is a list: `close` may come with other options.
    let option = |name: &str| {
        let mut options = request.list_members("connection");
        options.any(|o| o.eq_ignore_ascii_case(name))
    };
    let close = option("close");
    request.keep_alive = match version {
        1 => !close,
        _ => option("keep-alive") && !close,
    };
    Ok(Some((request, head_len, version)))
}

/// A head whose version `httparse` does not read: one of a later HTTP/1
/// minor version is read as HTTP/1.1 (RFC 9110 §2.5 asks a message of a
/// later minor version than the recipient's to be read as of its highest;
/// none is defined, and `httparse` reads only 1.0 and 1.1); another
/// version is answered 505; a request line that has no version after its
/// target is malformed, 400 (as is one too long to look at, 414). The
/// line is judged whole, however its bytes arrive, so the refusal is the
/// same and quotes what the line has.
fn unread_version(buf: &[u8]) -> Result<Option<(Request, usize, u8)>, Response> {
    let head = &buf[..buf.len().min(MAX_HEAD_BYTES + 1)];
    let Some(end) = head.iter().position(|&b| b == b'\n') else {
        return match head.len() > MAX_HEAD_BYTES {
            true => Err(head_too_large(buf)),
            false => Ok(None),
        };
    };
    let line = head[..end].strip_suffix(b"\r").unwrap_or(&head[..end]);
    // What follows the target: `method SP target SP version`.
    let version = line.splitn(3, |&b| b == b' ').nth(2).unwrap_or_default();
    match version {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9'] => {
            // One digit each side of the dot (RFC 9112 §2.3): the copy has
            // the head's length and offsets; it goes no further than a
            // head may (so a head over it is still refused), not into a
            // body already read.
            let mut head = head.to_vec();
            head[line.len() - 1] = b'1';
            parse_head(&head)
        }
        [b'H', b'T', b'T', b'P', b'/', b'0'..=b'9', b'.', b'0'..=b'9'] => Err(Response::error(
            505,
            "unsupported_http_version",
            "the request is not HTTP/1.1 or HTTP/1.0, which the node speaks",
        )),
        _ => Err(Response::error(
            400,
            "bad_request",
            &format!(
                "malformed request: its line must be `METHOD /target HTTP/1.1`, and after its \
                 target it has {:?}",
                String::from_utf8_lossy(&version[..version.len().min(32)])
            ),
        )),
    }
}

/// RFC 9112 §3.2: an HTTP/1.1 request carries a `Host` (empty where the
/// target has no authority), and its value is a host and optional port.
/// Every HTTP/1.1 client sends one; a request without it was written by
/// hand or mangled on its way.
fn check_host(request: &Request, version: u8) -> Result<(), Response> {
    match request.header("host") {
        None if version == 1 => Err(Response::error(
            400,
            "missing_host",
            "an HTTP/1.1 request must carry a Host header (RFC 9112 section 3.2)",
        )),
        Some(host) if !host.bytes().all(is_authority_byte) => Err(Response::error(
            400,
            "bad_host",
            &format!("the Host header {host:?} is not a host and port"),
        )),
        _ => Ok(()),
    }
}

/// A byte of a URI's host and port (RFC 3986 §3.2.2): unreserved,
/// sub-delims, a percent-encoding, an IP literal's brackets and colons.
fn is_authority_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%:[]".contains(&b)
}

/// A header's value as text: its UTF-8, or, for bytes that are not (the
/// `obs-text` of an older client, which RFC 9110 asks a recipient to keep
/// as opaque data), each byte as the ISO-8859-1 character it was meant as,
/// as Node.js and Python read them. Refusing the request instead would
/// refuse every event of a provider that sends such a value, however
/// often it retries.
fn field_value(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.trim().to_string(),
        Err(_) => bytes
            .iter()
            .map(|&b| char::from(b))
            .collect::<String>()
            .trim()
            .to_string(),
    }
}

/// How the body that follows the head is framed.
enum Framing {
    /// `Content-Length` bytes (0 without the header), at most `max_body_bytes`.
    Length(u64),
    /// `Content-Length` bytes, over `max_body_bytes`.
    Oversized(u64),
    Chunked,
}

fn framing(request: &Request, version: u8, max_body_bytes: u64) -> Result<Framing, Response> {
    let codings: Vec<String> = request
        .headers
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .flat_map(|(_, v)| v.split(','))
        .map(|coding| coding.trim().to_ascii_lowercase())
        .collect();
    if !codings.is_empty() {
        if version == 0 {
            return Err(bad_framing("Transfer-Encoding is not HTTP/1.0"));
        }
        if request.header("content-length").is_some() {
            return Err(bad_framing(
                "Transfer-Encoding and Content-Length together are refused",
            ));
        }
        if codings != ["chunked"] {
            return Err(Response::error(
                501,
                "unsupported_transfer_encoding",
                &format!(
                    "Transfer-Encoding {:?} is not supported; send chunked or Content-Length",
                    codings.join(", ")
                ),
            ));
        }
        return Ok(Framing::Chunked);
    }
    // No Content-Length (and no Transfer-Encoding): no body (RFC 9112
    // §6.3). Ingest, which needs one, refuses such a request itself.
    let length = content_length(request)
        .map_err(|message| Response::error(400, "bad_content_length", &message))?
        .unwrap_or(0);
    Ok(match length > max_body_bytes {
        true => Framing::Oversized(length),
        false => Framing::Length(length),
    })
}

fn bad_framing(message: &str) -> Response {
    Response::error(400, "bad_framing", message)
}

/// The request's Content-Length: absent, or one valid value (repeats must agree).
fn content_length(request: &Request) -> Result<Option<u64>, String> {
    let mut length: Option<u64> = None;
    for (_, value) in request
        .headers
        .iter()
        .filter(|(n, _)| n == "content-length")
    {
        // Digits only (RFC 9110 §8.6): `+5`, which Rust's parse takes, is
        // refused, as a proxy in front may read it otherwise.
        let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
        let n: u64 = value
            .parse()
            .ok()
            .filter(|_| digits)
            .ok_or_else(|| format!("Content-Length {value:?} is not a non-negative integer"))?;
        if length.is_some_and(|l| l != n) {
            return Err("conflicting Content-Length headers".to_string());
        }
        length = Some(n);
    }
    Ok(length)
}

/// A request target's path and query. An absolute-form target
/// (`http://host/path?query`, which RFC 9112 §3.2.2 says a server must
/// accept) is taken without its scheme and authority, its path `/` when it
/// has none.
fn path_and_query(target: &str) -> (&str, &str) {
    let scheme = ["http://", "https://"].into_iter().find(|scheme| {
        let head = target.get(..scheme.len());
        head.is_some_and(|h| h.eq_ignore_ascii_case(scheme))
    });
    let rest = match scheme {
        Some(scheme) => {
            let after_scheme = &target[scheme.len()..];
            let authority_len = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
            &after_scheme[authority_len..]
        }
        None => target,
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    (if path.is_empty() { "/" } else { path }, query)
}

/// `s` with its `%XX` escapes decoded and `+` as a space (a query's or a
/// form's value); a `%` not followed by two hex digits is kept as it is.
pub fn percent_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parse` of a buffer seen for the first time.
    fn parse_new(raw: &[u8], max_body_bytes: u64) -> Parsed {
        parse(raw, max_body_bytes, &mut ChunkedProgress::default())
    }

    fn complete(raw: &[u8]) -> (Request, usize) {
        match parse_new(raw, 100) {
            Parsed::Complete(r, n) => (r, n),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    fn rejected(raw: &[u8]) -> u16 {
        match parse_new(raw, 100) {
            Parsed::Reject(r) | Parsed::Oversized(_, r) => r.status,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    /// A rejection's status and message.
    fn error_of(raw: &[u8]) -> (u16, String) {
        match parse_new(raw, 100) {
            Parsed::Reject(r) => {
                let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                (r.status, body["message"].as_str().unwrap().to_string())
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn parses_a_post_with_body_query_and_keep_alive() {
        let raw = b"POST /v1/x?limit=5&source_id=a%20b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-A: 1\r\n\r\nabcGET";
        let (r, n) = complete(raw);
        assert_eq!(n, raw.len() - 3);
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/x");
        assert_eq!(r.query_param("limit").as_deref(), Some("5"));
        assert_eq!(r.query_param("source_id").as_deref(), Some("a b"));
        assert_eq!(r.header("x-a"), Some("1"));
        assert_eq!(r.body, b"abc");
        assert!(r.keep_alive);
    }

    /// A query value's `+` is a space and `%2B` a plus; an escape cut short
    /// or not hex is kept, and bytes that are not UTF-8 become U+FFFD.
    #[test]
    fn query_values_are_decoded_as_forms_are() {
        assert_eq!(percent_decode("a+b%2Bc%20d"), "a b+c d");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("caf%C3%A9%FF"), "caf\u{e9}\u{fffd}");
    }

    /// A header value that is not UTF-8 is read as ISO-8859-1, byte by
    /// byte, instead of refusing the request; UTF-8 stays as it is.
    #[test]
    fn a_header_value_that_is_not_utf_8_is_read_as_latin_1() {
        let (r, _) = complete(b"POST / HTTP/1.1\r\nhost: h\r\nX-Name: caf\xe9\r\nX-Utf8: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(r.header("x-name"), Some("caf\u{e9}"));
        assert_eq!(r.header("x-utf8"), Some("caf\u{e9}"));
        assert_eq!(field_value(b"\xff\xfe "), "\u{ff}\u{fe}");
    }

    /// HTTP/1.2 to 1.9 are read as HTTP/1.1 (RFC 9110 §2.5): kept alive,
    /// a Host asked for, a line still coming waited for.
    #[test]
    fn a_later_http_1_minor_version_is_read_as_http_1_1() {
        let raw = b"POST /v1/x HTTP/1.2\r\nhost: h\r\nContent-Length: 3\r\n\r\nabc";
        let (r, n) = complete(raw);
        assert_eq!(
            (r.path.as_str(), r.body.as_slice(), n),
            ("/v1/x", &b"abc"[..], raw.len())
        );
        assert!(r.keep_alive);
        assert_eq!(rejected(b"GET / HTTP/1.9\r\n\r\n"), 400);
        let mut huge = b"GET / HTTP/1.2\r\nhost: h\r\nX-Big: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        assert_eq!(rejected(&huge), 431);
        // The version of a line longer than a head may be is not looked
        // for: it is too long, as with HTTP/1.1.
        let mut long_target = b"GET /".to_vec();
        long_target.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        long_target.extend(b" HTTP/1.2\r\nhost: h\r\n\r\n");
        assert_eq!(rejected(&long_target), 414);
        // A line still coming is waited for: it is judged whole.
        for partial in ["GET / HTTP/1.2", "GET / HTTP/2.0", "GET / HTTQ"] {
            assert!(
                matches!(
                    parse_new(partial.as_bytes(), 100),
                    Parsed::Partial { head: None, .. }
                ),
                "{partial}"
            );
        }
    }

    /// An absolute-form target is taken as its path and query.
    #[test]
    fn an_absolute_form_target_is_its_path_and_query() {
        let (r, _) = complete(b"GET http://node:7878/v1/x?limit=5 HTTP/1.1\r\nHost: node\r\n\r\n");
        assert_eq!((r.path.as_str(), r.query.as_str()), ("/v1/x", "limit=5"));
        let (r, _) = complete(b"GET HTTPS://node HTTP/1.1\r\nHost: node\r\n\r\n");
        assert_eq!((r.path.as_str(), r.query.as_str()), ("/", ""));
        assert_eq!(path_and_query("http://node?a=1"), ("/", "a=1"));
        assert_eq!(path_and_query("/plain?x"), ("/plain", "x"));
        assert_eq!(path_and_query("httpx://node/p"), ("httpx://node/p", ""));
    }

    /// A request still coming says whether it asked for `100 Continue`
    /// and what it takes once its head is whole: its head and
    /// `Content-Length`, or a chunked body's bound.
    #[test]
    fn waits_for_the_whole_head_and_body() {
        let partial = |buf: &[u8]| match parse_new(buf, 100) {
            Parsed::Partial {
                continue_wanted,
                size,
                head,
            } => {
                assert_eq!(head.is_some(), size != RequestBytes::Unknown);
                (continue_wanted, size)
            }
            other => panic!("expected a partial request, got {other:?}"),
        };
        assert_eq!(
            partial(b"POST / HTTP/1.1\r\nhost: h\r\nContent-Le"),
            (false, RequestBytes::Unknown)
        );
        let head = b"POST / HTTP/1.1\r\nhost: h\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(
            partial(&[&head[..], b"ab"].concat()),
            (false, RequestBytes::Exactly(head.len() + 5))
        );
        let expecting =
            b"POST / HTTP/1.1\r\nhost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(
            partial(expecting),
            (true, RequestBytes::Exactly(expecting.len() + 5))
        );
        assert_eq!(
            partial(b"POST / HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab"),
            (false, RequestBytes::AtMost(MAX_HEAD_BYTES + 200))
        );
        assert_eq!(RequestBytes::Exactly(7).most(), Some(7));
        assert_eq!(RequestBytes::Unknown.most(), None);
    }

    /// A chunked body is decoded into the request's body, and the next
    /// request starts right after its trailer section; one that is still
    /// coming waits (asking for `100 Continue` if it said so) until its
    /// framing outgrows what the connection buffers.
    #[test]
    fn a_chunked_body_is_decoded_and_bounded() {
        let raw = b"POST /h HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET";
        let (r, n) = complete(raw);
        assert_eq!((r.body.as_slice(), n), (&b"abcde"[..], raw.len() - 3));
        let coming =
            b"POST / HTTP/1.1\r\nhost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab";
        assert!(matches!(
            parse_new(coming, 100),
            Parsed::Partial {
                continue_wanted: true,
                ..
            }
        ));
        let mut long_extension =
            b"POST / HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;".to_vec();
        long_extension.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES + 100));
        match parse_new(&long_extension, 100) {
            Parsed::Reject(r) if r.status == 413 => {
                assert!(String::from_utf8_lossy(&r.body).contains("framing"))
            }
            other => panic!("expected 413 for the framing, got {other:?}"),
        }
    }

    #[test]
    fn connection_close_and_http_1_0_end_the_connection() {
        let (r, _) = complete(b"GET / HTTP/1.1\r\nhost: h\r\nConnection: close\r\n\r\n");
        assert!(!r.keep_alive);
        let (r, _) = complete(b"GET / HTTP/1.0\r\n\r\n");
        assert!(!r.keep_alive);
        // `Connection` is a list, its options in any case, on any line.
        let keeps = |connection: &str, version: &str| {
            let raw = format!("GET / HTTP/{version}\r\nhost: h\r\n{connection}\r\n");
            complete(raw.as_bytes()).0.keep_alive
        };
        assert!(!keeps("Connection: TE, Close\r\n", "1.1"));
        assert!(!keeps("Connection: te\r\nConnection: close\r\n", "1.1"));
        assert!(keeps("Connection: te\r\n", "1.1"));
        assert!(keeps("Connection: Keep-Alive, foo\r\n", "1.0"));
        assert!(!keeps("Connection: keep-alive, close\r\n", "1.0"));
        assert!(!keeps("", "1.0"));
    }

    #[test]
    fn rejects_bad_framing_with_the_right_status() {
        assert_eq!(rejected(b"\x00\x01garbage\r\n\r\n"), 400);
        assert_eq!(
            rejected(b"POST / HTTP/1.1\r\nhost: h\r\nContent-Length: x\r\n\r\n"),
            400
        );
        assert_eq!(
            rejected(
                b"POST / HTTP/1.1\r\nhost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
            ),
            400
        );
        // Digits only: a sign, which Rust's integer parse takes, is refused.
        for length in ["+5", "-1", "5 5", ""] {
            let raw =
                format!("POST / HTTP/1.1\r\nhost: h\r\nContent-Length: {length}\r\n\r\nhello");
            assert_eq!(rejected(raw.as_bytes()), 400, "{length:?}");
        }
        let chunked_with_length =
            b"POST / HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(rejected(chunked_with_length), 400);
        assert_eq!(
            rejected(b"POST / HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            501
        );
        assert_eq!(
            rejected(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            rejected(b"POST / HTTP/1.1\r\nhost: h\r\nContent-Length: 101\r\n\r\n"),
            413
        );
        let mut long = b"GET / HTTP/1.1\r\nhost: h\r\nX-Big: ".to_vec();
        long.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        assert_eq!(rejected(&long), 431);
        let mut long_target = b"GET /".to_vec();
        long_target.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        assert_eq!(rejected(&long_target), 414);
        long_target.extend(b" HTTP/1.1\r\nhost: h\r\n\r\n");
        assert_eq!(rejected(&long_target), 414);
        for version in ["HTTP/2.0", "HTTP/3.0", "HTTP/0.9"] {
            let raw = format!("GET / {version}\r\nhost: h\r\n\r\n");
            assert_eq!(rejected(raw.as_bytes()), 505, "{version}");
        }
        // A line that ends in no version is malformed, not of another one.
        for line in [
            "GET / HTTP/1.2x",
            "GET / HTTP/1.23",
            "GET / HTTP/2",
            "GET / HTTP.0",
            "GET / \0HTTP/1.1",
            "GET /a b HTTP/1.1",
        ] {
            let raw = format!("{line}\r\nhost: h\r\n\r\n");
            assert_eq!(rejected(raw.as_bytes()), 400, "{line:?}");
        }
        assert_eq!(
            error_of(b"GET /x HTTQ/1.1\r\n\r\n"),
            (
                400,
                "malformed request: its line must be `METHOD /target HTTP/1.1`, and after its \
                 target it has \"HTTQ/1.1\""
                    .to_string()
            )
        );
        let mut many = b"GET / HTTP/1.1\r\nhost: h\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend(b"\r\n");
        assert_eq!(rejected(&many), 431);
    }

    /// A `Host` or `Authorization` given twice is refused, whatever the
    /// case of its name: which one a proxy in front read is not known.
    /// Other fields may repeat.
    #[test]
    fn a_field_given_once_at_most_is_refused_when_repeated() {
        for twice in [
            &b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nhost: h\r\nAuthorization: Bearer a\r\nAUTHORIZATION: Bearer a\r\n\r\n",
        ] {
            match parse_new(twice, 100) {
                Parsed::Reject(r) => {
                    assert_eq!(r.status, 400);
                    assert!(String::from_utf8_lossy(&r.body).contains("repeated_header"));
                }
                other => panic!("expected a rejection, got {other:?}"),
            }
        }
        let (r, _) = complete(b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-A: 2\r\n\r\n");
        assert_eq!(r.headers.len(), 3);
    }

    /// An HTTP/1.1 request carries a `Host` whose value is a host and
    /// optional port (RFC 9112 §3.2); it may be empty, and HTTP/1.0 needs
    /// none.
    #[test]
    fn an_http_1_1_request_without_a_host_or_with_a_bad_one_is_refused() {
        for (raw, code) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], "missing_host"),
            (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "bad_host"),
            (b"GET / HTTP/1.1\r\nHost: user@h\r\n\r\n", "bad_host"),
            (b"GET / HTTP/1.0\r\nHost: h/x\r\n\r\n", "bad_host"),
        ] {
            match parse_new(raw, 100) {
                Parsed::Reject(r) => {
                    assert_eq!(r.status, 400);
                    let body = String::from_utf8_lossy(&r.body);
                    assert!(body.contains(code), "{body}");
                }
                other => panic!("expected {code}, got {other:?}"),
            }
        }
        for served in [
            &b"GET / HTTP/1.0\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: goad.example.com:8443\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: [::1]:7878\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        ] {
            complete(served);
        }
    }
}
