//! The commands that write or print what the datasets say: tables and
//! figures, the paper, the site, `render` (all of them), `status`, the gate.

use super::*;

/// `workbench gate`: the gate, its map, or its cells.
pub(crate) fn gate_cmd(root: &Path, map: bool, list: bool) -> Result<()> {
    use analysis::gate;
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

pub(crate) fn report(root: &Path, data: &Path, scale: Scale) -> Result<()> {
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
pub(crate) fn render(root: &Path, data: &Path, out: &Path) -> Result<()> {
    let mut analyses = Vec::new();
    let mut written = Vec::new();
    for scale in Scale::ALL {
        let a = report::analyse(root, data, scale)?;
        written.extend(a.write_tables(root)?);
        written.extend(a.write_figures(root)?);
        analyses.push(a);
    }
    written.push(analysis::paper::write_macros_of(root, data, analysis::paper::chosen_of(&analyses))?);
    written.extend(analysis::paper::write_provenance_of(root, &analyses)?);
    written.extend(analysis::paper::write_determinism(root)?);
    written.push(report::timings::write(root, data)?);
    written.push(analysis::data::columns::write(root)?);
    let (audit, claims) = analysis::paper::claims::write(root, data)?;
    written.extend(claims);
    print_written(root, &written);
    println!("verdicts: {:?}", audit.counts());
    // The PDF (latexmk) and the site share nothing: one beside the other.
    let (pdf, site) = std::thread::scope(|s| {
        let pdf = s.spawn(|| analysis::paper::build(root));
        let site = site::write_of(root, data, out, &analyses, &audit, true, &|s| eprintln!("report: {s}"));
        (pdf.join().map_err(|_| anyhow::anyhow!("the paper's build panicked")), site)
    });
    print_site(&site?);
    let pdf = pdf??;
    println!("wrote {}", pdf.strip_prefix(root).unwrap_or(&pdf).display());
    Ok(())
}

/// `workbench list`: every spec, and the newest run of each at each scale.
pub(crate) fn list(root: &Path, data: &Path) -> Result<()> {
    for (path, s) in spec::load_dir(&root.join("experiments"))? {
        println!("{}  {} — {}", path.strip_prefix(root).unwrap_or(&path).display(), s.experiment, s.description);
    }
    for (_, s) in spec::load_dir(&root.join("experiments"))? {
        let exp = s.dataset();
        for scale in Scale::ALL {
            if let Some(d) = analysis::data::dataset::latest_run(data, exp, scale)? {
                println!("latest {scale} run of {exp}: {}", d.display());
            }
        }
    }
    Ok(())
}

/// `workbench paper`: the macros and the claims audit from data/, then the PDF.
pub(crate) fn paper(root: &Path, data: &Path) -> Result<()> {
    let analyses: Vec<report::Analysis> =
        Scale::ALL.iter().map(|&s| report::analyse(root, data, s)).collect::<Result<_>>()?;
    let mut written = vec![analysis::paper::write_macros_of(root, data, analysis::paper::chosen_of(&analyses))?];
    written.extend(analysis::paper::write_provenance_of(root, &analyses)?);
    written.extend(analysis::paper::write_determinism(root)?);
    written.extend(analysis::paper::claims::write(root, data)?.1);
    print_written(root, &written);
    let pdf = analysis::paper::build(root)?;
    println!("wrote {}", pdf.strip_prefix(root).unwrap_or(&pdf).display());
    Ok(())
}

pub(crate) fn print_site(w: &site::Written) {
    println!(
        "wrote {} experiment pages, {} trace pages, {} comparisons, {} histories: open {}",
        w.experiments,
        w.traces,
        w.compares,
        w.histories,
        w.index.display()
    );
}

pub(crate) fn print_written(root: &Path, written: &[PathBuf]) {
    for p in written {
        println!("wrote {}", p.strip_prefix(root).unwrap_or(p).display());
    }
}

/// `workbench status`: a line a dataset and scale, and what the newest full
/// runs take as git stores them; with `check`, an error naming every dataset
/// readers are shown that is not fresh, or the full runs past their limit.
pub(crate) fn status(root: &Path, data: &Path, scale: Option<Scale>, check: bool) -> Result<()> {
    let scales = scale.map_or(Scale::PREFERRED.to_vec(), |s| vec![s]);
    let entries = analysis::run::fingerprint::survey(root, data, &scales)?;
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
        stored += analysis::data::dataset::stored_bytes(dir)?;
    }
    let limit = analysis::data::dataset::FULL_SUITE_BYTES;
    if !full.is_empty() {
        println!(
            "the newest full runs ({}) take {} as git stores them; a full suite may add {}",
            full.len(),
            analysis::fmt::bytes(stored as f64),
            analysis::fmt::bytes(limit as f64)
        );
    }
    // Each named with its state and why: unknown fails as stale does, with its reason.
    let mut bad: Vec<String> = entries
        .iter()
        .filter(|e| e.cited && e.needs_run())
        .map(|e| match &e.freshness {
            Some(f) => format!("{} ({}: {}, {})", e.dataset, e.scale, f.word(), f.why()),
            None => format!("{} ({}: never run)", e.dataset, e.scale),
        })
        .collect();
    if stored > limit {
        bad.push(format!(
            "the full runs together ({} stored, past {}: shrink what a dataset keeps)",
            analysis::fmt::bytes(stored as f64),
            analysis::fmt::bytes(limit as f64)
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
