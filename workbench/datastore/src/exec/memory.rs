//! Memory budgets for a query's working set, after ClickHouse's
//! `MemoryTracker` (`max_memory_usage` for a query, nested in
//! `max_server_memory_usage` for the server).
//!
//! A [`Tracker`] counts bytes against a limit; a query's tracker has the
//! server's as its parent, so every byte charged to a query is charged to
//! the server too, and a charge either fits both or neither. The operators
//! charge what they hold through an [`Account`] each (a partition's
//! aggregation state and granule buffers, a top-k heap, the rows of a plain
//! SELECT), reconciled after every granule to the bytes their structures
//! hold by capacity, plus the growth the next granule can cause to the
//! group maps and aggregate columns (a hash table that doubles allocates
//! the new table while the old one lives). Past a limit the query stops
//! with [`Error::MemoryLimit`]; what it charged is given back as its
//! accounts drop.
//!
//! What is not charged in advance: under GROUP BY, a per-group state that
//! grows by doubling (uniqExact's set, a quantile's buffer of values) is
//! charged as it grows and checked after the granule, so a query can pass
//! its budget by one granule's growth of those states. Without GROUP BY
//! the one group's set is foreseen like the maps. Decoded granules of
//! small scans live in the shared, bounded granule cache
//! ([`crate::storage::cache`]): a granule a query reads from it is not
//! charged, one it puts there is, until the query ends (the request-cost
//! experiment measures each call's true peak against its charge). The
//! key-range shortcut of min/max on the sort key reads a few cached
//! granules with no account at all. Nor are a query's
//! threads' stacks and the allocator's per-thread slack (ClickHouse's
//! `max_untracked_memory` is the same allowance): with four greedy queries
//! at once under 8 MiB / 16 MiB budgets, the server's RSS passed its base
//! plus the server budget by 2.4 MB; at 64 MiB / 128 MiB and above it
//! stayed under (the fault-soak experiment's greedy workload).

pub use crate::error::MemoryScope as Scope;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes held against a limit, and the most ever held.
#[derive(Debug)]
pub struct Tracker {
    scope: Scope,
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    parent: Option<Arc<Tracker>>,
}

impl Tracker {
    /// A server's total: every query's tracker, and whatever else the
    /// server charges (its answers), draw on it.
    pub fn server(limit: usize) -> Arc<Tracker> {
        Arc::new(Tracker {
            scope: Scope::Server,
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            parent: None,
        })
    }

    /// A query's budget of `limit` bytes, charged to `server` as well.
    pub fn query(limit: usize, server: Option<Arc<Tracker>>) -> Arc<Tracker> {
        Arc::new(Tracker {
            scope: Scope::Query,
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            parent: server,
        })
    }

    /// Takes `n` bytes if they fit this budget and every one above it.
    pub fn try_charge(&self, n: usize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let before = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(n).filter(|&t| t <= self.limit))
            .map_err(|u| Error::MemoryLimit { scope: self.scope, limit: self.limit, wanted: u.saturating_add(n) })?;
        if let Some(p) = &self.parent {
            if let Err(e) = p.try_charge(n) {
                self.used.fetch_sub(n, Ordering::AcqRel);
                return Err(e);
            }
        }
        self.peak.fetch_max(before + n, Ordering::AcqRel);
        Ok(())
    }

    /// Takes `n` bytes whether or not they fit (something already held,
    /// such as an acknowledgement, that refusing would not free).
    pub fn force(&self, n: usize) {
        let before = self.used.fetch_add(n, Ordering::AcqRel);
        self.peak.fetch_max(before + n, Ordering::AcqRel);
        if let Some(p) = &self.parent {
            p.force(n);
        }
    }

    /// Gives back `n` bytes taken before.
    pub fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.used.fetch_sub(n, Ordering::AcqRel);
        if let Some(p) = &self.parent {
            p.release(n);
        }
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Starts a new peak from what is held now (a worker's tracker is made
    /// once and serves query after query: the request-cost experiment reads
    /// each query's own peak).
    pub fn reset_peak(&self) {
        self.peak.store(self.used(), Ordering::Release);
    }

    /// The most held at once since the tracker was made, or [`Tracker::reset_peak`].
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// What one operator holds, charged to a query's tracker (none: unbounded,
/// the CLI's queries). Dropped, it gives its bytes back.
pub(crate) struct Account<'t> {
    tracker: Option<&'t Tracker>,
    held: usize,
}

impl<'t> Account<'t> {
    pub(crate) fn new(tracker: Option<&'t Tracker>) -> Account<'t> {
        Account { tracker, held: 0 }
    }

    /// Makes the account hold `bytes`: charges the growth (which may fail)
    /// or gives back the rest.
    #[inline]
    pub(crate) fn set(&mut self, bytes: usize) -> Result<()> {
        let Some(t) = self.tracker else { return Ok(()) };
        if bytes > self.held {
            t.try_charge(bytes - self.held)?;
        } else {
            t.release(self.held - bytes);
        }
        self.held = bytes;
        Ok(())
    }

    /// Whether a budget is kept (the heap's size need not be computed otherwise).
    #[inline]
    pub(crate) fn tracked(&self) -> bool {
        self.tracker.is_some()
    }

    /// Adds `bytes` to what the account holds.
    #[inline]
    pub(crate) fn add(&mut self, bytes: usize) -> Result<()> {
        self.set(self.held + bytes)
    }
}

impl Drop for Account<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.tracker {
            t.release(self.held);
        }
    }
}

/// Heap bytes of a result row (its values and their strings).
#[inline]
pub(crate) fn row_bytes(row: &Vec<crate::types::Value>) -> usize {
    row.capacity() * std::mem::size_of::<crate::types::Value>() + row.iter().map(|v| v.heap_bytes()).sum::<usize>()
}

/// Heap bytes of a vector, by capacity.
#[inline]
pub(crate) fn vec_bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

/// The bytes a vector allocates when `more` elements are pushed: none, or
/// its next capacity's.
#[inline]
pub(crate) fn vec_growth<T>(v: &Vec<T>, more: usize) -> usize {
    let c = vec_grown(v.len(), v.capacity(), more);
    if c > v.capacity() {
        c * std::mem::size_of::<T>()
    } else {
        0
    }
}

/// The capacity a vector of `len` (capacity `cap`) reaches when `more`
/// elements are pushed: as `Vec` grows, doubling.
#[inline]
pub(crate) fn vec_grown(len: usize, cap: usize, more: usize) -> usize {
    if len + more <= cap {
        cap
    } else {
        (len + more).max(2 * cap)
    }
}

/// Heap bytes of a hash table (hashbrown, std's) with room for `cap`
/// entries of `entry` bytes: a power of two of buckets at most 7/8 full,
/// each an entry and a control byte.
#[inline]
pub(crate) fn map_bytes(cap: usize, entry: usize) -> usize {
    if cap == 0 {
        return 0;
    }
    let buckets = if cap < 8 { (cap + 1).next_power_of_two() } else { (cap * 8 / 7).next_power_of_two() };
    buckets * (entry + 1)
}

/// The bytes a hash table of `len` entries (room for `cap`) allocates
/// when `more` are inserted: none, or its next size (the old table lives
/// while the new one fills).
#[inline]
pub(crate) fn map_growth(len: usize, cap: usize, more: usize, entry: usize) -> usize {
    if len + more <= cap {
        0
    } else {
        map_bytes((len + more).max(2 * cap.max(1)), entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_charge_fits_both_budgets_or_neither() {
        let server = Tracker::server(1000);
        let a = Tracker::query(600, Some(server.clone()));
        let b = Tracker::query(600, Some(server.clone()));
        a.try_charge(500).unwrap();
        let e = a.try_charge(200).unwrap_err();
        assert!(matches!(e, Error::MemoryLimit { scope: Scope::Query, limit: 600, wanted: 700 }), "{e}");
        let e = b.try_charge(501).unwrap_err();
        assert!(matches!(e, Error::MemoryLimit { scope: Scope::Server, limit: 1000, .. }), "{e}");
        assert_eq!((b.used(), server.used()), (0, 500), "a refused charge is taken from neither");
        b.try_charge(500).unwrap();
        a.release(500);
        b.release(500);
        assert_eq!((a.used(), b.used(), server.used()), (0, 0, 0));
        assert_eq!((a.peak(), server.peak()), (500, 1000));
    }

    #[test]
    fn accounts_give_back_what_they_hold() {
        let t = Tracker::query(100, None);
        {
            let mut acc = Account::new(Some(&t));
            acc.set(60).unwrap();
            acc.set(30).unwrap();
            assert_eq!(t.used(), 30);
            assert!(acc.add(71).is_err());
            assert_eq!(t.used(), 30, "a refused growth leaves the charge as it was");
        }
        assert_eq!(t.used(), 0);
        assert_eq!(map_bytes(0, 16), 0);
        assert_eq!(map_bytes(3, 16), 4 * 17);
        assert_eq!(map_bytes(14, 16), 16 * 17);
        assert_eq!(map_growth(3, 3, 1, 16), map_bytes(6, 16));
        assert_eq!(vec_grown(4, 4, 1), 8);
        assert_eq!(vec_grown(4, 4, 100), 104);
    }
}
