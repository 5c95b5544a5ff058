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
        no_measure,
    } = args;
    let mut chosen = choose_specs(root, &specs)?;
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
    let mut bins = runner::Binaries::default();
    let mut carries = Carries::new();
    // Builds are taken beside no measurement: the lock is held from the
    // first build a judgement needs to the last cell.
    let mut lock = None;
    if stale {
        if !plan {
            for (path, spec) in &chosen {
                check_clean(root, allow_dirty, path, spec, scale)?;
            }
            // A certification is written by this binary: it must be this tree's.
            analysis::run::provenance::check_self(root)?;
        }
        (chosen, carries) = stale_choice(&opts, chosen, &mut bins, &mut lock, plan)?;
        if chosen.is_empty() || no_measure {
            return Ok(());
        }
    }
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
        check_clean(root, allow_dirty, path, spec, scale)?;
    }
    analysis::run::provenance::check_self(root)?;
    // One measurement per machine: two at once would each show in the other's figures.
    let lock = match lock {
        Some(l) => l,
        None => analysis::run::provenance::MeasureLock::acquire(&format!("workbench run {}", specs.join(" ")))?,
    };
    eprintln!("holding {} for this run", lock.path().display());
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let mut done = Vec::new();
    for (path, spec) in &chosen {
        if let Some((old, ids)) = carries.get(spec.dataset()) {
            let rows = analysis::data::dataset::read_back(old)?;
            let n = runner::carry(&opts, spec, old, ids, &rows)
                .with_context(|| format!("carrying cells of {} over", old.display()))?;
            eprintln!("{}: {n} cells carried over from {} (their builds unchanged)", spec.dataset(), old.display());
        }
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

/// `run --stale`: of `chosen`, the specs whose newest dataset at the
/// scale must be measured again. A dataset whose only changed inputs reach
/// its binaries, and a fresh one without identities on record, is judged
/// by its binaries built now ([`runner`]'s `certify`): certified when every
/// one is identical (unless `plan`: then only said), measured otherwise.
/// A count-only dataset whose cells of unchanged builds are carried over
/// ([`runner::carry`]) and the rest measured; the dataset → its newest
/// run and the cells carried from it.
type Carries = std::collections::BTreeMap<String, (PathBuf, Vec<String>)>;

fn stale_choice(
    opts: &runner::Options,
    chosen: Vec<(PathBuf, spec::Spec)>,
    bins: &mut runner::Binaries,
    lock: &mut Option<analysis::run::provenance::MeasureLock>,
    plan: bool,
) -> Result<(Vec<(PathBuf, spec::Spec)>, Carries)> {
    let mut carries = Carries::new();
    use analysis::run::certify;
    use analysis::run::fingerprint::Freshness;
    let (root, scale) = (&opts.root, opts.scale);
    let entries = analysis::run::fingerprint::survey(root, &opts.data, &[scale])?;
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let mut out = Vec::new();
    let mut said = Vec::new();
    for (path, spec) in chosen {
        let Some(e) = entries.iter().find(|e| e.dataset == spec.dataset()) else { continue };
        let Some(dir) = &e.run else {
            said.push(format!("{}: never run at {scale}: measured", e.dataset));
            out.push((path, spec));
            continue;
        };
        let m = analysis::data::dataset::load_run_manifest(dir)?;
        let judged = match &e.freshness {
            Some(Freshness::Sources(_)) => true,
            Some(Freshness::Fresh) => m.binaries.is_empty(),
            _ => false,
        };
        if !judged {
            if e.needs_run() {
                let why = e.freshness.as_ref().map(|f| format!("{}: {}", f.word(), f.why())).unwrap_or_default();
                said.push(format!("{}: {why}: measured", e.dataset));
                out.push((path, spec));
            }
            continue;
        }
        if plan && e.freshness.as_ref().is_some_and(|f| f.is_fresh()) {
            said.push(format!(
                "{}: fresh; its binaries' identities would be recorded (built, not measured)",
                e.dataset
            ));
            continue;
        }
        if lock.is_none() {
            *lock =
                Some(analysis::run::provenance::MeasureLock::acquire("workbench run --stale (building to compare)")?);
        }
        let (verdict, cells) = certify::judge(opts, &spec, &m, bins, &multi)
            .with_context(|| format!("judging {} by its binaries", dir.display()))?;
        let rel = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
        if verdict.holds() {
            if !plan {
                certify::certify(opts, &spec, dir, &verdict, &cells, bins)?;
            }
            said.push(format!("{}: {} ({rel})", e.dataset, verdict.describe()));
        } else if e.needs_run() {
            let aged = match &verdict {
                certify::Verdict::Changed { cells: aged, .. } if !runner::machine_bound(&spec, scale) => aged.clone(),
                _ => Vec::new(),
            };
            if aged.is_empty() {
                said.push(format!("{}: {}: measured whole", e.dataset, verdict.describe()));
            } else {
                let secs: f64 = aged.iter().filter_map(|c| m.cell_seconds.get(c)).sum();
                said.push(format!(
                    "{}: {}: those measured ({secs:.0} s last time), the other {} carried over",
                    e.dataset,
                    verdict.describe(),
                    cells.len() - aged.len()
                ));
                let keep = cells.iter().map(|p| p.id.clone()).filter(|id| !aged.contains(id)).collect();
                carries.insert(e.dataset.clone(), (dir.clone(), keep));
            }
            out.push((path, spec));
        } else {
            said.push(format!("{}: fresh, identities not recorded: {}", e.dataset, verdict.describe()));
        }
    }
    let verb = if plan { "would be" } else { "is" };
    for line in &said {
        println!("{line}");
    }
    let names: Vec<&str> = out.iter().map(|(_, s)| s.dataset()).collect();
    println!(
        "at {scale}, {} dataset(s) {verb} measured: {}",
        names.len(),
        if names.is_empty() { "none".into() } else { names.join(", ") }
    );
    Ok((out, carries))
}

/// `workbench identity`: each binary's identity, as a manifest records it.
pub(crate) fn identity(bins: &[PathBuf], stamp: Option<&str>) -> Result<()> {
    use analysis::run::identity;
    for b in bins {
        // A binary that does not run (another machine's) has no stamp to mask.
        let stamp = match stamp {
            Some(s) => identity::is_stamp(s).then(|| s.to_string()),
            None => identity::stamp_of(b).ok().flatten(),
        };
        let stamps: Vec<&[u8]> = stamp.iter().map(|s| s.as_bytes()).collect();
        println!("{}  {}", identity::identity(b, &stamps)?, b.display());
    }
    Ok(())
}

/// The dirty refusal before any build: [`analysis::run::provenance::check_clean`]
/// over the spec's [`analysis::run::fingerprint::Inputs`].
fn check_clean(root: &Path, allow_dirty: bool, path: &Path, spec: &spec::Spec, scale: Scale) -> Result<Vec<String>> {
    let inputs = analysis::run::fingerprint::Inputs::of(root, path, spec, scale)?;
    analysis::run::provenance::check_clean(root, allow_dirty, path, &inputs)
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
            check_clean(root, opts.allow_dirty, path, spec, opts.scale)?;
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

/// `workbench aging`: what each commit of a range ages, by sources and by binaries.
pub(crate) fn aging(root: &Path, data: &Path, range: &str, scale: Scale, last: Option<usize>) -> Result<()> {
    use analysis::history::aging;
    let all = aging::datasets(data, scale)?;
    // The commits that changed a file some dataset lists; the others age none.
    let mut commits = aging::touching(root, &all, &history::commits(root, range)?)?;
    if let Some(n) = last {
        commits = commits.split_off(commits.len().saturating_sub(n));
    }
    if commits.is_empty() {
        bail!("{range}: no commit changed a file the {scale} datasets list");
    }
    let _lock = analysis::run::provenance::MeasureLock::acquire(&format!("workbench aging {range}"))?;
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    eprintln!("aging at {scale} scale: {} datasets, {} commits of {range}", all.len(), commits.len());
    let rows = aging::run(root, &all, &commits, &multi, &|s| analysis::run::runner::say(&multi, s))?;
    print!("{}", aging::markdown(&rows));
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
