//! profiler-cost: what jemalloc's sampling heap profiler costs the server
//! in production. The throughput experiment's closed loop run against the
//! server built with jemalloc alone (statistics compiled out) and with its
//! heap profiler sampling at the default interval; repetitions of the two
//! interleaved by the runner, the order reversed every other repetition.
//! Table: per query and client count, each build's QPS and the ratio,
//! paired by repetition and round, beside the same ratio between two runs
//! of the plain build (A/A: the comparison's own noise).

use super::{ratio_range, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{col, source_of, stats_of, Table, TableCell};
use anyhow::Result;
use records::server::throughput::{HeapProfile, Query, Record};
use std::collections::BTreeMap;

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::ProfilerCost, table, None);

/// The build without the profiler, and the build with it.
pub const PLAIN: &str = "jemalloc-plain";
pub const SAMPLING: &str = "jemalloc-prof";

/// One build's QPS of one query at one client count, by (repetition, round).
type Runs = BTreeMap<(u64, u64), f64>;

fn runs(queries: &[(String, u64, Query)], variant: &str, query: &str, c: u64, f: fn(&Query) -> f64) -> Runs {
    queries
        .iter()
        .filter(|(v, _, q)| v == variant && q.query == query && q.concurrency == c)
        .map(|(_, rep, q)| ((*rep, q.round.unwrap_or(0)), f(q)))
        .collect()
}

/// `a ÷ b` for every (repetition, round) both have.
fn paired(a: &Runs, b: &Runs) -> Vec<f64> {
    a.iter().filter_map(|(k, x)| b.get(k).filter(|y| **y > 0.0).map(|y| x / y)).collect()
}

/// The plain build's runs against each other: repetition i ÷ repetition i +
/// 1, round by round. Two runs of one build differ by this much.
fn a_a(plain: &Runs) -> Vec<f64> {
    let reps: Vec<u64> = plain.keys().map(|k| k.0).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let mut out = Vec::new();
    for w in reps.windows(2) {
        for ((_, round), x) in plain.iter().filter(|(k, _)| k.0 == w[0]) {
            if let Some(y) = plain.get(&(w[1], *round)).filter(|y| **y > 0.0) {
                out.push(x / y);
            }
        }
    }
    out
}

fn qps_cell(r: &Runs) -> TableCell {
    TableCell::spread(&r.values().copied().collect::<Vec<_>>(), fmt::sig3)
}

fn table(run: &Run) -> Result<Table> {
    let mut queries: Vec<(String, u64, Query)> = Vec::new();
    let mut calls: Vec<HeapProfile> = Vec::new();
    for r in run.each::<Record>() {
        let r = r?;
        match r.record {
            Record::Query(q) => queries.push((r.cell.variant.to_string(), r.cell.rep, q)),
            Record::HeapProfile(h) => calls.push(h),
            _ => {}
        }
    }
    let mut order: Vec<(String, u64)> = Vec::new();
    for (_, _, q) in &queries {
        if !order.iter().any(|(n, c)| *n == q.query && *c == q.concurrency) {
            order.push((q.query.clone(), q.concurrency));
        }
    }
    let mut rows = Vec::new();
    for (query, c) in &order {
        let qps = |v| runs(&queries, v, query, *c, |q| q.qps);
        let p99 = |v| runs(&queries, v, query, *c, |q| q.p99_ms);
        let (plain, sampling) = (qps(PLAIN), qps(SAMPLING));
        rows.push(vec![
            TableCell::keyed(query.clone(), query),
            TableCell::keyed(c.to_string(), c),
            qps_cell(&plain),
            qps_cell(&sampling),
            TableCell::from(ratio_range(&paired(&sampling, &plain))),
            TableCell::from(ratio_range(&a_a(&plain))),
            TableCell::from(ratio_range(&paired(&p99(SAMPLING), &p99(PLAIN)))),
        ]);
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).map_or_else(|| "?".into(), |v| v.to_string());
    let caption = format!(
        "Server QPS with jemalloc's sampling heap profiler on (default interval) and off (jemalloc alone), {} s a \
         query and round, {} rows; ratios paired by run, median (min–max) over {} repetitions.",
        param("seconds"),
        param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
        s.repetitions,
    );
    let ms: Vec<f64> = calls.iter().map(|c| c.answer_ms).collect();
    let kb: Vec<f64> = calls.iter().map(|c| c.answer_bytes as f64).collect();
    let caption = match (stats_of(&ms), stats_of(&kb)) {
        (Some(t), Some(b)) => format!(
            "{caption} A heap_profile call after the loops: {} ms ({}–{}, {} calls), {} of gzipped pprof.",
            fmt::sig3(t.0),
            fmt::sig3(t.1),
            fmt::sig3(t.2),
            calls.len(),
            fmt::bytes(b.0),
        ),
        _ => caption,
    };
    Ok(Table {
        name: REPORT.name,
        caption,
        method: "A/A: the plain build's runs against each other. The two builds' repetitions interleave, the order \
                 reversed every other one."
            .into(),
        header: vec![
            "Query",
            "Clients",
            "jemalloc QPS",
            "Sampling QPS",
            col::SAMPLING_VS_JEMALLOC,
            col::A_A_JEMALLOC,
            "p99: sampling ÷ jemalloc",
        ],
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(query: &str, round: u64, qps: f64) -> Query {
        Query {
            engine: "ours".into(),
            query: query.into(),
            concurrency: 4,
            round: Some(round),
            rows: 1,
            queries: 1,
            seconds: 1.0,
            qps,
            p50_ms: 1.0,
            p99_ms: 1000.0 / qps,
            mean_ms: 1.0,
            answers_checked: Some(1),
            engine_p50_ms: None,
        }
    }

    #[test]
    fn ratios_pair_runs_by_repetition_and_round() {
        let mut queries = Vec::new();
        for rep in 0..2 {
            for round in 0..3 {
                queries.push((PLAIN.to_string(), rep, q("ping", round, 100.0 + rep as f64 * 10.0)));
                queries.push((SAMPLING.to_string(), rep, q("ping", round, 95.0 + rep as f64 * 10.0)));
            }
        }
        let plain = runs(&queries, PLAIN, "ping", 4, |q| q.qps);
        let sampling = runs(&queries, SAMPLING, "ping", 4, |q| q.qps);
        let r = paired(&sampling, &plain);
        assert_eq!(r.len(), 6);
        assert!(r.iter().all(|x| (0.95..0.96).contains(x)), "{r:?}");
        // Repetition 0 against 1, round by round: 100 / 110, three times.
        let aa = a_a(&plain);
        assert_eq!(aa.len(), 3);
        assert!(aa.iter().all(|x| (x - 100.0 / 110.0).abs() < 1e-12), "{aa:?}");
        // Nothing measured at another client count.
        assert!(runs(&queries, PLAIN, "ping", 8, |q| q.qps).is_empty());
    }
}
