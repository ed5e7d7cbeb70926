//! The values that cross the core's boundary: ids, due entries, store
//! operations, jobs and attempt results.

use crate::core::retry::FailureClass;
use crate::core::BreakerEvent;
use crate::store::record::SinkPlaces;
use crate::store::{Hook, HookHead};
use std::fmt;
use std::sync::Arc;

/// A tenant id. Cheap to clone; the core keys everything per tenant by it.
pub type TenantId = Arc<str>;

/// One delivery row: a hook (by its shard-local commit order) and a sink index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowId {
    pub seq: u64,
    pub sink_index: u16,
}

/// `seq 12 sink 0`, for messages.
impl fmt::Display for RowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {} sink {}", self.seq, self.sink_index)
    }
}

impl RowId {
    pub const MIN: RowId = RowId {
        seq: 0,
        sink_index: 0,
    };
    pub const MAX: RowId = RowId {
        seq: u64::MAX,
        sink_index: u16::MAX,
    };
}

/// One attempt, from start to outcome. Unique per core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

/// A row of the due index as the scan reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueEntry {
    pub tenant: TenantId,
    pub due_at_ms: u64,
    pub row: RowId,
    pub size_bytes: u64,
}

/// The stored state of a pending row the scan needs to decide on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowState {
    pub sink_type: Arc<str>,
    pub attempts: u32,
    /// When the row was first tried; 0 = never.
    pub first_attempt_at_ms: u64,
    /// The replay that revived the row, if any.
    pub replay: Option<Arc<str>>,
    /// The ordering lane of a row of an ordered sink.
    pub lane: Option<LaneId>,
    /// Its hook's sinks' places when it was committed (`None` until its
    /// hook is read, and for a hook stored without them): what binds it
    /// to a sink (`Catalog::bind`).
    pub sink_places: Option<SinkPlaces>,
    /// Parked behind its key's open breaker (`StoreOp::Park`) and not made
    /// due since: a reload that drops the breaker (not one that moves it
    /// with its sink) unparks it (see
    /// `unpark`).
    pub parked: bool,
    /// Written back to wait for its turn behind its sink's rate (its last
    /// error [`PACED_ERROR`]) and not made due since: a reload that changes
    /// the rate makes it due (see `repace`).
    pub paced: bool,
}

/// The last error of a row written back to wait for its turn behind its
/// sink's rate (`max_calls_per_s`).
pub const PACED_ERROR: &str = "waiting for its turn (max_calls_per_s)";

/// The last error of a row held while its sink is paused.
pub const PAUSED_ERROR: &str = "sink paused";

/// The last error of a row held behind its slow sink's queue, until the
/// sink's wake makes it due (see `slow_keys`).
pub const SLOW_SINK_ERROR: &str = "held behind its slow sink's queue";

/// The length of a [`LaneId`].
pub const LANE_ID_BYTES: usize = 14;

/// The ordering lane a row of an ordered sink waits in (see `store::lanes`:
/// tenant number, sink index and a hash of the source and the lane's key).
/// The core only carries it, so that the store releases the lane when the
/// row settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LaneId(pub [u8; LANE_ID_BYTES]);

/// What loading a claimed row found.
#[derive(Debug, Clone)]
pub enum Loaded {
    Row {
        state: RowState,
        hook: Arc<Hook>,
    },
    /// The due entry points at no row (a leftover): it is dropped.
    RowMissing,
    /// The row's hook is gone: the row is dropped (not a dead letter).
    HookMissing,
    /// The row's record does not decode or says it is not pending: the
    /// row is quarantined (its due key becomes a dead key; the bytes stay
    /// for inspection), so one bad record cannot stall the shard.
    RowCorrupt,
    /// The row is fine but its hook's record does not decode: the row is
    /// dead-lettered.
    HookCorrupt {
        state: RowState,
    },
}

/// The slice of the store the scan reads. The shell implements it over the
/// shard's write transaction; tests implement it over a BTreeMap. It is
/// infallible here: a store error is recorded by the implementation and the
/// shell rebuilds the core from the store (see `runtime::step`).
pub trait DueIndex {
    /// Every tenant this shard has stored rows for (read when the core
    /// cannot tell which tenants have rows due: a new core, rows written
    /// for tenants not named).
    fn tenants(&mut self, out: &mut Vec<TenantId>);
    /// The earliest due time of the tenant's pending rows after `after`
    /// (the scan's read position: rows it claimed are not yet written).
    fn earliest_due_ms(&mut self, tenant: &TenantId, after: Option<&DueEntry>) -> Option<u64>;
    /// Up to `max_rows` of the tenant's rows due at or before `now_ms`, in
    /// (due time, seq, sink index) order, starting after `after`.
    fn due_page(
        &mut self,
        tenant: &TenantId,
        now_ms: u64,
        after: Option<&DueEntry>,
        max_rows: usize,
        out: &mut Vec<DueEntry>,
    );
    /// The row and its hook.
    fn load(&mut self, row: RowId) -> Loaded;
    /// The row and its hook's ids, not its headers and body: for a pass
    /// that decides on many rows without claiming them (a hook may weigh a
    /// mebibyte). `Err` is what [`DueIndex::load`] reports of a row that
    /// cannot be read; a hook whose ids decode is read as a row here, and
    /// the scan that claims it finds the rest.
    fn load_head(&mut self, row: RowId) -> Result<RowHead, Loaded> {
        match self.load(row) {
            Loaded::Row { state, hook } => Ok(RowHead {
                state,
                hook: hook.head(),
            }),
            unreadable => Err(unreadable),
        }
    }
}

/// A pending row as [`DueIndex::load_head`] reads it.
#[derive(Debug, Clone)]
pub struct RowHead {
    pub state: RowState,
    pub hook: HookHead,
}

/// What the store keeps of a row besides where it is and its last error;
/// a reschedule or a dead-letter writes it whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowFields {
    pub tenant: TenantId,
    pub sink_type: Arc<str>,
    pub attempts: u32,
    /// When the row was first tried; 0 = never.
    pub first_attempt_at_ms: u64,
    pub size_bytes: u64,
    /// The replay that revived the row, if any.
    pub replay: Option<Arc<str>>,
    /// The ordering lane of a row of an ordered sink.
    pub lane: Option<LaneId>,
}

impl RowFields {
    /// The fields of a due row as loaded.
    pub fn of(entry: &DueEntry, state: &RowState) -> RowFields {
        RowFields {
            tenant: entry.tenant.clone(),
            sink_type: state.sink_type.clone(),
            attempts: state.attempts,
            first_attempt_at_ms: state.first_attempt_at_ms,
            size_bytes: entry.size_bytes,
            replay: state.replay.clone(),
            lane: state.lane,
        }
    }

    /// The sink key of `row`, a row of source `source_id` with these fields.
    pub fn key(&self, source_id: &Arc<str>, row: RowId) -> SinkKey {
        SinkKey {
            tenant: self.tenant.clone(),
            source_id: source_id.clone(),
            sink_index: row.sink_index,
            sink_type: self.sink_type.clone(),
        }
    }
}

/// The due time of a held row (its sink paused): later than any real
/// time, so no scan reaches it, and far enough below `u64::MAX` that no
/// arithmetic on due times overflows. Its key's wake (see
/// `core::key_wake`) makes it due once its sink is not paused and its
/// breaker does not hold it.
pub const HELD_DUE_MS: u64 = 1 << 62;

/// The latest due time a row is given: before the year 10000 by the wall
/// clock, plus the longest wait anything sets.
const LATEST_REAL_DUE_MS: u64 = 253_402_300_800_000
    + crate::limits::MAX_RETRY_DELAY_MS
    + crate::limits::MAX_BREAKER_OPEN_MS
    + crate::limits::MAX_ATTEMPT_TIMEOUT_MS;
const _: () = assert!(LATEST_REAL_DUE_MS < HELD_DUE_MS);

/// A store change the core decided. The shell applies each in order, in the
/// loop iteration's one write transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum StoreOp {
    /// A due row is claimed: out of the due index, marked in flight.
    Claim {
        row: RowId,
        tenant: TenantId,
        due_at_ms: u64,
        size_bytes: u64,
    },
    /// The sink took it: the row goes, and the hook with its last row.
    /// A revived row's replay counts it; its lane's next row is due.
    Delivered {
        row: RowId,
        replay: Option<Arc<str>>,
        lane: Option<LaneId>,
    },
    /// Pending again (a retry or a write-back), due at `due_at_ms`.
    Reschedule {
        row: RowId,
        fields: RowFields,
        due_at_ms: u64,
        error: Option<String>,
    },
    /// Parked behind its key's open breaker: pending again, due at
    /// `due_at_ms`, attempts unchanged, last error "breaker open". A revived
    /// row's replay counts it.
    Park {
        row: RowId,
        fields: RowFields,
        due_at_ms: u64,
    },
    /// Held while its sink is paused, or behind a slow sink's queue:
    /// pending again, due at [`HELD_DUE_MS`] (no scan reaches it; a wake
    /// makes it due), attempts unchanged, last error `error` (which of
    /// the two: [`PAUSED_ERROR`] or [`SLOW_SINK_ERROR`]).
    Hold {
        row: RowId,
        fields: RowFields,
        error: &'static str,
    },
    /// Dead-lettered.
    Dead {
        row: RowId,
        fields: RowFields,
        dead_at_ms: u64,
        reason: String,
    },
    /// The row or its hook is missing: drop what is left of the row.
    Forget { row: RowId },
    /// The row's record is corrupt: out of flight into the dead index,
    /// its bytes left as they are.
    Quarantine {
        row: RowId,
        tenant: TenantId,
        dead_at_ms: u64,
    },
    /// A key's breaker opened or closed: an open one is kept in the store,
    /// with its sink's spot, so a restart in its open period keeps it open
    /// on that sink, wherever the restart's config put it.
    Breaker {
        event: BreakerEvent,
        spot: Option<SinkSpot>,
    },
    /// Unparking (see `core::unpark`) started or ended: one under way is
    /// kept in the store, so a new core takes it up.
    Unparking { under_way: bool },
    /// Unparking walked every tenant with breakers off: no row is parked
    /// (the store stops saying rows may be; see `core::unpark`).
    NoneParked,
    /// Pacing again (see `core::repace`) started (`None`: the store stops
    /// saying which paces its rows were paced at) or ended (`Some`: their
    /// fingerprint, [`super::Catalog::paces_fingerprint`]), so a new core
    /// paces again what a pass left or a changed config makes stale.
    PacedAt { paces: Option<u64> },
}

impl StoreOp {
    /// The claim of a due entry: out of the due index, in flight.
    pub fn claim_of(entry: &DueEntry) -> StoreOp {
        StoreOp::Claim {
            row: entry.row,
            tenant: entry.tenant.clone(),
            due_at_ms: entry.due_at_ms,
            size_bytes: entry.size_bytes,
        }
    }
}

/// How an attempt failed: the class drives the retry policy, the message is
/// stored on the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptFailure {
    pub class: FailureClass,
    pub message: String,
}

/// The result of one attempt.
pub type AttemptResult = Result<(), AttemptFailure>;

/// Where a sink stands among its source's sinks by place (see
/// [`super::Catalog::bind`]): its place, and how many sinks of that place
/// come before it. What finds the sink again after a reload or a restart
/// on another config moved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SinkSpot {
    pub place: u64,
    pub rank: u16,
}

/// The per-sink queue key: the tenant, source, (bound) sink index and type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SinkKey {
    pub tenant: TenantId,
    pub source_id: Arc<str>,
    pub sink_index: u16,
    pub sink_type: Arc<str>,
}

/// An attempt to start: the shell runs it on the IO pool and reports its
/// result with `handle_outcome(job.id, …)`.
#[derive(Debug, Clone)]
#[must_use]
pub struct Job {
    pub id: JobId,
    pub row: RowId,
    pub key: SinkKey,
    /// 1-based.
    pub attempt: u32,
    pub hook: Arc<Hook>,
    pub deadline_at_ms: u64,
    /// The replay that revived the row, if any.
    pub replay: Option<Arc<str>>,
}

/// What the shell hands one IO worker: a call into one sink.
#[derive(Debug)]
#[must_use]
pub enum Call {
    /// One attempt (`Sink::deliver`).
    One(Job),
    /// Attempts of one key of a batching sink, in one request
    /// (`Sink::deliver_batch`); each settles on its own entry's result.
    /// A batch takes one slot of every concurrency cap, whatever its size.
    Batch(Vec<Job>),
}

impl Call {
    /// The attempts of the call, in order.
    pub fn jobs(&self) -> &[Job] {
        match self {
            Call::One(job) => std::slice::from_ref(job),
            Call::Batch(jobs) => jobs,
        }
    }
}

/// The shard's share of the node's global windows, granted by the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub max_inflight: u64,
    pub max_inflight_bytes: u64,
    pub concurrency: u64,
}
