//! The event-recording build (feature `events`): every allocation,
//! reallocation and free, with its size and its site (the call stack,
//! interned), counted against the **operation index** the measurement loop
//! sets ([`crate::operation`]): message *n*, query *n*. Two runs of one
//! cell then line up operation by operation, which a wall clock never does.
//!
//! # What is stored, and why it stays small
//! Per operation, the deltas of every site it touched: allocations, bytes,
//! frees, bytes freed. A steady loop repeats the same deltas every
//! operation, so an operation's deltas are interned as a *pattern* and the
//! operations are stored as runs `(first, count, pattern)`: a million
//! identical round trips are one run. Nothing is sampled away: the live
//! bytes of every site after every operation follow exactly.
//!
//! Between two operation boundaries the heap may rise higher than at
//! either (a query's working set, freed before its answer): each pattern
//! also keeps its operation's **high**, the most its live bytes rose above
//! their level at the operation's start, so the heap's true peak (the one
//! dhat and heaptrack report) is on the timeline too, not only its
//! level between operations.
//!
//! # Cost
//! Each call captures its stack (up to [`DEPTH`] frames) and takes one
//! global lock, as dhat does; it is a counting build, never a timed one.
//! Its own bookkeeping allocates through the system allocator unrecorded
//! (a thread-local flag, as [`crate::sides`] does for dhat).
//!
//! # Layout
//! - [`Recorder`]: the global allocator wrapper;
//! - [`operation`], [`operations_done`]: the loop's index;
//! - [`finish`]: resolves the stacks and writes the file (format below).
//!
//! The file (`<cell>.events.json`): `eventsFileVersion`, `cmd` (the
//! command line, as dhat's), `ftbl` (frames as dhat writes them: `0xADDR:
//! function (file:line:col)`), `sites` (each a list of `ftbl` indices,
//! innermost first), `before` and `after` (the deltas outside the
//! operations), `patterns` (each a list of `[site, allocs, bytes, frees,
//! bytes_freed]`), `highs` (per pattern, its operation's high in bytes),
//! `beforeHigh` and `afterHigh` (the live bytes' highest point in each, from
//! the start of recording) and `runs` (`[first operation, count, pattern]`).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Frames captured per call (the allocator's own and the recorder's
/// included; the reader folds them away as it does dhat's).
pub const DEPTH: usize = 48;

thread_local! {
    // Const-initialised without a destructor: readable from the allocator.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

static ON: AtomicBool = AtomicBool::new(false);
/// Totals since recording began, for [`crate::Probe::counters`] (read
/// without the lock: the loop brackets an operation with them).
pub(crate) static ALLOCS: AtomicU64 = AtomicU64::new(0);
pub(crate) static BYTES: AtomicU64 = AtomicU64::new(0);
pub(crate) static FREED: AtomicU64 = AtomicU64::new(0);
pub(crate) static PEAK: AtomicU64 = AtomicU64::new(0);
static STATE: Mutex<Option<State>> = Mutex::new(None);

/// A site's change within one operation: allocations, bytes, frees, bytes freed.
type Delta = [u64; 4];

#[derive(Default)]
struct State {
    site_of: HashMap<Box<[usize]>, u32>,
    stacks: Vec<Box<[usize]>>,
    live: HashMap<usize, (u32, usize)>,
    cur: HashMap<u32, Delta>,
    /// `None` before the first operation; after [`operations_done`], `after`.
    op: Option<u64>,
    done: bool,
    before: Vec<(u32, Delta)>,
    after: Vec<(u32, Delta)>,
    pattern_of: HashMap<(Vec<(u32, Delta)>, u64), u32>,
    patterns: Vec<(Vec<(u32, Delta)>, u64)>,
    runs: Vec<(u64, u64, u32)>,
    /// Live bytes recorded now, at the current period's start, and the
    /// most since that start.
    now: i64,
    start: i64,
    high: i64,
    before_high: i64,
    after_high: i64,
}

impl State {
    fn site(&mut self) -> u32 {
        let mut ips = [0usize; DEPTH];
        let mut n = 0;
        // SAFETY: the recorder's lock serialises every capture, which is
        // what `trace_unsynchronized` asks of its caller.
        unsafe {
            backtrace::trace_unsynchronized(|f| {
                ips[n] = f.ip() as usize;
                n += 1;
                n < DEPTH
            });
        }
        let key = &ips[..n];
        if let Some(&s) = self.site_of.get(key) {
            return s;
        }
        let s = self.stacks.len() as u32;
        self.stacks.push(key.into());
        self.site_of.insert(key.into(), s);
        s
    }

    fn flush(&mut self) -> Vec<(u32, Delta)> {
        let mut v: Vec<(u32, Delta)> = self.cur.drain().filter(|(_, d)| *d != [0; 4]).collect();
        v.sort_unstable();
        v
    }

    /// Ends the current operation (or the time before the first).
    fn close(&mut self) {
        let deltas = self.flush();
        let above = (self.high - self.start).max(0) as u64;
        match (self.op, self.done) {
            (_, true) => {
                merge(&mut self.after, deltas);
                self.after_high = self.after_high.max(self.high);
            }
            (None, false) => {
                merge(&mut self.before, deltas);
                self.before_high = self.before_high.max(self.high);
            }
            (Some(op), false) => {
                let next = self.patterns.len() as u32;
                let key = (deltas, above);
                let p = *self.pattern_of.entry(key.clone()).or_insert(next);
                if p == next {
                    self.patterns.push(key);
                }
                match self.runs.last_mut() {
                    Some((first, count, q)) if *q == p && *first + *count == op => *count += 1,
                    _ => self.runs.push((op, 1, p)),
                }
            }
        }
        (self.start, self.high) = (self.now, self.now);
    }
}

fn merge(into: &mut Vec<(u32, Delta)>, deltas: Vec<(u32, Delta)>) {
    for (s, d) in deltas {
        match into.iter_mut().find(|(t, _)| *t == s) {
            Some((_, e)) => (0..4).for_each(|i| e[i] += d[i]),
            None => into.push((s, d)),
        }
    }
    into.sort_unstable();
}

/// Runs `f` on the state unless this thread is already inside the
/// recorder (its own bookkeeping) or recording is off.
fn with_state(f: impl FnOnce(&mut State)) {
    if !ON.load(Ordering::Relaxed) || INSIDE.with(|i| i.replace(true)) {
        return;
    }
    if let Ok(mut g) = STATE.lock() {
        f(g.get_or_insert_with(State::default));
    }
    INSIDE.with(|i| i.set(false));
}

fn on_alloc(ptr: *mut u8, size: usize) {
    if ptr.is_null() {
        return;
    }
    with_state(|s| {
        let site = s.site();
        s.live.insert(ptr as usize, (site, size));
        let d = s.cur.entry(site).or_default();
        d[0] += 1;
        d[1] += size as u64;
        s.now += size as i64;
        s.high = s.high.max(s.now);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        let total = BYTES.fetch_add(size as u64, Ordering::Relaxed) + size as u64;
        PEAK.fetch_max(total - FREED.load(Ordering::Relaxed), Ordering::Relaxed);
    });
}

fn on_free(ptr: *mut u8) {
    with_state(|s| {
        // A block from before recording began is not in `live`: not counted.
        if let Some((site, size)) = s.live.remove(&(ptr as usize)) {
            let d = s.cur.entry(site).or_default();
            d[2] += 1;
            d[3] += size as u64;
            s.now -= size as i64;
            FREED.fetch_add(size as u64, Ordering::Relaxed);
        }
    });
}

/// The recording wrapper over an allocator.
pub struct Recorder<A>(pub A);

// SAFETY: every call is forwarded to the wrapped allocator unchanged; the
// recorder only observes pointers and sizes.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Recorder<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { self.0.alloc(layout) };
        on_alloc(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { self.0.alloc_zeroed(layout) };
        on_alloc(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        on_free(ptr);
        unsafe { self.0.dealloc(ptr, layout) }
    }

    /// A reallocation is a free of the old block and an allocation of the
    /// new one, at the site that reallocates (dhat counts it the same way).
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            on_free(ptr);
            on_alloc(p, new_size);
        }
        p
    }
}

/// Starts recording (the probe's start).
pub fn start() {
    ON.store(true, Ordering::SeqCst);
}

/// Marks the start of operation `n`: what happens from here until the next
/// call counts for `n`.
pub fn operation(n: u64) {
    with_state(|s| {
        s.close();
        s.op = Some(n);
    });
}

/// Marks the end of the operations: what follows counts as `after`.
pub fn operations_done() {
    with_state(|s| {
        s.close();
        s.done = true;
    });
}

/// Stops recording, resolves every site's frames and writes the file.
pub fn finish(path: &Path) -> std::io::Result<()> {
    with_state(|s| s.close());
    ON.store(false, Ordering::SeqCst);
    let Some(state) = STATE.lock().ok().and_then(|mut g| g.take()) else { return Ok(()) };
    let mut table = crate::symbols::FrameTable::default();
    let sites: Vec<Vec<usize>> = state
        .stacks
        .iter()
        .map(|stack| stack.iter().flat_map(|&ip| table.frames(ip, false).to_vec()).collect())
        .collect();
    let deltas = |v: &[(u32, Delta)]| -> serde_json::Value {
        v.iter().map(|(s, d)| serde_json::json!([s, d[0], d[1], d[2], d[3]])).collect()
    };
    let file = serde_json::json!({
        "eventsFileVersion": 2,
        "cmd": std::env::args().collect::<Vec<_>>().join(" "),
        "ftbl": table.ftbl,
        "sites": sites,
        "before": deltas(&state.before),
        "after": deltas(&state.after),
        "patterns": state.patterns.iter().map(|p| deltas(&p.0)).collect::<Vec<_>>(),
        "highs": state.patterns.iter().map(|p| p.1).collect::<Vec<_>>(),
        "beforeHigh": state.before_high,
        "afterHigh": state.after_high,
        "runs": state.runs.iter().map(|(a, b, c)| serde_json::json!([a, b, c])).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string(&file).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}
