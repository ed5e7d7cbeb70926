//! goad: an at-least-once webhook dispatch engine, thread-per-core and
//! runtime-free.
//!
//! A service commits a hook for a source; goad writes one durable delivery
//! row per sink of that source and delivers every row at least once,
//! retrying with backoff until the sink says ok or the row is
//! dead-lettered. See `README.md` for the guarantees, the configuration,
//! the node's HTTP API and the architecture, and `src/store/mod.rs` for
//! the on-disk layout and its durability rules.
//!
//! # Embedding
//!
//! A host commits hooks and delivers them to a sink of its own (or to the
//! HTTP, SQS and Pub/Sub sinks a config names). This program is the
//! README's; `tools/test` runs it.
//!
//! ```
//! use goad::{Config, Delivery, Engine, NewHook, Outcome, OutcomeEvent, Sink, SinkError};
//! use std::sync::{mpsc, Arc, Mutex};
//! use std::time::Duration;
//!
//! /// The host's own destination: a ledger that turns its first call away,
//! /// as a service that is starting might.
//! #[derive(Default)]
//! struct Ledger {
//!     calls: Mutex<u32>,
//!     entries: Mutex<Vec<Vec<u8>>>,
//! }
//!
//! impl Sink for Ledger {
//!     fn deliver(&self, d: &Delivery<'_>) -> Result<(), SinkError> {
//!         let mut calls = self.calls.lock().unwrap();
//!         *calls += 1;
//!         if *calls == 1 {
//!             // Or SinkError::permanent (dead-letter now) / transient (back off).
//!             return Err(SinkError::retry_after(50, "the ledger is starting"));
//!         }
//!         self.entries.lock().unwrap().push(d.hook.body.clone());
//!         Ok(())
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // The host's data directory: a temporary one here.
//!     let data_dir = tempfile::tempdir()?;
//!     // Or Config::load(path) for a goad.toml: the same keys.
//!     let config = Config::from_toml(&format!(
//!         r#"
//!         data_dir = "{}"
//!         shards = 1
//!         [[sources]]
//!         id = "orders"
//!         tenant = "acme"
//!         sinks = [{{ type = "ledger" }}]
//!         "#,
//!         data_dir.path().display()
//!     ))?;
//!     let ledger = Arc::new(Ledger::default());
//!     let (outcomes, reported) = mpsc::channel();
//!     let engine = Engine::builder(config)
//!         .sink("ledger", ledger.clone())
//!         // On the shard thread, once per attempt: keep it quick.
//!         .on_outcome(move |e: &OutcomeEvent| {
//!             let _ = outcomes.send((e.hook_id.clone(), e.attempt, e.outcome.clone()));
//!         })
//!         .open()?;
//!
//!     // Durable on return: a crash from here on still delivers it.
//!     let id = engine.commit(NewHook::new("orders", r#"{"order": 42}"#))?;
//!
//!     let (hook, attempt, outcome) = reported.recv_timeout(Duration::from_secs(10))?;
//!     assert_eq!((hook.as_str(), attempt), (id.as_str(), 1));
//!     assert!(matches!(outcome, Outcome::Retrying { .. }));
//!     let (hook, attempt, outcome) = reported.recv_timeout(Duration::from_secs(10))?;
//!     assert_eq!((hook, attempt, outcome), (id.clone(), 2, Outcome::Delivered));
//!     assert_eq!(*ledger.entries.lock().unwrap(), [br#"{"order": 42}"#.to_vec()]);
//!     // An outcome is reported before it is written; `tick` returns once
//!     // nothing is due, claimed or running and what settled is written.
//!     engine.tick()?;
//!     // Delivered to every sink: the hook is gone from the store.
//!     assert!(engine.hook_status(&id)?.is_none());
//!     engine.shutdown();
//!     Ok(())
//! }
//! ```
//!
//! A host whose request handlers are futures commits with
//! [`Engine::commit_async`]`(hook).await`, which holds no executor thread
//! while the hook's batch syncs (goad itself runs no async runtime).
// No `unwrap` outside tests (a value that must be there is `expect`ed
// with why, and anything else is handled), and no `unsafe` block without a
// `// SAFETY:` comment.
#![deny(clippy::unwrap_used, clippy::undocumented_unsafe_blocks)]

pub mod claim_check;
pub mod config;
// The logic in virtual time: no clock, sleep, thread, lock or LMDB
// (clippy.toml lists them).
mod bounded_read;
#[deny(clippy::disallowed_methods, clippy::disallowed_types)]
pub mod core;
pub mod demo;
mod fnv;
pub mod latency;
pub mod limits;
pub mod log;
pub mod node;
mod panics;
mod pem;
mod private_file;
pub mod runtime;
pub mod sink;
// The store is called with the time: it reads no clock and starts no thread.
#[deny(clippy::disallowed_methods)]
pub mod store;
mod synced_dir;
#[cfg(test)]
mod test_support;
mod tls_provider;
mod trusted_roots;

pub use config::{Config, ConfigError, SinkConfig, SourceConfig};
pub use core::{BreakerEvent, Outcome, OutcomeEvent, SinkKey};
pub use node::{Node, NodeOptions};
pub use runtime::{
    Backup, BackupError, CommitError, Committing, Engine, EngineBuilder, NewHook, OpenError,
    Pressure, ShardStats, SinkWoken, Unavailable, WakeError, BACKUP_MANIFEST,
};
pub use sink::{Delivery, Sink, SinkError};
pub use store::{Hook, HookStatus, RowRecord, RowStatus, RowView, SinkState, SinkStatus};
