//! goad-sink: a webhook endpoint to point goad at, for trying a node by hand
//! and for soak runs.
//!
//! It answers every request after `--latency-ms`; request n (counting from
//! 0, in arrival order) hangs when `(n·37) mod 100 < hang%`, else fails with
//! `--fail-status` (and `Retry-After: --retry-after-s`, if given) when
//! `(n·37) mod 100 < hang% + fail%`, else answers 200: exact shares,
//! spread over each hundred requests. With `--secret-env NAME` it checks
//! each request's Standard Webhooks signature against that variable's
//! secret (`v1`) or public key (`whpk_…`, `v1a`) and answers 401 when it
//! does not verify, as a consumer would.
//!
//! Once a second (and when `--seconds` ends the run) it prints what it saw
//! as one logfmt line: requests, answered ok, failed, hung, bad signatures,
//! distinct hooks answered ok (by `webhook-id`) and redeliveries (a hook
//! answered ok again: at-least-once at work).
//!
//! With `--tls-cert` and `--tls-key` it speaks HTTPS (a sink's `ca_file`
//! names the CA that signed the certificate); with `--tls-client-ca` too,
//! it accepts only clients presenting a certificate that CA signed (a
//! sink's `client_cert_file` and `client_key_file`).
//!
//! `cargo run --release --bin goad-sink -- --listen 127.0.0.1:9000 --fail-percent 20`

use clap::Parser;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::sink::signing::Verifier;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    about = "A webhook endpoint with set latency, failures and hangs that counts what goad delivers"
)]
struct Args {
    /// Address to listen on (port 0 picks a free one; the first line says which).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: String,
    /// Wait this long before answering.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Share of requests answered with `--fail-status`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    fail_percent: u8,
    /// The status of a failed request.
    #[arg(long, default_value_t = 503)]
    fail_status: u16,
    /// Send `Retry-After` (seconds) with failures.
    #[arg(long)]
    retry_after_s: Option<u64>,
    /// Share of requests never answered (until the connection closes).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    hang_percent: u8,
    /// Environment variable holding the sink's signing secret (`whsec_…`)
    /// or the public key of its `whsk_…` key (`whpk_…`).
    #[arg(long)]
    secret_env: Option<String>,
    /// Stop after this many seconds (0: run until interrupted).
    #[arg(long, default_value_t = 0)]
    seconds: u64,
    /// Speak HTTPS with this PEM certificate chain...
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// ...and this PEM private key.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// With HTTPS, accept only clients with a certificate chaining to this
    /// PEM file's roots.
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<std::path::PathBuf>,
}

/// What the endpoint saw.
#[derive(Default)]
struct Seen {
    requests: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    hung: AtomicU64,
    bad_signatures: AtomicU64,
    redelivered: AtomicU64,
    hooks: Mutex<HashSet<String>>,
}

impl Seen {
    fn line(&self, elapsed: Duration) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Acquire);
        format!(
            "t_s={} requests={} ok={} failed={} hung={} bad_signatures={} hooks={} redelivered={}",
            elapsed.as_secs(),
            n(&self.requests),
            n(&self.ok),
            n(&self.failed),
            n(&self.hung),
            n(&self.bad_signatures),
            self.hooks.lock().len(),
            n(&self.redelivered)
        )
    }
}

fn main() {
    let args = Args::parse();
    if u16::from(args.fail_percent) + u16::from(args.hang_percent) > 100 {
        fail("--fail-percent and --hang-percent add up to more than 100");
    }
    let key = args.secret_env.as_ref().map(|name| {
        let secret = std::env::var(name)
            .unwrap_or_else(|_| fail(&format!("--secret-env {name}: the variable is not set")));
        Verifier::parse(&secret).unwrap_or_else(|e| fail(&format!("--secret-env {name}: {e}")))
    });
    let seen = Arc::new(Seen::default());
    let answer = {
        let seen = seen.clone();
        let latency = Duration::from_millis(args.latency_ms);
        let (hang, fail_below) = (
            u64::from(args.hang_percent),
            u64::from(args.hang_percent) + u64::from(args.fail_percent),
        );
        let failure = match args.retry_after_s {
            Some(s) => Reply::status(args.fail_status).header("retry-after", &s.to_string()),
            None => Reply::status(args.fail_status),
        };
        move |request: &Received| {
            if key.as_ref().is_some_and(|key| !signed_by(key, request)) {
                seen.bad_signatures.fetch_add(1, Ordering::AcqRel);
                return Reply::status(401);
            }
            let n = seen.requests.fetch_add(1, Ordering::AcqRel);
            let bucket = n * 37 % 100;
            if bucket < hang {
                seen.hung.fetch_add(1, Ordering::AcqRel);
                return Reply::hang();
            }
            if bucket < fail_below {
                seen.failed.fetch_add(1, Ordering::AcqRel);
                return failure.clone().delayed(latency);
            }
            let id = request.header("webhook-id").unwrap_or_default().to_string();
            if !seen.hooks.lock().insert(id) {
                seen.redelivered.fetch_add(1, Ordering::AcqRel);
            }
            seen.ok.fetch_add(1, Ordering::AcqRel);
            Reply::status(200).delayed(latency)
        }
    };
    let started = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let read = |path: &std::path::Path| {
                std::fs::read(path)
                    .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())))
            };
            let (chain, key) = (read(cert), read(key));
            let clients = args.tls_client_ca.as_deref().map(read);
            let clients = clients.as_deref();
            Receiver::start_tls_on(&args.listen, &chain, &key, clients, answer, false)
        }
        _ => Receiver::start_on(&args.listen, answer, false),
    };
    let receiver =
        started.unwrap_or_else(|e| fail(&format!("cannot listen on {}: {e}", args.listen)));
    println!("goad-sink listening on {}", receiver.url("/"));
    let start = Instant::now();
    let end = (args.seconds > 0).then(|| start + Duration::from_secs(args.seconds));
    loop {
        let next = Instant::now() + Duration::from_secs(1);
        let last = end.is_some_and(|end| next >= end);
        std::thread::sleep(match end {
            Some(end) if last => end.saturating_duration_since(Instant::now()),
            _ => Duration::from_secs(1),
        });
        println!("{}", seen.line(start.elapsed()));
        if last {
            return;
        }
    }
}

/// Whether the request carries a valid signature by `key`.
fn signed_by(key: &Verifier, request: &Received) -> bool {
    let (Some(id), Some(timestamp), Some(signature)) = (
        request.header("webhook-id"),
        request.header("webhook-timestamp"),
        request.header("webhook-signature"),
    ) else {
        return false;
    };
    key.verify(signature, id, timestamp, &request.body)
}

fn fail(message: &str) -> ! {
    eprintln!("goad-sink: {message}");
    std::process::exit(2)
}
