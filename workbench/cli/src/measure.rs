//! The commands that measure: `run` (here or as a Slurm job array), `collect`,
//! `history` and `bisect`, and choosing specs by name.

use super::*;

/// `workbench run`: the chosen specs (or the stale ones), here or as a Slurm job array.
pub(crate) fn run(root: &Path, data: &Path, args: RunArgs) -> Result<()> {
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
        let needed: Vec<String> = analysis::run::fingerprint::survey(root, data, &[scale])?
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
        records: analysis::data::dataset::parquet_sink,
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
        analysis::run::provenance::check_clean(root, allow_dirty, path, spec, scale)?;
    }
    analysis::run::provenance::check_self(root)?;
    // One measurement per machine: two at once would each show in the other's figures.
    let lock = analysis::run::provenance::MeasureLock::acquire(&format!("workbench run {}", specs.join(" ")))?;
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
pub(crate) fn collect(root: &Path, data: &Path, args: CollectArgs) -> Result<()> {
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
        records: analysis::data::dataset::parquet_sink,
    };
    let mut done = Vec::new();
    for (path, spec) in &chosen {
        let out = slurm::collect(&opts, path, spec).with_context(|| format!("collecting {}", path.display()))?;
        done.push((spec.dataset().to_string(), out));
    }
    print_summary(root, scale, &done);
    Ok(())
}

/// `run --slurm`: every spec submitted (and, unless --no-wait, waited for
/// and published); the summary and the report as a local run's.
pub(crate) fn run_slurm(
    root: &Path,
    data: &Path,
    opts: &runner::Options,
    chosen: &[(PathBuf, spec::Spec)],
    s: &slurm::Options,
    no_report: bool,
) -> Result<()> {
    if !s.dry_run {
        for (path, spec) in chosen {
            analysis::run::provenance::check_clean(root, opts.allow_dirty, path, spec, opts.scale)?;
        }
        analysis::run::provenance::check_self(root)?;
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
pub(crate) fn print_summary(root: &Path, scale: Scale, done: &[(String, runner::Outcome)]) {
    println!("\nSummary ({scale} scale)");
    // Sized to the longest name, so `roundtrip-latency-awake` keeps the columns straight.
    let w = done.iter().map(|(e, _)| e.len()).max().unwrap_or(0).max("experiment".len());
    println!("{:<w$} {:>6} {:>8} {:>9} {:>9}  dataset", "experiment", "cells", "resumed", "records", "seconds");
    for (exp, o) in done {
        let rel = o.dir.strip_prefix(root).unwrap_or(&o.dir);
        println!("{exp:<w$} {:>6} {:>8} {:>9} {:>9.1}  {}", o.cells, o.resumed, o.records, o.seconds, rel.display());
    }
}

/// `workbench history`: a spec at sampled commits of a range, one dataset each.
pub(crate) fn history_cmd(root: &Path, data: &Path, args: HistoryArgs) -> Result<()> {
    let HistoryArgs { spec, commits, scale, steps } = args;
    let (path, spec) = choose_specs(root, &[spec])?.pop().context("no spec")?;
    let all = history::commits(root, &commits)?;
    if all.is_empty() {
        bail!("--commits {commits}: the range holds no commit");
    }
    let chosen = history::sample(&all, steps.unwrap_or(0));
    let _lock = analysis::run::provenance::MeasureLock::acquire(&format!("workbench history {}", spec.dataset()))?;
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let m = history::Measure { root, spec_path: &path, spec: &spec, scale, multi: &multi };
    eprintln!(
        "history of {} at {scale} scale: {} of the {} commits of {commits}",
        spec.dataset(),
        chosen.len(),
        all.len()
    );
    let out = history::run(&m, data, &chosen, &|s| analysis::run::runner::say(&multi, s))?;
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
pub(crate) fn bisect(root: &Path, data: &Path, args: BisectArgs) -> Result<()> {
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
    let _lock = analysis::run::provenance::MeasureLock::acquire(&format!("workbench bisect {}", spec.dataset()))?;
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let m = history::Measure { root, spec_path: &path, spec: &spec, scale, multi: &multi };
    let q = history::bisect::Query { cell: &cell, metric: &metric, filters, good: &good, bad: &bad };
    let f = history::bisect::run(&m, data, &q, &|s| analysis::run::runner::say(&multi, s))?;
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

/// Resolves spec arguments: none or `quick` = every spec; else names or paths.
pub(crate) fn choose_specs(root: &Path, args: &[String]) -> Result<Vec<(PathBuf, spec::Spec)>> {
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
