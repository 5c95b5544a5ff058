//! heap-growth and transport-heap-growth: a codec's (or a transport
//! stack's) heap over many messages. Table: total and steady allocation,
//! peak and live heap per stack. Figure: two panels from the same run,
//! allocation volume (log–log) and the live heap.

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{write_pair, Chart, Line, FLOOR};
use crate::report::tables::{self, field, opt_bytes, opt_count, row, source_of, stats_of, steady_rate, Table};
use ::trace::events;
use anyhow::Result;
use records::subject::{HeapGrowth, HeapKind};
use records::Row;
use registry::{self, display_name};
use std::path::{Path, PathBuf};

/// The records of one codec (or stack) and payload, of one build and kind.
fn of<'a>(
    rows: &'a [Row<HeapGrowth, &str>],
    codec: &'a str,
    payload: usize,
    variant: &'a str,
    kind: HeapKind,
) -> impl Iterator<Item = &'a Row<HeapGrowth, &'a str>> + 'a {
    rows.iter().filter(move |r| {
        r.cell.codec() == codec
            && r.cell.payload() == payload as u64
            && r.cell.variant == variant
            && r.record.kind == kind
    })
}

/// The median of a field over records.
fn median_of<'a>(
    rows: impl Iterator<Item = &'a Row<HeapGrowth, &'a str>>,
    f: fn(&HeapGrowth) -> Option<u64>,
) -> Option<f64> {
    let v: Vec<&HeapGrowth> = rows.map(|r| &r.record).collect();
    stats_of(&field(&v, |r| f(r))).map(|s| s.0)
}

pub const REPORT: Report = Report::of::<records::subject::HeapGrowth>(
    registry::Experiment::HeapGrowth,
    |r| heap_growth(r, registry::Experiment::HeapGrowth.name()),
    Some(|d, r| heap_growth_figure(d, r, registry::Experiment::HeapGrowth.name())),
);

pub const TRANSPORTS: Report = Report::of::<records::subject::HeapGrowth>(
    registry::Experiment::TransportHeapGrowth,
    |r| heap_growth(r, registry::Experiment::TransportHeapGrowth.name()),
    Some(|d, r| heap_growth_figure(d, r, registry::Experiment::TransportHeapGrowth.name())),
);

/// The paper's second table: cumulative heap after N round trips
/// (`name` is `heap-growth`, codecs in process, or `transport-heap-growth`).
pub fn heap_growth(run: &Run, name: &'static str) -> Result<Table> {
    let all = run.rows::<HeapGrowth>()?;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let d = || of(&all, codec, payload, "dhat", HeapKind::Summary);
            let j = || of(&all, codec, payload, "jemalloc", HeapKind::Summary);
            let n = median_of(d(), |r| Some(r.messages)).or(median_of(j(), |r| Some(r.messages)));
            let samples: Vec<&HeapGrowth> = of(&all, codec, payload, "dhat", HeapKind::Sample)
                .filter(|r| r.cell.rep == 0)
                .map(|r| &r.record)
                .collect();
            let rate = |f: fn(&HeapGrowth) -> Option<u64>| steady_rate(samples.iter().map(|r| (r.messages, f(r))));
            rows.push(row![
                crate::report::tables::TableCell::keyed(display_name(codec), codec),
                crate::report::tables::TableCell::keyed(fmt::bytes(payload as f64), payload),
                opt_count(n),
                opt_bytes(median_of(d(), |r| r.cum_bytes)),
                opt_bytes(rate(|r| r.cum_bytes)),
                opt_bytes(median_of(d(), |r| r.peak_live_bytes)),
                opt_count(median_of(d(), |r| r.cum_allocs)),
                opt_count(rate(|r| r.cum_allocs)),
                opt_bytes(median_of(j(), |r| r.peak_rss_bytes)),
                live_after_warmup(&run.dir, codec, payload)?,
            ]);
        }
    }
    let s = spec.scale(run.manifest.scale);
    let what = if name == "heap-growth" {
        "encode+decode round trips in one process, from a cold start"
    } else {
        "round trips over loopback per transport stack (client and server, connection already open)"
    };
    Ok(Table {
        name,
        caption: format!(
            "Cumulative heap after {} {what} ({} repetition(s), median): total allocated, peak heap, allocator \
             calls, peak RSS, steady-state rates and the live heap after warm-up.",
            tables::messages(s, &spec.payloads),
            s.repetitions,
        ),
        method: format!(
            "Total allocated, peak heap (live bytes, whole process) and allocator calls from the dhat build; peak \
             RSS from the jemalloc build. Steady-state rates per million messages are the slope between the first \
             sample and the last, so one-time warm-up growth is excluded. The papers' GC column has no counterpart \
             here: Rust has no collector, and jemalloc's purge count, the nearest event, runs on a 10 s decay \
             timer (jemalloc's default), so runs shorter than that show 0 by construction and it told no stack \
             from another; it is dropped rather than shown as a column of zeros. Live after warm-up: the whole \
             heap from the end of the first tenth of the messages to the last, from the events build's timeline \
             (repetition 0): flat, higher at the end but no longer rising, or a leak (a site still reaching new \
             highs in the last quarter, with its slope). Built with the {} profile.",
            run.manifest.profile
        ),
        header: vec![
            "Stack",
            "Payload",
            crate::report::tables::col::MESSAGES,
            crate::report::tables::col::TOTAL_ALLOCATED,
            crate::report::tables::col::STEADY,
            crate::report::tables::col::PEAK_HEAP,
            "Allocator calls",
            "Steady calls/M msgs",
            "Peak RSS",
            "Live after warm-up",
        ],
        rows,
        source: source_of(run),
    })
}

/// The events build's verdict on the live heap after warm-up
/// ([`events::verdict`]), or a dash when the run has no events file.
fn live_after_warmup(dir: &Path, codec: &str, payload: usize) -> Result<String> {
    let stem = registry::CellId::subject(codec, payload as u64, "events", 0).trace_file("events.json");
    let traces = crate::data::traces::unpacked(dir)?;
    let Some(path) = [stem.clone(), format!("{stem}.gz")].iter().map(|n| traces.join(n)).find(|p| p.is_file()) else {
        return Ok(tables::dash());
    };
    let e = events::Events::load(&path)?;
    Ok(events::verdict(&e, e.operations() / 10))
}

/// Cumulative bytes allocated against messages, one line per codec (and payload),
/// from the dhat build's samples of repetition 0.
/// One line per codec: a field of the dhat build's samples against messages.
pub fn heap_growth_lines(run: &Run, f: fn(&HeapGrowth) -> Option<u64>) -> Result<Vec<Line>> {
    let all = run.rows::<HeapGrowth>()?;
    let spec = &run.manifest.spec;
    let mut lines = Vec::new();
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let samples: Vec<&HeapGrowth> = of(&all, codec, payload, "dhat", HeapKind::Sample)
                .filter(|r| r.cell.rep == 0)
                .map(|r| &r.record)
                .collect();
            if samples.is_empty() {
                continue;
            }
            let points: Vec<(f64, f64)> =
                samples.iter().filter_map(|r| Some((r.messages as f64, f(r)? as f64))).collect();
            let mut label = display_name(codec);
            if spec.payloads.len() > 1 {
                label += &format!(" ({})", crate::fmt::bytes(payload as f64));
            }
            lines.push(Line { label, points });
        }
    }
    Ok(lines)
}

/// Heap growth as two panels from the same run: the volume allocated
/// (log–log, so a constant cost per message is a straight line of slope 1,
/// not a saturating curve) and the live heap (what a leak would grow).
pub(crate) fn heap_growth_figure(dir: &Path, run: &Run, name: &str) -> Result<Vec<PathBuf>> {
    let floor_label = |mut lines: Vec<Line>| {
        for l in &mut lines {
            l.points.retain(|p| p.0 > 0.0);
            if l.points.iter().all(|p| p.1 <= 0.0) {
                l.label += ": 0 B (drawn on the axis floor)";
            }
        }
        lines
    };
    let volume = floor_label(heap_growth_lines(run, |r| r.cum_bytes)?);
    let live = floor_label(heap_growth_lines(run, |r| r.live_bytes)?);
    let n = tables::messages(run.manifest.spec.scale(run.manifest.scale), &run.manifest.spec.payloads);
    let xmin = volume.iter().flat_map(|l| l.points.iter().map(|p| p.0)).fold(f64::INFINITY, f64::min).max(1.0);
    let xmax = volume.iter().chain(&live).flat_map(|l| l.points.iter().map(|p| p.0)).fold(1.0, f64::max);
    let ymax =
        |lines: &[Line]| lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(FLOOR * 10.0, f64::max) * 2.0;
    let what = if name == "heap-growth" { "codecs in process" } else { "stacks over loopback" };
    let y_fmt = |v: &f64| if *v <= FLOOR { "0 B".into() } else { crate::fmt::si_bytes(*v) };
    let left = Chart {
        title: format!("Allocated over {n} round trips, {what}"),
        x_desc: "round trips (log)",
        y_desc: "cumulative bytes allocated (log)",
        x_log: true,
        x_range: (xmin, xmax * 1.1),
        y_log_floor: true,
        y_range: (FLOOR, ymax(&volume)),
        x_fmt: &|v| crate::fmt::count(v.round()),
        y_fmt: &y_fmt,
        x_marks: &[],
    };
    let right = Chart {
        title: format!("Live heap, same run (dhat build, {})", run.manifest.run_id),
        x_desc: "round trips",
        y_desc: "live heap bytes (log)",
        x_log: false,
        x_range: (0.0, xmax),
        y_log_floor: true,
        y_range: (FLOOR, ymax(&live)),
        x_fmt: &|v| crate::fmt::count(v.round()),
        y_fmt: &y_fmt,
        x_marks: &[],
    };
    write_pair(dir, name, (&volume, &left), (&live, &right))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};

    fn rec(kind: HeapKind, messages: u64, cum_bytes: u64) -> HeapGrowth {
        HeapGrowth {
            kind,
            messages,
            cum_bytes: Some(cum_bytes),
            cum_allocs: Some(cum_bytes / 10),
            live_bytes: Some(1000),
            peak_live_bytes: Some(5000),
            rss_bytes: None,
            peak_rss_bytes: None,
            purges: None,
            elapsed_s: 0.1,
        }
    }

    #[test]
    fn the_steady_rate_leaves_out_the_warm_up() {
        let d = || subject("zap", 0, "dhat", 0);
        let rows = vec![
            (d(), rec(HeapKind::Sample, 0, 0)),
            // The first sample after the start carries the warm-up's 1 MB.
            (d(), rec(HeapKind::Sample, 1000, 1_000_000)),
            (d(), rec(HeapKind::Sample, 3000, 1_000_200)),
            (d(), rec(HeapKind::Summary, 3000, 1_000_200)),
        ];
        let t = heap_growth(&run("heap-growth", None, &rows), registry::Experiment::HeapGrowth.name()).unwrap();
        let key = [display_name("zap"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "Messages"), fmt::count(3000.0));
        assert_eq!(cell(&t, &key, "Total allocated"), fmt::bytes(1_000_200.0));
        // 200 B over 2,000 messages: 100,000 B a million.
        assert_eq!(cell(&t, &key, "Steady alloc/M msgs"), fmt::bytes(100_000.0));
        assert_eq!(cell(&t, &key, "Peak heap"), fmt::bytes(5000.0));
        assert_eq!(cell(&t, &key, "Peak RSS"), crate::report::tables::dash());
    }
}
