//! The allocation gate (`workbench gate`, `workbench bless`): a small suite
//! of dhat cells whose exact allocation counts are committed, so that a
//! commit which adds or removes an allocation anywhere the suite reaches
//! fails the test command, with the sites that explain it.
//!
//! The suite is every spec's `[gate]` table (small sizes, every codec,
//! every transport stack, every server query on its own), run once in the
//! dhat build. A count is a total over the cell's measured operations,
//! compared with its line in `experiments/gate/baseline.txt`: **any**
//! difference, up or down, fails. Counts that the bless saw vary between
//! runs (timers, flow-control windows, a future boxed per wake-up) are the
//! determinism map ([`map`]), the only counts not called exact: they are
//! bounded only against gross change ([`baseline::Range::accepts`]), and
//! their cells' sites that did not vary are gated exactly instead.
//!
//! `bless` runs the suite twice on a quiet machine and once two cells at a
//! time (each with the other core loaded by the other), runs the cells that
//! varied [`EXTRA_RUNS`] more times, and writes the ranges with the reason;
//! a count the old baseline saw vary keeps that range ([`keep_known_variation`]).
//!
//! # Layout
//! - this file: the suite ([`suite`]), running it ([`measure`]), the
//!   verdict ([`verdict`], [`render_changes`]) and the bless ([`bless`]);
//! - [`counts`]: each gated experiment's records as exact counts ([`counts::GATED`]);
//! - [`baseline`]: the committed files as types;
//! - [`map`]: the determinism map, for the terminal, the paper and the site.

pub mod baseline;
pub mod counts;
pub mod map;

use crate::data::host;
use crate::fmt::thousands;
use crate::run::runner::{self, Binaries, Planned};
use ::trace::{By, Trace};
use anyhow::{bail, Context, Result};
use baseline::{Baseline, CellId, Header, Range, SiteRange};
use counts::{Count, Counts, Gated};
use indicatif::MultiProgress;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Runs of each cell that varied during a bless, beyond the first three:
/// a range seen in 3 runs is narrower than the count's real spread, and a
/// range the gate then leaves is a false alarm. A dhat cell of the suite
/// takes 0.1–0.5 s, so 5 more cost a few seconds per varying cell.
pub const EXTRA_RUNS: usize = 5;

/// A site is kept in `sites.txt` when it allocated at least this many
/// blocks in the cell: the gate's cells run 100–300 operations, so a site
/// that allocates once every few operations is kept, and start-up's
/// one-off allocations (which depend on paths and the environment) are not.
pub const SITE_MIN_BLOCKS: u64 = 32;

/// One cell of the suite.
pub struct GateCell {
    pub id: CellId,
    pub planned: Planned,
    pub gated: &'static Gated,
}

/// The suite: every spec's `[gate]` table, in the dhat build.
pub fn suite(root: &Path) -> Result<Vec<GateCell>> {
    let mut out = Vec::new();
    for (path, spec) in crate::spec::load_dir(&root.join("experiments"))? {
        let Some(settings) = &spec.gate else { continue };
        let gated = counts::gated(spec.dataset()).with_context(|| {
            format!(
                "{}: [gate]: {} does not count allocations the gate reads; gated: {:?}",
                path.display(),
                spec.dataset(),
                counts::GATED.iter().map(|g| g.experiment.name()).collect::<Vec<_>>()
            )
        })?;
        for planned in runner::plan_with(&spec, settings, &["dhat".to_string()])? {
            let unit = match (&planned.fields.codec, planned.fields.payload) {
                (Some(c), Some(p)) => format!("{c}-p{p}"),
                _ => "server".to_string(),
            };
            let unit = if planned.rep > 0 { format!("{unit}-r{}", planned.rep) } else { unit };
            out.push(GateCell { id: CellId { dataset: spec.dataset().to_string(), unit }, planned, gated });
        }
    }
    Ok(out)
}

/// A site's counts in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteCount {
    pub side: String,
    pub blocks: u64,
    pub bytes: u64,
    pub label: String,
}

/// What one run of a cell measured.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRun {
    pub counts: Counts,
    pub sites: BTreeMap<String, SiteCount>,
    /// How far this run's counts may stray for the wall clock: blocks and
    /// bytes, [`ClockSite::blocks`] and [`ClockSite::bytes`] per block its
    /// traces hold at each of [`CLOCK_SITES`].
    pub clock: (u64, u64),
}

/// A site whose allocations follow the wall clock, and what each of its
/// allocations may bring with it elsewhere.
pub struct ClockSite {
    /// A frame of its stack (a function path, matched as a substring).
    pub frame: &'static str,
    /// Blocks and bytes one of its allocations may move the cell's counts by.
    pub blocks: u64,
    pub bytes: u64,
}

/// Sites whose allocations follow the wall clock, not the work: how many
/// a cell makes depends on how many second boundaries its run crossed.
/// hyper keeps the HTTP `Date` header cached and renders it again once a
/// second; with its http2 feature on (tonic turns it on for the whole
/// build) each render allocates the 29-byte header value. A warm run read
/// the json-rpc-http cell at 7,202 allocations against a baseline of 7,201
/// that six bless runs had seen exact: one more render. Over HTTP/2 (gRPC)
/// a render ripples: the first clone of the new value promotes it (24 B),
/// and the client's HPACK table stores it (29 B) and promotes its first
/// clone (24 B): 4 blocks, 106 bytes, as a loaded run read (15,406 against
/// 15,402). A count may move by at most that much per render the run's
/// own traces hold.
pub const CLOCK_SITES: &[ClockSite] =
    &[ClockSite { frame: "hyper::common::date::CachedDate::render", blocks: 4, bytes: 128 }];

/// Whether `value` differs from an exact baseline `lo` by no more than the
/// run's clock-driven allocations (bytes for a `bytes` metric, blocks else).
fn within_clock(metric: &str, lo: u64, value: u64, clock: (u64, u64)) -> bool {
    let slack = if metric.ends_with("bytes") { clock.1 } else { clock.0 };
    slack > 0 && value.abs_diff(lo) <= slack
}

/// One run of every cell of the suite.
pub type Measured = BTreeMap<CellId, CellRun>;

/// How the cells of a run share the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// One cell at a time.
    Quiet,
    /// Two cells at a time, each loading the other core.
    Loaded,
}

/// The suite's binaries, built (or found built) once.
pub struct Built {
    /// Owns the private copies the paths point at (removed on drop).
    _bins: Binaries,
    paths: BTreeMap<registry::Target, PathBuf>,
}

impl Built {
    pub fn new(root: &Path, cells: &[GateCell], multi: &MultiProgress) -> Result<Built> {
        let mut bins = Binaries::default();
        let mut paths = BTreeMap::new();
        for c in cells {
            if let std::collections::btree_map::Entry::Vacant(e) = paths.entry(c.planned.target) {
                e.insert(bins.get(root, c.planned.target, "dhat", multi)?);
            }
        }
        Ok(Built { _bins: bins, paths })
    }
}

/// Runs `cells` once under `load`, in `scratch` (traces are read and deleted).
pub fn measure(
    cells: &[&GateCell],
    built: &Built,
    load: Load,
    scratch: &Path,
    multi: &MultiProgress,
) -> Result<Measured> {
    for d in ["traces", "logs"] {
        std::fs::create_dir_all(scratch.join(d)).with_context(|| format!("creating {}", scratch.join(d).display()))?;
    }
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Measured::new());
    let worker = || -> Result<()> {
        loop {
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(c) = cells.get(i) else { return Ok(()) };
            let run = run_one(c, &built.paths[&c.planned.target], scratch, multi)?;
            out.lock().expect("no worker panics holding it").insert(c.id.clone(), run);
        }
    };
    let threads = if load == Load::Loaded { 2 } else { 1 };
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
        for h in handles {
            h.join().map_err(|_| anyhow::anyhow!("a gate worker panicked"))??;
        }
        Ok(())
    })?;
    Ok(out.into_inner().expect("workers joined"))
}

fn run_one(c: &GateCell, bin: &Path, scratch: &Path, multi: &MultiProgress) -> Result<CellRun> {
    let records = runner::run_cell(bin, &c.planned, scratch, multi)?;
    let counts = (c.gated.counts)(&records).with_context(|| format!("gate cell {}", c.id))?;
    let mut sites = BTreeMap::new();
    let mut clock = (0, 0);
    let dir = scratch.join("traces");
    let prefix = &c.planned.id;
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            n == format!("{prefix}.dhat.json") || (n.starts_with(&format!("{prefix}-")) && n.ends_with(".dhat.json"))
        })
        .collect();
    traces.sort();
    if traces.is_empty() {
        bail!("gate cell {}: the dhat build wrote no trace in {}", c.id, dir.display());
    }
    for path in traces {
        let t = Trace::load(&path)?;
        // A server cell writes a trace per workload: `<id>-<workload>.dhat.json`.
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let part = name.trim_end_matches(".dhat.json").strip_prefix(prefix.as_str()).unwrap_or("");
        let part = part.trim_start_matches('-');
        for s in t.top(By::Bytes, None) {
            if let Some(c) = CLOCK_SITES.iter().find(|c| s.stack.iter().any(|f| f.function.contains(c.frame))) {
                clock = (clock.0 + s.blocks * c.blocks, clock.1 + s.blocks * c.bytes);
            }
            if s.blocks < SITE_MIN_BLOCKS {
                continue;
            }
            let side = s.side.map_or("?", |x| x.name()).to_string();
            let key = format!("{part}|{side}|{}", s.key());
            let mut label = s.label();
            if !part.is_empty() {
                label = format!("[{part}] {label}");
            }
            let e = sites.entry(format!("{:016x}", fnv64(key.as_bytes()))).or_insert(SiteCount {
                side,
                blocks: 0,
                bytes: 0,
                label,
            });
            e.blocks += s.blocks;
            e.bytes += s.bytes;
        }
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(CellRun { counts, sites, clock })
}

fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// A count that left its baseline line: `before` is `None` for a cell or
/// metric the baseline lacks, `after` is `None` for one the suite no
/// longer measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub metric: String,
    pub before: Option<Range>,
    pub after: Option<Count>,
}

/// A site whose counts left the baseline's range (or appeared, or went).
#[derive(Debug, Clone, PartialEq)]
pub struct SiteMove {
    pub before: Option<SiteRange>,
    pub after: Option<SiteCount>,
}

impl SiteMove {
    fn bytes_delta(&self) -> i128 {
        let b = self.before.as_ref().map_or(0, |s| s.bytes.hi as i128);
        let a = self.after.as_ref().map_or(0, |s| s.bytes as i128);
        a - b
    }
}

/// One changed cell: its counts that moved and the sites that explain them.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub id: CellId,
    pub counts: Vec<Moved>,
    pub sites: Vec<SiteMove>,
}

/// Every cell whose counts differ from the baseline; empty when none does.
pub fn verdict(base: &Baseline, measured: &Measured) -> Vec<Change> {
    let ids: std::collections::BTreeSet<&CellId> = base.counts.keys().chain(measured.keys()).collect();
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for id in ids {
        let before = base.counts.get(id).unwrap_or(&empty);
        let run = measured.get(id);
        let mut moved = Vec::new();
        let metrics: std::collections::BTreeSet<&String> =
            before.keys().chain(run.iter().flat_map(|r| r.counts.keys())).collect();
        for m in metrics {
            let (b, a) = (before.get(m).copied(), run.and_then(|r| r.counts.get(m)).copied());
            let clock = run.map_or((0, 0), |r| r.clock);
            let same = matches!((b, a), (Some(r), Some(c))
                if r.accepts(c.value) || (r.is_exact() && within_clock(m, r.lo, c.value, clock)));
            if !same {
                moved.push(Moved { metric: m.clone(), before: b, after: a });
            }
        }
        let sites = site_moves(base.sites.get(id), run);
        // A varying count (a boxed future per wake-up, a QUIC timer) can
        // hide a real change inside its range; the cell's sites that were
        // exact in every bless run cannot, so they are gated one by one.
        let varying = before.values().any(|r| !r.is_exact());
        let exact_site_moved = varying
            && sites.iter().any(|m| m.before.as_ref().is_none_or(|b| b.blocks.is_exact() && b.bytes.is_exact()));
        if moved.is_empty() && !exact_site_moved {
            continue;
        }
        out.push(Change { id: id.clone(), counts: moved, sites });
    }
    out
}

fn site_moves(before: Option<&BTreeMap<String, SiteRange>>, run: Option<&CellRun>) -> Vec<SiteMove> {
    let empty_b = BTreeMap::new();
    let before = before.unwrap_or(&empty_b);
    let empty_a = BTreeMap::new();
    let after = run.map_or(&empty_a, |r| &r.sites);
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut out: Vec<SiteMove> = keys
        .into_iter()
        .filter_map(|k| {
            let (b, a) = (before.get(k), after.get(k));
            let inside = matches!((b, a), (Some(b), Some(a)) if b.blocks.accepts(a.blocks) && b.bytes.accepts(a.bytes));
            (!inside).then(|| SiteMove { before: b.cloned(), after: a.cloned() })
        })
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.bytes_delta().abs()));
    out
}

/// How many sites a changed cell lists.
const SITES_SHOWN: usize = 8;

/// The gate's report of `changes`: per changed cell, each count before →
/// after (and per operation), then the sites that moved.
pub fn render_changes(changes: &[Change]) -> String {
    let mut s = String::new();
    for c in changes {
        s += &format!("\n{}\n", c.id);
        if c.counts.is_empty() {
            s += "  every count within its varying range, but sites exact in every bless run moved:\n";
        }
        for m in &c.counts {
            let before = m.before.map_or("(not in the baseline)".to_string(), |r| r.to_string());
            let after = m.after.map_or("(not measured)".to_string(), |a| a.value.to_string());
            let per = match (m.before, m.after) {
                (Some(r), Some(a)) if a.per > 1 => {
                    let d = a.value as f64 - if a.value > r.hi { r.hi } else { r.lo } as f64;
                    let sign = if d >= 0.0 { "+" } else { "-" };
                    format!("  ({sign}{} per operation, over {})", crate::fmt::sig3(d.abs() / a.per as f64), a.per)
                }
                _ => String::new(),
            };
            s += &format!("  {:<22} {before} → {after}{per}\n", m.metric);
        }
        if c.sites.is_empty() {
            s += "  no site that allocates often moved (the change is in sites under the threshold)\n";
        }
        for m in c.sites.iter().take(SITES_SHOWN) {
            let (side, label) = match (&m.after, &m.before) {
                (Some(a), _) => (&a.side, &a.label),
                (None, Some(b)) => (&b.side, &b.label),
                (None, None) => continue,
            };
            let blocks = |b: Option<Range>, a: Option<u64>| {
                format!("{} → {}", b.map_or("–".into(), |r| r.to_string()), a.map_or("–".into(), |v| v.to_string()))
            };
            s += &format!(
                "    [{side}] blocks {}, bytes {}  {label}\n",
                blocks(m.before.as_ref().map(|b| b.blocks), m.after.as_ref().map(|a| a.blocks)),
                blocks(m.before.as_ref().map(|b| b.bytes), m.after.as_ref().map(|a| a.bytes)),
            );
        }
        if c.sites.len() > SITES_SHOWN {
            s += &format!("    … {} more sites moved\n", c.sites.len() - SITES_SHOWN);
        }
    }
    s
}

/// `workbench gate`: one quiet run of the suite against the baseline.
/// Prints one line when nothing changed; fails naming every change.
pub fn gate(root: &Path, multi: &MultiProgress) -> Result<()> {
    let base = Baseline::load(root)?;
    let start = Instant::now();
    let cells = suite(root)?;
    let built = Built::new(root, &cells, multi)?;
    let scratch = scratch_dir(root)?;
    let refs: Vec<&GateCell> = cells.iter().collect();
    let measured = measure(&refs, &built, Load::Quiet, &scratch, multi);
    let _ = std::fs::remove_dir_all(&scratch);
    let measured = measured?;
    let changes = verdict(&base, &measured);
    let counted: usize = measured.values().map(|r| r.counts.len()).sum();
    if changes.is_empty() {
        println!(
            "gate: {} cells, {counted} counts as blessed ({:.1} s; baseline of {}: {})",
            cells.len(),
            start.elapsed().as_secs_f64(),
            short_rev(&base.header.revision),
            base.header.reason
        );
        return Ok(());
    }
    print!("{}", render_changes(&changes));
    // The engine splits a query over one worker per core, and each worker
    // allocates its own partial: counts of the server's cells depend on it.
    let here = format!(", {} cores", host::cores());
    if !base.header.machine.ends_with(&here) {
        println!(
            "\nnote: the baseline was blessed on {} and this machine has{}: the server's per-query counts \
             depend on the number of cores",
            base.header.machine,
            here.trim_start_matches(',')
        );
    }
    bail!(
        "gate: {} of {} cells changed their allocation counts (baseline of {}: {}); a change on purpose: \
         `workbench bless --reason \"…\"` and commit experiments/gate/",
        changes.len(),
        cells.len(),
        short_rev(&base.header.revision),
        base.header.reason
    )
}

fn short_rev(r: &str) -> &str {
    &r[..r.len().min(7)]
}

fn scratch_dir(root: &Path) -> Result<PathBuf> {
    let d = root.join("target").join(format!("gate-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// `workbench bless --reason`: measures the suite (twice quiet, once loaded,
/// the varying cells [`EXTRA_RUNS`] more times) and rewrites the baseline;
/// prints what changed against the old one.
pub fn bless(root: &Path, reason: &str, multi: &MultiProgress) -> Result<Vec<PathBuf>> {
    if reason.trim().is_empty() {
        bail!("bless --reason: say why the counts change (it is kept beside them in experiments/gate/baseline.txt)");
    }
    let (rev, dirty) = host::git_state(root);
    if dirty {
        bail!("bless: the tree has uncommitted changes; commit first, so the baseline names the code it counted");
    }
    let cells = suite(root)?;
    let built = Built::new(root, &cells, multi)?;
    let scratch = scratch_dir(root)?;
    let result = (|| -> Result<Vec<Measured>> {
        let all: Vec<&GateCell> = cells.iter().collect();
        let mut runs = Vec::new();
        for (i, load) in [Load::Quiet, Load::Quiet, Load::Loaded].into_iter().enumerate() {
            crate::run::runner::say(multi, format!("bless: run {} of 3 ({load:?})", i + 1));
            runs.push(measure(&all, &built, load, &scratch, multi)?);
        }
        let varying: Vec<&GateCell> = cells.iter().filter(|c| varies(&runs, &c.id)).collect();
        if !varying.is_empty() {
            let names: Vec<String> = varying.iter().map(|c| c.id.to_string()).collect();
            crate::run::runner::say(
                multi,
                format!("bless: {} more runs of the varying: {}", EXTRA_RUNS, names.join(", ")),
            );
            for _ in 0..EXTRA_RUNS {
                runs.push(measure(&varying, &built, Load::Quiet, &scratch, multi)?);
            }
        }
        Ok(runs)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    let runs = result?;
    let old = Baseline::load(root).ok();
    let header = Header {
        reason: reason.trim().to_string(),
        revision: rev,
        date: host::iso_date(host::now_secs()),
        machine: format!("{}, {} cores", host::cpu_model(), host::cores()),
        runs: format!(
            "2 quiet, 1 two cells at a time (the other core loaded); {EXTRA_RUNS} more quiet runs of each cell that varied"
        ),
    };
    let mut new = combine(header, &runs);
    if let Some(old) = &old {
        keep_known_variation(old, &mut new);
        let changes = verdict(old, &last_as_measured(&new));
        if changes.is_empty() {
            println!("bless: no count changed against the old baseline");
        } else {
            println!("bless: {} cells changed against the old baseline:", changes.len());
            print!("{}", render_changes(&changes));
        }
    }
    new.write(root)
}

fn varies(runs: &[Measured], id: &CellId) -> bool {
    let of: Vec<&CellRun> = runs.iter().filter_map(|r| r.get(id)).collect();
    of.windows(2).any(|w| w[0].counts != w[1].counts)
}

/// The baseline of several runs: each count's and site's range over them.
/// A site under [`SITE_MIN_BLOCKS`] in some run of its cell counts 0 there.
pub fn combine(header: Header, runs: &[Measured]) -> Baseline {
    let mut b = Baseline { header, ..Baseline::default() };
    let mut seen: BTreeMap<CellId, usize> = BTreeMap::new();
    for run in runs {
        for (id, r) in run {
            *seen.entry(id.clone()).or_default() += 1;
            let counts = b.counts.entry(id.clone()).or_default();
            for (m, c) in &r.counts {
                counts.entry(m.clone()).and_modify(|x| *x = x.with(c.value)).or_insert(Range::exact(c.value));
            }
        }
    }
    for (id, n) in &seen {
        let mut sites: BTreeMap<String, (SiteRange, usize)> = BTreeMap::new();
        for r in runs.iter().filter_map(|r| r.get(id)) {
            for (k, s) in &r.sites {
                let e = sites.entry(k.clone()).or_insert_with(|| {
                    (
                        SiteRange {
                            side: s.side.clone(),
                            blocks: Range::exact(s.blocks),
                            bytes: Range::exact(s.bytes),
                            label: s.label.clone(),
                        },
                        0,
                    )
                });
                e.0.blocks = e.0.blocks.with(s.blocks);
                e.0.bytes = e.0.bytes.with(s.bytes);
                e.1 += 1;
            }
        }
        let out = b.sites.entry(id.clone()).or_default();
        for (k, (mut s, present)) in sites {
            if present < *n {
                s.blocks = s.blocks.with(0);
                s.bytes = s.bytes.with(0);
            }
            out.insert(k, s);
        }
    }
    b
}

/// Widens each new range by the old one where the old baseline saw the
/// count (or site) vary and every new value is one the old range accepts:
/// a count once seen to vary is not deterministic because eight later runs
/// happened to agree. The server's ping peak read 61,413 in all eight runs
/// of one bless, 61,413..61,477 in earlier ones, and 61,477 in the CI run
/// after it (a 64-byte block live or not at the peak, by thread timing).
/// A count outside the old range's bounds changed for real: its new range
/// stands alone.
fn keep_known_variation(old: &Baseline, new: &mut Baseline) {
    let widen = |before: Range, now: &mut Range| {
        if !before.is_exact() && before.accepts(now.lo) && before.accepts(now.hi) {
            *now = now.union(before);
        }
    };
    for (id, counts) in &mut new.counts {
        for (m, r) in counts.iter_mut() {
            if let Some(b) = old.counts.get(id).and_then(|c| c.get(m)) {
                widen(*b, r);
            }
        }
    }
    for (id, sites) in &mut new.sites {
        for (k, s) in sites.iter_mut() {
            if let Some(b) = old.sites.get(id).and_then(|c| c.get(k)) {
                widen(b.blocks, &mut s.blocks);
                widen(b.bytes, &mut s.bytes);
            }
        }
    }
}

/// A baseline's upper values as one run, to show what a bless changed.
fn last_as_measured(b: &Baseline) -> Measured {
    b.counts
        .iter()
        .map(|(id, m)| {
            let counts = m.iter().map(|(k, r)| (k.clone(), Count { value: r.hi, per: 1 })).collect();
            let sites = b
                .sites
                .get(id)
                .map(|s| {
                    s.iter()
                        .map(|(k, x)| {
                            (
                                k.clone(),
                                SiteCount {
                                    side: x.side.clone(),
                                    blocks: x.blocks.hi,
                                    bytes: x.bytes.hi,
                                    label: x.label.clone(),
                                },
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (id.clone(), CellRun { counts, sites, clock: (0, 0) })
        })
        .collect()
}

/// The suite's size, for `gate --list`.
pub fn describe(cells: &[GateCell]) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for c in cells {
        *by.entry(&c.id.dataset).or_default() += 1;
    }
    let parts: Vec<String> = by.iter().map(|(d, n)| format!("{d} {}", thousands(*n as u64))).collect();
    format!("{} cells: {}", cells.len(), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(allocs: u64, site_blocks: u64) -> CellRun {
        let mut counts = Counts::new();
        counts.insert("decode.allocs".into(), Count { value: allocs, per: 100 });
        let mut sites = BTreeMap::new();
        sites.insert(
            "aa".into(),
            SiteCount {
                side: "client".into(),
                blocks: site_blocks,
                bytes: site_blocks * 8,
                label: "zap::decode".into(),
            },
        );
        CellRun { counts, sites, clock: (0, 0) }
    }

    fn id() -> CellId {
        CellId { dataset: "alloc-profile".into(), unit: "zap-p0".into() }
    }

    /// Every codec, every transport stack but the raw-TCP floor (it
    /// decodes nothing), and each workload query on its own.
    #[test]
    fn the_suite_covers_every_codec_transport_and_query() {
        use registry::{Codec, Transport};
        let cells = suite(&crate::default_root()).unwrap();
        let units = |d: &str| -> Vec<String> {
            cells.iter().filter(|c| c.id.dataset == d).map(|c| c.id.unit.clone()).collect()
        };
        let (profile, transport) = (units("alloc-profile"), units("transport-alloc"));
        for c in Codec::ALL {
            assert!(profile.contains(&format!("{}-p0", c.name())), "alloc-profile gates no {}", c.name());
        }
        for t in Transport::ALL.iter().filter(|t| **t != Transport::RawTcp) {
            assert!(transport.contains(&format!("{}-p0", t.name())), "transport-alloc gates no {}", t.name());
        }
        let server = cells.iter().find(|c| c.id.dataset == "server-heap-growth").expect("a server cell");
        let workloads = server.planned.cell.params["workloads"].as_array().unwrap().clone();
        for (q, _) in records::server::QUERIES {
            assert!(workloads.iter().any(|w| w == q), "the server's gate cell does not run {q} alone");
        }
        // Every cell is counted by the dhat build.
        assert!(cells.iter().all(|c| c.planned.variant == "dhat"));
    }

    #[test]
    fn any_change_fails_and_names_the_site() {
        let base = combine(Header::default(), &[BTreeMap::from([(id(), run(100, 100))])]);
        assert!(verdict(&base, &BTreeMap::from([(id(), run(100, 100))])).is_empty());
        for allocs in [99, 101] {
            let ch = verdict(&base, &BTreeMap::from([(id(), run(allocs, 100 + allocs - 100))]));
            assert_eq!(ch.len(), 1, "{allocs}");
            let text = render_changes(&ch);
            assert!(text.contains(&format!("decode.allocs          100 → {allocs}")), "{text}");
            assert!(text.contains("[client] blocks 100 →"), "{text}");
            assert!(text.contains("zap::decode"), "{text}");
        }
    }

    #[test]
    fn a_clock_driven_allocation_moves_a_count_by_no_more_than_it_holds() {
        let base = combine(Header::default(), &[BTreeMap::from([(id(), run(100, 100))])]);
        let ticked = |allocs: u64, clock: (u64, u64)| {
            let mut r = run(allocs, 100);
            r.clock = clock;
            BTreeMap::from([(id(), r)])
        };
        // One more Date render than the bless saw: within the two the run holds.
        assert!(verdict(&base, &ticked(101, (2, 58))).is_empty());
        assert!(verdict(&base, &ticked(99, (1, 29))).is_empty());
        // Beyond them, or without any, the change is real.
        assert_eq!(verdict(&base, &ticked(103, (2, 58))).len(), 1);
        assert_eq!(verdict(&base, &ticked(101, (0, 0))).len(), 1);
        assert!(within_clock("bytes", 4_132_472, 4_132_501, (2, 58)));
        assert!(!within_clock("bytes", 4_132_472, 4_132_601, (2, 58)));
    }

    #[test]
    fn a_varying_count_is_bounded_against_gross_change_only() {
        let runs: Vec<Measured> = [100, 103, 101].map(|a| BTreeMap::from([(id(), run(a, a))])).into();
        let base = combine(Header::default(), &runs);
        assert_eq!(base.counts[&id()]["decode.allocs"], Range { lo: 100, hi: 103 });
        // Observed 100..103, accepted 50..206.
        for ok in [50, 102, 180, 206] {
            assert!(verdict(&base, &BTreeMap::from([(id(), run(ok, 100))])).is_empty(), "{ok}");
        }
        for bad in [49, 207] {
            assert_eq!(verdict(&base, &BTreeMap::from([(id(), run(bad, bad))])).len(), 1, "{bad}");
        }
        assert!(varies(&runs, &id()));
    }

    #[test]
    fn in_a_varying_cell_an_exact_site_is_gated_on_its_own() {
        let with_engine = |a: u64, engine: u64| {
            let mut r = run(a, a);
            r.sites.insert(
                "bb".into(),
                SiteCount {
                    side: "other".into(),
                    blocks: engine,
                    bytes: engine * 100,
                    label: "datastore::scan".into(),
                },
            );
            r
        };
        let runs: Vec<Measured> = [100, 110].map(|a| BTreeMap::from([(id(), with_engine(a, 40))])).into();
        let base = combine(Header::default(), &runs);
        assert!(verdict(&base, &BTreeMap::from([(id(), with_engine(105, 40))])).is_empty());
        let ch = verdict(&base, &BTreeMap::from([(id(), with_engine(105, 41))]));
        assert_eq!(ch.len(), 1);
        let text = render_changes(&ch);
        assert!(text.contains("sites exact in every bless run moved") && text.contains("datastore::scan"), "{text}");
    }

    #[test]
    fn a_bless_keeps_the_variation_an_earlier_bless_saw() {
        let of = |values: &[u64]| {
            let runs: Vec<Measured> = values.iter().map(|&a| BTreeMap::from([(id(), run(a, a))])).collect();
            combine(Header::default(), &runs)
        };
        let old = of(&[100, 164]);
        let mut agreed = of(&[100, 100, 100]);
        keep_known_variation(&old, &mut agreed);
        assert_eq!(agreed.counts[&id()]["decode.allocs"], Range { lo: 100, hi: 164 });
        // Far outside what the old range accepts: a real change, not variation.
        let mut moved = of(&[900, 900]);
        keep_known_variation(&old, &mut moved);
        assert_eq!(moved.counts[&id()]["decode.allocs"], Range::exact(900));
        // An exact count stays exact.
        let mut exact = of(&[100]);
        keep_known_variation(&of(&[100]), &mut exact);
        assert!(exact.counts[&id()]["decode.allocs"].is_exact());
    }

    #[test]
    fn a_cell_missing_from_either_side_is_a_change() {
        let base = combine(Header::default(), &[BTreeMap::from([(id(), run(1, 40))])]);
        let ch = verdict(&base, &Measured::new());
        assert_eq!(ch[0].counts[0].after, None);
        let ch = verdict(&Baseline::default(), &BTreeMap::from([(id(), run(1, 40))]));
        assert!(render_changes(&ch).contains("(not in the baseline) → 1"));
    }
}
