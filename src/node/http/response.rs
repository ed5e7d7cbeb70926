//! A response and its HTTP/1.1 bytes. Errors are JSON
//! `{"error": "<code>", "message": "<text>"}`.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// An error's code, as its body names it (what counters label it by).
    pub error: Option<&'static str>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: &'a str,
}

impl Response {
    /// A JSON body.
    pub fn json(status: u16, value: &impl Serialize) -> Response {
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: serde_json::to_vec(value).expect("response values serialize"),
            error: None,
        }
    }

    /// A JSON error.
    pub fn error(status: u16, code: &'static str, message: &str) -> Response {
        let body = ErrorBody {
            error: code,
            message,
        };
        Response {
            error: Some(code),
            ..Response::json(status, &body)
        }
    }

    /// 503 with `Retry-After` (seconds).
    pub fn unavailable(code: &'static str, message: &str, retry_after_s: u64) -> Response {
        Response::error(503, code, message).with_header("retry-after", retry_after_s.to_string())
    }

    pub fn text(status: u16, content_type: &'static str, body: String) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into_bytes(),
            error: None,
        }
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Response {
        self.headers.push((name, value));
        self
    }

    /// Appends the response's bytes to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>, keep_alive: bool) {
        self.write_head_to(out, keep_alive);
        out.extend_from_slice(&self.body);
    }

    /// Appends the response's head alone to `out`, its `content-length`
    /// the body's: the answer to a `HEAD` request (RFC 9110 §9.3.2). Its
    /// `date` is now, as RFC 9110 §6.6.1 asks of a server with a clock.
    pub fn write_head_to(&self, out: &mut Vec<u8>, keep_alive: bool) {
        use std::io::Write as _;
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\ndate: {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n",
            self.status,
            reason(self.status),
            httpdate::fmt_http_date(std::time::SystemTime::now()),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        if !keep_alive {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_json_with_its_length_date_and_extra_headers() {
        let mut out = Vec::new();
        let before = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
        Response::unavailable("queue_full", "later", 1).write_to(&mut out, false);
        let text = String::from_utf8(out).unwrap();
        let date = text.lines().find_map(|l| l.strip_prefix("date: ")).unwrap();
        let sent = httpdate::parse_http_date(date).unwrap();
        assert!(
            before <= sent && sent <= std::time::SystemTime::now(),
            "{date}"
        );
        let body = r#"{"error":"queue_full","message":"later"}"#;
        assert_eq!(
            text,
            format!(
                "HTTP/1.1 503 Service Unavailable\r\ndate: {date}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        );
    }

    /// Every status the node answers with has its reason phrase.
    #[test]
    fn every_status_answered_has_its_reason() {
        let answered = [
            200, 202, 400, 401, 403, 404, 405, 408, 409, 411, 413, 429, 431, 500, 501, 503,
        ];
        let missing: Vec<u16> = answered
            .into_iter()
            .filter(|s| reason(*s).is_empty())
            .collect();
        assert_eq!(missing, Vec::<u16>::new());
    }
}
