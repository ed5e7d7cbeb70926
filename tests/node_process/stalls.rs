//! A node whose process is stopped (SIGSTOP) and let go (SIGCONT), as a
//! paused container, a frozen cgroup or a VM held by its host is: the
//! attempts it had in flight fail by their own timeouts though their
//! receiver answered in time, and are not held against the sink.

use super::*;
use std::sync::atomic::AtomicUsize;

/// Eight attempts in flight when the node is stopped for longer than
/// their receive timeout: each fails when it is let go, is retried at
/// once and delivered, and the sink's breaker (five failures) stays
/// closed; the sink's last failure says why it was not held against it.
/// The receiver holds its answers to the eight until the retries are
/// in, and answers the retries at once: no first attempt can end before
/// the stop, nor read an answer that came in while the node was stopped
/// (answering each after 1 s, one of the eight was delivered so in CI).
#[test]
fn attempts_cut_short_by_a_stopped_process_do_not_open_the_sink_s_breaker() {
    // Dropped once every hook is delivered: the first eight are answered.
    let (delivered, until_delivered) = crossbeam_channel::bounded::<()>(0);
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let receiver = Receiver::start(move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) < 8 {
            let _ = until_delivered.recv();
        }
        Reply::status(200)
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n[[sources]]\nid = \"a\"\n\
         tenant = \"t\"\n[[sources.sinks]]\ntype = \"http\"\nurl = {:?}\ntimeout_ms = 3000\n",
        dir.path().join("data"),
        receiver.url("/hooks"),
    );
    let node = serve_config(dir.path(), &config, |_| {});
    let mut client = Client::connect(node.addr);
    for n in 0..8 {
        let body = format!("hook {n}");
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], body.as_bytes());
        assert_eq!(reply.status, 202);
    }
    let shard = || get(node.addr, "/v1/stats").json()["shards"][0].clone();
    wait_until("eight attempts in flight", Duration::from_secs(20), || {
        shard()["running"] == 8
    });
    node.signal(libc::SIGSTOP);
    // Stopped for longer than the attempts' 3 s receive timeout.
    std::thread::sleep(Duration::from_secs(5));
    node.signal(libc::SIGCONT);
    wait_until("every hook delivered", Duration::from_secs(20), || {
        shard()["delivered"] == 8
    });
    drop(delivered);
    let stats = shard();
    assert_eq!(
        (stats["retried"].as_u64(), stats["breaker_opens"].as_u64()),
        (Some(8), Some(0))
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        16,
        "each cut attempt's request, then its retry"
    );
    let sink = get(node.addr, "/v1/sinks").json()["sinks"][0].clone();
    assert_eq!(sink["breaker"], "closed");
    let error = sink["last_failure"]["error"].as_str().unwrap();
    assert!(error.starts_with("timeout: "), "{error}");
    assert!(
        error.contains("(cut short by a stall of this process: it did not run for "),
        "{error}"
    );
}
