//! Wall-clock milliseconds for the shell. Due times are stored, so they are
//! wall-clock; a shard's clock never goes backwards.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A clock that never goes backwards.
#[derive(Debug, Default)]
pub struct Clock {
    last_ms: u64,
}

impl Clock {
    pub fn now_ms(&mut self) -> u64 {
        self.last_ms = self.last_ms.max(wall_ms());
        self.last_ms
    }
}
