//! The server-wide budget for answer bytes (`--answer-budget`).
//!
//! Every answer body a connection stores (for dependents, until `finish`)
//! and every copy of one queued for its socket is counted here while it
//! lives. A worker reserves an answer's bytes before it copies the answer
//! out of its encoding buffer, so a refused answer is never materialised;
//! small answers the worker does not reserve (errors, insert
//! acknowledgements, `stats`) are counted as they are stored, over the
//! budget if need be, since refusing an acknowledgement would hide a
//! durable insert. Per connection the same bytes are bounded by
//! `--conn-answer-budget` (the connection's own count, passed to the worker
//! as [`crate::work::Queries::room`]).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Answer bytes held and queued, over every connection.
pub struct Budget {
    used: AtomicUsize,
    max: usize,
}

impl Budget {
    pub fn new(max: usize) -> Budget {
        Budget { used: AtomicUsize::new(0), max }
    }

    /// Takes `n` bytes if they fit under the budget.
    pub fn try_reserve(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(n).filter(|&t| t <= self.max))
            .is_ok()
    }

    /// Takes `n` bytes whether or not they fit (see the module docs).
    pub fn force(&self, n: usize) {
        if n > 0 {
            self.used.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Gives back `n` bytes taken before.
    pub fn release(&self, n: usize) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::AcqRel);
        }
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stop_at_the_budget_and_come_back() {
        let b = Budget::new(100);
        assert!(b.try_reserve(60) && !b.try_reserve(41) && b.try_reserve(40));
        assert_eq!(b.used(), 100);
        b.force(5);
        assert_eq!(b.used(), 105, "forced bytes count even past the budget");
        b.release(65);
        assert!(b.try_reserve(60) && !b.try_reserve(1));
        assert!(!b.try_reserve(usize::MAX), "no overflow");
    }
}
