//! How a commit is answered once its batch is durable (or failed): a caller
//! parked on a one-shot ([`Engine::commit`](super::Engine::commit)), or a
//! callback run on the shard thread
//! ([`Engine::commit_then`](super::Engine::commit_then), for callers such as
//! the node's HTTP loop that must not block).

use super::errors::CommitError;
use super::oneshot;

/// What a durable commit answers: `None` when its hook was stored, or the
/// id of the hook that took its dedupe key first (see `store::dedupe`).
pub type FirstId = Option<String>;

type Answer = Result<FirstId, CommitError>;

type Callback = Box<dyn FnOnce(Answer) + Send>;

/// Answers one commit exactly once. Dropped unanswered (the shard stopped),
/// it answers `Stopped`.
pub struct CommitReply(Option<Kind>);

enum Kind {
    Wait(oneshot::Sender<Answer>),
    Notify(Callback),
}

impl CommitReply {
    pub fn wait(sender: oneshot::Sender<Answer>) -> CommitReply {
        CommitReply(Some(Kind::Wait(sender)))
    }

    pub fn notify(callback: impl FnOnce(Answer) + Send + 'static) -> CommitReply {
        CommitReply(Some(Kind::Notify(Box::new(callback))))
    }

    pub fn send(mut self, result: Answer) {
        match self.0.take() {
            Some(Kind::Wait(sender)) => sender.send(result),
            Some(Kind::Notify(callback)) => notify(callback, result),
            None => {}
        }
    }

    /// Forgets the commit unanswered: its caller was told another way.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CommitReply {
    fn drop(&mut self) {
        if let Some(kind) = self.0.take() {
            match kind {
                Kind::Wait(sender) => drop(sender),
                Kind::Notify(callback) => notify(callback, Err(CommitError::Stopped)),
            }
        }
    }
}

/// Runs a host's callback on the shard thread; one that panics is logged,
/// and the shard goes on (as a sink's panic is a failed attempt).
fn notify(callback: Callback, result: Answer) {
    // The callback is the host's: the shard's state is not in its reach.
    if let Err(panic) = crate::panics::catch(|| callback(result)) {
        crate::log::error(
            "a commit_then callback panicked; the shard goes on",
            &[("panic", &panic)],
        );
    }
}
