//! The sampling build (feature `jemalloc-prof`): jemalloc's own heap
//! profiler, as production runs it, read into the per-site form of the
//! exact builds' traces so that a sampled profile can be held against the
//! exact truth site by site.
//!
//! # The sampling model
//! jemalloc samples by bytes, not by calls: each thread draws the bytes to
//! its next sample from a geometric distribution of mean `R =
//! 2^lg_prof_sample` (a Poisson process over the bytes it allocates), so an
//! allocation of usable size `s` is sampled with probability `p(s) = 1 -
//! exp(-s / R)`. A sampled allocation stands for `1 / p(s)` allocations
//! and `s / p(s)` bytes: unbiased, per size class, whatever mixes of sizes a
//! stack has. Two facts follow that every estimate here inherits:
//! - **usable, not requested, bytes**: jemalloc knows only the size class
//!   (24 bytes asked are 32 held), so a sampled profile reads higher than
//!   dhat's requested bytes by the size-class slack, a bias sampling more
//!   often cannot remove;
//! - **the seed is the thread's address**: jemalloc seeds each thread's
//!   generator from its thread-local block (`tsd_prng_state_init`), so two
//!   processes sample differently only through address-space layout
//!   randomisation, and one thread's successive windows continue one
//!   stream. A repetition of a cell is a new process: a new seed.
//!
//! # Reading the profile
//! `prof.dump` writes jemalloc's text format (`heap_v2/<R>`, then per stack
//! `@ addr…` and `t*: curobjs: curbytes [accumobjs: accumbytes]`). jemalloc
//! 5.3 unbiases per size class internally but prints values *pre-biased* so
//! that jeprof's old unbiasing, which scales a stack's counts by its
//! average size (`1 / (1 - exp(-(bytes/objs) / R))`), yields them
//! (`prof_do_unbias` in `prof_data.c`); [`unbias`] is that formula, so the
//! estimates here are what jeprof, pprof_util (rust-jemalloc-pprof,
//! Pyroscope's Rust backend) and ClickHouse print. The reader is our own:
//! the maintained parser (`pprof_util::parse_jeheap`) keeps the live bytes
//! only, and this study needs the cumulative counts (`prof_accum`) and the
//! object counts too.
//!
//! # Layout
//! - [`MALLOC_CONF`]: profiling compiled in and enabled, sampling off until
//!   [`start`]; the interval comes from `_RJEM_MALLOC_CONF` (as in
//!   production, `lg_prof_sample:N`), else jemalloc's default 2^19;
//! - [`start`], [`finish`]: (start the peak watcher,) reset and activate;
//!   dump, read the watcher's last dump (if any), resolve, write;
//!   [`snapshot`]: the same, sampling left on (a server asked mid-run);
//! - [`Profile::parse`], [`unbias`]: the dump format and its estimates;
//! - the file: a dhat trace (`dhatFileVersion` 2) whose `tb`/`tbk` are the
//!   estimated cumulative bytes and allocations of each site and `eb`/`ebk`
//!   the estimated bytes and allocations live at the end, with a
//!   `sampling` object (interval, stacks, peak dumps); `gb`/`gbk`, dhat's
//!   bytes and blocks at the global peak, are the estimated live bytes and
//!   allocations of the last dump at a peak, where the process asked for
//!   them (`prof_gdump` and `prof_prefix` in its options; [`PeakWatch`]:
//!   jemalloc's own such dumps deadlock, so ours are taken instead, at
//!   each new maximum of the resident anonymous memory), else 0. That is a page-level
//!   peak, as production's, not dhat's byte-level one: the two moments may
//!   differ. What a sample cannot give (lifetimes) is 0. `trace top`, `trace export`
//!   and the comparison with the exact trace read it as they read dhat's.

use std::ffi::{c_char, CStr, CString};
use std::path::Path;

/// jemalloc's compiled-in options (the `malloc_conf` symbol of the
/// `_rjem_` prefix tikv-jemalloc-sys builds with). `prof_active:false`:
/// nothing is sampled before [`start`], so the profile covers the same
/// window as dhat's (from the probe's start to its drop). `prof_accum`:
/// cumulative counts, not only what is live.
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: ConfString = ConfString(c"prof:true,prof_active:false,prof_accum:true".as_ptr());

/// A C string jemalloc reads before `main`.
#[repr(transparent)]
pub struct ConfString(*const c_char);
// SAFETY: it points at a string literal, never written.
unsafe impl Sync for ConfString {}

/// Why a sampled profile could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SampledError {
    #[error("jemalloc mallctl {key}: {error}")]
    Mallctl { key: &'static str, error: tikv_jemalloc_ctl::Error },
    #[error("reading jemalloc's profile {path}: {source}")]
    Io { path: std::path::PathBuf, source: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Format { path: std::path::PathBuf, line: usize, message: String },
}

fn mallctl<T>(key: &'static str, r: Result<T, tikv_jemalloc_ctl::Error>) -> Result<T, SampledError> {
    r.map_err(|error| SampledError::Mallctl { key, error })
}

/// log2 of the mean bytes between samples now in force.
pub fn lg_sample() -> Result<u32, SampledError> {
    // SAFETY: a NUL-terminated mallctl key whose value is a size_t.
    let v = mallctl("prof.lg_sample", unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"prof.lg_sample\0") })?;
    Ok(v as u32)
}

/// Forgets every sample so far and sets the mean interval to 2^`lg` bytes
/// (0: every allocation).
pub fn reset(lg: u32) -> Result<(), SampledError> {
    // SAFETY: a NUL-terminated key whose value is a size_t.
    mallctl("prof.reset", unsafe { tikv_jemalloc_ctl::raw::write::<usize>(b"prof.reset\0", lg as usize) })
}

/// Whether this process asked for dumps at its peaks (`prof_gdump` in its
/// options, which the sampling study's drivers set).
fn gdump() -> Result<bool, SampledError> {
    // SAFETY: a NUL-terminated key whose value is a bool.
    mallctl("opt.prof_gdump", unsafe { tikv_jemalloc_ctl::raw::read::<bool>(b"opt.prof_gdump\0") })
}

/// The prefix jemalloc names its dumps by (`prof_prefix`).
fn prefix() -> Result<std::path::PathBuf, SampledError> {
    // SAFETY: a NUL-terminated key whose value is a pointer to jemalloc's own
    // NUL-terminated copy of the option, which lives as long as the process.
    let p = mallctl("opt.prof_prefix", unsafe { tikv_jemalloc_ctl::raw::read::<*const c_char>(b"opt.prof_prefix\0") })?;
    // SAFETY: as above; jemalloc never returns it null when profiling is compiled in.
    let s = unsafe { std::ffi::CStr::from_ptr(p) };
    Ok(std::path::PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(s.to_bytes())))
}

/// This process's resident anonymous bytes now (`RssAnon`, read without
/// allocating): the watcher's measure of size. The sampling build keeps
/// jemalloc's statistics compiled out (`stats.active` does not exist in it),
/// as production's profiling builds do; resident anonymous pages follow the
/// heap up, and jemalloc hands them back lazily, so a new maximum is a new
/// peak. NOTE: not the whole resident set (`VmRSS`), which also counts the
/// binary's and the libraries' pages as code first runs, where jemalloc's
/// own trigger is its active (anonymous) pages. On the server's quick mix
/// (two processes each) the every-allocation profile's last dump was 90 %
/// from dhat's live bytes at its peak with `VmRSS`, 45-93 % with `RssAnon`.
fn resident() -> Result<usize, SampledError> {
    crate::rss::read_anon().map(|b| b as usize).ok_or_else(|| SampledError::Io {
        path: "/proc/self/status".into(),
        source: std::io::Error::other("no RssAnon"),
    })
}

/// How often the peak watcher reads the resident anonymous bytes.
const PEAK_POLL: std::time::Duration = std::time::Duration::from_millis(1);
/// The watcher dumps again once the resident anonymous bytes pass the last dump's by
/// more than this fraction of them: the dumps of a growing process are
/// few (each costs a write of the whole profile), and the last is within
/// it of the largest the watcher saw.
const PEAK_STEP: usize = 32;

/// The peak watcher of a process that asked for dumps at its peaks.
///
/// jemalloc's own high-water dumps (`prof_gdump`) deadlock: the dump runs
/// inside the allocation that passes the maximum, and when that is the
/// profiler's own (its hash table of a thread's stacks growing, under that
/// thread's lock), the dump waits for the lock its thread holds (jemalloc
/// 5.3.1: `prof_lookup` → `ckh_grow` → `extent_gdump_add` → `prof_dump_prep`;
/// a transport's profile at every allocation hung so). So they are turned
/// off, and a thread of ours reads the resident anonymous bytes every [`PEAK_POLL`]
/// and dumps (`prof.dump`, outside any allocation) at each new maximum past
/// the last dump's by [`PEAK_STEP`]: a peak shorter than the poll can be
/// missed.
struct PeakWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<u64, SampledError>>,
    path: std::path::PathBuf,
}

static WATCH: std::sync::Mutex<Option<PeakWatch>> = std::sync::Mutex::new(None);

fn watch_peaks(path: std::path::PathBuf) -> Result<PeakWatch, SampledError> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut last = resident()?;
    // Made here, before sampling begins: the watcher allocates nothing.
    let c = dump_path(&path)?;
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("peak-watch".into())
        .spawn(move || -> Result<u64, SampledError> {
            let mut dumps = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let now = resident()?;
                if now > last + last / PEAK_STEP {
                    prof_dump(&c)?;
                    (last, dumps) = (now, dumps + 1);
                }
                std::thread::sleep(PEAK_POLL);
            }
            Ok(dumps)
        })
        .map_err(|source| SampledError::Io { path: path.clone(), source })?;
    Ok(PeakWatch { stop, thread, path })
}

/// Forgets every sample so far (keeping the interval in force) and starts
/// sampling; a process that asked for dumps at its peaks starts its
/// watcher first, so that starting it is not in the profile.
pub fn start() -> Result<(), SampledError> {
    if gdump()? {
        // SAFETY: a NUL-terminated key whose value is a bool.
        unsafe {
            mallctl("prof.gdump", tikv_jemalloc_ctl::raw::write::<bool>(b"prof.gdump\0", false))?;
        }
        let path = prefix()?.with_extension(format!("{}.peak.heap", std::process::id()));
        let watch = watch_peaks(path)?;
        *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = Some(watch);
    }
    reset(lg_sample()?)?;
    // SAFETY: a NUL-terminated key whose value is a bool.
    mallctl("prof.active", unsafe { tikv_jemalloc_ctl::raw::write::<bool>(b"prof.active\0", true) })
}

/// The watcher's last dump (the profile when the resident anonymous bytes last passed
/// their maximum) and how many it wrote; the file is removed. None without a
/// watcher or a dump: the process never grew past what it held when
/// sampling began.
fn last_peak() -> Result<Option<(Profile, u64)>, SampledError> {
    let Some(w) = WATCH.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(None) };
    w.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let dumps = w.thread.join().map_err(|_| SampledError::Io {
        path: w.path.clone(),
        source: std::io::Error::other("the peak watcher panicked"),
    })??;
    if dumps == 0 {
        return Ok(None);
    }
    Ok(Some((read_dump(&w.path)?, dumps)))
}

/// One stack's counts as the dump prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub live_objs: u64,
    pub live_bytes: u64,
    pub total_objs: u64,
    pub total_bytes: u64,
}

/// An estimate: what the counts stand for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    pub live_objs: f64,
    pub live_bytes: f64,
    pub total_objs: f64,
    pub total_bytes: f64,
}

/// jeprof's unbiasing of one pair (objects, bytes) at interval `r` bytes.
/// `r == 1` (every allocation sampled) leaves them as they are.
pub fn unbias(objs: u64, bytes: u64, r: u64) -> (f64, f64) {
    if objs == 0 || bytes == 0 || r <= 1 {
        return (objs as f64, bytes as f64);
    }
    let mean = bytes as f64 / objs as f64;
    let scale = 1.0 / (1.0 - (-mean / r as f64).exp());
    (objs as f64 * scale, bytes as f64 * scale)
}

impl Counts {
    pub fn estimate(&self, r: u64) -> Estimate {
        let (live_objs, live_bytes) = unbias(self.live_objs, self.live_bytes, r);
        let (total_objs, total_bytes) = unbias(self.total_objs, self.total_bytes, r);
        Estimate { live_objs, live_bytes, total_objs, total_bytes }
    }
}

/// A dump read: the interval and every stack (innermost address first).
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Mean bytes between samples (`R`).
    pub interval: u64,
    pub stacks: Vec<(Vec<usize>, Counts)>,
}

impl Profile {
    /// Reads the text of a `heap_v2` dump (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Profile, SampledError> {
        let err = |line: usize, message: String| SampledError::Format { path: path.into(), line, message };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let (n, header) = lines.next().ok_or_else(|| err(1, "empty profile".into()))?;
        let interval = header
            .strip_prefix("heap_v2/")
            .and_then(|r| r.trim().parse::<u64>().ok())
            .ok_or_else(|| err(n, format!("expected `heap_v2/<interval>`, found {header:?}")))?;
        let mut stacks = Vec::new();
        let mut pending: Option<Vec<usize>> = None;
        for (n, line) in lines {
            if line.starts_with("MAPPED_LIBRARIES:") {
                break;
            }
            if let Some(addrs) = line.strip_prefix('@') {
                let addrs = addrs
                    .split_whitespace()
                    .map(|a| usize::from_str_radix(a.trim_start_matches("0x"), 16))
                    .collect::<Result<Vec<usize>, _>>()
                    .map_err(|e| err(n, format!("an address that is not hex: {e}")))?;
                pending = Some(addrs);
            } else if let Some(counts) = line.trim_start().strip_prefix("t*:") {
                let Some(addrs) = pending.take() else { continue }; // the process total
                let c =
                    parse_counts(counts).ok_or_else(|| err(n, format!("expected `a: b [c: d]`, found {line:?}")))?;
                if c != Counts::default() {
                    stacks.push((addrs, c));
                }
            }
        }
        Ok(Profile { interval, stacks })
    }
}

fn parse_counts(s: &str) -> Option<Counts> {
    let nums: Vec<u64> = s
        .split(|c: char| c == ':' || c == '[' || c == ']' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    match nums[..] {
        [live_objs, live_bytes, total_objs, total_bytes] => {
            Some(Counts { live_objs, live_bytes, total_objs, total_bytes })
        }
        _ => None,
    }
}

/// Stops sampling, dumps the profile, reads it and writes it as a dhat-form
/// trace at `path` (the dump itself beside it, `<path>.heap`, is removed).
pub fn finish(path: &Path, started: std::time::Instant) -> Result<(), SampledError> {
    // SAFETY: as in `start`.
    unsafe {
        mallctl("prof.active", tikv_jemalloc_ctl::raw::write::<bool>(b"prof.active\0", false))?;
    }
    let peak = last_peak()?;
    let profile = dump(&path.with_extension("heap"))?;
    let file = to_trace(&profile, peak.as_ref(), lg_sample()?, started.elapsed().as_micros() as u64);
    std::fs::write(path, serde_json::to_string(&file).expect("a JSON value"))
        .map_err(|source| SampledError::Io { path: path.to_path_buf(), source })
}

/// The profile so far as the text of a dhat-form trace, sampling left on:
/// what a long-running process answers when asked for its heap profile
/// (the datastore server's `heap_profile` call). jemalloc writes its dump
/// to a file only, so it goes to `scratch` (a directory), read and removed.
pub fn snapshot(scratch: &Path, started: std::time::Instant) -> Result<String, SampledError> {
    static DUMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = DUMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = dump(&scratch.join(format!("heap-profile-{}-{n}.heap", std::process::id())))?;
    let file = to_trace(&profile, None, lg_sample()?, started.elapsed().as_micros() as u64);
    Ok(serde_json::to_string(&file).expect("a JSON value"))
}

/// Dumps jemalloc's profile to `path`, reads it and removes the file.
fn dump(path: &Path) -> Result<Profile, SampledError> {
    prof_dump(&dump_path(path)?)?;
    read_dump(path)
}

/// `path` as the NUL-terminated string `prof.dump` takes.
fn dump_path(path: &Path) -> Result<CString, SampledError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| SampledError::Io { path: path.to_path_buf(), source: std::io::Error::other(e) })
}

/// Has jemalloc write its profile to `path`; allocates nothing here, so the
/// peak watcher may call it while sampling.
fn prof_dump(path: &CStr) -> Result<(), SampledError> {
    // SAFETY: `prof.dump` takes a NUL-terminated path, read before it returns.
    unsafe {
        mallctl("prof.dump", tikv_jemalloc_ctl::raw::write::<*const c_char>(b"prof.dump\0", path.as_ptr()))?;
    }
    Ok(())
}

/// Reads the dump jemalloc wrote at `path` and removes the file.
fn read_dump(path: &Path) -> Result<Profile, SampledError> {
    let io = |source| SampledError::Io { path: path.to_path_buf(), source };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let profile = Profile::parse(path, &text)?;
    std::fs::remove_file(path).map_err(io)?;
    Ok(profile)
}

/// Whether a frame is jemalloc's own (its entry points and its profiler,
/// compiled from tikv-jemalloc-sys's C sources): every sampled stack starts
/// there, and only the frames after them say who allocated.
fn is_jemalloc(frame: &str, file: &str) -> bool {
    file.contains("/tikv-jemalloc-sys") || frame.split(": ").nth(1).is_some_and(|f| f.starts_with("_rjem_"))
}

/// The dhat-form trace of `profile`; with `peak` (the last high-water dump
/// and how many were written), each stack's live estimate then is its
/// `gb`/`gbk`, dhat's bytes and blocks at the global peak.
fn to_trace(profile: &Profile, peak: Option<&(Profile, u64)>, lg: u32, end_us: u64) -> serde_json::Value {
    let mut table = crate::symbols::FrameTable::short();
    let mut pps = Vec::with_capacity(profile.stacks.len());
    let mut at_peak: std::collections::HashMap<&[usize], Estimate> = peak
        .map(|(p, _)| p.stacks.iter().map(|(a, c)| (a.as_slice(), c.estimate(p.interval))).collect())
        .unwrap_or_default();
    // A stack sampled only before the peak (prof_accum keeps every stack
    // sampled since the reset, so none should be) is kept with its peak alone.
    let only_at_peak: Vec<(Vec<usize>, Counts)> = peak
        .map(|(p, _)| {
            let end: std::collections::HashSet<&[usize]> = profile.stacks.iter().map(|(a, _)| a.as_slice()).collect();
            p.stacks
                .iter()
                .filter(|(a, _)| !end.contains(a.as_slice()))
                .map(|(a, _)| (a.clone(), Counts::default()))
                .collect()
        })
        .unwrap_or_default();
    for (addrs, counts) in profile.stacks.iter().chain(&only_at_peak) {
        // The first address is the profiler's own pc, the rest return addresses.
        let mut fs: Vec<usize> = Vec::new();
        for (i, &ip) in addrs.iter().enumerate() {
            fs.extend_from_slice(table.frames(ip, i > 0));
        }
        let own = fs.iter().take_while(|&&f| is_jemalloc(&table.ftbl[f], &table.files[f])).count();
        if own < fs.len() {
            fs.drain(..own);
        }
        let e = counts.estimate(profile.interval);
        let g = at_peak.remove(addrs.as_slice()).unwrap_or_default();
        pps.push(serde_json::json!({
            "tb": e.total_bytes.round() as u64, "tbk": e.total_objs.round() as u64, "tl": 0,
            "mb": 0, "mbk": 0, "gb": g.live_bytes.round() as u64, "gbk": g.live_objs.round() as u64,
            "eb": e.live_bytes.round() as u64, "ebk": e.live_objs.round() as u64,
            "fs": fs,
        }));
    }
    serde_json::json!({
        "dhatFileVersion": 2, "mode": "rust-heap", "verb": "Allocated", "bklt": true, "bkacc": false,
        "tu": "µs", "Mtu": "s", "tuth": 10,
        "cmd": std::env::args().collect::<Vec<_>>().join(" "),
        "pid": std::process::id(), "te": end_us,
        "sampling": {
            "lg_sample": lg, "interval": profile.interval, "stacks": profile.stacks.len(),
            "peak_dumps": peak.map(|(_, n)| *n),
        },
        "pps": pps, "ftbl": table.ftbl,
    })
}
