//! `workbench`: run experiment suites, regenerate tables and figures.
//!
//! # Layout
//! - this file: the arguments (clap types) and the one match that calls a
//!   command; the work is the `runner`, `analysis` and `site` crates'.
//! - `measure`: `run`, `collect`, `history`, `bisect`.
//! - `outputs`: tables, figures, the paper, the site, `render`, `status`, the gate.
//! - `review`: `trace …` and `compare`.

use analysis::history;
use analysis::inspect::{compare, trace};
use analysis::report;
use analysis::run::{runner, slurm};
use analysis::spec::{self, Scale};
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{MultiProgress, ProgressDrawTarget};
use std::path::{Path, PathBuf};

mod measure;
mod outputs;
mod review;

use measure::*;
use outputs::*;
use review::*;

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
    /// sources (only inputs that reach its binaries changed: `run --stale`
    /// compares the binaries), stale (the inputs that changed, and the
    /// first commit that changed each) or unknown (an input that cannot be
    /// computed here, and why; no fingerprint).
    Status {
        /// One scale (default: both).
        #[arg(long, value_enum)]
        scale: Option<Scale>,
        /// Fail when a dataset readers are shown (the paper's) is not fresh.
        #[arg(long)]
        check: bool,
    },
    /// A binary's identity as manifests record it: the hash of what it
    /// loads (allocated ELF sections; debug info, build id and the revision
    /// stamp it answers to `--revision` left out).
    Identity {
        #[arg(required = true)]
        binaries: Vec<PathBuf>,
        /// The revision stamp to mask (default: what each binary answers to `--revision`).
        #[arg(long)]
        stamp: Option<String>,
    },
    /// Remove the runs the tree need not keep (neither the newest of their
    /// experiment and scale nor cited by a tracked file outside data/),
    /// oldest first, listing each in data/PRUNED.tsv with the last commit
    /// that held it; commit the removal.
    Prune {
        /// Remove at most this many MB (a submission's diff is bounded).
        #[arg(long)]
        max_mb: Option<u64>,
        /// List what would go; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Bring a pruned run (`<experiment>/<run id>`, as data/PRUNED.tsv lists
    /// it) back under data/ from the last commit that held it.
    Restore { run: String },
    /// Pack the traces of runs measured before traces were archived into
    /// each run's traces.tar.zst, newest run first; commit the change.
    Pack {
        /// Pack at most this many MB of trace files (a submission's diff is bounded).
        #[arg(long)]
        max_mb: Option<u64>,
        /// List what would be packed; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Unpack runs' traces (plain JSON, as DHAT's viewer loads them) into
    /// each run's traces/ directory, which git ignores; prints the directories.
    Unpack {
        #[arg(required = true)]
        runs: Vec<PathBuf>,
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
    /// What each commit of a range that touched a measured input ages of
    /// the newest datasets, judged by the sources (as before binaries had
    /// identities) and by the code that ran (each build compared at the
    /// commit and its parent, in the history worktree): datasets, cells and
    /// the seconds those cells took. Prints a Markdown table.
    Aging {
        /// A commit range (`A..B`).
        commits: String,
        #[arg(long, value_enum, default_value_t = Scale::Full)]
        scale: Scale,
        /// Judge at most this many commits, the newest of those that touched a measured input.
        #[arg(long)]
        last: Option<usize>,
    },
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
    /// Only the chosen specs whose newest dataset at --scale must be
    /// measured again: stale, unknown or missing (`workbench status`). A
    /// dataset whose only changed inputs reach its binaries, or a fresh one
    /// without their identities on record, is first judged by its binaries
    /// built now: certified at HEAD without measuring when each is identical
    /// (with --plan: said, nothing written).
    #[arg(long)]
    stale: bool,
    /// With --stale: certify what holds (binaries identical) and measure nothing.
    #[arg(long, requires = "stale")]
    no_measure: bool,
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
        None => analysis::default_root(),
    };
    let data = cli.data.unwrap_or_else(|| root.join("data"));
    match cli.cmd {
        Cmd::Run(args) => run(&root, &data, args)?,
        Cmd::Collect(args) => collect(&root, &data, args)?,
        Cmd::Prune { max_mb, dry_run } => {
            use analysis::data::prune;
            let done = prune::prune(&root, &data, max_mb.map(|m| m * 1_000_000), dry_run)?;
            let bytes: u64 = done.iter().map(|p| p.bytes).sum();
            for p in &done {
                println!("{} {}", if dry_run { "would prune" } else { "pruned" }, p.run);
            }
            let left = prune::candidates(&data, &prune::cited(&root)?)?.len() - if dry_run { done.len() } else { 0 };
            println!(
                "{} runs, {}{}; {left} more the tree need not keep",
                done.len(),
                analysis::fmt::bytes(bytes as f64),
                if dry_run { "" } else { " (listed in data/PRUNED.tsv; commit the removal)" }
            );
        }
        Cmd::Restore { run } => {
            let dir = analysis::data::prune::restore(&root, &data, &run)?;
            println!("restored {}", dir.display());
        }
        Cmd::Pack { max_mb, dry_run } => {
            let done = analysis::data::traces::pack_all(&data, max_mb.map(|m| m * 1_000_000), dry_run)?;
            for p in &done {
                println!("{} {}", if dry_run { "would pack" } else { "packed" }, p.run.display());
            }
            let bytes: u64 = done.iter().map(|p| p.bytes).sum();
            println!(
                "{} runs, {} of trace files{}",
                done.len(),
                analysis::fmt::bytes(bytes as f64),
                if dry_run { "" } else { " now in their runs' traces.tar.zst (commit the change)" }
            );
        }
        Cmd::Unpack { runs } => {
            for run in runs {
                let dir = analysis::data::traces::unpacked(&run)?;
                if !dir.is_dir() {
                    bail!("{}: no traces (neither traces/ nor traces.tar.zst)", run.display());
                }
                println!("{}", dir.display());
            }
        }
        Cmd::Identity { binaries, stamp } => identity(&binaries, stamp.as_deref())?,
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
        Cmd::Columns => print_written(&root, &[analysis::data::columns::write(&root)?]),
        Cmd::List => list(&root, &data)?,
        Cmd::Claims => {
            let (audit, written) = analysis::paper::claims::write(&root, &data)?;
            print!("{}", audit.to_markdown());
            println!("verdicts: {:?}", audit.counts());
            print_written(&root, &written);
        }
        Cmd::Paper => paper(&root, &data)?,
        Cmd::Trace { cmd } => review(cmd)?,
        Cmd::Render { out } => render(&root, &data, &out.unwrap_or_else(|| root.join("report")))?,
        Cmd::Report { out } => {
            let w =
                site::write(&root, &data, &out.unwrap_or_else(|| root.join("report")), &|s| eprintln!("report: {s}"))?;
            print_site(&w);
        }
        Cmd::History(args) => history_cmd(&root, &data, args)?,
        Cmd::Bisect(args) => bisect(&root, &data, args)?,
        Cmd::Aging { commits, scale, last } => aging(&root, &data, &commits, scale, last)?,
        Cmd::Compare(args) => compare_cmd(&data, args)?,
        Cmd::Gate { map, list } => gate_cmd(&root, map, list)?,
        Cmd::Bless { reason } => {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let written = analysis::gate::bless(&root, &reason, &multi)?;
            print_written(&root, &written);
        }
    }
    Ok(())
}
