//! A one-shot reply: one value from the shard thread to one waiting caller.
//!
//! The caller parks on a condvar at once. A crossbeam channel's receive
//! spins and yields before it parks, which is cheap for one waiter but, with
//! dozens of committers waiting on 2 cores, burns the CPU the shard needs to
//! answer them.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Instant;

enum Slot<T> {
    Empty,
    Full(T),
    /// The sender was dropped without sending.
    Closed,
}

struct Shared<T> {
    slot: Mutex<Slot<T>>,
    ready: Condvar,
}

/// The sending half; dropping it unsent closes the reply.
pub struct Sender<T>(Arc<Shared<T>>);

/// The waiting half.
pub struct Receiver<T>(Arc<Shared<T>>);

/// Why no value came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    Timeout,
    /// The sender went away without answering.
    Closed,
}

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        slot: Mutex::new(Slot::Empty),
        ready: Condvar::new(),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    pub fn send(self, value: T) {
        *self.0.slot.lock() = Slot::Full(value);
        self.0.ready.notify_one();
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut slot = self.0.slot.lock();
        if matches!(*slot, Slot::Empty) {
            *slot = Slot::Closed;
            self.0.ready.notify_one();
        }
    }
}

impl<T> Receiver<T> {
    /// Waits for the value until `deadline`.
    pub fn recv_deadline(self, deadline: Instant) -> Result<T, RecvError> {
        let mut slot = self.0.slot.lock();
        loop {
            match std::mem::replace(&mut *slot, Slot::Empty) {
                Slot::Full(value) => return Ok(value),
                Slot::Closed => return Err(RecvError::Closed),
                Slot::Empty => {}
            }
            if self.0.ready.wait_until(&mut slot, deadline).timed_out() {
                return match std::mem::replace(&mut *slot, Slot::Empty) {
                    Slot::Full(value) => Ok(value),
                    Slot::Closed => Err(RecvError::Closed),
                    Slot::Empty => Err(RecvError::Timeout),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn delivers_a_value_reports_a_dropped_sender_and_times_out() {
        let (tx, rx) = channel();
        let t = std::thread::spawn(move || tx.send(7));
        assert_eq!(
            rx.recv_deadline(Instant::now() + Duration::from_secs(5)),
            Ok(7)
        );
        t.join().unwrap();
        let (tx, rx) = channel::<u8>();
        drop(tx);
        assert_eq!(
            rx.recv_deadline(Instant::now() + Duration::from_secs(5)),
            Err(RecvError::Closed)
        );
        let (_tx, rx) = channel::<u8>();
        assert_eq!(
            rx.recv_deadline(Instant::now() + Duration::from_millis(10)),
            Err(RecvError::Timeout)
        );
    }
}
