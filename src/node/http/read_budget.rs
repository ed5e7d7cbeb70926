//! The node-wide bound on the request bytes the HTTP front holds
//! (`http.max_buffered_bytes`).
//!
//! A request larger than a head (`MAX_HEAD_BYTES`) takes its size from
//! the budget once its head says how large it is (a chunked body: the
//! most its coding and what it decodes to can be), before its body is
//! read, and gives it back with its answer: the bytes cover the request
//! while it is read and while its hook is committed. One that finds too
//! little left waits, first come first served: its connection is not
//! read (its client's sends block; one that asked for `100 Continue`
//! gets it only then) and its read timeout does not run, until the
//! requests ahead of it are answered. The budget holds at least
//! one largest request, and a request holding bytes is answered within
//! `http.read_timeout_ms` (408) or its commit: none waits for ever.
//!
//! Requests no larger than a head, and a connection's reads past its
//! request (at most a read's worth), are not counted: those are bounded
//! per connection.

use std::collections::VecDeque;

pub(super) struct ReadBudget {
    limit_bytes: usize,
    granted_bytes: usize,
    /// Connections waiting for bytes, the first first: (slot, connection
    /// id, bytes asked).
    waiting: VecDeque<(usize, u64, usize)>,
}

impl ReadBudget {
    /// A budget of `limit_bytes` (one past the address space is all of it).
    pub(super) fn new(limit_bytes: u64) -> ReadBudget {
        ReadBudget {
            limit_bytes: usize::try_from(limit_bytes).unwrap_or(usize::MAX),
            granted_bytes: 0,
            waiting: VecDeque::new(),
        }
    }

    /// Bytes granted and not given back.
    pub(super) fn granted_bytes(&self) -> usize {
        self.granted_bytes
    }

    /// Asks `bytes` (at most the whole budget) for connection `conn_id` in
    /// `slot`: granted now, if none waits before it and they fit (the
    /// bytes granted), or it waits (`None`) until `give_back` grants them.
    pub(super) fn ask(&mut self, slot: usize, conn_id: u64, bytes: usize) -> Option<usize> {
        let bytes = bytes.min(self.limit_bytes);
        if self.waiting.is_empty() && self.fits(bytes) {
            self.granted_bytes += bytes;
            return Some(bytes);
        }
        self.waiting.push_back((slot, conn_id, bytes));
        None
    }

    /// Takes back `bytes` granted, and grants the connections waiting
    /// first that now fit: each (slot, connection id, bytes granted).
    pub(super) fn give_back(&mut self, bytes: usize) -> Vec<(usize, u64, usize)> {
        self.granted_bytes -= bytes;
        let mut granted = Vec::new();
        while let Some(&(slot, conn_id, asked)) = self.waiting.front() {
            if !self.fits(asked) {
                break;
            }
            self.waiting.pop_front();
            self.granted_bytes += asked;
            granted.push((slot, conn_id, asked));
        }
        granted
    }

    /// Forgets a connection that waits (it closed).
    pub(super) fn forget(&mut self, slot: usize, conn_id: u64) {
        self.waiting
            .retain(|&(s, id, _)| (s, id) != (slot, conn_id));
    }

    fn fits(&self, bytes: usize) -> bool {
        self.limit_bytes - self.granted_bytes >= bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_granted_while_they_fit_then_in_the_order_asked() {
        let mut budget = ReadBudget::new(100);
        assert_eq!(budget.ask(0, 1, 60), Some(60));
        assert_eq!(budget.ask(1, 2, 50), None);
        // A smaller request that would fit waits behind the first.
        assert_eq!(budget.ask(2, 3, 10), None);
        assert_eq!(budget.granted_bytes(), 60);
        assert_eq!(budget.give_back(60), vec![(1, 2, 50), (2, 3, 10)]);
        assert_eq!(budget.granted_bytes(), 60);
        assert_eq!(budget.ask(3, 4, 40), Some(40));
        assert_eq!(budget.ask(4, 5, 1), None);
        assert_eq!(budget.give_back(10), vec![(4, 5, 1)]);
        assert_eq!(budget.granted_bytes(), 91);
    }

    #[test]
    fn a_request_over_the_whole_budget_takes_all_of_it() {
        let mut budget = ReadBudget::new(100);
        assert_eq!(budget.ask(0, 1, 30), Some(30));
        assert_eq!(budget.ask(1, 2, 500), None);
        assert_eq!(budget.give_back(30), vec![(1, 2, 100)]);
    }

    #[test]
    fn a_closed_connection_waits_no_more() {
        let mut budget = ReadBudget::new(100);
        assert_eq!(budget.ask(0, 1, 100), Some(100));
        assert_eq!(budget.ask(1, 2, 50), None);
        assert_eq!(budget.ask(1, 3, 20), None);
        budget.forget(1, 2);
        assert_eq!(budget.give_back(100), vec![(1, 3, 20)]);
    }

    #[test]
    fn a_budget_past_the_address_space_grants_all_of_it_and_counts_it() {
        let mut budget = ReadBudget::new(u64::MAX);
        assert_eq!(budget.ask(0, 1, usize::MAX / 2), Some(usize::MAX / 2));
        assert_eq!(budget.ask(1, 2, 1 << 30), Some(1 << 30));
        assert_eq!(budget.granted_bytes(), usize::MAX / 2 + (1 << 30));
    }
}
