//! fault-soak: hostile clients against the server's memory bounds. Table:
//! per workload (one flight of large answers on many connections, never
//! finished; minutes of mixed hostile acts), the statuses seen, crashes,
//! and the server's peak RSS against the warm-up peak plus the answer budget;
//! the caption adds the kill workload (SIGKILLs amid inserts, merges and
//! reads: rows acknowledged, lost, duplicated, restart times).

use super::{values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{dash, row, select, source_of, Table};
use anyhow::Result;
use probe::registry;

pub const REPORT: Report = Report::of::<records::server::fault_soak::Record>(registry::FAULT_SOAK, table, None);

fn table(run: &Run) -> Result<Table> {
    let mut rows = Vec::new();
    let mut budget = None;
    let summaries = select(&run.records, &[("kind", "summary")], &[])?;
    let mut workloads: Vec<String> = Vec::new();
    for w in summaries.column("workload")?.str()?.iter().flatten() {
        if !workloads.iter().any(|x| x == w) {
            workloads.push(w.to_string());
        }
    }
    for w in workloads.iter().map(String::as_str) {
        let summary = select(&run.records, &[("kind", "summary"), ("workload", w)], &[])?;
        let one = |col: &str| -> Result<Option<f64>> {
            // A column a workload of its own adds (`within_server_budget`) is absent from older runs.
            if run.records.column(col).is_err() {
                return Ok(None);
            }
            Ok(values(run, &[("kind", "summary"), ("workload", w)], &[], col)?.first().copied())
        };
        let text =
            |col: &str| -> Result<String> { Ok(summary.column(col)?.str()?.get(0).unwrap_or_default().to_string()) };
        let (warm, peak, b) = (one("warm_peak_rss_bytes")?, one("peak_rss_bytes")?, one("answer_budget_bytes")?);
        budget = budget.or(b);
        let verdict = match (warm, peak, b, one("within_server_budget")?) {
            (_, _, _, Some(within)) => {
                if within > 0.0 {
                    "yes"
                } else {
                    "NO"
                }
            }
            (Some(w), Some(p), Some(b), None) if p <= w + b => "yes",
            (Some(_), Some(_), Some(_), None) => "NO",
            _ => "?",
        };
        rows.push(row![
            w.to_string(),
            one("connections")?.map_or_else(dash, |v| fmt::thousands(v as u64)),
            one("seconds")?.map_or_else(dash, |v| format!("{v:.0} s")),
            one("calls")?.map_or_else(dash, |v| fmt::thousands(v as u64)),
            text("statuses")?,
            one("crashes")?.map_or_else(dash, |v| fmt::thousands(v as u64)),
            one("baseline_rss_bytes")?.map_or_else(dash, fmt::bytes),
            warm.map_or_else(dash, fmt::bytes),
            peak.map_or_else(dash, fmt::bytes),
            match (warm, peak) {
                (Some(w), Some(p)) => fmt::bytes(p - w),
                _ => dash(),
            },
            one("held_answer_bytes")?.map_or_else(dash, fmt::bytes),
            verdict.to_string(),
        ]);
    }
    let kill = |col: &str| -> Result<Option<f64>> { Ok(values(run, &[("kind", "kills")], &[], col)?.first().copied()) };
    let kills = match kill("kills")? {
        None => String::new(),
        Some(n) => {
            let count =
                |col: &str| -> Result<String> { Ok(kill(col)?.map_or_else(dash, |v| fmt::thousands(v as u64))) };
            let ms = |col: &str| -> Result<String> { Ok(kill(col)?.map_or_else(dash, |v| format!("{v:.1} ms"))) };
            format!(
                " kill (a data directory of its own): the server killed with SIGKILL {} times, each after a random \
                 20-400 ms of {} writers streaming {}-row insert batches, a reader and background merges, and \
                 started again on the same directory: {} rows acknowledged, {} lost, {} duplicated, {} batches \
                 present in part; restart to its first answer on the table {} (median), {} (max).",
                fmt::thousands(n as u64),
                count("writers")?,
                count("batch_rows")?,
                count("rows_acked")?,
                count("rows_lost")?,
                count("duplicates")?,
                count("partial_batches")?,
                ms("restart_ms_median")?,
                ms("restart_ms_max")?,
            )
        }
    };
    let greedy_rows = match run.records.column("greedy_rows") {
        Ok(_) => values(run, &[("kind", "summary")], &[], "greedy_rows")?,
        Err(_) => Vec::new(),
    };
    let greedy = match greedy_rows.iter().find(|r| !r.is_nan()) {
        None => String::new(),
        Some(rows) => format!(
            " greedy (a {}-row table of its own): the queries whose working sets had no bound before queries had a \
             memory budget (uniqExact of every id; a quantile per user; every row sorted; GROUP BY every id, and \
             every id and user), each alone on a fresh server (the row shows the largest growth) and the four that \
             aggregate at once, under the query and server memory budgets named (--max-query-memory, \
             --max-server-memory); a query past them is stopped (413) or refused (503), a sort of every row \
             passes the result-row limit (413). For these rows RSS (base) is the server's with the table open, \
             Peak RSS its high-water mark after, and Within says whether every server's peak stayed under its \
             base plus the server budget.",
            fmt::thousands(*rows as u64)
        ),
    };
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).and_then(|v| v.as_u64()).map_or_else(|| "?".into(), fmt::thousands);
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Hostile clients against one server, a fresh server per workload, on a {}-row table whose SELECT * \
             answers {}. flight: {} connections each send {} SELECT * in one flight and finish none, all \
             held open until every answer or refusal is read. soak: {} threads for the seconds shown, each act on a \
             new connection, chosen at random: 4,000-term SQL, a path as a table name, a held flight of 20 large \
             answers, 20 large answers never read, a stalled frame, a fuzz mutant, a 10,000-value IN list, or a \
             workload query whose answer must equal the first one seen. Statuses as status:count (0: no answer \
             expected). Warm peak is the RSS high-water mark after every worker answered the large query at once \
             (the working set of one answer per worker); Within says whether peak RSS stayed under warm peak plus \
             the answer budget ({}). Held is the answer bytes the server reported holding at the end of the \
             flight. Crashes: 1 if the server had exited or did not answer a ping at the end.{}{}",
            param("rows"),
            values(run, &[("kind", "summary"), ("workload", "flight")], &[], "answer_size_bytes")?
                .first()
                .map_or_else(dash, |b| fmt::bytes(*b)),
            param("connections"),
            param("flight"),
            param("clients"),
            budget.map_or_else(dash, fmt::bytes),
            kills,
            greedy,
        ),
        header: vec![
            "Workload",
            "Clients",
            "Time",
            "Calls",
            "Statuses",
            "Crashes",
            "RSS (base)",
            "Warm peak",
            "Peak RSS",
            "Peak - warm",
            "Held",
            "Within",
        ],
        rows,
        source: source_of(run),
    })
}
