//! What each call costs in memory under concurrency, exactly, and how far
//! the query memory tracker's charge is from it. Per client count, a fresh
//! server of the dhat build with `--call-costs` (every call's allocations
//! attributed to it across threads, frees to the call that allocated:
//! [`crate::costs`]); c clients, one connection each, run `rounds` rounds of
//! the workload's three queries, every answer compared with the first one
//! seen; the server stops, and its file is summarised per kind of call.
//!
//! Params ([`Params`]): `rows`, `concurrency`, `rounds`.
//! Records ([`records::server::request_cost`]): per client count and kind
//! of call, the distribution of allocations, bytes, peak and held bytes
//! over its calls, the tracker's charge against the peak; per client count,
//! the calls and call 0 against dhat's process totals, and the server's
//! live heap with the clients connected and idle, and after their rounds.
//! Traces: per query kind, a server that served that kind alone, and one
//! that served pings, to one client and to the most clients at once
//! ([`kind_traces`]).

use super::{median, percentile, progress, Cell, Records, ServerChild};
use crate::client::{Client, Rows};
use crate::workload::{self, QUERIES};
use anyhow::{bail, Context, Result};
use records::server::request_cost::{
    kind_part, CallCost, Calls, Connections, CostLine, Params, ProcessTotals, Record, Total, BASELINE_KIND,
};
use std::collections::BTreeMap;

/// A tracker's charge this far under a call's true peak counts as under-charged.
const UNDER: f64 = 0.9;

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    if p.concurrency.is_empty() || p.concurrency.contains(&0) || p.rounds == 0 {
        bail!("{}: params.concurrency needs counts ≥ 1 and params.rounds ≥ 1", cell.experiment);
    }
    if probe::VARIANT != probe::Variant::Dhat {
        bail!("{}: counts every call exactly, so it runs in the dhat build only", cell.experiment);
    }
    let dir = super::work_dir(cell)?;
    let data = dir.join("db");
    let db = datastore::Db::open(&data)?;
    workload::load(&db, p.rows, cell.seed, p.rows.clamp(1, 1_000_000), true, |_, _| {})
        .with_context(|| format!("loading {} rows into {}", p.rows, data.display()))?;
    drop(db);
    let total: usize = p.concurrency.iter().sum::<usize>() * p.rounds as usize * QUERIES.len();
    let mut done = 0;
    for (i, &c) in p.concurrency.iter().enumerate() {
        let file = dir.join(format!("calls-{c}.jsonl"));
        let trace = match (i, &cell.trace) {
            (0, Some(t)) => t.clone(),
            _ => dir.join(format!("server-{c}.dhat.json")),
        };
        let server = ServerChild::spawn(&data, Some(&trace), &["--call-costs", &file.display().to_string()])?;
        // The control connection: fetches the expected answers, then reads
        // the server's live heap around the clients' phases.
        let mut control = Client::connect(server.addr)?;
        let expected: Vec<Rows> = QUERIES.iter().map(|(_, sql)| control.execute(sql)).collect::<Result<_, _>>()?;
        let live = |control: &mut Client| -> Result<records::server::Stats> { server.stats(control) };
        let before = live(&mut control)?;
        // Every client and this thread meet after connecting (idle) and
        // after the rounds (connections still open), so the snapshots see
        // all c connections in the same state. A client that fails still
        // meets the others, so none waits for ever.
        let phase = std::sync::Barrier::new(c + 1);
        let (idle, after) = std::thread::scope(|s| -> Result<_> {
            let clients: Vec<_> = (0..c)
                .map(|_| {
                    let (expected, phase) = (&expected, &phase);
                    s.spawn(move || -> Result<()> {
                        let connected = Client::connect(server.addr).map_err(anyhow::Error::from).and_then(|mut c| {
                            settle(&mut c)?;
                            Ok(c)
                        });
                        phase.wait();
                        phase.wait();
                        let result = connected.and_then(|mut client| {
                            for _ in 0..p.rounds {
                                for ((name, sql), want) in QUERIES.iter().zip(expected) {
                                    let got = client.execute(sql)?;
                                    if got != *want {
                                        bail!("{name}: an answer differs from the first one");
                                    }
                                }
                            }
                            settle(&mut client)?;
                            Ok(client)
                        });
                        phase.wait();
                        phase.wait();
                        result.map(drop)
                    })
                })
                .collect();
            phase.wait();
            let idle = live(&mut control);
            phase.wait();
            phase.wait();
            let after = live(&mut control);
            phase.wait();
            for h in clients {
                h.join().map_err(|_| anyhow::anyhow!("a client panicked"))??;
            }
            Ok((idle?, after?))
        })?;
        drop(control);
        server.stop()?;
        let heap = |s: &records::server::Stats, what: &str| {
            s.live_heap_bytes.with_context(|| format!("the server's stats {what} hold no live heap (dhat build?)"))
        };
        out.emit(&Record::Connections(Connections {
            concurrency: c as u64,
            before_live_bytes: heap(&before, "before the clients")?,
            idle_live_bytes: heap(&idle, "with the clients idle")?,
            after_live_bytes: heap(&after, "after the rounds")?,
            busy_peak_bytes: after.peak_heap_bytes.context("the server's stats hold no peak heap (dhat build?)")?,
        }))?;
        let (costs, process) = read(&file)?;
        // The first connection's calls (the expected answers) are calls too.
        let summary = summarise(c as u64, &costs, &process);
        for r in summary {
            out.emit(&r)?;
        }
        done += c * p.rounds as usize * QUERIES.len();
        progress(done, total);
    }
    kind_traces(cell, p, &data, 1)?;
    match p.concurrency.iter().max() {
        Some(&most) if most > 1 => kind_traces(cell, p, &data, most),
        _ => Ok(()),
    }
}

/// Where the runner asks for traces: per query kind, a fresh server that
/// serves `rounds` calls of that kind alone to each of `clients` clients at
/// once, and one that serves as many pings; each writes its dhat trace
/// (`<cell>-<kind_part>.dhat.json`, [`kind_part`]). Against the pings'
/// trace, a kind's is what its calls allocate, site by site, with nothing
/// else in the process; the same at one client and at the most, per call,
/// is what changes with concurrency.
fn kind_traces(cell: &Cell, p: &Params, data: &std::path::Path, clients: usize) -> Result<()> {
    let kinds = std::iter::once((BASELINE_KIND, None)).chain(QUERIES.iter().map(|(n, sql)| (*n, Some(*sql))));
    for (name, sql) in kinds {
        let Some(trace) = super::part_trace(cell, &kind_part(clients, name)) else { return Ok(()) };
        let server = ServerChild::spawn(data, Some(&trace), &[])?;
        let addr = server.addr;
        std::thread::scope(|s| -> Result<()> {
            let hs: Vec<_> = (0..clients)
                .map(|_| {
                    s.spawn(move || -> Result<()> {
                        let mut client = Client::connect(addr)?;
                        for _ in 0..p.rounds {
                            match sql {
                                Some(sql) => drop(client.execute(sql)?),
                                None => settle(&mut client)?,
                            }
                        }
                        settle(&mut client)
                    })
                })
                .collect();
            for h in hs {
                h.join().map_err(|_| anyhow::anyhow!("a client panicked"))??;
            }
            Ok(())
        })?;
        server.stop()?;
    }
    Ok(())
}

/// Sends what the client has queued (its last answer's release) and waits
/// for a ping's answer, which the server sends after it has read every
/// frame before it: the connection holds nothing of a call when the
/// snapshot is taken, bar the ping's own release, in flight.
fn settle(c: &mut Client) -> Result<()> {
    let p = c.ping()?;
    c.wait(p)?;
    c.finish(p)?;
    Ok(c.flush()?)
}

/// The server's file: every call, and the process totals.
fn read(path: &std::path::Path) -> Result<(Vec<CallCost>, ProcessTotals)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut calls = Vec::new();
    let mut process = None;
    for (n, line) in text.lines().enumerate() {
        match serde_json::from_str::<CostLine>(line).with_context(|| format!("{}:{}", path.display(), n + 1))? {
            CostLine::Call(c) => calls.push(c),
            CostLine::Process(p) => process = Some(p),
        }
    }
    let process =
        process.with_context(|| format!("{}: no process totals (did the server stop cleanly?)", path.display()))?;
    Ok((calls, process))
}

/// Per kind of call, its distribution; then the run's totals.
pub fn summarise(concurrency: u64, costs: &[CallCost], process: &ProcessTotals) -> Vec<Record> {
    let mut by_kind: BTreeMap<&str, Vec<&CallCost>> = BTreeMap::new();
    for c in costs.iter().filter(|c| c.call != 0) {
        by_kind.entry(c.kind.as_str()).or_default().push(c);
    }
    let mut out = Vec::new();
    for (kind, calls) in &by_kind {
        let dist = |f: fn(&CallCost) -> u64| -> (f64, f64, u64) {
            let mut v: Vec<f64> = calls.iter().map(|c| f(c) as f64).collect();
            let max = calls.iter().map(|c| f(c)).max().unwrap_or(0);
            (median(&mut v), percentile(&mut v, 99.0), max)
        };
        let (allocs_median, allocs_p99, allocs_max) = dist(|c| c.counts.allocs);
        let (bytes_median, bytes_p99, bytes_max) = dist(|c| c.counts.bytes);
        let (peak_median, peak_p99, peak_max) = dist(|c| c.counts.peak_bytes);
        let (held_median, _, held_max) = dist(|c| c.counts.held_bytes);
        let (estimate_median, _, _) = dist(|c| c.counts.estimate_bytes);
        let mut ratios: Vec<f64> = calls
            .iter()
            .filter(|c| c.counts.estimate_bytes > 0 && c.counts.peak_bytes > 0)
            .map(|c| c.counts.estimate_bytes as f64 / c.counts.peak_bytes as f64)
            .collect();
        let under = ratios.iter().filter(|r| **r < UNDER).count() as u64;
        let charged = !ratios.is_empty();
        out.push(Record::Calls(Calls {
            concurrency,
            call_kind: kind.to_string(),
            calls: calls.len() as u64,
            allocs_median,
            allocs_p99,
            allocs_max,
            bytes_median,
            bytes_p99,
            bytes_max,
            peak_median,
            peak_p99,
            peak_max,
            held_median,
            held_max,
            estimate_median,
            charge_ratio_median: charged.then(|| median(&mut ratios)),
            charge_ratio_min: ratios.iter().copied().reduce(f64::min),
            under_charged: under,
        }));
    }
    let outside = costs.iter().find(|c| c.call == 0);
    let attributed = costs.iter().filter(|c| c.call != 0);
    out.push(Record::Total(Total {
        concurrency,
        calls: costs.iter().filter(|c| c.call != 0).count() as u64,
        attributed_allocs: attributed.clone().map(|c| c.counts.allocs).sum(),
        attributed_bytes: attributed.map(|c| c.counts.bytes).sum(),
        outside_allocs: outside.map_or(0, |c| c.counts.allocs),
        outside_bytes: outside.map_or(0, |c| c.counts.bytes),
        outside_live_bytes: outside.map_or(0, |c| c.counts.live_bytes),
        process_allocs: process.allocs,
        process_bytes: process.bytes,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costs::OUTSIDE;
    use records::server::request_cost::Counts;

    fn call(call: u64, kind: &str, allocs: u64, peak: u64, estimate: u64) -> CallCost {
        CallCost {
            call,
            kind: kind.into(),
            counts: Counts {
                allocs,
                bytes: allocs * 10,
                frees: allocs,
                bytes_freed: allocs * 10,
                peak_bytes: peak,
                held_bytes: 0,
                live_bytes: 0,
                estimate_bytes: estimate,
            },
            finished: true,
        }
    }

    #[test]
    fn calls_are_summarised_per_kind_and_against_the_tracker() {
        let costs = vec![
            call(0, OUTSIDE, 50, 0, 0),
            call(1, "top-20-users", 10, 1000, 1200),
            call(2, "top-20-users", 12, 1000, 500),
            call(3, "top-20-users", 14, 2000, 2000),
            call(4, "ping", 1, 8, 0),
        ];
        let r = summarise(4, &costs, &ProcessTotals { allocs: 87, bytes: 870 });
        let Record::Calls(top) = &r[1] else { panic!("{r:?}") };
        assert_eq!(
            (top.call_kind.as_str(), top.calls, top.allocs_median, top.allocs_max),
            ("top-20-users", 3, 12.0, 14)
        );
        assert_eq!((top.charge_ratio_median, top.charge_ratio_min, top.under_charged), (Some(1.0), Some(0.5), 1));
        let Record::Calls(ping) = &r[0] else { panic!("{r:?}") };
        assert_eq!((ping.charge_ratio_median, ping.under_charged), (None, 0));
        let Record::Total(t) = &r[2] else { panic!("{r:?}") };
        assert_eq!((t.calls, t.attributed_allocs, t.outside_allocs, t.process_allocs), (4, 37, 50, 87));
    }
}
