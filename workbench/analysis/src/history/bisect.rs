//! `workbench bisect SPEC --cell C --metric M --good A --bad B`: the first
//! commit of `A..B` at which cell C's exact count M differs from its value
//! at A. A count of the dhat build repeats exactly, so one run per commit
//! decides, with no noise to outvote: the search measures ⌈log2 n⌉ of the
//! n commits (plus the two ends, unless a history or an earlier bisection
//! measured them, and the good end once more, to check that the count
//! repeats exactly), then shows the allocation sites whose counts differ
//! between the last commit with the old value and the first with the new
//! (the cells' traces, [`::trace::diff`]).

use super::{commit_data, Commit, Measure};
use crate::data::dataset;
use crate::run::runner::{self, Planned};
use ::trace::{self, Trace};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// An exact count: the sum of the metric over the cell's records, and how
/// many records (two runs agree only if both do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value {
    pub sum: u128,
    pub records: usize,
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mean = self.sum as f64 / self.records.max(1) as f64;
        write!(f, "{mean} per record ({} over {} records)", self.sum, self.records)
    }
}

/// Finds the first of `n` commits (ordered, the last known to differ from
/// `good`) whose value differs from `good`; `probe(i)` measures commit i.
/// Returns its index and the indices probed, in order. Like `git bisect`,
/// it assumes one change: with several it finds one of them.
pub fn first_change<T: PartialEq>(
    n: usize,
    good: &T,
    mut probe: impl FnMut(usize) -> Result<T>,
) -> Result<(usize, Vec<usize>)> {
    if n == 0 {
        bail!("the range holds no commit");
    }
    // Invariant: commit `lo` (or the good end, lo = None) has the good
    // value; commit `hi` differs.
    let (mut lo, mut hi): (Option<usize>, usize) = (None, n - 1);
    let mut probed = Vec::new();
    loop {
        let first = lo.map_or(0, |l| l + 1);
        if first == hi {
            return Ok((hi, probed));
        }
        let mid = first + (hi - first) / 2;
        probed.push(mid);
        if probe(mid)? == *good {
            lo = Some(mid);
        } else {
            hi = mid;
        }
    }
}

/// The value of `metric` over the records of `cell` in the run at `dir`,
/// those matching `filters` (`column=value`) only.
pub fn value_in(dir: &Path, cell: &Planned, metric: &str, filters: &[(String, String)]) -> Result<Value> {
    let run = dataset::load_run(dir)?;
    let df = &run.records;
    let names: Vec<String> = df.get_column_names().iter().map(|s| s.to_string()).collect();
    if !names.iter().any(|n| n == metric) {
        bail!("{}: no column `{metric}`; its columns: {}", dir.display(), names.join(", "));
    }
    let mut text: Vec<(&str, &str)> = vec![(records::columns::VARIANT, cell.variant.as_str())];
    let mut nums: Vec<(&str, u64)> = vec![(records::columns::REP, u64::from(cell.rep))];
    if let Some(codec) = &cell.fields.codec {
        text.push((records::columns::CODEC, codec));
    }
    if let Some(payload) = cell.fields.payload {
        nums.push((records::columns::PAYLOAD, payload));
    }
    for (k, v) in filters {
        match v.parse::<u64>() {
            Ok(x) if df.column(k).is_ok_and(|c| c.dtype().is_integer()) => nums.push((k, x)),
            _ => text.push((k, v)),
        }
    }
    let rows = crate::report::tables::select(df, &text, &nums)
        .with_context(|| format!("selecting cell {} in {}", cell.id, dir.display()))?;
    if rows.height() == 0 {
        bail!("{}: no record of cell {} matches {:?}", dir.display(), cell.id, filters);
    }
    let col = rows.column(metric)?;
    if !col.dtype().is_integer() {
        bail!("`{metric}` is {} in {}: bisection compares exact counts", col.dtype(), dir.display());
    }
    let c = col.cast(&polars::prelude::DataType::UInt64)?;
    // A record that stands for several identical ones (`repeat`) counts as many.
    let repeat = crate::report::tables::repeats(&rows)?;
    let (mut sum, mut n) = (0u128, 0usize);
    for (x, k) in c.u64()?.iter().zip(repeat) {
        if let Some(x) = x {
            sum += u128::from(x) * u128::from(k);
            n += k as usize;
        }
    }
    Ok(Value { sum, records: n })
}

/// What `workbench bisect` asks.
pub struct Query<'a> {
    pub cell: &'a str,
    pub metric: &'a str,
    pub filters: Vec<(String, String)>,
    pub good: &'a str,
    pub bad: &'a str,
}

/// What it found.
pub struct Found {
    pub commit: Commit,
    /// The last commit with the good value (the good end itself when the
    /// first commit of the range changed it).
    pub before: Commit,
    pub old: Value,
    pub new: Value,
    /// Commits of the range, and those measured (ends excluded).
    pub range: usize,
    pub probed: Vec<Commit>,
    pub reused: usize,
    /// The cell's allocation sites that differ, as `workbench trace diff` prints them.
    pub sites: Option<String>,
    /// Their differential allocation flame graph (an SVG beside the trace).
    pub flame: Option<std::path::PathBuf>,
}

/// Runs the bisection; `say` reports each step.
pub fn run(m: &Measure<'_>, data: &Path, q: &Query<'_>, say: &dyn Fn(String)) -> Result<Found> {
    let planned = runner::plan(m.spec, m.scale)?;
    let Some(cell) = planned.iter().find(|p| p.id == q.cell).cloned() else {
        let ids: Vec<&str> = planned.iter().map(|p| p.id.as_str()).collect();
        bail!("--cell {}: no such cell at {} scale; the spec's cells: {}", q.cell, m.scale, ids.join(", "));
    };
    let good = super::commits(m.root, q.good)?.pop().with_context(|| format!("--good {}: no such commit", q.good))?;
    let range = super::commits(m.root, &format!("{}..{}", good.hash, q.bad))?;
    if range.is_empty() {
        bail!("{}..{} holds no commit: is --bad a descendant of --good?", q.good, q.bad);
    }
    let reused = std::cell::Cell::new(0);
    let measure = |c: &Commit| -> Result<(Value, PathBuf)> {
        let dir = run_of(m, data, c, &cell, &reused, say)?;
        Ok((value_in(&dir, &cell, q.metric, &q.filters)?, dir))
    };
    let (old, good_dir) = measure(&good)?;
    say(format!("good {} {}: {}", good.short(), good.subject, old));
    // The search trusts one run per commit, so the count must repeat
    // exactly; a cell whose count depends on scheduling (a multi-threaded
    // runtime's task spawns, say) would send it after noise. The good end
    // runs once more to check. (The tokio-based gRPC and QUIC stacks'
    // counts differed by a few allocations in 2,000 round trips between
    // the committed quick run and one on this machine, on different code;
    // two runs of one commit here matched.)
    let again_dir = data.join("history").join("bisect-repeat").join(&good.hash);
    let again = match dataset::latest_run(&again_dir, m.spec.dataset(), m.scale)? {
        Some(run) => run,
        None => m.at(&good.hash, &again_dir, &|p| p.id == cell.id)?,
    };
    let repeat = value_in(&again, &cell, q.metric, &q.filters)?;
    if repeat != old {
        bail!(
            "{} of {} does not repeat at {}: {old}, then {repeat}; bisection needs a count that repeats exactly \
             (choose another cell or metric)",
            q.metric,
            q.cell,
            good.short()
        );
    }
    say(format!("good {} again: {repeat} (repeats exactly)", good.short()));
    let bad = range.last().expect("non-empty").clone();
    let (new_at_bad, _) = measure(&bad)?;
    say(format!("bad  {} {}: {}", bad.short(), bad.subject, new_at_bad));
    if new_at_bad == old {
        bail!("{} of {} is {} at both ends: nothing changed to bisect", q.metric, q.cell, old);
    }
    let (i, probed) = first_change(range.len(), &old, |i| {
        let (v, _) = measure(&range[i])?;
        say(format!(
            "     {} {}: {}{}",
            range[i].short(),
            range[i].subject,
            v,
            if v == old { "" } else { "  (changed)" }
        ));
        Ok(v)
    })?;
    let commit = range[i].clone();
    let before = if i == 0 { good.clone() } else { range[i - 1].clone() };
    let (new, new_dir) = measure(&commit)?;
    let before_dir = if i == 0 { good_dir } else { measure(&before)?.1 };
    let file = format!("{}.dhat.json", cell.id);
    use crate::data::traces::unpacked;
    let (ta, tb) = (unpacked(&before_dir)?.join(&file), unpacked(&new_dir)?.join(&file));
    let (sites, flame) = match (Trace::load(&ta), Trace::load(&tb)) {
        (Ok(a), Ok(b)) => {
            // The differential flame graph beside the new commit's trace; a
            // browser shows a frame's exact before → after on hover.
            let svg = trace::diff_flame::svg(
                &trace::diff_flame::tree(&a, &b),
                &format!("{}: {} (A) against {} (B)", cell.id, before.short(), commit.short()),
            );
            let path = new_dir.join("traces").join(format!("{}.diff-flame.svg", cell.id));
            std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
            (Some(trace::render_diff(&a, &b, &trace::diff(&a, &b), 12)), Some(path))
        }
        _ => (None, None),
    };
    Ok(Found {
        commit,
        before,
        old,
        new,
        range: range.len(),
        probed: probed.iter().map(|&i| range[i].clone()).collect(),
        reused: reused.get(),
        sites,
        flame,
    })
}

/// The run holding `cell` at commit `c`: the history's full run or an
/// earlier bisection's if there is one, else a new one-cell run.
fn run_of(
    m: &Measure<'_>,
    data: &Path,
    c: &Commit,
    cell: &Planned,
    reused: &std::cell::Cell<usize>,
    say: &dyn Fn(String),
) -> Result<PathBuf> {
    let dataset = m.spec.dataset();
    let bisect_dir = data.join("history").join("bisect").join(&c.hash);
    for dir in [commit_data(data, &c.hash), bisect_dir.clone()] {
        if let Some(run) = dataset::latest_run(&dir, dataset, m.scale)? {
            let has = dataset::load_run_manifest(&run)?.cells.contains(&cell.id);
            if has {
                reused.set(reused.get() + 1);
                return Ok(run);
            }
        }
    }
    say(format!("     {} {}: building and running {}", c.short(), c.subject, cell.id));
    m.at(&c.hash, &bisect_dir, &|p| p.id == cell.id)
        .with_context(|| format!("measuring {} at {} ({})", cell.id, c.short(), c.subject))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_every_position_in_log2_probes() {
        for n in 1..=40usize {
            let bound = (n as f64).log2().ceil() as usize;
            for change in 0..n {
                let (i, probed) = first_change(n, &0u32, |i| Ok(u32::from(i >= change))).unwrap();
                assert_eq!(i, change, "n = {n}");
                assert!(probed.len() <= bound, "n = {n}, change at {change}: {} probes > {bound}", probed.len());
                assert!(probed.iter().all(|&p| p < n - 1), "the bad end is never probed");
            }
        }
    }

    #[test]
    fn a_probe_error_stops_the_search() {
        let e = first_change(8, &0u32, |_| -> Result<u32> { bail!("build failed") }).unwrap_err();
        assert_eq!(e.to_string(), "build failed");
        assert!(first_change(0, &0u32, |_| Ok(0)).is_err());
    }
}
