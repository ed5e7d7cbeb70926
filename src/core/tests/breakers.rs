//! Circuit breakers: a failing key parked, probed and closed; permanent
//! answers neither open one nor keep it open; a park never outlives its
//! row's retry horizon.

use super::*;

/// The one sink key of `breaker_config`'s source.
fn breaker_key() -> SinkKey {
    key_of("a", 0, "x")
}

/// Source `a`'s breaker of type `kind` reported moved from one index to another.
fn moved_event(from: u16, to: u16, kind: &str) -> BreakerEvent {
    BreakerEvent::Moved {
        from: key_of("a", from, kind),
        to: key_of("a", to, kind),
    }
}

/// The store ops that move source `a`'s open HTTP breaker (its first
/// open, until `until_ms`) from index 0 to index 1, its sink at `spot`.
fn entry_moved(until_ms: u64, spot: Option<SinkSpot>) -> [StoreOp; 2] {
    let closed = BreakerEvent::Closed {
        key: key_of("a", 0, "http"),
    };
    let opened = BreakerEvent::Opened {
        key: key_of("a", 1, "http"),
        until_ms,
        opens: 1,
    };
    [
        StoreOp::Breaker {
            event: closed,
            spot: None,
        },
        StoreOp::Breaker {
            event: opened,
            spot,
        },
    ]
}

fn attempts_and_due(m: &Model) -> (u32, Vec<u32>, Vec<u64>) {
    let mut attempts: Vec<u32> = m.rows.values().map(|(s, _)| s.attempts).collect();
    attempts.sort_unstable();
    (
        attempts.iter().sum(),
        attempts,
        m.due.keys().map(|(_, at, _)| *at).collect(),
    )
}

/// Reference scenario 17: three failures open the breaker; the other rows
/// park without spending attempts; a failed probe reopens it for longer;
/// once the sink recovers the probe closes it and every row is delivered
/// once. Each change of the breaker is reported once, in order. Rows never
/// attempted park once: one until the period ends, to be a probe, the
/// others held until the breaker closes.
#[test]
fn a_breaker_parks_a_failing_key_probes_and_closes() {
    let (mut c, mut m) = breaker_setup(breaker_config(3, 500, 1_000), 10);
    let t = 1_000;
    settle_at(&mut c, &mut m, t, &mut |_| fail(FailureClass::Transient));
    let (sum, attempts, due) = attempts_and_due(&m);
    assert_eq!(sum, 3);
    assert_eq!(attempts, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
    let count = |due: &[u64], at_ms| due.iter().filter(|&&at| at == at_ms).count();
    assert_eq!(
        (count(&due, t + 500), count(&due, HELD_DUE_MS)),
        (4, 6),
        "the failed rows and one other due at the end of the period: {due:?}"
    );
    assert_eq!(c.stats().breakers_open, 1);
    let opened = |until_ms, opens| BreakerEvent::Opened {
        key: breaker_key(),
        until_ms,
        opens,
    };
    assert_eq!(breaker_events(&mut c), [opened(t + 500, 1)]);
    assert_eq!(
        c.poll_deadline(t),
        Some(t + 500),
        "woken at the end of the open period"
    );

    settle_at(&mut c, &mut m, t + 600, &mut |_| {
        fail(FailureClass::Transient)
    });
    let (sum, _, due) = attempts_and_due(&m);
    assert_eq!(sum, 4, "one probe, which failed");
    assert_eq!(
        (count(&due, t + 1_600), count(&due, HELD_DUE_MS)),
        (4, 6),
        "reopened for 1,000 ms, the held rows not read: {due:?}"
    );
    assert_eq!(
        c.stats().parked,
        10 + 4,
        "every row parked once, then the four due again (not the held six)"
    );
    assert_eq!(breaker_events(&mut c), [opened(t + 1_600, 2)]);

    let mut delivered = Vec::new();
    settle_at(&mut c, &mut m, t + 1_600, &mut |job| {
        delivered.push(job.row);
        Ok(())
    });
    delivered.sort();
    delivered.dedup();
    assert_eq!(delivered.len(), 10, "each row delivered exactly once");
    assert!(m.rows.is_empty());
    assert_eq!(c.stats().breakers_open, 0);
    assert_eq!(
        breaker_events(&mut c),
        [BreakerEvent::Closed { key: breaker_key() }]
    );
}

/// An attempt that started before the breaker opened and succeeds after
/// it does not close it: the queued rows stay parked for the open period
/// and the key's next attempt is the probe.
#[test]
fn a_late_success_of_an_attempt_started_before_the_open_leaves_the_breaker_open() {
    let config = breaker_config(3, 500, 1_000);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..10 {
        m.add("t", "a", &["x"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs: Vec<Job> = std::iter::from_fn(|| c.poll_job(0)).collect();
    assert_eq!(jobs.len(), 8, "sink_concurrency");
    for job in &jobs[..3] {
        c.handle_outcome(10, job.id, fail(FailureClass::Transient), TOOK);
    }
    c.handle_outcome(20, jobs[3].id, Ok(()), TOOK);
    let _ = m.apply(&mut c);
    assert_eq!(c.stats().breakers_open, 1);
    assert_eq!(
        breaker_events(&mut c),
        [BreakerEvent::Opened {
            key: breaker_key(),
            until_ms: 510,
            opens: 1
        }],
        "opened once, not closed by the late success"
    );
    assert_eq!(m.rows.len(), 9, "the late success is delivered");
    assert!(c.poll_job(20).is_none(), "nothing starts while open");
    assert_eq!(c.stats().parked, 2, "the two queued rows parked");
    for job in &jobs[4..] {
        c.handle_outcome(30, job.id, Ok(()), TOOK);
    }
    let _ = m.apply(&mut c);
    assert_eq!(c.stats().breakers_open, 1);
    assert_eq!(breaker_events(&mut c), []);
}

/// Reference scenario 19: permanent errors never open a breaker.
#[test]
fn permanent_errors_dead_letter_without_opening_the_breaker() {
    let (mut c, mut m) = breaker_setup(breaker_config(2, 500, 1_000), 5);
    settle_at(&mut c, &mut m, 0, &mut |_| fail(FailureClass::Permanent));
    assert!(m.rows.is_empty());
    assert_eq!(
        (c.stats().dead, c.stats().parked, c.stats().breakers_open),
        (5, 0, 0)
    );
}

/// Reference scenario 20: while open, the rows park; when the probe's
/// answer is permanent the breaker closes and every row is dead-lettered.
#[test]
fn a_permanent_answer_to_the_probe_closes_the_breaker() {
    let (mut c, mut m) = breaker_setup(breaker_config(2, 300, 300), 5);
    settle_at(&mut c, &mut m, 0, &mut |_| fail(FailureClass::Transient));
    let (_, attempts, _) = attempts_and_due(&m);
    assert_eq!(attempts, [0, 0, 0, 1, 1], "three rows parked at 0 attempts");
    settle_at(&mut c, &mut m, 350, &mut |_| fail(FailureClass::Permanent));
    settle_at(&mut c, &mut m, 700, &mut |_| fail(FailureClass::Permanent));
    assert!(m.rows.is_empty(), "all five dead-lettered");
    assert_eq!((c.stats().dead, c.stats().breakers_open), (5, 0));
}

/// The retry horizon ends a park: a parked row comes due at its horizon,
/// and parked again at or past it, it is dead-lettered as `retry_horizon`.
#[test]
fn a_park_never_outlives_the_rows_retry_horizon() {
    let mut config = breaker_config(1, 60_000, 60_000);
    config.retry.max_elapsed_ms = 1_000;
    let mut c = core(&config, calls_at_once(1));
    let mut m = Model::default();
    m.add("t", "a", &["x"], 0);
    m.add("t", "a", &["x"], 0);
    // The first row fails at 100 and opens the breaker for a minute; both park.
    settle_at(&mut c, &mut m, 100, &mut |_| fail(FailureClass::Transient));
    let due: Vec<u64> = m.due.keys().map(|(_, at, _)| *at).collect();
    assert_eq!(
        due,
        [1_100, 60_100],
        "the tried row comes due at its horizon, the untried one when the breaker reopens"
    );
    let dead_before = c.stats().dead;
    settle_at(&mut c, &mut m, 1_100, &mut |_| Ok(()));
    assert_eq!(c.stats().dead, dead_before + 1);
    assert_eq!(m.rows.len(), 1, "only the never-tried row is left, parked");
}

/// A backlog behind a sink that stays down is written once: rows never
/// attempted wait with the held rows while probe after probe fails (the
/// first of each open period parked until its end, to be the probe), and
/// the probe that succeeds makes them all due. Before, every row was
/// parked again at the end of every open period.
#[test]
fn a_backlog_behind_a_sink_that_stays_down_is_parked_once_and_woken_by_the_closing_probe() {
    let (mut c, mut m) = breaker_setup(breaker_config(1, 100, 400), 1_000);
    let down = &mut |_: &Job| fail(FailureClass::Transient);
    let t = 1_000;
    settle_at(&mut c, &mut m, t, down);
    let parked_at_open = c.stats().parked;
    assert_eq!(
        parked_at_open, 1_000,
        "each row parked once as the breaker opened"
    );
    let held = |m: &Model| m.due.keys().filter(|(_, at, _)| *at == HELD_DUE_MS).count();
    assert_eq!(
        held(&m),
        998,
        "all but the failed row and the probe row are held"
    );
    // Probes at t + 100, + 300 (opened for 200), + 700 (400), + 1,100
    // (400): each fails, and only the probe row and the failed row are
    // written again.
    let (mut now_ms, mut probes_at) = (t, Vec::new());
    while probes_at.len() < 4 {
        now_ms = c.poll_deadline(now_ms).expect("woken for the next probe");
        settle_at(&mut c, &mut m, now_ms, &mut |_: &Job| {
            probes_at.push(now_ms);
            fail(FailureClass::Transient)
        });
        let _ = m.apply(&mut c);
        assert_eq!(held(&m), 998, "at {now_ms}: the held rows are not read");
    }
    assert_eq!(probes_at, [t + 100, t + 300, t + 700, t + 1_100]);
    assert!(
        c.stats().parked - parked_at_open <= 4 * 2,
        "{} parks after the open",
        c.stats().parked - parked_at_open
    );
    let mut delivered = HashSet::new();
    now_ms = c.poll_deadline(now_ms).unwrap();
    while !m.rows.is_empty() {
        settle_at(&mut c, &mut m, now_ms, &mut |job: &Job| {
            assert!(delivered.insert(job.row), "{:?} delivered twice", job.row);
            Ok(())
        });
        now_ms += 1;
    }
    assert_eq!(delivered.len(), 1_000);
    assert_eq!(c.stats().breakers_open, 0);
}

/// The held rows do not depend on their probe row: when the rows due at the
/// end of the open period are gone (dead-lettered, say; here taken out of
/// the index), the end of the period with no row claimed to probe makes
/// the held rows due, and one of them probes.
#[test]
fn held_rows_are_made_due_when_an_open_period_ends_with_no_probe_row() {
    let (mut c, mut m) = breaker_setup(breaker_config(1, 100, 100), 10);
    let t = 1_000;
    settle_at(&mut c, &mut m, t, &mut |_| fail(FailureClass::Transient));
    let held = |m: &Model| m.due.keys().filter(|(_, at, _)| *at == HELD_DUE_MS).count();
    assert_eq!(held(&m), 8);
    // The two rows due when the period ends (the failed row and the probe
    // row) leave the due index, as a dead-letter pass would take them.
    let due_at_end: Vec<_> = (m.due.keys())
        .filter(|(_, at, _)| *at == t + 100)
        .cloned()
        .collect();
    assert_eq!(due_at_end.len(), 2);
    for key in &due_at_end {
        m.due.remove(key);
        m.rows.remove(&key.2);
    }
    assert_eq!(
        c.poll_deadline(t),
        Some(t + 100),
        "woken at the period's end"
    );
    settle_at(&mut c, &mut m, t + 100, &mut |_| panic!("no row is due"));
    assert_eq!(held(&m), 8, "the scans have a while to reach the probe row");
    the_probe_check_wakes_the_held_rows(&mut c, &mut m, t);
}

/// Nor on the row admitted to probe: when it never starts (here the
/// failed row, past its retry horizon when its turn comes, is
/// dead-lettered instead), the probe's check wakes the held rows, and one
/// of them probes. Before, the breaker stayed half-open with no probe
/// and its held rows waited for a new row of the key, which a source
/// that went quiet (or moved to another tenant) never sends.
#[test]
fn held_rows_are_made_due_when_the_row_admitted_to_probe_never_starts() {
    let mut config = breaker_config(1, 100, 100);
    config.retry.max_elapsed_ms = 100;
    let (mut c, mut m) = breaker_setup(config, 10);
    let t = 1_000;
    settle_at(&mut c, &mut m, t, &mut |_| fail(FailureClass::Transient));
    let held = |m: &Model| m.due.keys().filter(|(_, at, _)| *at == HELD_DUE_MS).count();
    assert_eq!(held(&m), 8);
    // The probe row (never attempted) leaves the index, as a dead-letter
    // pass would take it; the failed row is due at the period's end, its
    // horizon.
    let untried: Vec<_> = (m.due.keys())
        .filter(|(_, at, row)| *at != HELD_DUE_MS && m.rows[row].0.attempts == 0)
        .cloned()
        .collect();
    assert_eq!(untried.len(), 1);
    m.due.remove(&untried[0]);
    m.rows.remove(&untried[0].2);
    let dead_before = c.stats().dead;
    settle_at(&mut c, &mut m, t + 100, &mut |_| {
        panic!("the failed row is past its horizon")
    });
    assert_eq!(c.stats().dead, dead_before + 1);
    assert_eq!(held(&m), 8);
    the_probe_check_wakes_the_held_rows(&mut c, &mut m, t);
}

/// After `breaker_setup`'s breaker of ten rows opened at `t` for 100 ms
/// and no probe started by `t + 100`: the probe's check, at `t + 200`,
/// wakes the eight held rows, one probes and closes the breaker, and
/// every row is delivered.
fn the_probe_check_wakes_the_held_rows(c: &mut Core, m: &mut Model, t: u64) {
    assert_eq!(
        c.poll_deadline(t + 100),
        Some(t + 200),
        "woken to check the probe, breaker_open_ms after the period's end"
    );
    let mut tried = Vec::new();
    settle_at(c, m, t + 200, &mut |job: &Job| {
        tried.push(job.row);
        Ok(())
    });
    assert_eq!(
        tried.len(),
        8,
        "the held rows woke, one probed and closed it"
    );
    assert!(m.rows.is_empty());
    assert_eq!(c.stats().breakers_open, 0);
}

/// A breaker the store kept open holds its rows across a restart: the new
/// core's pass leaves them held while it is open, and the probe's check
/// after its period makes them due (no probe row was claimed).
#[test]
fn a_restored_breaker_keeps_its_held_rows_until_its_period_ends() {
    let config = breaker_config(1, 100, 100);
    let mut m = rows_held(5);
    let mut c = core(&config, BIG);
    c.restore_breakers(vec![kept_open(&c, breaker_key(), 500, 1)]);
    settle_at(&mut c, &mut m, 0, &mut |_| {
        panic!("nothing starts while open")
    });
    assert_eq!(m.rows.len(), 5);
    assert_eq!(c.poll_deadline(0), Some(600), "the probe checked");
    let mut tried = 0;
    settle_at(&mut c, &mut m, 600, &mut |_| {
        tried += 1;
        Ok(())
    });
    assert_eq!((tried, m.rows.len()), (5, 0));
}

/// Opens the breaker of `breaker_setup`'s ten rows at `t` and starts its
/// probe at `t + 500`, leaving it running: the failed row, due with it,
/// waits queued on the key, the other eight held.
fn probe_running(config: &Config, t: u64) -> (Core, Model, Job) {
    let (mut c, mut m) = breaker_setup(config.clone(), 10);
    settle_at(&mut c, &mut m, t, &mut |_| fail(FailureClass::Transient));
    c.handle_scan(t + 500, &mut m);
    let _ = m.apply(&mut c);
    let probe = c.poll_job(t + 500).expect("the probe starts");
    let _ = m.apply(&mut c);
    assert!(c.poll_job(t + 500).is_none(), "one probe");
    let held = m.due.keys().filter(|(_, at, _)| *at == HELD_DUE_MS).count();
    assert_eq!((m.rows.len(), held), (10, 8));
    let _ = breaker_events(&mut c);
    (c, m, probe)
}

/// `probe_running` with `breaker_config(1, 500, 500)`, then a reload of
/// that config as `change` leaves it, which reports the breaker closed.
fn reloaded_while_probing(t: u64, change: impl FnOnce(&mut Config)) -> (Core, Model, Job) {
    let config = breaker_config(1, 500, 500);
    let (mut c, m, probe) = probe_running(&config, t);
    let mut changed = config;
    change(&mut changed);
    reconfigure(&mut c, t, &changed);
    let closed = BreakerEvent::Closed { key: breaker_key() };
    assert_eq!(breaker_events(&mut c), [closed]);
    (c, m, probe)
}

/// A reload that turns breakers off (`breaker_failures = 0`) while a probe
/// runs closes the breaker at once, and its probe failing after does not
/// reopen it: every row runs at once. Before, the breaker stayed half-open
/// for good and its rows parked behind it until a restart.
#[test]
fn a_reload_that_turns_breakers_off_closes_an_open_breaker() {
    let t = 1_000;
    let (mut c, mut m, probe) = reloaded_while_probing(t, |off| {
        off.dispatch.breaker_failures = 0;
    });
    let closed = BreakerEvent::Closed { key: breaker_key() };
    assert_eq!(c.stats().breakers_open, 0);
    assert!(
        m.apply(&mut c).contains(&StoreOp::Breaker {
            event: closed,
            spot: None
        }),
        "the store forgets the breaker"
    );
    c.handle_outcome(t + 510, probe.id, fail(FailureClass::Transient), TOOK);
    assert_eq!(breaker_events(&mut c), [], "the failed probe opens nothing");
    let mut delivered = HashSet::new();
    settle_at(&mut c, &mut m, t + 510, &mut |job| {
        assert!(delivered.insert(job.row), "{:?} twice", job.row);
        Ok(())
    });
    assert_eq!((delivered.len(), m.rows.len()), (10, 0));
    assert_eq!((c.stats().breakers_open, c.stats().dead), (0, 0));
}

/// A reload that replaces a key's sink with one of another type closes
/// its open breaker, and no row of the key is sent to the new sink: the
/// row queued on the key goes back to the index and, with the held rows
/// made due and the probe's row, is dead-lettered as `sink_gone`. The
/// probe that fails after the reload opens no breaker for a sink that is
/// gone.
#[test]
fn a_reload_that_replaces_the_sink_closes_its_breaker_and_sends_it_no_row() {
    let t = 1_000;
    let (mut c, mut m, probe) = reloaded_while_probing(t, |replaced| {
        replaced.sources = vec![source("a", "t", &["y"])].into();
    });
    c.handle_outcome(t + 510, probe.id, fail(FailureClass::Transient), TOOK);
    assert_eq!(breaker_events(&mut c), []);
    settle_at(&mut c, &mut m, t + 510, &mut |job| {
        panic!("no row of x goes to y: {job:?}")
    });
    assert_eq!((c.stats().dead, m.rows.len()), (10, 0));
    assert_eq!(c.stats().breakers_open, 0);
}

/// A breaker the store kept is closed as a core opens when breakers are
/// off by then (or its sink is gone): reported closed, so the store
/// forgets it and it is logged, and the rows it held run at once.
#[test]
fn a_kept_breaker_is_closed_at_open_when_breakers_are_off() {
    let mut config = breaker_config(1, 100, 100);
    config.dispatch.breaker_failures = 0;
    let mut m = rows_held(5);
    let mut c = core(&config, BIG);
    c.restore_breakers(vec![kept_open(&c, breaker_key(), 500, 1)]);
    assert_eq!(
        breaker_events(&mut c),
        [BreakerEvent::Closed { key: breaker_key() }]
    );
    let mut tried = 0;
    settle_at(&mut c, &mut m, 0, &mut |_| {
        tried += 1;
        Ok(())
    });
    assert_eq!((tried, m.rows.len(), c.stats().breakers_open), (5, 0, 0));
}

/// Five rows attempted and failed at `t` open the breaker; at `t + 500`
/// the scan claims all five and the first starts as the probe, which it
/// returns; the other four wait for its answer, queued.
fn probe_with_four_rows_queued(t: u64) -> (Core, Model, Job) {
    let mut c = core(&breaker_config(1, 500, 500), BIG);
    let mut m = Model::default();
    for _ in 0..5 {
        m.add("t", "a", &["x"], 0);
    }
    assert_eq!(fail_every_row_and_park(&mut c, &mut m, t), 5);
    let due: Vec<u64> = m.due.keys().map(|(_, at, _)| *at).collect();
    assert_eq!(due, [t + 500; 5], "parked until the period ends");
    c.handle_scan(t + 500, &mut m);
    let _ = m.apply(&mut c);
    let probe = c.poll_job(t + 500).expect("the probe starts");
    let parked = c.stats().parked;
    assert!(
        c.poll_job(t + 500).is_none(),
        "the others wait for the probe"
    );
    assert_eq!(c.stats().parked, parked, "and are not written back");
    (c, m, probe)
}

/// Rows claimed with the probe wait for its answer, queued: when it closes
/// the breaker they start at once. Before, they were parked for another
/// `breaker_open_ms` however soon the probe succeeded.
#[test]
fn rows_claimed_with_the_probe_start_as_soon_as_it_closes_the_breaker() {
    let t = 1_000;
    let (mut c, mut m, probe) = probe_with_four_rows_queued(t);
    c.handle_outcome(t + 510, probe.id, Ok(()), TOOK);
    let rest: Vec<Job> = std::iter::from_fn(|| c.poll_job(t + 510)).collect();
    assert_eq!(rest.len(), 4, "all four start when the breaker closes");
    for job in &rest {
        c.handle_outcome(t + 520, job.id, Ok(()), TOOK);
    }
    let _ = m.apply(&mut c);
    assert!(m.rows.is_empty());
}

/// When the probe fails instead, the rows claimed with it park once, until
/// the end of the new open period (before, until `breaker_open_ms` after
/// they were claimed, to be parked again then).
#[test]
fn rows_claimed_with_a_failing_probe_park_until_the_new_period_ends() {
    let t = 1_000;
    let (mut c, mut m, probe) = probe_with_four_rows_queued(t);
    c.handle_outcome(t + 510, probe.id, fail(FailureClass::Transient), TOOK);
    settle_at(&mut c, &mut m, t + 510, &mut |_| panic!("open again"));
    let due: Vec<u64> = m.due.keys().map(|(_, at, _)| *at).collect();
    assert_eq!(due, [t + 1_010; 5], "the probe's row and the four");
}

/// `breaker_config`'s settings, with source `a`'s sinks HTTP sinks
/// posting to these paths.
fn http_sinks(paths: &[&str]) -> Config {
    let sinks = paths
        .iter()
        .map(|p| SinkConfig::http(format!("http://r/{p}")));
    let mut config = breaker_config(1, 100, 100);
    config.sources = vec![SourceConfig::new("a", "t", sinks.collect())].into();
    config
}

/// A breaker the store kept open goes to its sink wherever the new core's
/// config put it: here an HTTP sink inserted before it took its index.
/// The breaker's sink, now at index 1, holds its rows until the probe;
/// the new sink at index 0 runs at once, and the store keeps the breaker
/// at index 1 from now on. One whose sink the config no longer has is
/// reported closed. (Before, a breaker stayed with its index: the new
/// sink's rows were held, and the sink that was down got a wave.)
#[test]
fn a_kept_breaker_goes_to_its_sink_wherever_the_config_put_it() {
    let stored = kept_open(
        &core(&http_sinks(&["down"]), BIG),
        key_of("a", 0, "http"),
        500,
        1,
    );
    let mut c = core(&http_sinks(&["new", "down"]), BIG);
    let mut m = Model::default();
    c.restore_breakers(vec![stored.clone()]);
    assert_eq!(c.open_breaker_keys(), [key_of("a", 1, "http")]);
    assert_eq!(m.apply(&mut c), entry_moved(500, stored.spot));
    for _ in 0..3 {
        m.add("t", "a", &["http", "http"], 0);
    }
    let mut started = Vec::new();
    settle_at(&mut c, &mut m, 0, &mut |job| {
        started.push(job.key.sink_index);
        Ok(())
    });
    assert_eq!(started, [0, 0, 0], "the down sink's rows are held");
    assert_eq!(m.rows.len(), 3);

    let mut c = core(&http_sinks(&["new"]), BIG);
    c.restore_breakers(vec![stored]);
    assert_eq!(c.open_breaker_keys(), []);
    let closed = BreakerEvent::Closed {
        key: key_of("a", 0, "http"),
    };
    assert_eq!(breaker_events(&mut c), [closed]);
}

/// Breakers kept for two sinks a restart's config swapped each go to
/// their own sink, and the store keeps each at its sink's index (no close
/// written for a key another breaker now has). With the first sink gone,
/// the second's breaker takes its index, and no close is reported for it
/// (the gone sink's parked rows are unparked, to be dead-lettered).
#[test]
fn kept_breakers_of_swapped_or_gone_sinks_each_go_to_their_own() {
    let before = core(&http_sinks(&["a", "b"]), BIG);
    let kept = vec![
        kept_open(&before, key_of("a", 0, "http"), 500, 1),
        kept_open(&before, key_of("a", 1, "http"), 700, 2),
    ];
    let breakers = |c: &Core| -> Vec<(u16, BreakerState)> {
        let mut states: Vec<_> = (c.sink_stats().into_iter())
            .map(|s| (s.key.sink_index, s.breaker))
            .collect();
        states.sort_by_key(|(index, _)| *index);
        states
    };
    let open = |until_ms| BreakerState::Open { until_ms };
    let opened = |index, until_ms, opens| StoreOp::Breaker {
        event: BreakerEvent::Opened {
            key: key_of("a", index, "http"),
            until_ms,
            opens,
        },
        spot: before.catalog.spot_of(&key_of("a", 1 - index, "http")),
    };

    let mut c = core(&http_sinks(&["b", "a"]), BIG);
    let mut m = Model::default();
    c.restore_breakers(kept.clone());
    assert_eq!(breakers(&c), [(0, open(700)), (1, open(500))]);
    assert_eq!(m.apply(&mut c), [opened(1, 500, 1), opened(0, 700, 2)]);
    let swapped = [moved_event(0, 1, "http"), moved_event(1, 0, "http")];
    assert_eq!(breaker_events(&mut c), swapped);

    let mut c = core(&http_sinks(&["b"]), BIG);
    c.restore_breakers(kept);
    assert_eq!(breakers(&c), [(0, open(700))]);
    let b_left = StoreOp::Breaker {
        event: BreakerEvent::Closed {
            key: key_of("a", 1, "http"),
        },
        spot: None,
    };
    let unparking = StoreOp::Unparking { under_way: true };
    assert_eq!(m.apply(&mut c), [unparking, b_left, opened(0, 700, 2)]);
    let b_moved = [moved_event(1, 0, "http")];
    assert_eq!(
        breaker_events(&mut c),
        b_moved,
        "no close of the key b has now"
    );
}

/// A reload that inserts a sink before one whose breaker is open takes
/// the breaker with its sink: the sink that was down, now at index 1,
/// keeps its rows parked and held until its period ends and a probe
/// closes it; the new sink at index 0 gets its rows at once. It is
/// reported moved, not closed (the sink's health did not change); the
/// store moves the entry to the sink's new index. (Before, the reload dropped the breaker,
/// reported it closed, and the down sink got its rows at once.)
#[test]
fn a_reload_that_moves_a_sink_takes_its_open_breaker_with_it() {
    let t = 1_000;
    let mut config = http_sinks(&["down"]);
    config.dispatch.sink_concurrency = 2;
    let places = |config: &Config| {
        let catalog = Catalog::from_config(config);
        catalog.source("a").unwrap().places.clone()
    };
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..5 {
        m.add_placed("t", "a", &["http"], &places(&config));
    }
    assert_eq!(fail_every_row_and_park(&mut c, &mut m, t), 2);
    assert_eq!(breaker_events(&mut c).len(), 1, "opened until t + 100");

    let mut moved = http_sinks(&["new", "down"]);
    moved.dispatch.sink_concurrency = 2;
    reconfigure(&mut c, t + 10, &moved);
    let reported = [moved_event(0, 1, "http")];
    assert_eq!(breaker_events(&mut c), reported, "a move, no close");
    assert_eq!(c.open_breaker_keys(), [key_of("a", 1, "http")]);
    let breaker_ops: Vec<StoreOp> = (m.apply(&mut c).into_iter())
        .filter(|op| matches!(op, StoreOp::Breaker { .. }))
        .collect();
    let spot = c.catalog.spot_of(&key_of("a", 1, "http"));
    assert_eq!(breaker_ops, entry_moved(t + 100, spot));

    for _ in 0..3 {
        m.add_placed("t", "a", &["http", "http"], &places(&moved));
    }
    c.handle_committed();
    let mut started = Vec::new();
    settle_at(&mut c, &mut m, t + 10, &mut |job| {
        started.push(job.key.sink_index);
        Ok(())
    });
    assert_eq!(started, [0, 0, 0], "the down sink's rows wait");
    assert_eq!(m.rows.len(), 8);

    started.clear();
    settle_at(&mut c, &mut m, t + 100, &mut |job| {
        started.push(job.key.sink_index);
        Ok(())
    });
    assert_eq!(started, [1; 8], "the probe closed it, and all ran");
    assert!(m.rows.is_empty());
    let closed = BreakerEvent::Closed {
        key: key_of("a", 1, "http"),
    };
    assert_eq!(breaker_events(&mut c), [closed]);
}

/// A reload that moves a sink while its breaker's probe runs takes the
/// breaker along half-open, and the probe's row with it: the probe's
/// success closes the breaker at the sink's new index, its rows wake and
/// run there, and the sink's counts, from before the reload too, are
/// shown at that index. (Before, the probe's answer went to the key of
/// its old index, another sink's now.)
#[test]
fn a_probe_running_when_a_reload_moves_its_sink_answers_for_it() {
    let t = 1_000;
    let config = breaker_config(1, 500, 500);
    let (mut c, mut m, probe) = probe_running(&config, t);
    let mut moved = config;
    moved.sources = vec![source("a", "t", &["y", "x"])].into();
    reconfigure(&mut c, t + 500, &moved);
    let reported = [moved_event(0, 1, "x")];
    assert_eq!(breaker_events(&mut c), reported, "a move, no close");
    assert_eq!(c.open_breaker_keys(), [key_of("a", 1, "x")]);
    c.handle_outcome(t + 510, probe.id, Ok(()), TOOK);
    let closed = BreakerEvent::Closed {
        key: key_of("a", 1, "x"),
    };
    assert_eq!(breaker_events(&mut c), [closed]);
    let mut started = Vec::new();
    settle_at(&mut c, &mut m, t + 510, &mut |job| {
        started.push(job.key.clone());
        Ok(())
    });
    assert_eq!(started, vec![key_of("a", 1, "x"); 9]);
    assert!(m.rows.is_empty());
    let counts: Vec<(u16, u64, u64)> = (c.sink_stats().into_iter())
        .map(|s| (s.key.sink_index, s.outcomes.retried, s.outcomes.delivered))
        .collect();
    assert_eq!(
        counts,
        [(1, 1, 10)],
        "the failure that opened it, ten deliveries"
    );
}
