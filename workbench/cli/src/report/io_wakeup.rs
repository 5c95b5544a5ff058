//! io-wakeup: the I/O thread's low-latency wake-up on and off. Table: per
//! setting, background pings' p50 and p99 with nothing else running and
//! while depth-64 chains run, the chains' median time, and the server's CPU
//! time at 1,000 clients sending one query a second; each a median over the
//! rounds with its range, and beside the "off" row the ratio on ÷ off.

use super::{distinct_u64, median, ratio_range, values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use probe::registry;

pub const REPORT: Report = Report::of::<records::server::io_wakeup::Record>(registry::IO_WAKEUP, table, None);

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
    let spins = distinct_u64(run, "spin_us")?;
    let rounds = distinct_u64(run, "round")?;
    let at = |kind: &str, phase: Option<&str>, spin: u64, col: &str| -> Result<Vec<f64>> {
        let mut text = vec![("kind", kind)];
        text.extend(phase.map(|p| ("phase", p)));
        values(run, &text, &[("spin_us", spin)], col)
    };
    // The same metric on one round of two settings: on ÷ off, round by round.
    let per_round = |kind: &str, phase: Option<&str>, a: u64, b: u64, col: &str| -> Result<Vec<f64>> {
        let mut r = Vec::new();
        for &round in &rounds {
            let mut text = vec![("kind", kind)];
            text.extend(phase.map(|p| ("phase", p)));
            let one = |spin| -> Result<Option<f64>> {
                Ok(values(run, &text, &[("spin_us", spin), ("round", round)], col)?.first().copied())
            };
            if let (Some(x), Some(y)) = (one(a)?, one(b)?) {
                if y > 0.0 {
                    r.push(x / y);
                }
            }
        }
        Ok(r)
    };
    let mut rows = Vec::new();
    let cpu_pct =
        |spin| -> Result<Vec<f64>> { Ok(at("cpu", None, spin, "cpu_per_s")?.iter().map(|c| c * 100.0).collect()) };
    for &spin in spins.iter().rev() {
        rows.push(row![
            setting(spin),
            spread(&at("pings", Some("quiet"), spin, "p99_us")?),
            spread(&at("pings", Some("chains"), spin, "p50_us")?),
            spread(&at("pings", Some("chains"), spin, "p99_us")?),
            spread(&at("chains", None, spin, "median_us")?),
            spread(&cpu_pct(spin)?),
        ]);
    }
    if let (Some(&on), Some(&off)) = (spins.iter().rev().find(|&&s| s > 0), spins.first().filter(|&&s| s == 0)) {
        rows.push(row![
            format!("{} ÷ off", setting(on)),
            ratio_range(&per_round("pings", Some("quiet"), on, off, "p99_us")?),
            ratio_range(&per_round("pings", Some("chains"), on, off, "p50_us")?),
            ratio_range(&per_round("pings", Some("chains"), on, off, "p99_us")?),
            ratio_range(&per_round("chains", None, on, off, "median_us")?),
            ratio_range(&per_round("cpu", None, on, off, "cpu_per_s")?),
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
             rounds; each cell the median over the rounds and its range. {} background connections each ping \
             every {} ms, alone (quiet) and while one client runs pipelined chains of depth {} back to back; \
             ping latencies in µs. CPU: the server's user + system time per second of wall time, in % of one core, \
             while {} connections each send the filtered count once a second on a {}-row table. The last row is \
             on ÷ off, round by round.",
            rounds.len(),
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
