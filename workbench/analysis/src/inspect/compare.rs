//! Comparing two runs of one experiment (`workbench compare A B`).
//!
//! Two kinds of figure, two rules, as the workbench measures them:
//! - Allocation counts and bytes of the dhat build are exact and repeat
//!   exactly, so any difference is a change: listed per cell, with the
//!   allocation sites that moved (from the cells' traces, [`::trace::diff`]).
//! - Timings vary, so they are compared like Go's benchstat: per cell the
//!   median with a 95% confidence interval (order statistics, no normality
//!   assumed), the change of the median, and a two-sided Mann–Whitney U test
//!   (statrs); a change with p ≥ α prints as `~`. A cell with more than
//!   [`BATCHES`] timing records (a latency run holds 200,000 round trips) is
//!   first reduced to the medians of that many contiguous batches: successive
//!   round trips are not independent, and a test over all of them would call
//!   any difference significant.
//!
//! Cells are matched by the key columns the records carry (codec, payload,
//! variant, and the experiment's own); which columns are keys, exact counts
//! or timings is said once, beside each record type ([`records::Compared`]).

use crate::data::dataset::Run;
use ::trace::{self, Trace};
use anyhow::{bail, Context, Result};
use polars::prelude::{DataFrame, DataType, IdxCa, IdxSize, Series};
use statrs::stats_tests::mannwhitneyu::{mannwhitneyu, MannWhitneyUMethod};
use statrs::stats_tests::Alternative;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Key columns a cell may have at most: the cell's own and its record
/// type's ([`records::Columns`]); a record type with more is refused.
const MAX_KEYS: usize = 8;

/// The columns a comparison of `experiment`'s runs reads, from its record
/// type ([`registry::Experiment::columns`]): keys (the cell's own first),
/// exact counts, timings.
fn columns_of(experiment: &str) -> Result<(Vec<&'static str>, records::Columns)> {
    let e: registry::Experiment = experiment.parse()?;
    let c = e.columns();
    let keys: Vec<&'static str> = records::Columns::CELL_KEYS.iter().chain(c.keys).copied().collect();
    if keys.len() > MAX_KEYS {
        bail!("{experiment}: {} key columns, more than a comparison holds ({MAX_KEYS})", keys.len());
    }
    Ok((keys, c))
}

/// Timing samples per cell at most; more records are batched (see above).
pub const BATCHES: usize = 50;

/// A sample's median and its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Summary {
    /// The CI is distribution-free: the order statistics at ranks
    /// n/2 ∓ 1.96·√n/2 (the binomial's normal approximation); with fewer than
    /// six samples it cannot reach 95%, so it is the whole range.
    pub fn of(xs: &[f64]) -> Summary {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let (lo, hi) = if n < 6 {
            (v[0], v[n - 1])
        } else {
            let half = 1.96 * (n as f64).sqrt() / 2.0;
            let j = ((n as f64 / 2.0 - half).floor() as usize).min(n - 1);
            let k = ((n as f64 / 2.0 + half).ceil() as usize).min(n - 1);
            (v[j], v[k])
        };
        Summary { n, median, lo, hi }
    }
}

/// One cell's exact count in A and B (sum over records, and records).
#[derive(Debug, Clone, PartialEq)]
pub struct CountRow {
    pub cell: String,
    pub column: String,
    pub a: (u128, usize),
    pub b: (u128, usize),
    /// The cell's trace name (`codec-pN-dhat-r0`), for the site diff.
    pub trace: String,
}

impl CountRow {
    pub fn mean_a(&self) -> f64 {
        self.a.0 as f64 / self.a.1.max(1) as f64
    }
    pub fn mean_b(&self) -> f64 {
        self.b.0 as f64 / self.b.1.max(1) as f64
    }
    /// Exact: the per-record means differ (compared as fractions).
    pub fn changed(&self) -> bool {
        self.a.0 * self.b.1 as u128 != self.b.0 * self.a.1 as u128
    }
}

/// One cell's timing in A and B.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeRow {
    pub cell: String,
    pub column: String,
    pub a: Summary,
    pub b: Summary,
    /// Two-sided Mann–Whitney U p-value.
    pub p: f64,
}

impl TimeRow {
    /// Relative change of the median, B against A.
    pub fn delta(&self) -> f64 {
        self.b.median / self.a.median - 1.0
    }
    pub fn significant(&self, alpha: f64) -> bool {
        self.p < alpha
    }
}

/// What `--fail-on` checks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailOn {
    /// Any change of an exact count.
    Allocs,
    /// A significant slowdown of a median by more than this fraction.
    Time(f64),
}

impl FailOn {
    pub fn parse(s: &str) -> Result<FailOn> {
        if s == "allocs" {
            return Ok(FailOn::Allocs);
        }
        if let Some(p) = s.strip_prefix("time:") {
            let v: f64 = p
                .trim_end_matches('%')
                .parse()
                .with_context(|| format!("--fail-on {s:?}: {p:?} is not a percentage"))?;
            return Ok(FailOn::Time(v / 100.0));
        }
        bail!("--fail-on {s:?}: use `allocs` or `time:N%`")
    }
}

/// The comparison of two runs.
#[derive(Debug)]
pub struct Comparison {
    pub experiment: String,
    pub a: String,
    pub b: String,
    pub alpha: f64,
    pub counts: Vec<CountRow>,
    pub times: Vec<TimeRow>,
    /// Per changed cell with traces in both runs: the sites that moved.
    pub sites: BTreeMap<String, Vec<trace::Delta>>,
    /// Those cells' traces (A, B), for the differential flame graph.
    pub traces: BTreeMap<String, (Trace, Trace)>,
    /// Notes on what could not be compared.
    pub notes: Vec<String>,
}

/// Compares run `b` against run `a`, which must be of the same experiment.
pub fn compare(a: &Run, b: &Run, alpha: f64) -> Result<Comparison> {
    if a.manifest.experiment != b.manifest.experiment {
        bail!(
            "{} is {} but {} is {}: compare runs of one experiment",
            a.dir.display(),
            a.manifest.experiment,
            b.dir.display(),
            b.manifest.experiment
        );
    }
    let mut notes = Vec::new();
    if a.manifest.scale != b.manifest.scale {
        notes.push(format!(
            "scales differ ({} vs {}): per-record means may not be comparable",
            a.manifest.scale, b.manifest.scale
        ));
    }
    for (m, name) in [(&a.manifest, "A"), (&b.manifest, "B")] {
        if m.git_dirty {
            notes.push(format!("{name} was measured on a dirty tree at {}", short_rev(&m.git_revision)));
        }
    }
    let (keys, cols) = columns_of(&a.manifest.experiment)?;
    let (ca, cb) = (cells(&a.records, &keys, &cols)?, cells(&b.records, &keys, &cols)?);
    let mut counts = Vec::new();
    let mut times = Vec::new();
    for (key, xa) in &ca {
        let Some(xb) = cb.get(key) else {
            notes.push(format!("{} is only in A", key.label));
            continue;
        };
        for col in cols.counts {
            if let (Some(va), Some(vb)) = (xa.counts.get(*col), xb.counts.get(*col)) {
                counts.push(CountRow {
                    cell: key.label.clone(),
                    column: col.to_string(),
                    a: *va,
                    b: *vb,
                    trace: key.trace.clone(),
                });
            }
        }
        for col in cols.times {
            if let (Some(sa), Some(sb)) = (xa.times.get(*col), xb.times.get(*col)) {
                if sa.is_empty() || sb.is_empty() {
                    continue;
                }
                let (_, p) = mannwhitneyu(sa, sb, MannWhitneyUMethod::Automatic, Alternative::TwoSided)
                    .map_err(|e| anyhow::anyhow!("Mann–Whitney U on {} {col}: {e}", key.label))?;
                times.push(TimeRow {
                    cell: key.label.clone(),
                    column: col.to_string(),
                    a: Summary::of(sa),
                    b: Summary::of(sb),
                    p,
                });
            }
        }
    }
    for key in cb.keys().filter(|k| !ca.contains_key(*k)) {
        notes.push(format!("{} is only in B", key.label));
    }
    let mut sites = BTreeMap::new();
    let mut traces = BTreeMap::new();
    for row in counts.iter().filter(|r| r.changed()) {
        if sites.contains_key(&row.cell) {
            continue;
        }
        let file = format!("{}.dhat.json", row.trace);
        let (pa, pb) = (a.traces()?.join(&file), b.traces()?.join(&file));
        if !(pa.exists() && pb.exists()) {
            continue;
        }
        match (Trace::load(&pa), Trace::load(&pb)) {
            (Ok(ta), Ok(tb)) => {
                sites.insert(row.cell.clone(), trace::diff(&ta, &tb));
                traces.insert(row.cell.clone(), (ta, tb));
            }
            (Err(e), _) | (_, Err(e)) => notes.push(format!("no site diff for {}: {e}", row.cell)),
        }
    }
    Ok(Comparison {
        experiment: a.manifest.experiment.clone(),
        a: describe(a),
        b: describe(b),
        alpha,
        counts,
        times,
        sites,
        traces,
        notes,
    })
}

impl Comparison {
    /// Failures under `rules`, one line each; empty = pass.
    pub fn failures(&self, rules: &[FailOn]) -> Vec<String> {
        let mut out = Vec::new();
        for rule in rules {
            match rule {
                FailOn::Allocs => {
                    out.extend(self.counts.iter().filter(|r| r.changed()).map(|r| {
                        format!("{} {}: {} → {} per record", r.cell, r.column, num(r.mean_a()), num(r.mean_b()))
                    }))
                }
                FailOn::Time(limit) => {
                    out.extend(self.times.iter().filter(|r| r.significant(self.alpha) && r.delta() > *limit).map(|r| {
                        format!(
                            "{} {}: {:+.1}% (p={:.3}), over {:.1}%",
                            r.cell,
                            r.column,
                            100.0 * r.delta(),
                            r.p,
                            100.0 * limit
                        )
                    }))
                }
            }
        }
        out
    }

    /// Markdown (the terminal prints the same text).
    pub fn to_markdown(&self) -> String {
        let mut s = format!("# {}: B against A\n\n- A: {}\n- B: {}\n", self.experiment, self.a, self.b);
        for n in &self.notes {
            s += &format!("- note: {n}\n");
        }
        let changed: Vec<&CountRow> = self.counts.iter().filter(|r| r.changed()).collect();
        s += &format!(
            "\n## Allocations (dhat build, exact)\n\n{} cell counts compared; {} changed.\n",
            self.counts.len(),
            changed.len()
        );
        if !changed.is_empty() {
            s += "\n| cell | count | A per record | B per record | change |\n|---|---|---:|---:|---:|\n";
            for r in &changed {
                s += &format!(
                    "| {} | {} | {} | {} | {} |\n",
                    r.cell,
                    r.column,
                    num(r.mean_a()),
                    num(r.mean_b()),
                    num_signed(r.mean_b() - r.mean_a())
                );
            }
        }
        for (cell, deltas) in &self.sites {
            s += &format!("\nSites that changed in {cell} (bytes, blocks; B − A):\n\n");
            for d in deltas.iter().take(8) {
                let m = d.site.meeting();
                let at = match m {
                    [] => "?".to_string(),
                    [one] => one.display(),
                    [first, .., last] => format!("{} ← … ← {}", first.display(), last.display()),
                };
                s += &format!(
                    "- {:+} B, {:+} blocks [{}]: {at}\n",
                    d.bytes(),
                    d.blocks(),
                    d.site.side.map_or("?", |x| x.name())
                );
            }
            if deltas.is_empty() {
                s += "- none: the traces' sites are equal (the change is outside the traced window)\n";
            }
        }
        s += &format!(
            "\n## Timings (median [95% CI], Mann–Whitney U, α = {})\n\n| cell | measure | A | B | change | p | n |\n|---|---|---:|---:|---:|---:|---:|\n",
            self.alpha
        );
        for r in &self.times {
            let change = if r.significant(self.alpha) { format!("{:+.1}%", 100.0 * r.delta()) } else { "~".into() };
            s += &format!(
                "| {} | {} | {} | {} | {change} | {:.3} | {}+{} |\n",
                r.cell,
                r.column,
                ci(&r.a),
                ci(&r.b),
                r.p,
                r.a.n,
                r.b.n
            );
        }
        if self.times.is_empty() {
            s += "| (no timing columns in this experiment) | | | | | | |\n";
        }
        s
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct CellKey {
    label: String,
    trace: String,
}

#[derive(Default)]
struct CellData {
    counts: BTreeMap<String, (u128, usize)>,
    times: BTreeMap<String, Vec<f64>>,
}

/// Loads the run in `dir` with the columns a comparison reads and no other.
pub fn load(dir: &Path) -> Result<Run> {
    let manifest = crate::data::dataset::load_run_manifest(dir)?;
    let (keys, c) = columns_of(&manifest.experiment)?;
    let mut columns: Vec<&str> = keys.iter().chain(c.counts).chain(c.times).copied().collect();
    columns.extend([records::columns::REPEAT, records::columns::REP]);
    if !columns.contains(&records::columns::VARIANT) {
        columns.push(records::columns::VARIANT);
    }
    crate::data::dataset::load_run_columns(dir, &columns)
}

/// Groups a run's records by cell: exact counts of the dhat rows, timing
/// samples of the others (the dhat build serialises allocation; it is not timed).
///
/// PERF (report time): a row's cell is found from small integer codes of
/// its key columns (each column holds a handful of distinct values), and
/// only a cell's first row is made into strings. Made into strings row by
/// row, the keys were 60 % of `workbench report`'s CPU: its comparison
/// pages read every run, and a full transport-alloc run holds 6 million
/// rows. polars' group-by took half of a comparison's time in encoding and
/// hashing the rows; runs of equal keys alone would not do either:
/// alloc-profile interleaves its phases row by row (4.8 million one-row
/// runs, 10 s a comparison).
fn cells(df: &DataFrame, key_names: &[&str], cols: &records::Columns) -> Result<BTreeMap<CellKey, CellData>> {
    let height = df.height();
    let mut out: BTreeMap<CellKey, CellData> = BTreeMap::new();
    if height == 0 {
        return Ok(out);
    }
    let names: Vec<String> = df.get_column_names().iter().map(|s| s.to_string()).collect();
    let has = |c: &str| names.iter().any(|n| n == c);
    let mut key_cols: Vec<(&str, Series)> = Vec::new();
    let mut codes: Vec<Vec<u32>> = Vec::new();
    for k in key_names.iter().filter(|k| has(k)) {
        let s = df.column(k)?.as_materialized_series().rechunk();
        codes.push(key_codes(&s).with_context(|| format!("key column {k}"))?);
        key_cols.push((k, s));
    }
    // Each row's cell, numbered in order of first appearance.
    let mut cell_of_row: Vec<u32> = Vec::with_capacity(height);
    let mut firsts: Vec<IdxSize> = Vec::new();
    let mut numbered: HashMap<[u32; MAX_KEYS], u32> = HashMap::new();
    let mut prev: Option<([u32; MAX_KEYS], u32)> = None;
    for r in 0..height {
        let mut key = [0u32; MAX_KEYS];
        for (slot, c) in key.iter_mut().zip(&codes) {
            *slot = c[r];
        }
        let cell = match prev {
            Some((k, cell)) if k == key => cell,
            _ => *numbered.entry(key).or_insert_with(|| {
                firsts.push(r as IdxSize);
                (firsts.len() - 1) as u32
            }),
        };
        prev = Some((key, cell));
        cell_of_row.push(cell);
    }
    let at_firsts = IdxCa::from_vec("firsts".into(), firsts.clone());
    let mut keys: Vec<(&str, Vec<Option<String>>)> = Vec::new();
    for (k, s) in &key_cols {
        let taken = s.take(&at_firsts)?.cast(&DataType::String)?;
        keys.push((k, taken.str()?.iter().map(|v| v.map(str::to_string)).collect()));
    }
    let get =
        |k: &str, j: usize| keys.iter().find(|(n, _)| *n == k).and_then(|(_, v)| v[j].clone()).unwrap_or_default();
    // The variant is a key column: one build a cell. Counts are read from
    // the builds that count exactly (dhat, events), timings from the others.
    let dhat: Vec<bool> =
        (0..firsts.len()).map(|j| crate::spec::variants::counts_exactly(&get(records::columns::VARIANT, j))).collect();
    // A record that stands for several identical ones (`repeat`) counts as many.
    let repeat = crate::report::tables::repeats(df)?;
    let reps: Vec<u64> = match df.column(records::columns::REP) {
        Ok(c) => c.cast(&DataType::UInt64)?.u64()?.iter().map(|r| r.unwrap_or(0)).collect(),
        Err(_) => vec![0; height],
    };
    let mut sums: Vec<Vec<(u128, usize)>> = Vec::new();
    for c in cols.counts.iter().filter(|c| has(c)) {
        let mut per_cell = vec![(0u128, 0usize); firsts.len()];
        let v = df.column(c)?.cast(&DataType::UInt64)?;
        for ((x, &cell), &k) in v.u64()?.iter().zip(&cell_of_row).zip(&repeat) {
            if let (Some(x), true) = (x, dhat[cell as usize]) {
                per_cell[cell as usize].0 += x as u128 * k as u128;
                per_cell[cell as usize].1 += k as usize;
            }
        }
        sums.push(per_cell);
    }
    let mut samples: Vec<Vec<Vec<f64>>> = Vec::new();
    for c in cols.times.iter().filter(|c| has(c)) {
        let mut per_cell: Vec<Vec<Timing>> = vec![Vec::new(); firsts.len()];
        let v = df.column(c)?.cast(&DataType::Float64)?;
        for (((x, &cell), &repeat), &rep) in v.f64()?.iter().zip(&cell_of_row).zip(&repeat).zip(&reps) {
            if let (Some(x), false) = (x, dhat[cell as usize]) {
                per_cell[cell as usize].push(Timing { x, repeat, rep });
            }
        }
        samples.push(per_cell.into_iter().map(timing_samples).collect());
    }
    for j in 0..firsts.len() {
        let label = keys
            .iter()
            .filter_map(|(k, v)| v[j].as_ref().map(|x| if *k == "payload" { format!("p{x}") } else { x.clone() }))
            .collect::<Vec<_>>()
            .join(" ");
        let payload = get("payload", j).parse().unwrap_or(0);
        let trace = registry::CellId::subject(&get("codec", j), payload, "dhat", 0).to_string();
        let data = out.entry(CellKey { label, trace }).or_default();
        for (c, per_cell) in cols.counts.iter().filter(|c| has(c)).zip(&sums) {
            let (sum, n) = per_cell[j];
            if n > 0 {
                let e = data.counts.entry(c.to_string()).or_default();
                e.0 += sum;
                e.1 += n;
            }
        }
        for (c, per_cell) in cols.times.iter().filter(|c| has(c)).zip(&mut samples) {
            if !per_cell[j].is_empty() {
                data.times.entry(c.to_string()).or_default().append(&mut per_cell[j]);
            }
        }
    }
    for d in out.values_mut() {
        for v in d.times.values_mut() {
            *v = batch_medians(v, BATCHES);
        }
    }
    Ok(out)
}

/// Each row's value of a key column as the index of that value among the
/// column's distinct values (a missing value is one of them).
fn key_codes(s: &Series) -> Result<Vec<u32>> {
    fn number<T: std::hash::Hash + Eq + Copy>(values: impl Iterator<Item = T>) -> Vec<u32> {
        let mut seen: HashMap<T, u32> = HashMap::new();
        let mut last: Option<(T, u32)> = None;
        values
            .map(|v| match last {
                Some((l, code)) if l == v => code,
                _ => {
                    let n = seen.len() as u32;
                    let code = *seen.entry(v).or_insert(n);
                    last = Some((v, code));
                    code
                }
            })
            .collect()
    }
    Ok(match s.dtype() {
        DataType::String => number(s.str()?.iter()),
        d if d.is_unsigned_integer() => number(s.cast(&DataType::UInt64)?.u64()?.iter()),
        d if d.is_signed_integer() => number(s.cast(&DataType::Int64)?.i64()?.iter()),
        _ => {
            let strings = s.cast(&DataType::String)?;
            number(strings.str()?.iter())
        }
    })
}

/// `v` itself if it has at most `k` values; else the medians of `k`
/// contiguous batches of (nearly) equal size.
pub fn batch_medians(v: &[f64], k: usize) -> Vec<f64> {
    if v.len() <= k {
        return v.to_vec();
    }
    (0..k).map(|i| Summary::of(&v[i * v.len() / k..(i + 1) * v.len() / k]).median).collect()
}

/// One timing record of a cell.
#[derive(Clone, Copy)]
struct Timing {
    x: f64,
    /// How many timings it stands for.
    repeat: u64,
    rep: u64,
}

/// A cell's timings as samples: each in the order measured, or, where its
/// records are a histogram (a record stands for `repeat` timings, sorted by
/// value: the latency experiments), each repetition's median, so that
/// repetitions, not slices of a sorted distribution, are what is compared.
fn timing_samples(cell: Vec<Timing>) -> Vec<f64> {
    if cell.iter().all(|t| t.repeat <= 1) {
        return cell.into_iter().map(|t| t.x).collect();
    }
    let mut by_rep: BTreeMap<u64, Vec<(f64, u64)>> = BTreeMap::new();
    for t in cell {
        by_rep.entry(t.rep).or_default().push((t.x, t.repeat));
    }
    by_rep.into_values().filter_map(weighted_median).collect()
}

/// The lower median of values each standing for `k` samples.
fn weighted_median(mut v: Vec<(f64, u64)>) -> Option<f64> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = v.iter().map(|&(_, k)| k).sum::<u64>().div_ceil(2);
    let mut seen = 0;
    v.into_iter()
        .find(|&(_, k)| {
            seen += k;
            seen >= half
        })
        .map(|(x, _)| x)
}

/// The runs to compare: two paths, or an experiment name (its latest two
/// runs at `scale`), or one path (against the run before it).
pub fn resolve(
    data: &Path,
    args: &[String],
    scale: crate::spec::Scale,
) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let runs_of = |exp: &str| crate::data::dataset::runs(data, exp, scale);
    match args {
        [a, b] => Ok((a.into(), b.into())),
        [one] if Path::new(one).join("manifest.json").exists() => {
            let p = Path::new(one);
            let exp =
                p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let runs = runs_of(&exp)?;
            let at = runs.iter().position(|r| r.file_name() == p.file_name()).unwrap_or(0);
            match at.checked_sub(1) {
                Some(i) => Ok((runs[i].clone(), p.into())),
                None => bail!(
                    "{} is the oldest {scale} run of {exp} in the tree; name the run to compare it with \
                     (older runs are listed in {}: `workbench restore` brings one back)",
                    p.display(),
                    data.join(crate::data::prune::LEDGER).display()
                ),
            }
        }
        [exp] => {
            let runs = runs_of(exp)?;
            match runs.as_slice() {
                [.., a, b] => Ok((a.clone(), b.clone())),
                _ => bail!(
                    "{exp}: fewer than two {scale} runs under {} (older runs are listed in {}: \
                     `workbench restore` brings one back)",
                    data.join(exp).display(),
                    data.join(crate::data::prune::LEDGER).display()
                ),
            }
        }
        _ => bail!("compare takes two runs, one run (against the one before it), or an experiment name"),
    }
}

fn describe(r: &Run) -> String {
    let m = &r.manifest;
    format!(
        "{} ({} {}, {})",
        r.dir.display(),
        short_rev(&m.git_revision),
        if m.git_dirty { "dirty" } else { "clean" },
        m.date
    )
}

pub fn short_rev(r: &str) -> &str {
    &r[..r.len().min(7)]
}

pub fn ci(s: &Summary) -> String {
    format!("{} [{}, {}]", ns(s.median), ns(s.lo), ns(s.hi))
}

/// A duration in nanoseconds, three significant figures in a fitting unit.
fn ns(v: f64) -> String {
    let (x, unit) = if v >= 1e6 {
        (v / 1e6, "ms")
    } else if v >= 1e3 {
        (v / 1e3, "µs")
    } else {
        (v, "ns")
    };
    format!("{} {unit}", crate::fmt::sig3(x))
}

/// Exact counts print as integers, or to four decimals when a mean is not
/// one (a change of one allocation in 10,000 records must still show).
pub fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        crate::fmt::thousands(v.abs() as u64).to_string()
    } else {
        format!("{:.4}", v.abs())
    }
}

pub fn num_signed(v: f64) -> String {
    if v < 0.0 {
        format!("-{}", num(-v))
    } else {
        format!("+{}", num(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_ci_brackets_the_median() {
        let xs: Vec<f64> = (1..=101).map(f64::from).collect();
        let s = Summary::of(&xs);
        assert_eq!(s.median, 51.0);
        assert!(s.lo < 51.0 && s.hi > 51.0 && s.lo >= 40.0 && s.hi <= 62.0, "{s:?}");
        let few = Summary::of(&[3.0, 1.0, 2.0]);
        assert_eq!((few.lo, few.median, few.hi), (1.0, 2.0, 3.0));
    }

    /// A run of roundtrip-latency (whose records count `allocs` exactly and
    /// time `ns`): dhat records with `allocs`, system records with `ns`.
    fn run(name: &str, allocs: &[u64], ns: &[f64]) -> Run {
        let manifest: crate::data::manifest::Manifest = serde_json::from_value(serde_json::json!({
            "experiment": "roundtrip-latency", "run_id": name, "scale": "quick", "git_revision": "0123456789", "git_dirty": false,
            "rustc": "r", "profile": "release", "features": {}, "allocators": {}, "cpu_model": "c", "cores": 2,
            "kernel": "k", "date": "d", "command_line": [], "spec_path": "s",
            "spec": {"experiment": "roundtrip-latency", "description": "", "codecs": ["zap"], "payloads": [0], "variants": ["dhat", "system"],
                     "seed": 1, "quick": {"messages": 1, "warmup": 0, "repetitions": 1, "sample_every": null},
                     "full": {"messages": 1, "warmup": 0, "repetitions": 1, "sample_every": null}},
            "cells": [], "cells_resumed": 0, "records": 0
        }))
        .unwrap();
        let mut records = Vec::new();
        for a in allocs {
            let r = serde_json::json!({"codec": "zap", "payload": 0, "variant": "dhat", "allocs": a});
            records.push(r.as_object().unwrap().clone());
        }
        for t in ns {
            let r = serde_json::json!({"codec": "zap", "payload": 0, "variant": "system", "ns": t});
            records.push(r.as_object().unwrap().clone());
        }
        Run::new(std::path::PathBuf::from(name), manifest, crate::data::dataset::frame_from_fields(&records).unwrap())
    }

    /// `n` draws from uniform(centre ± 10%), deterministic per seed.
    fn samples(seed: u64, n: usize, centre: f64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                centre * (0.9 + 0.2 * ((x >> 11) as f64 / (1u64 << 53) as f64))
            })
            .collect()
    }

    #[test]
    fn an_injected_allocation_is_a_change() {
        let a = run("a", &[3, 3, 3, 3], &samples(1, 40, 100.0));
        let same = run("same", &[3, 3, 3, 3], &samples(1, 40, 100.0));
        let c = compare(&a, &same, 0.05).unwrap();
        assert!(c.failures(&[FailOn::Allocs]).is_empty());
        let b = run("b", &[3, 4, 3, 3], &samples(1, 40, 100.0));
        let c = compare(&a, &b, 0.05).unwrap();
        let f = c.failures(&[FailOn::Allocs]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("allocs") && f[0].contains("3.25"), "{f:?}");
        assert!(c.to_markdown().contains("1 changed"), "{}", c.to_markdown());
    }

    #[test]
    fn a_shifted_timing_is_flagged_and_noise_is_not() {
        let a = run("a", &[1], &samples(1, 40, 100.0));
        let slower = run("b", &[1], &samples(2, 40, 120.0));
        let c = compare(&a, &slower, 0.05).unwrap();
        let t = &c.times[0];
        assert!(t.significant(0.05) && t.p < 1e-6, "{t:?}");
        assert!((t.delta() - 0.2).abs() < 0.06, "{t:?}");
        assert_eq!(c.failures(&[FailOn::Time(0.05)]).len(), 1);
        assert!(c.failures(&[FailOn::Time(0.30)]).is_empty(), "a 20% change is under a 30% limit");

        // Two samples of one distribution: "~", and no failure.
        let noise = run("c", &[1], &samples(3, 40, 100.0));
        let c = compare(&a, &noise, 0.05).unwrap();
        assert!(!c.times[0].significant(0.05), "{:?}", c.times[0]);
        assert!(c.to_markdown().contains("| ~ |"), "{}", c.to_markdown());
        assert!(c.failures(&[FailOn::Time(0.0), FailOn::Allocs]).is_empty());
    }

    #[test]
    fn two_server_heap_growth_runs_compare_every_count_of_every_exact_build() {
        let server = |name: &str, extra: u64| {
            let mut manifest = run(name, &[1], &[]).manifest.clone();
            manifest.experiment = "server-heap-growth".into();
            let mut records = Vec::new();
            for variant in ["dhat", "events", "jemalloc"] {
                for (workload, q) in [("ping", 10), ("mix", 20)] {
                    let r = serde_json::json!({"kind": "sample", "workload": workload, "queries": q, "variant": variant,
                        "rep": 0, "total_allocs": 100 + q + extra, "total_bytes": 4000 + q, "peak_heap_bytes": 900,
                        "live_heap_bytes": 800});
                    records.push(r.as_object().unwrap().clone());
                }
            }
            let frame = crate::data::dataset::frame_from_fields(&records).unwrap();
            Run::new(std::path::PathBuf::from(name), manifest, frame)
        };
        let c = compare(&server("a", 0), &server("b", 0), 0.05).unwrap();
        // Two exact builds × two workloads × four counts; jemalloc's are not exact.
        assert_eq!(c.counts.len(), 16, "{:?}", c.counts);
        assert!(c.counts.iter().any(|r| r.column == "total_allocs" && r.cell.contains("ping")), "{:?}", c.counts);
        let changed = compare(&server("a", 0), &server("b", 1), 0.05).unwrap();
        assert_eq!(changed.counts.iter().filter(|r| r.changed()).count(), 4, "{:?}", changed.counts);
    }

    #[test]
    fn runs_of_different_experiments_are_refused() {
        let a = run("a", &[1], &[1.0]);
        let mut b = run("b", &[1], &[1.0]);
        b.manifest.experiment = "other".into();
        assert!(compare(&a, &b, 0.05).unwrap_err().to_string().contains("one experiment"));
    }

    #[test]
    fn a_histogram_of_timings_is_compared_by_its_repetitions_medians() {
        let t = |x, repeat, rep| Timing { x, repeat, rep };
        // Repetition 0: 10 at 1.0, 1 at 9.0 (median 1.0); repetition 1: 2 at 2.0, 5 at 3.0 (median 3.0).
        let cell = vec![t(1.0, 10, 0), t(9.0, 1, 0), t(2.0, 2, 1), t(3.0, 5, 1)];
        assert_eq!(timing_samples(cell), [1.0, 3.0]);
        // Records of one timing each keep their order, whatever their repetition.
        assert_eq!(timing_samples(vec![t(5.0, 1, 1), t(4.0, 1, 0)]), [5.0, 4.0]);
        assert_eq!(weighted_median(vec![(1.0, 1), (2.0, 1)]), Some(1.0));
        assert_eq!(weighted_median(vec![]), None);
    }

    #[test]
    fn long_runs_are_batched() {
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        let b = batch_medians(&v, 50);
        assert_eq!(b.len(), 50);
        assert_eq!(b[0], 9.5);
        assert_eq!(batch_medians(&v[..10], 50).len(), 10);
        assert_eq!(num(3.25), "3.2500");
        assert_eq!(num(77.0), "77");
    }

    #[test]
    fn fail_on_parses() {
        assert_eq!(FailOn::parse("allocs").unwrap(), FailOn::Allocs);
        assert_eq!(FailOn::parse("time:5%").unwrap(), FailOn::Time(0.05));
        assert!(FailOn::parse("speed").unwrap_err().to_string().contains("--fail-on"));
    }
}
