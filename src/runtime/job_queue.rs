//! The bounded queue from a shard to its IO workers. Idle workers park on a
//! condvar at once: a crossbeam channel's receive spins and yields first,
//! which with dozens of idle workers on 2 cores takes CPU the shard and the
//! busy workers need.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;

pub struct JobQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

impl<T> JobQueue<T> {
    pub fn new(capacity: usize) -> JobQueue<T> {
        JobQueue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity),
                closed: false,
            }),
            ready: Condvar::new(),
            capacity,
        }
    }

    /// Queues `item`, or gives it back when the queue is full or closed.
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.state.lock();
        if state.closed || state.items.len() >= self.capacity {
            return Err(item);
        }
        state.items.push_back(item);
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// The next item; `None` once the queue is closed and empty.
    pub fn pop(&self) -> Option<T> {
        let mut state = self.state.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            self.ready.wait(&mut state);
        }
    }

    /// Wakes every waiting worker; they drain what is queued, then stop.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn bounded_fifo_that_releases_workers_when_closed() {
        let q = Arc::new(JobQueue::new(2));
        assert_eq!(q.push(1), Ok(()));
        assert_eq!(q.push(2), Ok(()));
        assert_eq!(q.push(3), Err(3));
        assert_eq!(q.pop(), Some(1));
        let worker = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while let Some(n) = q.pop() {
                    got.push(n);
                }
                got
            })
        };
        q.push(4).unwrap();
        q.close();
        assert_eq!(q.push(5), Err(5));
        assert_eq!(worker.join().unwrap(), vec![2, 4]);
    }
}
