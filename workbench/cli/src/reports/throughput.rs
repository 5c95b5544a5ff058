//! throughput: closed-loop QPS of each workload query against concurrency.
//! Table: per engine, query and client count: QPS, p50 and p99 latency, and
//! the server's RSS while that cell ran (median and peak of the 100 ms
//! samples). Figure: QPS against clients (log–log), one line per engine ×
//! query. A second table, [`VERSUS`], sets ours beside ClickHouse per query
//! and client count, at every core and at one thread each.

use super::{distinct_u64, median, values, Builds, Report};
use crate::dataset::Run;
use crate::figures::{extent, write_both, Chart, Line};
use crate::fmt;
use crate::tables::{dash, source_of, Table};
use anyhow::Result;
use std::path::{Path, PathBuf};

pub const REPORT: Report =
    Report { name: "throughput", dataset: "throughput", table, figure: Some(figure), builds: Builds::Uncounted };

/// The (engine, query) pairs of the run, in first-seen order.
fn series(run: &Run) -> Result<Vec<(String, String)>> {
    let q = crate::tables::select(&run.records, &[("kind", "query")], &[])?;
    let mut out: Vec<(String, String)> = Vec::new();
    for (e, name) in q.column("engine")?.str()?.iter().zip(q.column("query")?.str()?.iter()) {
        if let (Some(e), Some(name)) = (e, name) {
            if !out.iter().any(|(a, b)| a == e && b == name) {
                out.push((e.to_string(), name.to_string()));
            }
        }
    }
    Ok(out)
}

pub const VERSUS: Report = Report {
    name: "throughput-vs-clickhouse",
    dataset: "throughput",
    table: versus,
    figure: None,
    builds: Builds::Uncounted,
};

fn engine_name(engine: &str) -> String {
    match engine {
        "ours" => "datastore-server (ZAP)".into(),
        "ours-1-thread" => "datastore-server (ZAP, 1 thread a query)".into(),
        "clickhouse" => "ClickHouse (chDB, default threads)".into(),
        "clickhouse-1-thread" => "ClickHouse (chDB, 1 thread)".into(),
        other => other.into(),
    }
}

/// What the run says of its peer: its version, or why it did not run.
fn peer_note(run: &Run) -> Result<String> {
    let Ok(df) = crate::tables::select(&run.records, &[("kind", "peer")], &[]) else { return Ok(String::new()) };
    if df.height() == 0 {
        return Ok(" No peer was configured for this run.".into());
    }
    let text = |col: &str| -> Option<String> { df.column(col).ok()?.str().ok()?.get(0).map(str::to_string) };
    Ok(match text("version") {
        Some(v) => format!(
            " The peer is {v}, in process through its Python API (its clients are Python threads, one cursor \
             each), on the same rows loaded from a Parquet export, with quantileExact for our exact quantile; \
             its first answer to each query was checked equal to ours."
        ),
        None => format!(
            " ClickHouse (chDB) did not run: {}.",
            text("reason").unwrap_or_else(|| "no reason recorded".into())
        ),
    })
}

fn table(run: &Run) -> Result<Table> {
    let levels = distinct_u64(&run_queries(run)?, "concurrency")?;
    let mut rows = Vec::new();
    for (engine, query) in series(run)? {
        for &c in &levels {
            let pick = |col: &str| -> Result<Option<f64>> {
                Ok(median(&values(
                    run,
                    &[("kind", "query"), ("engine", &engine), ("query", &query)],
                    &[("concurrency", c)],
                    col,
                )?))
            };
            let Some(qps) = pick("qps")? else { continue };
            let rss = values(
                run,
                &[("kind", "rss"), ("engine", &engine), ("query", &query)],
                &[("concurrency", c)],
                "rss_bytes",
            )?;
            let peak = rss.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            rows.push(vec![
                engine_name(&engine),
                query.clone(),
                c.to_string(),
                fmt::sig3(qps),
                pick("p50_ms")?.map_or_else(dash, fmt::sig3),
                pick("p99_ms")?.map_or_else(dash, fmt::sig3),
                median(&rss).map_or_else(dash, fmt::bytes),
                peak.map_or_else(dash, fmt::bytes),
            ]);
        }
    }
    let s = run.manifest.spec.scale(&run.manifest.scale);
    let param = |k: &str| s.and_then(|s| s.params.get(k)).map_or_else(|| "?".into(), |v| v.to_string());
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Closed-loop throughput over ZAP on {} rows: each client (one thread, one connection) sends its next \
             query when the last is answered, for {} s per query and client count; every answer is checked equal \
             to the first. Server in its own process, its RSS sampled every 100 ms (median and peak over the \
             cell; for the peer, the RSS of its whole process). Medians of {} run(s).{}",
            param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
            param("seconds"),
            s.map_or(1, |s| s.repetitions),
            peer_note(run)?,
        ),
        header: vec!["Engine", "Query", "Clients", "QPS", "p50 (ms)", "p99 (ms)", "RSS (median)", "RSS (peak)"],
        rows,
        source: source_of(run),
    })
}

/// Ours beside ClickHouse: QPS per query and client count, and the ratio,
/// with every core and with one thread a query on each side.
fn versus(run: &Run) -> Result<Table> {
    let q = run_queries(run)?;
    let levels = distinct_u64(&q, "concurrency")?;
    let queries: Vec<String> = series(run)?.into_iter().map(|(_, name)| name).fold(Vec::new(), |mut v, n| {
        if !v.contains(&n) {
            v.push(n)
        }
        v
    });
    let qps = |engine: &str, query: &str, c: u64| -> Result<Option<f64>> {
        Ok(median(&values(&q, &[("engine", engine), ("query", query)], &[("concurrency", c)], "qps")?))
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => dash(),
    };
    let show = |v: Option<f64>| v.map_or_else(dash, fmt::sig3);
    let mut rows = Vec::new();
    for query in &queries {
        for &c in &levels {
            let (ours, theirs) = (qps("ours", query, c)?, qps("clickhouse", query, c)?);
            let (ours1, theirs1) = (qps("ours-1-thread", query, c)?, qps("clickhouse-1-thread", query, c)?);
            rows.push(vec![
                query.clone(),
                c.to_string(),
                show(ours),
                show(theirs),
                ratio(ours, theirs),
                show(ours1),
                show(theirs1),
                ratio(ours1, theirs1),
            ]);
        }
    }
    let rss = values(run, &[("kind", "rss"), ("engine", "ours")], &[], "rss_bytes")?;
    let peak = rss.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let rows_param = run
        .manifest
        .spec
        .scale(&run.manifest.scale)
        .and_then(|s| s.params.get("rows"))
        .and_then(|v| v.as_u64())
        .map_or_else(|| "?".into(), fmt::thousands);
    Ok(Table {
        name: VERSUS.name,
        caption: format!(
            "Ours against upstream ClickHouse on the same {rows_param} rows, the same queries and the same closed loop \
             (the throughput table's runs): QPS and the ratio ours ÷ ClickHouse, first with every core on both \
             sides (ours: as many threads a query as the server's CPU budget grants; ClickHouse: its default), \
             then with one thread a query on both sides. Our server's RSS through the whole mix, sampled every \
             100 ms: median {}, peak {}.{}",
            median(&rss).map_or_else(dash, fmt::bytes),
            peak.map_or_else(dash, fmt::bytes),
            peer_note(run)?,
        ),
        header: vec![
            "Query",
            "Clients",
            "Ours QPS",
            "ClickHouse QPS",
            "Ours ÷ ClickHouse",
            "Ours QPS (1 thread)",
            "ClickHouse QPS (1 thread)",
            "Ours ÷ ClickHouse (1 thread)",
        ],
        rows,
        source: source_of(run),
    })
}

/// The query records only (the RSS samples carry a concurrency of their own).
fn run_queries(run: &Run) -> Result<Run> {
    Ok(Run {
        dir: run.dir.clone(),
        manifest: run.manifest.clone(),
        records: crate::tables::select(&run.records, &[("kind", "query")], &[])?,
    })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let q = run_queries(run)?;
    let levels = distinct_u64(&q, "concurrency")?;
    let mut lines = Vec::new();
    for (engine, query) in series(run)? {
        let mut points = Vec::new();
        for &c in &levels {
            let v = values(&q, &[("engine", &engine), ("query", &query)], &[("concurrency", c)], "qps")?;
            if let Some(m) = median(&v) {
                points.push((c as f64, m));
            }
        }
        lines.push(Line { label: format!("{}: {query}", engine_name(&engine)), points });
    }
    let (_, xmax, ymin, ymax) = extent(&lines);
    let ymin = ymin.max(1e-3);
    let chart = Chart {
        title: format!("Queries per second against clients ({})", run.manifest.run_id),
        x_desc: "concurrent clients (log)",
        y_desc: "queries per second (log)",
        x_log: true,
        x_range: (0.8, xmax * 1.25),
        y_log_floor: true,
        y_range: (ymin * 0.5, ymax * 2.0),
        x_fmt: &|v| fmt::count(v.round()),
        y_fmt: &|v| fmt::count(v.round()),
    };
    write_both(dir, REPORT.name, &lines, &chart)
}
