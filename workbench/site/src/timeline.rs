//! An events file's page (`<dataset>/timelines/<cell>.html`): the heap over
//! the operation index, site by site ([`::trace::events`]):
//! the chart of live bytes (a point's exact value on hover), the sites that
//! grow after warm-up (leaks flagged), and flame graphs of what is live at
//! the peak and at the end; any other point is one command away.

use super::page::{self, esc, link};
use super::Pages;
use ::trace::{self, events};
use analysis::fmt::thousands;
use anyhow::{Context, Result};
use std::path::Path;

/// What the dataset's page lists of a timeline.
pub struct Written {
    pub href: String,
    pub cell: String,
    pub operations: u64,
    pub runs: usize,
    pub leaks: usize,
}

pub fn write(site: &Pages, dataset_dir: &str, path: &Path) -> Result<Written> {
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let cell = name.trim_end_matches(".gz").trim_end_matches(".events.json").to_string();
    let rel = format!("{dataset_dir}/timelines/{cell}.html");
    let crumbs = [("../index.html#timelines".to_string(), dataset_dir.replace('/', " · "))];
    let e = events::Events::load(path)?;
    let chart = site.file(&format!("{dataset_dir}/timelines/{cell}.timeline.svg"))?;
    analysis::report::timeline::write_timeline(&e, &chart)?;
    let text = std::fs::read_to_string(&chart).with_context(|| format!("reading {}", chart.display()))?;
    let inline = text.find("<svg").map_or(text.as_str(), |i| &text[i..]);
    let mut body = page::facts(&[
        ("file", link(&site.link_out(&rel, path), &name)),
        ("command", format!("<code>{}</code>", esc(&e.cmd))),
        (
            "operations",
            format!(
                "{} in {} runs of identical operations (how the file stays small)",
                thousands(e.operations()),
                thousands(e.runs() as u64)
            ),
        ),
        ("sites", e.sites.len().to_string()),
    ]);
    body += &format!(
        "<h2 id=\"chart\">Live bytes over operations</h2>\n<figure>\n{inline}\n<figcaption>After each operation \
         (message or query), exact at every point drawn; hover a point for its value. A transient buffer freed \
         within an operation is not on it (the dhat build's peak is). Its points as {}; every site's growth \
         after warm-up as {}.</figcaption>\n</figure>\n",
        link(&format!("{cell}.timeline.csv"), "CSV"),
        link(&format!("{cell}.growth.csv"), "CSV"),
    );
    let warmup = e.operations() / 10;
    let growth_csv = site.file(&format!("{dataset_dir}/timelines/{cell}.growth.csv"))?;
    std::fs::write(&growth_csv, e.growth_csv(warmup)).with_context(|| format!("writing {}", growth_csv.display()))?;
    let growth = e.growth(warmup);
    let leaks = growth.iter().filter(|g| g.leak).count();
    body += &format!(
        "<h2 id=\"growth\">Growth after warm-up</h2>\n<pre>{}</pre>\n",
        esc(&events::render_growth(&e, warmup))
    );
    for (at, id, what) in [(events::At::Peak, "peak", "at the heap's peak"), (events::At::End, "end", "at the end")] {
        let (_, said) = e.resolve(at);
        let flame = format!("{cell}.live-{id}.svg");
        let out = site.file(&format!("{dataset_dir}/timelines/{flame}"))?;
        trace::tree::write_flamegraph_of(&e.live_trace(at), &out, &format!("bytes live {said}"))?;
        body += &format!(
            "<h2 id=\"live-{id}\">Live {what}</h2>\n<p>Live {said}: {}.</p>\n\
             <iframe class=\"flame\" src=\"{flame}\" title=\"live bytes {what}\"></iframe>\n",
            link(&flame, "open the SVG")
        );
    }
    body += &format!(
        "<p>Any other operation: <code>workbench trace live {} --at N</code> (and <code>--svg F</code> for its \
         flame graph).</p>\n",
        esc(&path.display().to_string())
    );
    site.write(&rel, &page::page(&format!("timeline {cell}"), "../../../", &crumbs, &body))?;
    Ok(Written { href: format!("timelines/{cell}.html"), cell, operations: e.operations(), runs: e.runs(), leaks })
}
