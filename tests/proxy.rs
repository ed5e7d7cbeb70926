//! Outbound requests and an egress proxy: goad's HTTP clients take the
//! proxy of the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//! skipping the hosts of `NO_PROXY`), as curl reads them. A test binary
//! of its own: the variables hold for the whole process, so each test sets
//! them through [`proxy_environment`] and holds its lock while it runs.

mod common;

use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Engine, NewHook, SinkConfig};
use std::io::{Read, Write};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The proxy variables of the environment set to `vars` and no others,
/// for as long as the lock returned is held (one test at a time).
fn proxy_environment(vars: &[(&str, &str)]) -> MutexGuard<'static, ()> {
    static ENVIRONMENT: Mutex<()> = Mutex::new(());
    let held = ENVIRONMENT.lock().unwrap_or_else(|e| e.into_inner());
    for var in ["ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"] {
        std::env::remove_var(var);
        std::env::remove_var(var.to_lowercase());
    }
    for (var, value) in vars {
        std::env::set_var(var, value);
    }
    held
}

/// A sink whose host is not in `NO_PROXY` is delivered through the proxy:
/// ureq asks it for a tunnel (`CONNECT host:port`, for http:// URLs too),
/// then sends the request through it (this stand-in answers the CONNECT
/// with 200 and then the tunnelled request itself). A sink whose host is
/// in `NO_PROXY` is delivered directly.
#[test]
fn an_http_sink_delivers_through_the_environments_proxy_unless_no_proxy_names_its_host() {
    let proxy = Receiver::start(|_| Reply::status(200)).unwrap();
    let direct = Receiver::start(|_| Reply::status(200)).unwrap();
    let _environment =
        proxy_environment(&[("HTTP_PROXY", &proxy.url("")), ("NO_PROXY", "127.0.0.1")]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let sinks = vec![
        SinkConfig::http("http://hooks.example.invalid/a"),
        SinkConfig::http(direct.url("/b")),
    ];
    c.sources.push(source("stripe", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "via proxy")).unwrap();
    engine.tick().unwrap();
    let proxied = proxy.received();
    assert_eq!(proxied.len(), 2);
    assert_eq!(
        (proxied[0].method.as_str(), proxied[0].path.as_str()),
        ("CONNECT", "hooks.example.invalid:80")
    );
    assert_eq!(
        (proxied[1].method.as_str(), proxied[1].path.as_str()),
        ("POST", "/a")
    );
    assert_eq!(proxied[1].header("host"), Some("hooks.example.invalid"));
    assert_eq!(proxied[1].body, b"via proxy");
    let direct_received = direct.received();
    assert_eq!(direct_received.len(), 1);
    assert_eq!(direct_received[0].path, "/b");

    // With egress.deny_private_addresses the proxy, though on loopback, is
    // still used (it resolves and connects the proxied host, under its own
    // policy); the host NO_PROXY names is resolved here, and refused.
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.egress.deny_private_addresses = true;
    let sinks = vec![
        SinkConfig::http("http://hooks.example.invalid/c"),
        SinkConfig::http(direct.url("/d")),
    ];
    c.sources.push(source("stripe", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "guarded")).unwrap();
    engine.tick().unwrap();
    let proxied = proxy.received();
    assert_eq!(proxied.len(), 4);
    assert_eq!(proxied[3].path, "/c");
    assert_eq!(
        direct.received().len(),
        1,
        "nothing more reached the direct host"
    );
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].row.sink_index, 1);
}

/// A tunnel the proxy does not open fails the attempt saying that the
/// proxy refused it, with what its answer most often means: 407 (it wants
/// credentials), 403 (its policy), 502 (it could not reach the receiver),
/// or no answer at all.
#[test]
fn a_tunnel_the_proxy_refuses_fails_the_attempt_naming_the_proxy() {
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", proxy.local_addr().unwrap());
    let _environment = proxy_environment(&[("HTTP_PROXY", &url)]);
    // Answers each CONNECT by the port asked for.
    std::thread::spawn(move || {
        for stream in proxy.incoming() {
            let mut stream = stream.unwrap();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let port = head.split([' ', ':']).nth(2).unwrap_or_default();
                let answer: &[u8] = match port {
                    "1407" => b"HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm=\"egress\"\r\ncontent-length: 0\r\n\r\n",
                    "1403" => b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n",
                    "1502" => b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n",
                    _ => b"",
                };
                let _ = stream.write_all(answer);
                let _ = stream.shutdown(std::net::Shutdown::Write);
                let _ = std::io::copy(&mut stream, &mut std::io::sink());
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    let sinks = ["1407", "1403", "1502", "1000"]
        .map(|port| SinkConfig::http(format!("http://hooks.example.invalid:{port}/")));
    c.sources.push(source("stripe", "acme", sinks.to_vec()));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "refused")).unwrap();
    wait_until("every row dead", Duration::from_secs(20), || {
        dead(&engine).len() == 4
    });
    let mut reasons: Vec<_> = dead(&engine)
        .into_iter()
        .map(|r| (r.row.sink_index, r.record.error.unwrap_or_default()))
        .collect();
    reasons.sort();
    let refused = "sink http: the egress proxy opened no tunnel to the receiver";
    assert_eq!(
        reasons,
        [
            (0, format!("{refused} (HTTP 407: it wants credentials, or others than those given: they go in its URL, as HTTPS_PROXY=http://user:password@proxy:3128)")),
            (1, format!("{refused} (HTTP 403: its policy refuses the receiver's host or port)")),
            (2, format!("{refused} (HTTP 502: it could not reach the receiver)")),
            (3, format!("{refused} (it ended the connection without answering)")),
        ]
    );
}

/// Delivers one hook to two sinks, `http://plain.example.invalid/a` and
/// `https://tls.example.invalid/b`, in one attempt each, with the proxy
/// variables `vars`: each sink's dead row's reason, none where the
/// attempt delivered.
fn one_attempt_for_each_scheme(vars: &[(&str, &str)]) -> [Option<String>; 2] {
    let _environment = proxy_environment(vars);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    // Each phase of a request bounded by 2 s: a proxy that never answers
    // fails the attempt then.
    let sink = |url| SinkConfig {
        timeout_ms: Some(2_000),
        ..SinkConfig::http(url)
    };
    let sinks = vec![
        sink("http://plain.example.invalid/a"),
        sink("https://tls.example.invalid/b"),
    ];
    c.sources.push(source("stripe", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    wait_until(
        "each row delivered or dead",
        Duration::from_secs(20),
        || {
            let rows = rows(&engine);
            rows.iter()
                .all(|r| r.record.status == goad::RowStatus::Dead)
        },
    );
    let dead = dead(&engine);
    [0, 1].map(|sink_index| {
        let row = dead.iter().find(|r| r.row.sink_index == sink_index);
        row.map(|r| r.record.error.clone().unwrap_or_default())
    })
}

/// A proxy that cannot be reached fails the attempt naming it and the
/// variable that names it, where the system's words alone (`Connection
/// refused`, `timeout: connect`) would read as the receiver's: one that
/// refuses the connection, one whose host does not resolve, and one that
/// never answers.
#[test]
fn a_proxy_that_cannot_be_reached_is_named() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("http://127.0.0.1:{port}");
    let unresolved = "socks5h://proxy.example.invalid:1080";
    let [plain, tls] =
        one_attempt_for_each_scheme(&[("HTTP_PROXY", &refused), ("all_proxy", unresolved)]);
    assert_eq!(
        plain.expect("dead"),
        format!(
            "sink http: the egress proxy 127.0.0.1:{port} (HTTP_PROXY) could not be reached: \
             Connection refused (os error 111)"
        )
    );
    let tls = tls.expect("dead");
    let unresolved = "sink http: the egress proxy proxy.example.invalid:1080 (all_proxy) could \
                      not be reached: failed to lookup address information";
    assert!(tls.starts_with(unresolved), "{tls}");

    // One that takes the connection and never answers its CONNECT.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = silent.local_addr().unwrap();
    let [_, tls] = one_attempt_for_each_scheme(&[("HTTPS_PROXY", &format!("http://{at}"))]);
    assert_eq!(
        tls.expect("dead"),
        format!(
            "sink http: the egress proxy {at} (HTTPS_PROXY) made no connection in time (timeout: \
             connect): it does not answer, or cannot reach the receiver"
        )
    );
}

/// A SOCKS proxy the environment names (`socks5h://`: the proxy resolves
/// the receiver's name) carries the sink's requests: this stand-in reads
/// the SOCKS 5 handshake, records the host and port asked for, and
/// relays the connection to a loopback receiver.
#[test]
fn an_http_sink_delivers_through_a_socks_proxy() {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let relayed_to = receiver.url("").replace("http://", "");
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("socks5h://{}", proxy.local_addr().unwrap());
    let _environment = proxy_environment(&[("ALL_PROXY", &url)]);
    let (asked, asked_for) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for client in proxy.incoming() {
            let mut client = client.unwrap();
            let (host, port) = socks5_request(&mut client);
            asked.send(format!("{host}:{port}")).unwrap();
            let mut receiver = std::net::TcpStream::connect(&relayed_to).unwrap();
            // Succeeded, bound to 0.0.0.0:0.
            client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
            let mut back = (receiver.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut back.0, &mut back.1));
            std::thread::spawn(move || std::io::copy(&mut client, &mut receiver));
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let sink = SinkConfig::http("http://hooks.example.invalid:8080/socks");
    c.sources.push(source("stripe", "acme", vec![sink]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "via socks")).unwrap();
    engine.tick().unwrap();
    assert_eq!(
        asked_for.try_iter().collect::<Vec<_>>(),
        ["hooks.example.invalid:8080"]
    );
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        (received[0].path.as_str(), received[0].body.as_slice()),
        ("/socks", &b"via socks"[..])
    );
}

/// The host and port of a SOCKS 5 client's CONNECT by domain name, its
/// greeting answered with "no authentication".
fn socks5_request(client: &mut std::net::TcpStream) -> (String, u16) {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).unwrap();
    let mut methods = vec![0u8; greeting[1] as usize];
    client.read_exact(&mut methods).unwrap();
    client.write_all(&[5, 0]).unwrap();
    let mut request = [0u8; 5];
    client.read_exact(&mut request).unwrap();
    assert_eq!(request[..4], [5, 1, 0, 3], "CONNECT to a domain name");
    let mut host = vec![0u8; request[4] as usize];
    client.read_exact(&mut host).unwrap();
    let mut port = [0u8; 2];
    client.read_exact(&mut port).unwrap();
    (String::from_utf8(host).unwrap(), u16::from_be_bytes(port))
}

/// A proxy variable that names no proxy goad's clients can use is a
/// config error naming the variable, not passed over for a direct
/// connection (or the next variable's proxy); a value that may hold a
/// password is not shown. An empty one names no proxy, and one after the
/// proxy in use is never read.
#[test]
fn a_proxy_variable_no_client_can_use_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source(
        "stripe",
        "acme",
        vec![SinkConfig::http("http://hooks.example.invalid/")],
    ));
    let rule = "a proxy's URL, as http://HOST:PORT or socks5h://HOST:PORT (or https, socks5, \
                socks4a, socks4; user:password@ before the host for credentials)";
    for (var, value, shown) in [
        (
            "ALL_PROXY",
            "proxy.example:3128 x",
            "\"proxy.example:3128 x\"",
        ),
        (
            "https_proxy",
            "ftp://proxy.example:21",
            "\"ftp://proxy.example:21\"",
        ),
        (
            "HTTP_PROXY",
            "http://user:pass word@proxy.example:3128",
            "a value not shown here (it may hold a password)",
        ),
    ] {
        let _environment = proxy_environment(&[(var, value), ("http_proxy", "http://127.0.0.1:9")]);
        let refused = Engine::open(c.clone()).err().expect("a config error");
        assert_eq!(
            refused.to_string(),
            format!("the environment's {var} must be {rule}, got {shown}")
        );
    }
    let _environment = proxy_environment(&[
        ("HTTPS_PROXY", ""),
        ("https_proxy", "proxy.example:3128"),
        ("HTTP_PROXY", "http://proxy.example:3128"),
        ("ALL_PROXY", "not a proxy"),
    ]);
    Engine::open(c).unwrap();
}

/// Each request goes through the proxy named for its URL's scheme, as
/// curl reads the variables: `HTTPS_PROXY` for an https:// URL,
/// `HTTP_PROXY` for an http:// one, `ALL_PROXY` for a scheme whose own is
/// not set, none for a scheme with none. (ureq by itself takes the first
/// of `ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY` for every URL.)
#[test]
fn each_request_goes_through_the_proxy_named_for_its_urls_scheme() {
    let all = Receiver::start(|_| Reply::status(200)).unwrap();
    let https = Receiver::start(|_| Reply::status(200)).unwrap();
    let tunnels = |proxy: &Receiver| -> Vec<String> {
        let received = proxy.received().into_iter();
        received
            .filter(|r| r.method == "CONNECT")
            .map(|r| r.path)
            .collect()
    };
    let [plain, _] = one_attempt_for_each_scheme(&[
        ("ALL_PROXY", &all.url("")),
        ("HTTPS_PROXY", &https.url("")),
    ]);
    assert_eq!(plain, None, "delivered through ALL_PROXY's proxy");
    assert_eq!(tunnels(&all), ["plain.example.invalid:80"]);
    assert_eq!(tunnels(&https), ["tls.example.invalid:443"]);

    let [plain, _] = one_attempt_for_each_scheme(&[("https_proxy", &https.url(""))]);
    let error = plain.expect("not delivered");
    assert!(
        error.starts_with("sink http: io: failed to lookup address information"),
        "looked up here, not sent to the proxy: {error}"
    );
    assert_eq!(tunnels(&all), ["plain.example.invalid:80"]);
    assert_eq!(
        tunnels(&https),
        ["tls.example.invalid:443", "tls.example.invalid:443"]
    );
}

/// `NO_PROXY` is read as curl and Go read it, not as ureq would: a name
/// matches its subdomains too, a leading `.` only subdomains, an entry's
/// port and the spaces around it are passed over, an IPv4 range matches
/// the addresses written in it; and a loopback receiver is reached
/// directly though `NO_PROXY` does not name it. The proxy sees a tunnel
/// request for every other host, and none for these.
#[test]
fn no_proxy_is_read_as_operators_write_it() {
    let proxy = Receiver::start(|_| Reply::status(200)).unwrap();
    let direct = Receiver::start(|_| Reply::status(200)).unwrap();
    let _environment = proxy_environment(&[
        ("HTTP_PROXY", &proxy.url("")),
        ("NO_PROXY", " .svc, example.invalid:8080 ,10.0.0.0/8"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    // Addresses of a private network are refused when connected to
    // directly: a bypassed row fails at once, never reaching the network.
    c.egress.deny_private_addresses = true;
    c.egress.allow_private_networks = vec!["127.0.0.0/8".into()];
    let sinks = [
        "http://hooks.example.invalid/bypassed",
        "http://example.invalid:8080/bypassed",
        "http://api.svc/bypassed",
        "http://10.20.30.40:9/bypassed",
        "http://svc/proxied",
        "http://11.0.0.1:9/proxied",
        &direct.url("/direct"),
    ];
    let sinks = sinks.iter().map(|url| SinkConfig::http(*url)).collect();
    c.sources.push(source("stripe", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    wait_until(
        "three delivered, four dead",
        Duration::from_secs(20),
        || {
            engine.tick().unwrap();
            rows(&engine).len() == 4 && dead(&engine).len() == 4
        },
    );
    let mut tunnels: Vec<_> = proxy
        .received()
        .into_iter()
        .filter(|r| r.method == "CONNECT")
        .map(|r| r.path)
        .collect();
    tunnels.sort();
    assert_eq!(tunnels, ["11.0.0.1:9", "svc:80"]);
    assert_eq!(direct.received().len(), 1);
    let mut dead: Vec<_> = dead(&engine).iter().map(|r| r.row.sink_index).collect();
    dead.sort();
    assert_eq!(
        dead,
        [0, 1, 2, 3],
        "the bypassed hosts, refused or unknown here"
    );
}

/// A node whose only outbound requests fetch an `ingest_jwt` key set (no
/// sink of goad's) refuses the same proxy variable, as its start and
/// `goad check --environment` read the config.
#[test]
fn a_node_that_only_fetches_key_sets_refuses_a_proxy_variable_too() {
    let _environment = proxy_environment(&[("ALL_PROXY", "ftp://proxy.example:21")]);
    let dir = tempfile::tempdir().unwrap();
    let c = goad::Config::from_toml(&format!(
        "data_dir = {:?}\n[[sources]]\nid = \"pubsub\"\n\
         ingest_jwt = {{ jwks_url = \"https://keys.example.com/certs\", issuer = \"i\", audience = \"a\" }}\n",
        dir.path()
    ))
    .unwrap();
    let refused = goad::node::check_environment(&c, false).expect_err("a config error");
    assert_eq!(
        refused.to_string(),
        "the environment's ALL_PROXY must be a proxy's URL, as http://HOST:PORT or \
         socks5h://HOST:PORT (or https, socks5, socks4a, socks4; user:password@ before the \
         host for credentials), got \"ftp://proxy.example:21\""
    );
}

/// A client that asks URLs of both schemes takes each one's proxy: an
/// SQS sink's credentials fetched from the instance's metadata service
/// (an http:// URL) go through `HTTP_PROXY`'s proxy, not the
/// `HTTPS_PROXY` one its queue's requests would take.
#[test]
fn credentials_fetched_over_http_take_http_proxy_beside_an_https_queue() {
    let plain = Receiver::start(|_| Reply::status(200)).unwrap();
    let https = Receiver::start(|_| Reply::status(200)).unwrap();
    let _environment = proxy_environment(&[
        ("HTTPS_PROXY", &https.url("")),
        ("HTTP_PROXY", &plain.url("")),
    ]);
    std::env::set_var(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "http://imds.example.invalid",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    let sink = SinkConfig {
        credentials: Some("instance".into()),
        region: Some("us-east-1".into()),
        ..SinkConfig::sqs("https://sqs.us-east-1.amazonaws.com/123456789012/hooks")
    };
    c.sources.push(source("stripe", "acme", vec![sink]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    wait_until("the row dead", Duration::from_secs(20), || {
        dead(&engine).len() == 1
    });
    std::env::remove_var("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    let error = dead(&engine)[0].record.error.clone().unwrap_or_default();
    assert!(error.ends_with("the instance has no role"), "{error}");
    let asked: Vec<_> = plain
        .received()
        .into_iter()
        .take(2)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        asked,
        ["CONNECT imds.example.invalid:80", "PUT /latest/api/token"]
    );
    assert_eq!(https.received().len(), 0);
}
