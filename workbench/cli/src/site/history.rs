//! A spec's history page (`workbench history`): its commits, the changes
//! flagged between consecutive measured commits (every changed exact count;
//! a timing only when Mann–Whitney U calls its change significant, as
//! `workbench compare` decides), and every metric of every cell plotted
//! against the commits.

use super::page::{self, esc, link};
use super::Site;
use crate::data::dataset;
use crate::history::{self, Index};
use crate::inspect::compare::{self, num, Comparison};
use crate::report::figures::{self, Chart, Line};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes a page per history index under `data`; each page's link and title.
pub fn write_pages(site: &Site, data: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for index in history::indexes(data)? {
        let name = format!("{}-{}", index.dataset, index.scale);
        let rel = format!("history/{name}.html");
        write(site, data, &index, &rel).with_context(|| format!("the history page of {name}"))?;
        out.push((rel, format!("{} at {} scale: {} commits", index.dataset, index.scale, index.commits.len())));
    }
    Ok(out)
}

fn write(site: &Site, data: &Path, index: &Index, rel: &str) -> Result<()> {
    let runs = history::runs_of(data, index)?;
    let mut rows = Vec::new();
    let mut measured: Vec<(usize, dataset::Run)> = Vec::new();
    for (i, (c, dir)) in runs.iter().enumerate() {
        let status = match dir {
            Some(d) => {
                measured.push((i, dataset::load_run(d)?));
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
                esc(&crate::data::host::iso_date(c.time)),
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
        let x_fmt = |x: &f64| shorts.get(x.round() as usize).cloned().unwrap_or_default();
        let y_fmt = |y: &f64| crate::fmt::sig3(*y);
        for (measure, cells) in &series {
            let lines: Vec<Line> =
                cells.iter().map(|(cell, pts)| Line { label: cell.clone(), points: pts.clone() }).collect();
            let (_, _, y0, y1) = figures::extent(&lines);
            let chart = Chart {
                title: format!("{} {measure} by commit", index.dataset),
                x_desc: "commit",
                y_desc: measure,
                x_log: false,
                x_range: (0.0, (runs.len().max(2) - 1) as f64),
                y_log_floor: false,
                y_range: (y0.min(0.0), y1 * 1.05),
                x_fmt: &x_fmt,
                y_fmt: &y_fmt,
            };
            let name = format!("{}-{}", index.dataset, measure);
            let files = figures::write_both(dir, &name, &lines, &chart)?;
            let svg = std::fs::read_to_string(&files[0]).with_context(|| format!("reading {}", files[0].display()))?;
            body += &format!("<figure id=\"history-{}\">\n{svg}\n</figure>\n", esc(measure));
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
