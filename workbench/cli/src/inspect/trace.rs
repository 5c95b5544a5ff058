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

use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
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
    eb: u64,
    fs: Vec<usize>,
}

/// One frame of the frame table, parsed from dhat's
/// `0xADDR: function (file:line:col)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub function: String,
    /// `file:line` as dhat wrote it (the last components of the path only).
    pub location: String,
    /// The crate, from the function's path (or the file's registry directory).
    pub krate: Option<String>,
}

/// Crates whose frames sit between an allocation request and the allocator:
/// folded away at the top of a stack.
const PLUMBING: &[&str] = &["alloc", "core", "std", "dhat", "probe", "backtrace", "hashbrown"];
/// Crates of this workspace: where a stack enters the subject's own code.
pub const OWN: &[&str] = &["subjects", "subject", "zap", "datastore", "server", "datastore_server", "workbench"];
/// Functions of the thread start-up code, folded away at the bottom.
const STARTUP: &[&str] =
    &["start_thread", "clone3", "clone", "_start", "main", "__libc_start_main", "__libc_start_call_main"];

impl Frame {
    fn parse(s: &str) -> Frame {
        let rest = match s.find(": ") {
            Some(i) if s.starts_with("0x") => &s[i + 2..],
            _ => s,
        };
        let (function, location) = match (rest.rfind(" ("), rest.ends_with(')')) {
            (Some(i), true) => (&rest[..i], &rest[i + 2..rest.len() - 1]),
            _ => (rest, ""),
        };
        // dhat appends the column; a line is precise enough to find the call.
        let location = match location.rsplit_once(':') {
            Some((l, col)) if col.chars().all(|c| c.is_ascii_digit()) => l,
            _ => location,
        };
        Frame { function: function.to_string(), location: location.to_string(), krate: krate_of(function, location) }
    }

    fn is_plumbing(&self) -> bool {
        self.function.starts_with("__rust")
            || self.function.starts_with("__rg_")
            || self.function.starts_with("__rdl_")
            || self.in_crates(PLUMBING)
    }

    fn is_startup(&self) -> bool {
        STARTUP.contains(&self.function.as_str())
            || self.function.starts_with("__libc")
            || self.function.contains("__rust_begin_short_backtrace")
            || (self.in_crates(&["std", "core", "alloc"])
                && [
                    "std::rt::",
                    "std::sys::",
                    "std::thread::",
                    "std::panic",
                    "core::ops::function::",
                    "<std::sys::",
                    "<std::thread::",
                    "<alloc::boxed::Box<",
                    "<core::panic::",
                ]
                .iter()
                .any(|p| self.function.starts_with(p)))
    }

    pub fn is_own(&self) -> bool {
        self.in_crates(OWN)
    }

    fn in_crates(&self, crates: &[&str]) -> bool {
        self.krate.as_deref().is_some_and(|k| crates.contains(&k))
    }

    /// `function (crate/file:line)`: dhat keeps only the path's tail, which
    /// for a dependency often drops the crate (`src/codec/decode.rs`).
    pub fn display(&self) -> String {
        let loc = match &self.krate {
            Some(k)
                if !self.location.is_empty()
                    && !self.location.starts_with(k.as_str())
                    && !self.location.contains(&format!("{k}-")) =>
            {
                format!("{k}: {}", self.location)
            }
            _ => self.location.clone(),
        };
        if loc.is_empty() {
            self.function.clone()
        } else {
            format!("{} ({loc})", self.function)
        }
    }
}

/// The crate a frame belongs to: the first path segment of its function, or
/// a registry directory (`bytes-1.12.2/src/…`) in its location.
fn krate_of(function: &str, location: &str) -> Option<String> {
    let f = function.trim_start_matches(['<', '&', '*', '(']).trim_start_matches("mut ").trim_start_matches("dyn ");
    // `<u8 as alloc::vec::SpecFromElem>::from_elem`: a primitive's impl lives
    // in the trait's crate.
    let f = match f.split_once(" as ") {
        Some((self_ty, tr)) if !self_ty.contains("::") => tr,
        _ => f,
    };
    if let Some((first, _)) = f.split_once("::") {
        if !first.is_empty() && first.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Some(first.to_string());
        }
    }
    let dir = location.split('/').next()?;
    let (name, version) = dir.rsplit_once('-')?;
    version.starts_with(|c: char| c.is_ascii_digit()).then(|| name.replace('-', "_"))
}

/// Which thread a site ran on, from the entry frames its stack reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// The harness: the main thread's experiment loop (the client of a transport).
    Client,
    /// A transport's server thread (`subjects::transports::spawn_server`).
    Server,
    /// Neither entry frame in reach: a library's own thread, or a stack
    /// deeper than the trace kept.
    Other,
}

impl Side {
    pub fn parse(s: &str) -> Option<Side> {
        match s {
            "client" => Some(Side::Client),
            "server" => Some(Side::Server),
            "other" => Some(Side::Other),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
            Side::Other => "other",
        }
    }

    fn of(frames: &[&Frame]) -> Side {
        if frames.iter().any(|f| f.function.contains("spawn_server")) {
            Side::Server
        } else if frames
            .iter()
            .any(|f| f.function.starts_with("subject::main") || f.function.contains("subjects::experiments::"))
        {
            Side::Client
        } else {
            Side::Other
        }
    }
}

/// One allocation site, or several merged under one normalised stack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Site {
    pub bytes: u64,
    pub blocks: u64,
    /// Sum of the blocks' lifetimes, µs (a block alive at exit counts to exit).
    pub lifetime_us: u64,
    /// Bytes of this site live at the moment the whole heap peaked.
    pub at_peak: u64,
    /// Bytes of this site still live at exit.
    pub at_exit: u64,
    /// The innermost folded allocator frame (`alloc::vec::Vec<T>::with_capacity`).
    pub via: Option<String>,
    /// Caller-most last: the frames left after folding both ends.
    pub stack: Vec<Frame>,
    pub side: Option<Side>,
    /// Raw sites merged into this one.
    pub merged: usize,
}

impl Site {
    /// The normalised stack: function names, innermost first.
    pub fn key(&self) -> String {
        self.stack.iter().map(|f| f.function.as_str()).collect::<Vec<_>>().join(" ← ")
    }

    /// Where the subject's code calls the library that allocates: the frames
    /// from the innermost kept frame down to the first of this workspace's.
    pub fn meeting(&self) -> &[Frame] {
        match self.stack.iter().position(Frame::is_own) {
            Some(i) => &self.stack[..=i],
            None => &self.stack[..self.stack.len().min(6)],
        }
    }

    fn add(&mut self, o: &Site) {
        self.bytes += o.bytes;
        self.blocks += o.blocks;
        self.lifetime_us += o.lifetime_us;
        self.at_peak += o.at_peak;
        self.at_exit += o.at_exit;
        self.merged += o.merged;
    }
}

/// Ranking for [`Trace::top`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Bytes,
    Blocks,
    /// Bytes live at the global heap peak.
    Peak,
    /// Average lifetime of a block.
    Lifetime,
}

impl By {
    pub fn parse(s: &str) -> Option<By> {
        match s {
            "bytes" => Some(By::Bytes),
            "blocks" => Some(By::Blocks),
            "peak" => Some(By::Peak),
            "lifetime" => Some(By::Lifetime),
            _ => None,
        }
    }

    fn value(self, s: &Site) -> f64 {
        match self {
            By::Bytes => s.bytes as f64,
            By::Blocks => s.blocks as f64,
            By::Peak => s.at_peak as f64,
            By::Lifetime => s.lifetime_us as f64 / s.blocks.max(1) as f64,
        }
    }
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
}

impl Trace {
    /// Loads and checks a trace: the fields DHAT's viewer requires, file
    /// version 2, every site with frames, no two sites with the same stack.
    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io { path: path.into(), source })?;
        Trace::parse(path, &text)
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

    /// Folded stacks, caller first (`a;b;c bytes`), as flame graph tools read them.
    pub fn folded(&self) -> Vec<String> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for s in &self.sites {
            let mut names: Vec<String> = s.stack.iter().rev().map(|f| short(&f.function)).collect();
            if let Some(v) = &s.via {
                names.push(short(v));
            }
            if names.is_empty() {
                names.push("[allocator]".into());
            }
            *out.entry(names.join(";")).or_default() += s.bytes;
        }
        out.into_iter().map(|(k, v)| format!("{k} {v}")).collect()
    }

    /// The allocation tree by caller: each node a function reached from the
    /// thread entries, with the bytes and blocks allocated beneath it.
    pub fn tree(&self) -> Node {
        let mut root = Node { name: "all".into(), ..Node::default() };
        for s in &self.sites {
            root.bytes += s.bytes;
            root.blocks += s.blocks;
            let mut node = &mut root;
            for f in s.stack.iter().rev() {
                let name = f.display();
                let at = match node.children.iter().position(|c| c.name == name) {
                    Some(i) => i,
                    None => {
                        node.children.push(Node { name, ..Node::default() });
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[at];
                node.bytes += s.bytes;
                node.blocks += s.blocks;
            }
        }
        root.sort();
        root
    }
}

/// `trace top`'s text: a header, then one block per site.
pub fn render_top(t: &Trace, by: By, side: Option<Side>, limit: usize) -> String {
    use crate::fmt::thousands;
    let sites = t.top(by, side);
    let (bytes, blocks) = (t.total_bytes(), t.total_blocks());
    let mut s = format!("{}\n", t.path.display());
    let ops = match t.operations {
        Some(n) => format!(", {} operations (messages + warm-up; setup counts too)", thousands(n)),
        None => String::new(),
    };
    s += &format!(
        "{} B in {} blocks at {} sites ({} after merging equal stacks){ops}\n",
        thousands(bytes),
        thousands(blocks),
        t.sites.len(),
        merge(&t.sites).len()
    );
    if let Some(side) = side {
        let (b, k) = sites.iter().fold((0, 0), |(b, k), x| (b + x.bytes, k + x.blocks));
        s += &format!("{} side: {} B in {} blocks\n", side.name(), thousands(b), thousands(k));
    }
    for (i, x) in sites.iter().take(limit).enumerate() {
        let per_op = t
            .operations
            .map(|n| format!("  {:.1} B/op  {:.3} blocks/op", x.bytes as f64 / n as f64, x.blocks as f64 / n as f64));
        s += &format!(
            "\n#{:<3} {} B ({:.1}%)  {} blocks  avg {} B  at peak {} B  avg life {}  [{}]{}\n",
            i + 1,
            thousands(x.bytes),
            100.0 * x.bytes as f64 / bytes.max(1) as f64,
            thousands(x.blocks),
            thousands(x.bytes / x.blocks.max(1)),
            thousands(x.at_peak),
            life(x.lifetime_us as f64 / x.blocks.max(1) as f64),
            x.side.map_or("?", Side::name),
            per_op.unwrap_or_default()
        );
        if let Some(v) = &x.via {
            s += &format!("      via {v}\n");
        }
        let meeting = x.meeting();
        for (j, f) in meeting.iter().enumerate() {
            let mark = if f.is_own() && j + 1 == meeting.len() { "  ← subject code" } else { "" };
            s += &format!("      {}{mark}\n", f.display());
        }
        if meeting.len() < x.stack.len() {
            s += &format!("      … {} caller frames (trace tree shows them)\n", x.stack.len() - meeting.len());
        }
    }
    if sites.len() > limit {
        s += &format!("\n… {} more sites (--limit)\n", sites.len() - limit);
    }
    s
}

/// `trace diff`'s text.
pub fn render_diff(a: &Trace, b: &Trace, deltas: &[Delta], limit: usize) -> String {
    use crate::fmt::thousands;
    let mut s = format!("A: {}\nB: {}\n", a.path.display(), b.path.display());
    let d = |x: u64, y: u64| y as i128 - x as i128;
    s += &format!(
        "total: {:+} B, {:+} blocks ({} → {} B)\n",
        d(a.total_bytes(), b.total_bytes()),
        d(a.total_blocks(), b.total_blocks()),
        thousands(a.total_bytes()),
        thousands(b.total_bytes())
    );
    if deltas.is_empty() {
        s += "no site changed\n";
    }
    for x in deltas.iter().take(limit) {
        s += &format!(
            "\n{:+} B, {:+} blocks  (A {} B / {} blocks, B {} B / {} blocks)  [{}]\n",
            x.bytes(),
            x.blocks(),
            thousands(x.a.0),
            thousands(x.a.1),
            thousands(x.b.0),
            thousands(x.b.1),
            x.site.side.map_or("?", Side::name)
        );
        for f in x.site.meeting() {
            s += &format!("      {}\n", f.display());
        }
    }
    if deltas.len() > limit {
        s += &format!("\n… {} more changed sites (--limit)\n", deltas.len() - limit);
    }
    s
}

fn life(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

/// A node of [`Trace::tree`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    pub name: String,
    pub bytes: u64,
    pub blocks: u64,
    pub children: Vec<Node>,
}

impl Node {
    fn sort(&mut self) {
        self.children.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
        for c in &mut self.children {
            c.sort();
        }
    }

    /// Indented lines, skipping nodes under `min_share` of the root's bytes;
    /// `max_depth` counts branch points, not frames.
    pub fn render(&self, min_share: f64, max_depth: usize) -> Vec<String> {
        let mut out = Vec::new();
        let total = self.bytes.max(1) as f64;
        self.render_into(&mut out, 0, total, min_share, max_depth);
        out
    }

    fn render_into(&self, out: &mut Vec<String>, depth: usize, total: f64, min_share: f64, max_depth: usize) {
        out.push(format!(
            "{:>6.1}%  {:>14} B  {:>10} blocks  {}{}",
            100.0 * self.bytes as f64 / total,
            crate::fmt::thousands(self.bytes),
            crate::fmt::thousands(self.blocks),
            "  ".repeat(depth),
            self.name
        ));
        if depth >= max_depth {
            return;
        }
        // A chain of single callers holding every byte of its parent stays
        // at the parent's depth: only branches indent and count.
        if let [only] = self.children.as_slice() {
            if only.bytes == self.bytes {
                return only.render_into(out, depth, total, min_share, max_depth);
            }
        }
        let mut hidden = (0u64, 0usize);
        for c in &self.children {
            if (c.bytes as f64) / total < min_share {
                hidden.0 += c.bytes;
                hidden.1 += 1;
            } else {
                c.render_into(out, depth + 1, total, min_share, max_depth);
            }
        }
        if hidden.1 > 0 {
            out.push(format!(
                "{:>6.1}%  {:>14} B  {:>10}         {}… {} smaller callers",
                100.0 * hidden.0 as f64 / total,
                crate::fmt::thousands(hidden.0),
                "",
                "  ".repeat(depth + 1),
                hidden.1
            ));
        }
    }
}

/// One row of [`diff`]: a normalised stack and its totals in A and B.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub key: String,
    pub site: Site,
    pub a: (u64, u64),
    pub b: (u64, u64),
}

impl Delta {
    pub fn bytes(&self) -> i128 {
        self.b.0 as i128 - self.a.0 as i128
    }

    pub fn blocks(&self) -> i128 {
        self.b.1 as i128 - self.a.1 as i128
    }
}

/// Per-site changes from `a` to `b` (bytes, blocks), sites matched by
/// normalised stack, largest absolute byte change first. Identical traces
/// give an empty list.
pub fn diff(a: &Trace, b: &Trace) -> Vec<Delta> {
    let index = |t: &Trace| -> BTreeMap<String, Site> { merge(&t.sites).into_iter().map(|s| (s.key(), s)).collect() };
    let (ia, ib) = (index(a), index(b));
    let keys: HashSet<&String> = ia.keys().chain(ib.keys()).collect();
    let mut out: Vec<Delta> = keys
        .into_iter()
        .filter_map(|k| {
            let (sa, sb) = (ia.get(k), ib.get(k));
            let ta = sa.map_or((0, 0), |s| (s.bytes, s.blocks));
            let tb = sb.map_or((0, 0), |s| (s.bytes, s.blocks));
            (ta != tb).then(|| Delta { key: k.clone(), site: sb.or(sa).cloned().unwrap_or_default(), a: ta, b: tb })
        })
        .collect();
    out.sort_by(|x, y| {
        y.bytes()
            .abs()
            .cmp(&x.bytes().abs())
            .then_with(|| y.blocks().abs().cmp(&x.blocks().abs()))
            .then_with(|| x.key.cmp(&y.key))
    });
    out
}

/// Writes a flame graph of the trace's bytes by caller (inferno) to `out`.
pub fn write_flamegraph(trace: &Trace, out: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let lines = trace.folded();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title =
        format!("bytes allocated: {}", trace.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    opts.count_name = "bytes".into();
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), std::io::BufWriter::new(file))
        .with_context(|| format!("writing the flame graph {}", out.display()))?;
    Ok(())
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

fn normalise(raw: &RawSite, stack: &[&Frame]) -> Site {
    let top = stack.iter().take_while(|f| f.is_plumbing()).count();
    // Keep the allocator frames when nothing else is left (an allocation
    // made by the runtime itself), so the site still has a name.
    let top = if top == stack.len() { 0 } else { top };
    let bottom = stack[top..].iter().rev().take_while(|f| f.is_startup()).count();
    let kept = &stack[top..stack.len() - bottom];
    let kept = if kept.is_empty() { &stack[top..] } else { kept };
    Site {
        bytes: raw.tb,
        blocks: raw.tbk,
        lifetime_us: raw.tl,
        at_peak: raw.gb,
        at_exit: raw.eb,
        via: top.checked_sub(1).map(|i| stack[i].function.clone()),
        stack: kept.iter().map(|f| (*f).clone()).collect(),
        side: Some(Side::of(stack)),
        merged: 1,
    }
}

fn merge(sites: &[Site]) -> Vec<Site> {
    let mut by_key: BTreeMap<(String, Option<Side>), Site> = BTreeMap::new();
    for s in sites {
        match by_key.get_mut(&(s.key(), s.side)) {
            Some(m) => m.add(s),
            None => {
                by_key.insert((s.key(), s.side), s.clone());
            }
        }
    }
    by_key.into_values().collect()
}

/// `messages + warmup` of the cell named in a subject's command line.
fn operations_of(cmd: &str) -> Option<u64> {
    let json = &cmd[cmd.find("--cell ")? + 7..];
    let cell: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    let n = cell.get("messages")?.as_u64()?;
    Some(n + cell.get("warmup").and_then(|w| w.as_u64()).unwrap_or(0))
}

/// A function name without generic arguments, for flame graph labels.
fn short(function: &str) -> String {
    let mut out = String::with_capacity(function.len());
    let mut depth = 0usize;
    for c in function.chars() {
        match c {
            '<' if !out.is_empty() && !out.ends_with("::") => depth += 1,
            '>' if depth > 0 => depth -= 1,
            ';' => out.push(':'),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_with_crate() {
        let f = Frame::parse(
            "0x55c0e09db376: <bytes::bytes_mut::BytesMut>::reserve_inner (bytes-1.12.2/src/bytes_mut.rs:683:23)",
        );
        assert_eq!(f.function, "<bytes::bytes_mut::BytesMut>::reserve_inner");
        assert_eq!(f.location, "bytes-1.12.2/src/bytes_mut.rs:683");
        assert_eq!(f.krate.as_deref(), Some("bytes"));
        let p = Frame::parse(
            "0x1: <u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem (src/vec/spec_from_elem.rs:51:5)",
        );
        assert_eq!(p.krate.as_deref(), Some("alloc"));
        let g = Frame::parse("0x1: new (src/hpack/header.rs:98:24)");
        assert_eq!(g.krate, None);
        let h = Frame::parse("0x1: capnp::message::Builder<A>::new (src/message.rs:98:24)");
        assert_eq!(h.display(), "capnp::message::Builder<A>::new (capnp: src/message.rs:98)");
        assert!(Frame::parse("0x2: start_thread (./nptl/pthread_create.c:442:8)").is_startup());
        assert!(Frame::parse(
            "0x2: <alloc::alloc::Global as core::alloc::Allocator>::allocate (alloc/src/alloc.rs:1:1)"
        )
        .is_plumbing());
    }

    #[test]
    fn a_trace_without_frames_is_refused() {
        let text = r#"{"dhatFileVersion":2,"mode":"rust-heap","verb":"Allocated","bklt":true,"bkacc":false,"tu":"µs","Mtu":"s","tuth":10,"cmd":"x","pid":1,"tg":1,"te":2,
            "pps":[{"tb":10,"tbk":1,"tl":1,"mb":10,"mbk":1,"gb":0,"gbk":0,"eb":0,"ebk":0,"fs":[]},
                   {"tb":30,"tbk":1,"tl":1,"mb":10,"mbk":1,"gb":0,"gbk":0,"eb":0,"ebk":0,"fs":[1]}],
            "ftbl":["[root]","0x1: start_thread (x.c:1:1)"]}"#;
        let e = Trace::parse(Path::new("t.json"), text).unwrap_err();
        assert!(matches!(e, TraceError::NoFrames { empty: 1, sites: 2, .. }), "{e}");
        let repeated = text.replace(r#""fs":[]"#, r#""fs":[1]"#);
        let e = Trace::parse(Path::new("t.json"), &repeated).unwrap_err();
        assert!(matches!(e, TraceError::Repeated { first: 0, second: 1, .. }), "{e}");
        let v1 = text.replace(r#""dhatFileVersion":2"#, r#""dhatFileVersion":1"#);
        assert!(matches!(Trace::parse(Path::new("t.json"), &v1).unwrap_err(), TraceError::Version { found: 1, .. }));
        let no_pps = text.replace(r#""pps""#, r#""ppz""#);
        let e = Trace::parse(Path::new("t.json"), &no_pps).unwrap_err();
        assert!(e.to_string().contains("pps"), "{e}");
    }

    #[test]
    fn operations_come_from_the_cell() {
        assert_eq!(operations_of(r#"/x/subject --cell {"messages":1000,"warmup":16,"seed":1}"#), Some(1016));
        assert_eq!(operations_of("/x/other"), None);
    }

    #[test]
    fn generic_arguments_leave_flame_labels() {
        assert_eq!(short("<alloc::vec::Vec<u8>>::with_capacity"), "<alloc::vec::Vec>::with_capacity");
        assert_eq!(short("capnp::message::Builder<A>::new"), "capnp::message::Builder::new");
    }
}
