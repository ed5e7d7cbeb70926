//! A commit awaited: [`Engine::commit_async`](super::Engine::commit_async)
//! for hosts whose request handlers are futures (an axum or hyper service
//! on tokio, smol, async-std). It is [`commit_then`](super::Engine::commit_then)
//! seen as a future: the shard's answer is kept in a slot shared with the
//! future and wakes the task that waits for it, so no executor thread is
//! held while the batch syncs and goad needs no async runtime of its own.

use super::errors::CommitError;
use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

type Answer = Result<String, CommitError>;

/// Where the shard leaves a commit's answer, and the task to wake for it.
#[derive(Default)]
struct Slot {
    answer: Option<Answer>,
    waker: Option<Waker>,
}

/// A commit under way: resolves to the hook id once the hook and its rows
/// are durable (or to the error that refused it). Dropping it does not
/// take the commit back: the hook is committed all the same, its answer
/// unread.
#[must_use = "a commit is under way whether or not it is awaited; await it for its id"]
pub struct Committing {
    /// `None` once it resolved.
    slot: Option<Arc<Mutex<Slot>>>,
}

// A host awaits it on any executor's task, spawned anywhere.
const _: fn() = || {
    fn spawnable<T: Send + 'static>() {}
    spawnable::<Committing>();
};

impl Committing {
    /// A commit answered already: refused before it reached a shard.
    pub(super) fn answered(answer: Answer) -> Committing {
        let slot = Slot {
            answer: Some(answer),
            waker: None,
        };
        Committing {
            slot: Some(Arc::new(Mutex::new(slot))),
        }
    }

    /// A commit still to be answered, and what answers it (called once,
    /// on the shard thread, by `commit_then`).
    pub(super) fn pending() -> (Committing, impl FnOnce(Answer) + Send + 'static) {
        let slot = Arc::new(Mutex::new(Slot::default()));
        let answer = {
            let slot = slot.clone();
            move |answer| {
                let waker = {
                    let mut slot = slot.lock();
                    slot.answer = Some(answer);
                    slot.waker.take()
                };
                // Woken outside the lock: the task may poll at once.
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
        };
        (Committing { slot: Some(slot) }, answer)
    }
}

impl Future for Committing {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let slot = self
            .slot
            .as_ref()
            .expect("a commit's future polled again after it resolved");
        let mut guard = slot.lock();
        if let Some(answer) = guard.answer.take() {
            drop(guard);
            self.slot = None;
            return Poll::Ready(answer);
        }
        match &mut guard.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waker => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl std::fmt::Debug for Committing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committing").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::task::Wake;

    /// A task's waker that counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicU32);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(committing: &mut Committing, task: &Arc<Wakes>) -> Poll<Answer> {
        let waker = Waker::from(task.clone());
        Pin::new(committing).poll(&mut Context::from_waker(&waker))
    }

    /// The answer wakes the task that polled last (a future moved to
    /// another task is woken there), once, and the future resolves to it.
    #[test]
    fn the_answer_wakes_the_task_that_polled_last() {
        let (mut committing, answer) = Committing::pending();
        let (first, last) = (Arc::new(Wakes::default()), Arc::new(Wakes::default()));
        assert!(poll(&mut committing, &first).is_pending());
        assert!(poll(&mut committing, &last).is_pending());
        assert!(poll(&mut committing, &last).is_pending());
        answer(Ok("h1".into()));
        let wakes = |task: &Arc<Wakes>| task.0.load(Ordering::SeqCst);
        assert_eq!((wakes(&first), wakes(&last)), (0, 1));
        assert!(matches!(poll(&mut committing, &last), Poll::Ready(Ok(id)) if id == "h1"));
    }

    #[test]
    #[should_panic(expected = "a commit's future polled again after it resolved")]
    fn a_future_polled_after_it_resolved_says_so() {
        let mut committing = Committing::answered(Err(CommitError::Stopped));
        let task = Arc::new(Wakes::default());
        assert!(matches!(
            poll(&mut committing, &task),
            Poll::Ready(Err(CommitError::Stopped))
        ));
        let _ = poll(&mut committing, &task);
    }
}
