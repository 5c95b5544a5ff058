//! throughput: closed-loop QPS of each workload query against concurrency.
//! Table: per engine, query and client count: QPS, p50 and p99 latency, and
//! the server's RSS while that cell ran (median and peak of the 100 ms
//! samples). Figure: QPS against clients (log–log), one line per engine ×
//! query. A second table, [`VERSUS`], sets ours beside ClickHouse per query
//! and client count, at every core and at one thread each.

use super::{distinct_u64, median, ratio_range, values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use probe::registry;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<records::server::throughput::Record>(registry::THROUGHPUT, table, Some(figure));

/// The (engine, query) pairs of the run, in first-seen order.
fn series(run: &Run) -> Result<Vec<(String, String)>> {
    let q = crate::report::tables::select(&run.records, &[("kind", "query")], &[])?;
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

pub const VERSUS: Report =
    Report { name: "throughput-vs-clickhouse", ..Report::of::<records::server::throughput::Record>(registry::THROUGHPUT, versus, None) };

fn engine_name(engine: &str) -> String {
    match engine {
        "ours" => "datastore-server (ZAP)".into(),
        "ours-1-thread" => "datastore-server (ZAP, 1 thread a query)".into(),
        "clickhouse" => "ClickHouse (chDB, default threads)".into(),
        "clickhouse-1-thread" => "ClickHouse (chDB, 1 thread a query)".into(),
        other => other.into(),
    }
}

/// What the run says of its peer: its version, how it ran, or why it did not.
fn peer_note(run: &Run) -> Result<String> {
    let Ok(df) = crate::report::tables::select(&run.records, &[("kind", "peer")], &[]) else {
        return Ok(String::new());
    };
    if df.height() == 0 {
        return Ok(" No peer was configured for this run.".into());
    }
    let text = |col: &str| -> Option<String> { df.column(col).ok()?.str().ok()?.get(0).map(str::to_string) };
    let Some(v) = text("version") else {
        return Ok(format!(
            " ClickHouse (chDB) did not run: {}.",
            text("reason").unwrap_or_else(|| "no reason recorded".into())
        ));
    };
    let num = |engine: &str, col: &str| -> Result<String> {
        Ok(median(&values(run, &[("kind", "peer"), ("engine", engine)], &[], col)?)
            .map_or_else(|| "?".into(), |x| format!("{x:.0}")))
    };
    if df.column("client_processes").is_err() {
        // A dataset from before the peer served concurrent clients.
        return Ok(format!(
            " The peer is {v}, in process through its Python API, its clients Python threads sharing one \
             connection (so one query at a time); its first answer to each query was checked equal to ours."
        ));
    }
    Ok(format!(
        " The peer is {v}, through its Python API, one process a client (chDB runs one query at a time a \
         process), each over its own hard-linked copy of the same loaded table ({} active part), so c clients \
         run c queries at once; max_threads in effect {} (default) and {} (one thread). Its answers: every one \
         equal to its client's first, and every client's first equal to ours.",
        num("clickhouse", "parts")?,
        num("clickhouse", "max_threads")?,
        num("clickhouse-1-thread", "max_threads")?,
    ))
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
            rows.push(row![
                engine_name(&engine),
                query.clone(),
                c.to_string(),
                fmt::sig3(qps),
                pick("p50_ms")?.map_or_else(dash, fmt::sig3),
                pick("p99_ms")?.map_or_else(dash, fmt::sig3),
                pick("engine_p50_ms").unwrap_or(None).map_or_else(dash, fmt::sig3),
                median(&rss).map_or_else(dash, fmt::bytes),
                peak.map_or_else(dash, fmt::bytes),
            ]);
        }
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).map_or_else(|| "?".into(), |v| v.to_string());
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Closed-loop throughput over ZAP on {} rows: each client (one thread, one connection) sends its next \
             query when the last is answered, for {} s per query, client count and round; every answer is checked \
             equal to the first. Server in its own process, its RSS sampled every 100 ms (median and peak over the \
             cell; for the peer, the proportional set size summed over its client processes, which counts the \
             pages they share once). Engine p50: the peer's own elapsed time a query, beside the latency its \
             client saw. Medians of {} round(s) in {} run(s).{}",
            param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
            param("seconds"),
            param("rounds").parse::<u64>().unwrap_or(1),
            s.repetitions,
            peer_note(run)?,
        ),
        header: vec![
            "Engine",
            "Query",
            "Clients",
            "QPS",
            "p50 (ms)",
            "p99 (ms)",
            "Engine p50 (ms)",
            "RSS (median)",
            "RSS (peak)",
        ],
        rows,
        source: source_of(run),
    })
}

/// The rounds of a run (one per repetition of every engine), or `[None]`
/// for a dataset from before rounds.
fn rounds(q: &Run) -> Result<Vec<Option<u64>>> {
    Ok(match q.records.column("round") {
        Ok(_) => distinct_u64(q, "round")?.into_iter().map(Some).collect(),
        Err(_) => vec![None],
    })
}

/// ClickHouse's own scaling at one thread a query: QPS at two clients ÷ at
/// one, per query (`None` when the run lacks either).
fn peer_scaling(q: &Run, query: &str) -> Result<Option<f64>> {
    let at = |c: u64| -> Result<Option<f64>> {
        Ok(median(&values(q, &[("engine", "clickhouse-1-thread"), ("query", query)], &[("concurrency", c)], "qps")?))
    };
    Ok(match (at(1)?, at(2)?) {
        (Some(one), Some(two)) if one > 0.0 => Some(two / one),
        _ => None,
    })
}

/// The peer must serve two clients at once at least 1.8 times as fast as
/// one (one thread a query, every query) before a ratio at two or more
/// clients is shown: below that, such a ratio measures how the peer was
/// driven, not the engine.
pub const PEER_SCALING_FLOOR: f64 = 1.8;

/// Ours beside ClickHouse: QPS per query and client count, and the ratio
/// ours ÷ ClickHouse as its median and range over the rounds (each round
/// ran both engines, in alternating order), with every core and with one
/// thread a query on each side.
fn versus(run: &Run) -> Result<Table> {
    let q = run_queries(run)?;
    let levels = distinct_u64(&q, "concurrency")?;
    let rounds = rounds(&q)?;
    let queries: Vec<String> = series(run)?.into_iter().map(|(_, name)| name).fold(Vec::new(), |mut v, n| {
        if !v.contains(&n) {
            v.push(n)
        }
        v
    });
    let qps_round = |engine: &str, query: &str, c: u64, round: Option<u64>| -> Result<Option<f64>> {
        let mut nums = vec![("concurrency", c)];
        nums.extend(round.map(|r| ("round", r)));
        Ok(median(&values(&q, &[("engine", engine), ("query", query)], &nums, "qps")?))
    };
    let qps = |engine: &str, query: &str, c: u64| -> Result<Option<f64>> {
        Ok(median(&values(&q, &[("engine", engine), ("query", query)], &[("concurrency", c)], "qps")?))
    };
    let ratio = |a: &str, b: &str, query: &str, c: u64| -> Result<String> {
        let mut r = Vec::new();
        for &round in &rounds {
            if let (Some(x), Some(y)) = (qps_round(a, query, c, round)?, qps_round(b, query, c, round)?) {
                if y > 0.0 {
                    r.push(x / y);
                }
            }
        }
        Ok(ratio_range(&r))
    };
    let show = |v: Option<f64>| v.map_or_else(dash, fmt::sig3);
    let scaling: Vec<(String, Option<f64>)> =
        queries.iter().map(|n| Ok((n.clone(), peer_scaling(&q, n)?))).collect::<Result<_>>()?;
    let concurrent = scaling.iter().all(|(_, s)| s.is_some_and(|s| s >= PEER_SCALING_FLOOR));
    let mut rows = Vec::new();
    for query in &queries {
        for &c in levels.iter().filter(|&&c| c == 1 || concurrent) {
            rows.push(row![
                query.clone(),
                c.to_string(),
                show(qps("ours", query, c)?),
                show(qps("clickhouse", query, c)?),
                ratio("ours", "clickhouse", query, c)?,
                show(qps("ours-1-thread", query, c)?),
                show(qps("clickhouse-1-thread", query, c)?),
                ratio("ours-1-thread", "clickhouse-1-thread", query, c)?,
            ]);
        }
    }
    let scaling_text = scaling
        .iter()
        .map(|(n, s)| format!("{n} {}", s.map_or_else(dash, |s| format!("{s:.2}×"))))
        .collect::<Vec<_>>()
        .join(", ");
    let scaling_note = match concurrent {
        true => format!(
            " ClickHouse serves clients concurrently here: at one thread a query its QPS at two clients is \
             {scaling_text} its QPS at one (the table shows more than one client only when every query \
             reaches {PEER_SCALING_FLOOR}×)."
        ),
        false => format!(
            " Only one client is shown: at one thread a query ClickHouse's QPS at two clients was \
             {scaling_text} its QPS at one, under the {PEER_SCALING_FLOOR}× a peer serving clients \
             concurrently reaches, so a ratio at more clients would measure how it was driven."
        ),
    };
    let rss = values(run, &[("kind", "rss"), ("engine", "ours")], &[], "rss_bytes")?;
    let peak = rss.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let rows_param = run
        .manifest
        .spec
        .scale(run.manifest.scale)
        .params
        .get("rows")
        .and_then(|v| v.as_u64())
        .map_or_else(|| "?".into(), fmt::thousands);
    let n_rounds = rounds.iter().flatten().count().max(1);
    Ok(Table {
        name: VERSUS.name,
        caption: format!(
            "Ours against upstream ClickHouse on the same {rows_param} rows, the same queries and the same closed loop \
             (the throughput table's runs): QPS (median of {n_rounds} round(s)) and the ratio ours ÷ ClickHouse as \
             its median and range over the rounds; each round ran both engines, ours first in even rounds and \
             ClickHouse first in odd ones. First with every core on both sides (ours: as many threads a query as \
             the server's CPU budget grants; ClickHouse: its default), then with one thread a query on both \
             sides. Our server's RSS through the whole mix, sampled every 100 ms: median {}, peak {}.{}{}",
            median(&rss).map_or_else(dash, fmt::bytes),
            peak.map_or_else(dash, fmt::bytes),
            scaling_note,
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
    Ok(Run::new(run.dir.clone(), run.manifest.clone(), crate::report::tables::select(&run.records, &[("kind", "query")], &[])?))
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
