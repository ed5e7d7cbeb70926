//! Commits awaited from async code (`Engine::commit_async`), polled by a
//! small executor of the test's own that polls again only when woken: a
//! commit resolves to its stored hook's id once the shard wakes its task,
//! many awaited on one thread share synced batches, one dropped unawaited
//! is committed all the same, and one under way when the engine stops
//! still resolves.

use super::*;
use goad::{CommitError, Committing};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

/// How long a pending commit's task may wait for its wake.
const WAKE_WITHIN: Duration = Duration::from_secs(10);

/// Unparks the polling thread, and says it was woken.
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

/// Polls `commits` on this thread until each resolved, polling again only
/// after a wake: a commit whose answer came without waking its task fails
/// the test after `WAKE_WITHIN`. Their answers, in order.
fn await_all(commits: Vec<Committing>) -> Vec<Result<String, CommitError>> {
    let unpark = Arc::new(Unpark {
        woken: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut pending: Vec<Option<Committing>> = commits.into_iter().map(Some).collect();
    let mut answers: Vec<Option<Result<String, CommitError>>> =
        pending.iter().map(|_| None).collect();
    loop {
        for (commit, answer) in pending.iter_mut().zip(&mut answers) {
            if let Some(future) = commit {
                if let Poll::Ready(a) = Pin::new(future).poll(&mut cx) {
                    (*answer, *commit) = (Some(a), None);
                }
            }
        }
        if pending.iter().all(Option::is_none) {
            return answers.into_iter().map(Option::unwrap).collect();
        }
        let deadline = Instant::now() + WAKE_WITHIN;
        while !unpark.woken.swap(false, Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "a pending commit's task was not woken");
            std::thread::park_timeout(left);
        }
    }
}

/// A sink of type `seen` that keeps the id of each hook delivered to it.
fn recording() -> (Arc<dyn Sink>, Arc<parking_lot::Mutex<Vec<String>>>) {
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let kept = seen.clone();
    let sink = sink(move |d| {
        kept.lock().push(d.hook.id.clone());
        Ok(())
    });
    (sink, seen)
}

/// An awaited commit resolves, once its shard wakes the task, to the id of
/// the hook it stored: the hook is stored under it, and delivered with it.
#[test]
fn an_awaited_commit_resolves_to_its_stored_hooks_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["gate"]));
    let gate = gate();
    let engine = gated_engine(c, &gate);
    let answers = await_all(vec![engine.commit_async(NewHook::new("s", "x"))]);
    let id = answers[0].as_ref().unwrap().clone();
    let stored = engine
        .hook_status(&id)
        .unwrap()
        .expect("stored under its id");
    assert_eq!(
        (stored.hook.id.as_str(), &stored.hook.body[..]),
        (id.as_str(), &b"x"[..])
    );
    gate.open.send(()).unwrap();
    wait_until("the hook delivered", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 0
    });
    assert_eq!(gate.passed.load(Ordering::SeqCst), 1);
}

/// Many commits awaited on one thread are in flight at once: every one
/// resolves to a distinct id that is delivered, and they share synced
/// batches (fewer group commits than commits), as `commit` from as many
/// threads would.
#[test]
fn many_commits_awaited_on_one_thread_share_synced_batches() {
    const COMMITS: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["seen"]));
    let (seen_sink, seen) = recording();
    let engine = Engine::builder(c).sink("seen", seen_sink).open().unwrap();
    let commits = (0..COMMITS)
        .map(|n| engine.commit_async(NewHook::new("s", format!("{n}"))))
        .collect();
    let mut ids: Vec<String> = await_all(commits).into_iter().map(Result::unwrap).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), COMMITS, "distinct ids");
    wait_until("every hook delivered", Duration::from_secs(10), || {
        seen.lock().len() == COMMITS
    });
    let mut delivered = seen.lock().clone();
    delivered.sort();
    assert_eq!(delivered, ids);
    let stats = &engine.stats()[0];
    assert_eq!(stats.commits, COMMITS as u64);
    assert!(
        stats.group_commits < stats.commits,
        "{} group commits for {} commits",
        stats.group_commits,
        stats.commits
    );
}

/// A commit whose future is dropped unawaited is not taken back: the hook
/// is committed and delivered all the same.
#[test]
fn a_commit_dropped_unawaited_is_committed_all_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["seen"]));
    let (seen_sink, seen) = recording();
    let engine = Engine::builder(c).sink("seen", seen_sink).open().unwrap();
    drop(engine.commit_async(NewHook::new("s", "x")));
    wait_until(
        "the dropped commit delivered",
        Duration::from_secs(10),
        || seen.lock().len() == 1,
    );
    assert_eq!(engine.stats()[0].commits, 1);
}

/// A commit under way when the engine shuts down resolves: stored (its
/// hook delivered before the engine stopped, or by the next one) or
/// refused as stopped.
#[test]
fn a_commit_under_way_when_the_engine_stops_still_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["seen"]));
    let (seen_sink, seen) = recording();
    let open = || {
        let builder = Engine::builder(c.clone()).sink("seen", seen_sink.clone());
        builder.open().unwrap()
    };
    let engine = open();
    let commit = engine.commit_async(NewHook::new("s", "x"));
    engine.shutdown();
    let answer = await_all(vec![commit]).pop().unwrap();
    drop(engine);
    match answer {
        Ok(id) => {
            let _next = open();
            wait_until("the stored hook delivered", Duration::from_secs(10), || {
                !seen.lock().is_empty()
            });
            assert!(
                seen.lock().iter().all(|seen| *seen == id),
                "{:?}",
                seen.lock()
            );
        }
        Err(e) => assert!(matches!(e, CommitError::Stopped), "{e}"),
    }
}

/// A commit refused at once (a source not configured, a body over
/// `max_body_bytes`, a stopped engine) resolves at its first poll, with
/// the error `commit` gives, and stores nothing.
#[test]
fn a_commit_refused_at_once_resolves_at_its_first_poll() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.max_body_bytes = 1_000;
    c.sources.push(source_of_kinds("s", "t", &["seen"]));
    let (seen_sink, _) = recording();
    let engine = Engine::builder(c).sink("seen", seen_sink).open().unwrap();
    let refusal = |hook: NewHook| {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut engine.commit_async(hook.clone())).poll(&mut cx) {
            Poll::Ready(Err(e)) => {
                assert_eq!(e.to_string(), engine.commit(hook).unwrap_err().to_string());
                e.to_string()
            }
            other => panic!("not refused at once: {other:?}"),
        }
    };
    assert_eq!(
        refusal(NewHook::new("nope", "x")),
        "no source \"nope\" is configured"
    );
    assert_eq!(
        refusal(NewHook::new("s", vec![b'x'; 1_001])),
        "body of 1001 bytes is over max_body_bytes (1000)"
    );
    assert_eq!(engine.hook_count().unwrap(), 0);
    engine.shutdown();
    assert_eq!(refusal(NewHook::new("s", "x")), "the engine is stopped");
}
