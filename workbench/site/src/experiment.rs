//! A dataset's page at one scale: the facts of its newest run, its figures
//! inlined (so a point's title shows its exact value on hover), its tables,
//! the claims that read it, every run at this scale, its files, and the
//! manifest and spec as recorded. Its traces and the comparison with the
//! run before get pages of their own.

use super::page::{self, esc, link};
use super::{compare, dataset_dir, traces, Pages};
use analysis::data::dataset::{self, Run};
use analysis::paper::claims::ClaimResult;
use analysis::report::tables::Table;
use analysis::report::Report;
use analysis::spec::Scale;
use anyhow::{Context, Result};
use std::path::Path;

/// What a dataset's page linked to.
pub struct Written {
    pub runs: usize,
    pub traces: usize,
    /// Comparisons written (each run against the one before).
    pub compares: usize,
    /// The newest run's comparison, from the dataset's directory.
    pub newest_compare: Option<String>,
}

/// What a dataset's page shows.
pub struct Dataset<'a> {
    pub scale: Scale,
    pub name: &'a str,
    /// Its reports (two reports of one dataset share a page).
    pub reports: &'a [&'static Report],
    pub tables: &'a [&'a Table],
    pub run_dir: &'a Path,
    pub run: &'a Run,
    pub claims: &'a [&'a ClaimResult],
    /// Where this pass already drew the reports' figures (`workbench
    /// render`): copied from there, not drawn again.
    pub drawn: Option<&'a Path>,
    /// Whether the code would still measure it the same.
    pub shown: Option<&'a analysis::run::fingerprint::Shown>,
}

/// Sites a codec's growth-law table lists at most.
const LAW_SITES: usize = 8;

pub fn write(site: &Pages, d: &Dataset<'_>) -> Result<Written> {
    let Dataset { scale, name, reports, tables, run_dir, run, claims, drawn, shown } = *d;
    let dir = dataset_dir(scale, name);
    let rel = format!("{dir}/index.html");
    let m = &run.manifest;
    let mut body = format!("<p>{}</p>\n", esc(&m.spec.description));
    if let Some(note) = shown.and_then(|s| s.note(&run.manifest)) {
        body += &format!("<p class=\"stale\"><strong>{}</strong></p>\n", esc(&note));
    }
    let mut fs = facts(site, &rel, run_dir, run);
    if let Some(s) = shown {
        let word = if s.is_fresh() { "fresh: the code at this tree would measure the same" } else { s.word() };
        fs.insert(1, ("freshness", esc(word)));
    }
    body += &page::facts(&fs);

    // Figures: the ones this pass drew, or drawn for this page by the
    // reports' own functions.
    let fig_dir = site.file(&format!("{dir}/figures/x"))?.parent().context("figure directory")?.to_path_buf();
    let mut figures = String::new();
    for r in reports {
        let Some(draw) = r.figure else { continue };
        let copied = drawn.map(|from| copy_figure(from, &fig_dir, r.name)).transpose()?.flatten();
        let files = match copied {
            Some(files) => files,
            None => draw(&fig_dir, run).with_context(|| format!("figure {} from {}", r.name, run_dir.display()))?,
        };
        for svg in files.iter().filter(|p| p.extension().is_some_and(|e| e == "svg")) {
            let text = std::fs::read_to_string(svg).with_context(|| format!("reading {}", svg.display()))?;
            let stem = svg.file_stem().unwrap_or_default().to_string_lossy();
            let inline = text.find("<svg").map_or(text.as_str(), |i| &text[i..]);
            // A figure drawn as SVG alone (the heap timelines) has no PNG to link.
            let mut links = link(&format!("figures/{stem}.svg"), "SVG");
            if svg.with_extension("png").exists() {
                links += &format!(" and {}", link(&format!("figures/{stem}.png"), "PNG"));
            }
            if svg.with_extension("csv").exists() {
                links += &format!("; its points as {}", link(&format!("figures/{stem}.csv"), "CSV"));
            }
            figures += &format!(
                "<figure id=\"figure-{stem}\">\n{inline}\n<figcaption>{} — hover a point for its exact value; \
                 {links} for the paper.</figcaption>\n</figure>\n",
                esc(&stem),
            );
        }
    }
    if !figures.is_empty() {
        body += "<h2 id=\"figures\">Figures</h2>\n";
        body += &figures;
    }
    body += "<h2 id=\"tables\">Tables</h2>\n<p>Click a column's header to sort by it.</p>\n";
    for t in tables {
        body += &t.to_html();
    }
    if !claims.is_empty() {
        body += "<h2 id=\"claims\">Claims of the source papers on this dataset</h2>\n";
        body += &super::claims_table("claims", claims);
    }

    // Traces: a page each.
    let mut trace_rows = Vec::new();
    // Unpacked from the run's archive here, for every page below that reads them.
    if analysis::data::traces::unpacked(run_dir)?.is_dir() {
        for path in ::trace::traces_in(run_dir)? {
            let t = traces::write(site, &dir, &path)?;
            trace_rows.push((
                String::new(),
                vec![
                    link(&t.href, &t.cell),
                    analysis::fmt::thousands(t.bytes).to_string(),
                    analysis::fmt::thousands(t.blocks).to_string(),
                    t.sites.to_string(),
                    t.operations.map_or("—".into(), |n| analysis::fmt::thousands(n).to_string()),
                ],
            ));
        }
    }
    if !trace_rows.is_empty() {
        body += "<h2 id=\"traces\">dhat traces</h2>\n<p>Each cell of the dhat build left a trace: its page ranks the \
                 allocation sites and draws the flame graph.</p>\n";
        body += &page::table("traces", &["cell", "bytes", "blocks", "sites", "operations"], &trace_rows);
    }

    // Per-site growth laws, where the traces sweep the payload.
    let laws = analysis::report::growth_laws::site_laws(run_dir, &m.spec.codecs, &m.spec.payloads)?;
    if !laws.is_empty() {
        body += "<h2 id=\"laws\">Growth laws by site</h2>\n<p>Each site's blocks and bytes per operation of the \
                 cell (one message's encode, decode and round trip, warm-up included) as a + b × payload over the \
                 payloads its dhat traces cover (repetition 0), fitted on the relative error; the largest per-byte \
                 cost first. Sites allocating less than once in ten operations at every payload are left out.</p>\n";
        for (codec, sites) in &laws {
            let rows: Vec<(String, Vec<String>)> = sites
                .iter()
                .take(LAW_SITES)
                .map(|l| {
                    let err = 100.0 * l.blocks.max_err.max(l.bytes.max_err);
                    (
                        String::new(),
                        vec![
                            format!("<code>{}</code>", esc(&l.site.label())),
                            esc(&l.blocks.text()),
                            esc(&l.bytes.text()),
                            format!("{err:.1} %"),
                        ],
                    )
                })
                .collect();
            body += &format!("<h3>{}</h3>\n", esc(&registry::display_name(codec)));
            if rows.is_empty() {
                body += "<p>No site allocates once in ten operations.</p>\n";
            } else {
                body += &page::table(&format!("laws-{codec}"), &["site", "blocks/op", "bytes/op", "fit error"], &rows);
            }
        }
    }

    // Events files (the events build): a timeline page each.
    let mut timelines = Vec::new();
    for path in ::trace::events::files_in(run_dir)? {
        let t = super::timeline::write(site, &dir, &path)?;
        timelines.push((
            String::new(),
            vec![
                link(&t.href, &t.cell),
                analysis::fmt::thousands(t.operations).to_string(),
                t.runs.to_string(),
                if t.leaks > 0 { format!("<strong>{}</strong>", t.leaks) } else { "0".into() },
            ],
        ));
    }
    if !timelines.is_empty() {
        body += "<h2 id=\"timelines\">Heap timelines (events build)</h2>\n<p>Live bytes site by site over the \
                 operation index, so two runs line up point by point; live flame graphs at the peak and the end.</p>\n";
        body += &page::table("timelines", &["cell", "operations", "runs stored", "leaks flagged"], &timelines);
    }
    let versus = super::versus::write(site, &dir, run_dir)?;
    if !versus.is_empty() {
        body += "<h2 id=\"versus\">Traces against each other</h2>\n<p>Each idiom's trace against its plain codec's \
                 at the same payload; each kind of call against pings, from servers that served that kind alone. A \
                 differential allocation flame graph each.</p>\n<ul>\n";
        for (href, text) in &versus {
            body += &format!("<li>{}</li>\n", link(href, text));
        }
        body += "</ul>\n";
    }

    // Every run at this scale, each against the one before it.
    let all = dataset::runs(&site.data, name, scale)?;
    let mut compares = Vec::new();
    let mut prev: Option<Run> = None;
    for d in &all {
        let this = analysis::inspect::compare::load(d)?;
        if let Some(p) = &prev {
            let href = format!("compare-{}.html", this.manifest.run_id);
            compare::write(site, &format!("{dir}/{href}"), p, &this)?;
            compares.push((d.clone(), href));
        }
        prev = Some(this);
    }
    body += "<h2 id=\"runs\">Runs at this scale</h2>\n";
    let newest_compare = compares.last().map(|(_, h)| h.clone());
    if let Some(h) = &newest_compare {
        body += &format!(
            "<p>{} the newest with the one before; every run links its own comparison.</p>\n",
            link(h, "Compare")
        );
    }
    let mut rows = Vec::new();
    for d in all.iter().rev() {
        let manifest = dataset::load_run_manifest(d)?;
        let newest = d.as_path() == run_dir;
        let vs = compares.iter().find(|(x, _)| x == d).map_or("—".into(), |(_, h)| link(h, "vs the run before"));
        rows.push((
            if newest { "changed".into() } else { String::new() },
            vec![
                format!("<code>{}</code>{}", esc(&manifest.run_id), if newest { " (newest)" } else { "" }),
                format!("<code>{}</code>", esc(analysis::inspect::compare::short_rev(&manifest.git_revision))),
                if manifest.git_dirty { "dirty".into() } else { "clean".into() },
                esc(&manifest.date),
                analysis::fmt::thousands(manifest.records as u64).to_string(),
                link(&site.link_out(&rel, &d.join("manifest.json")), "manifest"),
                vs,
            ],
        ));
    }
    body += &page::table("runs", &["run", "revision", "tree", "date", "records", "files", "compare"], &rows);

    body += "<h2 id=\"files\">Files of the newest run</h2>\n<ul>\n";
    for f in [dataset::RECORDS, "manifest.json"] {
        body += &format!("<li>{}</li>\n", link(&site.link_out(&rel, &run_dir.join(f)), f));
    }
    let logs = run_dir.join("logs");
    if logs.is_dir() {
        let mut names: Vec<_> =
            std::fs::read_dir(&logs)?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
        names.sort();
        body += &format!("<li>logs ({}):<ul>\n", names.len());
        for p in &names {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            body += &format!("<li>{}</li>\n", link(&site.link_out(&rel, p), &n));
        }
        body += "</ul></li>\n";
    }
    body += "</ul>\n";
    let spec = toml::to_string(&m.spec).unwrap_or_else(|_| serde_json::to_string_pretty(&m.spec).unwrap_or_default());
    body += &format!(
        "<h2 id=\"spec\">Spec and manifest</h2>\n<details open><summary>the spec as run ({})</summary><pre>{}</pre></details>\n\
         <details><summary>manifest.json</summary><pre>{}</pre></details>\n",
        esc(&m.spec_path),
        esc(&spec),
        esc(&serde_json::to_string_pretty(m)?)
    );
    let title = format!("{name} ({scale})");
    let crumbs = [(format!("../../index.html#{scale}"), format!("{scale} scale"))];
    site.write(&rel, &page::page(&title, "../../", &crumbs, &body))?;
    Ok(Written { runs: all.len(), traces: trace_rows.len(), compares: compares.len(), newest_compare })
}

/// Copies `<name>.svg`, `.png` and `.csv` from `from` into `to`; `None` when the
/// SVG is not there (the figure is then drawn).
fn copy_figure(from: &Path, to: &Path, name: &str) -> Result<Option<Vec<std::path::PathBuf>>> {
    let svg = from.join(format!("{name}.svg"));
    if !svg.exists() {
        return Ok(None);
    }
    let mut out = Vec::new();
    let others = ["png", "csv"].map(|ext| from.join(format!("{name}.{ext}")));
    for file in std::iter::once(svg).chain(others).filter(|f| f.exists()) {
        let dest = to.join(file.file_name().unwrap_or_default());
        std::fs::copy(&file, &dest).with_context(|| format!("copying {} to {}", file.display(), dest.display()))?;
        out.push(dest);
    }
    Ok(Some(out))
}

fn facts(site: &Pages, rel: &str, run_dir: &Path, run: &Run) -> Vec<(&'static str, String)> {
    let m = &run.manifest;
    let load = |l: &Option<[f64; 3]>| l.map_or("—".into(), |l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]));
    let mut v = vec![
        ("newest run", link(&site.link_out(rel, run_dir), &m.run_id)),
        (
            "revision",
            format!(
                "<code>{}</code> ({})",
                esc(&m.git_revision),
                if m.git_dirty { "dirty tree: its diff is in the dataset" } else { "clean tree" }
            ),
        ),
        ("date", esc(&m.date)),
        ("machine", esc(&format!("{}, {} cores, {}", m.cpu_model, m.cores, m.kernel))),
        ("toolchain", esc(&format!("{} ({} profile)", m.rustc, m.profile))),
        ("builds", esc(&m.allocators.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("; "))),
        ("cells", format!("{} ({} resumed from an interrupted attempt)", m.cells.len(), m.cells_resumed)),
        ("records", analysis::fmt::thousands(m.records as u64).to_string()),
        ("load before / after", format!("{} / {}", load(&m.load_before), load(&m.load_after))),
        ("command", format!("<code>{}</code>", esc(&m.command_line.join(" ")))),
    ];
    if !m.busy_processes.is_empty() {
        let busy: Vec<String> =
            m.busy_processes.iter().map(|b| format!("{} ({:.0}% of a core)", b.name, b.cpu_percent)).collect();
        v.push(("busy beside it", esc(&busy.join(", "))));
    }
    if !m.nodes.is_empty() {
        let mut hosts: Vec<&str> = m.nodes.values().map(|n| n.hostname.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        v.push(("cells ran on", esc(&hosts.join(", "))));
    }
    v
}
