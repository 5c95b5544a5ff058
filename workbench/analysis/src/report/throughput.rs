//! throughput: closed-loop QPS of each workload query against concurrency.
//! Table: per engine, query and client count: QPS, p50 and p99 latency, and
//! the server's RSS while that cell ran (median and peak of the 100 ms
//! samples). Figure: QPS against clients (log–log), one line per engine ×
//! query. A second table, [`VERSUS`], sets ours beside ClickHouse per query
//! and client count, at every core and at one thread each.

use super::{median, ratio_range, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{col, dash, row, source_of, Table, TableCell};
use anyhow::Result;
use records::server::throughput::{Peer, Query, Record, Rss};
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::Throughput, table, Some(figure));

pub const VERSUS: Report = Report {
    name: "throughput-vs-clickhouse",
    ..Report::of::<Record>(registry::Experiment::Throughput, versus, Some(roofline))
};

/// A run's records by kind, in the order written (build-stages' too, each
/// with its build).
pub(crate) struct Data {
    pub queries: Vec<(String, Query)>,
    pub rss: Vec<(String, Rss)>,
    pub peers: Vec<Peer>,
    pub floors: Vec<records::server::Floor>,
}

impl Data {
    pub fn of(run: &Run) -> Result<Data> {
        let mut d = Data { queries: Vec::new(), rss: Vec::new(), peers: Vec::new(), floors: Vec::new() };
        for r in run.each::<Record>() {
            let r = r?;
            match r.record {
                Record::Query(q) => d.queries.push((r.cell.variant.to_string(), q)),
                Record::Rss(x) => d.rss.push((r.cell.variant.to_string(), x)),
                Record::Peer(p) => d.peers.push(p),
                Record::Floor(f) => d.floors.push(f),
                // The resident set's parts: build-stages' anatomy table reads
                // them; the heap profile's cost, profiler-cost's.
                Record::Anatomy(_) | Record::HeapProfile(_) => {}
            }
        }
        Ok(d)
    }

    /// The (engine, query) pairs of the run, in first-seen order.
    fn series(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (_, q) in &self.queries {
            if !out.iter().any(|(a, b)| *a == q.engine && *b == q.query) {
                out.push((q.engine.clone(), q.query.clone()));
            }
        }
        out
    }

    /// The client counts measured, ascending.
    fn levels(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.queries.iter().map(|q| q.1.concurrency).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A field of the query records of one engine, query and client count
    /// (and round, if given).
    fn query(&self, engine: &str, query: &str, c: u64, round: Option<u64>, f: fn(&Query) -> Option<f64>) -> Vec<f64> {
        self.queries
            .iter()
            .map(|q| &q.1)
            .filter(|q| q.engine == engine && q.query == query && q.concurrency == c)
            .filter(|q| round.is_none() || q.round == round)
            .filter_map(f)
            .collect()
    }

    /// The memory samples of one engine (and query and client count, if given).
    fn rss(&self, engine: &str, at: Option<(&str, u64)>) -> Vec<f64> {
        self.rss
            .iter()
            .map(|r| &r.1)
            .filter(|r| r.engine == engine && at.is_none_or(|(q, c)| r.query == q && r.concurrency == c))
            .map(|r| r.rss_bytes as f64)
            .collect()
    }
}

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
fn peer_note(d: &Data) -> Result<String> {
    let Some(first) = d.peers.first() else {
        return Ok(" No peer was configured for this run.".into());
    };
    let Some(v) = &first.version else {
        return Ok(format!(
            " ClickHouse (chDB) did not run: {}.",
            first.reason.clone().unwrap_or_else(|| "no reason recorded".into())
        ));
    };
    let num = |engine: &str, f: fn(&Peer) -> Option<u64>| -> Result<String> {
        let v: Vec<f64> =
            d.peers.iter().filter(|p| p.engine == engine).filter_map(|p| f(p).map(|x| x as f64)).collect();
        Ok(median(&v).map_or_else(|| "?".into(), |x| format!("{x:.0}")))
    };
    if d.peers.iter().all(|p| p.client_processes.is_none()) {
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
        num("clickhouse", |p| p.parts)?,
        num("clickhouse", |p| p.max_threads)?,
        num("clickhouse-1-thread", |p| p.max_threads)?,
    ))
}

fn table(run: &Run) -> Result<Table> {
    let d = Data::of(run)?;
    let levels = d.levels();
    let mut rows = Vec::new();
    for (engine, query) in d.series() {
        for &c in &levels {
            let pick = |f: fn(&Query) -> Option<f64>| median(&d.query(&engine, &query, c, None, f));
            let Some(qps) = pick(|q| Some(q.qps)) else { continue };
            let rss = d.rss(&engine, Some((&query, c)));
            let peak = rss.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            rows.push(row![
                engine_name(&engine),
                query.clone(),
                c.to_string(),
                fmt::sig3(qps),
                pick(|q| Some(q.p50_ms)).map_or_else(dash, fmt::sig3),
                pick(|q| Some(q.p99_ms)).map_or_else(dash, fmt::sig3),
                pick(|q| q.engine_p50_ms).map_or_else(dash, fmt::sig3),
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
            "Closed-loop throughput over ZAP on {} rows, {} s per query, client count and round: medians of {} \
             round(s) in {} run(s).",
            param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
            param("seconds"),
            param("rounds").parse::<u64>().unwrap_or(1),
            s.repetitions,
        ),
        method: format!(
            "Each client (one thread, one connection) sends its next query when the last is answered; every \
             answer is checked equal to the first. Server in its own process, its RSS sampled every 100 ms (median and peak over the \
             cell; for the peer, the proportional set size summed over its client processes, which counts the \
             pages they share once). Engine p50: the peer's own elapsed time a query, beside the latency its \
             client saw.{}",
            peer_note(&d)?,
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
fn rounds(d: &Data) -> Vec<Option<u64>> {
    let mut v: Vec<u64> = d.queries.iter().filter_map(|q| q.1.round).collect();
    v.sort_unstable();
    v.dedup();
    match v.is_empty() {
        true => vec![None],
        false => v.into_iter().map(Some).collect(),
    }
}

/// ClickHouse's own scaling at one thread a query: QPS at two clients ÷ at
/// one, per query (`None` when the run lacks either).
fn peer_scaling(d: &Data, query: &str) -> Option<f64> {
    let at = |c: u64| median(&d.query("clickhouse-1-thread", query, c, None, |q| Some(q.qps)));
    match (at(1), at(2)) {
        (Some(one), Some(two)) if one > 0.0 => Some(two / one),
        _ => None,
    }
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
    let d = Data::of(run)?;
    let levels = d.levels();
    let rounds = rounds(&d);
    let queries: Vec<String> = d.series().into_iter().map(|(_, name)| name).fold(Vec::new(), |mut v, n| {
        if !v.contains(&n) {
            v.push(n)
        }
        v
    });
    let qps_round = |engine: &str, query: &str, c: u64, round: Option<u64>| -> Result<Option<f64>> {
        Ok(median(&d.query(engine, query, c, round, |q| Some(q.qps))))
    };
    let qps = |engine: &str, query: &str, c: u64| -> Result<Option<f64>> {
        Ok(median(&d.query(engine, query, c, None, |q| Some(q.qps))))
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
    let scaling: Vec<(String, Option<f64>)> = queries.iter().map(|n| (n.clone(), peer_scaling(&d, n))).collect();
    let concurrent = scaling.iter().all(|(_, s)| s.is_some_and(|s| s >= PEER_SCALING_FLOOR));
    let floors: Vec<&records::server::Floor> = d.floors.iter().collect();
    // At one client a query's latency is its time alone: over its floor.
    let times_floor = |query: &str, c: u64, ours: &str, peer: &str, threads: u64| -> String {
        let Some((floor, _)) = super::datastore_queries::floor_of(&floors, query, threads).filter(|_| c == 1) else {
            return dash();
        };
        let x = |engine: &str| {
            median(&d.query(engine, query, c, None, |q| Some(q.p50_ms)))
                .map_or_else(dash, |ms| format!("{}×", fmt::sig3(ms / floor)))
        };
        format!("{} / {}", x(ours), x(peer))
    };
    let floor_ms = |query: &str, c: u64, threads: u64| -> String {
        super::datastore_queries::floor_of(&floors, query, threads)
            .filter(|_| c == 1)
            .map_or_else(dash, |f| fmt::sig3(f.0))
    };
    let mut rows = Vec::new();
    for query in &queries {
        for &c in levels.iter().filter(|&&c| c == 1 || concurrent) {
            let mut row = row![
                show(qps("ours", query, c)?),
                show(qps("clickhouse", query, c)?),
                ratio("ours", "clickhouse", query, c)?,
                show(qps("ours-1-thread", query, c)?),
                show(qps("clickhouse-1-thread", query, c)?),
                ratio("ours-1-thread", "clickhouse-1-thread", query, c)?,
                floor_ms(query, c, 0),
                times_floor(query, c, "ours", "clickhouse", 0),
                floor_ms(query, c, 1),
                times_floor(query, c, "ours-1-thread", "clickhouse-1-thread", 1),
            ];
            // Found by the query's name and the clients.
            row.splice(0..0, [TableCell::keyed(query.clone(), query), TableCell::keyed(c.to_string(), c)]);
            rows.push(row);
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
    let rss = d.rss("ours", None);
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
             its median and range over the rounds. Our server's RSS through the whole mix: median {}, peak {}.",
            median(&rss).map_or_else(dash, fmt::bytes),
            peak.map_or_else(dash, fmt::bytes),
        ),
        method: format!(
            "Each round ran both engines, ours first in even rounds and \
             ClickHouse first in odd ones. First with every core on both sides (ours: as many threads a query as \
             the server's CPU budget grants; ClickHouse: its default), then with one thread a query on both \
             sides. Our server's RSS is sampled every 100 ms.{}{} At one client, each engine's median latency over \
             the query's floor. {}",
            scaling_note,
            peer_note(&d)?,
            super::datastore_queries::FLOOR_CAPTION,
        ),
        header: vec![
            "Query",
            "Clients",
            "Ours QPS",
            "ClickHouse QPS",
            col::OURS_VS_CLICKHOUSE,
            "Ours QPS (1 thread)",
            "ClickHouse QPS (1 thread)",
            "Ours ÷ ClickHouse (1 thread)",
            "Floor (ms)",
            "× floor, ours / ClickHouse",
            "Floor (ms, 1 thread)",
            "× floor, ours / ClickHouse (1 thread)",
        ],
        rows,
        source: source_of(run),
    })
}

/// Roofline-style: each query's time at one client against the bytes it
/// must touch, ours and ClickHouse's, every core and one thread, beside the
/// floor (this machine reading those bytes) at each setting.
fn roofline(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let d = Data::of(run)?;
    if d.floors.is_empty() {
        return Ok(Vec::new());
    }
    let floors: Vec<&records::server::Floor> = d.floors.iter().collect();
    let mut queries: Vec<(String, u64)> = Vec::new();
    for f in &d.floors {
        if !queries.iter().any(|q| q.0 == f.query) {
            queries.push((f.query.clone(), f.bytes));
        }
    }
    queries.sort_by_key(|q| q.1);
    let mut lines = Vec::new();
    for (label, threads) in [("floor, every core", 0), ("floor, 1 thread", 1)] {
        let points = queries
            .iter()
            .filter_map(|(q, b)| Some((*b as f64, super::datastore_queries::floor_of(&floors, q, threads)?.0)))
            .collect();
        lines.push(Line { label: label.into(), points });
    }
    for (engine, label) in [
        ("ours", "ours, every core"),
        ("clickhouse", "ClickHouse, every core"),
        ("ours-1-thread", "ours, 1 thread"),
        ("clickhouse-1-thread", "ClickHouse, 1 thread"),
    ] {
        let points: Vec<(f64, f64)> = queries
            .iter()
            .filter_map(|(q, b)| Some((*b as f64, median(&d.query(engine, q, 1, None, |x| Some(x.p50_ms)))?)))
            .collect();
        if !points.is_empty() {
            lines.push(Line { label: label.into(), points });
        }
    }
    let (xmin, xmax, ymin, ymax) = extent(&lines);
    // Each column of points is one query (its bytes): named above it.
    let marks: Vec<(f64, String)> = queries.iter().map(|(q, b)| (*b as f64, q.clone())).collect();
    let chart = Chart {
        title: format!("Query time against its floor, one client ({})", run.manifest.run_id),
        x_desc: "bytes the query must touch (log)",
        y_desc: "median latency (ms, log)",
        x_log: true,
        x_range: (xmin * 0.7, xmax * 1.4),
        y_log_floor: true,
        y_range: (ymin * 0.5, ymax * 2.0),
        x_fmt: &|v| fmt::si_bytes(*v),
        y_fmt: &|v| fmt::sig3(*v),
        x_marks: &marks,
    };
    write_both(dir, VERSUS.name, &lines, &chart)
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let d = Data::of(run)?;
    let levels = d.levels();
    let mut lines = Vec::new();
    for (engine, query) in d.series() {
        let mut points = Vec::new();
        for &c in &levels {
            let v = d.query(&engine, &query, c, None, |q| Some(q.qps));
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
        x_marks: &[],
    };
    write_both(dir, REPORT.name, &lines, &chart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};

    fn query(engine: &str, c: u64, round: u64, qps: f64) -> Record {
        Record::Query(Query {
            engine: engine.into(),
            query: "top-20-users".into(),
            concurrency: c,
            round: Some(round),
            rows: 1000,
            queries: 100,
            seconds: 1.0,
            qps,
            p50_ms: 2.0,
            p99_ms: 3.0,
            mean_ms: 2.0,
            answers_checked: Some(100),
            engine_p50_ms: None,
        })
    }

    #[test]
    fn the_ratio_is_taken_round_by_round_and_more_clients_need_a_peer_that_scales() {
        let mut rows = Vec::new();
        for (round, speed) in [(0, 1.0), (1, 2.0)] {
            rows.push((server("system", 0), query("ours", 1, round, 300.0 * speed)));
            rows.push((server("system", 0), query("clickhouse", 1, round, 100.0 * speed)));
            rows.push((server("system", 0), query("clickhouse-1-thread", 1, round, 50.0)));
            // Two clients barely faster than one: the peer was not driven concurrently.
            rows.push((server("system", 0), query("clickhouse-1-thread", 2, round, 55.0)));
        }
        let t = versus(&run("throughput", None, &rows)).unwrap();
        assert_eq!(cell(&t, &["top-20-users", "1"], "Ours ÷ ClickHouse"), "3.00× (3.00–3.00×)");
        assert!(t.rows.iter().all(|r| r[1].text == "1"), "only one client shown");
        assert!(t.method.contains("Only one client is shown"), "{}", t.method);
        let t = table(&run("throughput", None, &rows)).unwrap();
        assert_eq!(cell(&t, &[&engine_name("ours"), "top-20-users", "1"], "QPS"), fmt::sig3(450.0));
        assert!(t.method.contains("No peer was configured"), "{}", t.method);
    }
}
