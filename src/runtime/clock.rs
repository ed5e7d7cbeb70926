//! Wall-clock milliseconds for the shell. Due times are stored, so they are
//! wall-clock; a shard's clock never goes backwards, and it keeps running
//! when the wall clock is stepped back — while the process runs, and
//! across a restart (it starts from the reading its store last wrote at).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What clock `id` reads now (`clock_gettime(2)`), in nanoseconds.
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes the timespec it is given, nothing else.
    unsafe { libc::clock_gettime(id, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// The instant `wait` from now; for a wait longer than an `Instant` can
/// take (a caller's `Duration::MAX`, "for ever"), a century from now.
pub fn deadline_after(wait: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(wait).unwrap_or(now + CENTURY)
}

/// A shard's clock: the wall clock, except that after the wall clock is
/// stepped back it runs on at the monotonic clock's rate from where it was
/// (a clock that only held still until the wall caught up would hold every
/// retry and attempt deadline for the length of the step). A step forward
/// is followed.
#[derive(Debug, Default)]
pub struct Clock {
    /// A monotonic instant and the clock's reading then.
    anchor: Option<(Instant, u64)>,
    last_ms: u64,
}

/// A reading of a shard's clock and the monotonic instant it was taken
/// at: what turns a time of the core's (such as an attempt's deadline)
/// into an instant for the IO workers.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub ms: u64,
    pub at: Instant,
}

impl Reading {
    /// What the clock read `ago` before the reading.
    pub fn ms_before(&self, ago: Duration) -> u64 {
        self.ms.saturating_sub(ago.as_millis() as u64)
    }

    /// The instant the clock reads `ms` (the reading's own instant for a
    /// time already past).
    pub fn instant_of(&self, ms: u64) -> Instant {
        self.at + Duration::from_millis(ms.saturating_sub(self.ms))
    }
}

impl Clock {
    /// A shard's clock that starts from `stored_ms`, the reading its store
    /// last committed writes at, if the wall clock is behind it (stepped
    /// back while the process was down): due times written then come due
    /// as they were set, not held for the length of the step.
    pub fn resumed_from(stored_ms: u64) -> Clock {
        Clock::resumed_at(Instant::now(), stored_ms)
    }

    fn resumed_at(now: Instant, stored_ms: u64) -> Clock {
        Clock {
            anchor: Some((now, stored_ms)),
            last_ms: stored_ms,
        }
    }

    pub fn now_ms(&mut self) -> u64 {
        self.read().ms
    }

    pub fn read(&mut self) -> Reading {
        let at = Instant::now();
        Reading {
            ms: self.at(at, wall_ms()),
            at,
        }
    }

    /// The reading at monotonic instant `now` when the wall clock says `wall_ms`.
    fn at(&mut self, now: Instant, wall_ms: u64) -> u64 {
        let (anchored_at, anchor_ms) = *self.anchor.get_or_insert((now, wall_ms));
        let running_ms = anchor_ms + now.saturating_duration_since(anchored_at).as_millis() as u64;
        if wall_ms >= running_ms {
            self.anchor = Some((now, wall_ms));
        }
        self.last_ms = self.last_ms.max(wall_ms.max(running_ms));
        self.last_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_back_of_the_wall_clock_does_not_stop_the_clock_and_a_step_forward_is_followed() {
        let mut clock = Clock::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let wall = 10_000_000;
        assert_eq!(clock.at(at(0), wall), wall);
        assert_eq!(clock.at(at(100), wall + 100), wall + 100);
        // The wall clock is stepped back an hour: the clock runs on.
        assert_eq!(clock.at(at(200), wall + 200 - 3_600_000), wall + 200);
        assert_eq!(clock.at(at(1_200), wall + 1_200 - 3_600_000), wall + 1_200);
        // Stepped forward a minute: followed, and run on from there.
        assert_eq!(clock.at(at(1_300), wall + 61_300), wall + 61_300);
        assert_eq!(clock.at(at(1_400), wall + 61_300), wall + 61_400);
        // A monotonic reading from before the last one: never backwards.
        assert_eq!(clock.at(at(1_350), wall + 61_350), wall + 61_400);
    }

    #[test]
    fn a_clock_resumed_ahead_of_the_wall_runs_on_from_there_and_one_behind_follows_the_wall() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let wall = 10_000_000;
        // The store last wrote an hour ahead of the wall clock now.
        let mut clock = Clock::resumed_at(t0, wall + 3_600_000);
        assert_eq!(clock.at(at(0), wall), wall + 3_600_000);
        assert_eq!(clock.at(at(500), wall + 500), wall + 3_600_500);
        // The wall clock stepped forward past it: followed.
        assert_eq!(clock.at(at(600), wall + 3_700_000), wall + 3_700_000);
        // A store that wrote before the wall clock now: the wall clock.
        let mut clock = Clock::resumed_at(t0, wall - 60_000);
        assert_eq!(clock.at(at(0), wall), wall);
        assert_eq!(clock.at(at(100), wall + 100), wall + 100);
    }

    #[test]
    fn a_reading_turns_the_clocks_times_into_instants() {
        let at = Instant::now();
        let reading = Reading { ms: 5_000, at };
        assert_eq!(reading.instant_of(35_000), at + Duration::from_secs(30));
        assert_eq!(reading.instant_of(5_000), at);
        assert_eq!(reading.instant_of(4_000), at, "a time past is now");
        assert_eq!(reading.ms_before(Duration::from_secs(2)), 3_000);
        assert_eq!(reading.ms_before(Duration::from_secs(9)), 0);
    }
}
