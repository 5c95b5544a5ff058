//! One measurement API over three allocator builds of a subject process.
//!
//! A subject links this crate and picks its allocator with a cargo feature;
//! the feature installs the global allocator, so the subject's own code never
//! names one. The probe is deliberately small and allocation-free on its hot
//! path ([`Probe::counters`]): it runs inside the heap it measures.
//!
//! | variant (feature) | allocation count | bytes alloc/freed | live / peak live | RSS | jemalloc stats |
//! |---|---|---|---|---|---|
//! | `dhat` | exact, process-wide | exact, process-wide | exact / exact | yes | — |
//! | `jemalloc` | — | this thread, usable size (size-class rounded) | `stats.allocated` / max over snapshots | yes | yes |
//! | `events` | per site and operation | per site and operation | exact / exact | yes | — |
//! | `jemalloc-prof` | sampled, per site (estimated) | sampled, per site (estimated) | — | yes | — |
//! | system (no feature) | — | — | — | yes | — |
//!
//! dhat counts every request exactly but serialises allocation behind a
//! global lock, so it is the counting build, not a timing build. jemalloc's
//! per-thread counters (`thread.allocatedp`/`deallocatedp`) count the usable
//! size of each block, so they read *higher* than dhat's requested bytes;
//! the workbench reports the difference instead of hiding it. Only jemalloc
//! reports purges (`stats.arenas.<all>.dirty_npurge`/`muzzy_npurge`), the
//! closest Rust analogue of a garbage collector's cycles: the moments the
//! allocator hands memory back to the OS.
//!
//! # Layout
//! - [`Variant`], [`VARIANT`]: which build this is; [`GIT_REVISION`]: which commit.
//! - [`Probe`]: starts the profiler (dhat writes its trace file on drop).
//! - [`Counters`]: the cheap, allocation-free per-operation counters.
//! - [`Snapshot`], [`JemallocStats`]: the full picture, RSS included.
//! - [`Cell`]: one unit of work for any target binary (the experiments it
//!   names are the `registry` crate's).
//! - [`rss`]: VmRSS / VmHWM from `/proc/self/status` without allocating.
//! - [`smaps`]: where a process's resident set comes from (its text, the
//!   rest of its binary, libraries, heap, thread stacks, other anonymous).
//! - [`sides`]: which side (client, server) each allocation was made for, by
//!   thread tag; the dhat build counts per side as well as in total.
//! - [`operation`]: the measured loop's operation index; the `events` build
//!   ([`events`], a variant beside dhat) records every allocation and free by
//!   site against it, for heap timelines that repeat run to run.
//! - [`calls`]: the dhat build's exact cost per call of a concurrent
//!   server (a thread's call tag; frees charged to the allocating call).
//! - [`sampled`]: the `jemalloc-prof` build: jemalloc's sampling heap
//!   profiler read into the per-site form of the exact traces.
//! - `symbols`: frames resolved in process, written as dhat writes them.

#[cfg(any(
    all(feature = "dhat", feature = "jemalloc"),
    all(feature = "dhat", feature = "jemalloc-plain"),
    all(feature = "jemalloc", feature = "jemalloc-plain"),
    all(feature = "events", any(feature = "dhat", feature = "jemalloc", feature = "jemalloc-plain")),
    all(
        feature = "jemalloc-prof",
        any(feature = "dhat", feature = "jemalloc", feature = "jemalloc-plain", feature = "events")
    )
))]
compile_error!(
    "features `dhat`, `jemalloc`, `jemalloc-plain`, `jemalloc-prof` and `events` each install a global allocator; enable one"
);

#[cfg(feature = "dhat")]
#[global_allocator]
static ALLOC: sides::Tagged<dhat::Alloc> = sides::Tagged(dhat::Alloc);

#[cfg(any(feature = "jemalloc", feature = "jemalloc-plain", feature = "jemalloc-prof"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(feature = "events")]
#[global_allocator]
static ALLOC: events::Recorder<std::alloc::System> = events::Recorder(std::alloc::System);

pub mod calls;
pub mod cell;
#[cfg(feature = "events")]
pub mod events;
pub mod profile;
pub mod rss;
#[cfg(feature = "jemalloc-prof")]
pub mod sampled;
pub mod sides;
pub mod smaps;
#[cfg(any(feature = "events", feature = "jemalloc-prof"))]
mod symbols;

pub use cell::Cell;

pub use sides::{set_side, Side, SideCounts};

use serde::Serialize;
use std::path::Path;

/// The allocator this build measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Dhat,
    Jemalloc,
    /// jemalloc without statistics: measures nothing beyond RSS, and is
    /// timed against the stats build to price the statistics.
    JemallocPlain,
    /// Every allocation and free by site and operation index ([`events`]).
    Events,
    /// jemalloc's sampling heap profiler (`sampled`).
    JemallocProf,
    System,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Dhat => "dhat",
            Variant::Jemalloc => "jemalloc",
            Variant::JemallocPlain => "jemalloc-plain",
            Variant::Events => "events",
            Variant::JemallocProf => "jemalloc-prof",
            Variant::System => "system",
        }
    }
}

/// The commit this binary was built from (stamped by `build.rs`), so that a
/// run can refuse a measured process built from another commit than the one
/// its manifest names.
pub const GIT_REVISION: &str = env!("WORKBENCH_GIT_REVISION");

#[cfg(feature = "dhat")]
pub const VARIANT: Variant = Variant::Dhat;
#[cfg(feature = "jemalloc")]
pub const VARIANT: Variant = Variant::Jemalloc;
#[cfg(feature = "jemalloc-plain")]
pub const VARIANT: Variant = Variant::JemallocPlain;
#[cfg(feature = "events")]
pub const VARIANT: Variant = Variant::Events;
#[cfg(feature = "jemalloc-prof")]
pub const VARIANT: Variant = Variant::JemallocProf;
#[cfg(not(any(
    feature = "dhat",
    feature = "jemalloc",
    feature = "jemalloc-plain",
    feature = "events",
    feature = "jemalloc-prof"
)))]
pub const VARIANT: Variant = Variant::System;

/// Marks the start of operation `n` of the measured loop (message *n*,
/// query *n*): the events build counts what follows for `n`, so that its
/// timeline has the operation, not the clock, on its axis. Free elsewhere.
#[inline]
pub fn operation(n: u64) {
    #[cfg(feature = "events")]
    events::operation(n);
    #[cfg(not(feature = "events"))]
    let _ = n;
}

/// Marks the end of the measured loop's operations (the events build counts
/// what follows as after them). Free elsewhere.
#[inline]
pub fn operations_done() {
    #[cfg(feature = "events")]
    events::operations_done();
}

/// Cumulative counters, cheap to read and allocation-free. Subtract two to
/// measure an operation. `None` where the variant cannot say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Allocation calls (dhat: every alloc and realloc).
    pub allocs: Option<u64>,
    /// Bytes allocated (dhat: requested; jemalloc: usable size, this thread).
    pub bytes_allocated: Option<u64>,
    /// Bytes freed (as above).
    pub bytes_freed: Option<u64>,
}

impl Counters {
    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &Counters) -> Counters {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.wrapping_sub(b?));
        Counters {
            allocs: d(self.allocs, earlier.allocs),
            bytes_allocated: d(self.bytes_allocated, earlier.bytes_allocated),
            bytes_freed: d(self.bytes_freed, earlier.bytes_freed),
        }
    }
}

/// jemalloc's global statistics, read after advancing `epoch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JemallocStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub mapped: u64,
    pub retained: u64,
    pub metadata: u64,
    /// Purges of dirty pages, summed over all arenas.
    pub dirty_npurge: u64,
    /// Purges of muzzy pages, summed over all arenas.
    pub muzzy_npurge: u64,
}

/// Everything the variant can report at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    #[serde(flatten)]
    pub counters: Counters,
    pub live_bytes: Option<u64>,
    pub peak_live_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    pub jemalloc: Option<JemallocStats>,
}

/// Stack frames kept per allocation site in a dhat trace. dhat's default
/// (10) counts the allocator's own frames, which leaves about five frames of
/// the program: too few to see which thread (client or server) a site ran
/// on, or where the subject's code calls into a library.
#[cfg(feature = "dhat")]
const TRACE_DEPTH: usize = 40;

/// The running measurement of this process. One per process.
pub struct Probe {
    #[cfg(feature = "dhat")]
    _profiler: dhat::Profiler,
    /// The events build's file, written when the probe drops.
    #[cfg(feature = "events")]
    events_file: Option<std::path::PathBuf>,
    /// The sampling build's trace, written when the probe drops, and when
    /// sampling began.
    #[cfg(feature = "jemalloc-prof")]
    sampled_file: Option<(std::path::PathBuf, std::time::Instant)>,
    /// jemalloc has no peak of its own: the highest `stats.allocated` seen.
    #[allow(dead_code)]
    peak_seen: std::cell::Cell<u64>,
}

#[cfg(feature = "events")]
impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(path) = &self.events_file {
            if let Err(e) = events::finish(path) {
                eprintln!("probe: writing the events file {}: {e}", path.display());
            }
        }
    }
}

#[cfg(feature = "jemalloc-prof")]
impl Drop for Probe {
    fn drop(&mut self) {
        if let Some((path, started)) = &self.sampled_file {
            if let Err(e) = sampled::finish(path, *started) {
                eprintln!("probe: writing the sampled profile {}: {e}", path.display());
            }
        }
    }
}

impl Probe {
    /// Starts measuring. With dhat, `trace` names the DHAT JSON file written
    /// when the probe is dropped (`None`: no file, counts only); the events
    /// build writes its file there, the sampling build its sampled profile
    /// (and samples only with a file to write).
    pub fn start(trace: Option<&Path>) -> Probe {
        #[cfg(feature = "dhat")]
        let _profiler = match trace {
            Some(path) => dhat::Profiler::builder().file_name(path).trim_backtraces(Some(TRACE_DEPTH)).build(),
            // NOTE: testing mode is dhat's only way to skip writing a file.
            None => dhat::Profiler::builder().testing().build(),
        };
        #[cfg(not(feature = "dhat"))]
        let _ = trace;
        #[cfg(feature = "events")]
        events::start();
        #[cfg(feature = "jemalloc-prof")]
        let sampled_file = trace.map(|path| {
            if let Err(e) = sampled::start() {
                panic!("probe: starting jemalloc's profiler: {e}");
            }
            (path.to_path_buf(), std::time::Instant::now())
        });
        Probe {
            #[cfg(feature = "dhat")]
            _profiler,
            #[cfg(feature = "events")]
            events_file: trace.map(Path::to_path_buf),
            #[cfg(feature = "jemalloc-prof")]
            sampled_file,
            peak_seen: std::cell::Cell::new(0),
        }
    }

    pub fn variant(&self) -> Variant {
        VARIANT
    }

    /// Cumulative counters. PERF: allocation-free on every variant, so it can
    /// bracket a single operation without disturbing what it measures.
    #[inline]
    pub fn counters(&self) -> Counters {
        #[cfg(feature = "dhat")]
        {
            let s = dhat::HeapStats::get();
            Counters { allocs: Some(s.total_blocks), bytes_allocated: Some(s.total_bytes), bytes_freed: None }
        }
        #[cfg(feature = "jemalloc")]
        {
            use tikv_jemalloc_ctl::thread;
            let a = thread::allocatedp::read().map(|p| p.get()).ok();
            let f = thread::deallocatedp::read().map(|p| p.get()).ok();
            Counters { allocs: None, bytes_allocated: a, bytes_freed: f }
        }
        #[cfg(feature = "events")]
        {
            use std::sync::atomic::Ordering::Relaxed;
            Counters {
                allocs: Some(events::ALLOCS.load(Relaxed)),
                bytes_allocated: Some(events::BYTES.load(Relaxed)),
                bytes_freed: Some(events::FREED.load(Relaxed)),
            }
        }
        #[cfg(not(any(feature = "dhat", feature = "jemalloc", feature = "events")))]
        {
            Counters::default()
        }
    }

    /// Allocation calls and bytes per side ([`set_side`]), cumulative. `None`
    /// except in the dhat build, where the per-side counts sum to dhat's total.
    #[inline]
    pub fn sides(&self) -> Option<SideCounts> {
        #[cfg(feature = "dhat")]
        {
            Some(sides::read())
        }
        #[cfg(not(feature = "dhat"))]
        {
            None
        }
    }

    /// The full picture: counters, live and peak heap, RSS, jemalloc stats.
    pub fn snapshot(&self) -> Snapshot {
        let (rss_bytes, peak_rss_bytes) = rss::read().map_or((None, None), |r| (Some(r.rss), Some(r.peak)));
        #[allow(unused_mut)]
        let mut snap = Snapshot { counters: self.counters(), rss_bytes, peak_rss_bytes, ..Snapshot::default() };
        #[cfg(feature = "dhat")]
        {
            let s = dhat::HeapStats::get();
            snap.counters.bytes_freed = Some(s.total_bytes - s.curr_bytes as u64);
            snap.live_bytes = Some(s.curr_bytes as u64);
            snap.peak_live_bytes = Some(s.max_bytes as u64);
        }
        #[cfg(feature = "events")]
        {
            use std::sync::atomic::Ordering::Relaxed;
            let (b, f) = (events::BYTES.load(Relaxed), events::FREED.load(Relaxed));
            snap.live_bytes = Some(b - f);
            snap.peak_live_bytes = Some(events::PEAK.load(Relaxed));
        }
        #[cfg(feature = "jemalloc")]
        {
            if let Some(je) = jemalloc_stats() {
                self.peak_seen.set(self.peak_seen.get().max(je.allocated));
                snap.live_bytes = Some(je.allocated);
                snap.peak_live_bytes = Some(self.peak_seen.get());
                snap.jemalloc = Some(je);
            }
        }
        snap
    }
}

/// Live heap bytes now, for a process that holds its [`Probe`] elsewhere (a
/// server answering a stats request on any thread): dhat's exact current
/// bytes, jemalloc's `stats.allocated`, `None` on the system build.
/// NOTE: in the dhat build a [`Probe`] must be running (dhat panics otherwise).
pub fn live_heap() -> Option<u64> {
    #[cfg(feature = "dhat")]
    {
        Some(dhat::HeapStats::get().curr_bytes as u64)
    }
    #[cfg(feature = "jemalloc")]
    {
        jemalloc_stats().map(|j| j.allocated)
    }
    #[cfg(not(any(feature = "dhat", feature = "jemalloc")))]
    {
        None
    }
}

/// Process-wide cumulative allocation calls and bytes, and the peak live
/// bytes so far: exact in the dhat build, `None` in the others (jemalloc
/// counts bytes per thread only). For a process that holds its [`Probe`]
/// elsewhere, like [`live_heap`].
pub fn heap_totals() -> Option<(u64, u64, u64)> {
    #[cfg(feature = "dhat")]
    {
        let s = dhat::HeapStats::get();
        Some((s.total_blocks, s.total_bytes, s.max_bytes as u64))
    }
    #[cfg(not(feature = "dhat"))]
    {
        None
    }
}

/// jemalloc's global statistics now (`None` except in the jemalloc build).
pub fn jemalloc_now() -> Option<JemallocStats> {
    #[cfg(feature = "jemalloc")]
    {
        jemalloc_stats()
    }
    #[cfg(not(feature = "jemalloc"))]
    {
        None
    }
}

#[cfg(feature = "jemalloc")]
fn jemalloc_stats() -> Option<JemallocStats> {
    use tikv_jemalloc_ctl::{epoch, raw, stats};
    epoch::advance().ok()?;
    // 4096 = MALLCTL_ARENAS_ALL: jemalloc merges every arena's counters.
    let purges = |name: &[u8]| unsafe {
        // SAFETY: the names are NUL-terminated mallctl keys whose value type is u64.
        raw::read::<u64>(name).unwrap_or(0)
    };
    Some(JemallocStats {
        allocated: stats::allocated::read().ok()? as u64,
        active: stats::active::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
        mapped: stats::mapped::read().ok()? as u64,
        retained: stats::retained::read().ok()? as u64,
        metadata: stats::metadata::read().ok()? as u64,
        dirty_npurge: purges(b"stats.arenas.4096.dirty_npurge\0"),
        muzzy_npurge: purges(b"stats.arenas.4096.muzzy_npurge\0"),
    })
}
