//! `goad serve` under systemd: the notifications of sd_notify(3) it sends
//! to the socket `NOTIFY_SOCKET` names, read here from a socket of the
//! test's as the service manager would read them.

use super::*;
use std::os::unix::net::UnixDatagram;

/// The next notification to `manager`.
fn next(manager: &UnixDatagram) -> String {
    let mut datagram = vec![0u8; 4096];
    let n = manager
        .recv(&mut datagram)
        .expect("a notification within 30 s");
    String::from_utf8(datagram[..n].to_vec()).unwrap()
}

/// The next notification to `manager` other than the watchdog's.
fn next_state(manager: &UnixDatagram) -> String {
    loop {
        let told = next(manager);
        if told != "WATCHDOG=1" {
            return told;
        }
    }
}

/// A manager's socket bound at `path` (or, for `@name`, in the abstract
/// namespace), which waits up to 30 s for each notification.
fn manager_socket(at: &str) -> UnixDatagram {
    use std::os::linux::net::SocketAddrExt;
    let socket = match at.strip_prefix('@') {
        Some(name) => {
            let address = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
            UnixDatagram::bind_addr(&address).unwrap()
        }
        None => UnixDatagram::bind(at).unwrap(),
    };
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    socket
}

/// Run as a `Type=notify-reload` service with `WatchdogSec=`, the node
/// says it is ready once its engine is open, says it reloads (with the
/// time, as systemd asks) and is ready again around a SIGHUP's reload,
/// says it stops on SIGTERM, and feeds the watchdog every half of
/// `WATCHDOG_USEC` meanwhile, idle as it is.
#[test]
fn goad_serve_tells_systemd_it_is_ready_reloading_and_stopping_and_feeds_its_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let manager = manager_socket(path.to_str().unwrap());
    let mut node = serve_with(dir.path(), "http://127.0.0.1:9/unused", |command| {
        command
            .env("NOTIFY_SOCKET", &path)
            .env("WATCHDOG_USEC", "200000")
            .env_remove("WATCHDOG_PID");
    });
    assert_eq!(
        next_state(&manager),
        "READY=1\nSTATUS=serving: 0 rows recovered"
    );
    for _ in 0..3 {
        assert_eq!(next(&manager), "WATCHDOG=1");
    }

    node.signal(libc::SIGHUP);
    let reloading = next_state(&manager);
    let at_us = reloading.strip_prefix("RELOADING=1\nMONOTONIC_USEC=");
    assert!(
        at_us.is_some_and(|us| us.parse::<u64>().is_ok()),
        "{reloading}"
    );
    assert_eq!(
        next_state(&manager),
        "READY=1\nSTATUS=serving: config reloaded"
    );

    node.signal(libc::SIGTERM);
    assert_eq!(next_state(&manager), "STOPPING=1\nSTATUS=stopping");
    assert!(node.child.wait().unwrap().success());
}

/// An abstract socket (`NOTIFY_SOCKET=@name`, as in some containers) is
/// told too; with no `WATCHDOG_USEC`, nothing but the node's states.
#[test]
fn an_abstract_notify_socket_is_told_too() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("@goad-test-{}", std::process::id());
    let manager = manager_socket(&name);
    let mut node = serve_with(dir.path(), "http://127.0.0.1:9/unused", |command| {
        command
            .env("NOTIFY_SOCKET", &name)
            .env_remove("WATCHDOG_USEC");
    });
    assert_eq!(next(&manager), "READY=1\nSTATUS=serving: 0 rows recovered");
    node.signal(libc::SIGTERM);
    assert_eq!(next(&manager), "STOPPING=1\nSTATUS=stopping");
    assert!(node.child.wait().unwrap().success());
}
