//! The bounded queue from a shard to its IO workers. Idle workers park on a
//! condvar at once: a crossbeam channel's receive spins and yields first,
//! which with dozens of idle workers on 2 cores takes CPU the shard and the
//! busy workers need.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;

pub struct JobQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    items: VecDeque<T>,
    capacity: usize,
    closed: bool,
}

/// What a worker waiting on the queue gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Popped<T> {
    Item(T),
    /// The queue was empty and the worker's `leave` check said it goes.
    Leave,
    /// The queue is closed and empty.
    Closed,
}

impl<T> JobQueue<T> {
    pub fn new(capacity: usize) -> JobQueue<T> {
        JobQueue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity),
                capacity,
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    /// Bounds the queue at `capacity` from now on (items queued stay).
    pub fn set_capacity(&self, capacity: usize) {
        self.state.lock().capacity = capacity;
    }

    /// Queues `item`, or gives it back when the queue is full or closed.
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.state.lock();
        if state.closed || state.items.len() >= state.capacity {
            return Err(item);
        }
        state.items.push_back(item);
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// The next item; while there is none, `leave` is asked before each
    /// wait (and so after each [`JobQueue::wake_all`]) whether the worker
    /// goes instead.
    pub fn pop(&self, leave: impl Fn() -> bool) -> Popped<T> {
        let mut state = self.state.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Popped::Item(item);
            }
            if state.closed {
                return Popped::Closed;
            }
            if leave() {
                return Popped::Leave;
            }
            self.ready.wait(&mut state);
        }
    }

    /// Takes the first queued item `which` picks off the queue.
    pub fn take(&self, which: impl Fn(&T) -> bool) -> Option<T> {
        let mut state = self.state.lock();
        let at = state.items.iter().position(which)?;
        state.items.remove(at)
    }

    /// Wakes every waiting worker to ask its `leave` again.
    pub fn wake_all(&self) {
        let _state = self.state.lock();
        self.ready.notify_all();
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
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::Arc;

    const STAY: fn() -> bool = || false;

    #[test]
    fn bounded_fifo_that_releases_workers_when_closed() {
        let q = Arc::new(JobQueue::new(2));
        assert_eq!(q.push(1), Ok(()));
        assert_eq!(q.push(2), Ok(()));
        assert_eq!(q.push(3), Err(3));
        assert_eq!(q.pop(STAY), Popped::Item(1));
        let worker = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while let Popped::Item(n) = q.pop(STAY) {
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

    #[test]
    fn a_new_capacity_bounds_what_is_queued_next() {
        let q = JobQueue::new(1);
        q.push(1).unwrap();
        q.set_capacity(3);
        assert_eq!((q.push(2), q.push(3), q.push(4)), (Ok(()), Ok(()), Err(4)));
        q.set_capacity(1);
        assert_eq!(q.push(5), Err(5), "three queued: over the new bound");
    }

    #[test]
    fn take_removes_the_first_item_picked_and_keeps_the_order() {
        let q = JobQueue::new(4);
        (1..=4).for_each(|n| q.push(n).unwrap());
        assert_eq!(q.take(|n| n % 2 == 0), Some(2));
        assert_eq!(q.take(|n| *n > 9), None);
        let rest: Vec<_> = std::iter::from_fn(|| match q.pop(|| true) {
            Popped::Item(n) => Some(n),
            _ => None,
        })
        .collect();
        assert_eq!(rest, [1, 3, 4]);
    }

    /// A waiting worker is asked again whether it leaves when woken; an
    /// item queued goes to a worker before any leaves.
    #[test]
    fn a_woken_worker_leaves_when_its_check_says_so() {
        let q = Arc::new(JobQueue::<u32>::new(1));
        let (asked, go) = (
            Arc::new(AtomicU32::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let worker = {
            let (q, asked, go) = (q.clone(), asked.clone(), go.clone());
            std::thread::spawn(move || {
                q.pop(|| {
                    // Read before counted: once asked, its answer is given.
                    let leaves = go.load(Ordering::SeqCst);
                    asked.fetch_add(1, Ordering::SeqCst);
                    leaves
                })
            })
        };
        // Asked once, under the lock it then waits with: `wake_all`, which
        // takes the lock, finds it waiting.
        while asked.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        go.store(true, Ordering::SeqCst);
        q.wake_all();
        assert_eq!(worker.join().unwrap(), Popped::Leave);
        assert!(asked.load(Ordering::SeqCst) >= 2, "asked again once woken");
        q.push(7).unwrap();
        assert_eq!(q.pop(|| true), Popped::Item(7));
    }
}
