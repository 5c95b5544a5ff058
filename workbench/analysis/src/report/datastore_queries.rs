//! datastore-queries: the engine alone. Table: per query and threads
//! setting, the median time with its range over the runs, the scan rate,
//! and the engine process's RSS after the mix and at its peak.

use super::{median, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{dash, row, source_of, Table, TableCell};
use anyhow::Result;
use records::server::datastore_queries::{Floor, Memory, Query, Record};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::DatastoreQueries, table, None);

/// How a threads setting reads in the table (the prose macros find rows by it).
pub fn threads_label(threads: u64) -> String {
    match threads {
        0 => "every core".into(),
        1 => "1 thread".into(),
        n => format!("{n} threads"),
    }
}

/// A query's floor at a threads setting: the median of its timed reads
/// (ms) and the bytes read, if the run measured it.
pub fn floor_of(floors: &[&Floor], query: &str, threads: u64) -> Option<(f64, u64)> {
    let f: Vec<&&Floor> = floors.iter().filter(|f| f.query == query && f.threads == threads).collect();
    let ms: Vec<f64> = f.iter().map(|f| f.ms).collect();
    Some((median(&ms)?, f.first()?.bytes))
}

/// What the floor columns' caption says (the throughput table's too).
pub const FLOOR_CAPTION: &str = "Floor: this machine reading the bytes the query must touch at all (per row, \
     the declared width of each column it reads, a LowCardinality key of four values one byte; filtered-count only \
     its category's quarter of the rows, which the primary index finds) as one streaming sum at the same threads \
     setting, median of as many reads as the query has runs, measured in the same run; × floor is the query's \
     median over it, so a query at 3× spends two thirds of its time above the memory traffic it cannot avoid.";

/// The loaded table, from its record.
pub fn loaded(run: &Run) -> Result<Option<records::server::datastore_queries::Table>> {
    Ok(run.rows::<Record>()?.into_iter().find_map(|r| match r.record {
        Record::Table(t) => Some(t),
        _ => None,
    }))
}

/// The table's rows.
pub fn table_rows(run: &Run) -> Result<Option<u64>> {
    Ok(loaded(run)?.map(|t| t.rows))
}

fn table(run: &Run) -> Result<Table> {
    let all = run.rows::<Record>()?;
    let (mut queries, mut memory, mut floors): (Vec<&Query>, Vec<&Memory>, Vec<&Floor>) =
        (Vec::new(), Vec::new(), Vec::new());
    for r in &all {
        match &r.record {
            Record::Query(q) => queries.push(q),
            Record::Memory(m) => memory.push(m),
            Record::Floor(f) => floors.push(f),
            Record::Table(_) => {}
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for q in &queries {
        if !names.contains(&q.query.as_str()) {
            names.push(&q.query);
        }
    }
    let mut settings: Vec<u64> = queries.iter().map(|q| q.threads).collect();
    settings.sort_unstable();
    settings.dedup();
    let loaded = loaded(run)?;
    let rows_n = loaded.as_ref().map(|t| t.rows);
    let mut rows = Vec::new();
    for &query in &names {
        for &threads in &settings {
            let ms: Vec<f64> =
                queries.iter().filter(|q| q.query == query && q.threads == threads).map(|q| q.ms).collect();
            let Some(med) = median(&ms) else { continue };
            let (lo, hi) = ms.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            let mem = |f: fn(&Memory) -> u64| -> String {
                let v: Vec<f64> = memory.iter().filter(|m| m.threads == threads).map(|m| f(m) as f64).collect();
                median(&v).map_or_else(dash, fmt::bytes)
            };
            let floor = floor_of(&floors, query, threads);
            rows.push(row![
                query.to_string(),
                threads_label(threads),
                TableCell::ranged(fmt::sig3(med), fmt::sig3(lo), fmt::sig3(hi)),
                ms.len().to_string(),
                rows_n.map_or_else(dash, |n| fmt::sig3(n as f64 / (med / 1e3) / 1e6)),
                floor.map_or_else(dash, |f| fmt::sig3(f.0)),
                floor.map_or_else(dash, |f| format!("{}×", fmt::sig3(med / f.0))),
                mem(|m| m.rss_after_bytes),
                mem(|m| m.rss_peak_bytes),
            ]);
        }
    }
    let disk = loaded.map(|t| t.disk_bytes as f64);
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "The engine alone, no server and no protocol: the workload's three queries on {} rows ({} on disk, \
             one part); median [min, max] over the runs, and the process's RSS.",
            rows_n.map_or_else(|| "?".into(), fmt::thousands),
            disk.map_or_else(dash, fmt::bytes),
        ),
        method: format!(
            "The queries are timed in a process that only opened the table and runs them, interleaved, after one \
             warm-up round. With every core a query scans on as many threads as idle cores; with one thread, on \
             its own. RSS of that process after the mix and at its peak (opening the table included). \
             {FLOOR_CAPTION}"
        ),
        header: vec![
            "Query",
            "Threads",
            "Median (ms)",
            "Runs",
            "M rows/s",
            "Floor (ms)",
            "× floor",
            "RSS after the mix",
            "Peak RSS",
        ],
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};

    #[test]
    fn a_row_per_query_and_threads_with_its_median_and_memory() {
        let q = |threads, run, ms| {
            Record::Query(Query { threads, query: "filtered-count".into(), run, ms, threads_used: 1, passes: 1 })
        };
        let rows = vec![
            (
                server("system", 0),
                Record::Table(records::server::datastore_queries::Table {
                    rows: 1_000_000,
                    parts: 1,
                    disk_bytes: 4096,
                }),
            ),
            (server("system", 0), q(1, 1, 10.0)),
            (server("system", 0), q(1, 2, 30.0)),
            (server("system", 0), q(1, 3, 20.0)),
            (server("system", 0), q(0, 1, 5.0)),
            (
                server("system", 0),
                Record::Floor(Floor { threads: 1, query: "filtered-count".into(), run: 1, bytes: 9, ms: 4.0 }),
            ),
            (
                server("system", 0),
                Record::Memory(Memory { threads: 1, rss_open_bytes: 1, rss_after_bytes: 2048, rss_peak_bytes: 4096 }),
            ),
        ];
        let t = table(&run("datastore-queries", None, &rows)).unwrap();
        assert_eq!(t.rows.len(), 2, "one row per threads setting");
        let key = ["filtered-count", "1 thread"];
        assert_eq!(cell(&t, &key, "Median (ms)"), fmt::sig3(20.0));
        assert_eq!(cell(&t, &key, "Runs"), "3");
        // 1M rows in 20 ms: 50 M rows/s.
        assert_eq!(cell(&t, &key, "M rows/s"), fmt::sig3(50.0));
        assert_eq!(cell(&t, &key, "Peak RSS"), fmt::bytes(4096.0));
        assert_eq!(cell(&t, &key, "Floor (ms)"), fmt::sig3(4.0));
        assert_eq!(cell(&t, &key, "× floor"), format!("{}×", fmt::sig3(5.0)));
        assert_eq!(cell(&t, &["filtered-count", "every core"], "× floor"), dash());
        assert_eq!(cell(&t, &["filtered-count", "every core"], "Peak RSS"), dash());
        assert!(t.caption.contains("1,000,000 rows"), "{}", t.caption);
    }
}
