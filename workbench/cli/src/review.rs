//! The commands that read traces and runs: `trace …` (review, diff, export)
//! and `compare`.

use super::*;

pub(crate) fn review(cmd: TraceCmd) -> Result<()> {
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
                if path.is_dir() {
                    analysis::data::traces::unpacked(&path)?;
                }
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
                        .and_then(|run| analysis::data::dataset::load_run_manifest(run).ok())
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
                analysis::fmt::thousands(t.total_bytes()),
                analysis::fmt::thousands(t.total_blocks())
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

/// `workbench compare`: two runs side by side; exits 1 on a `--fail-on` rule.
pub(crate) fn compare_cmd(data: &Path, args: CompareArgs) -> Result<()> {
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
