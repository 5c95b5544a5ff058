//! The allocation gate's page (`report/gate.html`): the determinism map
//! (which counts repeat exactly, which vary, by how much and where) and
//! every count of the committed baseline.

use super::page::{self, esc};
use super::Pages;
use analysis::gate::baseline::Baseline;
use analysis::gate::map;
use anyhow::Result;

/// Writes `gate.html`; `None` when the repository has no baseline yet.
pub fn write(site: &Pages) -> Result<Option<String>> {
    let Ok(b) = Baseline::load(&site.root) else { return Ok(None) };
    let m = map::of(&b);
    let mut body = page::facts(&[
        ("map", esc(&m.summary())),
        ("blessed at", format!("<code>{}</code> on {}", esc(&m.revision), esc(&m.date))),
        ("reason", esc(&b.header.reason)),
        ("machine", esc(&m.machine)),
        ("runs", esc(&m.runs)),
    ]);
    body += "<p>The gate (<code>workbench gate</code>, run by the test command) runs every codec, every transport \
             stack and each server query at small sizes in the dhat build and fails on any count that differs from \
             <code>experiments/gate/baseline.txt</code>, naming the sites that moved. A count is called exact only \
             where it repeated exactly in every run below; a varying one is bounded only against gross change (half \
             its low end to twice its high end), and its cell's sites that did not vary are gated exactly, one \
             by one.</p>\n";
    body += "<h2 id=\"varying\">Counts that vary, and where</h2>\n";
    let mut rows = Vec::new();
    for v in &m.varying {
        let sites: Vec<String> = v
            .sites
            .iter()
            .map(|x| format!("[{}] blocks {} <code>{}</code>", esc(&x.side), x.blocks, esc(&x.label)))
            .collect();
        for (k, r) in &v.counts {
            rows.push((
                "changed".to_string(),
                vec![esc(&v.id.to_string()), esc(k), r.to_string(), esc(&map::percent(*r)), sites.join("<br>")],
            ));
        }
    }
    if rows.is_empty() {
        body += "<p>None: every count repeated exactly.</p>\n";
    } else {
        body += &page::table("varying", &["cell", "count", "range", "±", "sites that varied most"], &rows);
    }
    body += "<h2 id=\"counts\">Every count of the baseline</h2>\n<p>Totals over the cell's measured operations.</p>\n";
    let rows: Vec<(String, Vec<String>)> = b
        .counts
        .iter()
        .flat_map(|(id, counts)| {
            counts.iter().map(move |(k, r)| {
                let class = if r.is_exact() { "" } else { "changed" };
                let kind = if r.is_exact() { "exact" } else { "varies" };
                (class.to_string(), vec![esc(&id.to_string()), esc(k), r.to_string(), kind.to_string()])
            })
        })
        .collect();
    body += &page::table("counts", &["cell", "count", "value", "repeats"], &rows);
    site.write("gate.html", &page::page("Allocation gate: the determinism map", "", &[], &body))?;
    Ok(Some(m.summary()))
}
