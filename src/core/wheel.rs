//! A hierarchical timer wheel in the manner of tokio's, without its
//! concurrency: one shard owns it.
//!
//! Seven levels of 64 slots each; level `l` slots span `64^l` ms, so the
//! wheel covers 64^7 ms at 1 ms resolution. A delay is capped at half of
//! that ([`MAX_DELAY_MS`], about 70 years) so that a deadline never wraps
//! into its own top-level slot. A timer lives at the
//! level of the highest bit in which its deadline differs from the wheel's
//! current time, so every timer of a lower level fires before any timer of a
//! higher one; each level keeps an occupied bitmap and finding the next
//! expiry is a rotate and a trailing-zeros count. When a higher-level slot
//! comes due its timers cascade down. Timers are slab entries addressed by
//! index + generation, and a slot is a vector of slab indices with O(1)
//! swap-remove, so cancelling (what almost every attempt does) costs nothing
//! later.

use std::collections::VecDeque;

const LEVELS: usize = 7;

/// The longest delay a timer can have; a later deadline fires at this delay.
pub const MAX_DELAY_MS: u64 = 1 << 41;
const SLOTS: u64 = 64;
const SLOT_BITS: u32 = 6;

/// A handle to a timer, to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
enum Place {
    Slot { level: u8, slot: u8, pos: u32 },
    Ready,
    Free,
}

#[derive(Debug)]
struct Entry<T> {
    generation: u32,
    deadline_ms: u64,
    place: Place,
    value: Option<T>,
}

/// The wheel. `poll(now)` returns expired values in deadline order per slot.
#[derive(Debug)]
pub struct Wheel<T> {
    elapsed_ms: u64,
    slots: Vec<Vec<u32>>,
    occupied: [u64; LEVELS],
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    ready: VecDeque<TimerId>,
    len: usize,
}

impl<T> Wheel<T> {
    /// A wheel whose current time is `now_ms`.
    pub fn new(now_ms: u64) -> Wheel<T> {
        Wheel {
            elapsed_ms: now_ms,
            slots: (0..LEVELS * SLOTS as usize).map(|_| Vec::new()).collect(),
            occupied: [0; LEVELS],
            entries: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Arms a timer; one at or before the wheel's time is ready at once.
    pub fn insert(&mut self, deadline_ms: u64, value: T) -> TimerId {
        let deadline_ms = deadline_ms.min(self.elapsed_ms.saturating_add(MAX_DELAY_MS));
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    generation: 0,
                    deadline_ms,
                    place: Place::Free,
                    value: None,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let entry = &mut self.entries[index as usize];
        entry.deadline_ms = deadline_ms;
        entry.value = Some(value);
        let id = TimerId {
            index,
            generation: entry.generation,
        };
        self.len += 1;
        self.place(index);
        id
    }

    /// Disarms a timer; `None` if it already fired or was cancelled.
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        let entry = self.entries.get(id.index as usize)?;
        if entry.generation != id.generation || entry.value.is_none() {
            return None;
        }
        if let Place::Slot { level, slot, pos } = entry.place {
            self.unlink(level as usize, slot as usize, pos as usize);
        }
        Some(self.release(id.index))
    }

    /// The next expired timer's value, if any deadline is at or before `now_ms`.
    pub fn poll(&mut self, now_ms: u64) -> Option<T> {
        loop {
            while let Some(id) = self.ready.pop_front() {
                let entry = &self.entries[id.index as usize];
                if entry.generation == id.generation && entry.value.is_some() {
                    return Some(self.release(id.index));
                }
            }
            match self.next_expiration() {
                Some((level, slot, at_ms)) if at_ms <= now_ms => {
                    self.elapsed_ms = at_ms;
                    self.cascade(level, slot);
                }
                _ => {
                    self.elapsed_ms = self.elapsed_ms.max(now_ms);
                    return None;
                }
            }
        }
    }

    /// A time at or before the earliest deadline (the start of the slot that
    /// holds it); `None` when the wheel is empty. Waking then and polling is
    /// enough: cascading moves the timer closer.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        if self
            .ready
            .iter()
            .any(|id| self.entries[id.index as usize].generation == id.generation)
        {
            return Some(self.elapsed_ms);
        }
        self.next_expiration().map(|(_, _, at)| at)
    }

    fn level_for(&self, deadline_ms: u64) -> usize {
        let masked = (self.elapsed_ms ^ deadline_ms) | (SLOTS - 1);
        let significant = 63 - masked.leading_zeros();
        ((significant / SLOT_BITS) as usize).min(LEVELS - 1)
    }

    fn place(&mut self, index: u32) {
        let deadline_ms = self.entries[index as usize].deadline_ms;
        if deadline_ms <= self.elapsed_ms {
            self.entries[index as usize].place = Place::Ready;
            let generation = self.entries[index as usize].generation;
            self.ready.push_back(TimerId { index, generation });
            return;
        }
        let level = self.level_for(deadline_ms);
        let slot = ((deadline_ms >> (level as u32 * SLOT_BITS)) & (SLOTS - 1)) as usize;
        let list = &mut self.slots[level * SLOTS as usize + slot];
        list.push(index);
        self.occupied[level] |= 1 << slot;
        self.entries[index as usize].place = Place::Slot {
            level: level as u8,
            slot: slot as u8,
            pos: (list.len() - 1) as u32,
        };
    }

    fn unlink(&mut self, level: usize, slot: usize, pos: usize) {
        let list = &mut self.slots[level * SLOTS as usize + slot];
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            self.entries[moved as usize].place = Place::Slot {
                level: level as u8,
                slot: slot as u8,
                pos: pos as u32,
            };
        }
        if list.is_empty() {
            self.occupied[level] &= !(1 << slot);
        }
    }

    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        entry.generation = entry.generation.wrapping_add(1);
        entry.place = Place::Free;
        self.free.push(index);
        self.len -= 1;
        entry.value.take().expect("a live timer has a value")
    }

    /// The lowest occupied level's next slot and that slot's start time.
    fn next_expiration(&self) -> Option<(usize, usize, u64)> {
        (0..LEVELS).find(|&l| self.occupied[l] != 0).map(|level| {
            let shift = level as u32 * SLOT_BITS;
            let slot_range = 1u64 << shift;
            let level_range = slot_range << SLOT_BITS;
            let now_slot = (self.elapsed_ms >> shift) & (SLOTS - 1);
            let offset = self.occupied[level]
                .rotate_right(now_slot as u32)
                .trailing_zeros() as u64;
            let slot = (now_slot + offset) % SLOTS;
            let level_start = self.elapsed_ms & !(level_range.wrapping_sub(1));
            let mut at_ms = level_start + slot * slot_range;
            if slot < now_slot {
                at_ms += level_range;
            }
            (level, slot as usize, at_ms.max(self.elapsed_ms))
        })
    }

    fn cascade(&mut self, level: usize, slot: usize) {
        let list = std::mem::take(&mut self.slots[level * SLOTS as usize + slot]);
        self.occupied[level] &= !(1 << slot);
        for index in list {
            self.place(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::rng::Rng;
    use std::collections::BTreeMap;

    #[test]
    fn fires_in_order_and_not_early() {
        let mut w = Wheel::new(1_000);
        w.insert(1_005, 'b');
        w.insert(1_001, 'a');
        w.insert(1_000 + 70_000, 'c');
        w.insert(900, 'z');
        assert_eq!(w.poll(1_000), Some('z'));
        assert_eq!(w.poll(1_000), None);
        assert_eq!(w.poll(1_004), Some('a'));
        assert_eq!(w.poll(1_004), None);
        assert_eq!(w.poll(1_005), Some('b'));
        assert!(w.next_deadline_ms().unwrap() <= 71_000);
        assert_eq!(w.poll(70_999), None);
        assert_eq!(w.poll(71_000), Some('c'));
        assert!(w.is_empty());
    }

    /// The wheel against a BTreeMap model under random inserts, cancels and
    /// polls: the same values fire, each no earlier than its deadline and no
    /// later than the first poll at or after it.
    #[test]
    fn matches_a_btreemap_model() {
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let mut now = rng.below(1 << 40);
            let mut wheel = Wheel::new(now);
            let mut model: BTreeMap<(u64, u64), TimerId> = BTreeMap::new();
            let mut ids: Vec<(u64, u64, TimerId)> = Vec::new();
            for n in 0..5_000u64 {
                match rng.below(10) {
                    0..=4 => {
                        let spread =
                            [10, 1_000, 100_000, 10_000_000, 1 << 36][rng.below(5) as usize];
                        let deadline = now + rng.below(spread);
                        let id = wheel.insert(deadline, n);
                        model.insert((deadline, n), id);
                        ids.push((deadline, n, id));
                    }
                    5 if !ids.is_empty() => {
                        let (deadline, value, id) =
                            ids.swap_remove(rng.below(ids.len() as u64) as usize);
                        let expected = model.remove(&(deadline, value)).map(|_| value);
                        assert_eq!(wheel.cancel(id), expected, "seed {seed}");
                    }
                    _ => {
                        now += [1, 63, 4_096, 300_000, 1 << 30][rng.below(5) as usize];
                        let mut fired = Vec::new();
                        while let Some(v) = wheel.poll(now) {
                            fired.push(v);
                        }
                        let mut due: Vec<u64> = Vec::new();
                        while let Some((&(deadline, value), _)) = model.iter().next() {
                            if deadline > now {
                                break;
                            }
                            model.remove(&(deadline, value));
                            due.push(value);
                        }
                        fired.sort_unstable();
                        due.sort_unstable();
                        assert_eq!(fired, due, "seed {seed} at {now}");
                        if let Some((&(first, _), _)) = model.iter().next() {
                            let next = wheel.next_deadline_ms().expect("timers remain");
                            assert!(
                                next <= first && next > now,
                                "seed {seed}: next {next} first {first} now {now}"
                            );
                        }
                    }
                }
                assert_eq!(wheel.len(), model.len());
            }
        }
    }
}
