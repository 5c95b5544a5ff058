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
use anyhow::{Context, Result};
use records::server::request_cost::{kind_part, Calls, Connections, Params, Record, Total, BASELINE_KIND};
use records::server::QUERIES;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::RequestCost, table, Some(figure));

/// The sites whose cost per call changes with concurrency: a table of its
/// own, from the same dataset's traces.
pub const SITES: Report = Report { name: "request-cost-sites", table: sites_table, figure: None, ..REPORT };

/// Sites shown per kind of call, the largest change per call first.
const SITES_SHOWN: usize = 5;

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

/// One kind's totals (blocks, bytes) by site, net of the pings' server at
/// the same number of clients: what that many calls of the kind allocate.
/// Sites are merged by where the server's code meets the allocating code
/// ([`trace::site::Site::label`]), not by whole stack: with many clients
/// the same code runs on pool threads as well as the connection's, under
/// another stack.
fn net_sites(dir: &Path, cell: &str, clients: usize, kind: &str) -> Result<Option<BTreeMap<String, (i128, i128)>>> {
    let load = |k: &str| -> Result<Option<BTreeMap<String, (i128, i128)>>> {
        let path = crate::data::traces::unpacked(dir)?.join(format!("{cell}-{}.dhat.json", kind_part(clients, k)));
        if !path.exists() {
            return Ok(None);
        }
        let t = trace::Trace::load(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut by: BTreeMap<String, (i128, i128)> = BTreeMap::new();
        for s in t.top(trace::site::By::Bytes, None) {
            let e = by.entry(s.label()).or_default();
            e.0 += i128::from(s.blocks);
            e.1 += i128::from(s.bytes);
        }
        Ok(Some(by))
    };
    let (Some(mut of_kind), Some(base)) = (load(kind)?, load(BASELINE_KIND)?) else { return Ok(None) };
    for (label, (blocks, bytes)) in base {
        let e = of_kind.entry(label).or_default();
        e.0 -= blocks;
        e.1 -= bytes;
    }
    Ok(Some(of_kind))
}

/// Per kind of call, the sites whose allocations per call differ between
/// one client and the most clients at once (each against the pings' server
/// at the same count), from the kinds' dhat traces.
fn sites_table(run: &Run) -> Result<Table> {
    let Data { calls, .. } = data(run)?;
    let params: Params =
        registry::read_params(registry::Experiment::RequestCost, &run.manifest.spec.scale(run.manifest.scale).params)?;
    let most = params.concurrency.iter().copied().max().unwrap_or(1);
    let cell = run.manifest.cells.first().cloned().unwrap_or_default();
    let mut kinds: Vec<&str> = calls.iter().map(|c| c.call_kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    let per_call = |n: i128, calls: u64| n as f64 / calls.max(1) as f64;
    for kind in kinds.into_iter().filter(|k| QUERIES.iter().any(|(q, _)| q == k)) {
        let (Some(one), Some(many)) = (net_sites(&run.dir, &cell, 1, kind)?, net_sites(&run.dir, &cell, most, kind)?)
        else {
            missing.push(kind);
            continue;
        };
        let (calls_one, calls_many) = (params.rounds, params.rounds * most as u64);
        let mut changed: Vec<(f64, TableCell, [f64; 4])> = Vec::new();
        let keys: std::collections::BTreeSet<&String> = one.keys().chain(many.keys()).collect();
        for key in keys {
            let (ba, ya) = one.get(key).copied().unwrap_or_default();
            let (bb, yb) = many.get(key).copied().unwrap_or_default();
            // Exactly: the same per call when the totals scale with the calls.
            if ba * i128::from(calls_many) == bb * i128::from(calls_one)
                && ya * i128::from(calls_many) == yb * i128::from(calls_one)
            {
                continue;
            }
            let v =
                [per_call(ba, calls_one), per_call(bb, calls_many), per_call(ya, calls_one), per_call(yb, calls_many)];
            changed.push(((v[3] - v[2]).abs(), TableCell::from(key.clone()), v));
        }
        changed.sort_by(|a, b| b.0.total_cmp(&a.0));
        let n = changed.len();
        let signed = |x: f64| if x < 0.0 { format!("−{}", fmt::bytes(-x)) } else { fmt::bytes(x) };
        let count = |x: f64| if x < 0.0 { format!("−{:.2}", -x) } else { format!("{x:.2}") };
        // A row that says something of the kind's sites instead of naming one.
        let said = |text: String| {
            let mut row = vec![TableCell::keyed(kind.to_string(), kind), TableCell::from(text)];
            row.extend((0..4).map(|_| TableCell::from(dash())));
            row
        };
        if n == 0 {
            rows.push(said("no site changes".to_string()));
        }
        for (_, site, v) in changed.into_iter().take(SITES_SHOWN) {
            rows.push(vec![
                TableCell::keyed(kind.to_string(), kind),
                site,
                TableCell::from(count(v[0])),
                TableCell::from(count(v[1])),
                TableCell::from(signed(v[2])),
                TableCell::from(signed(v[3])),
            ]);
        }
        if n > SITES_SHOWN {
            rows.push(said(format!("… {} more site(s)", n - SITES_SHOWN)));
        }
    }
    let caption = format!(
        "The allocation sites whose cost per call changes with concurrency: per kind of call, each site's \
         allocations and bytes per call with one client and with {most} clients at once ({} calls a client), \
         the largest change first (at most {SITES_SHOWN} a kind){}.",
        params.rounds,
        if missing.is_empty() { String::new() } else { format!("; no traces for {}", missing.join(", ")) }
    );
    let method = format!(
        "A fresh server of the dhat build per kind and client count serves that kind's calls alone, and another \
         as many pings; a kind's sites are its server's net of the pings' at the same count (connections, \
         start-up and runtime cancel), divided by the calls; sites are merged by where the server's code \
         meets the allocating code, whichever thread ran it. A site is listed when its totals do not scale \
         exactly with the calls from one client to {most}."
    );
    Ok(Table {
        name: SITES.name,
        caption,
        method,
        header: vec![
            "Call",
            "Site",
            "Allocs per call (1 client)",
            "Allocs per call (most clients)",
            "Bytes per call (1 client)",
            "Bytes per call (most clients)",
        ],
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};
    use records::server::request_cost::Calls;

    /// A dhat trace of sites `(function, bytes, blocks)`, each under the server's `main`.
    fn trace(sites: &[(&str, u64, u64)]) -> String {
        let mut ftbl = vec!["[root]".to_string(), "0x1: datastore_server::main (server/src/main.rs:1:1)".to_string()];
        let mut pps = Vec::new();
        for (i, (f, b, n)) in sites.iter().enumerate() {
            ftbl.push(format!("0x{:x}: datastore::{f} (datastore/src/x.rs:{i}:1)", i + 16));
            pps.push(serde_json::json!({"tb": b, "tbk": n, "tl": 0, "mb": 0, "mbk": 0, "gb": 0, "gbk": 0,
                                        "eb": 0, "ebk": 0, "fs": [ftbl.len() - 1, 1]}));
        }
        serde_json::json!({"dhatFileVersion": 2, "mode": "rust-heap", "verb": "Allocated", "bklt": true,
            "bkacc": false, "tu": "µs", "Mtu": "s", "tuth": 10, "cmd": "datastore-server", "pid": 1, "te": 1,
            "pps": pps, "ftbl": ftbl})
        .to_string()
    }

    fn calls(kind: &str, concurrency: u64) -> Record {
        Record::Calls(Calls {
            concurrency,
            call_kind: kind.into(),
            calls: 2 * concurrency,
            allocs_median: 1.0,
            allocs_p99: 1.0,
            allocs_max: 1,
            bytes_median: 1.0,
            bytes_p99: 1.0,
            bytes_max: 1,
            peak_median: 1.0,
            peak_p99: 1.0,
            peak_max: 1,
            held_median: 0.0,
            held_max: 0,
            estimate_median: 0.0,
            charge_ratio_median: None,
            charge_ratio_min: None,
            under_charged: 0,
        })
    }

    #[test]
    fn a_site_whose_cost_per_call_moves_with_clients_is_named_and_one_that_scales_is_not() {
        let params = serde_json::json!({"rows": 10, "concurrency": [1, 2], "rounds": 2});
        let rows = [(server("dhat", 0), calls("top-20-users", 1)), (server("dhat", 0), calls("top-20-users", 2))];
        let mut r = run("request-cost", Some(params), &rows);
        r.dir = std::env::temp_dir().join(format!("wb-request-sites-{}", std::process::id()));
        r.manifest.cells = vec!["request-cost-dhat-r0".into()];
        let traces = r.dir.join("traces");
        std::fs::create_dir_all(&traces).unwrap();
        let write = |clients: usize, kind: &str, sites: &[(&str, u64, u64)]| {
            let name = format!("request-cost-dhat-r0-{}.dhat.json", kind_part(clients, kind));
            std::fs::write(traces.join(name), trace(sites)).unwrap();
        };
        // The connection's setup is in the pings' server too: it cancels.
        // `work` scales with the calls (2, then 4); `cache` is filled once a server.
        write(1, "ping", &[("conn::setup", 10, 1)]);
        write(1, "top-20-users", &[("conn::setup", 10, 1), ("exec::work", 200, 4), ("cache::fill", 50, 1)]);
        write(2, "ping", &[("conn::setup", 20, 2)]);
        write(2, "top-20-users", &[("conn::setup", 20, 2), ("exec::work", 400, 8), ("cache::fill", 50, 1)]);
        let t = sites_table(&r).unwrap();
        let _ = std::fs::remove_dir_all(&r.dir);
        assert_eq!(t.rows.len(), 1, "{:?}", t.rows);
        assert_eq!(t.rows[0][1].text, "datastore::cache::fill");
        assert_eq!(cell(&t, &["top-20-users"], "Allocs per call (1 client)"), "0.50");
        assert_eq!(cell(&t, &["top-20-users"], "Allocs per call (most clients)"), "0.25");
        assert!(t.caption.contains("with 2 clients at once"), "{}", t.caption);
    }
}
