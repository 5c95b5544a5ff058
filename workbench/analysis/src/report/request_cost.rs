//! request-cost: what each call costs in memory, exactly, against the
//! number of clients at once, and the query memory tracker's charge
//! against the truth. Table: per kind of call and client count, the
//! median call's allocations and bytes, its peak (median, 99th percentile,
//! largest), what it held once answered, the tracker's charge and its ratio
//! to the peak, and how many calls it under-charged by more than a tenth.
//! Figure: the median call's peak against clients, one line per kind, the
//! tracker's charge beside it.

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{col, dash, source_of, Table, TableCell};
use anyhow::Result;
use records::server::request_cost::{Calls, Connections, Record, Total};
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::RequestCost, table, Some(figure));

/// The key of the rows that hold a connection's share of the live heap.
pub const PER_CONNECTION: &str = "per-connection";

struct Data {
    calls: Vec<Calls>,
    totals: Vec<Total>,
    connections: Vec<Connections>,
}

fn data(run: &Run) -> Result<Data> {
    let mut d = Data { calls: Vec::new(), totals: Vec::new(), connections: Vec::new() };
    for r in run.each::<Record>() {
        match r?.record {
            Record::Calls(c) => d.calls.push(c),
            Record::Total(t) => d.totals.push(t),
            Record::Connections(c) => d.connections.push(c),
        }
    }
    Ok(d)
}

/// A connection's share of a live-heap difference (signed: a heap can shrink).
fn per_connection(after: u64, before: u64, clients: u64) -> String {
    let d = (after as f64 - before as f64) / clients.max(1) as f64;
    if d < 0.0 {
        format!("−{}", fmt::bytes(-d))
    } else {
        fmt::bytes(d)
    }
}

/// `median (p99–max)` of a byte distribution.
fn spread(median: f64, p99: f64, max: u64) -> TableCell {
    TableCell::ranged(fmt::bytes(median), fmt::bytes(p99), fmt::bytes(max as f64))
}

fn table(run: &Run) -> Result<Table> {
    let Data { calls, totals, connections } = data(run)?;
    let mut rows = Vec::new();
    for c in &calls {
        rows.push(vec![
            TableCell::keyed(c.call_kind.clone(), &c.call_kind),
            TableCell::keyed(c.concurrency.to_string(), c.concurrency),
            TableCell::from(fmt::thousands(c.calls)),
            TableCell::ranged(fmt::sig3(c.allocs_median), fmt::sig3(c.allocs_p99), fmt::thousands(c.allocs_max)),
            TableCell::from(fmt::bytes(c.bytes_median)),
            spread(c.peak_median, c.peak_p99, c.peak_max),
            // The largest beside the median: a call that fills a cache
            // keeps it after it answers, and it is one call of many.
            TableCell::from(format!("{} (max {})", fmt::bytes(c.held_median), fmt::bytes(c.held_max as f64))),
            TableCell::from(if c.estimate_median > 0.0 { fmt::bytes(c.estimate_median) } else { dash() }),
            match (c.charge_ratio_median, c.charge_ratio_min) {
                (Some(m), Some(lo)) => TableCell::from(format!("{m:.2}× (lowest {lo:.2}×)")),
                _ => TableCell::from(dash()),
            },
            TableCell::from(if c.charge_ratio_median.is_some() {
                format!("{} of {}", fmt::thousands(c.under_charged), fmt::thousands(c.calls))
            } else {
                dash()
            }),
        ]);
    }
    for c in &connections {
        let none = || TableCell::from(dash());
        rows.push(vec![
            TableCell::keyed("per connection".to_string(), PER_CONNECTION),
            TableCell::keyed(c.concurrency.to_string(), c.concurrency),
            none(),
            none(),
            TableCell::from(per_connection(c.idle_live_bytes, c.before_live_bytes, c.concurrency)),
            TableCell::from(per_connection(c.busy_peak_bytes, c.before_live_bytes, c.concurrency)),
            TableCell::from(per_connection(c.after_live_bytes, c.before_live_bytes, c.concurrency)),
            none(),
            none(),
            none(),
        ]);
    }
    let exact = totals.iter().all(|t| t.attributed_allocs + t.outside_allocs == t.process_allocs);
    let accounted = match (exact, totals.is_empty()) {
        (_, true) => String::new(),
        (true, false) => " At every client count the calls and the allocations outside them sum to dhat's process \
                          totals exactly."
            .to_string(),
        (false, false) => {
            let off: Vec<String> = totals
                .iter()
                .filter(|t| t.attributed_allocs + t.outside_allocs != t.process_allocs)
                .map(|t| {
                    format!(
                        "{} clients: {} of {}",
                        t.concurrency,
                        fmt::thousands(t.attributed_allocs + t.outside_allocs),
                        fmt::thousands(t.process_allocs)
                    )
                })
                .collect();
            format!(" Allocations accounted against dhat's totals: {}.", off.join("; "))
        }
    };
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).map_or_else(|| "?".into(), |v| v.to_string());
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Each call's exact memory cost (dhat build), {} rounds of the three queries per client on {} rows: \
             median (p99–max), the query memory tracker's charge against it, and what a connection holds.",
            param("rounds"),
            param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
        ),
        method: format!(
            "A free is charged to the call that allocated it. Tracker: the query memory budget's peak charge; \
             ÷ peak: median (lowest); under-charged: below nine tenths of the peak. Held after: what the call's own \
             blocks held once it had answered. Per connection: the server's live heap over its own before the clients \
             connected, divided by them: idle (Bytes), at the process's peak (Peak), after the rounds (Held after).\
             {accounted}"
        ),
        header: vec![
            "Call",
            "Clients",
            "Calls",
            "Allocs",
            col::CALL_BYTES,
            col::CALL_PEAK,
            col::HELD_AFTER,
            "Tracker",
            col::CHARGE_VS_PEAK,
            "Under-charged",
        ],
        rows,
        source: source_of(run),
    })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let calls = data(run)?.calls;
    // The queries: the calls the budget charges (not pings or finishes).
    let mut kinds: Vec<&str> = Vec::new();
    for c in calls.iter().filter(|c| c.estimate_median > 0.0) {
        if !kinds.contains(&c.call_kind.as_str()) {
            kinds.push(&c.call_kind);
        }
    }
    let mut lines = Vec::new();
    for k in kinds {
        let of = |f: fn(&Calls) -> f64| -> Vec<(f64, f64)> {
            calls.iter().filter(|c| c.call_kind == k).map(|c| (c.concurrency as f64, f(c))).collect()
        };
        lines.push(Line { label: format!("{k}: peak"), points: of(|c| c.peak_median) });
        let tracked = of(|c| c.estimate_median);
        if tracked.iter().any(|p| p.1 > 0.0) {
            lines.push(Line { label: format!("{k}: tracker"), points: tracked });
        }
    }
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let (xmin, xmax, ymin, ymax) = extent(&lines);
    let chart = Chart {
        title: format!("Memory a call holds at its peak against clients ({})", run.manifest.run_id),
        x_desc: "clients at once",
        y_desc: "median call's peak bytes (log)",
        x_log: true,
        x_range: (xmin.max(1.0) / 1.3, xmax * 1.3),
        y_log_floor: true,
        y_range: (ymin.max(1.0) / 2.0, ymax * 2.0),
        x_fmt: &|v| format!("{v:.0}"),
        y_fmt: &|v| fmt::si_bytes(*v),
        x_marks: &[],
    };
    write_both(dir, REPORT.name, &lines, &chart)
}
