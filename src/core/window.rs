//! Windows: how many claimed rows and bytes a holder (the shard, a tenant)
//! may have unfinished at once.

/// What a holder has claimed and not finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub rows: u64,
    pub bytes: u64,
}

/// A holder's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub max_rows: u64,
    pub max_bytes: u64,
}

impl Usage {
    pub fn add(&mut self, bytes: u64) {
        self.rows += 1;
        self.bytes += bytes;
    }

    pub fn remove(&mut self, bytes: u64) {
        assert!(
            self.rows >= 1 && self.bytes >= bytes,
            "window usage below zero: {self:?} - {bytes} bytes"
        );
        self.rows -= 1;
        self.bytes -= bytes;
    }
}

impl Window {
    /// Room for at least one more row (a row bigger than the byte room still
    /// moves when the holder has nothing else claimed: see `bytes_room`).
    pub fn has_room(&self, used: Usage) -> bool {
        used.rows < self.max_rows && used.bytes < self.max_bytes
    }

    pub fn rows_room(&self, used: Usage) -> u64 {
        self.max_rows.saturating_sub(used.rows)
    }

    pub fn bytes_room(&self, used: Usage) -> u64 {
        self.max_bytes.saturating_sub(used.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_rows_and_bytes() {
        let w = Window {
            max_rows: 2,
            max_bytes: 100,
        };
        let mut u = Usage::default();
        assert!(w.has_room(u));
        u.add(60);
        assert!(w.has_room(u));
        assert_eq!((w.rows_room(u), w.bytes_room(u)), (1, 40));
        u.add(40);
        assert!(!w.has_room(u));
        u.remove(40);
        assert!(w.has_room(u));
    }
}
