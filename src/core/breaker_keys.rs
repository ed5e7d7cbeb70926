//! The core's circuit breakers, one per sink key (`breaker::Breaker` is
//! one's state machine): whether a key's row may start, what an outcome
//! does to its breaker, and closing one nothing else would close.

use super::*;

impl Core {
    /// The breaker settings `[dispatch]` gives now.
    pub(super) fn breaker_config(&self) -> BreakerConfig {
        let d = &self.dispatch;
        BreakerConfig {
            failures: d.breaker_failures,
            open_ms: d.breaker_open_ms,
            max_open_ms: d.breaker_max_open_ms,
        }
    }

    /// Whether a row of `key` may start now: not while its sink is paused
    /// (its rows are held), nor while its breaker is open (they park). A
    /// row admitted to probe may never start (dead-lettered, paced or
    /// taken back first): the probe is checked for again, as at the end of
    /// an open period, so the rows the breaker held wake if none started.
    pub(super) fn admit(&mut self, now_ms: u64, key: &SinkKey) -> Admit {
        if self.catalog.is_paused(&key.source_id, key.sink_index) {
            return Admit::Hold;
        }
        let config = self.breaker_config();
        let admit = match self.breakers.get_mut(key) {
            Some(breaker) => breaker.admit(now_ms, config),
            None => Admit::Pass { probe: false },
        };
        if admit == (Admit::Pass { probe: true }) {
            self.check_probe_after(now_ms, key);
        }
        admit
    }

    /// Moves the key's breaker; returns the end of the open period when the
    /// outcome opened it.
    /// An attempt of `key` ended saying nothing of its sink (see
    /// [`Breaker::excuse`]).
    pub(super) fn excuse_breaker(&mut self, key: &SinkKey, job: JobId) {
        if let Some(breaker) = self.breakers.get_mut(key) {
            breaker.excuse(job);
        }
    }

    pub(super) fn record_breaker(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        job: JobId,
        failure: Option<FailureClass>,
    ) -> Option<u64> {
        if !self.keeps_breaker(key) {
            return None;
        }
        let config = self.breaker_config();
        let breaker = self.breakers.entry(key.clone()).or_default();
        let (was_open, mut held_rows) = (breaker.is_open(), breaker.holds_rows());
        let opened = breaker.record(now_ms, config, job, failure);
        // A wake under way stops: the rows it did not make due yet wait
        // for the close, as those its breaker holds from now on.
        if opened.is_some() && self.key_wakes.stop(key) {
            breaker.hold_rows();
            held_rows = true;
        }
        let event = match opened {
            Some(until_ms) => Some(BreakerEvent::Opened {
                key: key.clone(),
                until_ms,
                opens: breaker.opens(),
            }),
            None if was_open && !breaker.is_open() => {
                Some(BreakerEvent::Closed { key: key.clone() })
            }
            None => None,
        };
        match (was_open, breaker.is_open()) {
            (false, true) => self.breakers_open += 1,
            (true, false) => self.breakers_open -= 1,
            _ => {}
        }
        if breaker.is_idle() {
            self.breakers.remove(key);
        }
        match &event {
            // The rows it held wake, at the pace the key takes them.
            Some(BreakerEvent::Closed { .. }) if held_rows => self.start_key_wake(key),
            Some(BreakerEvent::Opened { until_ms, .. }) if held_rows => {
                self.check_probe_after(*until_ms, key);
            }
            _ => {}
        }
        let spot = self.catalog.spot_of(key);
        (self.ops).extend(event.clone().map(|event| StoreOp::Breaker { event, spot }));
        self.breaker_events.extend(event);
        opened
    }

    /// Whether `key` has a breaker: breakers are on (`breaker_failures`
    /// above 0) and it is of a configured sink. A reload that turns them
    /// off or removes the sink closes its breaker at once: its rows run
    /// again (or are dead-lettered as `sink_gone`) rather than stay parked
    /// behind a breaker nothing would close.
    pub(super) fn keeps_breaker(&self, key: &SinkKey) -> bool {
        self.dispatch.breaker_failures > 0 && self.catalog.has_key(key)
    }

    /// After a reload from `previous`: each breaker goes with its sink to
    /// the index the reload moved it to (found by its spot), state,
    /// failures and held rows with it; one whose sink is gone (removed, or
    /// given another destination where it stood), or every one with
    /// breakers off, is dropped (the rows it parked run again). An open
    /// one's move is reported as a move, not as a close and an open (the
    /// sink's health did not change), and the store moves its entry. A
    /// probe running across the move answers to it (its row moved with it,
    /// see `carry`); each open breaker moved is checked for a probe as a
    /// restored one is.
    pub(super) fn carry_breakers(&mut self, now_ms: u64, previous: &Catalog) {
        // Each stays (its sink is at its key still), moves, or is dropped.
        let (mut moved, mut dropped) = (Vec::new(), Vec::new());
        for key in self.breakers.keys() {
            let to =
                (self.catalog.key_moved_from(previous, key)).filter(|to| self.keeps_breaker(to));
            match to {
                Some(to) if to == *key => {}
                Some(to) => moved.push((key.clone(), to)),
                None => dropped.push(key.clone()),
            }
        }
        let mut carried = Vec::with_capacity(moved.len());
        for (from, to) in moved {
            let breaker = self.breakers.remove(&from).expect("a breaker's key");
            self.breakers_open -= u64::from(breaker.is_open());
            carried.push((from, to, breaker));
        }
        for key in dropped {
            if self.forget_breaker(&key) {
                self.unpark_tenant(&key.tenant);
            }
        }
        // Where an open breaker moves to, the store keeps that one.
        let taken: HashSet<SinkKey> = (carried.iter())
            .filter(|(_, _, breaker)| breaker.is_open())
            .map(|(_, to, _)| to.clone())
            .collect();
        for (from, to, breaker) in carried {
            if breaker.is_open() {
                self.breakers_open += 1;
                let until_ms = breaker.open_until_ms().unwrap_or(now_ms);
                let from_taken = taken.contains(&from);
                self.breaker_moved(from, &to, until_ms, breaker.opens(), from_taken);
                self.check_probe_after(until_ms, &to);
            }
            if breaker.holds_rows() && !breaker.keeps_rows_held(now_ms) {
                self.start_key_wake(&to);
            }
            let replaced = self.breakers.insert(to, breaker);
            debug_assert!(replaced.is_none(), "a moved sink's key had no breaker left");
        }
    }

    /// Reports an open breaker moved from `from` to `to` with its sink,
    /// and moves its store entry (with its sink's spot there), leaving
    /// none at `from` unless another breaker moved there (`from_taken`).
    pub(super) fn breaker_moved(
        &mut self,
        from: SinkKey,
        to: &SinkKey,
        until_ms: u64,
        opens: u32,
        from_taken: bool,
    ) {
        if !from_taken {
            let event = BreakerEvent::Closed { key: from.clone() };
            (self.ops).push_back(StoreOp::Breaker { event, spot: None });
        }
        let event = BreakerEvent::Opened {
            key: to.clone(),
            until_ms,
            opens,
        };
        let spot = self.catalog.spot_of(to);
        (self.ops).push_back(StoreOp::Breaker { event, spot });
        let to = to.clone();
        self.breaker_events
            .push_back(BreakerEvent::Moved { from, to });
    }

    /// Drops `key`'s breaker, whatever its state, waking the rows it held
    /// afresh from the first: a wake under way may have passed rows held
    /// since (parked while a probe ran). Returns whether it was open (and
    /// is now reported closed).
    pub(super) fn forget_breaker(&mut self, key: &SinkKey) -> bool {
        let Some(breaker) = self.breakers.remove(key) else {
            return false;
        };
        if breaker.holds_rows() {
            self.start_key_wake(key);
        }
        if breaker.is_open() {
            self.breakers_open -= 1;
            self.report_closed(key.clone());
        }
        breaker.is_open()
    }

    /// Reports `key`'s open breaker closed without a probe (the store
    /// forgets it, the shell logs it).
    pub(super) fn report_closed(&mut self, key: SinkKey) {
        let event = BreakerEvent::Closed { key };
        let spot = None;
        (self.ops).push_back(StoreOp::Breaker {
            event: event.clone(),
            spot,
        });
        self.breaker_events.push_back(event);
    }

    /// Checks, `breaker_open_ms` after `from_ms` (the end of an open
    /// period, or a row admitted to probe), that a row of `key` was
    /// claimed to probe or its probe started (see `held`): the scans have
    /// that long to reach the row parked to be the probe, behind the
    /// tenant's other due rows.
    pub(super) fn check_probe_after(&mut self, from_ms: u64, key: &SinkKey) {
        let at_ms = from_ms.saturating_add(self.dispatch.breaker_open_ms);
        self.probe_checks.insert((at_ms, key.clone()));
    }
}
