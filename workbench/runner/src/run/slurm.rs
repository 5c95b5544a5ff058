//! Cells as a Slurm job array: one array per spec, one task per cell not
//! yet done, each task running its cell exactly as the local runner does
//! (`workbench slurm-task`, [`task`]) and writing its records where the local
//! runner would (the run's staging directory, which must be on a file system
//! the nodes share). The dataset is then published exactly as a local run's
//! ([`runner::assemble`]), with each cell's node in the manifest.
//!
//! A run that is interrupted, or whose tasks failed, is resumed by the same
//! command: like the local runner it skips every cell on disk, so only the
//! missing cells are submitted again. `--no-wait` returns after submitting;
//! `workbench collect` publishes later ([`collect`]).
//!
//! Honest timings across nodes: a spec with any timing build (every build
//! but dhat, whose counts are exact wherever they run) asks for whole nodes
//! (`--exclusive`), so no two of its cells share a node's cores, and all its
//! tasks run on one node (`--nodelist`, the partition's nodes dealt to such
//! specs by name), so every ratio between its cells is a ratio within one
//! machine. Count-only specs spread over every node.
//!
//! # Layout of a submission (under the staging directory)
//! - `slurm/tasks.jsonl`: task i's cell and binary, line i;
//! - `slurm/job.sh`: the sbatch script; `slurm/submission.json`: the job id
//!   and what the run recorded when it submitted;
//! - `bin/`: the binaries the tasks run (copies, so a rebuild here cannot
//!   change what a queued task runs), the workbench included; removed
//!   before the dataset is published;
//! - `logs/slurm-<job>_<task>.out`: each task's output.

use crate::data::manifest;
use crate::run::runner::{self, Before, Binaries, CellMeta, Outcome, Planned};
use crate::spec::Spec;
use anyhow::{bail, Context, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How to submit.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// Each task's time limit (sbatch `--time`).
    pub time: Option<String>,
    /// Return after submitting; `workbench collect` publishes later.
    pub no_wait: bool,
    /// Print the sbatch script and the tasks; build and submit nothing.
    pub dry_run: bool,
    /// The workbench binary the tasks run (`workbench slurm-task`).
    pub workbench: PathBuf,
}

/// One task: a planned cell and the binary to run it with.
#[derive(Debug, Serialize, Deserialize)]
struct Task {
    cell: Planned,
    bin: PathBuf,
}

/// What a submission recorded, for `collect` in another process.
#[derive(Debug, Serialize, Deserialize)]
struct Submission {
    job: String,
    /// Unix seconds.
    submitted: u64,
    tasks: usize,
    resumed: usize,
    load: Option<[f64; 3]>,
    rev: String,
    dirty: bool,
}

/// How a spec's submission ended.
pub enum Done {
    Published(Outcome),
    Submitted { job: String, tasks: usize },
    DryRun,
}

/// Whether the spec's cells each need a node to themselves, all the same
/// one ([`runner::machine_bound`]).
pub fn exclusive(spec: &Spec, opts: &runner::Options) -> bool {
    runner::machine_bound(spec, opts.scale)
}

fn slurm_dir(staging: &Path) -> PathBuf {
    staging.join("slurm")
}

/// Single-quoted for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The sbatch script of a job array of `tasks` tasks over `staging`.
fn script(
    spec: &Spec,
    opts: &runner::Options,
    s: &Options,
    staging: &Path,
    workbench: &Path,
    tasks: usize,
    node: Option<&str>,
) -> String {
    let mut out = String::from("#!/bin/sh\n");
    let mut directive = |k: &str, v: Option<&str>| {
        out.push_str(&match v {
            Some(v) => format!("#SBATCH --{k}={v}\n"),
            None => format!("#SBATCH --{k}\n"),
        })
    };
    directive("job-name", Some(&format!("wb-{}-{}", spec.dataset(), opts.scale)));
    directive("array", Some(&format!("0-{}", tasks.saturating_sub(1))));
    directive("output", Some(&format!("{}/logs/slurm-%A_%a.out", staging.display())));
    directive("ntasks", Some("1"));
    if exclusive(spec, opts) {
        directive("exclusive", None);
    }
    if let Some(n) = node {
        directive("nodelist", Some(n));
    }
    for (k, v) in [("partition", &s.partition), ("account", &s.account), ("time", &s.time)] {
        if let Some(v) = v {
            directive(k, Some(v));
        }
    }
    out.push_str(&format!(
        "exec {} slurm-task {} \"$SLURM_ARRAY_TASK_ID\"\n",
        quote(&workbench.display().to_string()),
        quote(&staging.display().to_string())
    ));
    out
}

/// The node all of a timed spec's tasks run on: the partition's nodes
/// (`sinfo`), dealt to specs by a hash of the dataset's name, so that
/// different timed specs spread over the nodes and a resubmission of one
/// goes back to the same node.
fn node_for(spec: &Spec, s: &Options) -> Result<String> {
    let mut args = vec!["-h", "-N", "-o", "%N"];
    if let Some(p) = &s.partition {
        args.extend(["-p", p.as_str()]);
    }
    let nodes: BTreeSet<String> =
        slurm_cmd("sinfo", &args)?.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    if nodes.is_empty() {
        bail!("sinfo {} lists no node to run {} on", args.join(" "), spec.dataset());
    }
    let h = spec.dataset().bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    Ok(nodes.iter().nth((h % nodes.len() as u64) as usize).cloned().unwrap_or_default())
}

/// Removes the binaries copied for the tasks: a dataset holds records,
/// traces and logs, not executables.
fn drop_binaries(staging: &Path) -> Result<()> {
    let bin = staging.join("bin");
    if bin.exists() {
        std::fs::remove_dir_all(&bin).with_context(|| format!("removing {}", bin.display()))?;
    }
    Ok(())
}

/// Runs `program args`, returning its standard output; a missing program
/// or a failure is an error naming the command and what it printed.
fn slurm_cmd(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program).args(args).output().with_context(|| {
        format!("running {program}: is Slurm's client installed (Debian: slurm-client) and SLURM_CONF set?")
    })?;
    if !out.status.success() {
        bail!("{program} {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The state of each task of `job` still known to the scheduler (array
/// index → squeue's state code: PD, R, CG, …); empty once the job is gone.
fn queued(job: &str) -> Result<BTreeMap<usize, String>> {
    let out = Command::new("squeue").args(["-h", "-r", "-j", job, "-o", "%K %t"]).output().context("running squeue")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // A job that ended longer ago than the controller remembers.
        if err.contains("Invalid job id") {
            return Ok(BTreeMap::new());
        }
        bail!("squeue -j {job} failed ({}): {}", out.status, err.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.to_string()))
        })
        .collect())
}

fn read_submission(staging: &Path) -> Result<Option<Submission>> {
    let path = slurm_dir(staging).join("submission.json");
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(serde_json::from_str(&t).with_context(|| format!("reading {}", path.display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Runs `spec`'s cells through Slurm and publishes the dataset (unless
/// `--no-wait` or `--dry-run`).
pub fn run(
    opts: &runner::Options,
    spec_path: &Path,
    spec: &Spec,
    bins: &mut Binaries,
    multi: &MultiProgress,
    s: &Options,
) -> Result<Done> {
    if s.dry_run {
        // Writes nothing: not even the staging directory.
        let inputs = crate::run::fingerprint::Inputs::of(&opts.root, spec_path, spec, opts.scale)?;
        let (cells, staging) = (runner::plan(spec, opts.scale)?, runner::staging_dir(opts, spec, &inputs)?);
        let pending: Vec<&Planned> = cells.iter().filter(|p| !runner::cell_done(&staging, &p.id)).collect();
        println!("# {}: {} cells, {} to submit", spec.dataset(), cells.len(), pending.len());
        let node = exclusive(spec, opts).then_some("<one node of the partition, chosen at submission>");
        println!("{}", script(spec, opts, s, &staging, &staging.join("bin").join("workbench"), pending.len(), node));
        for (i, p) in pending.iter().enumerate() {
            println!("# task {i}: {} ({} build)", p.id, p.variant);
        }
        return Ok(Done::DryRun);
    }
    let (cells, staging, before) = runner::prepare(opts, spec_path, spec)?;
    let pending: Vec<&Planned> = cells.iter().filter(|p| !runner::cell_done(&staging, &p.id)).collect();
    let resumed = cells.len() - pending.len();
    if !pending.is_empty() {
        if let Some(old) = read_submission(&staging)? {
            if !queued(&old.job)?.is_empty() {
                bail!(
                    "job {} of this run is still queued or running; wait for it (`workbench collect`) or cancel it (`scancel {}`)",
                    old.job,
                    old.job
                );
            }
        }
        let job = submit(opts, spec, s, &staging, &pending, &before, resumed, bins, multi)?;
        if s.no_wait {
            return Ok(Done::Submitted { job, tasks: pending.len() });
        }
        wait(&job, &staging, &pending, spec.dataset(), multi)?;
    }
    let missing: Vec<&str> =
        cells.iter().filter(|p| !runner::cell_done(&staging, &p.id)).map(|p| p.id.as_str()).collect();
    if !missing.is_empty() {
        bail!(
            "{} of {} cells have no records (their tasks failed: see {}/logs/slurm-*.out); the same command submits only those again",
            missing.len(),
            cells.len(),
            staging.display()
        );
    }
    drop_binaries(&staging)?;
    let built = bins.built_for(&cells);
    Ok(Done::Published(runner::assemble(opts, spec_path, spec, &cells, &staging, resumed, before, built, false)?))
}

/// Builds each variant the pending cells need (here, once), copies the
/// binaries beside the tasks, writes the tasks and the script, submits.
#[allow(clippy::too_many_arguments)]
fn submit(
    opts: &runner::Options,
    spec: &Spec,
    s: &Options,
    staging: &Path,
    pending: &[&Planned],
    before: &Before,
    resumed: usize,
    bins: &mut Binaries,
    multi: &MultiProgress,
) -> Result<String> {
    let bin_dir = staging.join("bin");
    let mut copies: BTreeMap<(crate::spec::Target, String), PathBuf> = BTreeMap::new();
    let needed: BTreeSet<(crate::spec::Target, String)> =
        pending.iter().map(|p| (p.target, p.variant.clone())).collect();
    for (target, variant) in needed {
        let bin = bins.get(&opts.root, target, &variant, multi)?;
        runner::check_revision(&bin, &before.rev)?;
        let name = target.package_and_bin().1;
        let copy = crate::run::build::copy_binaries(&bin, &bin_dir.join(format!("{name}-{variant}")), target)?;
        copies.insert((target, variant), copy);
    }
    let workbench = bin_dir.join("workbench");
    std::fs::copy(&s.workbench, &workbench)
        .with_context(|| format!("copying {} to {}", s.workbench.display(), workbench.display()))?;
    let dir = slurm_dir(staging);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tasks = String::new();
    for p in pending {
        let bin = copies[&(p.target, p.variant.clone())].clone();
        tasks.push_str(&serde_json::to_string(&Task { cell: (*p).clone(), bin })?);
        tasks.push('\n');
    }
    crate::data::dataset::write_atomic(&dir.join("tasks.jsonl"), tasks.as_bytes())?;
    let script_path = dir.join("job.sh");
    let node = if exclusive(spec, opts) { Some(node_for(spec, s)?) } else { None };
    crate::data::dataset::write_atomic(
        &script_path,
        script(spec, opts, s, staging, &workbench, pending.len(), node.as_deref()).as_bytes(),
    )?;
    let out = slurm_cmd("sbatch", &["--parsable", &script_path.display().to_string()])?;
    // `--parsable` prints `<job>` or `<job>;<cluster>`.
    let job = out.trim().split(';').next().unwrap_or_default().to_string();
    if job.is_empty() {
        bail!("sbatch printed no job id for {}", script_path.display());
    }
    let sub = Submission {
        job: job.clone(),
        submitted: manifest::now_secs(),
        tasks: pending.len(),
        resumed,
        load: before.load,
        rev: before.rev.clone(),
        dirty: before.dirty,
    };
    crate::data::dataset::write_atomic(&dir.join("submission.json"), serde_json::to_string_pretty(&sub)?.as_bytes())?;
    runner::say(
        multi,
        format!(
            "{}: submitted job {job}, {} tasks{} (script {})",
            spec.dataset(),
            pending.len(),
            match &node {
                Some(n) => format!(", one at a time on {n}"),
                None => String::new(),
            },
            script_path.display()
        ),
    );
    Ok(job)
}

/// Waits for `job` to leave the queue, showing its tasks pending, running,
/// done and failed (left the queue without records).
fn wait(job: &str, staging: &Path, pending: &[&Planned], dataset: &str, multi: &MultiProgress) -> Result<()> {
    let bar = multi.add(ProgressBar::new(pending.len() as u64));
    bar.set_style(
        ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} tasks {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(dataset.to_string());
    let mut last = String::new();
    loop {
        let states = queued(job)?;
        let done = pending.iter().filter(|p| runner::cell_done(staging, &p.id)).count();
        let pd = states.values().filter(|s| s.as_str() == "PD").count();
        let running = states.len() - pd;
        let failed = (0..pending.len())
            .filter(|i| !states.contains_key(i) && !runner::cell_done(staging, &pending[*i].id))
            .count();
        let msg = format!("job {job}: {pd} pending, {running} running, {done} done, {failed} failed");
        bar.set_position(done as u64);
        bar.set_message(msg.clone());
        if multi.is_hidden() && msg != last {
            eprintln!("{dataset}: {msg}");
        }
        last = msg;
        if states.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    bar.finish_and_clear();
    Ok(())
}

/// `workbench slurm-task STAGING INDEX`: runs task INDEX of a submission
/// on this node, as the local runner runs a cell, and writes its records.
pub fn task(staging: &Path, index: usize) -> Result<()> {
    let path = slurm_dir(staging).join("tasks.jsonl");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let line = text.lines().nth(index).with_context(|| format!("{}: no task {index}", path.display()))?;
    let t: Task = serde_json::from_str(line).with_context(|| format!("{}: task {index}", path.display()))?;
    let node = manifest::Node::this();
    eprintln!("task {index}: cell {} on {} ({})", t.cell.id, node.hostname, node.cpu_model);
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
    let start = Instant::now();
    let records = runner::run_cell(&t.bin, &t.cell, staging, &multi)?;
    let meta = CellMeta { seconds: start.elapsed().as_secs_f64(), node: Some(node), records: None };
    runner::write_cell(staging, &t.cell.id, &records, &meta)?;
    eprintln!("task {index}: {} records in {:.1} s", records.len(), meta.seconds);
    Ok(())
}

/// `workbench collect`: publishes a `--no-wait` submission once every cell
/// has its records; otherwise says what is still queued or missing.
pub fn collect(opts: &runner::Options, spec_path: &Path, spec: &Spec) -> Result<Outcome> {
    let (cells, staging, prepared) = runner::prepare(opts, spec_path, spec)?;
    let sub = read_submission(&staging)?.with_context(|| {
        format!(
            "{} at {} scale: nothing submitted (no {}); run `workbench run {} --slurm` first",
            spec.dataset(),
            opts.scale,
            slurm_dir(&staging).join("submission.json").display(),
            spec_path.display()
        )
    })?;
    let missing = cells.iter().filter(|p| !runner::cell_done(&staging, &p.id)).count();
    if missing > 0 {
        let states = queued(&sub.job)?;
        if !states.is_empty() {
            let pd = states.values().filter(|s| s.as_str() == "PD").count();
            bail!(
                "job {} is not finished: {pd} tasks pending, {} running, {} of {} cells done",
                sub.job,
                states.len() - pd,
                cells.len() - missing,
                cells.len()
            );
        }
        bail!(
            "job {} ended with {missing} of {} cells without records (see {}/logs/slurm-{}_*.out); `workbench run {} --slurm` submits only those again",
            sub.job,
            cells.len(),
            staging.display(),
            sub.job,
            spec_path.display()
        );
    }
    let waited = manifest::now_secs().saturating_sub(sub.submitted);
    let before = Before {
        start: Instant::now().checked_sub(Duration::from_secs(waited)).unwrap_or_else(Instant::now),
        load: sub.load,
        ticks: BTreeMap::new(),
        rev: sub.rev,
        dirty: sub.dirty,
        inputs: prepared.inputs,
    };
    drop_binaries(&staging)?;
    runner::assemble(opts, spec_path, spec, &cells, &staging, sub.resumed, before, None, false)
}

/// The longest machine's load when `durations` are list-scheduled, longest
/// first, onto `nodes` machines that each run one cell at a time (LPT).
pub fn makespan(durations: &[f64], nodes: usize) -> f64 {
    let mut sorted = durations.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut load = vec![0.0_f64; nodes.max(1)];
    for d in sorted {
        let i = (0..load.len()).min_by(|&a, &b| load[a].total_cmp(&load[b])).unwrap_or(0);
        load[i] += d;
    }
    load.into_iter().fold(0.0, f64::max)
}

/// `workbench run --plan --nodes N,…`: the suite's wall time projected from
/// the cell durations of each spec's latest run at `opts.scale` (builds and
/// queueing not included), one cell per node at a time, a timed spec's cells
/// all on one node (one job of their summed time).
pub fn plan(opts: &runner::Options, specs: &[(PathBuf, Spec)], nodes: &[usize]) -> Result<String> {
    let mut durations = Vec::new();
    let mut out = String::new();
    let mut without = Vec::new();
    for (_, spec) in specs {
        let Some(dir) = crate::data::dataset::latest_run(&opts.data, spec.dataset(), opts.scale)? else {
            without.push(format!("{} (no {} run)", spec.dataset(), opts.scale));
            continue;
        };
        let m = crate::data::dataset::load_run_manifest(&dir)?;
        if m.cell_seconds.is_empty() {
            without.push(format!("{} ({} records no cell durations)", spec.dataset(), dir.display()));
            continue;
        }
        let sum: f64 = m.cell_seconds.values().sum();
        // A timed spec's cells run one after another on one node (`--nodelist`).
        let pinned = exclusive(spec, opts);
        out.push_str(&format!(
            "{:<24} {:>5} cells {:>9.1} s{}  {}\n",
            spec.dataset(),
            m.cell_seconds.len(),
            sum,
            if pinned { " (one node)" } else { "" },
            dir.display()
        ));
        if pinned {
            durations.push(sum);
        } else {
            durations.extend(m.cell_seconds.values().copied());
        }
    }
    if durations.is_empty() {
        out.push_str(&format!("no {} run of these specs records its cell durations: nothing to project\n", opts.scale));
        out.push_str(&format!("not in the projection: {}\n", without.join("; ")));
        return Ok(out);
    }
    let total: f64 = durations.iter().sum();
    let longest = durations.iter().copied().fold(0.0, f64::max);
    out.push_str(&format!(
        "\n{} jobs (a timed spec's cells are one), {total:.1} s of cells at {} scale; longest job {longest:.1} s (no projection goes below it)\n",
        durations.len(),
        opts.scale
    ));
    out.push_str(&format!("{:>6} {:>12} {:>9}\n", "nodes", "wall (s)", "speed-up"));
    for &n in nodes {
        let w = makespan(&durations, n);
        out.push_str(&format!("{n:>6} {w:>12.1} {:>8.2}×\n", if w > 0.0 { total / w } else { 1.0 }));
    }
    if !without.is_empty() {
        out.push_str(&format!("not in the projection: {}\n", without.join("; ")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_scheduling_longest_first() {
        let d = [5.0, 4.0, 3.0, 3.0, 3.0];
        assert_eq!(makespan(&d, 1), 18.0);
        // Longest first onto the least loaded: A 5, B 4, B 7, A 8, B 10
        // (the best split, 9, is not what list scheduling promises).
        assert_eq!(makespan(&d, 2), 10.0);
        assert_eq!(makespan(&d, 16), 5.0);
        assert_eq!(makespan(&[], 4), 0.0);
    }

    fn unused_sink() -> Box<dyn crate::data::dataset::RecordsSink> {
        unreachable!("a script publishes nothing")
    }

    #[test]
    fn whole_nodes_only_for_timed_builds() {
        let opts = runner::Options {
            root: "/r".into(),
            data: "/d".into(),
            scale: crate::spec::Scale::Quick,
            fresh: false,
            allow_dirty: true,
            command_line: vec![],
            pair_counting: false,
            records: unused_sink,
        };
        let s = Options { partition: Some("big".into()), time: Some("00:10:00".into()), ..Default::default() };
        let spec = |variants: &str| {
            let text = format!(
                "experiment = \"alloc-profile\"\ncodecs = [\"zap\"]\npayloads = [64]\nvariants = {variants}\n[quick]\nmessages = 5\n[full]\nmessages = 5\n"
            );
            Spec::parse(&text, Path::new("a.toml")).unwrap()
        };
        let (staging, wb) = (Path::new("/st"), Path::new("/st/bin/workbench"));
        let timed = script(&spec(r#"["dhat", "system"]"#), &opts, &s, staging, wb, 4, Some("n1"));
        assert!(timed.contains("#SBATCH --array=0-3\n") && timed.contains("#SBATCH --exclusive\n"), "{timed}");
        assert!(timed.contains("#SBATCH --partition=big\n") && timed.contains("#SBATCH --time=00:10:00\n"), "{timed}");
        assert!(!timed.contains("--account") && timed.contains("#SBATCH --nodelist=n1\n"), "{timed}");
        assert!(timed.ends_with("exec '/st/bin/workbench' slurm-task '/st' \"$SLURM_ARRAY_TASK_ID\"\n"), "{timed}");
        let counts = script(&spec(r#"["dhat"]"#), &opts, &s, staging, wb, 4, None);
        assert!(!counts.contains("--exclusive") && !counts.contains("--nodelist"), "{counts}");
    }

    #[test]
    fn quoting_survives_a_quote() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }
}
