//! The receiver's answer mapped to the row's state: delivered, permanent,
//! retry after, transient (reference scenarios 60 and 61 among them).

use super::*;

/// The status mapping over real HTTP (scenarios 60 and 61 among them: a
/// 503 without `Retry-After`, a 302 not followed): the row's state after
/// one attempt.
/// A failure's error quotes the start of the answer's body, where a
/// receiver says why (its first 256 bytes, whitespace runs as one space,
/// "…" where cut), and a redirect where it points.
#[test]
fn statuses_map_to_delivered_permanent_retry_after_or_transient() {
    let html = format!("<html>\n<body>{}", "x".repeat(1_000));
    let html_quoted = format!("HTTP status 503: <html> <body>{}…", "x".repeat(243));
    let cases: &[(Reply, RowStatus, Option<&str>)] = &[
        (Reply::status(204), RowStatus::Pending, None),
        (
            Reply::status(200).with_body("x".repeat(100_000)),
            RowStatus::Pending,
            None,
        ),
        (
            Reply::status(400).with_body("{\n  \"error\": \"unknown event type\"\n}\n"),
            RowStatus::Dead,
            Some("sink http: permanent: HTTP status 400: { \"error\": \"unknown event type\" }"),
        ),
        (
            Reply::status(503).with_body(html.clone()),
            RowStatus::Pending,
            Some(&html_quoted),
        ),
        (
            Reply::status(410),
            RowStatus::Dead,
            Some("sink http: permanent: HTTP status 410"),
        ),
        (
            Reply::status(422),
            RowStatus::Dead,
            Some("sink http: permanent: HTTP status 422"),
        ),
        (
            Reply::status(429).header("retry-after", "30"),
            RowStatus::Pending,
            Some("retry after 30000 ms: HTTP status 429"),
        ),
        // A wait over an hour is an hour, and its error says so, not the
        // ask (here more seconds than a u64 holds).
        (
            Reply::status(503).header("retry-after", "99999999999999999999"),
            RowStatus::Pending,
            Some("retry after 3600000 ms (an hour at most; it asked for longer): HTTP status 503"),
        ),
        (
            Reply::status(503),
            RowStatus::Pending,
            Some("HTTP status 503"),
        ),
        (
            Reply::status(302).header("location", "/elsewhere"),
            RowStatus::Pending,
            Some("HTTP status 302 redirecting to /elsewhere (redirects are not followed: set the sink's url to where it should deliver)"),
        ),
        // A receiver that sends plain HTTP to HTTPS: the error says where
        // (the query left out: it may hold a key).
        (
            Reply::status(301)
                .header("location", "https://hooks.example/stripe?key=s3cret")
                .with_body("Moved"),
            RowStatus::Pending,
            Some("HTTP status 301 redirecting to https://hooks.example/stripe (redirects are not followed: set the sink's url to where it should deliver): Moved"),
        ),
    ];
    for (reply, status, error) in cases {
        let (got, engine, _d) = deliver(NewHook::new("stripe", "x"), reply.clone(), |_| {});
        let code = reply.status;
        assert_eq!(
            got.len(),
            1,
            "{code}: exactly one request (redirects are not followed)"
        );
        let rows = rows(&engine);
        if (200..300).contains(&code) {
            assert!(rows.is_empty(), "{code}: delivered rows are deleted");
            continue;
        }
        assert_eq!(
            (rows[0].record.status, rows[0].record.attempts),
            (*status, 1),
            "{code}"
        );
        assert_eq!(rows[0].record.error.as_deref(), *error, "{code}");
    }
}

/// A connection refused is a transient failure with the transport's error.
#[test]
fn an_unreachable_endpoint_is_a_transient_failure() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    c.sources.push(source(
        "s",
        "t",
        vec![SinkConfig::http(format!("http://127.0.0.1:{port}/"))],
    ));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick_within(Duration::from_secs(10)).unwrap();
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0]
            .record
            .error
            .as_deref()
            .unwrap()
            .starts_with("sink http: "),
        "{:?}",
        dead[0].record.error
    );
}

/// A receiver that answers with a head longer than
/// `HTTP_MAX_RESPONSE_HEAD_BYTES` (16 KiB) has not answered: the attempt
/// fails as transient, saying so.
#[test]
fn a_response_head_over_16_kib_fails_the_attempt() {
    let reply = Reply::status(200).header("x-big", &"b".repeat(20_000));
    let (got, engine, _d) = deliver(NewHook::new("stripe", "x"), reply, |_| {});
    assert_eq!(got.len(), 1, "the request was sent");
    let rows = rows(&engine);
    assert_eq!(
        (rows.len(), rows[0].record.status, rows[0].record.attempts),
        (1, RowStatus::Pending, 1)
    );
    let error = rows[0].record.error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("response header is too big: ") && error.ends_with(" > 16384"),
        "{error}"
    );
}

/// An informational answer (`103 Early Hints`, an unasked `100 Continue`)
/// before the final one is not the answer: the final status decides, and
/// the connection serves the next attempt.
#[test]
fn an_informational_answer_before_the_final_one_is_passed_over() {
    use common::raw::read_request;
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    let (tell, connections) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            tell.send(()).unwrap();
            std::thread::spawn(move || {
                let informational = [
                    "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n",
                    "HTTP/1.1 100 Continue\r\n\r\n",
                ];
                let finals = ["503 Service Unavailable", "204 No Content"];
                for (informational, last) in informational.iter().zip(finals) {
                    if read_request(&mut stream).is_none() {
                        return;
                    }
                    let answer =
                        format!("{informational}HTTP/1.1 {last}\r\ncontent-length: 0\r\n\r\n");
                    stream.write_all(answer.as_bytes()).unwrap();
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    c.retry.jitter = false;
    c.sources
        .push(source("s", "acme", vec![SinkConfig::http(url)]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    wait_until(
        "delivered at the second attempt",
        Duration::from_secs(10),
        || {
            engine.tick().unwrap();
            rows(&engine).is_empty()
        },
    );
    let core: Vec<_> = engine.stats().into_iter().map(|s| s.core).collect();
    let (delivered, retried) = core
        .iter()
        .fold((0, 0), |(d, r), c| (d + c.delivered, r + c.retried));
    assert_eq!((delivered, retried), (1, 1), "503 retried, then 204");
    assert_eq!(connections.try_iter().count(), 1, "one connection for both");
}
