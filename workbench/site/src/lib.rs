//! The report site (`workbench report`): static HTML a researcher opens
//! from the file system, no server. Everything on it is computed from
//! `data/` in this call, by the same code as the tables, figures, claims
//! and comparisons (nothing is parsed back from a rendered file). It is
//! written into a temporary directory and renamed into place whole, so an
//! interrupted call leaves the previous site.
//!
//! ```text
//! report/index.html                     every experiment at each scale, the claims audit, histories
//! report/assets/site.{css,js}
//! report/<scale>/<dataset>/index.html   figures (a point's exact value on hover), tables (sortable),
//!                                       runs, files, manifest and spec, claims on this dataset
//! report/<scale>/<dataset>/compare-<run>.html  a run against the one before it
//! report/<scale>/<dataset>/traces/<cell>.html   top sites, flame graph (<cell>.flame.svg)
//! report/<scale>/<dataset>/versus/<idiom>-p<N>.html  an idiom against its plain codec: differential flame graph
//! report/<scale>/<dataset>/versus/kind-<kind>.html  a kind of call against pings (request-cost): differential flame graph
//! report/<scale>/<dataset>/timelines/<cell>.html  an events file: live bytes over operations, growth, live flame graphs
//! report/history/<dataset>-<scale>.html every metric of every cell against commits
//! report/gate.html                      the allocation gate's determinism map and baseline
//! ```
//!
//! # Layout
//! - this file: [`write`], the index, and [`relative`] (links from a page
//!   to `data/`, which stays where it is).
//! - [`page`]: the page frame, escaping, the style sheet and the script.
//! - [`experiment`]: a dataset's page; [`traces`]: a trace's page;
//!   [`compare`]: two runs; [`history`]: runs across commits
//!   (`workbench history`, `workbench bisect`); [`gate`]: the allocation
//!   gate's determinism map; [`versus`]: an idiom against its plain codec, a kind of call against pings;
//!   [`timeline`]: an events file's heap over the operation index.

pub mod compare;
pub mod experiment;
pub mod gate;
pub mod history;
pub mod page;
pub mod timeline;
pub mod traces;
pub mod versus;

use analysis::data::dataset::Run;
use analysis::report::{self, Report};
use analysis::spec::Scale;
use anyhow::{Context, Result};
use page::{esc, link};
use std::path::{Path, PathBuf};

/// What one call wrote.
#[derive(Debug, Default)]
pub struct Written {
    pub index: PathBuf,
    pub experiments: usize,
    pub traces: usize,
    pub compares: usize,
    pub histories: usize,
}

/// Where a page is written and where its links point.
pub struct Pages {
    /// The directory being written (renamed to `out` at the end).
    pub build: PathBuf,
    /// The site's final directory: links are relative to pages there.
    pub out: PathBuf,
    pub data: PathBuf,
    pub root: PathBuf,
}

impl Pages {
    /// A file of the site, by its path inside it (directories created).
    pub fn file(&self, rel: &str) -> Result<PathBuf> {
        let p = self.build.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        Ok(p)
    }

    /// Writes a page of the site.
    pub fn write(&self, rel: &str, html: &str) -> Result<()> {
        let p = self.file(rel)?;
        std::fs::write(&p, html).with_context(|| format!("writing {}", p.display()))
    }

    /// A link from the page at `page_rel` (inside the site) to `target`, a
    /// file outside it (a dataset's Parquet, a log, a trace).
    pub fn link_out(&self, page_rel: &str, target: &Path) -> String {
        let page_dir = self.out.join(page_rel);
        relative(page_dir.parent().unwrap_or(&self.out), target)
    }
}

/// The path from directory `from` to `to`, both absolute (or both made so
/// from the working directory), with `/` separators.
pub fn relative(from: &Path, to: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, to) = (abs(from), abs(to));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); a.len() - common];
    parts.extend(b[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The directory of a dataset's pages inside the site.
pub fn dataset_dir(scale: Scale, dataset: &str) -> String {
    format!("{scale}/{dataset}")
}

/// Writes the whole site to `out` (default `<root>/report`).
pub fn write(root: &Path, data: &Path, out: &Path, progress: &(dyn Fn(&str) + Sync)) -> Result<Written> {
    let audit = analysis::paper::claims::load(&root.join("paper/claims.toml"))
        .and_then(|c| analysis::paper::claims::audit(&c, root, data))
        .context("the claims audit (paper/claims.toml)")?;
    let mut analyses = Vec::new();
    for scale in Scale::ALL {
        progress(&format!("{scale}: loading the newest runs"));
        analyses.push(report::analyse(root, data, scale)?);
    }
    write_of(root, data, out, &analyses, &audit, false, progress)
}

/// [`write`] from analyses already made (one a scale) and the claims audit;
/// `figures_drawn`: their figures are in `figures/[<scale>/]` already, so
/// the pages copy them.
pub fn write_of(
    root: &Path,
    data: &Path,
    out: &Path,
    analyses: &[report::Analysis],
    audit: &analysis::paper::claims::Audit,
    figures_drawn: bool,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Written> {
    let out = std::path::absolute(out).with_context(|| format!("resolving {}", out.display()))?;
    let parent = out.parent().context("the report directory has no parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let build =
        parent.join(format!(".{}.tmp-{}", out.file_name().unwrap_or_default().to_string_lossy(), std::process::id()));
    if build.exists() {
        std::fs::remove_dir_all(&build).with_context(|| format!("removing {}", build.display()))?;
    }
    let site = Pages { build: build.clone(), out: out.clone(), data: std::path::absolute(data)?, root: root.into() };
    site.write("assets/site.css", page::CSS)?;
    site.write("assets/site.js", page::JS)?;
    report::figures::register_font()?;
    // Every dataset's page first, then the index in the analyses' order.
    let mut jobs = Vec::new();
    for analysis in analyses {
        // One page per dataset; two reports of one dataset share it.
        let mut datasets: Vec<(&str, Vec<&'static Report>, &Path, &Run)> = Vec::new();
        for (r, dir, run) in analysis.runs() {
            match datasets.iter_mut().find(|d| d.0 == r.dataset()) {
                Some(d) => d.1.push(r),
                None => datasets.push((r.dataset(), vec![r], dir, run)),
            }
        }
        jobs.extend(datasets.into_iter().map(|(name, reports, dir, run)| (analysis, name, reports, dir, run)));
    }
    let drawn: Vec<Option<PathBuf>> =
        jobs.iter().map(|(a, ..)| figures_drawn.then(|| a.scale.dir(root, "figures"))).collect();
    // The biggest datasets first, so that no thread starts one as the others finish.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_cached_key(|&i| std::cmp::Reverse(bytes_under(jobs[i].3)));
    let mut pages = analysis::par::on_every_core(jobs.len(), |k| {
        let i = order[k];
        let (analysis, name, reports, dir, run) = &jobs[i];
        let scale = analysis.scale;
        progress(&format!("{scale}: {name}"));
        let tables: Vec<&report::tables::Table> =
            analysis.tables.iter().filter(|t| reports.iter().any(|r| r.name == t.name)).collect();
        let claims: Vec<&analysis::paper::claims::ClaimResult> =
            audit.claims.iter().filter(|c| c.spec.ours.as_ref().is_some_and(|o| o.experiment == *name)).collect();
        let page = experiment::Dataset {
            scale,
            name,
            reports,
            tables: &tables,
            run_dir: dir,
            run,
            claims: &claims,
            drawn: drawn[i].as_deref(),
            shown: analysis.shown(dir),
        };
        (i, experiment::write(&site, &page))
    });
    pages.sort_by_key(|(i, _)| *i);
    let pages = pages.into_iter().map(|(_, page)| page);
    let mut w = Written::default();
    let mut scales = String::new();
    let mut pages = jobs.iter().zip(pages).peekable();
    for analysis in analyses {
        let scale = analysis.scale;
        let mut rows = Vec::new();
        while let Some(((_, name, _, dir, run), e)) = pages.next_if(|((a, ..), _)| std::ptr::eq(*a, analysis)) {
            let e = e?;
            w.experiments += 1;
            w.traces += e.traces;
            w.compares += e.compares;
            rows.push(index_row(scale, name, run, &e, analysis.shown(dir)));
        }
        if rows.is_empty() {
            continue;
        }
        scales += &format!("<h2 id=\"{scale}\">{scale} scale</h2>\n");
        scales += &page::table(
            &format!("runs-{scale}"),
            &[
                "experiment",
                "runs",
                "newest run",
                "revision",
                "tree",
                "fresh",
                "date",
                "machine",
                "records",
                "traces",
                "compare",
            ],
            &rows,
        );
    }
    progress("histories");
    let histories = history::write_pages(&site, data)?;
    w.histories = histories.len();
    let (rev, dirty) = analysis::data::host::git_state(root);
    let mut body = page::facts(&[
        ("written", esc(&analysis::data::host::iso_date(analysis::data::host::now_secs()))),
        ("workbench at", format!("<code>{}</code>{}", esc(&rev), if dirty { " (dirty tree)" } else { "" })),
        ("data", format!("<code>{}</code>", esc(&site.data.display().to_string()))),
    ]);
    body += "<p>Allocation counts come from the dhat build: a change in one is a change in the code, except in \
             the cells the determinism map shows varying. Timings carry their spread; compare pages test them \
             (Mann–Whitney U).</p>\n";
    if let Some(summary) = gate::write(&site)? {
        body += &format!("<p>{}: {}.</p>\n", link("gate.html", "Allocation gate and determinism map"), esc(&summary));
    }
    body += &scales;
    body += &claims_section(audit);
    if !histories.is_empty() {
        body += "<h2 id=\"history\">History across commits</h2>\n<ul>\n";
        for (href, text) in &histories {
            body += &format!("<li>{}</li>\n", link(href, text));
        }
        body += "</ul>\n";
    }
    site.write("index.html", &page::page("Workbench report", "", &[], &body))?;
    // Renamed into place whole: the old site stays until the new one is complete.
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("removing the previous {}", out.display()))?;
    }
    std::fs::rename(&build, &out).with_context(|| format!("renaming {} to {}", build.display(), out.display()))?;
    w.index = out.join("index.html");
    Ok(w)
}

/// The bytes of the files under `dir`: the work of its pages, roughly.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).into_iter().flatten().flatten().fold(0, |sum, e| match e.file_type() {
        Ok(t) if t.is_dir() => sum + bytes_under(&e.path()),
        Ok(_) => sum + e.metadata().map_or(0, |m| m.len()),
        Err(_) => sum,
    })
}

fn index_row(
    scale: Scale,
    name: &str,
    run: &Run,
    e: &experiment::Written,
    shown: Option<&analysis::run::fingerprint::Shown>,
) -> (String, Vec<String>) {
    let m = &run.manifest;
    let fresh = shown.map_or("—".to_string(), |s| {
        if s.is_fresh() {
            "fresh".into()
        } else {
            format!("<strong>{}</strong>", s.word())
        }
    });
    let dir = dataset_dir(scale, name);
    let clean = if m.git_dirty { "dirty" } else { "clean" };
    let compare = e.newest_compare.as_ref().map_or("—".into(), |h| link(&format!("{dir}/{h}"), "newest vs previous"));
    let class = if m.git_dirty { "changed" } else { "" };
    (
        class.into(),
        vec![
            link(&format!("{dir}/index.html"), name),
            e.runs.to_string(),
            format!("<code>{}</code>", esc(&m.run_id)),
            format!("<code>{}</code>", esc(analysis::inspect::compare::short_rev(&m.git_revision))),
            clean.into(),
            fresh,
            esc(&m.date),
            esc(&format!("{} ({} cores)", m.cpu_model, m.cores)),
            analysis::fmt::thousands(m.records as u64).to_string(),
            e.traces.to_string(),
            compare,
        ],
    )
}

/// The claims audit: verdict counts and every claim's row.
pub fn claims_section(audit: &analysis::paper::claims::Audit) -> String {
    let counts = audit.counts();
    let mut s = String::from("<h2 id=\"claims\">The source papers' claims against ours</h2>\n<p>");
    s += &counts.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ");
    s += " (<code>paper/claims.toml</code>; the same audit as <code>workbench claims</code>).</p>\n";
    s + &claims_table("claims", &audit.claims.iter().collect::<Vec<_>>())
}

/// Claims as a table, each row classed by its verdict.
pub fn claims_table(id: &str, claims: &[&analysis::paper::claims::ClaimResult]) -> String {
    let rows: Vec<(String, Vec<String>)> = claims
        .iter()
        .map(|c| {
            let cells = c.row();
            (c.verdict.label().replace(' ', "-"), cells.iter().map(|x| esc(x)).collect())
        })
        .collect();
    page::table(id, analysis::paper::claims::ClaimResult::HEADER, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_climb_to_the_common_directory() {
        assert_eq!(
            relative(Path::new("/r/report/quick/x"), Path::new("/r/data/x/run/records.parquet")),
            "../../../data/x/run/records.parquet"
        );
        assert_eq!(relative(Path::new("/r/report"), Path::new("/r/report/a.html")), "a.html");
        assert_eq!(relative(Path::new("/r/report"), Path::new("/r/report")), ".");
    }
}
