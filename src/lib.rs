//! goad: an at-least-once webhook dispatch engine, thread-per-core and
//! runtime-free.
//!
//! A service commits a hook for a source; goad writes one durable delivery
//! row per sink of that source and delivers every row at least once,
//! retrying with backoff until the sink says ok or the row is
//! dead-lettered. See `README.md` for the guarantees and `DESIGN.md` for the
//! architecture.

pub mod claim_check;
pub mod config;
pub mod core;
pub mod demo;
pub mod latency;
pub mod limits;
pub mod log;
pub mod node;
mod panics;
mod pem;
mod private_file;
pub mod runtime;
pub mod sink;
pub mod store;
#[cfg(test)]
mod test_support;

pub use config::{Config, ConfigError, SinkConfig, SourceConfig};
pub use core::{BreakerEvent, Outcome, OutcomeEvent, SinkKey};
pub use node::{Node, NodeOptions};
pub use runtime::{
    Backup, BackupError, CommitError, Engine, EngineBuilder, NewHook, OpenError, Pressure,
    ShardStats, Unavailable, BACKUP_MANIFEST,
};
pub use sink::{Delivery, Sink, SinkError};
pub use store::{Hook, HookStatus, RowRecord, RowStatus, RowView, SinkState, SinkStatus};
