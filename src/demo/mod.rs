//! `goad demo`: the engine in-process against loopback receivers, and the
//! receiver itself (also used by the tests and the load tools).

pub mod receiver;
mod run;

pub use run::{run, DemoOptions};
