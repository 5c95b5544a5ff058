//! A dhat trace's page: its totals, the top sites by bytes, by blocks and
//! by bytes live at the heap's peak (as `workbench trace top` ranks them),
//! an interactive flame graph of bytes by caller (inferno's SVG: click a
//! frame to zoom, its search box to highlight), and the file itself for
//! DHAT's own viewer.

use super::page::{self, esc, link};
use super::Pages;
use ::trace::{self, By, Trace};
use analysis::fmt::thousands;
use anyhow::Result;
use std::path::Path;

/// Sites listed per ranking.
const TOP: usize = 15;

/// What the dataset's page lists of a trace.
pub struct Written {
    /// From the dataset's page.
    pub href: String,
    pub cell: String,
    pub bytes: u64,
    pub blocks: u64,
    pub sites: usize,
    pub operations: Option<u64>,
}

pub fn write(site: &Pages, dataset_dir: &str, path: &Path) -> Result<Written> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let cell = name.trim_end_matches(".dhat.json").to_string();
    let rel = format!("{dataset_dir}/traces/{cell}.html");
    let file_link = link(&site.link_out(&rel, path), &name);
    let crumbs = [("../index.html#traces".to_string(), dataset_dir.replace('/', " · "))];
    let title = format!("trace {cell}");
    let t = match Trace::load(path) {
        Ok(t) => t,
        Err(e) => {
            // A page saying why, so the dataset's link still resolves.
            let body =
                format!("<p class=\"error\">This trace did not load: {}</p><p>{file_link}</p>", esc(&e.to_string()));
            site.write(&rel, &page::page(&title, "../../../", &crumbs, &body))?;
            return Ok(Written {
                href: format!("traces/{cell}.html"),
                cell,
                bytes: 0,
                blocks: 0,
                sites: 0,
                operations: None,
            });
        }
    };
    let flame = format!("{cell}.flame.svg");
    trace::write_flamegraph(&t, &site.file(&format!("{dataset_dir}/traces/{flame}"))?)?;
    let viewer = match trace::viewer() {
        Some(v) => format!(
            "open {} and load this file with its button",
            link(&format!("file://{}", v.display()), "valgrind's DHAT viewer")
        ),
        None => "valgrind's DHAT viewer (dh_view.html) opens it; valgrind is not installed here".into(),
    };
    let mut body = page::facts(&[
        ("file", format!("{file_link} — {viewer}")),
        ("command", format!("<code>{}</code>", esc(&t.cmd))),
        ("allocated", format!("{} B in {} blocks", thousands(t.total_bytes()), thousands(t.total_blocks()))),
        ("sites", t.sites.len().to_string()),
        ("operations", t.operations.map_or("—".into(), |n| thousands(n).to_string())),
        ("duration", trace::render::life(t.end_us as f64)),
    ]);
    for (by, id, what) in [
        (By::Bytes, "bytes", "Top sites by bytes allocated"),
        (By::Blocks, "blocks", "Top sites by blocks (allocations)"),
        (By::Peak, "peak", "Top sites by bytes live at the heap's peak"),
    ] {
        body += &format!("<h2 id=\"{id}\">{what}</h2>\n");
        body += &top_table(&t, by, id);
    }
    body += &format!(
        "<h2 id=\"flame\">Flame graph of bytes by caller</h2>\n<p>Click a frame to zoom into it, \
         “Reset Zoom” to go back; {} on its own.</p>\n\
         <iframe class=\"flame\" src=\"{flame}\" title=\"flame graph of {}\"></iframe>\n",
        link(&flame, "open the SVG"),
        esc(&cell)
    );
    site.write(&rel, &page::page(&title, "../../../", &crumbs, &body))?;
    Ok(Written {
        href: format!("traces/{cell}.html"),
        cell,
        bytes: t.total_bytes(),
        blocks: t.total_blocks(),
        sites: t.sites.len(),
        operations: t.operations,
    })
}

fn top_table(t: &Trace, by: By, id: &str) -> String {
    let total = t.total_bytes().max(1) as f64;
    let mut rows = Vec::new();
    for (i, x) in t.top(by, None).iter().take(TOP).enumerate() {
        let meeting = x.meeting();
        let mut frames: Vec<String> = meeting.iter().map(|f| esc(&f.display())).collect();
        if meeting.len() < x.stack.len() {
            frames.push(format!("… {} caller frames", x.stack.len() - meeting.len()));
        }
        let per_op = t.operations.map_or("—".into(), |n| format!("{:.3}", x.blocks as f64 / n.max(1) as f64));
        rows.push((
            String::new(),
            vec![
                (i + 1).to_string(),
                thousands(x.bytes).to_string(),
                format!("{:.1}%", 100.0 * x.bytes as f64 / total),
                thousands(x.blocks).to_string(),
                per_op,
                thousands(x.at_peak).to_string(),
                trace::render::life(x.lifetime_us as f64 / x.blocks.max(1) as f64),
                x.side.map_or("?", |s| s.name()).to_string(),
                format!(
                    "<div class=\"frames\">{}{}</div>",
                    x.via.as_ref().map(|v| format!("via {}<br>", esc(v))).unwrap_or_default(),
                    frames.join("<br>")
                ),
            ],
        ));
    }
    page::table(
        &format!("top-{id}"),
        &["#", "bytes", "share", "blocks", "blocks/op", "at peak", "avg life", "side", "where"],
        &rows,
    )
}
