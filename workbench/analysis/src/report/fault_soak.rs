//! fault-soak: hostile clients against the server's memory bounds. Table:
//! per workload (one flight of large answers on many connections, never
//! finished; minutes of mixed hostile acts), the statuses seen, crashes,
//! and the server's peak RSS against the warm-up peak plus the answer budget;
//! the caption adds the kill workload (SIGKILLs amid inserts, merges and
//! reads: rows acknowledged, lost, duplicated, restart times).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use records::server::fault_soak::{Detail, Kills, Record, Summary};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::FaultSoak, table, None);

fn table(run: &Run) -> Result<Table> {
    let all = run.rows::<Record>()?;
    let mut summaries: Vec<&Summary> = Vec::new();
    let mut kills: Option<&Kills> = None;
    for r in &all {
        match &r.record {
            Record::Summary(s) => summaries.push(s),
            Record::Kills(k) => kills = kills.or(Some(k)),
            Record::Sample(_) => {}
        }
    }
    let mut rows = Vec::new();
    let mut budget = None;
    let mut workloads: Vec<&str> = Vec::new();
    for s in &summaries {
        if !workloads.contains(&s.workload.as_str()) {
            workloads.push(&s.workload);
        }
    }
    for w in workloads {
        let Some(s) = summaries.iter().find(|s| s.workload == w) else { continue };
        let (load, greedy) = match &s.detail {
            Detail::Load(l) => (Some(l), None),
            Detail::Greedy(g) => (None, Some(g)),
        };
        let warm = load.map(|l| l.warm_peak_rss_bytes as f64);
        let peak = Some(s.peak_rss_bytes as f64);
        let b = load.map(|l| l.answer_budget_bytes as f64);
        budget = budget.or(b);
        let verdict = match (warm, peak, b, greedy) {
            (_, _, _, Some(g)) => {
                if g.within_server_budget > 0 {
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
            fmt::thousands(s.connections),
            format!("{:.0} s", s.seconds),
            fmt::thousands(s.calls),
            s.statuses.clone(),
            fmt::thousands(s.crashes),
            fmt::bytes(s.baseline_rss_bytes as f64),
            warm.map_or_else(dash, fmt::bytes),
            peak.map_or_else(dash, fmt::bytes),
            match (warm, peak) {
                (Some(w), Some(p)) => fmt::bytes(p - w),
                _ => dash(),
            },
            load.and_then(|l| l.held_answer_bytes).map_or_else(dash, |v| fmt::bytes(v as f64)),
            verdict.to_string(),
        ]);
    }
    let kills = match kills {
        None => String::new(),
        Some(k) => format!(
            " kill (a data directory of its own): the server killed with SIGKILL {} times, each after a random \
             20-400 ms of {} writers streaming {}-row insert batches, a reader and background merges, and \
             started again on the same directory: {} rows acknowledged, {} lost, {} duplicated, {} batches \
             present in part; restart to its first answer on the table {:.1} ms (median), {:.1} ms (max).",
            fmt::thousands(k.kills),
            fmt::thousands(k.writers),
            fmt::thousands(k.batch_rows),
            fmt::thousands(k.rows_acked),
            fmt::thousands(k.rows_lost),
            fmt::thousands(k.duplicates),
            fmt::thousands(k.partial_batches),
            k.restart_ms_median,
            k.restart_ms_max,
        ),
    };
    let greedy_rows = summaries.iter().find_map(|s| match &s.detail {
        Detail::Greedy(g) => Some(g.greedy_rows),
        Detail::Load(_) => None,
    });
    let greedy = match greedy_rows {
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
            fmt::thousands(rows)
        ),
    };
    let flight_answer = summaries.iter().find_map(|s| match &s.detail {
        Detail::Load(l) if s.workload == "flight" => Some(l.answer_size_bytes as f64),
        _ => None,
    });
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).and_then(|v| v.as_u64()).map_or_else(|| "?".into(), fmt::thousands);
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Hostile clients against one server, a fresh server per workload, on a {}-row table whose SELECT * \
             answers {}: answers, peak RSS against the budget, answer bytes held, crashes.",
            param("rows"),
            flight_answer.map_or_else(dash, fmt::bytes),
        ),
        method: format!(
            "flight: {} connections each send {} SELECT * in one flight and finish none, all \
             held open until every answer or refusal is read. soak: {} threads for the seconds shown, each act on a \
             new connection, chosen at random: 4,000-term SQL, a path as a table name, a held flight of 20 large \
             answers, 20 large answers never read, a stalled frame, a fuzz mutant, a 10,000-value IN list, or a \
             workload query whose answer must equal the first one seen. Statuses as status:count (0: no answer \
             expected). Warm peak is the RSS high-water mark after every worker answered the large query at once \
             (the working set of one answer per worker); Within says whether peak RSS stayed under warm peak plus \
             the answer budget ({}). Held is the answer bytes the server reported holding at the end of the \
             flight. Crashes: 1 if the server had exited or did not answer a ping at the end.{}{}",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};
    use records::server::fault_soak::{Greedy, Load};

    fn summary(workload: &str, peak: u64, detail: Detail) -> Record {
        Record::Summary(Summary {
            workload: workload.into(),
            connections: 10,
            seconds: 5.0,
            calls: 1000,
            statuses: "200:990 503:10".into(),
            acts: String::new(),
            errors_5xx_internal: 0,
            crashes: 0,
            baseline_rss_bytes: 10 << 20,
            peak_rss_bytes: peak,
            detail,
        })
    }

    #[test]
    fn the_verdict_holds_each_workload_to_its_own_bound() {
        let load = |warm: u64| Load {
            flight: 100,
            warm_peak_rss_bytes: warm,
            sampled_peak_rss_bytes: 0,
            end_rss_bytes: None,
            answer_budget_bytes: 64 << 20,
            conn_answer_budget_bytes: 8 << 20,
            rows: 1000,
            answer_size_bytes: 1 << 20,
            held_answer_bytes: Some(0),
        };
        let greedy =
            Greedy { query_memory_bytes: 1, server_memory_bytes: 2, greedy_rows: 300_000, within_server_budget: 0 };
        let rows = vec![
            (server("system", 0), summary("flight", 100 << 20, Detail::Load(load(50 << 20)))),
            (server("system", 0), summary("soak", 200 << 20, Detail::Load(load(50 << 20)))),
            (server("system", 0), summary("greedy 64 MiB / 128 MiB", 1 << 30, Detail::Greedy(greedy))),
        ];
        let t = table(&run("fault-soak", None, &rows)).unwrap();
        assert_eq!(cell(&t, &["flight"], "Within"), "yes");
        assert_eq!(cell(&t, &["soak"], "Within"), "NO");
        assert_eq!(cell(&t, &["greedy 64 MiB / 128 MiB"], "Within"), "NO");
        assert_eq!(cell(&t, &["greedy 64 MiB / 128 MiB"], "Warm peak"), dash());
        assert!(t.method.contains("greedy (a 300,000-row table"), "{}", t.method);
        assert!(!t.method.contains(" kill ("), "no kill record, no kill sentence");
    }
}
