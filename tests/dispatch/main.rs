//! The dispatch pipeline end to end: a real engine on a real LMDB directory,
//! delivering to Rust sinks and to HTTP receivers on loopback. Each test
//! ports a reference scenario (its number in the name's doc).

#[path = "../common/mod.rs"]
mod common;

mod awaited;
mod dead_letters;
mod delivery;
mod lifecycle;
mod observers;
mod sinks;
mod wake;

use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Engine, NewHook, RowStatus, Sink, SinkConfig, SinkError};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
