//! Batching sinks: a batch is one call of up to the sink's batch size, of
//! one key; it takes one slot of every concurrency cap, and each of its
//! attempts settles on its own.

use super::*;

/// A core whose source `a` (tenant `t`) has one sink of type `q` that
/// batches up to `batch` attempts, with `sink_concurrency` calls per key.
fn batching_core(config: &mut Config, batch: u16, sink_concurrency: u32) -> Core {
    config.dispatch.sink_concurrency = sink_concurrency;
    let catalog = Catalog::from_config(config).with_batches(|_, _| NonZeroU16::new(batch));
    let mut c = core(config, BIG);
    c.handle_reconfigure(0, config.dispatch.clone(), config.retry, Arc::new(catalog));
    c
}

fn batch(call: Call) -> Vec<Job> {
    match call {
        Call::Batch(jobs) => jobs,
        Call::One(job) => panic!("one attempt where a batch was due: {job:?}"),
    }
}

fn failed(class: FailureClass) -> AttemptResult {
    Err(AttemptFailure {
        class,
        message: "no".into(),
    })
}

#[test]
fn batches_take_one_slot_each_and_the_slot_frees_with_the_last_entry() {
    let mut config = config_with(vec![source("a", "t", &["q"])]);
    let mut c = batching_core(&mut config, 10, 2);
    let mut m = Model::default();
    let seqs: Vec<u64> = (0..25).map(|_| m.add("t", "a", &["q"], 0)).collect();
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let first = batch(c.poll_call(0).expect("a batch"));
    let second = batch(c.poll_call(0).expect("a second batch"));
    assert!(c.poll_call(0).is_none(), "two calls: the key's cap");
    let order = |jobs: &[Job]| jobs.iter().map(|j| j.row.seq).collect::<Vec<_>>();
    assert_eq!(order(&first), seqs[..10]);
    assert_eq!(order(&second), seqs[10..20]);
    assert_eq!(
        (c.stats().running, c.stats().calls, c.stats().queued),
        (20, 2, 5)
    );
    // Each entry settles its own row; the call's slot waits for all ten.
    for (i, job) in first.iter().enumerate() {
        let result = match i {
            0 => failed(FailureClass::Transient),
            1 => failed(FailureClass::Permanent),
            _ => Ok(()),
        };
        c.handle_outcome(5, job.id, result, TOOK);
        if i < 9 {
            assert!(c.poll_call(5).is_none(), "entry {i}: the batch still runs");
        }
    }
    let ops = m.apply(&mut c);
    let delivered = ops
        .iter()
        .filter(|op| matches!(op, StoreOp::Delivered { .. }))
        .count();
    assert_eq!(delivered, 8);
    assert!(matches!(&ops[0], StoreOp::Reschedule { row, .. } if *row == first[0].row));
    assert!(matches!(&ops[1], StoreOp::Dead { row, .. } if *row == first[1].row));
    let third = batch(c.poll_call(5).expect("the freed slot"));
    assert_eq!(order(&third), seqs[20..]);
}

#[test]
fn a_batch_counts_once_against_the_tenants_and_the_shards_concurrency() {
    let mut config = config_with(vec![source("a", "t", &["q"]), source("b", "t", &["q"])]);
    config.dispatch.tenants.insert(
        "t".into(),
        TenantLimitsConfig {
            concurrency: Some(1),
            ..TenantLimitsConfig::default()
        },
    );
    let mut c = batching_core(&mut config, 10, 8);
    let mut m = Model::default();
    for _ in 0..30 {
        m.add("t", "a", &["q"], 0);
    }
    m.add("t", "b", &["q"], 0);
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs = batch(c.poll_call(0).expect("a batch"));
    assert_eq!(jobs.len(), 10, "ten attempts in the tenant's one slot");
    assert!(c.poll_call(0).is_none(), "the tenant's one call runs");
    for job in &jobs {
        c.handle_outcome(1, job.id, Ok(()), TOOK);
    }
    let next = batch(c.poll_call(1).expect("the tenant's slot is free"));
    assert_eq!(
        (&*next[0].key.source_id, next.len()),
        ("b", 1),
        "keys take turns"
    );
}

#[test]
fn a_timed_out_batch_fails_each_entry_and_reports_its_worker_once() {
    let mut config = config_with(vec![source("a", "t", &["q"])]);
    config.dispatch.attempt_timeout_ms = 100;
    let mut c = batching_core(&mut config, 10, 1);
    let mut m = Model::default();
    for _ in 0..3 {
        m.add("t", "a", &["q"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs = batch(c.poll_call(0).expect("a batch"));
    assert!(jobs.iter().all(|j| j.deadline_at_ms == 100));
    c.handle_timers(100);
    assert_eq!(c.poll_abandoned(), Some(jobs[2].id));
    assert_eq!(c.poll_abandoned(), None, "one worker per call");
    let ops = m.apply(&mut c);
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|op| matches!(op, StoreOp::Reschedule { error: Some(e), .. } if e.starts_with("attempt_timeout"))));
    assert_eq!((c.stats().running, c.stats().calls), (0, 0));
}

#[test]
fn a_half_open_breaker_probes_with_one_attempt_and_closed_batches_again() {
    let mut config = config_with(vec![source("a", "t", &["q"])]);
    config.dispatch.breaker_failures = 2;
    config.dispatch.breaker_open_ms = 1_000;
    let mut c = batching_core(&mut config, 10, 1);
    let mut m = Model::default();
    for _ in 0..5 {
        m.add("t", "a", &["q"], 0);
    }
    c.handle_scan(0, &mut m);
    let _ = m.apply(&mut c);
    let jobs = batch(c.poll_call(0).expect("a batch"));
    assert_eq!(jobs.len(), 5);
    for job in &jobs {
        c.handle_outcome(1, job.id, failed(FailureClass::Transient), TOOK);
    }
    assert_eq!(c.stats().breakers_open, 1, "two failures open it");
    let _ = m.apply(&mut c);
    // Past the open period the retries are due; the probe goes alone.
    let at_ms = 60_000;
    c.handle_scan(at_ms, &mut m);
    let _ = m.apply(&mut c);
    let probe = batch(c.poll_call(at_ms).expect("the probe"));
    assert_eq!(probe.len(), 1);
    assert!(c.poll_call(at_ms).is_none(), "nothing beside the probe");
    c.handle_outcome(at_ms + 1, probe[0].id, Ok(()), TOOK);
    assert_eq!(c.stats().breakers_open, 0);
    let rest = batch(c.poll_call(at_ms + 1).expect("batching again"));
    assert_eq!(rest.len(), 4);
}
