//! Commits awaited as an executor's tasks are (`Engine::commit_async`), by
//! an executor small enough to read: it polls again only when a wake
//! comes, so a commit whose answer came without waking its task is never
//! seen resolved. The tests of awaited commits and the commit bench use it.

use goad::{CommitError, Committing};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Unparks the thread that polls, and says it was woken.
struct Unpark {
    woken: AtomicBool,
    thread: std::thread::Thread,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// Awaits `commits` on this thread, `in_flight` at a time: each is
/// started (drawn from the iterator) as an earlier one resolves, and all
/// those in flight are polled when a wake comes. Panics if none comes
/// within `wake_within` while some are pending. Their answers, in the
/// order they were started.
pub fn await_in_flight(
    in_flight: usize,
    mut commits: impl Iterator<Item = Committing>,
    wake_within: Duration,
) -> Vec<Result<String, CommitError>> {
    let unpark = Arc::new(Unpark {
        woken: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut answers: Vec<Option<Result<String, CommitError>>> = Vec::new();
    // Each task: the commit it awaits and where its answer goes.
    let mut tasks: Vec<Option<(Committing, usize)>> = (0..in_flight).map(|_| None).collect();
    loop {
        for task in &mut tasks {
            loop {
                match task {
                    Some((committing, at)) => match Pin::new(committing).poll(&mut cx) {
                        Poll::Ready(answer) => (answers[*at], *task) = (Some(answer), None),
                        Poll::Pending => break,
                    },
                    None => match commits.next() {
                        Some(committing) => {
                            *task = Some((committing, answers.len()));
                            answers.push(None);
                        }
                        None => break,
                    },
                }
            }
        }
        if tasks.iter().all(Option::is_none) {
            return answers.into_iter().map(|a| a.expect("resolved")).collect();
        }
        let deadline = Instant::now() + wake_within;
        while !unpark.woken.swap(false, Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "a pending commit's task was not woken");
            std::thread::park_timeout(left);
        }
    }
}
