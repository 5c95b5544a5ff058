//! One report per registered dataset ([`registry`]): its table, its
//! figure. Tables, figures and the stale-table cleanup all walk [`REPORTS`];
//! a report names its dataset by its `registry::Experiment`, never by a string.
//!
//! Adding an experiment's output: copy one of the files below (a `pub const
//! REPORT = Report::of::<Record>(Experiment::X, table, figure)`); the
//! compiler then asks for its arm in [`reports_of`].
//!
//! # Layout
//! - [`Report`], [`reports_of`] (one exhaustive match), [`REPORTS`]: each
//!   registered dataset's table and figure;
//!   [`analyse`] walks them once per scale (each run loaded once, every
//!   table computed), and the [`Analysis`] writes tables and figures.
//! - [`tables`]: [`Table`], its LaTeX and Markdown, row selection and cell
//!   formats; [`figures`]: plotters charts (SVG and PNG); [`timeline`]: a
//!   heap timeline's chart from an events file; [`timings`]: what each
//!   newest run took, from its manifest (`paper/generated/timings.md`).
//! - The codecs' and transports' reports: [`alloc_profile`] (and its
//!   [`growth_laws`]), [`codec_speed`],
//!   [`heap_growth`] (two: codecs, transports), [`instrumentation_cost`],
//!   [`sampling_accuracy`] (a sampled heap profile against the exact one),
//!   [`roundtrip_latency`] (three: idle, awake, open loop), [`transport_alloc`].
//! - The datastore's: [`build_stages`], [`connection_scaling`],
//!   [`datastore_queries`], [`fault_soak`], [`io_wakeup`], [`pipeline_depth`], [`server_heap_growth`],
//!   [`throughput`] (two: the run, and ours beside ClickHouse).
//! - Each report reads its run's rows as the record type it names
//!   ([`Report::of`], [`crate::data::dataset::Run::rows`]); shared helpers
//!   here ([`median`], [`ratio_range`]) and in [`crate::report::tables`]
//!   (summaries, cells, rendering); drawing in [`crate::report::figures`].

use crate::data::dataset::{self, Run};
use crate::run::fingerprint::{self, Shown};
use crate::spec::Scale;
use anyhow::{Context, Result};
use registry::Experiment;
use std::path::{Path, PathBuf};
use tables::Table;

pub mod figures;
pub mod tables;

#[cfg(test)]
pub(crate) mod fixture;

pub mod alloc_profile;
pub mod build_stages;
pub mod codec_speed;
pub mod connection_scaling;
pub mod datastore_queries;
pub mod fault_soak;
pub mod growth_laws;
pub mod heap_growth;
pub mod instrumentation_cost;
pub mod io_wakeup;
pub mod pipeline_depth;
pub mod profiler_cost;
pub mod request_cost;
pub mod roundtrip_latency;
pub mod sampling_accuracy;
pub mod server_heap_growth;
pub mod throughput;
pub mod timeline;
pub mod timings;
pub mod transport_alloc;

/// Draws an experiment's figure(s) from a run into a directory; the files written.
pub type FigureFn = fn(&Path, &Run) -> Result<Vec<PathBuf>>;

/// What the workbench makes of one registered dataset's newest run.
pub struct Report {
    /// The table's (and figure's) file name: the dataset's, unless one
    /// dataset has two tables.
    pub name: &'static str,
    /// The registered dataset (`data/<name>/`) it reads, and the builds its
    /// spec may name.
    pub experiment: Experiment,
    pub table: fn(&Run) -> Result<Table>,
    pub figure: Option<FigureFn>,
    /// Reads every row of a run as the dataset's record type (the rows read).
    pub read: fn(&Run) -> Result<usize>,
    /// The record type it reads, by `type_name`: its experiment's, which a
    /// test holds every report to.
    pub record: fn() -> &'static str,
}

impl Report {
    /// The report of `experiment`'s dataset, whose rows are `R`s, under the
    /// dataset's name.
    pub const fn of<R: serde::de::DeserializeOwned + 'static>(
        experiment: Experiment,
        table: fn(&Run) -> Result<Table>,
        figure: Option<FigureFn>,
    ) -> Report {
        Report { name: experiment.name(), experiment, table, figure, read: read::<R>, record: std::any::type_name::<R> }
    }

    /// The dataset it reads.
    pub fn dataset(&self) -> &'static str {
        self.experiment.name()
    }
}

fn read<R: serde::de::DeserializeOwned + 'static>(run: &Run) -> Result<usize> {
    run.each::<R>().try_fold(0, |n, r| r.map(|_| n + 1))
}

/// The reports of one experiment's dataset: one exhaustive match, so an
/// experiment without its report does not compile.
pub const fn reports_of(e: Experiment) -> &'static [Report] {
    use Experiment as E;
    match e {
        E::AllocProfile => &[alloc_profile::REPORT, growth_laws::REPORT],
        E::HeapGrowth => &[heap_growth::REPORT],
        E::SamplingAccuracy => &[sampling_accuracy::REPORT],
        E::SamplingAccuracyTransports => &[sampling_accuracy::TRANSPORTS],
        E::SamplingAccuracyServer => &[sampling_accuracy::SERVER],
        E::CodecSpeed => &[codec_speed::REPORT],
        E::TransportAlloc => &[transport_alloc::REPORT],
        E::TransportHeapGrowth => &[heap_growth::TRANSPORTS],
        E::RoundtripLatency => &[roundtrip_latency::REPORT],
        E::RoundtripLatencyAwake => &[roundtrip_latency::AWAKE],
        E::RoundtripLatencyOpen => &[roundtrip_latency::OPEN],
        E::InstrumentationCost => &[instrumentation_cost::REPORT],
        E::DatastoreQueries => &[datastore_queries::REPORT],
        E::BuildStages => &[build_stages::REPORT, build_stages::ANATOMY],
        E::ConnectionScaling => &[connection_scaling::REPORT],
        E::PipelineDepth => &[pipeline_depth::REPORT],
        E::IoWakeup => &[io_wakeup::REPORT],
        E::ServerHeapGrowth => &[server_heap_growth::REPORT],
        E::RequestCost => &[request_cost::REPORT, request_cost::SITES],
        E::FaultSoak => &[fault_soak::REPORT],
        E::Throughput => &[throughput::REPORT, throughput::VERSUS],
        E::ProfilerCost => &[profiler_cost::REPORT],
    }
}

/// Every report, in the order tables are listed (the experiments').
pub static REPORTS: std::sync::LazyLock<Vec<&'static Report>> =
    std::sync::LazyLock::new(|| Experiment::ALL.iter().flat_map(|&e| reports_of(e)).collect());

/// One analysis pass at one scale: the newest run of each report's dataset,
/// loaded once (two reports of one dataset share it), and every table
/// computed from it. Tables, figures and the paper's macros are rendered
/// from one pass; nothing is read back from a rendered file.
pub struct Analysis {
    pub scale: Scale,
    /// Per report with a dataset: the report, the run's directory, the run.
    runs: Vec<(&'static Report, PathBuf, std::sync::Arc<Run>)>,
    pub tables: Vec<Table>,
    /// Per run directory: whether the code would still measure it the same
    /// ([`fingerprint::shown`]), told wherever its numbers are shown.
    shown: std::collections::BTreeMap<PathBuf, Shown>,
}

/// What follows a table's name in its method fragment's file name
/// (`<name>.method.tex`, which `\wbmethod{<name>}` in `paper/main.tex` inputs).
pub const METHOD_TEX: &str = "method.tex";

/// Loads the newest run of each report's dataset at `scale` and computes
/// every table. Each table's caption ends with where its numbers come from
/// (revision, date, machine: its own dataset's) and, when the dataset is
/// not fresh against the tree at `root`, starts by saying so.
pub fn analyse(root: &Path, data: &Path, scale: Scale) -> Result<Analysis> {
    let mut found: Vec<(&'static Report, PathBuf)> = Vec::new();
    for &r in REPORTS.iter() {
        if let Some(dir) = dataset::latest_run(data, r.dataset(), scale)? {
            found.push((r, dir));
        }
    }
    // Each run loaded once (two reports of one dataset share it), on every
    // core, the biggest first.
    let mut dirs: Vec<&PathBuf> = Vec::new();
    for (_, dir) in &found {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs.sort_by_cached_key(|d| std::cmp::Reverse(std::fs::metadata(d.join(dataset::RECORDS)).map_or(0, |m| m.len())));
    let loaded = crate::par::on_every_core(dirs.len(), |i| -> Result<_> {
        let run = dataset::load_run(dirs[i])?;
        let s =
            fingerprint::shown(root, &run.manifest).with_context(|| format!("freshness of {}", dirs[i].display()))?;
        Ok((std::sync::Arc::new(run), s))
    });
    let mut by_dir = std::collections::BTreeMap::new();
    let mut shown = std::collections::BTreeMap::new();
    for (dir, l) in dirs.iter().zip(loaded) {
        let (run, s) = l?;
        by_dir.insert((*dir).clone(), run);
        shown.insert((*dir).clone(), s);
    }
    let runs: Vec<(&'static Report, PathBuf, std::sync::Arc<Run>)> =
        found.iter().map(|(r, dir)| (*r, dir.clone(), by_dir[dir].clone())).collect();
    let mut tables = crate::par::on_every_core(runs.len(), |i| {
        let (r, dir, run) = &runs[i];
        (r.table)(run).with_context(|| format!("table {} from {}", r.name, dir.display()))
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    for t in &mut tables {
        if t.rows.iter().any(|r| r.first().is_some_and(|n| n.text.ends_with('*'))) {
            if !t.method.is_empty() {
                t.method.push(' ');
            }
            t.method.push_str(tables::IDIOMS);
        }
    }
    for ((_, dir, run), t) in runs.iter().zip(tables.iter_mut()) {
        if let Some(note) = nodes_note(&run.manifest) {
            t.caption.push(' ');
            t.caption.push_str(&note);
        }
        t.caption.push(' ');
        t.caption.push_str(&measured_on(&run.manifest));
        if let Some(note) = shown[dir].note(&run.manifest) {
            t.caption = format!("{note} {}", t.caption);
        }
    }
    Ok(Analysis { scale, runs, tables, shown })
}

/// Where a dataset's numbers come from, in its own manifest's words.
pub fn measured_on(m: &crate::data::manifest::Manifest) -> String {
    let rev = m.revisions(7);
    format!(
        "Measured at {rev}{} on {}, {} ({} cores).",
        if m.git_dirty { " (dirty tree)" } else { "" },
        m.date.get(..10).unwrap_or(&m.date),
        m.cpu_model,
        m.cores
    )
}

/// For a dataset whose cells ran elsewhere than the machine that published
/// it (Slurm tasks, or a count-only run resumed on another machine): which
/// machines, with how many cells each.
fn nodes_note(m: &crate::data::manifest::Manifest) -> Option<String> {
    if m.nodes.is_empty() {
        return None;
    }
    let mut by_node: std::collections::BTreeMap<(&str, &str), usize> = std::collections::BTreeMap::new();
    for n in m.nodes.values() {
        *by_node.entry((n.hostname.as_str(), n.cpu_model.as_str())).or_default() += 1;
    }
    let list: Vec<String> =
        by_node.iter().map(|((host, cpu), cells)| format!("{host} ({cpu}): {cells} cells")).collect();
    let mut note = format!("Cells ran on {}.", list.join("; "));
    if by_node.len() > 1 {
        note.push_str(
            " Timings of cells on different machines are not comparable: read them per machine (manifest.json, `nodes`).",
        );
    }
    Some(note)
}

/// Every table at `scale` ([`analyse`]).
pub fn compute_tables(root: &Path, data: &Path, scale: Scale) -> Result<Vec<Table>> {
    Ok(analyse(root, data, scale)?.tables)
}

impl Analysis {
    /// Each report that found a dataset: the report, its run's directory and the run.
    pub fn runs(&self) -> impl Iterator<Item = (&'static Report, &Path, &Run)> {
        self.runs.iter().map(|(r, d, run)| (*r, d.as_path(), run.as_ref()))
    }

    /// The freshness of the run in `dir` (one of [`Analysis::runs`]).
    pub fn shown(&self, dir: &Path) -> Option<&Shown> {
        self.shown.get(dir)
    }

    /// Writes every table to `paper/generated/[<scale>/]<name>.{tex,md,json}` and
    /// removes those of experiments without a dataset; the paths written.
    pub fn write_tables(&self, root: &Path) -> Result<Vec<PathBuf>> {
        let dir = self.scale.dir(root, "paper/generated");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut written = Vec::new();
        for t in &self.tables {
            for (ext, text) in
                [("tex", t.to_latex()), ("md", t.to_markdown()), ("json", t.to_json()), (METHOD_TEX, t.method_latex())]
            {
                let path = dir.join(format!("{}.{ext}", t.name));
                dataset::write_atomic(&path, text.as_bytes())?;
                written.push(path);
            }
        }
        // A table whose dataset is gone must not outlive it: the paper would
        // print its numbers as if measured.
        for exp in REPORTS.iter().map(|r| r.name) {
            if self.tables.iter().any(|t| t.name == exp) {
                continue;
            }
            for ext in ["tex", "md", "json", METHOD_TEX] {
                let stale = dir.join(format!("{exp}.{ext}"));
                if stale.exists() {
                    std::fs::remove_file(&stale).with_context(|| format!("removing the stale {}", stale.display()))?;
                }
            }
        }
        Ok(written)
    }

    /// Draws every figure into `figures/[<scale>/]`; the files written.
    pub fn write_figures(&self, root: &Path) -> Result<Vec<PathBuf>> {
        figures::register_font()?;
        let dir = self.scale.dir(root, "figures");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut written = Vec::new();
        for (r, run_dir, run) in &self.runs {
            let Some(draw) = r.figure else { continue };
            let stale = !self.shown[run_dir].is_fresh();
            let rev: String = run.manifest.git_revision.chars().take(7).collect();
            let mark = stale.then(|| format!("STALE data (measured at {rev})"));
            written.extend(
                figures::marked(mark.as_deref(), || draw(&dir, run))
                    .with_context(|| format!("figure {} from {}", r.name, run_dir.display()))?,
            );
        }
        Ok(written)
    }
}

/// [`Analysis::write_tables`] of a fresh pass; the tables and the paths written.
pub fn write_tables(root: &Path, data: &Path, scale: Scale) -> Result<(Vec<Table>, Vec<PathBuf>)> {
    let a = analyse(root, data, scale)?;
    let written = a.write_tables(root)?;
    Ok((a.tables, written))
}

/// [`Analysis::write_figures`] of a fresh pass; the files written.
pub fn write_figures(root: &Path, data: &Path, scale: Scale) -> Result<Vec<PathBuf>> {
    analyse(root, data, scale)?.write_figures(root)
}

/// A ratio across repetitions: its median and, when it had more than one
/// value, its range, as `1.40× (1.31–1.52×)`; a dash when there is none.
pub(crate) fn ratio_range(ratios: &[f64]) -> String {
    let Some(m) = median(ratios) else { return tables::dash() };
    if ratios.len() == 1 {
        return format!("{m:.2}×");
    }
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.2}× ({lo:.2}–{hi:.2}×)")
}

/// The median of `v`; `None` when empty ([`tables::stats_of`]'s: the one
/// median every table uses).
pub(crate) fn median(v: &[f64]) -> Option<f64> {
    tables::stats_of(v).map(|s| s.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_are_unique() {
        let mut names: Vec<&str> = REPORTS.iter().map(|r| r.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "{names:?}");
    }

    #[test]
    fn each_report_reads_the_experiment_it_is_listed_under() {
        for &e in Experiment::ALL {
            assert!(reports_of(e).iter().all(|r| r.experiment == e), "{e}");
        }
    }

    #[test]
    fn each_report_reads_its_experiments_record_type() {
        for r in REPORTS.iter() {
            assert_eq!((r.record)(), r.experiment.record_schema().rust_type, "report {}", r.name);
        }
    }

    #[test]
    fn a_run_read_as_another_experiments_record_type_is_an_error_naming_both() {
        use records::subject::{AllocProfile, HeapGrowth, HeapKind};
        let cell = records::CellFields { variant: "dhat".into(), rep: 0, codec: Some("zap".into()), payload: Some(0) };
        let r = HeapGrowth {
            kind: HeapKind::Sample,
            messages: 1,
            cum_bytes: Some(8),
            cum_allocs: Some(1),
            live_bytes: None,
            peak_live_bytes: None,
            rss_bytes: None,
            peak_rss_bytes: None,
            purges: None,
            elapsed_s: 0.5,
        };
        let run = fixture::run("heap-growth", None, &[(cell, r.clone())]);
        assert_eq!(run.rows::<HeapGrowth>().unwrap()[0].record, r);
        let e = format!("{:#}", run.rows::<AllocProfile>().unwrap_err());
        assert!(
            e.contains("records::subject::HeapGrowth") && e.contains("read as records::subject::AllocProfile"),
            "{e}"
        );
        let mut other = run;
        other.manifest.experiment = "heap-grwoth".into();
        let e = format!("{:#}", other.rows::<HeapGrowth>().unwrap_err());
        assert!(e.contains("heap-grwoth"), "{e}");
    }

    #[test]
    fn every_committed_spec_has_a_report() {
        let specs = crate::spec::load_dir(&crate::default_root().join("experiments")).unwrap();
        for (path, spec) in specs {
            assert!(REPORTS.iter().any(|r| r.dataset() == spec.dataset()), "{} has no report", path.display());
        }
        for e in registry::Experiment::ALL {
            assert!(REPORTS.iter().any(|r| r.dataset() == e.name()), "registered {e} has no report");
            let spec = crate::default_root().join("experiments").join(format!("{e}.toml"));
            assert!(spec.exists(), "registered {e} has no spec {}", spec.display());
        }
    }

    #[test]
    fn every_committed_dataset_reads_as_its_records() {
        // PERF (test time): each run is loaded once and read once per record
        // type (an experiment's reports share theirs: alloc-profile's and
        // growth-laws', throughput's two), the largest first, on every core.
        // One load and one read per report took 88 s of CPU over this
        // repository's data (2026-12-06), the longest unit test.
        let data = crate::default_root().join("data");
        let mut runs = Vec::new();
        for &e in Experiment::ALL {
            for scale in [Scale::Quick, Scale::Full] {
                for dir in dataset::runs(&data, e.name(), scale).unwrap() {
                    let size = std::fs::metadata(dir.join(dataset::RECORDS)).map_or(0, |m| m.len());
                    runs.push((size, e, dir));
                }
            }
        }
        runs.sort_by_key(|r| std::cmp::Reverse(r.0));
        let failed: Vec<String> = crate::par::on_every_core(runs.len(), |i| {
            let (_, e, dir) = &runs[i];
            let run = dataset::load_run(dir).unwrap();
            let mut read: Vec<usize> = Vec::new();
            let mut failed = Vec::new();
            for r in reports_of(*e) {
                // Cast to compare: two reports reading the same type share `read::<R>`.
                if read.contains(&(r.read as usize)) {
                    continue;
                }
                read.push(r.read as usize);
                match (r.read)(&run) {
                    Ok(n) => assert_eq!(n, run.records.height(), "{}", dir.display()),
                    Err(e) => failed.push(format!("{} ({}): {e:#}", r.name, dir.display())),
                }
            }
            failed
        })
        .into_iter()
        .flatten()
        .collect();
        assert!(failed.is_empty(), "{}", failed.join("\n"));
        assert!(runs.len() >= Experiment::ALL.len(), "{} runs read", runs.len());
    }

    #[test]
    fn ratios_show_their_range() {
        assert_eq!(ratio_range(&[1.5, 1.2, 1.4]), "1.40× (1.20–1.50×)");
        assert_eq!(ratio_range(&[2.0]), "2.00×");
        assert_eq!(ratio_range(&[]), tables::dash());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
