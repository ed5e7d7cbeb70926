//! The engine's hooks by id, dead letters, replays and per-tenant gauges: what the
//! node's admin routes read. Listings read the shards' stores directly
//! (LMDB readers never block the writer); anything that moves rows runs
//! inside the owning shard.

use super::engine::Engine;
use super::errors::Unavailable;
use super::shard::ShardInput;
use super::wall_ms;
use crate::core::{SinkKey, SinkStats, TenantId, TenantStats};
use crate::latency::LatencyCounts;
use crate::store::{
    DeadFilter, DeadItem, DeadLetter, DeadPosition, HookStatus, Revived, StoreError,
};
use crate::store::{DiskReserve, IngestRoom, ShardStore};
use crate::store::{HeldBySink, PurgeStep, ReplayCounts, ReviveStep};
use crossbeam_channel::Sender;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a replay step or a stats call waits for a shard.
const SHARD_CALL_WAIT: Duration = Duration::from_secs(10);

/// What one step over a shard's dead keys did: the rows it took, the
/// cursor to go on from, and whether the shard's matching keys are done.
struct Stepped {
    rows: u64,
    cursor: Option<Vec<u8>>,
    exhausted: bool,
}

/// Most rows one step of [`Engine::replay`] revives, or of
/// [`Engine::purge_dead_letters`] deletes, in a shard (one write
/// transaction each).
const DEAD_STEP_ROWS: u64 = 4_096;

/// What [`Engine::replay`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The id its rows carry.
    pub replay_id: String,
    /// Dead rows made due again.
    pub moved: u64,
}

/// One shard's gauges by tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardTenants {
    pub shard: usize,
    /// Rows due (pending, unclaimed) per tenant, from the store.
    pub due: Vec<(TenantId, u64)>,
    /// The bytes each tenant's hooks hold in the store (pending and dead),
    /// which its `max_stored_bytes` bounds.
    pub stored_bytes: Vec<(TenantId, u64)>,
    /// Claimed, running, parked and breakers per tenant, from the core.
    pub tenants: Vec<TenantStats>,
}

impl Engine {
    /// How long attempts took, from every IO worker.
    pub fn attempt_latency(&self) -> LatencyCounts {
        self.latency.snapshot()
    }

    /// How many shards the engine runs (fixed by the data directory).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Up to `limit` dead rows matching `filter`, newest first, after `after`.
    pub fn dead_letters(
        &self,
        filter: &DeadFilter,
        after: Option<DeadPosition>,
        limit: usize,
    ) -> Result<Vec<DeadItem>, StoreError> {
        let mut out = Vec::new();
        for (k, shard) in self.shards.iter().enumerate() {
            out.extend(shard.store.dead_page(k as u32, filter, after, limit)?);
        }
        out.sort_by_key(|item| std::cmp::Reverse(item.position));
        out.truncate(limit);
        Ok(out)
    }

    /// The dead letter at `position` (a listing's item names it) with its
    /// hook; `None` once it is replayed or purged, or if it never was.
    pub fn dead_letter(&self, position: DeadPosition) -> Result<Option<DeadLetter>, StoreError> {
        match self.shards.get(position.shard as usize) {
            Some(shard) => shard.store.dead_letter(position),
            None => Ok(None),
        }
    }

    /// The hook whose commit returned `id`, with the state of each sink's
    /// row (see [`HookStatus`]); `None` once every row is delivered or
    /// purged, or for an id never committed. A point read in each shard.
    pub fn hook_status(&self, id: &str) -> Result<Option<HookStatus>, StoreError> {
        for (k, shard) in self.shards.iter().enumerate() {
            if let Some(status) = shard.store.hook_status(k as u32, id)? {
                return Ok(Some(status));
            }
        }
        Ok(None)
    }

    /// How many dead rows match `filter`.
    pub fn count_dead(&self, filter: &DeadFilter) -> Result<u64, StoreError> {
        self.shards.iter().map(|s| s.store.count_dead(filter)).sum()
    }

    /// How many of `tenant`'s rows are held for paused sinks, by source
    /// and the index of the sink each binds to now (see
    /// [`ShardStore::held_by_sink`]: a walk of the tenant's held rows, on
    /// the calling thread).
    ///
    /// [`ShardStore::held_by_sink`]: crate::store::ShardStore::held_by_sink
    pub fn held_by_sink(&self, tenant: &str) -> Result<HeldBySink, StoreError> {
        let shard = &self.shards[Engine::shard_of(tenant, self.shards.len())];
        let catalog = self.catalog.read().clone();
        let bind = |source: &str, index, sink_type: &str, places: Option<&[u64]>| {
            catalog.bind(source, index, sink_type, places).sink_index()
        };
        shard.store.held_by_sink(tenant, &bind)
    }

    /// Due rows per shard.
    pub fn due_counts(&self) -> Result<Vec<u64>, StoreError> {
        self.shards.iter().map(|s| s.store.due_count()).collect()
    }

    /// Pending rows across shards, as the stores last committed them (see
    /// `ShardStore::pending_count`): what the engine still has to deliver.
    pub fn pending_rows(&self) -> Result<u64, StoreError> {
        self.shards.iter().map(|s| s.store.pending_count()).sum()
    }

    /// Rows waiting behind their ordering lanes' heads, per shard.
    pub fn lane_member_counts(&self) -> Result<Vec<u64>, StoreError> {
        self.shards
            .iter()
            .map(|s| s.store.lane_member_count())
            .collect()
    }

    /// The bytes each shard's store holds (see [`ShardStore::used_bytes`]).
    ///
    /// [`ShardStore::used_bytes`]: crate::store::ShardStore::used_bytes
    pub fn store_used_bytes(&self) -> Result<Vec<u64>, StoreError> {
        self.shards
            .iter()
            .map(|s| s.store.committed_used_bytes())
            .collect()
    }

    /// The bytes new hooks may fill in each shard's store.
    pub fn store_ingest_limit_bytes(&self) -> Vec<u64> {
        self.shards
            .iter()
            .map(|s| s.store.ingest_limit_bytes())
            .collect()
    }

    /// What the file system holding each shard's store has free (`None`
    /// where the OS does not say).
    pub fn store_disk_available_bytes(&self) -> Vec<Option<u64>> {
        self.shards
            .iter()
            .map(|s| s.store.disk_available_bytes())
            .collect()
    }

    /// What new hooks may fill of each shard's store now, and the nearer
    /// of its limits (see [`ShardStore::ingest_room`]); `None` for a
    /// store that cannot be read.
    ///
    /// [`ShardStore::ingest_room`]: crate::store::ShardStore::ingest_room
    pub fn ingest_rooms(&self) -> Vec<Option<IngestRoom>> {
        let reserve = DiskReserve {
            min_free_bytes: self.min_free_disk_bytes(),
            shards: self.shards.len(),
        };
        let room = |store: &ShardStore| {
            let used_bytes = store.committed_used_bytes().ok()?;
            Some(store.ingest_room(used_bytes, reserve))
        };
        self.shards.iter().map(|s| room(&s.store)).collect()
    }

    /// The `min_free_disk_bytes` the engine opened with: new hooks leave
    /// that much of the disk free.
    pub fn min_free_disk_bytes(&self) -> u64 {
        self.config.read().min_free_disk_bytes
    }

    /// Dead rows per shard.
    pub fn dead_counts(&self) -> Result<Vec<u64>, StoreError> {
        self.shards.iter().map(|s| s.store.dead_count()).collect()
    }

    /// The earliest due time per shard (`None`: nothing due).
    pub fn oldest_due(&self) -> Result<Vec<Option<u64>>, StoreError> {
        self.shards
            .iter()
            .map(|s| s.store.oldest_due_ms())
            .collect()
    }

    /// A replay's counters summed over the shards.
    pub fn replay_counters(&self, replay: &str) -> Result<ReplayCounts, StoreError> {
        let mut sum = ReplayCounts::default();
        for shard in &self.shards {
            sum = sum + shard.store.replay_counters(replay)?;
        }
        Ok(sum)
    }

    /// Deletes a replay's counters in every shard (a node forgets a replay
    /// that is done, past `replay.retention_ms`).
    pub fn forget_replay(&self, replay: &str) -> Result<(), Unavailable> {
        let replay: Arc<str> = Arc::from(replay);
        for shard in 0..self.shards.len() {
            self.ask_shard_to_write(shard, |reply| ShardInput::ForgetReplay {
                replay: replay.clone(),
                reply,
            })?;
        }
        Ok(())
    }

    /// Runs one replay step in shard `shard`.
    ///
    /// # Panics
    /// If `shard` is not below [`shard_count`](Engine::shard_count).
    pub fn revive(&self, shard: usize, step: ReviveStep) -> Result<Revived, Unavailable> {
        self.ask_shard_to_write(shard, |reply| ShardInput::Revive {
            step: step.clone(),
            reply,
        })
    }

    /// A write shard `shard` makes on request and answers with its result
    /// (a store failure is `Unavailable`: the shard rebuilt and the step
    /// may be asked again).
    fn ask_shard_to_write<T>(
        &self,
        shard: usize,
        ask: impl Fn(Sender<Result<T, Arc<StoreError>>>) -> ShardInput,
    ) -> Result<T, Unavailable> {
        let mut answers = self.ask_shards([shard], SHARD_CALL_WAIT, |_, reply| ask(reply))?;
        let answer = answers.pop().ok_or(Unavailable::TimedOut)?;
        Ok(answer?)
    }

    /// Revives, now and unpaced, every dead row matching `filter` that is
    /// dead at the call: attempts reset, due now, tagged with a new replay
    /// id (sinks see it as `x-goad-replay-id`, and
    /// [`replay_counters`](Engine::replay_counters) counts its deliveries
    /// and new deaths). Rows it revives that die again are not taken again.
    /// A node paces its replays, throttles them on pressure and resumes them
    /// after a restart; a host that needs that drives [`revive`](Engine::revive).
    pub fn replay(&self, filter: &DeadFilter) -> Result<Replayed, Unavailable> {
        let replay_id: Arc<str> = Arc::from(uuid::Uuid::now_v7().to_string());
        let filter = DeadFilter {
            until_ms: filter.until_ms.min(wall_ms()),
            ..filter.clone()
        };
        let moved = self.step_dead_keys(|shard, cursor| {
            let step = ReviveStep {
                replay: replay_id.clone(),
                filter: filter.clone(),
                cursor,
                max_rows: DEAD_STEP_ROWS,
            };
            let revived = self.revive(shard, step)?;
            Ok(Stepped {
                rows: revived.moved,
                cursor: revived.cursor,
                exhausted: revived.exhausted,
            })
        })?;
        Ok(Replayed {
            replay_id: replay_id.to_string(),
            moved,
        })
    }

    /// Deletes for good every dead row matching `filter` that is dead at
    /// the call, with each hook whose last row it was; returns how many.
    /// Rows that do not decode are purged too when the filter names no
    /// source.
    pub fn purge_dead_letters(&self, filter: &DeadFilter) -> Result<u64, Unavailable> {
        let filter = DeadFilter {
            until_ms: filter.until_ms.min(wall_ms()),
            ..filter.clone()
        };
        self.step_dead_keys(|shard, cursor| {
            let step = PurgeStep {
                filter: filter.clone(),
                cursor,
                max_rows: DEAD_STEP_ROWS,
            };
            let purged = self.ask_shard_to_write(shard, |reply| ShardInput::Purge {
                step: step.clone(),
                reply,
            })?;
            Ok(Stepped {
                rows: purged.purged,
                cursor: purged.cursor,
                exhausted: purged.exhausted,
            })
        })
    }

    /// Runs `step` in each shard in turn, from its first dead key (cursor
    /// `None`) until it reports the shard's matching keys exhausted;
    /// returns the sum of the rows the steps took.
    fn step_dead_keys(
        &self,
        mut step: impl FnMut(usize, Option<Vec<u8>>) -> Result<Stepped, Unavailable>,
    ) -> Result<u64, Unavailable> {
        let mut total = 0;
        for shard in 0..self.shard_count() {
            let mut cursor = None;
            loop {
                let stepped = step(shard, cursor)?;
                total += stepped.rows;
                cursor = stepped.cursor;
                if stepped.exhausted {
                    break;
                }
            }
        }
        Ok(total)
    }

    /// Every shard's gauges by tenant.
    pub fn tenant_stats(&self) -> Result<Vec<ShardTenants>, Unavailable> {
        let replies = self.ask_shards(0..self.shards.len(), SHARD_CALL_WAIT, |_, reply| {
            ShardInput::TenantStats(reply)
        })?;
        let mut out = Vec::new();
        for (k, tenants) in replies.into_iter().enumerate() {
            let due = self.shards[k].store.due_by_tenant()?;
            let stored_bytes = self.shards[k].store.stored_by_tenant()?;
            out.push(ShardTenants {
                shard: k,
                due,
                stored_bytes,
                tenants,
            });
        }
        Ok(out)
    }

    /// Every sink of the config, sources in config order and each source's
    /// sinks by index: what its attempts came to since the node started,
    /// its breaker and its calls now. A sink with no attempts yet shows
    /// zeros.
    pub fn sink_stats(&self) -> Result<Vec<SinkStats>, Unavailable> {
        let replies = self.ask_shards(0..self.shards.len(), SHARD_CALL_WAIT, |_, reply| {
            ShardInput::SinkStats(reply)
        })?;
        let mut seen: HashMap<SinkKey, SinkStats> = replies
            .into_iter()
            .flatten()
            .map(|stats| (stats.key.clone(), stats))
            .collect();
        // The sources as they stand, not the config's lock: a reload's
        // write would wait for the whole list, and every commit behind it.
        let sources = self.config.read().sources.clone();
        let mut out = Vec::new();
        for source in &sources {
            for (index, sink) in source.sinks.iter().enumerate() {
                let key = SinkKey {
                    tenant: source.tenant.as_str().into(),
                    source_id: source.id.as_str().into(),
                    sink_index: index as u16,
                    sink_type: sink.kind.as_str().into(),
                };
                let stats = seen.remove(&key);
                out.push(SinkStats {
                    paused: sink.paused,
                    ..stats.unwrap_or_else(|| SinkStats::unseen(key))
                });
            }
        }
        Ok(out)
    }
}
