//! roundtrip-latency, roundtrip-latency-awake and roundtrip-latency-open:
//! loopback round trips of each transport stack beside the raw-TCP floor
//! measured in the same run (closed loop with idle cores, closed loop with
//! cores kept awake, open loop at a fixed rate). Table: exact percentiles of
//! every round trip, × floor and µs above it. Figure: the percentile plot as
//! HdrHistogram draws it (latency against percentile on a log tail axis,
//! p50 … p99.99), one line per stack.

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{write_both, Chart, Line};
use crate::report::tables::{dash, ratio, row, source_of, Table};
use anyhow::Result;
use records::subject::RoundTrip;
use registry::display_name;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const LATENCY_NAME: &str = registry::Experiment::RoundtripLatency.name();
const AWAKE_NAME: &str = registry::Experiment::RoundtripLatencyAwake.name();
const OPEN_NAME: &str = registry::Experiment::RoundtripLatencyOpen.name();

pub const REPORT: Report = Report::of::<records::subject::RoundTrip>(
    registry::Experiment::RoundtripLatency,
    |r| roundtrip_latency(r, LATENCY_NAME),
    Some(|d, r| latency_figure(d, r, LATENCY_NAME)),
);

pub const AWAKE: Report = Report::of::<records::subject::RoundTrip>(
    registry::Experiment::RoundtripLatencyAwake,
    |r| roundtrip_latency(r, AWAKE_NAME),
    Some(|d, r| latency_figure(d, r, AWAKE_NAME)),
);

pub const OPEN: Report = Report::of::<records::subject::RoundTrip>(
    registry::Experiment::RoundtripLatencyOpen,
    |r| roundtrip_latency(r, OPEN_NAME),
    Some(|d, r| latency_figure(d, r, OPEN_NAME)),
);

/// The open loop's request rate (per second) from the run's spec.
fn open_rate(run: &Run) -> Option<f64> {
    let s = run.manifest.spec.scale(run.manifest.scale);
    s.params.get("rate").and_then(|v| v.as_f64())
}

/// The core the run pinned client and server to (`params.pin_core`).
fn pin_core(run: &Run) -> Option<u64> {
    let s = run.manifest.spec.scale(run.manifest.scale);
    s.params.get("pin_core").and_then(|v| v.as_u64())
}

/// How each mode ran, for captions and titles.
fn mode_text(run: &Run, name: &str) -> String {
    match name {
        AWAKE_NAME => format!(
            "Cores kept awake: a spinning thread at nice 19 per core runs through every cell, so no core idles and \
             wake-up latency leaves the picture; what remains is each stack's own cost. {}Closed loop (each request \
             sent when the previous reply arrived). ",
            pin_core(run).map_or_else(String::new, |c| format!(
                "Client and server threads pinned to core {c}, so each hands the core straight to the other (threads \
                 a library starts on its own float). "
            ))
        ),
        OPEN_NAME => format!(
            "Open loop: a request is due every {} µs ({} requests/s) whether or not the previous reply has arrived, \
             and its latency counts from when it was due, so a stall counts against every request scheduled behind \
             it (no coordinated omission). The client sleeps, then spins the last 200 µs before each due time; the \
             server's core may idle. ",
            open_rate(run).map_or_else(dash, |r| fmt::sig3(1e6 / r)),
            open_rate(run).map_or_else(dash, fmt::sig3)
        ),
        _ => "Cores may idle between round trips, as on an unloaded server (wake-ups included). Closed loop (each \
              request sent when the previous reply arrived). "
            .into(),
    }
}

/// Nearest-rank percentile `p` (0..=100) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

/// Per stack and payload, sorted latencies in µs, all repetitions pooled.
pub struct Latencies<'a>(HashMap<(&'a str, u64), Vec<f64>>);

impl<'a> Latencies<'a> {
    pub fn of(run: &'a Run) -> Result<Latencies<'a>> {
        let mut m: HashMap<(&str, u64), Vec<f64>> = HashMap::new();
        for r in run.each::<RoundTrip>() {
            let r = r?;
            let us = r.record.ns as f64 / 1e3;
            m.entry((r.cell.codec.unwrap_or(""), r.cell.payload()))
                .or_default()
                .extend(std::iter::repeat_n(us, r.record.repeat as usize));
        }
        for v in m.values_mut() {
            v.sort_by(f64::total_cmp);
        }
        Ok(Latencies(m))
    }

    /// One stack's at one payload (none: empty).
    pub fn get(&self, stack: &str, payload: u64) -> &[f64] {
        self.0.iter().find(|((s, p), _)| *s == stack && *p == payload).map_or(&[], |(_, v)| v.as_slice())
    }
}

/// Round-trip latency percentiles per transport stack.
pub fn roundtrip_latency(run: &Run, name: &'static str) -> Result<Table> {
    let spec = &run.manifest.spec;
    let lat = Latencies::of(run)?;
    let mut rows = Vec::new();
    for &payload in &spec.payloads {
        // The floor of this run: raw bytes echoed over the same loopback.
        let floor = match spec.codecs.iter().any(|c| c == FLOOR_STACK) {
            true => percentile(lat.get(FLOOR_STACK, payload as u64), 50.0),
            false => None,
        };
        for t in &spec.codecs {
            let v = lat.get(t, payload as u64);
            let us = |p: f64| percentile(v, p).map_or_else(dash, fmt::sig3);
            let p50 = percentile(v, 50.0);
            let (times, above) = match (p50, floor) {
                (Some(p), Some(f)) if f > 0.0 => (ratio(Some(p / f)), fmt::sig3(p - f)),
                _ => (dash(), dash()),
            };
            rows.push(row![
                crate::report::tables::TableCell::keyed(display_name(t), t),
                crate::report::tables::TableCell::keyed(fmt::bytes(payload as f64), payload),
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
    let s = spec.scale(run.manifest.scale);
    let mode = mode_text(run, name);
    Ok(Table {
        name,
        caption: format!(
            "{mode}Round-trip latency over loopback, one connection, in µs (nearest-rank percentiles of every round \
             trip, {} warm-up round trips excluded, \
             {} repetition(s) pooled; n = round trips), against a raw-TCP floor measured in the same run.",
            fmt::thousands(s.warmup),
            s.repetitions,
        ),
        method: format!(
            "Each repetition is a separate process, stacks taking turns, so every stack samples the same \
             stretch of the host's state. The floor row echoes as many raw bytes as ZAP sends, over \
             blocking TCP with no codec, measured in the same run; \"× floor\" and \"above floor\" compare each \
             p50 with it. \"ZAP (TCP, RPC)\" adds ZAP's RPC layer (request/response envelopes, each answer stored \
             for pipelined calls, a finish message per call); the framed rows, \"ZAP (TCP, framed)\" among them, \
             send the codec's bytes alone behind a length prefix. Build: {}; {} profile; a shared 2-core machine.",
            builds(run),
            run.manifest.profile
        ),
        header: vec![
            "Stack",
            "Payload",
            "n",
            crate::report::tables::col::P50,
            crate::report::tables::col::TIMES_FLOOR,
            crate::report::tables::col::ABOVE_FLOOR,
            crate::report::tables::col::P95,
            "p99",
            "p99.9",
            "max",
        ],
        rows,
        source: source_of(run),
    })
}

/// The transport that measures the physical floor of a loopback round trip.
const FLOOR_STACK: &str = registry::Transport::RawTcp.name();

/// HdrHistogram's percentile spectrum of one stack's latencies: (x, µs)
/// points where x = 1 / (1 − quantile), the log tail axis on which p50, p90,
/// p99, p99.9 and p99.99 are evenly spaced. The histogram keeps 3
/// significant digits; the last point is the exact maximum at x = n.
fn spectrum(us: &[f64]) -> Result<Vec<(f64, f64)>> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    for &v in us {
        // Nanoseconds, so sub-µs differences survive the 3 digits.
        h.saturating_record((v * 1e3).round().max(1.0) as u64);
    }
    let n = h.len() as f64;
    let max = us.iter().copied().fold(0.0, f64::max);
    // A bucket's value is its upper edge: never draw one above the true maximum.
    let mut points: Vec<(f64, f64)> = h
        .iter_quantiles(5)
        .map(|it| (it.quantile_iterated_to(), (it.value_iterated_to() as f64 / 1e3).min(max)))
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, v)| (1.0 / (1.0 - q), v))
        .filter(|(x, _)| *x <= n)
        .collect();
    if n > 0.0 {
        points.push((n, max));
    }
    Ok(points)
}

/// A percentile on the log tail axis: x = 1 / (1 − q) as "99.9%".
fn tail_label(x: f64) -> String {
    let pct = 100.0 * (1.0 - 1.0 / x.max(1.0));
    let digits = (x.log10().round() as usize).saturating_sub(2);
    format!("{pct:.digits$}%")
}

pub(crate) fn latency_figure(dir: &Path, run: &Run, name: &str) -> Result<Vec<PathBuf>> {
    let spec = &run.manifest.spec;
    let lat = Latencies::of(run)?;
    let mut lines = Vec::new();
    for stack in &spec.codecs {
        for &payload in &spec.payloads {
            let points = spectrum(lat.get(stack, payload as u64))?;
            let mut label = display_name(stack);
            if spec.payloads.len() > 1 {
                label += &format!(" ({})", crate::fmt::bytes(payload as f64));
            }
            lines.push(Line { label, points });
        }
    }
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let ymin = ys.clone().fold(f64::INFINITY, f64::min).max(0.1) * 0.8;
    let ymax = ys.fold(1.0, f64::max) * 1.25;
    let xmax = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).fold(10.0, f64::max);
    let mode = match name {
        AWAKE_NAME => "closed loop, cores awake",
        OPEN_NAME => "open loop",
        _ => "closed loop",
    };
    let chart = Chart {
        title: format!(
            "Round-trip latency over loopback, {mode} ({}, {})",
            spec.variants_at(run.manifest.scale).join(", "),
            run.manifest.run_id
        ),
        x_desc: "percentile of round trips (log tail axis)",
        y_desc: "round-trip latency, µs (log)",
        x_log: true,
        x_range: (1.0, xmax * 1.1),
        y_log_floor: true,
        y_range: (ymin, ymax),
        x_fmt: &|v| tail_label(*v),
        y_fmt: &|v| crate::fmt::sig3(*v),
        x_marks: &[],
    };
    write_both(dir, name, &lines, &chart)
}

/// Each timed variant with its allocator as the manifest recorded it, so the
/// caption says whether the timed build carried jemalloc's statistics.
fn builds(run: &Run) -> String {
    let m = &run.manifest;
    let each = m.spec.variants_at(m.scale).iter().map(|v| match m.allocators.get(v) {
        Some(a) => format!("{v}, {a}"),
        None => v.clone(),
    });
    each.collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};

    /// `repeat` round trips of `ns` each, timed only (no counts).
    fn trips(ns: u64, repeat: u64) -> RoundTrip {
        RoundTrip {
            msg: 0,
            allocs: None,
            bytes: None,
            ns,
            service_ns: None,
            client_allocs: None,
            client_bytes: None,
            server_allocs: None,
            server_bytes: None,
            other_allocs: None,
            repeat,
        }
    }

    #[test]
    fn percentiles_pool_the_repetitions_and_the_floor_is_the_runs_own() {
        let trip = |ns| trips(ns, 1);
        let mut rows = Vec::new();
        for (rep, ns) in [(0, 30_000), (0, 40_000), (1, 50_000)] {
            rows.push((subject("grpc", 0, "jemalloc", rep), trip(ns)));
        }
        rows.push((subject("raw-tcp", 0, "jemalloc", 0), trip(10_000)));
        let t =
            roundtrip_latency(&run("roundtrip-latency", None, &rows), registry::Experiment::RoundtripLatency.name())
                .unwrap();
        let key = [display_name("grpc"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "n"), "3");
        assert_eq!(cell(&t, &key, "p50"), fmt::sig3(40.0));
        assert_eq!(cell(&t, &key, "× floor"), format!("{}×", fmt::sig3(4.0)));
        assert_eq!(cell(&t, &key, "above floor (µs)"), fmt::sig3(30.0));
        assert_eq!(cell(&t, &key, "max"), fmt::sig3(50.0));
    }

    #[test]
    fn a_record_of_a_histogram_counts_as_many_round_trips_as_it_stands_for() {
        let trip = trips;
        // 98 round trips at 10 µs and 2 at 1 ms: p50 10 µs, p99 1 ms, n 100.
        let rows = vec![
            (subject("grpc", 0, "jemalloc", 0), trip(10_000, 98)),
            (subject("grpc", 0, "jemalloc", 0), trip(1_000_000, 2)),
            (subject("raw-tcp", 0, "jemalloc", 0), trip(5_000, 7)),
        ];
        let t =
            roundtrip_latency(&run("roundtrip-latency", None, &rows), registry::Experiment::RoundtripLatency.name())
                .unwrap();
        let key = [display_name("grpc"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "n"), "100");
        assert_eq!(cell(&t, &key, "p50"), fmt::sig3(10.0));
        assert_eq!(cell(&t, &key, "p99"), fmt::sig3(1000.0));
    }

    #[test]
    fn tail_axis_labels_the_nines() {
        assert_eq!(tail_label(2.0), "50%");
        assert_eq!(tail_label(10.0), "90%");
        assert_eq!(tail_label(100.0), "99%");
        assert_eq!(tail_label(1000.0), "99.9%");
        assert_eq!(tail_label(10000.0), "99.99%");
    }

    #[test]
    fn spectrum_reaches_the_tail_and_the_maximum() {
        // 1..=10,000 µs: the p99 point sits near 9,900 µs, the last is the maximum at x = n.
        let us: Vec<f64> = (1..=10_000).map(f64::from).collect();
        let pts = spectrum(&us).unwrap();
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1), "monotone");
        let near = |x: f64| pts.iter().min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs())).unwrap().1;
        assert!((near(100.0) - 9_900.0).abs() < 100.0, "p99 ≈ {}", near(100.0));
        assert_eq!(*pts.last().unwrap(), (10_000.0, 10_000.0));
    }
}
