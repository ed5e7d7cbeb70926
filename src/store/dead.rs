//! Dead letters: listing them newest first, counting and reviving them for
//! a replay, and each replay's counters.
//!
//! A replay's counters live in the shard's `meta` database under
//! `replay/<id>/<counter>` and change in the same transaction as the rows
//! they count, so they survive a crash exactly as the rows do.

use super::dead_keys::DeadKeys;
use super::keys::{self, row_key, timed_key};
use super::record::{decode_hook, decode_hook_head, decode_row, encode_row, Hook, RowStatus};
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{DeadReasonKind, ReasonKinds, RowId, TenantId};
use heed::{RoTxn, RwTxn};
use std::ops::Bound;
use std::sync::Arc;

/// Which dead rows a listing or a replay takes; the default takes all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadFilter {
    /// Only this source's rows.
    pub source_id: Option<String>,
    /// Only this tenant's rows.
    pub tenant: Option<String>,
    /// Only the rows of this hook (its id, as sinks and ingest see it).
    pub hook_id: Option<String>,
    /// Only the rows of the sink at this index of their source (as the
    /// config stood when their hook was committed).
    pub sink_index: Option<u16>,
    /// Only the rows that died of one of these (read from their stored
    /// reason).
    pub reason: Option<ReasonKinds>,
    /// Dead at or after this time.
    pub since_ms: u64,
    /// Dead at or before this time (a replay takes rows dead before it began).
    pub until_ms: u64,
}

impl Default for DeadFilter {
    fn default() -> DeadFilter {
        DeadFilter {
            source_id: None,
            tenant: None,
            hook_id: None,
            sink_index: None,
            reason: None,
            since_ms: 0,
            until_ms: u64::MAX,
        }
    }
}

/// Where a dead row sits in the node's newest-first order: by dead time,
/// then shard, then row, all descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeadPosition {
    pub dead_at_ms: u64,
    pub shard: u32,
    pub row: RowId,
}

impl DeadPosition {
    /// The position of a dead key in shard `shard`; `None` for a key of
    /// the wrong length, which names no row (`goad verify` reports it).
    pub(crate) fn of_key(shard: u32, key: &[u8]) -> Option<DeadPosition> {
        let (_, dead_at_ms, row) = keys::parse_timed_key(key)?;
        Some(DeadPosition {
            dead_at_ms,
            shard,
            row,
        })
    }
}

/// One dead row as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadItem {
    pub position: DeadPosition,
    pub hook_id: String,
    pub source_id: String,
    pub tenant: TenantId,
    pub sink_type: String,
    pub reason: String,
    pub attempts: u32,
}

/// The reason listed for a dead key whose row does not decode (it is
/// listed, never revived).
const UNDECODABLE: &str = "undecodable delivery row";

impl DeadItem {
    /// Whether a replay can revive it: its row and its hook decode (a row
    /// whose hook does not is listed without a hook id).
    fn is_decodable(&self) -> bool {
        self.reason != UNDECODABLE && !self.hook_id.is_empty()
    }

    /// What the row died of, read from its reason; `None` for a reason
    /// of no known kind.
    pub fn reason_kind(&self) -> Option<DeadReasonKind> {
        DeadReasonKind::of(&self.reason, &self.sink_type)
    }
}

/// What one replay step did in a shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revived {
    pub moved: u64,
    /// The tenants of the rows made due (a lane's row behind another
    /// waits in its lane instead), each once.
    pub due_tenants: Vec<TenantId>,
    /// The last dead key examined: the next step starts after it.
    pub cursor: Option<Vec<u8>>,
    /// Every matching dead row of the shard has been moved.
    pub exhausted: bool,
}

/// A replay counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayCounter {
    Moved,
    Delivered,
    DeadAgain,
    /// Written back due because its key's breaker was open.
    Parked,
}

/// A replay's counters in one shard, or summed over the shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayCounts {
    /// Rows it revived.
    pub moved: u64,
    /// Of those, delivered.
    pub delivered: u64,
    /// Of those, dead-lettered again.
    pub dead_again: u64,
    /// Parks of those rows behind an open breaker (a row parked twice counts twice).
    pub parked: u64,
}

impl ReplayCounts {
    /// What was counted after `earlier` (an earlier reading of the same
    /// counters).
    pub fn since(self, earlier: ReplayCounts) -> ReplayCounts {
        ReplayCounts {
            moved: self.moved.saturating_sub(earlier.moved),
            delivered: self.delivered.saturating_sub(earlier.delivered),
            dead_again: self.dead_again.saturating_sub(earlier.dead_again),
            parked: self.parked.saturating_sub(earlier.parked),
        }
    }
}

impl std::ops::Add for ReplayCounts {
    type Output = ReplayCounts;

    fn add(self, other: ReplayCounts) -> ReplayCounts {
        ReplayCounts {
            moved: self.moved + other.moved,
            delivered: self.delivered + other.delivered,
            dead_again: self.dead_again + other.dead_again,
            parked: self.parked + other.parked,
        }
    }
}

impl ReplayCounter {
    const ALL: [ReplayCounter; 4] = [
        ReplayCounter::Moved,
        ReplayCounter::Delivered,
        ReplayCounter::DeadAgain,
        ReplayCounter::Parked,
    ];

    fn name(self) -> &'static str {
        match self {
            ReplayCounter::Moved => "moved",
            ReplayCounter::Delivered => "delivered",
            ReplayCounter::DeadAgain => "dead",
            ReplayCounter::Parked => "parked",
        }
    }
}

fn counter_key(replay: &str, counter: ReplayCounter) -> String {
    format!("replay/{replay}/{}", counter.name())
}

/// Adds `n` to a replay counter.
pub(crate) fn add_replay(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    replay: &str,
    counter: ReplayCounter,
    n: u64,
) -> Result<(), StoreError> {
    let key = counter_key(replay, counter);
    let now = store.meta_u64(wtxn, &key)?.unwrap_or(0);
    store.put_meta(wtxn, &key, now + n)
}

/// Deletes a replay's counters (the replay is forgotten). A row it
/// revived that settles later (one retrying past the replay's retention)
/// counts nowhere: see `count_replay`.
pub(crate) fn forget_replay(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    replay: &str,
) -> Result<(), StoreError> {
    for counter in ReplayCounter::ALL {
        store
            .meta
            .delete(wtxn, counter_key(replay, counter).as_bytes())?;
    }
    Ok(())
}

/// Adds one to a counter of a replay this shard knows: every row a
/// replay revived was counted in its `moved` first, so a replay without
/// one was forgotten, and its rows settle uncounted rather than leave
/// counters nothing reads or deletes.
pub(crate) fn count_replay(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    replay: &str,
    counter: ReplayCounter,
) -> Result<(), StoreError> {
    let moved = counter_key(replay, ReplayCounter::Moved);
    if store.meta_u64(wtxn, &moved)?.is_none() {
        return Ok(());
    }
    add_replay(store, wtxn, replay, counter, 1)
}

/// The tenants a filter reaches, as (number, id).
fn tenants_of(table: &TenantTable, filter: &DeadFilter) -> Vec<(u32, TenantId)> {
    match &filter.tenant {
        Some(t) => table
            .number(t)
            .map(|no| (no, table.name(no).clone()))
            .into_iter()
            .collect(),
        None => table
            .names()
            .iter()
            .enumerate()
            .map(|(no, name)| (no as u32, name.clone()))
            .collect(),
    }
}

/// A dead row's listing entry, or `None` when its source, hook, sink or
/// reason does not match. A row or hook that does not decode is listed
/// with that as its reason.
fn item(
    store: &ShardStore,
    txn: &RoTxn,
    filter: &DeadFilter,
    tenant: &TenantId,
    position: DeadPosition,
) -> Result<Option<DeadItem>, StoreError> {
    let row = position.row;
    if filter.sink_index.is_some_and(|i| i != row.sink_index) {
        return Ok(None);
    }
    let head = store
        .records
        .get(txn, &keys::hook_key(row.seq))?
        .map(decode_hook_head);
    let record = store.records.get(txn, &row_key(row))?.map(decode_row);
    let (hook_id, source_id) = match head {
        Some(Ok(h)) => (h.id, h.source_id.to_string()),
        _ => (String::new(), String::new()),
    };
    let other_source = filter.source_id.as_ref().is_some_and(|s| *s != source_id);
    let other_hook = filter.hook_id.as_ref().is_some_and(|h| *h != hook_id);
    if other_source || other_hook {
        return Ok(None);
    }
    let (sink_type, reason, attempts) = match record {
        Some(Ok(r)) if r.status == RowStatus::Dead => (
            r.sink_type.to_string(),
            r.error.unwrap_or_default(),
            r.attempts,
        ),
        _ => (String::new(), UNDECODABLE.to_string(), 0),
    };
    let found = DeadItem {
        position,
        hook_id,
        source_id,
        tenant: tenant.clone(),
        sink_type,
        reason,
        attempts,
    };
    let other_reason = (filter.reason)
        .is_some_and(|kinds| !found.reason_kind().is_some_and(|k| kinds.contains(k)));
    Ok((!other_reason).then_some(found))
}

/// One dead letter with its hook, as an operator inspects it.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub item: DeadItem,
    pub hook: Hook,
}

impl ShardStore {
    /// The row `position` names with its hook, if that row is dead since
    /// that time (not replayed or purged since) and both decode.
    pub fn dead_letter(&self, position: DeadPosition) -> Result<Option<DeadLetter>, StoreError> {
        let rtxn = self.env.read_txn()?;
        let row = position.row;
        let record = self.records.get(&rtxn, &row_key(row))?.map(decode_row);
        let Some(Ok(record)) = record else {
            return Ok(None);
        };
        if record.status != RowStatus::Dead || record.at_ms != position.dead_at_ms {
            return Ok(None);
        }
        let hook = self.records.get(&rtxn, &keys::hook_key(row.seq))?;
        let Some(Ok(hook)) = hook.map(|bytes| decode_hook(row.seq, bytes)) else {
            return Ok(None);
        };
        let item = DeadItem {
            position,
            hook_id: hook.id.clone(),
            source_id: hook.source_id.to_string(),
            tenant: hook.tenant.clone(),
            sink_type: record.sink_type.to_string(),
            reason: record.error.unwrap_or_default(),
            attempts: record.attempts,
        };
        Ok(Some(DeadLetter { item, hook }))
    }

    /// Up to `limit` of this shard's dead rows matching `filter`, newest
    /// first, strictly after `after` in the node's newest-first order.
    pub fn dead_page(
        &self,
        shard: u32,
        filter: &DeadFilter,
        after: Option<DeadPosition>,
        limit: usize,
    ) -> Result<Vec<DeadItem>, StoreError> {
        let table = TenantTable::load(self)?;
        let rtxn = self.env.read_txn()?;
        let keys = DeadKeys::of(self, &rtxn, &table, filter)?;
        let mut out = Vec::new();
        for (no, tenant) in tenants_of(&table, filter) {
            let low = timed_key(no, filter.since_ms, RowId::MIN);
            let until = timed_key(no, filter.until_ms, RowId::MAX);
            // The newest key this page may show in this shard.
            let high = match after {
                None => Bound::Included(until),
                Some(c) if c.dead_at_ms > filter.until_ms => Bound::Included(until),
                Some(c) if shard > c.shard => {
                    Bound::Excluded(timed_key(no, c.dead_at_ms, RowId::MIN))
                }
                Some(c) if shard < c.shard => {
                    Bound::Included(timed_key(no, c.dead_at_ms, RowId::MAX))
                }
                Some(c) => Bound::Excluded(timed_key(no, c.dead_at_ms, c.row)),
            };
            let high = high.as_ref().map(|k| &k[..]);
            let mut taken = 0;
            for k in keys.within(self, &rtxn, (Bound::Included(&low[..]), high), true)? {
                let k = k?;
                let Some(position) = DeadPosition::of_key(shard, k) else {
                    continue;
                };
                if let Some(found) = item(self, &rtxn, filter, &tenant, position)? {
                    out.push(found);
                    taken += 1;
                    if taken == limit {
                        break;
                    }
                }
            }
        }
        out.sort_by_key(|item| std::cmp::Reverse(item.position));
        out.truncate(limit);
        Ok(out)
    }

    /// How many of this shard's dead rows match `filter`.
    pub fn count_dead(&self, filter: &DeadFilter) -> Result<u64, StoreError> {
        let table = TenantTable::load(self)?;
        let rtxn = self.env.read_txn()?;
        let keys = DeadKeys::of(self, &rtxn, &table, filter)?;
        let mut count = 0;
        for (no, tenant) in tenants_of(&table, filter) {
            let low = timed_key(no, filter.since_ms, RowId::MIN);
            let high = timed_key(no, filter.until_ms, RowId::MAX);
            let bounds = (Bound::Included(&low[..]), Bound::Included(&high[..]));
            for k in keys.within(self, &rtxn, bounds, false)? {
                let k = k?;
                let Some(position) = DeadPosition::of_key(0, k) else {
                    continue;
                };
                if item(self, &rtxn, filter, &tenant, position)?.is_some_and(|i| i.is_decodable()) {
                    count += 1;
                }
            }
        }
        Ok(count)
    }

    /// A replay's counters in this shard.
    pub fn replay_counters(&self, replay: &str) -> Result<ReplayCounts, StoreError> {
        let rtxn = self.env.read_txn()?;
        let get = |c| -> Result<u64, StoreError> {
            Ok(self.meta_u64(&rtxn, &counter_key(replay, c))?.unwrap_or(0))
        };
        Ok(ReplayCounts {
            moved: get(ReplayCounter::Moved)?,
            delivered: get(ReplayCounter::Delivered)?,
            dead_again: get(ReplayCounter::DeadAgain)?,
            parked: get(ReplayCounter::Parked)?,
        })
    }
}

/// One replay step for a shard: revive up to `max_rows` rows matching
/// `filter`, tagged `replay`, starting after `cursor`.
#[derive(Debug, Clone)]
pub struct ReviveStep {
    pub replay: Arc<str>,
    pub filter: DeadFilter,
    pub cursor: Option<Vec<u8>>,
    pub max_rows: u64,
}

/// One replay step in a shard, inside its write transaction: moves up to
/// `step.max_rows` dead rows matching its filter back to due at `now_ms`,
/// with attempts reset and tagged with its replay, examining at most
/// `budget` dead keys after its cursor. Rows that do not decode stay dead.
pub fn revive(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    step: &ReviveStep,
    budget: usize,
    now_ms: u64,
) -> Result<Revived, StoreError> {
    let scan = DeadScan::new(&step.filter, &step.cursor, step.max_rows, budget);
    let Matching {
        rows: moves,
        last,
        exhausted,
    } = scan.run(store, wtxn, tenants, DeadItem::is_decodable)?;
    let mut due_tenants: Vec<u32> = Vec::new();
    for (key, no, row) in &moves {
        store.dead.delete(wtxn, key)?;
        let bytes = store
            .records
            .get(wtxn, &row_key(*row))?
            .expect("a listed dead row exists");
        let mut record = decode_row(bytes)?;
        record.status = RowStatus::Pending;
        record.attempts = 0;
        record.first_attempt_at_ms = 0;
        record.at_ms = now_ms;
        record.error = None;
        record.replay = Some(step.replay.clone());
        store
            .records
            .put(wtxn, &row_key(*row), &encode_row(&record))?;
        // A row of an ordered sink queues in its lane again.
        if super::lanes::join(store, wtxn, record.lane, *row)? {
            store.due.put(
                wtxn,
                &timed_key(*no, now_ms, *row),
                &record.size_bytes.to_be_bytes(),
            )?;
            due_tenants.push(*no);
        }
    }
    if !moves.is_empty() {
        let moved = moves.len() as u64;
        add_replay(store, wtxn, &step.replay, ReplayCounter::Moved, moved)?;
    }
    due_tenants.sort_unstable();
    due_tenants.dedup();
    Ok(Revived {
        moved: moves.len() as u64,
        due_tenants: due_tenants
            .iter()
            .map(|no| tenants.name(*no).clone())
            .collect(),
        cursor: last.or_else(|| step.cursor.clone()),
        exhausted,
    })
}

/// One bounded pass over a shard's dead keys, as replay and purge steps
/// make them.
pub(super) struct DeadScan<'a> {
    filter: &'a DeadFilter,
    /// The last dead key a previous step examined.
    cursor: Option<&'a [u8]>,
    /// The most rows to take.
    max_rows: u64,
    /// The most dead keys to examine.
    budget: usize,
}

/// What a [`DeadScan`] found.
pub(super) struct Matching {
    /// The rows taken: each one's dead key, tenant number and id.
    pub(super) rows: Vec<(Vec<u8>, u32, RowId)>,
    /// The last dead key examined.
    pub(super) last: Option<Vec<u8>>,
    /// Every matching key after the cursor was examined within the budget.
    pub(super) exhausted: bool,
}

impl<'a> DeadScan<'a> {
    pub(super) fn new(
        filter: &'a DeadFilter,
        cursor: &'a Option<Vec<u8>>,
        max_rows: u64,
        budget: usize,
    ) -> DeadScan<'a> {
        DeadScan {
            filter,
            cursor: cursor.as_deref(),
            max_rows,
            budget,
        }
    }

    /// The dead rows matching the filter that `take` accepts.
    pub(super) fn run(
        &self,
        store: &ShardStore,
        txn: &RoTxn,
        tenants: &TenantTable,
        take: impl Fn(&DeadItem) -> bool,
    ) -> Result<Matching, StoreError> {
        let mut rows = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        let mut examined = 0;
        let keys = DeadKeys::of(store, txn, tenants, self.filter)?;
        for (no, tenant) in tenants_of(tenants, self.filter) {
            let low = timed_key(no, self.filter.since_ms, RowId::MIN);
            let high = timed_key(no, self.filter.until_ms, RowId::MAX);
            let start = match self.cursor {
                Some(c) if c >= &high[..] => continue,
                Some(c) if c >= &low[..] => Bound::Excluded(c),
                _ => Bound::Included(&low[..]),
            };
            for k in keys.within(store, txn, (start, Bound::Included(&high[..])), false)? {
                if rows.len() as u64 >= self.max_rows || examined >= self.budget {
                    return Ok(Matching {
                        rows,
                        last,
                        exhausted: false,
                    });
                }
                let k = k?;
                examined += 1;
                last = Some(k.to_vec());
                let Some(position) = DeadPosition::of_key(0, k) else {
                    continue;
                };
                if item(store, txn, self.filter, &tenant, position)?.is_some_and(|i| take(&i)) {
                    rows.push((k.to_vec(), no, position.row));
                }
            }
        }
        Ok(Matching {
            rows,
            last,
            exhausted: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::dead_fixture::{apply_all, dead_rows, dead_rows_of, REFUSED};
    use super::super::record::sample_hook;
    use super::*;
    use crate::core::StoreOp;

    /// Reference scenarios 35 and 36: a replay step examines at most its
    /// budget of dead keys. Past it, the step stops with its cursor at the
    /// last key it examined, not exhausted, and the next step resumes after
    /// that key: a match behind more non-matching keys than one step's
    /// budget is still found, and moved once.
    #[test]
    fn a_replay_step_stops_at_its_scan_budget_and_resumes_from_its_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let mut sources = vec!["other"; 25];
        sources.push("wanted");
        let (store, tenants) = dead_rows(dir.path(), &sources);
        let mut step = ReviveStep {
            replay: Arc::from("r1"),
            filter: DeadFilter {
                source_id: Some("wanted".into()),
                ..DeadFilter::default()
            },
            cursor: None,
            max_rows: 5,
        };
        let revive_step = |step: &ReviveStep| {
            let mut wtxn = store.env.write_txn().unwrap();
            let revived = revive(&store, &mut wtxn, &tenants, step, 10, 100).unwrap();
            wtxn.commit().unwrap();
            revived
        };
        let tenth_key = timed_key(
            0,
            19,
            RowId {
                seq: 10,
                sink_index: 0,
            },
        )
        .to_vec();
        let first = revive_step(&step);
        assert_eq!(
            first,
            Revived {
                moved: 0,
                due_tenants: vec![],
                cursor: Some(tenth_key),
                exhausted: false
            },
            "10 keys examined, no match"
        );
        step.cursor = first.cursor;
        let second = revive_step(&step);
        assert_eq!((second.moved, second.exhausted), (0, false));
        step.cursor = second.cursor;
        let third = revive_step(&step);
        assert_eq!(
            (third.moved, third.exhausted),
            (1, true),
            "the 26th key matched"
        );
        let wanted = RowId {
            seq: 26,
            sink_index: 0,
        };
        let record = store.row(wanted).unwrap().unwrap();
        assert_eq!(
            (record.status, record.attempts, record.replay.as_deref()),
            (RowStatus::Pending, 0, Some("r1"))
        );
        assert_eq!(store.replay_counters("r1").unwrap().moved, 1);
        step.cursor = None;
        assert_eq!(revive_step(&step).moved, 0, "moved once");
    }

    fn hook_filter(id: &str) -> DeadFilter {
        DeadFilter {
            hook_id: Some(id.into()),
            ..DeadFilter::default()
        }
    }

    fn listed_ids(store: &ShardStore, filter: &DeadFilter) -> Vec<(String, String)> {
        let page = store.dead_page(0, filter, None, 100).unwrap();
        page.into_iter().map(|i| (i.hook_id, i.reason)).collect()
    }

    /// A filter naming a hook finds that hook's dead rows through the
    /// hook-id index: a replay step for the 26th of 30 dead hooks moves it
    /// and is done within a budget of 10 keys (a walk of the dead keys
    /// would have examined 10 others and stopped), and listings, counts and
    /// the time bounds agree with what a walk finds.
    #[test]
    fn a_hooks_dead_rows_are_found_without_walking_every_dead_key() {
        let dir = tempfile::tempdir().unwrap();
        let (store, tenants) = dead_rows(dir.path(), &["s"; 30]);
        let step = ReviveStep {
            replay: Arc::from("r1"),
            filter: hook_filter("h26"),
            cursor: None,
            max_rows: 5,
        };
        assert_eq!(store.count_dead(&step.filter).unwrap(), 1);
        let reason = REFUSED.to_string();
        assert_eq!(
            listed_ids(&store, &step.filter),
            [("h26".to_string(), reason.clone())]
        );
        let after_it = DeadFilter {
            since_ms: 36,
            ..hook_filter("h26")
        };
        assert_eq!(store.count_dead(&after_it).unwrap(), 0, "dead at 35");
        let before_it = DeadFilter {
            until_ms: 34,
            ..hook_filter("h26")
        };
        assert_eq!(listed_ids(&store, &before_it), []);
        assert_eq!(listed_ids(&store, &hook_filter("h99")), []);
        let other_tenant = DeadFilter {
            tenant: Some("u".into()),
            ..hook_filter("h26")
        };
        assert_eq!(store.count_dead(&other_tenant).unwrap(), 0);

        let mut wtxn = store.env.write_txn().unwrap();
        let revived = revive(&store, &mut wtxn, &tenants, &step, 10, 100).unwrap();
        wtxn.commit().unwrap();
        assert_eq!((revived.moved, revived.exhausted), (1, true));
        assert_eq!(
            revived.due_tenants,
            [TenantId::from("t")],
            "its tenant named"
        );
        assert_eq!(store.count_dead(&step.filter).unwrap(), 0);
        assert_eq!(store.count_dead(&DeadFilter::default()).unwrap(), 29);
    }

    /// A filter by sink index or by kind of reason takes only those rows,
    /// in listings, counts, replay steps and purges alike (they share the
    /// match): of an outage's rows and a receiver's refusals at two sinks,
    /// a replay of sink 1's exhausted rows moves just those.
    #[test]
    fn dead_rows_are_taken_by_their_sink_and_their_kind_of_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (outage, horizon) = ("sink http: HTTP status 503: down", "retry_horizon: http");
        let rows = [
            ("s", 0, REFUSED),
            ("s", 1, outage),
            ("s", 1, REFUSED),
            ("s", 1, horizon),
            ("s", 0, outage),
            ("s", 1, outage),
        ];
        let (store, tenants) = dead_rows_of(dir.path(), &rows);
        let filter = |sink_index, reason| DeadFilter {
            sink_index,
            reason,
            ..DeadFilter::default()
        };
        let hooks = |f: &DeadFilter| -> Vec<String> {
            let page = store.dead_page(0, f, None, 100).unwrap();
            page.into_iter().rev().map(|i| i.hook_id).collect()
        };
        assert_eq!(hooks(&filter(Some(1), None)), ["h2", "h3", "h4", "h6"]);
        let refused = filter(None, Some(DeadReasonKind::Permanent.into()));
        assert_eq!(hooks(&refused), ["h1", "h3"]);
        let exhausted = filter(Some(1), Some(DeadReasonKind::MaxAttempts.into()));
        assert_eq!(hooks(&exhausted), ["h2", "h6"]);
        let outage = filter(None, Some("max_attempts,retry_horizon".parse().unwrap()));
        assert_eq!(hooks(&outage), ["h2", "h4", "h5", "h6"]);
        assert_eq!(hooks(&filter(Some(2), None)), Vec::<String>::new());
        assert_eq!(store.count_dead(&exhausted).unwrap(), 2);
        let listed = store
            .dead_page(0, &filter(Some(1), None), None, 100)
            .unwrap();
        let kinds: Vec<_> = listed.iter().rev().map(|i| i.reason_kind()).collect();
        let (max, perm, horizon) = (
            Some(DeadReasonKind::MaxAttempts),
            Some(DeadReasonKind::Permanent),
            Some(DeadReasonKind::RetryHorizon),
        );
        assert_eq!(kinds, [max, perm, horizon, max]);

        let step = ReviveStep {
            replay: Arc::from("r1"),
            filter: exhausted.clone(),
            cursor: None,
            max_rows: 10,
        };
        let mut wtxn = store.env.write_txn().unwrap();
        let revived = revive(&store, &mut wtxn, &tenants, &step, 100, 100).unwrap();
        wtxn.commit().unwrap();
        assert_eq!((revived.moved, revived.exhausted), (2, true));
        assert_eq!(hooks(&DeadFilter::default()), ["h1", "h3", "h4", "h5"]);
    }

    /// A replay counts its rows' outcomes until it is forgotten; a row it
    /// revived that settles after that (one retrying past the replay's
    /// retention) leaves no counter behind.
    #[test]
    fn a_forgotten_replays_rows_settle_uncounted() {
        let dir = tempfile::tempdir().unwrap();
        let (store, tenants) = dead_rows(dir.path(), &["s", "s"]);
        let step = ReviveStep {
            replay: Arc::from("r1"),
            filter: DeadFilter::default(),
            cursor: None,
            max_rows: 10,
        };
        let mut wtxn = store.env.write_txn().unwrap();
        assert_eq!(
            revive(&store, &mut wtxn, &tenants, &step, 10, 100)
                .unwrap()
                .moved,
            2
        );
        wtxn.commit().unwrap();
        let deliver = |seq| {
            let (row, hook) = (RowId { seq, sink_index: 0 }, sample_hook(seq));
            let ops = [
                StoreOp::Claim {
                    row,
                    tenant: hook.tenant.clone(),
                    due_at_ms: 100,
                    size_bytes: hook.size_bytes(),
                },
                StoreOp::Delivered {
                    row,
                    replay: Some(Arc::from("r1")),
                    lane: None,
                },
            ];
            let mut wtxn = store.env.write_txn().unwrap();
            apply_all(&store, &mut wtxn, &tenants, &ops);
            wtxn.commit().unwrap();
        };
        deliver(1);
        let counts = ReplayCounts {
            moved: 2,
            delivered: 1,
            ..ReplayCounts::default()
        };
        assert_eq!(store.replay_counters("r1").unwrap(), counts);

        let mut wtxn = store.env.write_txn().unwrap();
        forget_replay(&store, &mut wtxn, "r1").unwrap();
        wtxn.commit().unwrap();
        deliver(2);
        assert_eq!(
            store
                .row(RowId {
                    seq: 2,
                    sink_index: 0
                })
                .unwrap(),
            None
        );
        let rtxn = store.env.read_txn().unwrap();
        let left: Vec<_> = (store.meta.prefix_iter(&rtxn, b"replay/").unwrap())
            .map(|entry| String::from_utf8_lossy(entry.unwrap().0).into_owned())
            .collect();
        assert_eq!(left, Vec::<String>::new());
    }

    /// Where the index entry or a row of the named hook does not decode,
    /// the hook's dead rows are still found (by a walk): a damaged record
    /// hides no dead letter.
    #[test]
    fn a_hook_whose_index_entry_or_row_does_not_decode_is_still_found() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = dead_rows(dir.path(), &["s"; 5]);
        let mut wtxn = store.env.write_txn().unwrap();
        store.hook_ids.put(&mut wtxn, b"h2", b"junk").unwrap();
        let h4 = RowId {
            seq: 4,
            sink_index: 0,
        };
        store.records.put(&mut wtxn, &row_key(h4), b"junk").unwrap();
        wtxn.commit().unwrap();
        assert_eq!(
            listed_ids(&store, &hook_filter("h2")),
            [("h2".to_string(), REFUSED.to_string())]
        );
        assert_eq!(
            listed_ids(&store, &hook_filter("h4")),
            [("h4".to_string(), UNDECODABLE.to_string())]
        );
    }
}
