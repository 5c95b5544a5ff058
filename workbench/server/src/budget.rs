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
//!
//! The same bytes count against the server's memory total
//! (`--max-server-memory`), which every query's working memory draws on
//! too ([`datastore::exec::memory`]): an answer is reserved in both or
//! neither.

use datastore::exec::memory::Tracker;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Answer bytes held and queued, over every connection.
pub struct Budget {
    used: AtomicUsize,
    max: usize,
    server: Arc<Tracker>,
}

/// Which budget refused an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `--answer-budget`: other answers hold it.
    Answers,
    /// `--max-server-memory`: answers and queries' working sets hold it.
    Server,
}

impl Budget {
    pub fn new(max: usize, server: Arc<Tracker>) -> Budget {
        Budget { used: AtomicUsize::new(0), max, server }
    }

    /// Takes `n` bytes if they fit under the budget and the server's total.
    pub fn try_reserve(&self, n: usize) -> Result<(), Refused> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(n).filter(|&t| t <= self.max))
            .map_err(|_| Refused::Answers)?;
        if self.server.try_charge(n).is_err() {
            self.used.fetch_sub(n, Ordering::AcqRel);
            return Err(Refused::Server);
        }
        Ok(())
    }

    /// Takes `n` bytes whether or not they fit (see the module docs).
    pub fn force(&self, n: usize) {
        if n > 0 {
            self.used.fetch_add(n, Ordering::AcqRel);
            self.server.force(n);
        }
    }

    /// Gives back `n` bytes taken before.
    pub fn release(&self, n: usize) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::AcqRel);
            self.server.release(n);
        }
    }

    /// The server's memory total, which the answers count against.
    pub fn server(&self) -> &Arc<Tracker> {
        &self.server
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
        let server = Tracker::server(1 << 20);
        let b = Budget::new(100, server.clone());
        assert!(b.try_reserve(60).is_ok() && b.try_reserve(41).is_err() && b.try_reserve(40).is_ok());
        assert_eq!((b.used(), server.used()), (100, 100));
        b.force(5);
        assert_eq!(b.used(), 105, "forced bytes count even past the budget");
        b.release(65);
        assert!(b.try_reserve(60).is_ok() && b.try_reserve(1).is_err());
        assert_eq!(b.try_reserve(usize::MAX), Err(Refused::Answers), "no overflow");
        b.release(100);
        assert_eq!(server.used(), 0);
    }

    #[test]
    fn answers_count_against_the_server_total() {
        let server = Tracker::server(100);
        let b = Budget::new(1000, server.clone());
        let query = Tracker::query(1000, Some(server.clone()));
        query.try_charge(70).unwrap();
        assert_eq!(b.try_reserve(40), Err(Refused::Server));
        assert_eq!(b.used(), 0, "refused by the server total, taken from neither");
        assert!(b.try_reserve(30).is_ok());
        assert!(query.try_charge(1).is_err(), "the answers' bytes leave the queries less");
    }
}
