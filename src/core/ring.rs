//! A round robin whose members may also leave from anywhere in it: the
//! order of the tenants with calls to start, and of each tenant's keys
//! with rows queued (and, as a queue of unique members, the tenants a
//! walk has left, see `tenant_walk`). A breaker that opens, or a reload, takes a key out of
//! the middle of its tenant's ring; with a plain queue each removal read
//! the ring, so an outage of a receiver that ten thousand of a tenant's
//! sinks share held the shard for seconds (docs/performance.md).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Members in turn order, each at most once.
#[derive(Debug)]
pub(super) struct Ring<T> {
    /// Members by place: the first is next.
    order: BTreeMap<u64, T>,
    /// Each member's place.
    places: HashMap<T, u64>,
    /// The place the next member pushed takes.
    next_place: u64,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            order: BTreeMap::new(),
            places: HashMap::new(),
            next_place: 0,
        }
    }
}

impl<T: Clone + Eq + Hash> Ring<T> {
    /// Puts `member` last; one already in keeps its place.
    pub(super) fn push_back(&mut self, member: T) {
        debug_assert!(!self.places.contains_key(&member), "a member once");
        if let Entry::Vacant(place) = self.places.entry(member) {
            self.order.insert(self.next_place, place.key().clone());
            place.insert(self.next_place);
            self.next_place += 1;
        }
    }

    /// Takes the first member out.
    pub(super) fn pop_front(&mut self) -> Option<T> {
        let (_, member) = self.order.pop_first()?;
        self.places.remove(&member);
        Some(member)
    }

    /// Takes `member` out, wherever it is (if in).
    pub(super) fn remove(&mut self, member: &T) {
        if let Some(place) = self.places.remove(member) {
            self.order.remove(&place);
        }
    }

    /// The first member.
    pub(super) fn front(&self) -> Option<&T> {
        self.order.values().next()
    }

    pub(super) fn contains(&self, member: &T) -> bool {
        self.places.contains_key(member)
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The members in turn order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.order.values()
    }

    pub(super) fn clear(&mut self) {
        self.order.clear();
        self.places.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members go round in the order pushed; one taken out of the middle
    /// leaves the others' order as it was, and may come back, last.
    #[test]
    fn members_leave_from_anywhere_and_keep_the_others_order() {
        let mut ring = Ring::default();
        for member in ["a", "b", "c", "d"] {
            ring.push_back(member);
        }
        ring.remove(&"b");
        ring.remove(&"b");
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), ["a", "c", "d"]);
        let first = ring.pop_front();
        ring.push_back(first.unwrap());
        ring.push_back("b");
        assert_eq!(
            ring.iter().copied().collect::<Vec<_>>(),
            ["c", "d", "a", "b"]
        );
        assert_eq!(ring.len(), 4);
        assert_eq!(ring.front(), Some(&"c"));
        assert!(ring.contains(&"b") && !ring.contains(&"e"));
        let drained: Vec<_> = std::iter::from_fn(|| ring.pop_front()).collect();
        assert_eq!(drained, ["c", "d", "a", "b"]);
        ring.remove(&"a");
        assert!(ring.is_empty());
    }
}
