//! server-heap-growth: the server's heap over many queries. Table: per
//! workload and build, allocation calls and bytes per query (dhat, exact,
//! between the first sample and the last: warm-up excluded), peak heap,
//! live heap at the end, RSS at the end. Figure: cumulative bytes allocated
//! against queries (log–log), one line per workload (dhat build).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use records::server::server_heap_growth::{Record, Sample};
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::ServerHeapGrowth, table, Some(figure));

fn workloads(run: &Run) -> Vec<String> {
    let s = run.manifest.spec.scale(run.manifest.scale);
    s.params
        .get("workloads")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_else(|| vec!["ping".into(), "mix".into()])
}

/// `(queries, value)` of a field, in order, for one workload and build (repetition 0).
fn series(run: &Run, w: &str, variant: &str, f: fn(&Sample) -> Option<u64>) -> Result<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    for r in run.each::<Record>() {
        let r = r?;
        let Record::Sample(s) = &r.record;
        if s.workload == w && r.cell.variant == variant && r.cell.rep == 0 {
            if let Some(y) = f(s) {
                out.push((s.queries as f64, y as f64));
            }
        }
    }
    Ok(out)
}

/// Growth of `col` per query between the first sample after the start and the last.
fn per_query(points: &[(f64, f64)]) -> Option<f64> {
    let pts: Vec<&(f64, f64)> = points.iter().filter(|p| p.0 > 0.0).collect();
    match (pts.first(), pts.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) / (b.0 - a.0)),
        _ => None,
    }
}

fn table(run: &Run) -> Result<Table> {
    let mut rows = Vec::new();
    for w in workloads(run) {
        // The events build's product is its timelines (their own pages), not a row.
        for v in run.manifest.spec.variants_at(run.manifest.scale).iter().filter(|v| *v != "events") {
            let last = |f: fn(&Sample) -> Option<u64>| -> Result<Option<f64>> {
                Ok(series(run, &w, v, f)?.last().map(|p| p.1))
            };
            let n = series(run, &w, v, |s| s.rss_bytes)?.last().map_or(0.0, |p| p.0);
            if n == 0.0 {
                continue;
            }
            let live = last(|s| s.live_heap_bytes)?;
            let live0 = series(run, &w, v, |s| s.live_heap_bytes)?.iter().find(|p| p.0 > 0.0).map(|p| p.1);
            rows.push(row![
                w.clone(),
                v.clone(),
                fmt::thousands(n as u64),
                per_query(&series(run, &w, v, |s| s.total_allocs)?).map_or_else(dash, fmt::count),
                per_query(&series(run, &w, v, |s| s.total_bytes)?).map_or_else(dash, fmt::bytes),
                last(|s| s.peak_heap_bytes)?.map_or_else(dash, fmt::bytes),
                live.map_or_else(dash, fmt::bytes),
                match (live, live0) {
                    (Some(a), Some(b)) => fmt::bytes(a - b),
                    _ => dash(),
                },
                last(|s| s.rss_bytes)?.map_or_else(dash, fmt::bytes),
            ]);
        }
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let rows_param = s.params.get("rows").and_then(|v| v.as_u64()).map_or_else(|| "?".into(), fmt::thousands);
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "The server's heap over many queries from one client, a fresh server per workload: ping (the protocol \
             alone) and the three workload queries in turn on a {rows_param}-row table."
        ),
        method: "Per-query columns are the growth between the first sample after the start and the last \
                 (warm-up excluded), exact in the dhat build (jemalloc counts bytes per thread only, so its rows have \
                 none); each sample's own stats call is included. Live growth is the live heap at the end minus at \
                 the first sample: what a leak would show."
            .into(),
        header: vec![
            "Workload",
            "Build",
            "Queries",
            "Allocs/query",
            "Bytes/query",
            "Peak heap",
            "Live heap (end)",
            "Live growth",
            "RSS (end)",
        ],
        rows,
        source: source_of(run),
    })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let mut lines = Vec::new();
    for w in workloads(run) {
        let points: Vec<(f64, f64)> =
            series(run, &w, "dhat", |s| s.total_bytes)?.into_iter().filter(|p| p.0 > 0.0 && p.1 > 0.0).collect();
        if !points.is_empty() {
            lines.push(Line { label: format!("{w} (dhat build)"), points });
        }
    }
    let (xmin, xmax, ymin, ymax) = extent(&lines);
    let (xmin, ymin) = (xmin.max(1.0), ymin.max(1.0));
    let chart = Chart {
        title: format!("Server: bytes allocated against queries ({})", run.manifest.run_id),
        x_desc: "queries (log)",
        y_desc: "cumulative bytes allocated (log)",
        x_log: true,
        x_range: (xmin * 0.8, xmax * 1.25),
        y_log_floor: true,
        y_range: (ymin * 0.5, ymax * 2.0),
        x_fmt: &|v| fmt::count(v.round()),
        y_fmt: &|v| fmt::si_bytes(*v),
        x_marks: &[],
    };
    let mut files = write_both(dir, REPORT.name, &lines, &chart)?;
    // The events build's timeline of the query mix: live bytes site by
    // site over the call index (the GROUP BY's working set and the answer
    // buffers as what they are).
    run.traces()?;
    let mix = ::trace::events::files_in(&run.dir)?.into_iter().find(|p| {
        let n = p.to_string_lossy();
        n.ends_with("-mix.events.json") || n.ends_with("-mix.events.json.gz")
    });
    if let Some(path) = mix {
        let e = ::trace::events::Events::load(&path)?;
        let out = dir.join(format!("{TIMELINE}.svg"));
        super::timeline::write_timeline(&e, &out)?;
        files.push(out);
    }
    Ok(files)
}

/// The figure of the server's live heap by site over calls (the paper's).
pub const TIMELINE: &str = "server-heap-timeline";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};

    #[test]
    fn per_query_growth_leaves_out_the_first_interval() {
        let sample = |queries, total_allocs, live| {
            Record::Sample(Sample {
                workload: "mix".into(),
                queries,
                total_allocs: Some(total_allocs),
                total_bytes: Some(total_allocs * 100),
                peak_heap_bytes: Some(9000),
                live_heap_bytes: Some(live),
                jemalloc_allocated: None,
                jemalloc_active: None,
                jemalloc_resident: None,
                rss_bytes: Some(1 << 20),
            })
        };
        let rows = vec![
            (server("dhat", 0), sample(0, 0, 100)),
            (server("dhat", 0), sample(10, 5000, 600)),
            (server("dhat", 0), sample(30, 5400, 700)),
            // Another repetition: not read.
            (server("dhat", 1), sample(30, 1, 1)),
        ];
        let params = serde_json::json!({"workloads": ["mix"], "rows": 1000});
        let t = table(&run("server-heap-growth", Some(params), &rows)).unwrap();
        assert_eq!(cell(&t, &["mix", "dhat"], "Queries"), "30");
        assert_eq!(cell(&t, &["mix", "dhat"], "Allocs/query"), fmt::count(20.0));
        assert_eq!(cell(&t, &["mix", "dhat"], "Live growth"), fmt::bytes(100.0));
        assert_eq!(cell(&t, &["mix", "dhat"], "RSS (end)"), fmt::bytes(1048576.0));
    }
}
