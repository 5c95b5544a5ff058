//! Allocation counts split by side. A thread says which side it works for
//! ([`set_side`]); the counting allocator adds each allocation to that
//! side's counters. Threads that never say (a library's own worker threads)
//! count as [`Side::Other`], so nothing is lost: the three sides sum to the
//! process total.
//!
//! Only the dhat build installs [`Tagged`]: that build is the counting build
//! and already serialises every call behind dhat's lock, so two relaxed
//! atomic adds cost nothing measurable there, and the timing builds
//! (jemalloc, system) stay untouched.

use serde::Serialize;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The side a thread allocates for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[repr(u8)]
pub enum Side {
    Other = 0,
    Client = 1,
    Server = 2,
}

thread_local! {
    // NOTE: const-initialised and without a destructor, so reading it from
    // inside the allocator never allocates and never fails during teardown.
    static SIDE: Cell<u8> = const { Cell::new(0) };
    // Set while the wrapped allocator runs: dhat allocates for its own
    // bookkeeping through the global allocator, and does not count those
    // calls, so neither may we.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Tags the calling thread; its later allocations count for `side`.
pub fn set_side(side: Side) {
    SIDE.with(|s| s.set(side as u8));
}

static CALLS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
static BYTES: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// Cumulative allocation calls and requested bytes per side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SideCounts {
    pub calls: [u64; 3],
    pub bytes: [u64; 3],
}

impl SideCounts {
    /// `self - earlier`, side by side.
    pub fn since(&self, earlier: &SideCounts) -> SideCounts {
        let mut d = SideCounts::default();
        for i in 0..3 {
            d.calls[i] = self.calls[i].wrapping_sub(earlier.calls[i]);
            d.bytes[i] = self.bytes[i].wrapping_sub(earlier.bytes[i]);
        }
        d
    }

    pub fn calls(&self, side: Side) -> u64 {
        self.calls[side as usize]
    }

    pub fn bytes(&self, side: Side) -> u64 {
        self.bytes[side as usize]
    }
}

/// The counters as they stand.
pub fn read() -> SideCounts {
    let mut c = SideCounts::default();
    for i in 0..3 {
        c.calls[i] = CALLS[i].load(Relaxed);
        c.bytes[i] = BYTES[i].load(Relaxed);
    }
    c
}

/// Counts one call of `bytes` unless it is the allocator's own, then runs
/// it; the block it returns counts for the thread's call ([`crate::calls`]).
#[inline]
fn counted(bytes: usize, freed: Option<*mut u8>, call: impl FnOnce() -> *mut u8) -> *mut u8 {
    let outer = INSIDE.try_with(|i| !i.replace(true)).unwrap_or(false);
    if outer {
        let side = SIDE.try_with(|s| s.get()).unwrap_or(0) as usize;
        CALLS[side].fetch_add(1, Relaxed);
        BYTES[side].fetch_add(bytes as u64, Relaxed);
    }
    let r = call();
    if outer {
        if let Some(old) = freed.filter(|_| !r.is_null()) {
            crate::calls::on_free(old);
        }
        crate::calls::on_alloc(r, bytes);
        let _ = INSIDE.try_with(|i| i.set(false));
    }
    r
}

fn counted_free(ptr: *mut u8, call: impl FnOnce()) {
    let outer = INSIDE.try_with(|i| !i.replace(true)).unwrap_or(false);
    if outer {
        crate::calls::on_free(ptr);
    }
    call();
    if outer {
        let _ = INSIDE.try_with(|i| i.set(false));
    }
}

/// Wraps an allocator and counts per side the calls dhat counts: every
/// alloc and every realloc, with the requested (new) size. The per-call
/// table's own blocks ([`crate::calls::bookkeeping`]) go to the system
/// allocator, so that neither dhat nor the sides count them.
pub struct Tagged<A>(pub A);

// SAFETY: every call is forwarded unchanged to the wrapped allocator, or,
// for the call table's own blocks, to the system allocator, which also
// frees them (the table allocates and frees only under its flag).
unsafe impl<A: GlobalAlloc> GlobalAlloc for Tagged<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if crate::calls::bookkeeping() {
            return unsafe { System.alloc(layout) };
        }
        counted(layout.size(), None, || unsafe { self.0.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if crate::calls::bookkeeping() {
            return unsafe { System.alloc_zeroed(layout) };
        }
        counted(layout.size(), None, || unsafe { self.0.alloc_zeroed(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if crate::calls::bookkeeping() {
            return unsafe { System.dealloc(ptr, layout) };
        }
        // dhat's bookkeeping on free may allocate too; keep it uncounted.
        counted_free(ptr, || unsafe { self.0.dealloc(ptr, layout) })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if crate::calls::bookkeeping() {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        counted(new_size, Some(ptr), || unsafe { self.0.realloc(ptr, layout, new_size) })
    }
}
