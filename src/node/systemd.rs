//! systemd's service notifications (sd_notify(3)), for a node run as a
//! `Type=notify-reload` (or `Type=notify`) service: `READY=1` once the
//! engine is open and recovered (so `systemctl start` returns, and units
//! ordered after goad start, only then), `RELOADING=1` and `READY=1`
//! around each reload of the config, `STOPPING=1` as the node stops,
//! `STATUS=` saying what came of each, and `WATCHDOG=1` from the HTTP
//! loop every half of `WATCHDOG_USEC` (`WatchdogSec=`), so that a node
//! whose loop stops turning is restarted. They go to the datagram socket
//! `NOTIFY_SOCKET` names (a path, or `@` and an abstract name); a node
//! without it sends none. One that cannot be sent is passed over: the
//! manager's bookkeeping is not worth stopping the node for.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The service manager of the environment.
#[derive(Debug)]
pub(super) struct Systemd {
    socket: UnixDatagram,
    manager: SocketAddr,
    /// How often the loop tells the watchdog it turns, if it watches.
    watchdog_every: Option<Duration>,
}

impl Systemd {
    /// The manager `NOTIFY_SOCKET` names, if any; its watchdog if
    /// `WATCHDOG_USEC` is set, for this process (`WATCHDOG_PID`, when set,
    /// is its id).
    pub(super) fn from_environment() -> Option<Systemd> {
        let manager = manager_address(&std::env::var_os("NOTIFY_SOCKET")?)?;
        let socket = UnixDatagram::unbound().ok()?;
        let for_this_process = std::env::var("WATCHDOG_PID")
            .map_or(true, |pid| pid.trim() == std::process::id().to_string());
        let watchdog_us = std::env::var("WATCHDOG_USEC").ok();
        let watchdog_us = watchdog_us.and_then(|us| us.trim().parse::<u64>().ok());
        let watchdog_every = watchdog_us
            .filter(|&us| us > 0 && for_this_process)
            .map(|us| Duration::from_micros(us / 2));
        Some(Systemd {
            socket,
            manager,
            watchdog_every,
        })
    }

    /// The engine is open: the node serves.
    pub(super) fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// A reload of the config begins.
    pub(super) fn reloading(&self) {
        self.notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_us()));
    }

    /// The node stops.
    pub(super) fn stopping(&self) {
        self.notify("STOPPING=1\nSTATUS=stopping");
    }

    /// How often [`Systemd::alive`] must be said, if the manager watches.
    pub(super) fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog_every
    }

    /// The HTTP loop turns.
    pub(super) fn alive(&self) {
        self.notify("WATCHDOG=1");
    }

    fn notify(&self, state: &str) {
        let _ = self.socket.send_to_addr(state.as_bytes(), &self.manager);
    }
}

/// `NOTIFY_SOCKET`'s address: a path, or an abstract name after `@`.
fn manager_address(value: &std::ffi::OsStr) -> Option<SocketAddr> {
    use std::os::unix::ffi::OsStrExt;
    match value.as_bytes() {
        [] => None,
        [b'@', name @ ..] => abstract_address(name),
        _ => SocketAddr::from_pathname(value).ok(),
    }
}

#[cfg(target_os = "linux")]
fn abstract_address(name: &[u8]) -> Option<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name).ok()
}

#[cfg(not(target_os = "linux"))]
fn abstract_address(_: &[u8]) -> Option<SocketAddr> {
    None
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd's `MONOTONIC_USEC`
/// is on.
fn monotonic_us() -> u64 {
    crate::runtime::clock_ns(libc::CLOCK_MONOTONIC) / 1_000
}

/// `text` on one line, as a notification's field must be.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}
