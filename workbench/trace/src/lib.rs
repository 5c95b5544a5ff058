//! Reading, checking and reviewing dhat traces (`workbench trace …`).
//!
//! A trace is the `dhat.json` a dhat build writes when its probe drops: one
//! entry per allocation site (`pps`: totals, lifetimes, bytes at the global
//! peak and at exit, and a stack as indices into the frame table `ftbl`).
//! This module loads one, refuses one that DHAT's viewer would refuse or
//! that cannot be attributed, and answers "what allocates here" without a
//! browser:
//! - [`Trace::top`]: the sites, merged by normalised stack and ranked.
//! - [`diff`]: per-site deltas between two traces of the same cell.
//! - [`Trace::tree`]: the allocation tree by caller, and folded stacks for a
//!   flame graph ([`write_flamegraph`]).
//!
//! # Normalised stacks
//! A raw stack starts in the allocator (`__rg_alloc`, `alloc::raw_vec::…`,
//! the probe's and dhat's wrappers) and ends in the thread's start-up code
//! (`std::rt::…`, `start_thread`). Neither says anything about the subject,
//! so both ends are folded away; the innermost folded frame is kept as "via"
//! (e.g. `alloc::vec::Vec<T>::with_capacity`). Sites are matched by the
//! function names that remain, without addresses or line numbers, so that a
//! trace of the same cell at another revision still matches.
//!
//! # Layout
//! - this file: loading and checking a trace ([`Trace`], [`TraceError`]),
//!   ranking its sites ([`Trace::top`]), finding a dataset's traces;
//! - [`frame`]: one frame of the frame table, its crate, and which thread
//!   ([`Side`]) a stack ran on;
//! - [`site`]: a site's stack normalised (both ends folded) and sites merged;
//! - [`tree`]: the allocation tree by caller, folded stacks, the flame graph;
//! - [`diff`]: per-site deltas between two traces; [`diff_flame`]: the
//!   differential allocation flame graph of two traces;
//! - [`render`]: the text of `trace top` and `trace diff`;
//! - [`pprof`]: a trace as pprof's `profile.proto` (`trace export`);
//! - [`speedscope`]: a trace as a speedscope file (`trace export`);
//! - [`events`]: the events build's file: the heap by site over the
//!   operation index (`trace live`, `trace timeline`).
//! - `tests.rs`, `<module>/tests.rs`: each module's unit tests, in a file
//!   of their own because the server's sampling build links this crate:
//!   a run's fingerprint holds the sources cargo's dep-info lists for the
//!   measured binary, and a `#[cfg(test)]` module's file is not among them,
//!   so a test edited here ages no dataset.

pub mod diff;
pub mod diff_flame;
pub mod events;
pub mod frame;
pub mod pprof;
pub mod render;
pub mod site;
pub mod speedscope;
pub mod tree;

pub use diff::{diff, Delta};
pub use frame::{Frame, Side, OWN};
pub use render::{render_diff, render_top};
pub use site::{By, Site};
pub use tree::{write_flamegraph, Node};

use serde::Deserialize;
use site::{merge, normalise};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a trace cannot be reviewed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("reading {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a dhat trace DHAT's viewer loads: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path}: dhatFileVersion {found}, but DHAT's viewer loads version 2 only")]
    Version { path: PathBuf, found: u64 },
    #[error("{path}: mode {found:?}; only heap traces (`rust-heap`) are reviewed")]
    Mode { path: PathBuf, found: String },
    #[error("{path}: site {site} names frame {frame}, but the frame table has {frames} entries")]
    FrameIndex { path: PathBuf, site: usize, frame: usize, frames: usize },
    #[error(
        "{path}: {empty} of {sites} sites have no stack frames ({share:.0}% of the bytes): their \
         symbols could not be read when the process exited, typically because its executable \
         was replaced or deleted while it ran; rerun the cell"
    )]
    NoFrames { path: PathBuf, empty: usize, sites: usize, share: f64 },
    #[error(
        "{path}: sites {first} and {second} have the same stack, which DHAT's viewer rejects \
         (\"data file contains a repeated location\")"
    )]
    Repeated { path: PathBuf, first: usize, second: usize },
    #[error("{path} is not a heap profile this workbench reads (gzipped pprof `profile.proto`): {message}")]
    Pprof { path: PathBuf, message: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DhatFile {
    mode: String,
    #[serde(rename = "cmd")]
    cmd: String,
    #[serde(rename = "te")]
    end_us: u64,
    #[serde(rename = "tg")]
    peak_us: Option<u64>,
    pps: Vec<RawSite>,
    ftbl: Vec<String>,
    /// Present in a profile jemalloc sampled (`probe::sampled`).
    #[serde(default)]
    sampling: Option<Sampling>,
}

/// How a sampled profile was sampled: its counts are estimates, and what a
/// sample cannot know (lifetimes) is 0 in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Sampling {
    /// log2 of the mean bytes between samples.
    pub lg_sample: u32,
    /// The mean bytes between samples.
    pub interval: u64,
    /// High-water dumps the process wrote (`probe::sampled`): with one or
    /// more, each site's `at_peak` is its estimate in the last; none, the
    /// process dumped at no peak and `at_peak` is 0.
    #[serde(default)]
    pub peak_dumps: Option<u64>,
}

impl Sampling {
    /// Whether the profile holds live bytes at a peak.
    pub fn has_peak(&self) -> bool {
        self.peak_dumps.is_some_and(|n| n > 0)
    }
}

#[derive(Deserialize)]
struct RawSite {
    tb: u64,
    tbk: u64,
    #[serde(default)]
    tl: u64,
    #[serde(default)]
    gb: u64,
    #[serde(default)]
    gbk: u64,
    #[serde(default)]
    eb: u64,
    #[serde(default)]
    ebk: u64,
    fs: Vec<usize>,
}

/// A loaded, checked trace.
#[derive(Debug, Clone)]
pub struct Trace {
    pub path: PathBuf,
    /// The command line that produced it.
    pub cmd: String,
    pub end_us: u64,
    pub peak_us: Option<u64>,
    /// Raw sites (not merged), normalised.
    pub sites: Vec<Site>,
    /// Operations the run performed (messages + warm-up of the cell in `cmd`).
    pub operations: Option<u64>,
    /// Set for a sampled profile (not dhat's exact trace).
    pub sampling: Option<Sampling>,
}

impl Trace {
    /// Loads and checks a trace: the fields DHAT's viewer requires, file
    /// version 2, every site with frames, no two sites with the same stack.
    /// A trace may be gzipped (`<name>.gz`, as the runner stores the
    /// sampled profiles): `path` names either, and a missing `x.json` is
    /// read from `x.json.gz`. A pprof profile (`.pb.gz`, `.pb`: what `trace
    /// export` writes and the server's `heap_profile` call answers) is read
    /// back into the same form ([`pprof::read`]).
    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        let gz = path.with_file_name(format!("{}.gz", path.file_name().unwrap_or_default().to_string_lossy()));
        let path = if !path.exists() && gz.exists() { gz.as_path() } else { path };
        if pprof::is_pprof(path) {
            return pprof::read(path);
        }
        Trace::parse(path, &read_text(path)?)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Trace, TraceError> {
        let p = || path.to_path_buf();
        // The viewer's own required fields, checked before typed parsing so
        // that the error names the field.
        let raw: serde_json::Value =
            serde_json::from_str(text).map_err(|source| TraceError::Json { path: p(), source })?;
        let version = raw.get("dhatFileVersion").and_then(|v| v.as_u64()).unwrap_or(0);
        if version != 2 {
            return Err(TraceError::Version { path: p(), found: version });
        }
        let file: DhatFile = serde_json::from_value(raw).map_err(|source| TraceError::Json { path: p(), source })?;
        if file.mode != "rust-heap" && file.mode != "heap" {
            return Err(TraceError::Mode { path: p(), found: file.mode });
        }
        let frames: Vec<Frame> = file.ftbl.iter().map(|s| Frame::parse(s)).collect();
        let total: u64 = file.pps.iter().map(|s| s.tb).sum();
        let empty: Vec<&RawSite> = file.pps.iter().filter(|s| s.fs.is_empty()).collect();
        if !empty.is_empty() {
            let share = 100.0 * empty.iter().map(|s| s.tb).sum::<u64>() as f64 / total.max(1) as f64;
            return Err(TraceError::NoFrames { path: p(), empty: empty.len(), sites: file.pps.len(), share });
        }
        let mut seen: HashMap<&[usize], usize> = HashMap::new();
        let mut sites = Vec::with_capacity(file.pps.len());
        for (i, s) in file.pps.iter().enumerate() {
            if let Some(&first) = seen.get(s.fs.as_slice()) {
                return Err(TraceError::Repeated { path: p(), first, second: i });
            }
            seen.insert(&s.fs, i);
            let mut stack = Vec::with_capacity(s.fs.len());
            for &f in &s.fs {
                let frame = frames.get(f).ok_or(TraceError::FrameIndex {
                    path: p(),
                    site: i,
                    frame: f,
                    frames: frames.len(),
                })?;
                stack.push(frame);
            }
            sites.push(normalise(s, &stack));
        }
        Ok(Trace {
            path: p(),
            operations: operations_of(&file.cmd),
            sampling: file.sampling,
            cmd: file.cmd,
            end_us: file.end_us,
            peak_us: file.peak_us,
            sites,
        })
    }

    pub fn total_bytes(&self) -> u64 {
        self.sites.iter().map(|s| s.bytes).sum()
    }

    pub fn total_blocks(&self) -> u64 {
        self.sites.iter().map(|s| s.blocks).sum()
    }

    /// Sites merged by normalised stack (and side), optionally of one side,
    /// ranked by `by`, largest first.
    pub fn top(&self, by: By, side: Option<Side>) -> Vec<Site> {
        let mut merged = merge(&self.sites);
        merged.retain(|s| side.is_none() || s.side == side);
        merged.sort_by(|a, b| by.value(b).total_cmp(&by.value(a)).then_with(|| a.key().cmp(&b.key())));
        merged
    }
}

/// A trace file's text, gunzipped when its name ends in `.gz` (every kind
/// of trace file reads through here).
pub(crate) fn read_text(path: &Path) -> Result<String, TraceError> {
    String::from_utf8(read_bytes(path)?)
        .map_err(|e| TraceError::Io { path: path.into(), source: std::io::Error::other(e) })
}

/// A trace file's bytes, gunzipped when its name ends in `.gz`.
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, TraceError> {
    let io = |source| TraceError::Io { path: path.into(), source };
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = Vec::new();
        let file = std::fs::File::open(path).map_err(io)?;
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(file), &mut s).map_err(io)?;
        Ok(s)
    } else {
        std::fs::read(path).map_err(io)
    }
}

/// The endings of a trace file's name: dhat's, and the sampling build's
/// profile (gzipped in a dataset).
pub const TRACE_SUFFIXES: &[&str] = &[".dhat.json", ".sampled.json.gz", ".sampled.json"];

/// A trace file's name without its ending ([`TRACE_SUFFIXES`]): the cell,
/// and for a sampled profile its interval (`zap-p0-jemalloc-prof-r0-lg12`).
pub fn stem(name: &str) -> &str {
    TRACE_SUFFIXES.iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

/// Where Debian's valgrind installs DHAT's viewer.
pub fn viewer() -> Option<PathBuf> {
    [
        "/usr/libexec/valgrind/dh_view.html",
        "/usr/lib/x86_64-linux-gnu/valgrind/dh_view.html",
        "/usr/share/doc/valgrind/html/dh_view.html",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// The trace files of a dataset (its `traces/` directory), or the file itself.
pub fn traces_in(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::{bail, Context};
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let dir = path.join("traces");
    if !dir.is_dir() {
        bail!("{}: neither a trace file nor a dataset with a traces/ directory", path.display());
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".dhat.json"))
        .collect();
    out.sort();
    Ok(out)
}

/// The cell (`--cell '<json>'`) of a measured binary's command line.
pub fn cell_of(cmd: &str) -> Option<serde_json::Value> {
    let json = &cmd[cmd.find("--cell ")? + 7..];
    serde_json::from_str(json.trim()).ok()
}

/// `messages + warmup` of the cell named in a subject's command line.
fn operations_of(cmd: &str) -> Option<u64> {
    let cell = cell_of(cmd)?;
    let n = cell.get("messages")?.as_u64()?;
    Some(n + cell.get("warmup").and_then(|w| w.as_u64()).unwrap_or(0))
}

#[cfg(test)]
mod tests;
