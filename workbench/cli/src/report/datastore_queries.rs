//! datastore-queries: the engine alone. Table: per query and threads
//! setting, the median time with its range over the runs, the scan rate,
//! and the engine process's RSS after the mix and at its peak.

use super::{distinct_u64, median, values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{dash, row, select, source_of, Cell, Table};
use anyhow::Result;
use probe::registry;

pub const REPORT: Report = Report::of(registry::DATASTORE_QUERIES, table, None);

/// How a threads setting reads in the table (the prose macros find rows by it).
pub fn threads_label(threads: u64) -> String {
    match threads {
        0 => "every core".into(),
        1 => "1 thread".into(),
        n => format!("{n} threads"),
    }
}

/// The table's rows, from the `kind = "table"` record.
pub fn table_rows(run: &Run) -> Result<Option<u64>> {
    Ok(values(run, &[("kind", "table")], &[], "rows")?.first().map(|r| *r as u64))
}

fn table(run: &Run) -> Result<Table> {
    let q = select(&run.records, &[("kind", "query")], &[])?;
    let mut queries: Vec<String> = Vec::new();
    for name in q.column("query")?.str()?.iter().flatten() {
        if !queries.iter().any(|n| n == name) {
            queries.push(name.to_string());
        }
    }
    let queries_only = Run { dir: run.dir.clone(), manifest: run.manifest.clone(), records: q };
    let rows_n = table_rows(run)?;
    let mut rows = Vec::new();
    for query in &queries {
        for threads in distinct_u64(&queries_only, "threads")? {
            let ms = values(run, &[("kind", "query"), ("query", query)], &[("threads", threads)], "ms")?;
            let Some(med) = median(&ms) else { continue };
            let (lo, hi) = ms.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            let mem = |col: &str| -> Result<String> {
                Ok(median(&values(run, &[("kind", "memory")], &[("threads", threads)], col)?)
                    .map_or_else(dash, fmt::bytes))
            };
            rows.push(row![
                query.clone(),
                threads_label(threads),
                Cell::ranged(fmt::sig3(med), fmt::sig3(lo), fmt::sig3(hi)),
                ms.len().to_string(),
                rows_n.map_or_else(dash, |n| fmt::sig3(n as f64 / (med / 1e3) / 1e6)),
                mem("rss_after_bytes")?,
                mem("rss_peak_bytes")?,
            ]);
        }
    }
    let disk = values(run, &[("kind", "table")], &[], "disk_bytes")?.first().copied();
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "The engine alone, no server and no protocol: the workload's three queries on {} rows ({} on disk, \
             one part), timed in a process that only opened the table and runs them, interleaved, after one \
             warm-up round; median [min, max] over the runs. With every core a query scans on as many threads \
             as idle cores; with one thread, on its own. RSS of that process after the mix and at its peak \
             (opening the table included).",
            rows_n.map_or_else(|| "?".into(), fmt::thousands),
            disk.map_or_else(dash, fmt::bytes),
        ),
        header: vec!["Query", "Threads", "Median (ms)", "Runs", "M rows/s", "RSS after the mix", "Peak RSS"],
        rows,
        source: source_of(run),
    })
}
