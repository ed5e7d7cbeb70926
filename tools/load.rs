//! goad-load: drives a `goad serve` node's ingest over HTTP and measures it.
//!
//! It starts a loopback receiver (answering 200), writes a config whose
//! sources deliver there (through `--sinks` HTTP sinks each, so a hook is
//! that many deliveries), starts `goad serve` on it (the `goad` binary next
//! to this one), and posts hooks from `--connections` keep-alive
//! connections, as fast as they are answered or at `--rate` hooks/s in
//! all. Each body carries its send time, so the receiver measures the
//! latency from the ingest request to the delivery (which includes the
//! durable commit). Prints the ingest rate (202s per second), the delivery
//! rate, latency percentiles and, on Linux, the node's peak anonymous
//! memory (its heap: the bodies it holds, sampled every 100 ms while the
//! connections post); `--plot FILE.svg` writes the delivery latency
//! distribution. Ctrl-C (SIGINT, or SIGTERM) stops the posting early: it
//! reports what it measured, stops the node and removes its directory.
//!
//! With `--tls-cert`, `--tls-key` and `--tls-ca` the node serves HTTPS
//! with that certificate and key, and the connections trust that CA.
//!
//! `cargo build --release && target/release/goad-load --connections 64 --seconds 10`
//! `target/release/goad-load --rate 5000 --seconds 10 --plot latency.svg`
//! `target/release/goad-load --tenants 1 --sinks 64 --connections 8`
//! `target/release/goad-load --connections 512 --body-bytes 1048576 --max-buffered-bytes 67108864`
//! `target/release/goad-load --tls-cert tests/fixtures/localhost-cert.pem \
//!     --tls-key tests/fixtures/localhost-key.pem --tls-ca tests/fixtures/test-ca.pem`

use clap::builder::RangedU64ValueParser;
use clap::Parser;
use goad::demo::receiver::{Receiver, Reply};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Load a goad node's HTTP ingest and measure ingest and delivery")]
struct Args {
    /// Keep-alive connections posting hooks.
    #[arg(long, default_value_t = 64, value_parser = RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    connections: usize,
    /// Hooks per second offered in all; 0 posts as fast as answered.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// How long to post.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    seconds: u64,
    #[arg(long, default_value_t = 1_024)]
    body_bytes: usize,
    /// Tenants (one source each); hooks are spread over them.
    #[arg(long, default_value_t = 4, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    tenants: usize,
    /// HTTP sinks of each source (each hook is a delivery row per sink),
    /// all posting to the tool's receiver, each at a path of its own.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=goad::limits::MAX_SINKS_PER_SOURCE as u64))]
    sinks: usize,
    /// The node's `dispatch.concurrency` (attempts at once, and each
    /// shard's IO workers).
    #[arg(long, default_value_t = 32)]
    concurrency: u32,
    /// The node's `dispatch.sink_concurrency`, also each tenant's concurrency.
    #[arg(long, default_value_t = 8)]
    sink_concurrency: u32,
    /// The node's shards (0: one per core).
    #[arg(long, default_value_t = 0)]
    shards: usize,
    /// The node's `http.max_buffered_bytes` (default: goad's, 256 MiB).
    #[arg(long)]
    max_buffered_bytes: Option<u64>,
    /// Write the delivery latency distribution here (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The goad binary (default: next to this one).
    #[arg(long)]
    goad: Option<PathBuf>,
    /// Serve HTTPS with this PEM certificate (for `localhost`)...
    #[arg(long, requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,
    /// ...and this PEM private key...
    #[arg(long, requires_all = ["tls_cert", "tls_ca"])]
    tls_key: Option<PathBuf>,
    /// ...which the connections check against this PEM CA certificate.
    #[arg(long, requires_all = ["tls_cert", "tls_key"])]
    tls_ca: Option<PathBuf>,
}

/// The client side of `--tls-ca`: rustls trusting that CA.
fn client_tls(ca_file: &std::path::Path) -> Arc<ClientConfig> {
    let pem = std::fs::read(ca_file).expect("read --tls-ca");
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        roots
            .add(certificate.expect("a PEM certificate in --tls-ca"))
            .expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// How long the tool waits, after the posting ends, for the deliveries
/// of the hooks acknowledged.
const DRAIN_WAIT: Duration = Duration::from_secs(60);

/// Send times are nanoseconds since this instant.
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

fn main() {
    let args = Args::parse();
    now_ns();
    let deliveries = Arc::new(Deliveries::default());
    let receiver = deliveries.receiver();
    let interrupt = Interrupt::watch();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let node = start_node(&args, dir.path(), &receiver.url("/hooks"));
    println!(
        "goad-load: {} connections{}, {}, {} s, {} B bodies, {} tenants, {} sinks a source, node at {}",
        args.connections,
        if args.tls_cert.is_some() {
            " (HTTPS)"
        } else {
            ""
        },
        if args.rate == 0 {
            "max rate".to_string()
        } else {
            format!("{} hooks/s offered", args.rate)
        },
        args.seconds,
        args.body_bytes,
        args.tenants,
        args.sinks,
        node.addr
    );
    let tls = args.tls_ca.as_deref().map(client_tls);
    let started_ns = now_ns();
    let memory = PeakMemory::watch(node.child.id());
    let (acked, ack_us, failed) = send_for(&args, node.addr, tls, &interrupt);
    let peak_anon_kb = memory.stop();
    let sent_s = (now_ns() - started_ns) as f64 / 1e9;
    let expected = acked * args.sinks as u64;
    let deadline = Instant::now() + DRAIN_WAIT;
    while deliveries.count.load(Ordering::Relaxed) < expected
        && Instant::now() < deadline
        && !interrupt.sleep(Duration::from_millis(10))
    {}
    if interrupt.sleep(Duration::ZERO) {
        println!("interrupted: what was measured until then");
    }
    let delivered_n = deliveries.count.load(Ordering::Relaxed);
    // No delivery at all (an early Ctrl-C, a node that delivers nothing)
    // leaves `last_ns` at 0.
    let last_ns = deliveries.last_ns.load(Ordering::Relaxed);
    let delivery_s = last_ns.saturating_sub(started_ns) as f64 / 1e9;
    println!(
        "ingest:   {acked} hooks acknowledged (202) in {sent_s:.2} s = {:.0} hooks/s; {failed} failed requests",
        per_s(acked, sent_s),
    );
    let undelivered = match expected.saturating_sub(delivered_n) {
        0 => String::new(),
        n => format!(
            "; {n} of the {expected} deliveries its hooks make not made within {} s of the last post",
            DRAIN_WAIT.as_secs()
        ),
    };
    println!(
        "delivery: {delivered_n} delivered in {delivery_s:.2} s = {:.0} deliveries/s{undelivered}",
        per_s(delivered_n, delivery_s)
    );
    print_percentiles("ingest request to 202 (durable)", &ack_us);
    let delivery_us = deliveries.latency_us.lock().clone();
    print_percentiles("ingest request to delivery", &delivery_us);
    if let Some(kb) = peak_anon_kb {
        println!(
            "node memory: peak RssAnon {:.1} MB while posting",
            kb as f64 / 1_000.0
        );
    }
    if let Some(path) = &args.plot {
        match std::fs::write(path, svg(&delivery_us, &args)) {
            Ok(()) => println!("plot: {}", path.display()),
            Err(e) => eprintln!("goad-load: cannot write {}: {e}", path.display()),
        }
    }
}

/// `count` a second over `seconds`; 0 over no time.
fn per_s(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// SIGINT or SIGTERM while the tool waits: it then stops posting, reports
/// what it measured and stops its node; a second signal ends it at once.
struct Interrupt(crossbeam_channel::Receiver<()>);

impl Interrupt {
    fn watch() -> Interrupt {
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .expect("handle SIGINT and SIGTERM");
        // Nothing is sent: the first signal drops the sender, which every
        // wait then sees at once.
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        std::thread::spawn(move || {
            let mut signals = signals.forever();
            signals.next();
            drop(tx);
            signals.next();
            std::process::exit(130);
        });
        Interrupt(rx)
    }

    /// Waits up to `timeout`; true once a signal came (before or meanwhile).
    fn sleep(&self, timeout: Duration) -> bool {
        self.0.recv_timeout(timeout) == Err(crossbeam_channel::RecvTimeoutError::Disconnected)
    }
}

/// The node's peak `RssAnon` (its anonymous memory: heap and stacks, not
/// the store's mapped pages), read from `/proc` every 100 ms until stopped.
struct PeakMemory {
    stop: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<Option<u64>>,
}

impl PeakMemory {
    fn watch(pid: u32) -> PeakMemory {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak_kb = None;
            while !stopped.load(Ordering::Acquire) {
                if let Some(kb) = rss_anon_kb(pid) {
                    peak_kb = peak_kb.max(Some(kb));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            peak_kb
        });
        PeakMemory { stop, sampler }
    }

    /// The peak in kB, or `None` where `/proc` does not say (not Linux).
    fn stop(self) -> Option<u64> {
        self.stop.store(true, Ordering::Release);
        self.sampler.join().expect("the memory sampler")
    }
}

fn rss_anon_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What the receiver saw: each delivery's latency from its ingest request
/// (whose send time leads the body), how many, and when the last came.
struct Deliveries {
    latency_us: Mutex<Histogram<u64>>,
    count: AtomicU64,
    last_ns: AtomicU64,
}

impl Default for Deliveries {
    fn default() -> Deliveries {
        Deliveries {
            latency_us: Mutex::new(histogram()),
            count: AtomicU64::new(0),
            last_ns: AtomicU64::new(0),
        }
    }
}

impl Deliveries {
    /// A loopback receiver answering 200 that records into `self`.
    fn receiver(self: &Arc<Deliveries>) -> Receiver {
        let deliveries = self.clone();
        Receiver::start_with(
            move |r| {
                let at = now_ns();
                if let Some(sent) = std::str::from_utf8(&r.body[..r.body.len().min(20)])
                    .ok()
                    .and_then(|s| s.split(' ').next())
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    deliveries
                        .latency_us
                        .lock()
                        .saturating_record(at.saturating_sub(sent) / 1_000);
                }
                deliveries.count.fetch_add(1, Ordering::Relaxed);
                deliveries.last_ns.fetch_max(at, Ordering::Relaxed);
                Reply::status(200)
            },
            false,
        )
        .expect("start the receiver")
    }
}

/// Posts from every connection for `args.seconds`: (hooks acknowledged,
/// their ack latencies in µs, failed requests).
fn send_for(
    args: &Args,
    addr: SocketAddr,
    tls: Option<Arc<ClientConfig>>,
    interrupt: &Interrupt,
) -> (u64, Histogram<u64>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let senders: Vec<_> = (0..args.connections)
        .map(|c| {
            let (stop, failed, tls) = (stop.clone(), failed.clone(), tls.clone());
            let tenants = args.tenants;
            let body_bytes = args.body_bytes;
            let interval = (args.rate > 0)
                .then(|| Duration::from_nanos(1_000_000_000 * args.connections as u64 / args.rate));
            let target = Target { addr, tls };
            std::thread::spawn(move || {
                send(target, c, tenants, body_bytes, interval, &stop, &failed)
            })
        })
        .collect();
    interrupt.sleep(Duration::from_secs(args.seconds));
    stop.store(true, Ordering::Release);
    let mut ack_us = histogram();
    let mut acked = 0u64;
    for s in senders {
        let (n, h) = s.join().expect("a sender thread");
        acked += n;
        ack_us.add(h).expect("same bounds");
    }
    (acked, ack_us, failed.load(Ordering::Relaxed))
}

/// One connection's loop: post hooks until told to stop; (acknowledged,
/// ack latency µs). A minimal keep-alive client over a blocking socket, so
/// the load costs the machine little next to the node it measures.
fn send(
    target: Target,
    connection: usize,
    tenants: usize,
    body_bytes: usize,
    interval: Option<Duration>,
    stop: &AtomicBool,
    failed: &AtomicU64,
) -> (u64, Histogram<u64>) {
    let mut h = histogram();
    let mut acked = 0;
    let mut conn: Option<LoadConn> = None;
    let head = format!(
        "POST /v1/sources/s{}/hooks HTTP/1.1\r\nhost: goad\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
        connection % tenants,
        body_bytes.max(24)
    );
    let mut request = head.into_bytes();
    let body_at = request.len();
    request.resize(body_at + body_bytes.max(24), b'x');
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Some(every) = interval {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
            next += every;
        }
        let sent = now_ns();
        let stamp = format!("{sent:020} ");
        request[body_at..body_at + stamp.len()].copy_from_slice(stamp.as_bytes());
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match LoadConn::connect(&target) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            },
        };
        match c.post(&request) {
            Ok((status, close)) => {
                if status == 202 {
                    h.saturating_record((now_ns() - sent) / 1_000);
                    acked += 1;
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                if close {
                    conn = None;
                }
            }
            Err(_) => {
                failed.fetch_add(1, Ordering::Relaxed);
                conn = None;
            }
        }
    }
    (acked, h)
}

/// Where connections go: the node, over TLS with this config when set.
struct Target {
    addr: SocketAddr,
    tls: Option<Arc<ClientConfig>>,
}

/// A connection's byte stream, plain or TLS.
trait Stream: std::io::Read + std::io::Write + Send {}
impl<S: std::io::Read + std::io::Write + Send> Stream for S {}

/// A keep-alive connection that posts a request and reads the status of
/// its response (the node always sends a Content-Length).
struct LoadConn {
    stream: Box<dyn Stream>,
    buf: Vec<u8>,
}

impl LoadConn {
    fn connect(target: &Target) -> std::io::Result<LoadConn> {
        let socket = std::net::TcpStream::connect(target.addr)?;
        socket.set_nodelay(true)?;
        let stream: Box<dyn Stream> = match &target.tls {
            None => Box::new(socket),
            Some(config) => {
                let name = ServerName::try_from("localhost").expect("a server name");
                let tls =
                    ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
                Box::new(StreamOwned::new(tls, socket))
            }
        };
        Ok(LoadConn {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// The response's status, and whether the node closes the connection.
    fn post(&mut self, request: &[u8]) -> std::io::Result<(u16, bool)> {
        use std::io::Read as _;
        self.stream.write_all(request)?;
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = std::str::from_utf8(&self.buf[..end]).map_err(std::io::Error::other)?;
            let status: u16 = head
                .get(9..12)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| std::io::Error::other("no status"))?;
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if self.buf.len() >= end + 4 + length {
                return Ok((status, head.contains("connection: close")));
            }
        }
    }
}

fn print_percentiles(what: &str, h: &Histogram<u64>) {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    println!(
        "{what:<34} p50 {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  p99.9 {:>7.2} ms  max {:>8.2} ms",
        ms(0.5),
        ms(0.9),
        ms(0.99),
        ms(0.999),
        h.max() as f64 / 1_000.0
    );
}

struct NodeProcess {
    child: std::process::Child,
    addr: SocketAddr,
}

/// Dropped (at the end, or as a panic unwinds), the node is stopped:
/// SIGTERM, then its graceful exit.
impl Drop for NodeProcess {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

fn start_node(args: &Args, dir: &std::path::Path, sink_url: &str) -> NodeProcess {
    let mut config = format!(
        "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nshards = {}\n[dispatch]\nconcurrency = {}\nsink_concurrency = {}\n[dispatch.tenants.default]\nconcurrency = {}\n",
        dir.join("data"),
        args.shards,
        args.concurrency,
        args.sink_concurrency,
        args.sink_concurrency
    );
    config.push_str("[http]\n");
    if let Some(bytes) = args.max_buffered_bytes {
        config.push_str(&format!("max_buffered_bytes = {bytes}\n"));
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let absolute = |path: &PathBuf| std::fs::canonicalize(path).expect("a TLS file");
        let (cert, key) = (absolute(cert), absolute(key));
        config.push_str(&format!(
            "tls_cert_file = {cert:?}\ntls_key_file = {key:?}\n"
        ));
    }
    for t in 0..args.tenants {
        config.push_str(&format!(
            "[[sources]]\nid = \"s{t}\"\ntenant = \"tenant-{t}\"\n"
        ));
        for s in 0..args.sinks {
            config.push_str(&format!(
                "[[sources.sinks]]\ntype = \"http\"\nurl = \"{sink_url}/{s}\"\n"
            ));
        }
    }
    let path = dir.join("goad.toml");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(config.as_bytes()))
        .expect("write the node's config");
    let goad = args.goad.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .expect("this binary's path")
            .with_file_name("goad")
    });
    let mut child = Command::new(&goad)
        .args(["serve", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (build it: cargo build --release)",
                goad.display()
            )
        });
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut addr = None;
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(rest) = line.split("msg=\"node listening\" addr=").nth(1) {
            addr = Some(
                rest.split_whitespace()
                    .next()
                    .expect("an address")
                    .parse()
                    .expect("an address"),
            );
        }
        if line.contains("msg=\"engine ready\"") {
            break;
        }
        if line.contains("level=error") {
            panic!("the node failed: {line}");
        }
    }
    // Keep draining the node's log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    NodeProcess {
        child,
        addr: addr.expect("the node logged its address"),
    }
}

/// The latency distribution as an SVG line chart: latency (ms, y) against
/// percentile (x, on a log scale of 1/(1-p), so the tail is visible).
fn svg(h: &Histogram<u64>, args: &Args) -> String {
    let (width, height, margin) = (800.0, 480.0, 60.0);
    let max_x = 5.0f64; // up to the 99.999th percentile
    let quantiles: Vec<f64> = (0..=500)
        .map(|i| 1.0 - 10f64.powf(-max_x * i as f64 / 500.0))
        .collect();
    let points: Vec<(f64, f64)> = quantiles
        .iter()
        .map(|q| {
            (
                -(1.0 - q).max(1e-9).log10(),
                h.value_at_quantile(*q) as f64 / 1_000.0,
            )
        })
        .collect();
    let max_ms = points.iter().map(|p| p.1).fold(0.1, f64::max) * 1.1;
    let sx = |x: f64| margin + x / max_x * (width - 2.0 * margin);
    let sy = |y: f64| height - margin - y / max_ms * (height - 2.0 * margin);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{margin}\" y=\"24\" font-size=\"14\">goad: ingest request to delivery, {} connections, {}, {} B</text>\n",
        args.connections,
        if args.rate == 0 { "max rate".to_string() } else { format!("{} hooks/s", args.rate) },
        args.body_bytes
    );
    for (i, label) in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        .iter()
        .enumerate()
    {
        let x = sx(i as f64);
        out.push_str(&format!(
            "<line x1=\"{x}\" y1=\"{margin}\" x2=\"{x}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{label}</text>\n",
            height - margin,
            height - margin + 18.0
        ));
    }
    for i in 0..=4 {
        let ms = max_ms * i as f64 / 4.0;
        let y = sy(ms);
        out.push_str(&format!(
            "<line x1=\"{margin}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{ms:.1} ms</text>\n",
            width - margin,
            margin - 6.0
        ));
    }
    let path: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
        .collect();
    out.push_str(&format!(
        "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">percentile</text>\n</svg>\n",
        path.join(" "),
        width / 2.0,
        height - 12.0
    ));
    out
}
