//! A descriptor held in reserve for the moment the process has no other.
//!
//! When the process is out of descriptors (`EMFILE`, or the system's
//! `ENFILE`), `accept` fails and the connection stays in the listener's
//! backlog, announced by no further event: its client would wait for an
//! answer that never comes. The loop then gives up the spare, accepts one
//! waiting connection with it, refuses it (503, as past
//! `http.max_connections`) and takes the spare back, until none waits.

use mio::net::{TcpListener, TcpStream};
use std::fs::File;
use std::io;

pub(super) struct SpareFd(Option<File>);

/// What [`SpareFd::refuse_one`] did.
pub(super) enum Refusal {
    Refused,
    NoneWaiting,
    /// No spare to give up (another thread took its descriptor
    /// meanwhile): the loop tries again later.
    NoSpare,
}

impl SpareFd {
    pub fn new() -> SpareFd {
        SpareFd(Self::open())
    }

    /// Whether `e` says the process or the system is out of descriptors.
    pub fn is_exhaustion(e: &io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }

    /// With the spare given up, accepts one connection waiting on
    /// `listener` and hands it to `refuse` (which closes it), then takes
    /// the spare back.
    pub fn refuse_one(
        &mut self,
        listener: &TcpListener,
        refuse: impl FnOnce(TcpStream),
    ) -> Refusal {
        if self.0.take().is_none() {
            self.0 = Self::open();
            return Refusal::NoSpare;
        }
        let accepted = loop {
            match listener.accept() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                accepted => break accepted,
            }
        };
        let refusal = match accepted {
            Ok((stream, _)) => {
                refuse(stream);
                Refusal::Refused
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Refusal::NoneWaiting,
            Err(_) => Refusal::NoSpare,
        };
        self.0 = Self::open();
        match self.0 {
            Some(_) => refusal,
            None => Refusal::NoSpare,
        }
    }

    fn open() -> Option<File> {
        File::open("/dev/null").ok()
    }
}
