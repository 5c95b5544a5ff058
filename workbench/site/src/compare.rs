//! Two runs of one dataset side by side, as `workbench compare` computes
//! them: every exact count, a changed one highlighted with the allocation
//! sites that moved and their differential flame graph; every timing with its median and 95% interval, a
//! change highlighted only when Mann–Whitney U calls it significant.

use super::page::{self, esc};
use super::Pages;
use ::trace::{self, diff_flame};
use analysis::data::dataset::Run;
use analysis::inspect::compare::{self, ci, num, num_signed, Comparison};
use anyhow::Result;

/// The significance level of the site's comparisons (`workbench compare`'s default).
pub const ALPHA: f64 = 0.05;

/// Writes the page comparing `b` against `a` at `rel`.
pub fn write(site: &Pages, rel: &str, a: &Run, b: &Run) -> Result<Comparison> {
    let c = compare::compare(a, b, ALPHA)?;
    let mut body = page::facts(&[("A (before)", esc(&c.a)), ("B (after)", esc(&c.b))]);
    if !c.notes.is_empty() {
        body += "<ul class=\"notes\">\n";
        for n in &c.notes {
            body += &format!("<li>{}</li>\n", esc(n));
        }
        body += "</ul>\n";
    }
    body += &html(&c);
    let crumbs = [("index.html".to_string(), format!("{} ({})", b.manifest.experiment, b.manifest.scale))];
    site.write(
        rel,
        &page::page(&format!("{}: newest run against the one before", c.experiment), "../../", &crumbs, &body),
    )?;
    Ok(c)
}

/// The comparison's tables (without the page around them).
pub fn html(c: &Comparison) -> String {
    let changed = c.counts.iter().filter(|r| r.changed()).count();
    let mut s = format!(
        "<h2 id=\"counts\">Allocations (dhat build, exact)</h2>\n<p>{} counts compared; <strong>{changed} changed</strong> \
         (highlighted). An exact count repeats exactly, so any change is real.</p>\n",
        c.counts.len()
    );
    let rows: Vec<(String, Vec<String>)> = c
        .counts
        .iter()
        .map(|r| {
            (
                if r.changed() { "changed".into() } else { String::new() },
                vec![
                    esc(&r.cell),
                    esc(&r.column),
                    num(r.mean_a()),
                    num(r.mean_b()),
                    if r.changed() { num_signed(r.mean_b() - r.mean_a()) } else { "=".into() },
                ],
            )
        })
        .collect();
    s += &page::table("counts", &["cell", "count", "A per record", "B per record", "change"], &rows);
    for (cell, deltas) in &c.sites {
        s += &format!("<h3>Sites that changed in {}</h3>\n", esc(cell));
        if deltas.is_empty() {
            s += "<p>None: the traces' sites are equal (the change is outside the traced window).</p>\n";
        } else {
            s += &sites_table(&format!("sites-{cell}"), deltas, 20);
            if let Some((ta, tb)) = c.traces.get(cell) {
                s += &format!(
                    "<p>{}</p>\n<div class=\"diff-flame\">{}</div>\n",
                    esc(diff_flame::LEGEND),
                    diff_flame::svg(&diff_flame::tree(ta, tb), &format!("{cell}: A (before) against B (after)"))
                );
            }
        }
    }
    s += &format!(
        "<h2 id=\"times\">Timings</h2>\n<p>Median [95% CI]; a change is shown when Mann–Whitney U gives p &lt; {} \
         (red slower, green faster), else <code>~</code>.</p>\n",
        c.alpha
    );
    let rows: Vec<(String, Vec<String>)> = c
        .times
        .iter()
        .map(|r| {
            let sig = r.significant(c.alpha);
            let class = match (sig, r.delta() > 0.0) {
                (false, _) => "",
                (true, true) => "slower",
                (true, false) => "faster",
            };
            (
                class.into(),
                vec![
                    esc(&r.cell),
                    esc(&r.column),
                    esc(&ci(&r.a)),
                    esc(&ci(&r.b)),
                    if sig { format!("{:+.1}%", 100.0 * r.delta()) } else { "~".into() },
                    format!("{:.3}", r.p),
                    format!("{}+{}", r.a.n, r.b.n),
                ],
            )
        })
        .collect();
    if rows.is_empty() {
        s += "<p>No timing columns in this experiment.</p>\n";
    } else {
        s += &page::table("times", &["cell", "measure", "A", "B", "change", "p", "n"], &rows);
    }
    s
}

/// The sites whose totals differ between two traces (at most `limit`), as a
/// sortable table: the change in bytes and blocks, the side, and where the
/// subject meets the library that allocates.
pub fn sites_table(id: &str, deltas: &[trace::Delta], limit: usize) -> String {
    let rows: Vec<(String, Vec<String>)> = deltas
        .iter()
        .take(limit)
        .map(|d| {
            let frames: Vec<String> = d.site.meeting().iter().map(|f| esc(&f.display())).collect();
            (
                String::new(),
                vec![
                    format!("{:+}", d.bytes()),
                    format!("{:+}", d.blocks()),
                    d.site.side.map_or("?", |x| x.name()).into(),
                    format!("<div class=\"frames\">{}</div>", frames.join("<br>")),
                ],
            )
        })
        .collect();
    page::table(id, &["bytes (B − A)", "blocks (B − A)", "side", "where"], &rows)
}
