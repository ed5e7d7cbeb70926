//! A node whose process is stopped (SIGSTOP) and let go (SIGCONT), as a
//! paused container, a frozen cgroup or a VM held by its host is: the
//! attempts it had in flight fail by their own timeouts though their
//! receiver answered in time, and are not held against the sink.

use super::*;

/// Eight attempts in flight when the node is stopped for longer than
/// their receive timeout: each fails when it is let go, is retried at
/// once and delivered, and the sink's breaker (five failures) stays
/// closed; the sink's last failure says why it was not held against it.
#[test]
fn attempts_cut_short_by_a_stopped_process_do_not_open_the_sink_s_breaker() {
    let receiver = Receiver::start(|_| Reply::status(200).delayed(Duration::from_secs(1))).unwrap();
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
    // Stopped for longer than the attempts' 3 s receive timeout, while
    // the receiver answers each within its 1 s.
    std::thread::sleep(Duration::from_secs(5));
    node.signal(libc::SIGCONT);
    wait_until("every hook delivered", Duration::from_secs(20), || {
        shard()["delivered"] == 8
    });
    let stats = shard();
    assert_eq!(
        (stats["retried"].as_u64(), stats["breaker_opens"].as_u64()),
        (Some(8), Some(0))
    );
    assert_eq!(
        receiver.count(),
        16,
        "each cut attempt answered, then its retry"
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
