//! `workbench`: run experiment suites, regenerate tables and figures.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{MultiProgress, ProgressDrawTarget};
use std::path::{Path, PathBuf};
use workbench::history;
use workbench::inspect::{compare, trace};
use workbench::report;
use workbench::run::{runner, slurm};
use workbench::spec::{self, Scale};

#[derive(Parser)]
#[command(
    name = "workbench",
    about = "Memory-profiling research workbench: run experiments, regenerate tables and figures."
)]
struct Cli {
    /// Repository root (experiments/, data/, figures/, paper/ live here).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    /// Dataset directory (default: <root>/data).
    #[arg(long, global = true)]
    data: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run specs: `run quick` runs every spec at quick scale; `run NAME… --scale full` chosen ones.
    Run(RunArgs),
    /// Which datasets the code would still measure the same (the `git
    /// status` of evidence): each spec's newest run per scale is fresh,
    /// stale (the inputs that changed, and the first commit that changed
    /// each) or unknown (no fingerprint).
    Status {
        /// One scale (default: both).
        #[arg(long, value_enum)]
        scale: Option<Scale>,
        /// Fail when a dataset readers are shown (the paper's) is not fresh.
        #[arg(long)]
        check: bool,
    },
    /// Publish the datasets of `run --slurm --no-wait` once their jobs are done.
    Collect(CollectArgs),
    /// One Slurm task of a submission (what its sbatch script runs).
    #[command(hide = true)]
    SlurmTask { staging: PathBuf, index: usize },
    /// Regenerate paper/generated/*.{tex,md,json} from data/ (runs nothing).
    Tables {
        #[arg(long, value_enum, default_value_t = Scale::Quick)]
        scale: Scale,
    },
    /// Regenerate figures/*.{svg,png} from data/ (runs nothing).
    Figures {
        #[arg(long, value_enum, default_value_t = Scale::Quick)]
        scale: Scale,
    },
    /// Regenerate notebooks/columns.py: every dataset's columns, typed, from
    /// the record types (runs nothing; `render` writes it too).
    Columns,
    /// List specs and finished runs.
    List,
    /// Audit the source papers' claims (paper/claims.toml) against data/:
    /// writes paper/generated/claims.{md,tex}.
    Claims,
    /// Build the paper: macros and claims from data/, figures to PDF, then
    /// latexmk → paper/build/main.pdf (tables come from `workbench tables`).
    Paper,
    /// Every output from data/ in one pass (runs nothing): each scale's
    /// tables and figures, the paper's macros, the claims audit, the PDF and
    /// the report site, every dataset loaded and every table computed once.
    Render {
        /// Where the site goes (default: <root>/report).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write the browsable report site (static HTML, opens from the file
    /// system): every experiment, trace, comparison and history.
    Report {
        /// Where (default: <root>/report).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run a spec at every commit of a range (like `asv run A..B`), each in a
    /// git worktree, one dataset per commit under <data>/history/; the
    /// report plots every metric against the commits and flags changes.
    History(HistoryArgs),
    /// Find the first commit of good..bad where one cell's exact count
    /// changed, measuring ⌈log2 n⌉ commits; prints it with the allocation
    /// sites that differ.
    Bisect(BisectArgs),
    /// Review dhat allocation traces: top sites, diffs, trees, the viewer.
    Trace {
        #[command(subcommand)]
        cmd: TraceCmd,
    },
    /// Compare two runs of one experiment: exact allocation counts, timings
    /// with medians, 95% CIs and Mann–Whitney U (benchstat-style).
    Compare(CompareArgs),
    /// The allocation gate: run the small dhat suite (`[gate]` in the specs)
    /// and fail on any count that differs from experiments/gate/baseline.txt,
    /// naming the sites that moved; one line when nothing changed.
    Gate {
        /// Print the determinism map of the committed baseline (runs nothing).
        #[arg(long)]
        map: bool,
        /// List the suite's cells (runs nothing).
        #[arg(long)]
        list: bool,
    },
    /// Measure the gate suite (twice quiet, once loaded, the varying cells
    /// more) and rewrite experiments/gate/ with the reason; commit the result.
    Bless {
        /// Why the counts change; kept beside them, so `git log -p` of the
        /// baseline is the project's allocation history.
        #[arg(long)]
        reason: String,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// `quick`, or spec names (experiments/NAME.toml) or paths; none = every spec.
    specs: Vec<String>,
    /// `quick` (the whole suite in minutes) or `full` (the papers' scales).
    #[arg(long, value_enum, default_value_t = Scale::Quick)]
    scale: Scale,
    /// Discard finished cells of an interrupted run instead of resuming it.
    #[arg(long)]
    fresh: bool,
    /// Do not regenerate tables and figures afterwards.
    #[arg(long)]
    no_report: bool,
    /// Measure uncommitted code anyway; the diff is stored in each dataset.
    #[arg(long)]
    allow_dirty: bool,
    /// Run every cell alone. By default the cells of exact-count builds
    /// (dhat, events) run two at a time, every other cell alone.
    #[arg(long)]
    one_at_a_time: bool,
    /// Run the cells as Slurm job arrays (one per spec, one task per cell
    /// not yet done; the staging directory under --data must be on a file
    /// system the nodes share), then publish as a local run does.
    #[arg(long)]
    slurm: bool,
    /// sbatch --partition.
    #[arg(long, requires = "slurm")]
    partition: Option<String>,
    /// sbatch --account.
    #[arg(long, requires = "slurm")]
    account: Option<String>,
    /// sbatch --time: each task's limit, e.g. 00:30:00.
    #[arg(long, requires = "slurm")]
    time: Option<String>,
    /// Return after submitting; `workbench collect` publishes later.
    #[arg(long, requires = "slurm")]
    no_wait: bool,
    /// Print the sbatch scripts and tasks; build and submit nothing.
    #[arg(long, requires = "slurm")]
    dry_run: bool,
    /// Run nothing: project the suite's wall time on --nodes nodes from
    /// the cell durations of each spec's latest run at --scale.
    #[arg(long)]
    plan: bool,
    /// Node counts for --plan.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 4, 16], requires = "plan")]
    nodes: Vec<usize>,
    /// Only the chosen specs whose newest dataset at --scale is stale,
    /// unknown or missing (`workbench status`).
    #[arg(long)]
    stale: bool,
}

#[derive(clap::Args)]
struct CollectArgs {
    specs: Vec<String>,
    #[arg(long, value_enum, default_value_t = Scale::Quick)]
    scale: Scale,
}

#[derive(clap::Args)]
struct HistoryArgs {
    /// A spec name (experiments/NAME.toml) or path; the cells are the
    /// spec's as it is now, at every commit.
    spec: String,
    /// A git range `A..B` (A excluded, as in git log) or one commit.
    #[arg(long)]
    commits: String,
    #[arg(long, value_enum, default_value_t = Scale::Quick)]
    scale: Scale,
    /// Run only this many commits of the range, evenly spaced (the last kept).
    #[arg(long)]
    steps: Option<usize>,
}

#[derive(clap::Args)]
struct BisectArgs {
    spec: String,
    /// The cell's id, as the run names it (e.g. zap-p64-dhat-r0).
    #[arg(long)]
    cell: String,
    /// An exact-count column of the records (e.g. allocs, bytes).
    #[arg(long)]
    metric: String,
    /// Only records with column=value (repeatable), e.g. phase=roundtrip.
    #[arg(long = "where")]
    filters: Vec<String>,
    #[arg(long)]
    good: String,
    #[arg(long)]
    bad: String,
    #[arg(long, value_enum, default_value_t = Scale::Quick)]
    scale: Scale,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Two run directories; or one (against the run before it); or an
    /// experiment name (its latest two runs at --scale).
    runs: Vec<String>,
    #[arg(long, value_enum, default_value_t = Scale::Quick)]
    scale: Scale,
    /// Significance level for timing changes.
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Exit non-zero on `allocs` (any count changed) or `time:N%` (a
    /// significant slowdown over N%); repeatable.
    #[arg(long)]
    fail_on: Vec<String>,
    /// Also write the comparison as Markdown to this file.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ExportFormat {
    /// Gzipped profile.proto: `go tool pprof [-diff_base]`, Perfetto.
    Pprof,
    /// speedscope's JSON file format: bytes, allocations and bytes at the peak.
    Speedscope,
}

impl ExportFormat {
    /// The file name beside the trace: `<cell>` and this.
    fn suffix(self) -> &'static str {
        match self {
            ExportFormat::Pprof => ".pb.gz",
            ExportFormat::Speedscope => ".speedscope.json",
        }
    }
}

#[derive(Subcommand)]
enum TraceCmd {
    /// The top allocation sites of a trace, or of every trace of a dataset.
    Top {
        /// A `.dhat.json` trace, an `.events.json[.gz]` file (live at the
        /// end, and LEAK when a site keeps growing), a sampled profile
        /// (`.sampled.json[.gz]`, or pprof `.pb.gz` as a server's
        /// `heap_profile` answers it), or a dataset directory.
        path: PathBuf,
        /// bytes | blocks | peak (bytes live at the heap's peak) | lifetime
        /// (average) | live (bytes live at the end: a sampled profile's heap).
        #[arg(long, default_value = "bytes")]
        by: String,
        /// client | server | other: sites of one side only (transports).
        #[arg(long)]
        side: Option<String>,
        /// Sites per trace (default 10 for a file, 5 per trace of a dataset).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Per-site changes between two traces of the same cell.
    Diff {
        a: PathBuf,
        b: PathBuf,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Write a trace in another profiler's format: `pprof` (gzipped
    /// profile.proto, for `go tool pprof [-diff_base]` and Perfetto) or
    /// `speedscope` (its JSON file format).
    Export {
        path: PathBuf,
        #[arg(long, value_enum, default_value_t = ExportFormat::Pprof)]
        format: ExportFormat,
        /// Where (default: beside the trace, `<cell>.pb.gz` or `<cell>.speedscope.json`).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// What is live at an operation of an events file (the `events`
    /// build): the sites by live bytes, and a flame graph of them.
    Live {
        path: PathBuf,
        /// An operation index, `peak` or `end`.
        #[arg(long, default_value = "end")]
        at: String,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Also write the flame graph of live bytes here (SVG); with
        /// `--against`, the differential flame graph.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Another events file (another run, commit or codec): what is live
        /// in it at the same operation, site by site against this one.
        #[arg(long)]
        against: Option<PathBuf>,
    },
    /// The heap over the operation index of an events file: its peak, each
    /// site that grows after warm-up (slope, evidence; leaks flagged), and a
    /// chart of live bytes per site.
    Timeline {
        path: PathBuf,
        /// Operations before growth is judged (default: a tenth).
        #[arg(long)]
        warmup: Option<u64>,
        /// Also draw live bytes over operations (total and top sites) here (SVG).
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also write the timeline here as CSV (the whole heap and the 20
        /// sites largest at the peak, exact after each point's operation),
        /// and every site's growth after warm-up beside it (`NAME.growth.csv`).
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Operations between the CSV's points (default: a thousandth, at least 1).
        #[arg(long)]
        every: Option<u64>,
    },
    /// The allocation tree by caller, and a flame graph SVG beside the trace.
    Tree {
        path: PathBuf,
        /// Hide callers under this share of all bytes (percent).
        #[arg(long, default_value_t = 1.0)]
        min_share: f64,
        #[arg(long, default_value_t = 14)]
        depth: usize,
        /// Where to write the flame graph (default: TRACE with .flame.svg).
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Check a trace loads in DHAT's viewer and say how to open it.
    View { path: PathBuf },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = match cli.root {
        Some(r) => r,
        None => workbench::default_root(),
    };
    let data = cli.data.unwrap_or_else(|| root.join("data"));
    match cli.cmd {
        Cmd::Run(args) => run(&root, &data, args)?,
        Cmd::Collect(args) => collect(&root, &data, args)?,
        Cmd::SlurmTask { staging, index } => slurm::task(&staging, index)?,
        Cmd::Status { scale, check } => status(&root, &data, scale, check)?,
        Cmd::Tables { scale } => {
            let (_, written) = report::write_tables(&root, &data, scale)?;
            print_written(&root, &written);
        }
        Cmd::Figures { scale } => {
            let written = report::write_figures(&root, &data, scale)?;
            print_written(&root, &written);
        }
        Cmd::Columns => print_written(&root, &[workbench::data::columns::write(&root)?]),
        Cmd::List => list(&root, &data)?,
        Cmd::Claims => {
            let (audit, written) = workbench::paper::claims::write(&root, &data)?;
            print!("{}", audit.to_markdown());
            println!("verdicts: {:?}", audit.counts());
            print_written(&root, &written);
        }
        Cmd::Paper => paper(&root, &data)?,
        Cmd::Trace { cmd } => review(cmd)?,
        Cmd::Render { out } => render(&root, &data, &out.unwrap_or_else(|| root.join("report")))?,
        Cmd::Report { out } => {
            let w = workbench::site::write(&root, &data, &out.unwrap_or_else(|| root.join("report")), &|s| {
                eprintln!("report: {s}")
            })?;
            print_site(&w);
        }
        Cmd::History(args) => history_cmd(&root, &data, args)?,
        Cmd::Bisect(args) => bisect(&root, &data, args)?,
        Cmd::Compare(args) => compare_cmd(&data, args)?,
        Cmd::Gate { map, list } => gate_cmd(&root, map, list)?,
        Cmd::Bless { reason } => {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let written = workbench::gate::bless(&root, &reason, &multi)?;
            print_written(&root, &written);
        }
    }
    Ok(())
}

/// `workbench gate`: the gate, its map, or its cells.
fn gate_cmd(root: &Path, map: bool, list: bool) -> Result<()> {
    use workbench::gate;
    if map {
        print!("{}", gate::map::of(&gate::baseline::Baseline::load(root)?).render());
        return Ok(());
    }
    if list {
        let cells = gate::suite(root)?;
        println!("{}", gate::describe(&cells));
        for c in &cells {
            println!("  {}", c.id);
        }
        return Ok(());
    }
    gate::gate(root, &MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// `workbench run`: the chosen specs (or the stale ones), here or as a Slurm job array.
fn run(root: &Path, data: &Path, args: RunArgs) -> Result<()> {
    let RunArgs {
        specs,
        scale,
        fresh,
        no_report,
        allow_dirty,
        one_at_a_time,
        slurm,
        partition,
        account,
        time,
        no_wait,
        dry_run,
        plan,
        nodes,
        stale,
    } = args;
    let mut chosen = choose_specs(root, &specs)?;
    if stale {
        let needed: Vec<String> = workbench::run::fingerprint::survey(root, data, &[scale])?
            .into_iter()
            .filter(|e| e.needs_run())
            .map(|e| e.dataset)
            .collect();
        chosen.retain(|(_, s)| needed.iter().any(|d| d == s.dataset()));
        eprintln!("stale or missing at {scale}: {}", if needed.is_empty() { "none".into() } else { needed.join(", ") });
        if chosen.is_empty() {
            return Ok(());
        }
    }
    let opts = runner::Options {
        root: root.to_path_buf(),
        data: data.to_path_buf(),
        scale,
        fresh,
        // A plan or a dry run measures nothing.
        allow_dirty: allow_dirty || plan || dry_run,
        command_line: std::env::args().collect(),
        pair_counting: !one_at_a_time,
    };
    if plan {
        print!("{}", slurm::plan(&opts, &chosen, &nodes)?);
        return Ok(());
    }
    if slurm {
        let s = slurm::Options {
            partition,
            account,
            time,
            no_wait,
            dry_run,
            workbench: std::env::current_exe().context("locating the workbench binary")?,
        };
        return run_slurm(root, data, &opts, &chosen, &s, no_report);
    }
    for (path, spec) in &chosen {
        workbench::run::provenance::check_clean(root, allow_dirty, path, spec, scale)?;
    }
    workbench::run::provenance::check_self(root)?;
    // One measurement per machine: two at once would each show in the other's figures.
    let lock = workbench::run::provenance::MeasureLock::acquire(&format!("workbench run {}", specs.join(" ")))?;
    eprintln!("holding {} for this run", lock.path().display());
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let mut bins = runner::Binaries::default();
    let mut done = Vec::new();
    for (path, spec) in &chosen {
        let out = runner::run_spec(&opts, path, spec, &mut bins, &multi)
            .with_context(|| format!("running {} (rerun the same command to resume)", path.display()))?;
        done.push((spec.dataset().to_string(), out));
    }
    print_summary(root, scale, &done);
    if !no_report {
        report(root, data, scale)?;
    }
    Ok(())
}

/// `workbench collect`: a Slurm submission's finished cells published as datasets.
fn collect(root: &Path, data: &Path, args: CollectArgs) -> Result<()> {
    let CollectArgs { specs, scale } = args;
    let chosen = choose_specs(root, &specs)?;
    let opts = runner::Options {
        root: root.to_path_buf(),
        data: data.to_path_buf(),
        scale,
        fresh: false,
        allow_dirty: true,
        command_line: std::env::args().collect(),
        pair_counting: false,
    };
    let mut done = Vec::new();
    for (path, spec) in &chosen {
        let out = slurm::collect(&opts, path, spec).with_context(|| format!("collecting {}", path.display()))?;
        done.push((spec.dataset().to_string(), out));
    }
    print_summary(root, scale, &done);
    Ok(())
}

/// `workbench history`: a spec at sampled commits of a range, one dataset each.
fn history_cmd(root: &Path, data: &Path, args: HistoryArgs) -> Result<()> {
    let HistoryArgs { spec, commits, scale, steps } = args;
    let (path, spec) = choose_specs(root, &[spec])?.pop().context("no spec")?;
    let all = history::commits(root, &commits)?;
    if all.is_empty() {
        bail!("--commits {commits}: the range holds no commit");
    }
    let chosen = history::sample(&all, steps.unwrap_or(0));
    let _lock = workbench::run::provenance::MeasureLock::acquire(&format!("workbench history {}", spec.dataset()))?;
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let m = history::Measure { root, spec_path: &path, spec: &spec, scale, multi: &multi };
    eprintln!(
        "history of {} at {scale} scale: {} of the {} commits of {commits}",
        spec.dataset(),
        chosen.len(),
        all.len()
    );
    let out = history::run(&m, data, &chosen, &|s| workbench::run::runner::say(&multi, s))?;
    println!(
        "history of {}: {} measured, {} measured before, {} failed",
        spec.dataset(),
        out.measured.len(),
        out.reused.len(),
        out.failed.len()
    );
    for (c, why) in &out.failed {
        println!("  failed {} {}: {}", c.short(), c.subject, why.lines().next().unwrap_or(""));
    }
    println!("`workbench report` draws it (report/history/{}-{scale}.html)", spec.dataset());
    Ok(())
}

/// `workbench bisect`: the first commit where an exact count of one cell changed.
fn bisect(root: &Path, data: &Path, args: BisectArgs) -> Result<()> {
    let BisectArgs { spec, cell, metric, filters, good, bad, scale } = args;
    let (path, spec) = choose_specs(root, &[spec])?.pop().context("no spec")?;
    let filters = filters
        .iter()
        .map(|f| {
            f.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("--where {f}: not column=value"))
        })
        .collect::<Result<Vec<_>>>()?;
    let _lock = workbench::run::provenance::MeasureLock::acquire(&format!("workbench bisect {}", spec.dataset()))?;
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let m = history::Measure { root, spec_path: &path, spec: &spec, scale, multi: &multi };
    let q = history::bisect::Query { cell: &cell, metric: &metric, filters, good: &good, bad: &bad };
    let f = history::bisect::run(&m, data, &q, &|s| workbench::run::runner::say(&multi, s))?;
    println!("first commit where {metric} of {cell} changed: {} {}", f.commit.hash, f.commit.subject);
    println!("  before ({} {}): {}", f.before.short(), f.before.subject, f.old);
    println!("  after:  {}", f.new);
    println!(
        "  {} commits in the range; {} measured between the ends (⌈log2 {}⌉ = {}); {} runs reused",
        f.range,
        f.probed.len(),
        f.range,
        (f.range as f64).log2().ceil(),
        f.reused
    );
    match &f.sites {
        Some(s) => println!("\nallocation sites that differ:\n{s}"),
        None => println!("(no dhat traces of this cell to diff)"),
    }
    if let Some(p) = &f.flame {
        println!("differential allocation flame graph: {}", p.display());
    }
    Ok(())
}

/// `workbench compare`: two runs side by side; exits 1 on a `--fail-on` rule.
fn compare_cmd(data: &Path, args: CompareArgs) -> Result<()> {
    let CompareArgs { runs, scale, alpha, fail_on, markdown } = args;
    let rules = fail_on.iter().map(|r| compare::FailOn::parse(r)).collect::<Result<Vec<_>>>()?;
    let (a, b) = compare::resolve(data, &runs, scale)?;
    let (ra, rb) = (compare::load(&a)?, compare::load(&b)?);
    let c = compare::compare(&ra, &rb, alpha)?;
    let text = c.to_markdown();
    println!("{text}");
    if let Some(p) = markdown {
        std::fs::write(&p, &text).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote {}", p.display());
    }
    let failed = c.failures(&rules);
    if !failed.is_empty() {
        eprintln!("compare: {} failure(s) under --fail-on {}:", failed.len(), fail_on.join(" "));
        for f in &failed {
            eprintln!("  {f}");
        }
        std::process::exit(1);
    }
    Ok(())
}

/// `run --slurm`: every spec submitted (and, unless --no-wait, waited for
/// and published); the summary and the report as a local run's.
fn run_slurm(
    root: &Path,
    data: &Path,
    opts: &runner::Options,
    chosen: &[(PathBuf, spec::Spec)],
    s: &slurm::Options,
    no_report: bool,
) -> Result<()> {
    if !s.dry_run {
        for (path, spec) in chosen {
            workbench::run::provenance::check_clean(root, opts.allow_dirty, path, spec, opts.scale)?;
        }
        workbench::run::provenance::check_self(root)?;
    }
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let mut bins = runner::Binaries::default();
    let (mut done, mut submitted) = (Vec::new(), Vec::new());
    for (path, spec) in chosen {
        match slurm::run(opts, path, spec, &mut bins, &multi, s)
            .with_context(|| format!("running {} through Slurm (rerun the same command to resume)", path.display()))?
        {
            slurm::Done::Published(out) => done.push((spec.dataset().to_string(), out)),
            slurm::Done::Submitted { job, tasks } => {
                submitted.push(format!("{} (job {job}, {tasks} tasks)", spec.dataset()))
            }
            slurm::Done::DryRun => {}
        }
    }
    if !submitted.is_empty() {
        println!("submitted: {}", submitted.join(", "));
        let names: Vec<String> = chosen
            .iter()
            .map(|(p, _)| p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default())
            .collect();
        println!("when the jobs are done: workbench collect {} --scale {}", names.join(" "), opts.scale);
    }
    if !done.is_empty() {
        print_summary(root, opts.scale, &done);
        if !no_report {
            report(root, data, opts.scale)?;
        }
    }
    Ok(())
}

/// The end of a run: one line per dataset published.
fn print_summary(root: &Path, scale: Scale, done: &[(String, runner::Outcome)]) {
    println!("\nSummary ({scale} scale)");
    // Sized to the longest name, so `roundtrip-latency-awake` keeps the columns straight.
    let w = done.iter().map(|(e, _)| e.len()).max().unwrap_or(0).max("experiment".len());
    println!("{:<w$} {:>6} {:>8} {:>9} {:>9}  dataset", "experiment", "cells", "resumed", "records", "seconds");
    for (exp, o) in done {
        let rel = o.dir.strip_prefix(root).unwrap_or(&o.dir);
        println!("{exp:<w$} {:>6} {:>8} {:>9} {:>9.1}  {}", o.cells, o.resumed, o.records, o.seconds, rel.display());
    }
}

fn review(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Top { path, by, side, limit } => {
            let by = trace::By::parse(&by)
                .with_context(|| format!("--by {by:?}: use bytes, blocks, peak, lifetime or live"))?;
            let side = match side {
                Some(s) => {
                    Some(trace::Side::parse(&s).with_context(|| format!("--side {s:?}: use client, server or other"))?)
                }
                None => None,
            };
            let is_events = |p: &std::path::Path| p.to_string_lossy().contains(".events.json");
            // An events file: what is live at the end, and the verdict on growth.
            let (files, events) = if path.is_file() && is_events(&path) {
                (Vec::new(), vec![path.clone()])
            } else {
                let events = if path.is_dir() { trace::events::files_in(&path)? } else { Vec::new() };
                (trace::traces_in(&path)?, events)
            };
            if files.is_empty() && events.is_empty() {
                bail!("{}: no .dhat.json traces or .events.json files", path.display());
            }
            let limit = limit.unwrap_or(if files.len() + events.len() == 1 { 10 } else { 5 });
            for f in &files {
                let t = trace::Trace::load(f)?;
                println!("{}", trace::render_top(&t, by, side, limit));
            }
            for f in &events {
                let e = trace::events::Events::load(f)?;
                let warmup = e.operations() / 10;
                println!(
                    "{}live heap after warm-up ({} operations): {}\n",
                    trace::events::render_live(&e, trace::events::At::End, limit),
                    e.operations() / 10,
                    trace::events::verdict(&e, warmup)
                );
            }
        }
        TraceCmd::Diff { a, b, limit } => {
            let (ta, tb) = (trace::Trace::load(&a)?, trace::Trace::load(&b)?);
            print!("{}", trace::render_diff(&ta, &tb, &trace::diff(&ta, &tb), limit));
        }
        TraceCmd::Export { path, format, out } => {
            let t = trace::Trace::load(&path)?;
            let out = out.unwrap_or_else(|| {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                path.with_file_name(format!("{}{}", trace::stem(&name), format.suffix()))
            });
            match format {
                ExportFormat::Pprof => {
                    // The dataset's revision, from the manifest of `<run>/traces/<cell>.dhat.json`.
                    let commit = path
                        .parent()
                        .and_then(Path::parent)
                        .and_then(|run| workbench::data::dataset::load_run_manifest(run).ok())
                        .map(|m| m.git_revision);
                    trace::pprof::write(&t, commit, &out)?;
                }
                ExportFormat::Speedscope => trace::speedscope::write(&t, &out)?,
            }
            println!("wrote {} ({} sites)", out.display(), t.sites.len());
        }
        TraceCmd::Live { path, at, limit, svg, against: Some(b) } => {
            let ea = trace::events::Events::load(&path)?;
            let eb = trace::events::Events::load(&b)?;
            let at = trace::events::At::parse(&at)
                .with_context(|| format!("--at {at:?}: an operation index, peak or end"))?;
            // One operation for both: A's peak is where B is looked at too.
            let (op, said) = ea.resolve(at);
            let same = match (at, op) {
                (trace::events::At::End, _) | (_, None) => at,
                (_, Some(n)) => trace::events::At::Op(n),
            };
            let (ta, tb) = (ea.live_trace(same), eb.live_trace(same));
            println!("live {said} in both (A: {}, B: {})", path.display(), b.display());
            print!("{}", trace::render_diff(&ta, &tb, &trace::diff(&ta, &tb), limit));
            if let Some(out) = svg {
                let tree = trace::diff_flame::tree(&ta, &tb);
                std::fs::write(&out, trace::diff_flame::svg(&tree, &format!("bytes live {said}: A against B")))
                    .with_context(|| format!("writing {}", out.display()))?;
                println!("wrote {}", out.display());
            }
        }
        TraceCmd::Live { path, at, limit, svg, against: None } => {
            let e = trace::events::Events::load(&path)?;
            let at = trace::events::At::parse(&at)
                .with_context(|| format!("--at {at:?}: an operation index, peak or end"))?;
            print!("{}", trace::events::render_live(&e, at, limit));
            if let Some(out) = svg {
                let said = e.resolve(at).1;
                trace::tree::write_flamegraph_of(&e.live_trace(at), &out, &format!("bytes live {said}"))?;
                println!("wrote {}", out.display());
            }
        }
        TraceCmd::Timeline { path, warmup, svg, csv, every } => {
            let e = trace::events::Events::load(&path)?;
            let warmup = warmup.unwrap_or(e.operations() / 10);
            print!("{}", trace::events::render_growth(&e, warmup));
            if let Some(out) = svg {
                report::timeline::write_timeline(&e, &out)?;
                println!("wrote {}", out.display());
            }
            if let Some(out) = csv {
                let (peak, _) = e.resolve(trace::events::At::Peak);
                let keys: Vec<String> = e.live_at(peak).into_iter().take(20).map(|x| x.0).collect();
                let every = every.unwrap_or(e.operations().div_ceil(1000)).max(1);
                std::fs::write(&out, e.timeline_csv(&keys, every))
                    .with_context(|| format!("writing {}", out.display()))?;
                let stem = out.file_stem().unwrap_or_default().to_string_lossy().into_owned();
                let growth = out.with_file_name(format!("{stem}.growth.csv"));
                std::fs::write(&growth, e.growth_csv(warmup))
                    .with_context(|| format!("writing {}", growth.display()))?;
                println!("wrote {} and {}", out.display(), growth.display());
            }
        }
        TraceCmd::Tree { path, min_share, depth, svg } => {
            let t = trace::Trace::load(&path)?;
            for line in t.tree().render(min_share / 100.0, depth) {
                println!("{line}");
            }
            let out = svg.unwrap_or_else(|| {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().trim_end_matches(".json").to_string())
                    .unwrap_or_default();
                path.with_file_name(format!("{name}.flame.svg"))
            });
            trace::write_flamegraph(&t, &out)?;
            println!("wrote {}", out.display());
        }
        TraceCmd::View { path } => {
            let t = trace::Trace::load(&path)?;
            println!(
                "{}: a dhat v2 heap trace DHAT's viewer loads ({} sites, {} B in {} blocks, every site with frames, no repeated stack)",
                path.display(),
                t.sites.len(),
                workbench::fmt::thousands(t.total_bytes()),
                workbench::fmt::thousands(t.total_blocks())
            );
            match trace::viewer() {
                Some(v) => println!(
                    "open file://{} in a browser, press \"Load…\" and choose {}\n(the viewer opens sorted by total blocks, its fixed default; its \"Sort metric\" menu switches to bytes, which `workbench trace top` ranks by)",
                    v.display(),
                    std::fs::canonicalize(&path).unwrap_or(path.clone()).display()
                ),
                None => println!("DHAT's viewer (dh_view.html) ships with valgrind: apt-get install valgrind"),
            }
        }
    }
    Ok(())
}

fn report(root: &Path, data: &Path, scale: Scale) -> Result<()> {
    let analysis = report::analyse(root, data, scale)?;
    let mut written = analysis.write_tables(root)?;
    written.extend(analysis.write_figures(root)?);
    for t in &analysis.tables {
        println!("\n{}", t.to_markdown());
    }
    print_written(root, &written);
    Ok(())
}

/// `workbench render`: one analysis a scale feeds the tables, figures,
/// macros and site; the PDF builds beside the site.
fn render(root: &Path, data: &Path, out: &Path) -> Result<()> {
    let mut analyses = Vec::new();
    let mut written = Vec::new();
    for scale in Scale::ALL {
        let a = report::analyse(root, data, scale)?;
        written.extend(a.write_tables(root)?);
        written.extend(a.write_figures(root)?);
        analyses.push(a);
    }
    written.push(workbench::paper::write_macros_of(root, data, workbench::paper::chosen_of(&analyses))?);
    written.extend(workbench::paper::write_provenance_of(root, &analyses)?);
    written.extend(workbench::paper::write_determinism(root)?);
    written.push(report::timings::write(root, data)?);
    written.push(workbench::data::columns::write(root)?);
    let (audit, claims) = workbench::paper::claims::write(root, data)?;
    written.extend(claims);
    print_written(root, &written);
    println!("verdicts: {:?}", audit.counts());
    // The PDF (latexmk) and the site share nothing: one beside the other.
    let (pdf, site) = std::thread::scope(|s| {
        let pdf = s.spawn(|| workbench::paper::build(root));
        let site = workbench::site::write_of(root, data, out, &analyses, &audit, true, &|s| eprintln!("report: {s}"));
        (pdf.join().map_err(|_| anyhow::anyhow!("the paper's build panicked")), site)
    });
    print_site(&site?);
    let pdf = pdf??;
    println!("wrote {}", pdf.strip_prefix(root).unwrap_or(&pdf).display());
    Ok(())
}

/// `workbench list`: every spec, and the newest run of each at each scale.
fn list(root: &Path, data: &Path) -> Result<()> {
    for (path, s) in spec::load_dir(&root.join("experiments"))? {
        println!("{}  {} — {}", path.strip_prefix(root).unwrap_or(&path).display(), s.experiment, s.description);
    }
    for (_, s) in spec::load_dir(&root.join("experiments"))? {
        let exp = s.dataset();
        for scale in Scale::ALL {
            if let Some(d) = workbench::data::dataset::latest_run(data, exp, scale)? {
                println!("latest {scale} run of {exp}: {}", d.display());
            }
        }
    }
    Ok(())
}

/// `workbench paper`: the macros and the claims audit from data/, then the PDF.
fn paper(root: &Path, data: &Path) -> Result<()> {
    let analyses: Vec<report::Analysis> =
        Scale::ALL.iter().map(|&s| report::analyse(root, data, s)).collect::<Result<_>>()?;
    let mut written = vec![workbench::paper::write_macros_of(root, data, workbench::paper::chosen_of(&analyses))?];
    written.extend(workbench::paper::write_provenance_of(root, &analyses)?);
    written.extend(workbench::paper::write_determinism(root)?);
    written.extend(workbench::paper::claims::write(root, data)?.1);
    print_written(root, &written);
    let pdf = workbench::paper::build(root)?;
    println!("wrote {}", pdf.strip_prefix(root).unwrap_or(&pdf).display());
    Ok(())
}

fn print_site(w: &workbench::site::Written) {
    println!(
        "wrote {} experiment pages, {} trace pages, {} comparisons, {} histories: open {}",
        w.experiments,
        w.traces,
        w.compares,
        w.histories,
        w.index.display()
    );
}

fn print_written(root: &Path, written: &[PathBuf]) {
    for p in written {
        println!("wrote {}", p.strip_prefix(root).unwrap_or(p).display());
    }
}

/// `workbench status`: a line a dataset and scale, and what the newest full
/// runs take as git stores them; with `check`, an error naming every dataset
/// readers are shown that is not fresh, or the full runs past their limit.
fn status(root: &Path, data: &Path, scale: Option<Scale>, check: bool) -> Result<()> {
    let scales = scale.map_or(Scale::PREFERRED.to_vec(), |s| vec![s]);
    let entries = workbench::run::fingerprint::survey(root, data, &scales)?;
    for e in &entries {
        let run = e.run.as_ref().and_then(|r| r.file_name()).map_or("-".into(), |n| n.to_string_lossy().into_owned());
        let (word, why) = e.freshness.as_ref().map_or(("none", String::new()), |f| (f.word(), f.why()));
        let cited = if e.cited { " (cited)" } else { "" };
        println!("{:<24} {:<5} {:<8} {run}{cited}  {why}", e.dataset, e.scale, word);
    }
    let full: Vec<&PathBuf> =
        entries.iter().filter(|e| e.scale == Scale::Full).filter_map(|e| e.run.as_ref()).collect();
    let mut stored = 0;
    for dir in &full {
        stored += workbench::data::dataset::stored_bytes(dir)?;
    }
    let limit = workbench::data::dataset::FULL_SUITE_BYTES;
    if !full.is_empty() {
        println!(
            "the newest full runs ({}) take {} as git stores them; a full suite may add {}",
            full.len(),
            workbench::fmt::bytes(stored as f64),
            workbench::fmt::bytes(limit as f64)
        );
    }
    let mut bad: Vec<String> =
        entries.iter().filter(|e| e.cited && e.needs_run()).map(|e| format!("{} ({})", e.dataset, e.scale)).collect();
    if stored > limit {
        bad.push(format!(
            "the full runs together ({} stored, past {}: shrink what a dataset keeps)",
            workbench::fmt::bytes(stored as f64),
            workbench::fmt::bytes(limit as f64)
        ));
    }
    if check && !bad.is_empty() {
        bail!(
            "{} the paper reads not fresh: {}",
            if bad.len() == 1 { "a dataset" } else { "datasets" },
            bad.join(", ")
        );
    }
    Ok(())
}

/// Resolves spec arguments: none or `quick` = every spec; else names or paths.
fn choose_specs(root: &Path, args: &[String]) -> Result<Vec<(PathBuf, spec::Spec)>> {
    let dir = root.join("experiments");
    if args.is_empty() || args == ["quick"] {
        let all = spec::load_dir(&dir)?;
        if all.is_empty() {
            bail!("no specs in {}", dir.display());
        }
        return Ok(all);
    }
    args.iter()
        .map(|a| {
            let p = PathBuf::from(a);
            let path = if p.exists() { p } else { dir.join(format!("{a}.toml")) };
            if !path.exists() {
                bail!("spec {a:?}: neither a file nor {}", path.display());
            }
            Ok((path.clone(), spec::Spec::load(&path)?))
        })
        .collect()
}
