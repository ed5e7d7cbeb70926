//! Changes of the sources and their sinks: made by reloads at seeded
//! times, or while the process is down, as an operator restarts a node
//! with a new config (its next life opens on them). Each draws from a
//! PRNG of its own, so adding one leaves the others' draws as they were.

use super::*;

/// One change of the sources or their sinks.
#[derive(Debug, Clone, Copy)]
pub(super) enum SinkChange {
    /// Pauses or resumes one sink: its rows are held, or run again.
    PauseOrResume,
    /// Doubles or halves one sink's rate, if it has one: the rate checker
    /// holds every call to the rate now from the last one before (a
    /// lowered rate too), while the rows paced at the old rate are paced
    /// again.
    ChangeRate,
    /// Swaps two of source s0's three sinks (types `a`, `b` and `a` at
    /// another place): rows stored for one's index now bind to the
    /// other's, claimed ones too, and no call may start on the sink now
    /// at a key's index.
    Swap,
    /// Removes one of source s0's sinks, or puts it back at any index:
    /// while it is gone its rows are dead-lettered as `sink_gone`
    /// as the scan reaches them (its held rows by the pass over held rows,
    /// checked; its paced rows by pacing again), and those not reached yet
    /// run again once it is back; the other sink's rows bind to it at its
    /// index now.
    RemoveOrRestoreSink,
    /// Removes source s1 or s2, or puts it back: while it is gone no hook
    /// is committed for it and its rows are dead-lettered as
    /// `source_gone` as the scan reaches them.
    RemoveOrRestoreSource,
    /// Turns one sink's ordering on (one lane, or a lane per value of
    /// header `k`) or off: the rows committed before keep their lanes, or
    /// none.
    ToggleOrdering,
    /// Moves source s1 or s2 to another tenant: the hooks committed after
    /// are that tenant's, and the rows of those committed before keep
    /// their hook's tenant and its key (a key the catalog no longer owns)
    /// until they end.
    MoveTenant,
}

impl SinkChange {
    pub(super) const ALL: [SinkChange; 7] = [
        SinkChange::PauseOrResume,
        SinkChange::ChangeRate,
        SinkChange::Swap,
        SinkChange::RemoveOrRestoreSink,
        SinkChange::RemoveOrRestoreSource,
        SinkChange::ToggleOrdering,
        SinkChange::MoveTenant,
    ];
}

impl Sim {
    /// Each change as a reload, at seeded times; a removed source comes
    /// back sooner than another goes.
    pub(super) fn reload_sink_changes(&mut self, shard: &mut ShardState) {
        let source_one_in = if self.removed_source.is_some() {
            300
        } else {
            1_500
        };
        let draws = [
            (self.pause_rng.below(400), SinkChange::PauseOrResume),
            (self.rate_rng.below(400), SinkChange::ChangeRate),
            (self.swap_rng.below(600), SinkChange::Swap),
            (self.removal_rng.below(700), SinkChange::RemoveOrRestoreSink),
            (
                self.removal_rng.below(source_one_in),
                SinkChange::RemoveOrRestoreSource,
            ),
            (self.ordering_rng.below(700), SinkChange::ToggleOrdering),
            (self.tenant_rng.below(900), SinkChange::MoveTenant),
        ];
        for (draw, change) in draws {
            if draw == 0 && self.change_sinks(change) {
                self.reconfigure_sinks(shard);
            }
        }
    }

    /// Makes `change` in the config; whether it changed it. Once the pass
    /// over held rows it starts ends, only paused sinks' and open
    /// breakers' rows may be held.
    pub(super) fn change_sinks(&mut self, change: SinkChange) -> bool {
        match change {
            SinkChange::PauseOrResume => {
                let sink = seeded_sink(&mut self.config, &mut self.pause_rng);
                sink.paused = !sink.paused;
            }
            SinkChange::ChangeRate => {
                let sink = seeded_sink(&mut self.config, &mut self.rate_rng);
                let Some(rate) = sink.max_calls_per_s else {
                    return false;
                };
                sink.max_calls_per_s = Some(match self.rate_rng.below(2) {
                    0 => rate.saturating_mul(2).min(100_000),
                    _ => (rate / 2).max(1),
                });
            }
            SinkChange::Swap => {
                let sinks = &mut self.config.sources[0].sinks;
                let n = sinks.len() as u64;
                let first = self.swap_rng.below(n);
                let second = (first + 1 + self.swap_rng.below(n - 1)) % n;
                sinks.swap(first as usize, second as usize);
            }
            SinkChange::RemoveOrRestoreSink => {
                let sinks = &mut self.config.sources[0].sinks;
                match self.removed_sink.take() {
                    Some(sink) => {
                        let at = self.removal_rng.below(sinks.len() as u64 + 1) as usize;
                        sinks.insert(at, sink);
                    }
                    None => {
                        let at = self.removal_rng.below(sinks.len() as u64) as usize;
                        self.removed_sink = Some(sinks.remove(at));
                    }
                }
            }
            SinkChange::RemoveOrRestoreSource => {
                let sources = &mut self.config.sources;
                match self.removed_source.take() {
                    Some(source) => sources.push(source),
                    None => {
                        let i = 1 + self.removal_rng.below(sources.len() as u64 - 1) as usize;
                        self.removed_source = Some(sources.remove(i));
                    }
                }
            }
            SinkChange::ToggleOrdering => {
                let sink = seeded_sink(&mut self.config, &mut self.ordering_rng);
                sink.ordered = !sink.ordered;
                let by_header = sink.ordered && self.ordering_rng.below(2) == 0;
                sink.ordering_key = by_header.then(|| "header:k".into());
            }
            SinkChange::MoveTenant => {
                let sources = &mut self.config.sources;
                let at = 1 + self.tenant_rng.below(sources.len() as u64 - 1) as usize;
                let source = &mut sources[at];
                let others: Vec<&str> = (TENANTS.iter().copied())
                    .filter(|tenant| *tenant != source.tenant)
                    .collect();
                let to = others[self.tenant_rng.below(others.len() as u64) as usize];
                source.tenant = to.into();
            }
        }
        self.held_check_due = true;
        true
    }
}

/// A sink of `config` that `rng` picks: a source, then one of its sinks.
fn seeded_sink<'c>(config: &'c mut Config, rng: &mut Rng) -> &'c mut SinkConfig {
    let sources = config.sources.len() as u64;
    let source = &mut config.sources[rng.below(sources) as usize];
    let sink = rng.below(source.sinks.len() as u64) as usize;
    &mut source.sinks[sink]
}
