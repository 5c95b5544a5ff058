//! Two traces of one run against each other: the differential allocation
//! flame graph and the sites that differ, one page per pair. The pairs: a
//! codec's idiom against its plain use at the same workload (protobuf
//! against protobuf-reuse, capnp against capnp-scratch, …; from
//! [`registry::Codec::base`]), and request-cost's kinds of call, each
//! against a server that served pings (what a call of that kind allocates).

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

/// Two traces drawn one against the other on a page.
struct Pair {
    a: std::path::PathBuf,
    b: std::path::PathBuf,
    /// What each side is, for the page.
    a_desc: String,
    b_desc: String,
    /// The page's file under `versus/`, without `.html`.
    file: String,
    title: String,
    label: String,
    /// What the totals line says the two runs shared.
    same: &'static str,
}

/// Every idiom whose plain codec has a trace at the same payload.
fn idiom_pairs(run_dir: &Path) -> Result<Vec<Pair>> {
    let mut out = Vec::new();
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
        out.push(Pair {
            a_desc: format!(
                "{} (<code>{}</code>)",
                esc(base.label()),
                esc(&base_path.file_name().unwrap_or_default().to_string_lossy())
            ),
            b_desc: format!("{} (<code>{}</code>)", esc(Codec::find(codec).map_or(codec, |c| c.label())), esc(&name)),
            a: base_path,
            b: path.clone(),
            file: format!("{codec}-p{payload}"),
            title: format!("{} against {codec}, {payload} B payload", base.name()),
            label: format!("A: {} · B: {codec} · payload {payload} B", base.name()),
            same: "the same messages and warm-up",
        });
    }
    Ok(out)
}

/// request-cost's kinds of call: each kind's server (that kind's calls
/// alone) against the one that served as many pings, so the graph is what
/// a call of that kind allocates beyond a call that does no work.
fn kind_pairs(run_dir: &Path) -> Result<Vec<Pair>> {
    use records::server::request_cost::{BASELINE_KIND, CLIENTS_PART, KIND_PART};
    let mut out = Vec::new();
    let paths = trace::traces_in(run_dir)?;
    for path in &paths {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let Some((cell, kind)) = name.strip_suffix(".dhat.json").and_then(|s| s.split_once(&format!("-{KIND_PART}")))
        else {
            continue;
        };
        let base = run_dir.join("traces").join(format!("{cell}-{KIND_PART}{BASELINE_KIND}.dhat.json"));
        if kind == BASELINE_KIND || !base.exists() {
            continue;
        }
        // The kinds served to many clients at once: `<cell>-clients-<c>`.
        let clients = cell.rsplit_once(&format!("-{CLIENTS_PART}")).and_then(|(_, c)| c.parse::<usize>().ok());
        let (file, who) = match clients {
            Some(c) => (format!("kind-{kind}-{CLIENTS_PART}{c}"), format!("{c} clients at once")),
            None => (format!("kind-{kind}"), "one client".to_string()),
        };
        out.push(Pair {
            a_desc: format!(
                "{BASELINE_KIND} calls alone (<code>{}</code>)",
                esc(&base.file_name().unwrap_or_default().to_string_lossy())
            ),
            b_desc: format!("{} calls alone (<code>{}</code>)", esc(kind), esc(&name)),
            a: base,
            b: path.clone(),
            title: format!("What {kind} calls allocate against {BASELINE_KIND}s, {who}"),
            label: format!("A: {BASELINE_KIND} · B: {kind} · {who}, the same number of calls"),
            file,
            same: if clients.is_some() {
                "a fresh server each, as many clients at once, the same number of calls"
            } else {
                "a fresh server each, one client, the same number of calls"
            },
        });
    }
    Ok(out)
}

/// Writes a page for every pair of traces in the run (idioms against their
/// plain codec, request-cost's kinds against pings); returns (href from
/// the dataset's page, link text).
pub fn write(site: &Pages, dataset_dir: &str, run_dir: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if !analysis::data::traces::unpacked(run_dir)?.is_dir() {
        return Ok(out);
    }
    for p in idiom_pairs(run_dir)?.into_iter().chain(kind_pairs(run_dir)?) {
        let (a, b) = (Trace::load(&p.a)?, Trace::load(&p.b)?);
        let rel = format!("{dataset_dir}/versus/{}.html", p.file);
        let mut body = page::facts(&[
            ("A", p.a_desc.clone()),
            ("B", p.b_desc.clone()),
            (
                "totals",
                format!(
                    "bytes {} → {}, blocks {} → {} (whole process, {})",
                    analysis::fmt::thousands(a.total_bytes()),
                    analysis::fmt::thousands(b.total_bytes()),
                    analysis::fmt::thousands(a.total_blocks()),
                    analysis::fmt::thousands(b.total_blocks()),
                    p.same
                ),
            ),
        ]);
        body += &format!(
            "<h2 id=\"flame\">Differential allocation flame graph</h2>\n<p>{}</p>\n<div class=\"diff-flame\">{}</div>\n",
            esc(diff_flame::LEGEND),
            diff_flame::svg(&diff_flame::tree(&a, &b), &p.label)
        );
        body += "<h2 id=\"sites\">Sites that differ</h2>\n";
        body += &super::compare::sites_table("sites", &trace::diff(&a, &b), SITES);
        let crumbs = [("../index.html#versus".to_string(), dataset_dir.replace('/', " · "))];
        site.write(&rel, &page::page(&p.title, "../../../", &crumbs, &body))?;
        out.push((format!("versus/{}.html", p.file), p.title));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_call_is_drawn_against_the_pings_of_its_cell() {
        let dir = std::env::temp_dir().join(format!("wb-versus-{}", std::process::id()));
        let traces = dir.join("traces");
        std::fs::create_dir_all(&traces).unwrap();
        for f in [
            "server-dhat-r0.dhat.json",
            "server-dhat-r0-kind-ping.dhat.json",
            "server-dhat-r0-kind-top-20-users.dhat.json",
            "server-dhat-r0-kind-filtered-count.dhat.json",
            // A kind of a cell without a ping server is not drawn.
            "other-dhat-r0-kind-top-20-users.dhat.json",
        ] {
            std::fs::write(traces.join(f), "{}").unwrap();
        }
        let pairs = kind_pairs(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let mut got: Vec<(String, String, String)> = pairs
            .iter()
            .map(|p| {
                let name = |q: &Path| q.file_name().unwrap().to_string_lossy().into_owned();
                (p.file.clone(), name(&p.a), name(&p.b))
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (
                    "kind-filtered-count".into(),
                    "server-dhat-r0-kind-ping.dhat.json".into(),
                    "server-dhat-r0-kind-filtered-count.dhat.json".into()
                ),
                (
                    "kind-top-20-users".into(),
                    "server-dhat-r0-kind-ping.dhat.json".into(),
                    "server-dhat-r0-kind-top-20-users.dhat.json".into()
                ),
            ]
        );
    }
}
