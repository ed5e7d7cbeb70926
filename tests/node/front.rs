//! The HTTP front itself: the admin token, malformed, slow, pipelined and
//! surplus connections.

use super::*;
use goad::limits::MAX_HEAD_BYTES;

#[test]
fn admin_routes_need_the_admin_token_and_health_and_metrics_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    std::env::set_var("NODE_TEST_ADMIN_TOKEN", "adm-1");
    c.admin_token_env = Some("NODE_TEST_ADMIN_TOKEN".into());
    let node = start(c);
    let addr = node.local_addr();
    for (method, path) in [
        ("GET", "/v1/pressure"),
        ("GET", "/v1/stats"),
        ("GET", "/v1/dead-letters"),
        ("DELETE", "/v1/dead-letters"),
        ("GET", "/v1/hooks/x"),
        ("GET", "/v1/sinks"),
        ("GET", "/v1/sources"),
        ("POST", "/v1/replays"),
        ("GET", "/v1/replays/x"),
        ("POST", "/v1/sources/gh/dead-letter"),
        ("POST", "/v1/reload"),
        ("POST", "/v1/backup"),
        ("POST", "/v1/drain"),
        ("DELETE", "/v1/drain"),
        ("GET", "/v1/drain"),
    ] {
        let denied = call(addr, method, path, &[], b"");
        assert_eq!(denied.status, 401, "{method} {path}");
        assert_eq!(denied.error_code(), "unauthorized");
        let wrong = call(
            addr,
            method,
            path,
            &[("authorization", "Bearer adm-2")],
            b"",
        );
        assert_eq!(wrong.status, 401, "{method} {path}");
    }
    // The operator commands say why the token was refused: none in the
    // variable they read, or one the node does not take. A node on
    // loopback is reached directly, whatever proxy the shell names.
    let goad_pressure = |token: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_goad"));
        cmd.args(["pressure", "--node", &addr.to_string()]);
        cmd.env("ALL_PROXY", "http://127.0.0.1:9");
        cmd.args(["--token-env", "NODE_TEST_CLI_ADMIN_TOKEN"]);
        match token {
            Some(token) => cmd.env("NODE_TEST_CLI_ADMIN_TOKEN", token),
            None => cmd.env_remove("NODE_TEST_CLI_ADMIN_TOKEN"),
        };
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8(out.stderr).unwrap()
    };
    let refused = format!("goad: http://{addr}/v1/pressure: HTTP 401 unauthorized: the admin API needs the admin token");
    assert_eq!(
        goad_pressure(None),
        format!("{refused} (NODE_TEST_CLI_ADMIN_TOKEN is not set: put the node's admin token in it, or name the variable holding it with --token-env)\n")
    );
    assert_eq!(
        goad_pressure(Some("adm-2")),
        format!("{refused} (the token in NODE_TEST_CLI_ADMIN_TOKEN is not one the node takes)\n")
    );
    // One no request can carry is not sent (a line break a file left).
    assert_eq!(
        goad_pressure(Some("adm-1\n")),
        "goad: the token in NODE_TEST_CLI_ADMIN_TOKEN is not one this command can send: \
         printable ASCII, no space at either end (nor a line break)\n"
    );
    // Asked over TLS, a node that serves plain HTTP answers in plain HTTP.
    let https = std::process::Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["pressure", "--node", &format!("https://{addr}")])
        .output()
        .unwrap();
    assert_eq!(https.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(https.stderr).unwrap(),
        format!(
            "goad: https://{addr}/v1/pressure: io: received corrupt message of type \
             InvalidContentType (a node that serves plain HTTP answers so: give its address as \
             http://…)\n"
        )
    );
    let ok = call(
        addr,
        "GET",
        "/v1/pressure",
        &[("authorization", "Bearer adm-1")],
        b"",
    );
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.json(),
        serde_json::json!({"lag_ms": 0, "window_full": false})
    );
    assert_eq!(
        get(addr, "/healthz").json(),
        serde_json::json!({"status": "ok"})
    );
    assert_eq!(
        get(addr, "/readyz").json(),
        serde_json::json!({"status": "ready"})
    );
    assert_eq!(get(addr, "/metrics").status, 200);
}

/// With `metrics.needs_admin_token`, `/metrics` needs the admin token as
/// the admin routes do (its series name tenants and sources); a reload
/// turns it off again.
#[test]
fn metrics_need_the_admin_token_when_the_config_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    std::env::set_var("NODE_TEST_METRICS_TOKEN", "adm-m");
    c.admin_token_env = Some("NODE_TEST_METRICS_TOKEN".into());
    c.metrics.needs_admin_token = true;
    let path = dir.path().join("goad.toml");
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    let node = start_with(c.clone(), Some(path.clone()));
    let addr = node.local_addr();
    let bearer = [("authorization", "Bearer adm-m")];
    let denied = get(addr, "/metrics");
    assert_eq!(denied.status, 401);
    assert_eq!(denied.error_code(), "unauthorized");
    let scraped = call(addr, "GET", "/metrics", &bearer, b"");
    assert_eq!(scraped.status, 200);
    assert!(
        scraped.text().contains("goad_build_info"),
        "{}",
        scraped.text()
    );
    assert_eq!(get(addr, "/healthz").status, 200, "health stays open");
    c.metrics.needs_admin_token = false;
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    let reload = call(addr, "POST", "/v1/reload", &bearer, b"");
    assert_eq!(
        reload.json()["applied"],
        serde_json::json!(["metrics.needs_admin_token"])
    );
    assert_eq!(get(addr, "/metrics").status, 200);
}

/// Without an admin token, the admin API of a node on loopback is kept
/// from the machine's browser: a web page's simple cross-site `POST` (it
/// carries `Origin`) is refused 403 `browser_request` and does nothing,
/// and a request addressed to a DNS name (one a page rebound to
/// 127.0.0.1) is refused 403 `bad_host`, each counted in the metrics; the
/// node's own addresses, `localhost` and a request without `Host` are
/// served, as are ingest, health and metrics. A node with an admin token
/// does not check either.
#[test]
fn an_admin_api_without_a_token_takes_no_browsers_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.sources.push(source("gh", "t1", vec![]));
    let node = start(c);
    let addr = node.local_addr();
    let port = addr.port().to_string();
    let page = [
        ("origin", "https://evil.example"),
        ("content-type", "text/plain"),
    ];
    let csrf = call(addr, "POST", "/v1/drain", &page, b"");
    assert_eq!(
        (csrf.status, csrf.error_code()),
        (403, "browser_request".to_string())
    );
    assert!(
        csrf.text().contains("Origin: https://evil.example"),
        "{}",
        csrf.text()
    );
    assert_eq!(
        get(addr, "/v1/drain").json()["draining"],
        false,
        "nothing done"
    );
    let rebound = format!("GET /v1/dead-letters HTTP/1.1\r\nhost: evil.example:{port}\r\n\r\n");
    let refused = Client::connect(addr).send_and_reply(rebound.as_bytes());
    assert_eq!(
        (refused.status, refused.error_code()),
        (403, "bad_host".to_string())
    );
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "[::1]".to_string(),
    ] {
        let request = format!("GET /v1/dead-letters HTTP/1.1\r\nhost: {host}\r\n\r\n");
        let served = Client::connect(addr).send_and_reply(request.as_bytes());
        assert_eq!(served.status, 200, "{host}");
    }
    let http_1_0 = Client::connect(addr).send_and_reply(b"GET /v1/stats HTTP/1.0\r\n\r\n");
    assert_eq!(http_1_0.status, 200, "no Host");
    let hook = call(addr, "POST", "/v1/sources/gh/hooks", &page, b"{}");
    assert_eq!(hook.status, 202, "ingest is not the admin API");
    let refused = |reason: &str| {
        let labels = format!("reason=\"{reason}\"");
        metric(addr, "goad_admin_requests_refused_total", &labels)
    };
    assert_eq!(
        (refused("browser_request"), refused("bad_host")),
        (1.0, 1.0)
    );
    for path in ["/healthz", "/metrics"] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: evil.example\r\norigin: https://evil.example\r\n\r\n"
        );
        assert_eq!(
            Client::connect(addr)
                .send_and_reply(request.as_bytes())
                .status,
            200
        );
    }
    node.stop();
    node.wait().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    std::env::set_var("NODE_TEST_BROWSER_ADMIN_TOKEN", "adm-b");
    c.admin_token_env = Some("NODE_TEST_BROWSER_ADMIN_TOKEN".into());
    let node = start(c);
    let with_token = [
        ("origin", "https://dash.example"),
        ("authorization", "Bearer adm-b"),
    ];
    let answer = call(node.local_addr(), "GET", "/v1/drain", &with_token, b"");
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[test]
fn a_node_refuses_a_public_address_without_an_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.listen = "0.0.0.0:0".into();
    let refused = Node::start(NodeOptions::new(c.clone()));
    let message = refused.err().expect("refused").to_string();
    assert!(message.contains("admin_token_env"), "{message}");
    assert!(message.contains("--allow-open-admin"), "{message}");
    let allowed = Node::start(NodeOptions {
        allow_open_admin: true,
        ..NodeOptions::new(c)
    })
    .expect("allowed explicitly");
    allowed.stop();
    allowed.wait().unwrap();
}

/// A malformed request: what it is, its bytes, and the status and error
/// code the node answers it with before it closes the connection.
pub(super) struct Malformed {
    pub what: &'static str,
    pub raw: Vec<u8>,
    pub status: u16,
    pub code: &'static str,
}

/// A malformed request of each kind; those with a route post to `path`
/// (one that takes a POST without credentials), one with a body over
/// `max_body_bytes` among them.
pub(super) fn malformed_requests(path: &str, max_body_bytes: usize) -> Vec<Malformed> {
    let post = |rest: &str| format!("POST {path} HTTP/1.1\r\nhost: localhost\r\n{rest}\r\n");
    let many_headers: String = (0..100).map(|i| format!("x-h{i}: 1\r\n")).collect();
    let huge_header = format!("x-big: {}\r\n", "a".repeat(MAX_HEAD_BYTES));
    let long_target = format!(
        "GET /{} HTTP/1.1\r\nhost: h\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES)
    );
    let cases = [
        (
            "garbage",
            "\x16\x03\x01\x02\x00garbage\r\n\r\n".to_string(),
            400,
            "bad_request",
        ),
        (
            "two credentials",
            post("authorization: Bearer a\r\nauthorization: Bearer b\r\n"),
            400,
            "repeated_header",
        ),
        (
            "no host",
            format!("POST {path} HTTP/1.1\r\n\r\n"),
            400,
            "missing_host",
        ),
        (
            "a bad host",
            format!("POST {path} HTTP/1.1\r\nhost: a b\r\n\r\n"),
            400,
            "bad_host",
        ),
        (
            "bad length",
            post("content-length: ten\r\n"),
            400,
            "bad_content_length",
        ),
        (
            "two lengths",
            post("content-length: 1\r\ncontent-length: 2\r\n") + "ab",
            400,
            "bad_content_length",
        ),
        (
            "chunked with a length",
            post("transfer-encoding: chunked\r\ncontent-length: 3\r\n") + "abc",
            400,
            "bad_framing",
        ),
        (
            "a bad chunk",
            post("transfer-encoding: chunked\r\n") + "3\r\nabcd\r\n0\r\n\r\n",
            400,
            "bad_chunked_body",
        ),
        (
            "another coding",
            post("transfer-encoding: gzip\r\n"),
            501,
            "unsupported_transfer_encoding",
        ),
        (
            "over max_body_bytes",
            post(&format!("content-length: {}\r\n", max_body_bytes + 1)),
            413,
            "body_too_large",
        ),
        ("a huge header", post(&huge_header), 431, "header_too_large"),
        ("many headers", post(&many_headers), 431, "too_many_headers"),
        ("a long target", long_target, 414, "uri_too_long"),
        (
            "HTTP/2",
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_string(),
            505,
            "unsupported_http_version",
        ),
        (
            "a line with no version after its target",
            "GET /readyz HTTP.0\r\n\r\n".to_string(),
            400,
            "bad_request",
        ),
    ];
    (cases.into_iter())
        .map(|(what, raw, status, code)| Malformed {
            what,
            raw: raw.into_bytes(),
            status,
            code,
        })
        .collect()
}

#[test]
fn malformed_requests_get_a_4xx_or_a_closed_connection_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let c = node_config(dir.path());
    let max_body_bytes = c.max_body_bytes as usize;
    let node = start(c);
    let addr = node.local_addr();
    for Malformed {
        what,
        raw,
        status,
        code,
    } in malformed_requests("/v1/reload", max_body_bytes)
    {
        let mut client = Client::connect(addr);
        client.send(&raw);
        let reply = client
            .reply()
            .unwrap_or_else(|| panic!("{what}: no response"));
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (status, code),
            "{what}: {}",
            reply.text()
        );
        assert_eq!(reply.header("connection"), Some("close"), "{what}");
        assert!(client.is_closed(), "{what}: the connection is closed");
        assert_eq!(get(addr, "/healthz").status, 200, "served after {what}");
    }
    // A truncated body: the client gives up mid-body; the node drops it.
    let mut truncated = Client::connect(addr);
    truncated.send(b"POST /v1/reload HTTP/1.1\r\nhost: h\r\ncontent-length: 100\r\n\r\nonly ten b");
    drop(truncated);
    assert_eq!(get(addr, "/healthz").status, 200);
}

/// A node whose read and idle deadlines (120 s) are past a test client's
/// read timeout (30 s): no deadline closes a connection or answers 408
/// while a test reads.
fn node_with_long_deadlines(dir: &std::path::Path) -> Node {
    let mut c = node_config(dir);
    c.http.read_timeout_ms = 120_000;
    c.http.idle_timeout_ms = 120_000;
    start(c)
}

/// A client that sends its request and closes its writing half in one go
/// gets its answer, and the connection is closed at once — not after the
/// idle or read timeout: an answer given on the spot (a 404), one from an
/// admin worker, and a request cut short by the end of the stream (no
/// answer can come). The deadlines are set past the client's read timeout
/// (30 s), so a connection left open fails the test.
#[test]
fn a_client_that_closes_its_half_after_a_request_is_answered_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_with_long_deadlines(dir.path());
    let addr = node.local_addr();
    for (path, status) in [("/nope", Some(404)), ("/v1/stats", Some(200))] {
        let mut client = Client::connect(addr);
        client.send(&raw_request("GET", path, &[], b""));
        client.finish_sending();
        let reply = client.reply().map(|r| r.status);
        assert_eq!(reply, status, "{path}");
        assert!(client.is_closed(), "{path}: closed after its answer");
    }
    let mut cut_short = Client::connect(addr);
    cut_short.send(b"GET /v1/sta");
    cut_short.finish_sending();
    assert!(cut_short.is_closed(), "a request cut short: closed");
    assert_eq!(get(addr, "/healthz").status, 200);
}

/// Writes `request` pipelined over and over, each write from where the
/// last left off, reading nothing, until a write fails (it blocked for
/// 1 s, or the node reset the connection): the bytes written and the
/// error. Fails past 64 MiB: the node took them all unanswered.
fn send_until_refused(stream: &mut std::net::TcpStream, request: &[u8]) -> (usize, std::io::Error) {
    use std::io::Write as _;
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let pipeline = request.repeat(1_000);
    let mut sent_bytes = 0;
    loop {
        assert!(
            sent_bytes < 64 << 20,
            "64 MiB of requests taken while no answer was read"
        );
        let offset = sent_bytes % pipeline.len();
        match stream.write(&pipeline[offset..]) {
            Ok(n) => sent_bytes += n,
            Err(e) => return (sent_bytes, e),
        }
    }
}

/// A client that pipelines requests and reads no answer does not make the
/// node buffer answers without end: the node stops reading it, so its
/// sends block (here before 64 MiB of requests; without the bound the node
/// took 94 MB in 20 s and held the answers in memory). Once it reads, every
/// whole request it sent is answered, in order, and others are served
/// meanwhile. The time it was not read does not count against the read
/// timeout (300 ms here; its send blocks for 1 s): no request gets 408.
#[test]
fn a_client_that_reads_no_answers_is_stopped_then_served_as_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let addr = node.local_addr();
    let request = raw_request("GET", "/healthz", &[], b"");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let (sent_bytes, blocked) = send_until_refused(&mut stream, &request);
    assert!(
        matches!(
            blocked.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{blocked}"
    );
    assert_eq!(get(addr, "/healthz").status, 200, "others are served");
    let mut client = Client::from_stream(stream);
    let whole_requests = sent_bytes / request.len();
    for n in 0..whole_requests {
        let reply = client.reply().unwrap_or_else(|| panic!("answer {n}"));
        assert_eq!(reply.status, 200, "answer {n}");
    }
}

/// A client that takes none of its answers for `http.idle_timeout_ms` (1 s
/// here) is closed: stopped from sending more, it would otherwise hold a
/// connection and its answers as long as it liked. The node closes with
/// the client's requests unread, so the client sees a reset.
#[test]
fn a_client_that_takes_no_answers_is_closed_after_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.http.idle_timeout_ms = 1_000;
    let node = start(c);
    let mut stream = std::net::TcpStream::connect(node.local_addr()).unwrap();
    let request = raw_request("GET", "/healthz", &[], b"");
    // Its sends block, or fail if the node has reset it already.
    let (_, mut error) = send_until_refused(&mut stream, &request);
    // The answers it has not read stay readable after the reset: its
    // pending error tells without reading them.
    wait_until(
        "the node resets the connection",
        Duration::from_secs(30),
        || {
            if let Some(pending) = stream.take_error().unwrap() {
                error = pending;
            }
            matches!(
                error.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )
        },
    );
}

#[test]
fn a_slow_client_gets_408_and_is_closed_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let addr = node.local_addr();
    let started = Instant::now();
    let mut slow = Client::connect(addr);
    slow.send(b"GET /healthz HTTP/1.1\r\nhost: h\r\nx-slow: ");
    // Meanwhile another client is served at once.
    assert_eq!(get(addr, "/healthz").status, 200);
    let reply = slow.reply().expect("a 408");
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (408, "request_timeout")
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(slow.is_closed());
    assert_eq!(metric(addr, "goad_http_request_timeouts_total", ""), 1.0);
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let mut client = Client::connect(node.local_addr());
    assert_eq!(client.request("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(client.request("GET", "/readyz", &[], b"").status, 200);
    let mut both = raw_request("GET", "/v1/pressure", &[], b"");
    both.extend(raw_request("GET", "/nope", &[], b""));
    client.send(&both);
    let first = client.reply().unwrap();
    let second = client.reply().unwrap();
    assert_eq!((first.status, second.status), (200, 404));
    assert!(first.json().get("lag_ms").is_some());
    // HTTP/1.2, which no one has defined, is served as HTTP/1.1 (RFC
    // 9110 §2.5): answered, and the connection kept for the next.
    client.send(b"GET /healthz HTTP/1.2\r\nhost: h\r\n\r\n");
    assert_eq!(client.reply().unwrap().status, 200);
    // Connection: close is honoured.
    let closing = client.request("GET", "/healthz", &[("connection", "close")], b"");
    assert_eq!(closing.header("connection"), Some("close"));
    assert!(client.is_closed());
}

/// A `HEAD` is answered as its `GET` is, without the body: its
/// `content-length` is the `GET`'s, and the next answer on the connection
/// follows its head at once (a body there would be read as the next
/// answer's start, as it was when `HEAD` got a 405 with a body), whether
/// the loop answers it (`/healthz`) or a worker does (`/metrics`).
#[test]
fn a_head_request_is_answered_as_its_get_without_the_body() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let node = start(node_config(dir.path()));
    let addr = node.local_addr();
    let healthz = get(addr, "/healthz");
    for path in ["/healthz", "/metrics"] {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let head = format!("HEAD {path} HTTP/1.1\r\nhost: localhost\r\n\r\n");
        let then = "GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
        stream
            .write_all(format!("{head}{then}").as_bytes())
            .unwrap();
        let mut answers = Vec::new();
        stream.read_to_end(&mut answers).unwrap();
        let answers = String::from_utf8(answers).unwrap();
        let (head, rest) = answers.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(length > 0, "{path}: the GET's length");
        if path == "/healthz" {
            assert_eq!(length, healthz.body.len());
        }
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {rest}");
        assert!(rest.ends_with(r#"{"status":"ok"}"#), "{path}: {rest}");
    }
    let post = call(addr, "POST", "/healthz", &[], b"");
    assert_eq!(
        (post.status, post.header("allow")),
        (405, Some("GET, HEAD"))
    );
}

#[test]
fn connections_over_the_cap_get_503() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    c.http.max_connections = 2;
    let node = start(c);
    let addr = node.local_addr();
    let mut held: Vec<Client> = (0..2).map(|_| Client::connect(addr)).collect();
    for client in &mut held {
        assert_eq!(client.request("GET", "/healthz", &[], b"").status, 200);
    }
    let mut third = Client::connect(addr);
    let refused = third.reply().expect("a 503");
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "too_many_connections")
    );
    assert!(third.is_closed(), "the node's half closed");
    drop(third);
    // Scraped over a held connection (a new one would be refused).
    let mut scrape = || parse_prometheus(&held[0].request("GET", "/metrics", &[], b"").text());
    let mut samples = scrape();
    wait_until(
        "the refused connection closed",
        Duration::from_secs(10),
        || {
            samples = scrape();
            samples
                .iter()
                .any(|(n, _, v)| n == "goad_http_connections" && *v == 2.0)
        },
    );
    let value = |name: &str, labels: &str| {
        let found = samples.iter().find(|(n, l, _)| n == name && l == labels);
        found.map(|(_, _, v)| *v)
    };
    assert_eq!(value("goad_http_connections_total", ""), Some(2.0));
    let refused = "goad_http_connections_refused_total";
    assert_eq!(value(refused, r#"reason="max_connections""#), Some(1.0));
    assert_eq!(value(refused, r#"reason="file_descriptors""#), Some(0.0));
    drop(held);
    wait_until("a connection slot frees", Duration::from_secs(10), || {
        let mut c = Client::connect(addr);
        c.send(&raw_request("GET", "/healthz", &[], b""));
        c.reply().is_some_and(|r| r.status == 200)
    });
}

/// A node whose `http.max_buffered_bytes` holds one largest request (256
/// KiB bodies and a 16 KiB head), with source `a` posting to `receiver`;
/// `request`, a 200 KiB hook to it, of which `first` sent the head and
/// the body up to `head_and_some` (10 KiB): it holds the room.
struct RoomTaken {
    _dir: tempfile::TempDir,
    receiver: Receiver,
    _node: Node,
    addr: SocketAddr,
    request: Vec<u8>,
    head_and_some: usize,
    first: Client,
}

fn room_taken(read_timeout_ms: u64) -> RoomTaken {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = one_source(dir.path(), &receiver);
    c.max_body_bytes = 256 * 1024;
    c.http.max_buffered_bytes = (256 + 16) * 1024;
    c.http.read_timeout_ms = read_timeout_ms;
    let node = start(c);
    let addr = node.local_addr();
    let request = raw_request("POST", "/v1/sources/a/hooks", &[], &[b'x'; 200 * 1024]);
    let head_and_some = request.len() - 190 * 1024;
    let mut first = Client::connect(addr);
    first.send(&request[..head_and_some]);
    wait_for_buffered_bytes(addr, request.len());
    RoomTaken {
        _dir: dir,
        receiver,
        _node: node,
        addr,
        request,
        head_and_some,
        first,
    }
}

/// Waits until `goad_http_buffered_bytes` is `bytes`.
fn wait_for_buffered_bytes(addr: SocketAddr, bytes: usize) {
    wait_until(
        &format!("{bytes} request bytes held"),
        Duration::from_secs(10),
        || metric(addr, "goad_http_buffered_bytes", "") == bytes as f64,
    );
}

/// Waits until `goad_http_buffer_waits_total` is `waits`.
fn wait_for_buffer_waits(addr: SocketAddr, waits: u64) {
    wait_until(
        &format!("{waits} requests waited for room"),
        Duration::from_secs(10),
        || metric(addr, "goad_http_buffer_waits_total", "") == waits as f64,
    );
}

/// A request larger than a head takes its size from
/// `http.max_buffered_bytes` before its body is read: one that finds too
/// little room waits unread, and goes on once the one ahead of it is
/// answered; a request no larger than a head is not held up meanwhile. A
/// client that waits for `100 Continue` is told to send its body once it
/// has its room: when the room is taken, not before. One that hangs up
/// gives its room back. Every hook is delivered.
#[test]
fn a_request_past_max_buffered_bytes_waits_unread_until_the_one_ahead_is_answered() {
    let mut room = room_taken(120_000);
    let mut second = Client::connect(room.addr);
    second.send(&room.request);
    wait_for_buffer_waits(room.addr, 1);
    let request_line = b"POST /v1/sources/a/hooks HTTP/1.1\r\n".len();
    let body_at = room.request.len() - 200 * 1024;
    let expecting = |client: &mut Client| {
        client.send(&room.request[..request_line]);
        client.send(b"expect: 100-continue\r\n");
        client.send(&room.request[request_line..body_at]);
    };
    let mut third = Client::connect(room.addr);
    expecting(&mut third);
    wait_for_buffer_waits(room.addr, 2);
    assert_eq!(ingest(room.addr, "a", b"small", &[]).status, 202);
    assert_eq!(
        metric(room.addr, "goad_http_buffered_bytes", ""),
        room.request.len() as f64,
        "the waiting requests hold no room"
    );
    assert!(
        !third.answers_within(Duration::from_millis(500)),
        "no 100 Continue before its room"
    );
    room.first.send(&room.request[room.head_and_some..]);
    assert_eq!(room.first.reply().expect("an answer").status, 202);
    assert_eq!(second.reply().expect("an answer").status, 202);
    assert_eq!(third.reply().expect("100 Continue").status, 100);
    third.send(&room.request[body_at..]);
    assert_eq!(third.reply().expect("an answer").status, 202);
    // With room to spare, `100 Continue` comes at once.
    let mut fourth = Client::connect(room.addr);
    expecting(&mut fourth);
    assert_eq!(fourth.reply().expect("100 Continue").status, 100);
    fourth.send(&room.request[body_at..]);
    assert_eq!(fourth.reply().expect("an answer").status, 202);
    wait_for_buffered_bytes(room.addr, 0);
    // A client that hangs up mid-body gives its room back at once (the
    // read timeout is two minutes here).
    let mut leaving = Client::connect(room.addr);
    leaving.send(&room.request[..room.head_and_some]);
    wait_for_buffered_bytes(room.addr, room.request.len());
    drop(leaving);
    wait_for_buffered_bytes(room.addr, 0);
    assert_eq!(metric(room.addr, "goad_http_buffer_waits_total", ""), 2.0);
    assert!(
        room.receiver.wait_for(5, Duration::from_secs(10)),
        "5 hooks delivered"
    );
}

/// A request holding the room that stalls gets 408 after
/// `http.read_timeout_ms` (1 s here) and gives its room to the next; a
/// request's read timeout runs from its turn, not while it waits: the
/// second, stalled too, gets its 408 a timeout after the first's, and the
/// third, waiting behind both for two timeouts, is served.
#[test]
fn a_stalled_request_holding_the_room_times_out_and_the_waiting_ones_time_out_from_their_turn() {
    let mut room = room_taken(1_000);
    let mut second = Client::connect(room.addr);
    second.send(&room.request[..room.head_and_some]);
    wait_for_buffer_waits(room.addr, 1);
    let mut third = Client::connect(room.addr);
    third.send(&room.request);
    wait_for_buffer_waits(room.addr, 2);
    let reply = room.first.reply().expect("a 408");
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (408, "request_timeout")
    );
    let first_timed_out = Instant::now();
    let reply = second.reply().unwrap_or_else(|| {
        panic!(
            "the second's connection ended without an answer; the node has answered {} 408s and holds {} connections",
            metric(room.addr, "goad_http_request_timeouts_total", ""),
            metric(room.addr, "goad_http_connections", "")
        )
    });
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (408, "request_timeout")
    );
    assert!(
        first_timed_out.elapsed() >= Duration::from_millis(500),
        "the second's timeout ran from its turn: {:?} after the room.first's",
        first_timed_out.elapsed()
    );
    assert_eq!(third.reply().expect("an answer").status, 202);
    wait_for_buffered_bytes(room.addr, 0);
    assert_eq!(
        metric(room.addr, "goad_http_request_timeouts_total", ""),
        2.0
    );
    assert!(
        room.receiver.wait_for(1, Duration::from_secs(10)),
        "the hook delivered"
    );
}

/// A node taking bodies of 64 KiB at most, for source `a` (whose sink
/// no hook reaches: the tests' hooks are all too large).
fn node_taking_64_kib(dir: &std::path::Path, max_connections: usize) -> Node {
    let mut c = node_config(dir);
    c.sources.push(source(
        "a",
        "t1",
        vec![SinkConfig::http("http://127.0.0.1:9/")],
    ));
    c.max_body_bytes = 64 * 1024;
    c.http.max_connections = max_connections;
    start(c)
}

/// A connection on which a hook's head says `body_bytes` follow (past
/// the node's 64 KiB) and its client's sends go unread: answered 413.
fn too_large(addr: SocketAddr, body_bytes: usize) -> (std::net::TcpStream, Client) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/sources/a/hooks HTTP/1.1\r\nhost: localhost\r\ncontent-length: {body_bytes}\r\n\r\n"
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).unwrap();
    let reader = Client::from_stream(stream.try_clone().unwrap());
    (stream, reader)
}

/// A hook of 8 MiB (more than loopback's socket buffers hold unread, and
/// past the node's 64 KiB) sent whole before its answer is read, as
/// Python's `http.client` sends: the answer's status and error code, the
/// node's half closed after it.
fn sent_whole_then_answered(addr: SocketAddr) -> (u16, String) {
    let body = vec![b'x'; 8 << 20];
    let (mut stream, mut reader) = too_large(addr, body.len());
    std::io::Write::write_all(&mut stream, &body).expect("the whole request is taken");
    let answer = reader
        .reply()
        .expect("the answer is read after the request");
    assert!(reader.is_closed(), "the node's half is closed");
    (answer.status, answer.error_code())
}

/// A client that sends a body over `max_body_bytes` whole before it
/// reads (as Python's `http.client` does) gets its 413: the node reads
/// and drops the rest of the body before it closes, rather than reset
/// the connection under the client's send (which then fails and never
/// reads the answer). A client that goes on sending past `LINGER_BYTES`
/// is reset, and one that neither sends nor closes is let go.
#[test]
fn a_body_past_max_body_bytes_can_be_sent_whole_and_its_413_read() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_taking_64_kib(dir.path(), 16);
    let addr = node.local_addr();
    assert_eq!(
        sent_whole_then_answered(addr),
        (413, "body_too_large".into())
    );

    let endless = 4 * goad::limits::LINGER_BYTES;
    let (mut stream, _) = too_large(addr, endless);
    let sent = std::io::Write::write_all(&mut stream, &vec![b'x'; endless]);
    assert!(sent.is_err(), "reset once LINGER_BYTES are dropped");

    let (_held, mut reader) = too_large(addr, 400 * 1024);
    assert_eq!(reader.reply().expect("a 413").status, 413);
    assert!(reader.is_closed(), "the node's half is closed");
    wait_until(
        "the connection that neither sends nor closes is let go",
        Duration::from_secs(10),
        || metric(addr, "goad_http_connections", "") == 1.0,
    );
}

/// A client refused at `http.max_connections` that sends its request
/// whole before it reads (a body larger than the sockets' buffers) reads
/// its 503: the refused connection is closed in stages as after any last
/// answer, not reset under the client's send.
#[test]
fn a_client_refused_at_the_cap_reads_its_503_after_sending_its_request_whole() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_taking_64_kib(dir.path(), 1);
    let addr = node.local_addr();
    let mut held = Client::connect(addr);
    assert_eq!(held.request("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(
        sent_whole_then_answered(addr),
        (503, "too_many_connections".into())
    );
    assert_eq!(held.request("GET", "/healthz", &[], b"").status, 200);
}

/// At `http.max_connections`, a connection that the node is closing (its
/// last answer written, its client not closed yet) gives its place to a
/// new one.
#[test]
fn a_closing_connection_gives_its_place_to_a_new_one_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_taking_64_kib(dir.path(), 2);
    let addr = node.local_addr();
    let mut kept = Client::connect(addr);
    assert_eq!(kept.request("GET", "/healthz", &[], b"").status, 200);
    let (_held, mut closing) = too_large(addr, 400 * 1024);
    assert_eq!(closing.reply().expect("a 413").status, 413);
    let mut new = Client::connect(addr);
    let served = new.request("GET", "/healthz", &[], b"");
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(kept.request("GET", "/healthz", &[], b"").status, 200);
}

/// A request whose head alone refuses it — no route, an admin route
/// without the admin token, an ingest without its source's token or to
/// a source not configured — is answered from its head: its body is not
/// read, takes no room in the read budget (here all of it is held by
/// another request, which would make it wait), and a client waiting for
/// `100 Continue` gets the refusal instead. The connection closes; the
/// refused ingests are counted as ingest answers. A request whose body is
/// over `max_body_bytes` gets its head's refusal too, before the 413 (a
/// client would otherwise send less, only to be refused again).
#[test]
fn a_request_its_head_refuses_is_answered_before_its_body_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    std::env::set_var("NODE_TEST_SCREEN_ADMIN_TOKEN", "adm-s");
    c.admin_token_env = Some("NODE_TEST_SCREEN_ADMIN_TOKEN".into());
    std::env::set_var("NODE_TEST_SCREEN_INGEST_TOKEN", "tok-s");
    let mut s = source("a", "t1", vec![SinkConfig::http(receiver.url("/a"))]);
    s.ingest_token_env = Some("NODE_TEST_SCREEN_INGEST_TOKEN".into());
    c.sources.push(s);
    c.max_body_bytes = 256 * 1024;
    c.http.max_buffered_bytes = (256 + 16) * 1024;
    c.http.read_timeout_ms = 120_000;
    let node = start(c);
    let addr = node.local_addr();
    let body = vec![b'x'; 200 * 1024];
    let with_token = [("authorization", "Bearer tok-s")];
    let holding = raw_request("POST", "/v1/sources/a/hooks", &with_token, &body);
    let mut holder = Client::connect(addr);
    holder.send(&holding[..holding.len() - 100 * 1024]);
    wait_for_buffered_bytes(addr, holding.len());

    let over = vec![b'x'; 300 * 1024];
    let cases = [
        ("/v1/sources/a/hooks", "", &body, 401, "unauthorized"),
        (
            "/v1/sources/a/hooks",
            "Bearer wrong",
            &body,
            401,
            "unauthorized",
        ),
        (
            "/v1/sources/nope/hooks",
            "Bearer tok-s",
            &body,
            404,
            "unknown_source",
        ),
        ("/v1/replays", "Bearer tok-s", &body, 401, "unauthorized"),
        ("/v1/nothing-here", "", &body, 404, "not_found"),
        (
            "/v1/sources/nope/hooks",
            "Bearer tok-s",
            &over,
            404,
            "unknown_source",
        ),
        ("/v1/sources/a/hooks", "", &over, 401, "unauthorized"),
        (
            "/v1/sources/a/hooks",
            "Bearer tok-s",
            &over,
            413,
            "body_too_large",
        ),
    ];
    for (path, authorization, body, status, code) in cases {
        let mut headers = vec![("expect", "100-continue")];
        if !authorization.is_empty() {
            headers.push(("authorization", authorization));
        }
        let request = raw_request("POST", path, &headers, body);
        let mut client = Client::connect(addr);
        client.send(&request[..request.len() - body.len()]);
        let refused = client.reply().expect("an answer without the body");
        assert_eq!(
            (refused.status, refused.error_code().as_str()),
            (status, code),
            "{path} {authorization:?}"
        );
        assert_eq!(refused.header("connection"), Some("close"));
        assert!(client.is_closed(), "{path}: closed");
    }
    assert_eq!(metric(addr, "goad_http_buffer_waits_total", ""), 0.0);
    let refused_ingests = |labels: &str| metric(addr, "goad_ingest_requests_total", labels);
    assert_eq!(refused_ingests(r#"source="a",status="401""#), 3.0);
    assert_eq!(
        refused_ingests(r#"status="404",error="unknown_source""#),
        2.0
    );

    holder.send(&holding[holding.len() - 100 * 1024..]);
    assert_eq!(holder.reply().expect("the held hook's answer").status, 202);
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    assert_eq!(
        receiver.count(),
        1,
        "only the hook with its token delivered"
    );
}
