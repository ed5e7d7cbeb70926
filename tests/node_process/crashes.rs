//! A node stopped with SIGTERM (graceful: exit 0) or killed with SIGKILL
//! under ingest load, then restarted on the same data directory: either
//! way every hook it answered 202 for reaches the sink.

use super::*;

#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

fn stop_under_load_then_restart(signal: Signal) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = flaky_receiver();
    let url = receiver.url("/hooks");
    let mut node = serve(dir.path(), &url);
    let acked = Arc::new(Mutex::new(HashSet::new()));
    ingest_then_stop(&mut node, &acked, 3_000, |node| {
        assert!(receiver.ok_count() > 0, "deliveries were under way");
        match signal {
            Signal::Kill => kill(node),
            Signal::Term => {
                node.signal(libc::SIGTERM);
                let exit = node.child.wait().unwrap();
                assert!(exit.success(), "a graceful stop exits 0, got {exit}");
            }
        }
    });
    all_delivered_after_a_restart(dir.path(), &receiver, &acked, &format!("{signal:?}"));
}

#[test]
fn every_acknowledged_hook_is_delivered_after_sigterm_and_a_restart() {
    stop_under_load_then_restart(Signal::Term);
}

#[test]
fn every_acknowledged_hook_is_delivered_after_sigkill_and_a_restart() {
    stop_under_load_then_restart(Signal::Kill);
}

/// A node killed again and again under ingest load, each time once 1,000
/// more hooks were acknowledged and restarted on the same directory, loses
/// none: after each kill `goad verify` finds the store sound, and the last
/// node delivers every hook any of them answered 202. `GOAD_KILLS` sets
/// the number of kills (3 by default, as CI runs it; more for a soak).
#[test]
fn a_node_killed_again_and_again_loses_no_acknowledged_hook() {
    let kills = soak_count("GOAD_KILLS", 3);
    let dir = tempfile::tempdir().unwrap();
    let receiver = flaky_receiver();
    let url = receiver.url("/hooks");
    let acked = Arc::new(Mutex::new(HashSet::new()));
    for kills_so_far in 1..=kills {
        let mut node = serve(dir.path(), &url);
        ingest_then_stop(&mut node, &acked, kills_so_far * 1_000, kill);
        assert_verified(dir.path(), &format!("kill {kills_so_far}"));
    }
    all_delivered_after_a_restart(dir.path(), &receiver, &acked, &format!("{kills} kills"));
}
