//! Commits awaited from async code (`Engine::commit_async`), polled by the
//! tests' small executor (`common::awaiting`), which polls again only
//! when woken: a commit resolves to its stored hook's id once the shard
//! wakes its task, many awaited on one thread share synced batches, one
//! dropped unawaited is committed all the same, and one under way when
//! the engine stops still resolves. (A commit refused at once:
//! `lifecycle.rs`.)

use super::*;
use goad::{CommitError, Committing};

/// Awaits `commits`, all in flight at once (see `await_in_flight`),
/// failing the test if a pending one's task is not woken within 10 s.
fn await_all(commits: Vec<Committing>) -> Vec<Result<String, CommitError>> {
    let in_flight = commits.len();
    awaiting::await_in_flight(in_flight, commits.into_iter(), Duration::from_secs(10))
}

/// A data directory whose source `s` delivers to a sink that keeps the id
/// of each hook it gets, for the engines opened on it.
struct Recorded {
    _dir: tempfile::TempDir,
    config: goad::Config,
    sink: Arc<dyn Sink>,
    seen: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Recorded {
    fn new() -> Recorded {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        config.sources.push(source_of_kinds("s", "t", &["seen"]));
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let kept = seen.clone();
        let sink = sink(move |d| {
            kept.lock().push(d.hook.id.clone());
            Ok(())
        });
        Recorded {
            _dir: dir,
            config,
            sink,
            seen,
        }
    }

    fn open(&self) -> Engine {
        let builder = Engine::builder(self.config.clone()).sink("seen", self.sink.clone());
        builder.open().unwrap()
    }
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
    let recorded = Recorded::new();
    let (engine, seen) = (recorded.open(), &recorded.seen);
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
    let recorded = Recorded::new();
    let (engine, seen) = (recorded.open(), &recorded.seen);
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
    let recorded = Recorded::new();
    let (engine, seen) = (recorded.open(), &recorded.seen);
    let commit = engine.commit_async(NewHook::new("s", "x"));
    engine.shutdown();
    let answer = await_all(vec![commit]).pop().unwrap();
    drop(engine);
    match answer {
        Ok(id) => {
            let _next = recorded.open();
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
