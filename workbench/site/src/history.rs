//! A spec's history page (`workbench history`): its commits, the changes
//! flagged between consecutive measured commits (every changed exact count;
//! a timing only when Mann–Whitney U calls its change significant, as
//! `workbench compare` decides), and every metric of every cell plotted
//! against the commits.

use super::page::{self, esc, link};
use super::Pages;
use analysis::data::dataset;
use analysis::history::{self, Index};
use analysis::inspect::compare::{self, num, Comparison};
use analysis::report::figures::{self, Chart, Line};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes a page per history index under `data`; each page's link and title.
pub fn write_pages(site: &Pages, data: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for index in history::indexes(data)? {
        let name = format!("{}-{}", index.dataset, index.scale);
        let rel = format!("history/{name}.html");
        write(site, data, &index, &rel).with_context(|| format!("the history page of {name}"))?;
        out.push((rel, format!("{} at {} scale: {} commits", index.dataset, index.scale, index.commits.len())));
    }
    Ok(out)
}

fn write(site: &Pages, data: &Path, index: &Index, rel: &str) -> Result<()> {
    let runs = history::runs_of(data, index)?;
    let mut rows = Vec::new();
    let mut measured: Vec<(usize, dataset::Run)> = Vec::new();
    for (i, (c, dir)) in runs.iter().enumerate() {
        let status = match dir {
            Some(d) => {
                measured.push((i, compare::load(d)?));
                link(&site.link_out(rel, &d.join("manifest.json")), "measured")
            }
            None => match history::failure(data, &c.hash, &index.dataset, index.scale) {
                Some(why) => format!("failed: {}", esc(why.lines().next().unwrap_or(""))),
                None => "not measured".into(),
            },
        };
        rows.push((
            if dir.is_none() { "changed".to_string() } else { String::new() },
            vec![
                i.to_string(),
                format!("<code>{}</code>", esc(c.short())),
                esc(&c.subject),
                esc(&analysis::data::host::iso_date(c.time)),
                status,
            ],
        ));
    }
    // Consecutive measured commits compared as `workbench compare` does.
    let mut pairs: Vec<(usize, usize, Comparison)> = Vec::new();
    for w in measured.windows(2) {
        pairs.push((w[0].0, w[1].0, compare::compare(&w[0].1, &w[1].1, super::compare::ALPHA)?));
    }
    let mut flagged = Vec::new();
    // (measure, cell) → points (commit index, value).
    let mut series: BTreeMap<String, BTreeMap<String, Vec<(f64, f64)>>> = BTreeMap::new();
    for (a, b, c) in &pairs {
        let at = &runs[*b].0;
        for r in &c.counts {
            let s = series.entry(r.column.clone()).or_default().entry(r.cell.clone()).or_default();
            push_point(s, *a as f64, r.mean_a());
            push_point(s, *b as f64, r.mean_b());
            if r.changed() {
                flagged.push((
                    "changed".to_string(),
                    vec![
                        format!("<code>{}</code> {}", esc(at.short()), esc(&at.subject)),
                        esc(&r.cell),
                        esc(&r.column),
                        num(r.mean_a()),
                        num(r.mean_b()),
                        "exact: any change".into(),
                    ],
                ));
            }
        }
        for r in &c.times {
            let s = series.entry(r.column.clone()).or_default().entry(r.cell.clone()).or_default();
            push_point(s, *a as f64, r.a.median);
            push_point(s, *b as f64, r.b.median);
            if r.significant(c.alpha) {
                flagged.push((
                    if r.delta() > 0.0 { "slower" } else { "faster" }.to_string(),
                    vec![
                        format!("<code>{}</code> {}", esc(at.short()), esc(&at.subject)),
                        esc(&r.cell),
                        esc(&r.column),
                        esc(&compare::ci(&r.a)),
                        esc(&compare::ci(&r.b)),
                        format!("{:+.1}% (p = {:.3})", 100.0 * r.delta(), r.p),
                    ],
                ));
            }
        }
    }
    let mut body = format!(
        "<p>The spec <code>{}</code> run at each commit by <code>workbench history</code> ({} commits, {} measured). \
         Changes are flagged between consecutive measured commits.</p>\n",
        esc(&index.dataset),
        runs.len(),
        measured.len()
    );
    body += "<h2 id=\"flagged\">Flagged changes</h2>\n";
    if flagged.is_empty() {
        body += "<p>None: every exact count stayed the same and no timing changed significantly.</p>\n";
    } else {
        body += &page::table("flagged", &["at commit", "cell", "measure", "before", "after", "rule"], &flagged);
    }
    body += "<h2 id=\"commits\">Commits</h2>\n";
    body += &page::table("commits", &["#", "commit", "subject", "date", "run"], &rows);
    if !series.is_empty() {
        body += "<h2 id=\"plots\">Every metric against the commits</h2>\n<p>x: the commit's number in the table above.</p>\n";
        let dir = site.file(&format!("history/{}-{}/x", index.dataset, index.scale))?;
        let dir = dir.parent().context("history figure directory")?;
        let shorts: Vec<String> = runs.iter().map(|(c, _)| c.short().to_string()).collect();
        // A commit's label at its own position only: between two commits the
        // axis's ticks would repeat the nearer one.
        let x_fmt = |x: &f64| {
            if (x - x.round()).abs() > 1e-6 {
                return String::new();
            }
            shorts.get(x.round() as usize).cloned().unwrap_or_default()
        };
        let y_fmt = |y: &f64| analysis::fmt::sig3(*y);
        for (measure, cells) in &series {
            let all: Vec<Line> =
                cells.iter().map(|(cell, pts)| Line { label: cell.clone(), points: pts.clone() }).collect();
            // A chart per palette's worth of cells: beyond it colours repeat
            // and the legend runs off the figure (alloc-profile has ≈ 100 cells).
            let per_chart = figures::PALETTE.len();
            for (k, lines) in all.chunks(per_chart).enumerate() {
                let (_, _, y0, y1) = figures::extent(lines);
                let part = if all.len() > per_chart {
                    format!(" (cells {}–{} of {})", k * per_chart + 1, k * per_chart + lines.len(), all.len())
                } else {
                    String::new()
                };
                let chart = Chart {
                    title: format!("{} {measure} by commit{part}", index.dataset),
                    x_desc: "commit",
                    y_desc: measure,
                    x_log: false,
                    x_range: (0.0, (runs.len().max(2) - 1) as f64),
                    y_log_floor: false,
                    y_range: (y0.min(0.0), y1 * 1.05),
                    x_fmt: &x_fmt,
                    y_fmt: &y_fmt,
                    x_marks: &[],
                };
                let name = format!("{}-{}-{k}", index.dataset, measure);
                let file = figures::write_svg(dir, &name, lines, &chart)?;
                let svg = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
                body += &format!("<figure id=\"history-{}-{k}\">\n{svg}\n</figure>\n", esc(measure));
            }
        }
    }
    let title = format!("History of {} ({})", index.dataset, index.scale);
    site.write(rel, &page::page(&title, "../", &[], &body))
}

fn push_point(s: &mut Vec<(f64, f64)>, x: f64, y: f64) {
    if !s.iter().any(|p| p.0 == x) {
        s.push((x, y));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::history::Commit;
    use analysis::spec::Scale;

    /// Copies a directory tree (a committed run).
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                copy_dir(&p, &to.join(e.file_name()));
            } else {
                std::fs::copy(&p, to.join(e.file_name())).unwrap();
            }
        }
    }

    /// Two committed runs of one dataset at different revisions stand in
    /// for two commits of a history, a third commit failed: the page lists
    /// all three, flags the counts that differ, and plots them.
    #[test]
    fn a_history_page_flags_changed_counts_and_lists_failures() {
        let root = analysis::default_root();
        // The newest run at each scale: two full runs of unchanged code
        // count alike, while the scales' message counts always differ.
        let runs: Vec<_> = [Scale::Full, Scale::Quick]
            .into_iter()
            .filter_map(|scale| dataset::runs(&root.join("data"), "heap-growth", scale).unwrap().pop())
            .collect();
        assert!(runs.len() >= 2, "the committed data holds two heap-growth runs");
        let tmp = std::env::temp_dir().join(format!("wb-history-page-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let data = tmp.join("data");
        let commits: Vec<Commit> = (1..=3)
            .map(|i| Commit { hash: format!("{i:040}"), subject: format!("commit {i}"), time: 1_700_000_000 + i })
            .collect();
        for (i, run) in runs.iter().take(2).enumerate() {
            let to = history::commit_data(&data, &commits[i].hash)
                .join("heap-growth")
                .join(format!("quick-2026010{}T000000Z", i + 1));
            copy_dir(run, &to);
        }
        let failed = history::commit_data(&data, &commits[2].hash).join("heap-growth");
        std::fs::create_dir_all(&failed).unwrap();
        std::fs::write(failed.join("failed-quick.txt"), "building subject (dhat) failed").unwrap();
        let index = Index { dataset: "heap-growth".into(), scale: Scale::Quick, commits: commits.clone() };
        let site = Pages { build: tmp.join("site"), out: tmp.join("site"), data: data.clone(), root: root.clone() };
        analysis::report::figures::register_font().unwrap();
        write(&site, &data, &index, "history/t.html").unwrap();
        let html = std::fs::read_to_string(tmp.join("site/history/t.html")).unwrap();
        let (a, b) = (dataset::load_run(&runs[0]).unwrap(), dataset::load_run(&runs[1]).unwrap());
        let changed = compare::compare(&a, &b, 0.05).unwrap().counts.iter().filter(|r| r.changed()).count();
        assert!(changed > 0, "the two committed runs differ in some count");
        assert_eq!(html.matches("<td>exact: any change</td>").count(), changed, "one flagged row per changed count");
        assert!(html.contains("failed: building subject (dhat) failed"), "the failed commit and why");
        assert!(html.contains("class=\"point\""), "the metrics are plotted with hover targets");
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
