//! Exact allocation cost per call of a server under concurrency (the dhat
//! build): a thread says which call it works for ([`tag`]), while the call's
//! future is polled or its job runs, on whichever thread; every allocation
//! counts for that call, and every free for the call that **allocated** the
//! block, whichever call or thread frees it. Allocations outside any call
//! (connection state, caches, the runtime) are call 0, so the calls and
//! call 0 sum to dhat's process totals exactly over the recording window.
//!
//! Per call: allocations and bytes (as dhat counts them: a `realloc` is one
//! allocation of its new size, the old block a free), frees, the peak of
//! the bytes its own blocks held at once, what they held when the call
//! [`finish`]ed (its answer, kept until the client releases it), and the
//! estimate the process acted on (the query memory tracker's peak charge),
//! so that the estimate can be held against the truth call by call.
//!
//! # Bookkeeping
//! The block table and the per-call costs live behind one lock (dhat
//! already serialises every allocation behind its own) and allocate from
//! the system allocator directly, never through dhat: a thread-local flag
//! sends the table's own allocations there ([`bookkeeping`], read by
//! [`crate::sides::Tagged`]), so dhat's counts are unchanged by it, and with
//! recording off (every build, every cell but the request-cost one) the
//! hooks return after one atomic load.
//!
//! # Layout
//! - [`tag`], [`Tag`], [`adopt`]: the thread's current call;
//! - [`record`], [`describe`], [`finish`], [`drain`]: on, what a call is,
//!   its end, the costs;
//! - [`on_alloc`], [`on_free`]: the allocator's hooks.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

pub use records::server::request_cost::Counts;

/// One call's cost (call 0: everything allocated outside a call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCost {
    pub call: u64,
    /// What the caller said the call was ([`describe`]); 0 if it never said.
    pub kind: u16,
    pub counts: Counts,
    /// Whether it [`finish`]ed.
    pub finished: bool,
}

thread_local! {
    // Const-initialised without destructors: read from inside the allocator.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    static BOOKKEEPING: Cell<bool> = const { Cell::new(false) };
}

static ON: AtomicBool = AtomicBool::new(false);

/// While alive, the thread's allocations count for its call.
#[must_use = "the tag lasts as long as the value"]
pub struct Tag {
    prev: u64,
}

impl Drop for Tag {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.prev));
    }
}

/// Counts the calling thread's allocations for `call` (≥ 1) until the tag
/// drops; tags nest (the outer one comes back).
pub fn tag(call: u64) -> Tag {
    Tag { prev: CURRENT.try_with(|c| c.replace(call)).unwrap_or(0) }
}

/// Counts the calling thread's allocations for `call` from now on, for a
/// thread that works for one call and ends (a query's helper thread).
pub fn adopt(call: u64) {
    let _ = CURRENT.try_with(|c| c.set(call));
}

/// The call the thread allocates for now (0: none).
pub fn current() -> u64 {
    CURRENT.try_with(Cell::get).unwrap_or(0)
}

/// Whether the calling thread is inside the table's own bookkeeping: its
/// allocations go to the system allocator, uncounted.
#[inline]
pub fn bookkeeping() -> bool {
    BOOKKEEPING.try_with(Cell::get).unwrap_or(false)
}

#[cfg(feature = "dhat")]
mod table {
    use super::CallCost;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Default)]
    pub(super) struct Table {
        /// Live blocks allocated while recording: address → (call, size).
        pub blocks: HashMap<usize, (u64, u64)>,
        pub calls: HashMap<u64, CallCost>,
    }

    pub(super) static TABLE: Mutex<Option<Table>> = Mutex::new(None);

    impl Table {
        pub fn cost(&mut self, call: u64) -> &mut CallCost {
            self.calls.entry(call).or_insert_with(|| CallCost { call, ..CallCost::default() })
        }
    }
}

/// Runs `f` on the table with the thread's allocations sent to the system
/// allocator.
#[cfg(feature = "dhat")]
fn with_table<T>(f: impl FnOnce(&mut table::Table) -> T) -> Option<T> {
    let was = BOOKKEEPING.try_with(|b| b.replace(true)).ok()?;
    let out = match table::TABLE.lock() {
        Ok(mut t) => t.as_mut().map(f),
        Err(_) => None,
    };
    let _ = BOOKKEEPING.try_with(|b| b.set(was));
    out
}

/// Starts (or stops) recording. Starting forgets every earlier call.
pub fn record(on: bool) {
    #[cfg(feature = "dhat")]
    {
        let was = BOOKKEEPING.try_with(|b| b.replace(true)).unwrap_or(false);
        if let Ok(mut t) = table::TABLE.lock() {
            if on {
                *t = Some(table::Table::default());
            }
        }
        let _ = BOOKKEEPING.try_with(|b| b.set(was));
    }
    ON.store(on && cfg!(feature = "dhat"), Ordering::Release);
}

/// Whether calls are being recorded (only the dhat build records).
pub fn recording() -> bool {
    ON.load(Ordering::Acquire)
}

/// A block of `size` bytes allocated at `ptr` by the current call.
#[inline]
pub fn on_alloc(ptr: *mut u8, size: usize) {
    if !ON.load(Ordering::Relaxed) || ptr.is_null() {
        return;
    }
    #[cfg(feature = "dhat")]
    {
        let call = current();
        with_table(|t| {
            t.blocks.insert(ptr as usize, (call, size as u64));
            let c = &mut t.cost(call).counts;
            c.allocs += 1;
            c.bytes += size as u64;
            c.live_bytes += size as u64;
            c.peak_bytes = c.peak_bytes.max(c.live_bytes);
        });
    }
    #[cfg(not(feature = "dhat"))]
    let _ = size;
}

/// The block at `ptr` freed: charged to the call that allocated it.
#[inline]
pub fn on_free(ptr: *mut u8) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "dhat")]
    with_table(|t| {
        if let Some((call, size)) = t.blocks.remove(&(ptr as usize)) {
            let c = &mut t.cost(call).counts;
            c.frees += 1;
            c.bytes_freed += size;
            c.live_bytes -= size;
        }
    });
    #[cfg(not(feature = "dhat"))]
    let _ = ptr;
}

/// Says what `call` is (`kind`, the caller's code) and the process's own
/// estimate of its peak bytes (the query memory tracker's charge; the
/// highest said counts), from whichever thread knows them.
pub fn describe(call: u64, kind: u16, estimate: u64) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "dhat")]
    with_table(|t| {
        let c = t.cost(call);
        c.kind = kind;
        c.counts.estimate_bytes = c.counts.estimate_bytes.max(estimate);
    });
    #[cfg(not(feature = "dhat"))]
    let _ = (call, kind, estimate);
}

/// The call has answered: what its blocks hold now is what it keeps after
/// it (its stored answer, until the client releases it).
pub fn finish(call: u64) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "dhat")]
    with_table(|t| {
        let c = t.cost(call);
        c.counts.held_bytes = c.counts.live_bytes;
        c.finished = true;
    });
    #[cfg(not(feature = "dhat"))]
    let _ = call;
}

/// Every call's cost so far, call 0 first, then by call; recording goes on.
/// Empty outside the dhat build or before [`record`].
pub fn drain() -> Vec<CallCost> {
    #[cfg(feature = "dhat")]
    {
        // Copied out under the bookkeeping flag (the copy allocates from the
        // system allocator), then into a vector the caller owns.
        let copy: Option<Vec<CallCost>> = with_table(|t| {
            let mut v: Vec<CallCost> = t.calls.values().copied().collect();
            v.sort_unstable_by_key(|c| c.call);
            v
        });
        match copy {
            // NOTE: the system-allocated copy must be freed by the system
            // allocator: cloned out, then dropped under the flag.
            Some(v) => {
                let out = v.clone();
                let was = BOOKKEEPING.try_with(|b| b.replace(true)).unwrap_or(false);
                drop(v);
                let _ = BOOKKEEPING.try_with(|b| b.set(was));
                out
            }
            None => Vec::new(),
        }
    }
    #[cfg(not(feature = "dhat"))]
    Vec::new()
}
