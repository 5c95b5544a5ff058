//! roundtrip-latency and roundtrip-latency-awake: loopback round trips of
//! each transport stack beside the raw-TCP floor measured in the same run.
//! Table: percentiles, × floor and µs above it. Figure: the percentile
//! plot (log tail axis), one line per stack.

use super::Report;
use crate::dataset::Run;
use crate::figures::{write_both, Chart, Line};
use crate::fmt;
use crate::tables::{dash, display_name, floats, ratio, select, source_of, Table};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report {
    name: "roundtrip-latency",
    dataset: "roundtrip-latency",
    table: |r| roundtrip_latency(r, "roundtrip-latency"),
    figure: Some(latency_figure),
};

pub const AWAKE: Report = Report {
    name: "roundtrip-latency-awake",
    dataset: "roundtrip-latency-awake",
    table: |r| roundtrip_latency(r, "roundtrip-latency-awake"),
    figure: None,
};

/// Nearest-rank percentile `p` (0..=100) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

/// Sorted latencies in µs of one stack and payload, all repetitions pooled.
pub fn latencies_us(run: &Run, stack: &str, payload: u64) -> Result<Vec<f64>> {
    let d = select(&run.records, &[("codec", stack)], &[("payload", payload)])?;
    let mut v: Vec<f64> = floats(&d, "ns")?.into_iter().map(|ns| ns / 1e3).collect();
    v.sort_by(f64::total_cmp);
    Ok(v)
}

/// Round-trip latency percentiles per transport stack.
pub fn roundtrip_latency(run: &Run, name: &'static str) -> Result<Table> {
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for &payload in &spec.payloads {
        // The floor of this run: raw bytes echoed over the same loopback.
        let floor = match spec.codecs.iter().any(|c| c == FLOOR_STACK) {
            true => percentile(&latencies_us(run, FLOOR_STACK, payload as u64)?, 50.0),
            false => None,
        };
        for t in &spec.codecs {
            let v = latencies_us(run, t, payload as u64)?;
            let us = |p: f64| percentile(&v, p).map_or_else(dash, fmt::sig3);
            let p50 = percentile(&v, 50.0);
            let (times, above) = match (p50, floor) {
                (Some(p), Some(f)) if f > 0.0 => (ratio(Some(p / f)), fmt::sig3(p - f)),
                _ => (dash(), dash()),
            };
            rows.push(vec![
                display_name(t),
                fmt::bytes(payload as f64),
                fmt::thousands(v.len() as u64),
                us(50.0),
                times,
                above,
                us(95.0),
                us(99.0),
                us(99.9),
                v.last().map_or_else(dash, |m| fmt::sig3(*m)),
            ]);
        }
    }
    let s = spec.scale(&run.manifest.scale).context("manifest scale")?;
    let mode = match name {
        "roundtrip-latency-awake" => {
            "Cores kept awake: a spinning thread at nice 19 per core runs through every cell, so no core idles \
             and wake-up latency leaves the picture; what remains is each stack's own cost. "
        }
        _ => "Cores may idle between round trips, as on an unloaded server (wake-ups included). ",
    };
    Ok(Table {
        name,
        caption: format!(
            "{mode}Round-trip latency over loopback, one connection, closed loop (each request sent when the previous \
             reply arrived), in µs (nearest-rank percentiles of every round trip, {} warm-up round trips excluded, \
             {} repetition(s) pooled; n = round trips). The floor row echoes as many raw bytes as ZAP sends, over \
             blocking TCP with no codec, measured in the same run; \"× floor\" and \"above floor\" compare each \
             p50 with it. Variant: {}; {} profile; a shared 2-core machine.",
            fmt::thousands(s.warmup),
            s.repetitions,
            spec.variants_at(&run.manifest.scale).join(", "),
            run.manifest.profile
        ),
        header: vec!["Stack", "Payload", "n", "p50", "× floor", "above floor (µs)", "p95", "p99", "p99.9", "max"],
        rows,
        source: source_of(run),
    })
}

/// The transport that measures the physical floor of a loopback round trip.
const FLOOR_STACK: &str = "raw-tcp";

pub(crate) fn latency_figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let spec = &run.manifest.spec;
    let mut lines = Vec::new();
    for stack in &spec.codecs {
        for &payload in &spec.payloads {
            let v = latencies_us(run, stack, payload as u64)?;
            let n = v.len() as f64;
            // One point per 0.1 % of the distribution keeps the files small and the curve exact enough.
            let step = (v.len() / 1000).max(1);
            let mut points: Vec<(f64, f64)> =
                v.iter().enumerate().step_by(step).map(|(i, x)| (*x, (i + 1) as f64 / n * 100.0)).collect();
            if let Some(last) = v.last() {
                points.push((*last, 100.0));
            }
            let mut label = display_name(stack);
            if spec.payloads.len() > 1 {
                label += &format!(" ({})", crate::fmt::bytes(payload as f64));
            }
            lines.push(Line { label, points });
        }
    }
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let xmin = xs.clone().fold(f64::INFINITY, f64::min).max(0.1) * 0.8;
    let xmax = xs.fold(1.0, f64::max) * 1.25;
    let chart = Chart {
        title: format!(
            "Round-trip latency over loopback ({}, {})",
            spec.variants_at(&run.manifest.scale).join(", "),
            run.manifest.run_id
        ),
        x_desc: "round-trip latency, µs (log)",
        y_desc: "percentile of round trips",
        x_log: true,
        x_range: (xmin, xmax),
        y_log_floor: false,
        y_range: (0.0, 100.0),
        x_fmt: &|v| crate::fmt::sig3(*v),
        y_fmt: &|v| format!("{v:.0}"),
    };
    write_both(dir, "roundtrip-latency", &lines, &chart)
}
