//! Decoded granules of small scans, kept in memory under a byte budget
//! (ClickHouse's "uncompressed cache", which it too uses only for short
//! queries).
//!
//! A scan of a few granules (a point or range lookup on the sort key, every
//! step of a dependent chain) spends most of its time reading and decoding
//! blocks it read a moment ago: in the pipelined chain's step, `pread` and
//! the Delta + LZ4 decode were a third of the samples (perf, 7.1 µs a
//! step). Parts are immutable, so a
//! decoded granule never goes stale; it is keyed by the part's process-wide
//! id, and a part's entries go when the part is dropped (after a merge).
//!
//! Large scans bypass the cache (see [`crate::exec`]): a full scan would
//! evict every small query's granules for blocks it reads once, and its
//! memory is bounded by a granule per thread, which the cache must not undo.
//!
//! Eviction is second-chance FIFO: an entry read since it last reached the
//! front goes to the back instead of out.

use crate::types::ColumnData;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// BUDGET = 4 MiB: 64 full granules of a 64-bit column, far more than the
/// few granules a short query reads; it stays well inside the server's
/// steady-RSS target of 32 MB.
pub const BUDGET: usize = 4 << 20;

/// (part id, column, granule).
pub type Key = (u64, u32, u32);

struct Entry {
    data: Arc<ColumnData>,
    bytes: usize,
    used: bool,
}

/// Decoded granules under a byte budget.
pub struct GranuleCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Key, Entry, foldhash::fast::RandomState>,
    order: VecDeque<Key>,
    bytes: usize,
}

/// What a cache holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: usize,
    pub bytes: usize,
}

/// Heap bytes a decoded granule holds (a dictionary is the part's, shared).
pub fn heap_bytes(c: &ColumnData) -> usize {
    match c {
        ColumnData::U64(v) => v.len() * 8,
        ColumnData::I64(v) => v.len() * 8,
        ColumnData::F64(v) => v.len() * 8,
        ColumnData::Str(v) => v.iter().map(|s| s.len() + std::mem::size_of::<String>()).sum(),
        ColumnData::Dict { keys, .. } => keys.len() * 4,
    }
}

impl GranuleCache {
    pub fn new(budget: usize) -> GranuleCache {
        GranuleCache { budget, inner: Mutex::new(Inner::default()) }
    }

    /// The granule under `key`, marked as used.
    pub fn get(&self, key: Key) -> Option<Arc<ColumnData>> {
        let mut g = self.inner.lock().ok()?;
        let e = g.map.get_mut(&key)?;
        e.used = true;
        Some(e.data.clone())
    }

    /// Keeps `data` under `key`, evicting until it fits; a granule larger
    /// than the whole budget is not kept.
    pub fn put(&self, key: Key, data: Arc<ColumnData>) {
        let bytes = heap_bytes(&data) + std::mem::size_of::<ColumnData>();
        if bytes > self.budget {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        let g = &mut *g;
        if let Some(old) = g.map.insert(key, Entry { data, bytes, used: false }) {
            g.bytes -= old.bytes;
        } else {
            g.order.push_back(key);
        }
        g.bytes += bytes;
        while g.bytes > self.budget {
            let Some(k) = g.order.pop_front() else { break };
            match g.map.get_mut(&k) {
                Some(e) if e.used && k != key => {
                    e.used = false;
                    g.order.push_back(k);
                }
                Some(_) => {
                    let e = g.map.remove(&k).expect("present");
                    g.bytes -= e.bytes;
                }
                None => {}
            }
        }
    }

    /// Drops every granule of part `part`.
    pub fn forget(&self, part: u64) {
        let Ok(mut g) = self.inner.lock() else { return };
        let g = &mut *g;
        let before = g.map.len();
        g.map.retain(|k, e| {
            let keep = k.0 != part;
            if !keep {
                g.bytes -= e.bytes;
            }
            keep
        });
        if g.map.len() != before {
            let map = &g.map;
            g.order.retain(|k| map.contains_key(k));
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.inner.lock().map_or(CacheStats::default(), |g| CacheStats { entries: g.map.len(), bytes: g.bytes })
    }
}

/// The process's cache, shared by every open part.
pub fn global() -> &'static GranuleCache {
    static CACHE: OnceLock<GranuleCache> = OnceLock::new();
    CACHE.get_or_init(|| GranuleCache::new(BUDGET))
}

/// A new part's id: unique in the process, never reused.
pub fn next_part_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(n: usize) -> Arc<ColumnData> {
        Arc::new(ColumnData::U64((0..n as u64).collect()))
    }

    const ENTRY: usize = 1000 * 8 + std::mem::size_of::<ColumnData>();

    #[test]
    fn keeps_what_fits_and_evicts_the_oldest_unread() {
        let c = GranuleCache::new(3 * ENTRY);
        for g in 0..3 {
            c.put((1, 0, g), col(1000));
        }
        assert_eq!(c.stats(), CacheStats { entries: 3, bytes: 3 * ENTRY });
        // Read granule 0: it survives the next insert, granule 1 (oldest unread) goes.
        assert!(c.get((1, 0, 0)).is_some());
        c.put((1, 0, 3), col(1000));
        assert!(c.get((1, 0, 1)).is_none(), "the oldest unread entry is evicted");
        assert!(c.get((1, 0, 0)).is_some() && c.get((1, 0, 2)).is_some() && c.get((1, 0, 3)).is_some());
        assert_eq!(c.stats().bytes, 3 * ENTRY);
    }

    #[test]
    fn a_granule_larger_than_the_budget_is_not_kept() {
        let c = GranuleCache::new(ENTRY - 1);
        c.put((1, 0, 0), col(1000));
        assert_eq!(c.stats(), CacheStats::default());
    }

    #[test]
    fn forgetting_a_part_frees_its_granules_only() {
        let c = GranuleCache::new(10 * ENTRY);
        c.put((1, 0, 0), col(1000));
        c.put((2, 0, 0), col(1000));
        c.put((1, 1, 0), col(1000));
        c.forget(1);
        assert_eq!(c.stats(), CacheStats { entries: 1, bytes: ENTRY });
        assert!(c.get((2, 0, 0)).is_some());
        // The freed room is usable: nine more fit without evicting part 2.
        for g in 0..9 {
            c.put((3, 0, g), col(1000));
        }
        assert!(c.get((2, 0, 0)).is_some());
    }

    #[test]
    fn replacing_a_key_counts_its_bytes_once() {
        let c = GranuleCache::new(10 * ENTRY);
        c.put((1, 0, 0), col(1000));
        c.put((1, 0, 0), col(1000));
        assert_eq!(c.stats(), CacheStats { entries: 1, bytes: ENTRY });
    }
}
