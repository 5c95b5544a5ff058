//! A codec's idiom against its plain use at the same workload (protobuf
//! against protobuf-reuse, capnp against capnp-scratch, json-rpc against
//! json-rpc-borrowed, …; pairs from [`registry::Codec::base`]): the
//! differential allocation flame graph of their traces and the sites that
//! differ, one page per pair and payload.

use super::page::{self, esc};
use super::Pages;
use ::trace::{self, diff_flame, Trace};
use anyhow::Result;
use registry::Codec;
use std::path::Path;

/// Sites listed under the graph.
const SITES: usize = 15;

/// The trace of `codec` at `payload` in `run_dir` (first repetition).
fn trace_path(run_dir: &Path, codec: &str, payload: u64) -> std::path::PathBuf {
    run_dir.join("traces").join(registry::CellId::subject(codec, payload, "dhat", 0).trace_file("dhat.json"))
}

/// Writes a page for every idiom whose plain codec has a trace at the same
/// payload; returns (href from the dataset's page, link text).
pub fn write(site: &Pages, dataset_dir: &str, run_dir: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if !run_dir.join("traces").is_dir() {
        return Ok(out);
    }
    for path in trace::traces_in(run_dir)? {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let Some(Ok(registry::CellId::Subject { codec, payload, variant, rep: 0 })) =
            name.strip_suffix(".dhat.json").map(str::parse::<registry::CellId>)
        else {
            continue;
        };
        let (codec, payload) = (codec.as_str(), payload);
        let Some(base) = Codec::find(codec).filter(|_| variant == "dhat").and_then(Codec::base) else { continue };
        let base_path = trace_path(run_dir, base.name(), payload);
        if !base_path.exists() {
            continue;
        }
        let (a, b) = (Trace::load(&base_path)?, Trace::load(&path)?);
        let rel = format!("{dataset_dir}/versus/{codec}-p{payload}.html");
        let title = format!("{} against {codec}, {payload} B payload", base.name());
        let label = format!("A: {} · B: {codec} · payload {payload} B", base.name());
        let mut body = page::facts(&[
            (
                "A",
                format!(
                    "{} (<code>{}</code>)",
                    esc(base.label()),
                    esc(&base_path.file_name().unwrap_or_default().to_string_lossy())
                ),
            ),
            ("B", format!("{} (<code>{}</code>)", esc(Codec::find(codec).map_or(codec, |c| c.label())), esc(&name))),
            (
                "totals",
                format!(
                    "bytes {} → {}, blocks {} → {} (whole process, the same messages and warm-up)",
                    crate::fmt::thousands(a.total_bytes()),
                    crate::fmt::thousands(b.total_bytes()),
                    crate::fmt::thousands(a.total_blocks()),
                    crate::fmt::thousands(b.total_blocks())
                ),
            ),
        ]);
        body += &format!(
            "<h2 id=\"flame\">Differential allocation flame graph</h2>\n<p>{}</p>\n<div class=\"diff-flame\">{}</div>\n",
            esc(diff_flame::LEGEND),
            diff_flame::svg(&diff_flame::tree(&a, &b), &label)
        );
        body += "<h2 id=\"sites\">Sites that differ</h2>\n";
        body += &super::compare::sites_table("sites", &trace::diff(&a, &b), SITES);
        let crumbs = [("../index.html#versus".to_string(), dataset_dir.replace('/', " · "))];
        site.write(&rel, &page::page(&title, "../../../", &crumbs, &body))?;
        out.push((format!("versus/{codec}-p{payload}.html"), title));
    }
    Ok(out)
}
