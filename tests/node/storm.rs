//! A seeded storm on the node's front, over plain HTTP and over HTTPS:
//! clients at once sending well-formed hooks (framed by length or
//! chunked, cut anywhere, pipelined, some asking for `100 Continue`, some
//! closing after), malformed requests (with a hook smuggled behind some),
//! hooks to a source not configured and hooks given up half-way, through
//! a read budget that makes large bodies wait. Each request is answered
//! in order as its kind says; every hook acknowledged is delivered
//! verbatim exactly once, with the id its answer gave, and nothing else
//! is; the node holds no request bytes after. `GOAD_STORM_SEED` runs
//! another seed; a failure names its seed.

use super::front::{malformed_requests, Malformed};
use super::*;
use common::http::Replies;
use goad::core::rng::Rng;
use std::collections::HashMap;
use std::io::{Read, Write};

const CLIENTS: u64 = 16;
const EXCHANGES_PER_CLIENT: usize = 60;
const MAX_BODY_BYTES: usize = 64 * 1024;
const HOOKS_PATH: &str = "/v1/sources/a/hooks";

/// A well-formed hook as sent.
struct Hook {
    head: Vec<u8>,
    /// Its body as framed (chunked or not).
    framed: Vec<u8>,
    /// Its body as the receiver must get it.
    body: Vec<u8>,
    closes: bool,
}

impl Hook {
    fn raw(&self) -> Vec<u8> {
        [self.head.as_slice(), &self.framed].concat()
    }
}

/// What one client sent and was answered.
#[derive(Default)]
struct Tally {
    /// Bodies answered 202, and the hook ids given.
    acknowledged: Vec<(Vec<u8>, String)>,
    /// Bodies sent in a way the node must not store.
    never_stored: Vec<Vec<u8>>,
}

/// A connection's bytes, over plain TCP or TLS.
trait Wire: Read + Write + Send {}
impl<T: Read + Write + Send> Wire for T {}

/// One connection to the node: what is written, and its answers.
struct Link {
    wire: Box<dyn Wire>,
    replies: Replies,
}

impl Link {
    /// A connection to the node at `addr`, through TLS if `https`.
    fn open(addr: SocketAddr, https: bool) -> Link {
        let (wire, socket): (Box<dyn Wire>, _) = match https {
            true => {
                let tls = super::tls::tls_stream(addr);
                let socket = tls.sock.try_clone().unwrap();
                (Box::new(tls), socket)
            }
            false => {
                let stream = std::net::TcpStream::connect(addr).expect("connect to the node");
                let socket = stream.try_clone().unwrap();
                (Box::new(stream), socket)
            }
        };
        socket.set_nodelay(true).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Link {
            wire,
            replies: Replies::default(),
        }
    }

    fn reply(&mut self) -> Option<HttpReply> {
        self.replies.next(&mut self.wire)
    }

    /// A metric's value, scraped over a connection of its own.
    fn metric(addr: SocketAddr, https: bool, name: &str) -> f64 {
        let mut link = Link::open(addr, https);
        let scrape = raw_request("GET", "/metrics", &[("connection", "close")], b"");
        link.wire.write_all(&scrape).unwrap();
        let scrape = link.reply().expect("the metrics").text();
        assert!(scrape.contains(&format!("\n{name} ")), "{name} is scraped");
        sample_sum(&scrape, name, "")
    }

    /// Whether the node closed the connection (after its last answer).
    fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        self.replies.is_empty() && self.wire.read(&mut byte).is_ok_and(|n| n == 0)
    }
}

struct Storm {
    rng: Rng,
    client: u64,
    sent: usize,
    addr: SocketAddr,
    https: bool,
}

impl Storm {
    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    /// A body no other is: its client and number, then random bytes
    /// (all 256 values), mostly small, some past a head (they take from
    /// the read budget), a few near `MAX_BODY_BYTES`.
    fn body(&mut self) -> Vec<u8> {
        self.sent += 1;
        let mut body = format!("c{}-h{}-", self.client, self.sent).into_bytes();
        let extra = match self.rng.below(10) {
            0..=5 => self.rng.below(2_048),
            6..=8 => 16 * 1024 + self.rng.below(16 * 1024),
            _ => MAX_BODY_BYTES as u64 - 64 - self.rng.below(1_024),
        };
        body.extend((0..extra).map(|_| self.rng.next_u64() as u8));
        body
    }

    fn hook(&mut self, wants_continue: bool, closes: bool) -> Hook {
        let body = self.body();
        let mut head = format!("POST {HOOKS_PATH} HTTP/1.1\r\nhost: localhost\r\n");
        let chunked = self.chance(40);
        let framed = if chunked {
            head.push_str("transfer-encoding: chunked\r\n");
            self.chunked(&body)
        } else {
            head.push_str(&format!("content-length: {}\r\n", body.len()));
            body.clone()
        };
        if wants_continue {
            head.push_str("expect: 100-continue\r\n");
        }
        if closes {
            head.push_str("connection: close\r\n");
        }
        head.push_str("\r\n");
        Hook {
            head: head.into_bytes(),
            framed,
            body,
            closes,
        }
    }

    /// `body` in chunks of random sizes, some with an extension, and
    /// sometimes a trailer field.
    fn chunked(&mut self, body: &[u8]) -> Vec<u8> {
        let mut coded = Vec::new();
        let mut at = 0;
        while at < body.len() {
            let size =
                (1 + self.rng.below(body.len() as u64 / 2 + 1) as usize).min(body.len() - at);
            let extension = if self.chance(20) { ";x=y" } else { "" };
            coded.extend(format!("{size:X}{extension}\r\n").as_bytes());
            coded.extend(&body[at..at + size]);
            coded.extend(b"\r\n");
            at += size;
        }
        coded.extend(b"0\r\n");
        if self.chance(20) {
            coded.extend(b"x-trailer: 1\r\n");
        }
        coded.extend(b"\r\n");
        coded
    }

    /// A malformed request of a kind picked at random.
    fn malformed(&mut self) -> Malformed {
        let mut kinds = malformed_requests(HOOKS_PATH, MAX_BODY_BYTES);
        let pick = self.rng.below(kinds.len() as u64) as usize;
        kinds.swap_remove(pick)
    }

    /// `raw` written in one to eight pieces cut at random.
    fn send_in_pieces(&mut self, link: &mut Link, raw: &[u8]) {
        let mut cuts: Vec<usize> = (0..self.rng.below(8))
            .map(|_| self.rng.below(raw.len() as u64 + 1) as usize)
            .collect();
        cuts.extend([0, raw.len()]);
        cuts.sort_unstable();
        for piece in cuts.windows(2) {
            link.wire
                .write_all(&raw[piece[0]..piece[1]])
                .expect("the node takes the request");
        }
    }

    fn connect(&self) -> Link {
        Link::open(self.addr, self.https)
    }

    /// Runs the client's exchanges; what it sent and was answered.
    fn run(mut self) -> Tally {
        let mut tally = Tally::default();
        let mut link = self.connect();
        for _ in 0..EXCHANGES_PER_CLIENT {
            let reconnect = match self.rng.below(20) {
                0..=11 => self.pipelined_hooks(&mut link, &mut tally),
                12 | 13 => self.hook_after_continue(&mut link, &mut tally),
                14..=16 => self.malformed_after_hooks(&mut link, &mut tally),
                17 => self.hook_for_an_unknown_source(&mut link, &mut tally),
                _ => self.given_up(&mut link, &mut tally),
            };
            if reconnect {
                link = self.connect();
            }
        }
        tally
    }

    /// One to three hooks sent back to back (the last may close the
    /// connection): each answered 202, in order. True if it closed.
    fn pipelined_hooks(&mut self, link: &mut Link, tally: &mut Tally) -> bool {
        let count = 1 + self.rng.below(3);
        let closes = self.chance(15);
        let hooks: Vec<Hook> = (0..count)
            .map(|i| self.hook(false, closes && i + 1 == count))
            .collect();
        let raw: Vec<u8> = hooks.iter().flat_map(Hook::raw).collect();
        self.send_in_pieces(link, &raw);
        for hook in &hooks {
            acknowledged(link, hook, tally);
        }
        if closes {
            assert!(link.is_closed(), "closed after connection: close");
        }
        closes
    }

    /// A hook that asks for `100 Continue` and sends its body only once
    /// told to.
    fn hook_after_continue(&mut self, link: &mut Link, tally: &mut Tally) -> bool {
        let hook = self.hook(true, false);
        link.wire.write_all(&hook.head).unwrap();
        let go_on = link.reply().expect("100 Continue");
        assert_eq!(go_on.status, 100, "{}", go_on.text());
        self.send_in_pieces(link, &hook.framed);
        acknowledged(link, &hook, tally);
        hook.closes
    }

    /// Up to two hooks, then a malformed request and maybe a hook behind
    /// it, written at once: the hooks answered 202, the malformed one its
    /// error, and the connection closed (the hook behind never read as a
    /// request).
    fn malformed_after_hooks(&mut self, link: &mut Link, tally: &mut Tally) -> bool {
        let hooks: Vec<Hook> = (0..self.rng.below(3))
            .map(|_| self.hook(false, false))
            .collect();
        let Malformed {
            raw: bad,
            status,
            code,
            ..
        } = self.malformed();
        let mut raw: Vec<u8> = hooks.iter().flat_map(Hook::raw).collect();
        raw.extend(&bad);
        if self.chance(50) {
            let smuggled = self.hook(false, false);
            raw.extend(smuggled.raw());
            tally.never_stored.push(smuggled.body);
        }
        // Any part unread when the node closes may reset the connection.
        let _ = link.wire.write_all(&raw);
        for hook in &hooks {
            acknowledged(link, hook, tally);
        }
        let refused = link.reply().expect("the malformed request's answer");
        assert_eq!(
            (refused.status, refused.error_code().as_str()),
            (status, code)
        );
        assert_eq!(refused.header("connection"), Some("close"));
        assert!(link.is_closed(), "closed after {code}");
        true
    }

    /// A hook to a source not configured: 404, and the connection closed
    /// if its head was refused before its body arrived (else kept).
    fn hook_for_an_unknown_source(&mut self, link: &mut Link, tally: &mut Tally) -> bool {
        let hook = self.hook(false, false);
        let head = String::from_utf8(hook.head).unwrap();
        let raw = [
            head.replace(HOOKS_PATH, "/v1/sources/nope/hooks")
                .into_bytes(),
            hook.framed,
        ]
        .concat();
        self.send_in_pieces(link, &raw);
        tally.never_stored.push(hook.body);
        let refused = link.reply().expect("the refusal");
        assert_eq!(
            (refused.status, refused.error_code().as_str()),
            (404, "unknown_source")
        );
        let closes = refused.header("connection") == Some("close");
        if closes {
            assert!(link.is_closed(), "closed after a refusal of its head");
        }
        closes
    }

    /// A hook cut off anywhere, then the connection closed (by the
    /// caller's reconnecting): nothing stored, and any room it took given
    /// back.
    fn given_up(&mut self, link: &mut Link, tally: &mut Tally) -> bool {
        let hook = self.hook(false, false);
        let raw = hook.raw();
        let cut = 1 + self.rng.below(raw.len() as u64 - 1) as usize;
        let _ = link.wire.write_all(&raw[..cut]);
        tally.never_stored.push(hook.body);
        true
    }
}

/// Reads `hook`'s answer: 202 and its id.
fn acknowledged(link: &mut Link, hook: &Hook, tally: &mut Tally) {
    let reply = link.reply().expect("an answer to the hook");
    assert_eq!(reply.status, 202, "{}", reply.text());
    let id = reply.json()["id"].as_str().expect("a hook id").to_string();
    tally.acknowledged.push((hook.body.clone(), id));
}

#[test]
fn a_seeded_storm_of_clients_gets_every_answer_in_order_and_every_acknowledged_hook_delivered() {
    storm(false);
}

#[test]
fn over_https_a_seeded_storm_of_clients_gets_every_answer_and_every_acknowledged_hook_delivered() {
    storm(true);
}

/// Runs the storm's clients on one node and checks what they were
/// answered against what the receiver got.
fn storm(https: bool) {
    let seed = std::env::var("GOAD_STORM_SEED").map_or(20_261_206, |s| {
        s.parse().expect("GOAD_STORM_SEED is a number")
    });
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = one_source(dir.path(), &receiver);
    if https {
        c.http.tls_cert_file = Some(fixtures().join("localhost-cert.pem"));
        c.http.tls_key_file = Some(fixtures().join("localhost-key.pem"));
    }
    c.max_body_bytes = MAX_BODY_BYTES as u64;
    // Room for two of the largest bodies at once: more wait.
    c.http.max_buffered_bytes = 2 * (MAX_BODY_BYTES as u64 + 16 * 1024);
    c.http.read_timeout_ms = 30_000;
    let node = start(c);
    let addr = node.local_addr();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let storm = Storm {
                rng: Rng::new(seed ^ client.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                client,
                sent: 0,
                addr,
                https,
            };
            std::thread::spawn(move || storm.run())
        })
        .collect();
    let tallies: Vec<Tally> = clients
        .into_iter()
        .map(|c| {
            c.join()
                .unwrap_or_else(|_| panic!("a client failed; seed {seed}"))
        })
        .collect();
    let acknowledged: HashMap<Vec<u8>, String> = tallies
        .iter()
        .flat_map(|t| t.acknowledged.iter().cloned())
        .collect();
    let never_stored: Vec<&Vec<u8>> = tallies.iter().flat_map(|t| &t.never_stored).collect();
    let ids: std::collections::HashSet<&String> = acknowledged.values().collect();
    assert_eq!(
        ids.len(),
        acknowledged.len(),
        "one id per hook; seed {seed}"
    );
    assert!(
        receiver.wait_for(acknowledged.len() as u64, Duration::from_secs(60)),
        "every acknowledged hook delivered; seed {seed}"
    );
    wait_until("no request bytes held", Duration::from_secs(10), || {
        Link::metric(addr, https, "goad_http_buffered_bytes") == 0.0
    });
    let delivered = receiver.received();
    let mut counts: HashMap<&Vec<u8>, usize> = HashMap::new();
    for request in &delivered {
        *counts.entry(&request.body).or_default() += 1;
        let id = acknowledged.get(&request.body).map(String::as_str);
        assert_eq!(
            request.header("webhook-id"),
            id,
            "delivered with the id its ingest was answered; seed {seed}"
        );
    }
    for body in acknowledged.keys() {
        assert_eq!(
            counts.get(body),
            Some(&1),
            "an acknowledged hook delivered once, verbatim; seed {seed}"
        );
    }
    for body in &never_stored {
        assert_eq!(
            counts.get(body),
            None,
            "a hook not acknowledged is not delivered; seed {seed}"
        );
    }
    assert_eq!(
        delivered.len(),
        acknowledged.len(),
        "nothing else delivered; seed {seed}"
    );
    let waits = Link::metric(addr, https, "goad_http_buffer_waits_total");
    eprintln!(
        "storm seed {seed} (https {https}): {} hooks acknowledged, {} sent not to be stored, {waits} waits for room",
        acknowledged.len(),
        never_stored.len()
    );
}
