//! `workbench`: run experiment suites, regenerate tables and figures.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{MultiProgress, ProgressDrawTarget};
use std::path::{Path, PathBuf};
use workbench::{figures, runner, spec, tables};

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
    Run {
        /// `quick`, or spec names (experiments/NAME.toml) or paths; none = every spec.
        specs: Vec<String>,
        /// `quick` (the whole suite in minutes) or `full` (the papers' scales).
        #[arg(long, default_value = "quick")]
        scale: String,
        /// Discard finished cells of an interrupted run instead of resuming it.
        #[arg(long)]
        fresh: bool,
        /// Do not regenerate tables and figures afterwards.
        #[arg(long)]
        no_report: bool,
        /// Measure uncommitted code anyway; the diff is stored in each dataset.
        #[arg(long)]
        allow_dirty: bool,
    },
    /// Regenerate paper/generated/*.{tex,md} from data/ (runs nothing).
    Tables {
        #[arg(long, default_value = "quick")]
        scale: String,
    },
    /// Regenerate figures/*.{svg,png} from data/ (runs nothing).
    Figures {
        #[arg(long, default_value = "quick")]
        scale: String,
    },
    /// List specs and finished runs.
    List,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = match cli.root {
        Some(r) => r,
        None => workbench::default_root(),
    };
    let data = cli.data.unwrap_or_else(|| root.join("data"));
    match cli.cmd {
        Cmd::Run { specs, scale, fresh, no_report, allow_dirty } => {
            if scale != "quick" && scale != "full" {
                bail!("--scale {scale:?}: use quick or full");
            }
            let chosen = choose_specs(&root, &specs)?;
            workbench::provenance::check_clean(&root, allow_dirty)?;
            // One measurement per machine: two at once would each show in the other's figures.
            let lock = workbench::provenance::MeasureLock::acquire(&format!("workbench run {}", specs.join(" ")))?;
            eprintln!("holding {} for this run", lock.path().display());
            let opts = runner::Options {
                root: root.clone(),
                data: data.clone(),
                scale: scale.clone(),
                fresh,
                allow_dirty,
                command_line: std::env::args().collect(),
            };
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let mut bins = runner::Binaries::default();
            let mut done = Vec::new();
            for (path, spec) in &chosen {
                let out = runner::run_spec(&opts, path, spec, &mut bins, &multi)
                    .with_context(|| format!("running {} (rerun the same command to resume)", path.display()))?;
                done.push((spec.experiment.clone(), out));
            }
            println!("\nSummary ({scale} scale)");
            println!("{:<16} {:>6} {:>8} {:>9} {:>9}  dataset", "experiment", "cells", "resumed", "records", "seconds");
            for (exp, o) in &done {
                let rel = o.dir.strip_prefix(&root).unwrap_or(&o.dir);
                println!(
                    "{exp:<16} {:>6} {:>8} {:>9} {:>9.1}  {}",
                    o.cells,
                    o.resumed,
                    o.records,
                    o.seconds,
                    rel.display()
                );
            }
            if !no_report {
                report(&root, &data, &scale)?;
            }
        }
        Cmd::Tables { scale } => {
            let (_, written) = tables::write_all(&root, &data, &scale)?;
            print_written(&root, &written);
        }
        Cmd::Figures { scale } => {
            let written = figures::write_all(&root, &data, &scale)?;
            print_written(&root, &written);
        }
        Cmd::List => {
            for (path, s) in spec::load_dir(&root.join("experiments"))? {
                println!(
                    "{}  {} — {}",
                    path.strip_prefix(&root).unwrap_or(&path).display(),
                    s.experiment,
                    s.description
                );
            }
            for exp in subjects::experiments::NAMES {
                for scale in ["quick", "full"] {
                    if let Some(d) = workbench::dataset::latest_run(&data, exp, scale)? {
                        println!("latest {scale} run of {exp}: {}", d.display());
                    }
                }
            }
        }
    }
    Ok(())
}

fn report(root: &Path, data: &Path, scale: &str) -> Result<()> {
    let (tables, mut written) = tables::write_all(root, data, scale)?;
    written.extend(figures::write_all(root, data, scale)?);
    for t in &tables {
        println!("\n{}", t.to_markdown());
    }
    print_written(root, &written);
    Ok(())
}

fn print_written(root: &Path, written: &[PathBuf]) {
    for p in written {
        println!("wrote {}", p.strip_prefix(root).unwrap_or(p).display());
    }
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
