//! The threads around the core: shard loops, IO pools, the coordinator and
//! the engine handle.

mod backup;
mod breaker_log;
mod clock;
mod committing;
pub mod coordinator;
mod cpu_set;
mod dead_log;
mod engine;
mod errors;
mod expiry;
mod failure_log;
pub(crate) mod hook_headers;
mod inspect;
mod io_thread;
mod job_queue;
mod observers;
mod oneshot;
mod open;
mod pool;
mod reply;
mod restart;
mod room;
pub mod shard;
mod shard_thread;
mod stall;
pub mod step;
mod wake;

pub use crate::store::ReviveStep;
pub use backup::{Backup, BackupError, BACKUP_MANIFEST};
pub use clock::{clock_ns, deadline_after, wall_ms};
pub use committing::Committing;
pub use engine::{Engine, NewHook, Pressure};
pub use errors::{CommitError, OpenError, Unavailable};
pub use inspect::{Replayed, ShardTenants};
pub use observers::{BreakerObserver, OutcomeObserver};
pub use open::{shards_to_open, EngineBuilder};
pub use shard::ShardStats;
pub use step::{Completion, NewRows, ShardState, StepOutput};
pub use wake::{SinkWoken, WakeError};
