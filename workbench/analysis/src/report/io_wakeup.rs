//! io-wakeup: the I/O thread's low-latency wake-up on and off. Table: per
//! setting, background pings' p50 and p99 with nothing else running and
//! while depth-64 chains run, the chains' median time, and the server's CPU
//! time at 1,000 clients sending one query a second; each a median over the
//! rounds with its range, and beside the "off" row the ratio on ÷ off.

use super::{median, ratio_range, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use records::server::io_wakeup::Record;

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::IoWakeup, table, None);

/// One value a column shows, where the record has it.
type Metric = fn(&Record) -> Option<f64>;

fn pings(r: &Record, phase: &str, f: fn(&records::server::io_wakeup::Pings) -> Option<f64>) -> Option<f64> {
    match r {
        Record::Pings(p) if p.phase == phase => f(p),
        _ => None,
    }
}

const QUIET_P99: Metric = |r| pings(r, "quiet", |p| p.p99_us);
const CHAINS_P50: Metric = |r| pings(r, "chains", |p| p.p50_us);
const CHAINS_P99: Metric = |r| pings(r, "chains", |p| p.p99_us);
const CHAIN_MEDIAN: Metric = |r| match r {
    Record::Chains(c) => c.median_us,
    _ => None,
};
const CPU_PER_S: Metric = |r| match r {
    Record::Cpu(c) => Some(c.cpu_per_s),
    _ => None,
};

/// The setting and round a record was measured at.
fn at_of(r: &Record) -> (u64, u64) {
    match r {
        Record::Pings(p) => (p.spin_us, p.round),
        Record::Chains(c) => (c.spin_us, c.round),
        Record::Cpu(c) => (c.spin_us, c.round),
    }
}

/// A median over rounds and its range, e.g. `41.2 (39.0–44.1)`.
fn spread(v: &[f64]) -> String {
    let Some(m) = median(v) else { return dash() };
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match v.len() {
        1 => fmt::sig3(m),
        _ => format!("{} ({}–{})", fmt::sig3(m), fmt::sig3(lo), fmt::sig3(hi)),
    }
}

fn setting(us: u64) -> String {
    match us {
        0 => "off".into(),
        n => format!("{n} µs"),
    }
}

fn table(run: &Run) -> Result<Table> {
    let all: Vec<Record> = run.each::<Record>().map(|r| r.map(|r| r.record)).collect::<Result<_>>()?;
    let mut spins: Vec<u64> = all.iter().map(|r| at_of(r).0).collect();
    let mut rounds: Vec<u64> = all.iter().map(|r| at_of(r).1).collect();
    for v in [&mut spins, &mut rounds] {
        v.sort_unstable();
        v.dedup();
    }
    let at = |m: Metric, spin: u64| -> Vec<f64> { all.iter().filter(|r| at_of(r).0 == spin).filter_map(m).collect() };
    // The same metric on one round of two settings: on ÷ off, round by round.
    let per_round = |m: Metric, a: u64, b: u64| -> Vec<f64> {
        let mut r = Vec::new();
        for &round in &rounds {
            let one = |spin| all.iter().filter(|r| at_of(r) == (spin, round)).find_map(m);
            if let (Some(x), Some(y)) = (one(a), one(b)) {
                if y > 0.0 {
                    r.push(x / y);
                }
            }
        }
        r
    };
    let mut rows = Vec::new();
    let cpu_pct = |spin| -> Vec<f64> { at(CPU_PER_S, spin).iter().map(|c| c * 100.0).collect() };
    for &spin in spins.iter().rev() {
        rows.push(row![
            setting(spin),
            spread(&at(QUIET_P99, spin)),
            spread(&at(CHAINS_P50, spin)),
            spread(&at(CHAINS_P99, spin)),
            spread(&at(CHAIN_MEDIAN, spin)),
            spread(&cpu_pct(spin)),
        ]);
    }
    if let (Some(&on), Some(&off)) = (spins.iter().rev().find(|&&s| s > 0), spins.first().filter(|&&s| s == 0)) {
        rows.push(row![
            format!("{} ÷ off", setting(on)),
            ratio_range(&per_round(QUIET_P99, on, off)),
            ratio_range(&per_round(CHAINS_P50, on, off)),
            ratio_range(&per_round(CHAINS_P99, on, off)),
            ratio_range(&per_round(CHAIN_MEDIAN, on, off)),
            ratio_range(&per_round(CPU_PER_S, on, off)),
        ]);
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| {
        s.params.get(k).map_or_else(|| "?".into(), |v| v.as_u64().map_or_else(|| v.to_string(), fmt::thousands))
    };
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "The I/O thread's wake-up (polling for a lone call's answer before sleeping, yielding to every other \
             connection between polls) on and off: a server each, the settings alternating in order over {} \
             rounds; each cell the median over the rounds and its range.",
            rounds.len(),
        ),
        method: format!(
            "{} background connections each ping \
             every {} ms, alone (quiet) and while one client runs pipelined chains of depth {} back to back; \
             ping latencies in µs. CPU: the server's user + system time per second of wall time, in % of one core, \
             while {} connections each send the filtered count once a second on a {}-row table. The last row is \
             on ÷ off, round by round.",
            param("background"),
            param("ping_every_ms"),
            param("depth"),
            param("clients"),
            param("rows"),
        ),
        header: vec![
            "Wake-up",
            "Ping p99, quiet (µs)",
            "Ping p50, chains (µs)",
            "Ping p99, chains (µs)",
            "Chain (µs)",
            "Server CPU (% core)",
        ],
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};
    use records::server::io_wakeup::{Chains, Cpu, Pings};

    #[test]
    fn on_over_off_is_taken_round_by_round() {
        let mut rows = Vec::new();
        for (round, slow) in [(0, 1.0), (1, 2.0)] {
            for (spin, p99) in [(50, 10.0), (0, 40.0)] {
                let pings = |phase: &str| {
                    Record::Pings(Pings {
                        spin_us: spin,
                        round,
                        phase: phase.into(),
                        pings: 100,
                        p50_us: Some(p99 / 2.0 * slow),
                        p99_us: Some(p99 * slow),
                        max_us: 100.0,
                    })
                };
                rows.push((server("system", 0), pings("quiet")));
                rows.push((server("system", 0), pings("chains")));
                let chains =
                    Chains { spin_us: spin, round, depth: 64, chains: 10, median_us: Some(100.0), p99_us: None };
                rows.push((server("system", 0), Record::Chains(chains)));
                let cpu =
                    Cpu { spin_us: spin, round, clients: 10, queries: 10, seconds: 1.0, cpu_s: 0.01, cpu_per_s: 0.01 };
                rows.push((server("system", 0), Record::Cpu(cpu)));
            }
        }
        let t = table(&run("io-wakeup", None, &rows)).unwrap();
        assert_eq!(
            cell(&t, &["50 µs"], "Ping p99, quiet (µs)"),
            format!("{} ({}–{})", fmt::sig3(15.0), fmt::sig3(10.0), fmt::sig3(20.0))
        );
        // 10 ÷ 40 in either round, though the second ran twice as slow.
        assert_eq!(cell(&t, &["50 µs ÷ off"], "Ping p99, quiet (µs)"), "0.25× (0.25–0.25×)");
        let one = fmt::sig3(1.0);
        assert_eq!(cell(&t, &["off"], "Server CPU (% core)"), format!("{one} ({one}–{one})"));
    }
}
