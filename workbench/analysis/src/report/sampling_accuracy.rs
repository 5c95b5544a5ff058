//! sampling-accuracy: how wrong a sampled heap profile is. Each profile
//! jemalloc sampled (one process per interval and seed) is held against the
//! exact one of the same cell (the dhat build's trace), site by site, with
//! both traces' stacks folded and matched as `trace top` matches them.
//!
//! Two truths, because jemalloc and dhat count differently even where
//! jemalloc samples every allocation: jemalloc counts usable bytes (a
//! 24-byte request is its 32-byte class) and charges a `realloc` the new
//! block's whole size at the realloc's stack, where dhat-rs counts requested
//! bytes and charges a realloc's growth (the size delta) to the site that
//! first allocated the block. So the **sampler** is judged against the same
//! build's profile at every allocation (interval 2^0: its counts exact, in
//! jemalloc's terms): the sampling error, the sites found, the top ten; and
//! the **error against dhat** says how far a sampled profile is from what
//! the exact tool prints, both differences included.
//!
//! The model the measurement is drawn beside: jemalloc samples a Poisson
//! process over bytes with mean interval `R`, so an allocation of usable
//! size `s` is sampled with `p = 1 - exp(-s/R)` and stands for `1/p` of
//! them; a site of `n` allocations of mean size `s` is estimated with a
//! relative standard deviation of `sqrt((1 - p) / (n p))`, and is found
//! (sampled at least once) with probability `1 - (1 - p)^n ≈ 1 - exp(-B/R)`
//! for `B` bytes: 95 % from `B = R ln 20 ≈ 3 R`.

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{write_both, Chart, Line};
use crate::report::tables::{col, row, source_of, stats_of, Table, TableCell};
use anyhow::{Context, Result};
use records::subject::SamplingAccuracy;
use registry::{CellId, Experiment};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use trace::{Side, Trace};

pub const REPORT: Report = Report::of::<SamplingAccuracy>(Experiment::SamplingAccuracy, table, Some(figure));
/// The same study over the transport stacks' round trips.
pub const TRANSPORTS: Report =
    Report::of::<SamplingAccuracy>(Experiment::SamplingAccuracyTransports, table, Some(figure));
/// The same study over the server's query mix, a server process per profile.
pub const SERVER: Report = Report::of::<SamplingAccuracy>(Experiment::SamplingAccuracyServer, table, Some(figure));

/// What the run's profiles covered, for captions: the subjects, their
/// workload, and what else than sampling moves a site between processes.
fn subjects(run: &Run) -> (&'static str, &'static str, &'static str) {
    match run.manifest.spec.experiment.over() {
        registry::Over::Transports => (
            "transport stacks",
            "transport-alloc's round trips",
            " A stack's sites also differ between processes (how much a read returns sets a buffer's growth), so \
             the largest missed mixes sampling with those differences.",
        ),
        registry::Over::Params => (
            "server",
            "the server's query mix from one client",
            " A server's sites also differ between processes (which thread runs a query, how far a buffer \
             grows), so the largest missed mixes sampling with those differences.",
        ),
        registry::Over::Codecs => ("codecs", "alloc-profile's workload", ""),
    }
}

/// jemalloc's default interval, 2^19 bytes.
pub const DEFAULT_LG: u32 = 19;

/// Site size classes by exact bytes: what the table's "found" columns and
/// the figure's lines split by.
pub const SIZES: [(&str, f64, f64); 3] =
    [("< 64 KiB", 0.0, 65536.0), ("64 KiB – 1 MiB", 65536.0, 1048576.0), ("≥ 1 MiB", 1048576.0, f64::INFINITY)];

fn size_class(bytes: f64) -> usize {
    SIZES.iter().position(|&(_, lo, hi)| bytes >= lo && bytes < hi).unwrap_or(0)
}

/// A site's identity across traces: the innermost [`DEPTH`] functions of
/// its folded stack above the subject's driver, and its side.
pub type Key = (String, Option<Side>);

/// Frames of a folded stack that name a site across the two builds. dhat
/// keeps 40 frames a stack, the allocator's among them, and jemalloc up to
/// 128: a deep stack's outer frames are in one profile and not the other,
/// so both are cut to the same innermost frames (sites that differ only
/// further out are merged alike on both sides).
pub const DEPTH: usize = 16;

/// The subject's driver (the `subject` binary's crate). It links the
/// probe, so each allocator build compiles it anew and inlines it its own
/// way: the same call showed `Dispatch::run ← run_with` in one build and
/// neither in the other. A site is named by its frames above the driver
/// (the codecs' and stacks' crates compile alike in every build); a site in
/// the driver itself by its innermost frame.
const DRIVER: &[&str] = &["subjects", "subject"];

fn key_of(stack: &[trace::Frame]) -> String {
    let in_driver = |f: &&trace::Frame| f.krate.as_deref().is_some_and(|k| DRIVER.contains(&k));
    let above: Vec<&str> =
        stack.iter().take_while(|f| !in_driver(f)).take(DEPTH).map(|f| f.function.as_str()).collect();
    match (above.is_empty(), stack.first()) {
        (true, Some(f)) => f.function.clone(),
        _ => above.join(" ← "),
    }
}

/// Bytes and allocations per site of one profile.
type Sites = BTreeMap<Key, (f64, f64)>;

/// A trace's [`Sites`]: what each allocated in all, and what each held at
/// the peak (none for a sampled profile that dumped at no peak).
fn sites(t: &Trace) -> (Sites, Option<Sites>) {
    let mut all: Sites = BTreeMap::new();
    let mut peak: Sites = BTreeMap::new();
    for s in &t.sites {
        let key = (key_of(&s.stack), s.side);
        let e = all.entry(key.clone()).or_default();
        e.0 += s.bytes as f64;
        e.1 += s.blocks as f64;
        if s.at_peak > 0 {
            let e = peak.entry(key).or_default();
            e.0 += s.at_peak as f64;
            e.1 += s.at_peak_blocks as f64;
        }
    }
    let has_peak = t.sampling.is_none_or(|s| s.has_peak());
    (all, has_peak.then_some(peak))
}

/// One site of one sampled profile beside its truth.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteError {
    /// The site (its stack above the driver, and its side).
    pub key: Key,
    /// Bytes and allocations: of the profile at every allocation (the same
    /// build, its counts exact), else dhat's.
    pub truth: (f64, f64),
    /// The sampled profile's estimated bytes (0: missed).
    pub estimated: f64,
}

impl SiteError {
    pub fn found(&self) -> bool {
        self.estimated > 0.0
    }

    /// Relative error of the site's bytes.
    pub fn sampling_error(&self) -> f64 {
        (self.estimated - self.truth.0) / self.truth.0.max(1.0)
    }

    /// The model's relative standard deviation at interval `r`, from the
    /// site's bytes and allocations.
    pub fn theory_sd(&self, r: f64) -> f64 {
        let (bytes, n) = self.truth;
        if n <= 0.0 {
            return 0.0;
        }
        let p = 1.0 - (-(bytes / n) / r).exp();
        ((1.0 - p) / (n * p)).sqrt()
    }
}

/// One sampled profile held against the exact one.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub codec: String,
    pub payload: u64,
    pub rep: u64,
    pub lg: u32,
    /// Whether the truth is the every-allocation profile (else dhat's: a
    /// spec without interval 0).
    pub against_every: bool,
    /// Every site of the truth, largest first.
    pub sites: Vec<SiteError>,
    /// Σ|estimated − dhat's| over the sites of either, ÷ Σ dhat's.
    pub error: f64,
    /// The same against the truth (none for the truth itself).
    pub sampling_error: Option<f64>,
    /// Of the truth's ten largest sites, the share among the sampled
    /// profile's ten largest.
    pub top10: f64,
    /// What is live at the peak: the whole-profile error of the sampled
    /// profile's last high-water dump against the truth's (the every-
    /// allocation profile's own dump, else dhat's peak); none without a dump.
    pub peak_error: Option<f64>,
    /// The same against dhat's live bytes at its own peak.
    pub peak_vs_dhat: Option<f64>,
}

/// Σ|estimated − truth| over the sites of either, ÷ Σ truth.
fn whole_error(truth: &Sites, est: &Sites) -> f64 {
    let mut diff = 0.0;
    for (k, t) in truth {
        diff += (est.get(k).map_or(0.0, |e| e.0) - t.0).abs();
    }
    for (k, e) in est {
        if !truth.contains_key(k) {
            diff += e.0;
        }
    }
    diff / truth.values().map(|t| t.0).sum::<f64>().max(1.0)
}

fn top10(truth: &Sites, est: &Sites) -> f64 {
    let top = |m: &Sites| -> Vec<Key> {
        let mut v: Vec<(&Key, f64)> = m.iter().map(|(k, b)| (k, b.0)).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v.into_iter().take(10).map(|(k, _)| k.clone()).collect()
    };
    let (t, e) = (top(truth), top(est));
    if t.is_empty() {
        return 1.0;
    }
    t.iter().filter(|k| e.contains(k)).count() as f64 / t.len() as f64
}

/// Every sampled profile of a run against its cell's exact trace.
pub fn compare(run: &Run) -> Result<Vec<Profile>> {
    let dir = run.traces()?;
    let load = |name: &str| -> Result<(Sites, Option<Sites>)> {
        let path = dir.join(name);
        Ok(sites(&Trace::load(&path).with_context(|| format!("the sampling-accuracy profile {}", path.display()))?))
    };
    // (codec, payload, rep, lg) → trace file, of the sampled profiles.
    let mut sampled: BTreeMap<(String, u64, u64, u32), String> = BTreeMap::new();
    for r in run.each::<SamplingAccuracy>() {
        let r = r?;
        if let (Some(lg), Some(trace)) = (r.record.lg_sample, r.record.trace) {
            sampled.insert((r.cell.codec().to_string(), r.cell.payload(), r.cell.rep, lg), trace.to_string());
        }
    }
    let mut exact: BTreeMap<(String, u64), (Sites, Option<Sites>)> = BTreeMap::new();
    let mut every: BTreeMap<(String, u64, u64), (Sites, Option<Sites>)> = BTreeMap::new();
    let mut out = Vec::new();
    for ((codec, payload, rep, lg), file) in &sampled {
        let cell = (codec.clone(), *payload);
        if !exact.contains_key(&cell) {
            let id = match run.manifest.spec.experiment.over() {
                registry::Over::Params => {
                    CellId::Server { experiment: run.manifest.spec.experiment, variant: "dhat".into(), rep: 0 }
                }
                _ => CellId::subject(codec, *payload, "dhat", 0),
            };
            let name = id.trace_file("dhat.json");
            exact.insert(cell.clone(), load(&name)?);
        }
        let usable = match sampled.get(&(codec.clone(), *payload, *rep, 0)) {
            Some(f) => {
                let key = (codec.clone(), *payload, *rep);
                if !every.contains_key(&key) {
                    every.insert(key.clone(), load(f)?);
                }
                Some(&every[&key])
            }
            None => None,
        };
        let (dhat, dhat_peak) = &exact[&cell];
        let truth = usable.map_or(dhat, |u| &u.0);
        let (est, est_peak) = load(file)?;
        let truth_peak = usable.and_then(|u| u.1.as_ref()).or(dhat_peak.as_ref());
        let peak_error = match (&est_peak, truth_peak) {
            (Some(e), Some(t)) if usable.is_none() || *lg > 0 => Some(whole_error(t, e)),
            _ => None,
        };
        let peak_vs_dhat = est_peak.as_ref().zip(dhat_peak.as_ref()).map(|(e, d)| whole_error(d, e));
        let mut order: Vec<(&Key, &(f64, f64))> = truth.iter().collect();
        order.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then_with(|| a.0.cmp(b.0)));
        let sites = order
            .into_iter()
            .map(|(k, &t)| SiteError { key: k.clone(), truth: t, estimated: est.get(k).map_or(0.0, |e| e.0) })
            .collect();
        out.push(Profile {
            codec: codec.clone(),
            payload: *payload,
            rep: *rep,
            lg: *lg,
            against_every: usable.is_some(),
            sites,
            error: whole_error(dhat, &est),
            sampling_error: (usable.is_none() || *lg > 0).then(|| whole_error(truth, &est)),
            top10: top10(truth, &est),
            peak_error,
            peak_vs_dhat,
        });
    }
    Ok(out)
}

/// The bytes from which the model finds a site nineteen times in twenty at
/// interval 2^`lg`: `R ln 20` (a site of B bytes is missed with e^(−B/R)).
pub fn found_95(lg: u32) -> f64 {
    if lg == 0 {
        return 1.0;
    }
    (1u64 << lg) as f64 * 20f64.ln()
}

fn interval_label(lg: u32) -> String {
    let b = fmt::bytes((1u64 << lg) as f64);
    match lg {
        0 => "1 B (every allocation)".into(),
        DEFAULT_LG => format!("{b} (default)"),
        _ => b,
    }
}

fn pct(v: f64) -> String {
    format!("{:.1} %", 100.0 * v)
}

fn ranged(v: &[f64]) -> TableCell {
    match stats_of(v) {
        Some((m, lo, hi)) => TableCell::ranged(pct(m), pct(lo), pct(hi)),
        None => crate::report::tables::dash().into(),
    }
}

pub fn table(run: &Run) -> Result<Table> {
    let profiles = compare(run)?;
    let mut by_lg: BTreeMap<u32, Vec<&Profile>> = BTreeMap::new();
    for p in &profiles {
        by_lg.entry(p.lg).or_default().push(p);
    }
    // The columns at the peak where some process dumped at one (the server's
    // profiles are not asked to): a run without any shows none.
    let peaks = profiles.iter().any(|p| p.peak_vs_dhat.is_some());
    let mut rows = Vec::new();
    for (&lg, ps) in &by_lg {
        let mut found = [(0usize, 0usize); 3];
        for s in ps.iter().flat_map(|p| &p.sites) {
            let c = &mut found[size_class(s.truth.0)];
            c.1 += 1;
            c.0 += s.found() as usize;
        }
        let found: Vec<TableCell> = found
            .iter()
            .map(|&(f, n)| if n == 0 { crate::report::tables::dash().into() } else { pct(f as f64 / n as f64).into() })
            .collect();
        // Per site of a cell (over its seeds): its bytes and whether every
        // seed found it; the largest site some seed missed.
        let mut seen: BTreeMap<(&str, u64, &Key), (f64, bool)> = BTreeMap::new();
        for p in ps {
            for s in &p.sites {
                let e = seen.entry((p.codec.as_str(), p.payload, &s.key)).or_insert((s.truth.0, true));
                e.1 &= s.found();
            }
        }
        let missed = seen
            .values()
            .filter(|(_, always)| !always)
            .map(|(b, _)| *b)
            .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))));
        let errors: Vec<f64> = ps.iter().map(|p| p.error).collect();
        let sampling: Vec<f64> = ps.iter().filter_map(|p| p.sampling_error).collect();
        let top: Vec<f64> = ps.iter().map(|p| p.top10).collect();
        // Keyed by log2 and by bytes, as the paper's macros find a row.
        let mut cells = row![
            TableCell::keyed(lg.to_string(), lg),
            TableCell::keyed(interval_label(lg), 1u64 << lg),
            fmt::count(ps.len() as f64)
        ];
        cells.push(ranged(&sampling));
        cells.extend(found);
        cells.push(ranged(&top));
        cells.push(missed.map_or_else(|| crate::report::tables::dash().into(), |b| fmt::bytes(b).into()));
        cells.push(fmt::bytes(found_95(lg)).into());
        cells.push(ranged(&errors));
        if peaks {
            let peak: Vec<f64> = ps.iter().filter_map(|p| p.peak_error).collect();
            let peak_dhat: Vec<f64> = ps.iter().filter_map(|p| p.peak_vs_dhat).collect();
            cells.push(ranged(&peak));
            cells.push(ranged(&peak_dhat));
        }
        rows.push(cells);
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let seeds = profiles.iter().map(|p| p.rep).max().map_or(0, |r| r + 1);
    let (what, workload, moves) = subjects(run);
    let scope = match run.manifest.spec.experiment.over() {
        registry::Over::Params => {
            let p: records::server::sampling_accuracy::Params =
                registry::read_params(run.manifest.spec.experiment, &s.params)?;
            format!(
                "{seeds} seeds, each a {what} process of its own), each of {workload} ({} rounds of the three \
                 queries on {} rows)",
                fmt::thousands(p.rounds),
                fmt::thousands(p.rows)
            )
        }
        _ => format!(
            "{} {what} × payloads × {seeds} seeds, each a process of its own), each of {workload} ({} messages \
             after {} warm-up)",
            run.manifest.spec.codecs.len(),
            fmt::thousands(s.messages),
            s.warmup,
        ),
    };
    Ok(Table {
        name: run.manifest.spec.experiment.name(),
        caption: format!(
            "jemalloc's sampled heap profile against the exact one (dhat), per mean sampling interval: {} \
             profiles per interval ({scope}; median [min, max] over the profiles.",
            by_lg.values().next().map_or(0, Vec::len),
        ),
        method: format!(
            "Sampling error: Σ|estimated − true| over \
             the sites ÷ the true bytes, the truth being the same build's profile at every allocation (its counts \
             exact in jemalloc's terms); found: the share of its sites (by their bytes) the profile holds at all; \
             top 10: the share of its ten largest sites among the profile's ten largest; largest missed: the \
             largest site some seed missed, beside the size from which the model finds a site 19 times in 20 \
             (R ln 20). Error vs dhat: the same \
             sum against dhat's exact profile, which counts requested bytes (jemalloc: size classes) and charges \
             a realloc's growth to the block's first site (jemalloc: the new block to the realloc's stack).{moves}\
             {at_peak} Our own study: neither source paper samples.",
            at_peak = if peaks {
                " At peak: the same sum over what each site holds live at the peak, from the last of the dumps \
                 the process takes each time its resident anonymous memory (RssAnon) passes its maximum by 1/32 (polled every \
                 millisecond; jemalloc's own prof_gdump, which dumps at each new maximum of its active pages, \
                 deadlocks), against the every-allocation profile's own last dump; beside it, against dhat's \
                 live bytes at its byte peak, a moment the page peak need not match; over the profiles that \
                 dumped at all (a process that never grew past its start dumps nothing)."
            } else {
                ""
            },
        ),
        header: [
            "log2",
            col::INTERVAL,
            "Profiles",
            col::SAMPLING_ERROR,
            col::FOUND_SMALL,
            col::FOUND_MID,
            col::FOUND_LARGE,
            col::TOP_TEN,
            col::LARGEST_MISSED,
            col::MODEL_FOUND,
            col::ERROR_VS_DHAT,
        ]
        .into_iter()
        .chain(peaks.then_some([col::PEAK_ERROR, col::PEAK_VS_DHAT]).into_iter().flatten())
        .collect(),
        rows,
        source: source_of(run),
    })
}

/// Median |sampling error| of the sites of one size class at each interval,
/// measured and as the model expects it (a normal error's mean absolute
/// value, `sd √(2/π)`, capped at 100 %: a missed site's error).
pub fn error_by_interval(profiles: &[Profile]) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, (name, _, _)) in SIZES.iter().enumerate() {
        let mut measured: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        let mut theory: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for p in profiles.iter().filter(|p| p.lg > 0) {
            let r = (1u64 << p.lg) as f64;
            for s in p.sites.iter().filter(|s| size_class(s.truth.0) == i) {
                measured.entry(p.lg).or_default().push(s.sampling_error().abs());
                theory.entry(p.lg).or_default().push((s.theory_sd(r) * (2.0 / std::f64::consts::PI).sqrt()).min(1.0));
            }
        }
        let points = |m: &BTreeMap<u32, Vec<f64>>| -> Vec<(f64, f64)> {
            m.iter().filter_map(|(&lg, v)| Some(((1u64 << lg) as f64, 100.0 * stats_of(v)?.0))).collect()
        };
        for (label, m) in [(format!("sites {name}"), &measured), (format!("model, sites {name}"), &theory)] {
            let pts = points(m);
            if !pts.is_empty() {
                lines.push(Line { label, points: pts });
            }
        }
    }
    lines
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let lines = error_by_interval(&compare(run)?);
    let xs: Vec<f64> = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
    let (x0, x1) = xs.iter().fold((f64::INFINITY, 1.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    // Each measured interval named above its points: the axis's own ticks
    // fall between them.
    let mut intervals: Vec<f64> = xs.clone();
    intervals.sort_by(f64::total_cmp);
    intervals.dedup();
    let marks: Vec<(f64, String)> = intervals.iter().map(|&x| (x, fmt::bytes(x))).collect();
    let chart = Chart {
        title: format!("Sampled heap profile: median site error against interval ({})", run.manifest.run_id),
        x_desc: "mean sampling interval (log)",
        y_desc: "median |error| of a site's bytes, % (log)",
        x_log: true,
        x_range: (x0.min(x1) * 0.7, x1 * 1.4),
        y_log_floor: true,
        // Room above 100 % (a missed site) for the intervals' names.
        y_range: (0.05, 500.0),
        x_fmt: &|v| fmt::bytes(*v),
        y_fmt: &|v| format!("{v:.1}"),
        x_marks: &marks,
    };
    write_both(dir, run.manifest.spec.experiment.name(), &lines, &chart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{run, subject};

    /// A dhat-form trace of sites `(function, bytes, blocks)`, each under `main`.
    fn trace(sites: &[(&str, u64, u64)]) -> String {
        let mut ftbl = vec!["[root]".to_string(), "0x1: main (subject/src/main.rs:1:1)".to_string()];
        let mut pps = Vec::new();
        for (i, (f, b, n)) in sites.iter().enumerate() {
            ftbl.push(format!("0x{:x}: subjects::{f} (subject/src/x.rs:{i}:1)", i + 16));
            pps.push(serde_json::json!({"tb": b, "tbk": n, "tl": 0, "mb": 0, "mbk": 0, "gb": 0, "gbk": 0, "eb": 0, "ebk": 0, "fs": [ftbl.len() - 1, 1]}));
        }
        serde_json::json!({"dhatFileVersion": 2, "mode": "rust-heap", "verb": "Allocated", "bklt": true, "bkacc": false,
            "tu": "µs", "Mtu": "s", "tuth": 10, "cmd": "subject", "pid": 1, "te": 1, "pps": pps, "ftbl": ftbl})
        .to_string()
    }

    #[test]
    fn a_site_is_named_above_the_driver_whose_inlining_differs_by_build() {
        // The same site: the driver's frames differ (one build inlined
        // `Dispatch::run`), the codec's do not.
        let frames = |fs: &[&str]| -> Trace {
            let mut ftbl = vec!["[root]".to_string()];
            for (i, f) in fs.iter().enumerate() {
                ftbl.push(format!("0x{:x}: {f} (x/src/a.rs:{i}:1)", i + 1));
            }
            let text = serde_json::json!({"dhatFileVersion": 2, "mode": "rust-heap", "cmd": "subject", "te": 1,
                "pps": [{"tb": 100, "tbk": 1, "fs": (1..=fs.len()).collect::<Vec<_>>()}], "ftbl": ftbl})
            .to_string();
            Trace::parse(Path::new("t.json"), &text).unwrap()
        };
        let a = frames(&["stacks::codecs::zap::encode", "subjects::experiments::run", "subject::main"]);
        let b = frames(&[
            "stacks::codecs::zap::encode",
            "<subjects::experiments::Dispatch as stacks::codecs::WithCodec>::run",
            "subjects::experiments::run",
            "subject::main",
        ]);
        assert_eq!(sites(&a), sites(&b));
        assert_eq!(sites(&a).0.keys().next().unwrap().0, "stacks::codecs::zap::encode");
    }

    fn record(lg: Option<u32>, trace: &str) -> SamplingAccuracy {
        SamplingAccuracy {
            lg_sample: lg,
            allocs: Some(1.0),
            bytes: Some(1.0),
            live_bytes: Some(0.0),
            stacks: lg.map(|_| 1),
            trace: Some(trace.into()),
            elapsed_s: 0.1,
        }
    }

    #[test]
    fn a_sampled_profile_is_held_against_the_every_allocation_profile_and_dhat() {
        let dir = std::env::temp_dir().join(format!("wb-sampling-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.join("traces").join(name), text).unwrap();
        // dhat: requested bytes. Every allocation: usable bytes (24 → 32).
        write("zap-p0-dhat-r0.dhat.json", trace(&[("big", 2_000_000, 10), ("small", 2400, 100)]));
        write("zap-p0-jemalloc-prof-r0-lg0.sampled.json", trace(&[("big", 2_000_000, 10), ("small", 3200, 100)]));
        // Sampled at 2^12: the big site 10 % high, the small one missed,
        // and a site the exact profile lacks.
        write("zap-p0-jemalloc-prof-r0-lg12.sampled.json", trace(&[("big", 2_200_000, 11), ("other", 1000, 1)]));
        let rows = vec![
            (subject("zap", 0, "dhat", 0), record(None, "zap-p0-dhat-r0.dhat.json")),
            (subject("zap", 0, "jemalloc-prof", 0), record(Some(0), "zap-p0-jemalloc-prof-r0-lg0.sampled.json")),
            (subject("zap", 0, "jemalloc-prof", 0), record(Some(12), "zap-p0-jemalloc-prof-r0-lg12.sampled.json")),
        ];
        let mut r = run("sampling-accuracy", None, &rows);
        r.dir = dir.clone();
        let ps = compare(&r).unwrap();
        assert_eq!(ps.len(), 2);
        let every = ps.iter().find(|p| p.lg == 0).unwrap();
        assert!((every.error - 800.0 / 2_002_400.0).abs() < 1e-12, "the size-class slack alone: {}", every.error);
        assert_eq!(every.sampling_error, None);
        let p = ps.iter().find(|p| p.lg == 12).unwrap();
        assert_eq!(p.sites.len(), 2);
        assert!(p.against_every);
        assert_eq!(p.sites[0].truth, (2_000_000.0, 10.0));
        assert!((p.error - (200_000.0 + 2400.0 + 1000.0) / 2_002_400.0).abs() < 1e-12, "against dhat");
        assert!((p.sites[0].sampling_error() - 0.1).abs() < 1e-12);
        assert!(!p.sites[1].found() && (p.sites[1].sampling_error() + 1.0).abs() < 1e-12, "missed: −100 %");
        let sampling = (200_000.0 + 3200.0 + 1000.0) / 2_003_200.0;
        assert!((p.sampling_error.unwrap() - sampling).abs() < 1e-12);
        assert_eq!(p.top10, 0.5, "one of the two exact sites is among the sampled ones");
        // The model: a 200 KB site of 10 allocations at 4 KiB is all but certain.
        assert!(p.sites[0].theory_sd(4096.0) < 1e-10);

        let t = table(&r).unwrap();
        assert_eq!(crate::report::fixture::cell(&t, &["12"], col::FOUND_LARGE), pct(1.0));
        assert_eq!(crate::report::fixture::cell(&t, &["12"], col::FOUND_SMALL), pct(0.0));
        assert_eq!(crate::report::fixture::cell(&t, &["12"], col::LARGEST_MISSED), fmt::bytes(3200.0));
        assert_eq!(crate::report::fixture::cell(&t, &["12"], col::MODEL_FOUND), fmt::bytes(4096.0 * 20f64.ln()));
        assert_eq!(crate::report::fixture::cell(&t, &["0"], col::LARGEST_MISSED), crate::report::tables::dash());
        let lines = error_by_interval(&ps);
        assert!(
            lines.iter().any(|l| l.label == "sites ≥ 1 MiB" && l.points == vec![(4096.0, 10.0)]),
            "{:?}",
            lines.iter().map(|l| (&l.label, &l.points)).collect::<Vec<_>>()
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A trace of sites `(function, bytes, blocks, bytes at the peak)`;
    /// sampled at 2^`lg` with `dumps` high-water dumps where given.
    fn peaked(sites: &[(&str, u64, u64, u64)], sampled: Option<(u32, Option<u64>)>) -> String {
        let plain: Vec<(&str, u64, u64)> = sites.iter().map(|&(f, b, n, _)| (f, b, n)).collect();
        let mut t: serde_json::Value = serde_json::from_str(&trace(&plain)).unwrap();
        for (pp, &(.., gb)) in t["pps"].as_array_mut().unwrap().iter_mut().zip(sites) {
            pp["gb"] = gb.into();
            pp["gbk"] = u64::from(gb > 0).into();
        }
        if let Some((lg, dumps)) = sampled {
            t["sampling"] = serde_json::json!({"lg_sample": lg, "interval": 1u64 << lg, "peak_dumps": dumps});
        }
        t.to_string()
    }

    #[test]
    fn what_is_live_at_the_peak_is_held_against_the_last_high_water_dump_and_dhat() {
        let dir = std::env::temp_dir().join(format!("wb-sampling-peak-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.join("traces").join(name), text).unwrap();
        write("zap-p0-dhat-r0.dhat.json", peaked(&[("big", 2_000_000, 10, 1000), ("small", 2400, 100, 0)], None));
        // The every-allocation profile's last dump: another moment than dhat's peak.
        write(
            "zap-p0-jemalloc-prof-r0-lg0.sampled.json",
            peaked(&[("big", 2_000_000, 10, 800), ("small", 3200, 100, 200)], Some((0, Some(3)))),
        );
        write(
            "zap-p0-jemalloc-prof-r0-lg12.sampled.json",
            peaked(&[("big", 2_200_000, 11, 1000), ("small", 3200, 100, 0)], Some((12, Some(2)))),
        );
        // Dumped at no peak: no error at the peak, not a 100 % one.
        write(
            "zap-p0-jemalloc-prof-r0-lg16.sampled.json",
            peaked(&[("big", 2_000_000, 10, 0), ("small", 3200, 100, 0)], Some((16, None))),
        );
        let rows = vec![
            (subject("zap", 0, "dhat", 0), record(None, "zap-p0-dhat-r0.dhat.json")),
            (subject("zap", 0, "jemalloc-prof", 0), record(Some(0), "zap-p0-jemalloc-prof-r0-lg0.sampled.json")),
            (subject("zap", 0, "jemalloc-prof", 0), record(Some(12), "zap-p0-jemalloc-prof-r0-lg12.sampled.json")),
            (subject("zap", 0, "jemalloc-prof", 0), record(Some(16), "zap-p0-jemalloc-prof-r0-lg16.sampled.json")),
        ];
        let mut r = run("sampling-accuracy", None, &rows);
        r.dir = dir.clone();
        let ps = compare(&r).unwrap();
        let at = |lg: u32| ps.iter().find(|p| p.lg == lg).unwrap();
        assert_eq!(at(0).peak_error, None, "the truth itself");
        assert!((at(0).peak_vs_dhat.unwrap() - 400.0 / 1000.0).abs() < 1e-12);
        // Against the every-allocation dump (800 + 200): |1000 − 800| + |0 − 200|.
        assert!((at(12).peak_error.unwrap() - 400.0 / 1000.0).abs() < 1e-12);
        assert_eq!(at(12).peak_vs_dhat, Some(0.0));
        assert_eq!((at(16).peak_error, at(16).peak_vs_dhat), (None, None));
        let t = table(&r).unwrap();
        assert_eq!(crate::report::fixture::cell(&t, &["12"], col::PEAK_ERROR), pct(0.4));
        assert_eq!(crate::report::fixture::cell(&t, &["16"], col::PEAK_VS_DHAT), crate::report::tables::dash());
        std::fs::remove_dir_all(&dir).ok();
    }
}
