//! Tables computed with polars from the newest run of each experiment,
//! written as LaTeX fragments (`paper/generated/*.tex`) and Markdown.
//! Nothing in them is typed by hand; rerunning on the same data gives the
//! same bytes.

use crate::dataset::{self, Run};
use crate::fmt;
use anyhow::{Context, Result};
use polars::prelude::{BooleanChunked, ChunkCompareEq, ChunkFull, DataFrame, DataType, NamedFrom, Series};
use std::path::{Path, PathBuf};

/// A computed table, rendered to both formats.
pub struct Table {
    pub name: &'static str,
    pub caption: String,
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
    pub source: String,
}

/// Said in the caption of every table with a row marked `*`.
pub const IDIOMS: &str = "Rows marked * are the peer's documented fastest idiom: FlatBuffers with the byte fields as \
     fixed arrays in a struct; Cap'n Proto with a reused scratch-space builder and the no-allocation reader; prost \
     with bytes::Bytes fields decoded from a Bytes buffer (beside it, prost with one message reused both ways, \
     clear + merge); serde_json deserializing into borrowed \
     &str fields and writing hex through collect_str. Unmarked rows are written as the crates' users commonly write them.";

/// Display name of a codec in tables and figure legends.
pub fn display_name(codec: &str) -> String {
    match codec {
        "zap" => "ZAP".into(),
        "json-rpc" => "JSON-RPC".into(),
        "flatbuffers" => "FlatBuffers".into(),
        "flatbuffers-struct" => "FlatBuffers (fixed arrays)*".into(),
        "capnp" => "Cap'n Proto".into(),
        "capnp-scratch" => "Cap'n Proto (scratch, no-alloc read)*".into(),
        "protobuf" => "Protobuf (prost)".into(),
        "protobuf-reuse" => "Protobuf (prost, reused message)".into(),
        "protobuf-bytes" => "Protobuf (prost, Bytes fields)*".into(),
        "json-rpc-borrowed" => "JSON-RPC (borrowed)*".into(),
        "zap-tcp" => "ZAP (TCP, RPC)".into(),
        "flatbuffers-tcp" => "FlatBuffers (TCP)".into(),
        "capnp-tcp" => "Cap'n Proto (TCP)".into(),
        "capnp-rpc" => "Cap'n Proto (capnp-rpc)".into(),
        "protobuf-tcp" => "Protobuf (TCP, framed)".into(),
        "grpc" => "gRPC (tonic)".into(),
        "protobuf-mux" => "Protobuf-mux (yamux)".into(),
        "quic" => "QUIC (quinn, raw)".into(),
        "json-rpc-http" => "JSON-RPC (hyper HTTP/1.1)".into(),
        "raw-tcp" => "Raw TCP echo (floor)".into(),
        other => other.into(),
    }
}

fn eq_str(df: &DataFrame, col: &str, v: &str) -> Result<BooleanChunked> {
    Ok(df.column(col).with_context(|| format!("column `{col}`"))?.str()?.equal(v))
}

fn eq_u64(df: &DataFrame, col: &str, v: u64) -> Result<BooleanChunked> {
    let c = df.column(col).with_context(|| format!("column `{col}`"))?.cast(&DataType::UInt64)?;
    Ok(c.u64()?.equal(v))
}

/// Rows where every `(column, value)` matches; string columns by text, others as u64.
pub fn select(df: &DataFrame, text: &[(&str, &str)], nums: &[(&str, u64)]) -> Result<DataFrame> {
    let mut mask = BooleanChunked::full("m".into(), true, df.height());
    for (c, v) in text {
        mask = &mask & &eq_str(df, c, v)?;
    }
    for (c, v) in nums {
        mask = &mask & &eq_u64(df, c, *v)?;
    }
    Ok(df.filter(&mask)?)
}

/// Median, min and max of a column (nulls ignored); `None` when empty or absent.
pub fn stats(df: &DataFrame, col: &str) -> Result<Option<(f64, f64, f64)>> {
    summary(df, col, |s| s.median())
}

/// `(center, min, max)` of a column, `center` being the median or the mean.
fn summary(df: &DataFrame, col: &str, center: fn(&Series) -> Option<f64>) -> Result<Option<(f64, f64, f64)>> {
    let Ok(c) = df.column(col) else {
        return Ok(None);
    };
    let s = c.as_materialized_series().cast(&DataType::Float64)?;
    Ok(match (center(&s), s.min::<f64>()?, s.max::<f64>()?) {
        (Some(mid), Some(min), Some(max)) => Some((mid, min, max)),
        _ => None,
    })
}

pub(crate) fn median(df: &DataFrame, col: &str) -> Result<Option<f64>> {
    Ok(stats(df, col)?.map(|s| s.0))
}

/// `(mean, min, max)` of a column. Allocation tables headline the mean: the
/// records are every operation of a contiguous window, so the mean is the
/// true cost per operation, where a median hides periodic allocations (one
/// every 20 operations is 0.05 per operation, and a median of 0).
pub fn mean_stats(df: &DataFrame, col: &str) -> Result<Option<(f64, f64, f64)>> {
    summary(df, col, |s| s.mean())
}

fn mean(df: &DataFrame, col: &str) -> Result<Option<f64>> {
    Ok(mean_stats(df, col)?.map(|s| s.0))
}

/// Growth of `col` per million messages between the first sample after the
/// start and the last sample: the steady-state rate, warm-up excluded.
pub fn steady_rate(samples: &DataFrame, col: &str) -> Result<Option<f64>> {
    let (Ok(m), Ok(c)) = (samples.column("messages"), samples.column(col)) else {
        return Ok(None);
    };
    let m = m.cast(&DataType::Float64)?;
    let c = c.cast(&DataType::Float64)?;
    let pts: Vec<(f64, f64)> =
        m.f64()?.iter().zip(c.f64()?.iter()).filter_map(|(a, b)| Some((a?, b?))).filter(|p| p.0 > 0.0).collect();
    Ok(match (pts.first(), pts.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) / (b.0 - a.0) * 1e6),
        _ => None,
    })
}

pub(crate) fn dash() -> String {
    "–".into()
}

fn dist(s: Option<(f64, f64, f64)>) -> String {
    match s {
        Some((med, min, max)) if min == max => fmt::count(med),
        Some((med, min, max)) => format!("{} [{}, {}]", fmt::count(med), fmt::count(min), fmt::count(max)),
        None => dash(),
    }
}

pub(crate) fn opt_bytes(v: Option<f64>) -> String {
    v.map_or_else(dash, fmt::bytes)
}

fn opt_count(v: Option<f64>) -> String {
    v.map_or_else(dash, fmt::count)
}

pub(crate) fn source_of(run: &Run) -> String {
    let m = &run.manifest;
    let rev: String = m.git_revision.chars().take(10).collect();
    let state = if m.git_dirty { "dirty tree: see its dirty.diff" } else { "clean tree" };
    format!("data/{}/{} (revision {rev}, {state})", m.experiment, m.run_id)
}

/// The paper's first table: allocations per message, encode and decode.
pub fn alloc_profile(run: &Run) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let cell = |variant: &str, phase: &str| {
                select(df, &[("codec", codec), ("variant", variant), ("phase", phase)], &[("payload", payload as u64)])
            };
            let (enc, dec, rt) = (cell("dhat", "encode")?, cell("dhat", "decode")?, cell("dhat", "roundtrip")?);
            let (je_enc, je_dec) = (cell("jemalloc", "encode")?, cell("jemalloc", "decode")?);
            let bop = match (mean(&enc, "bytes")?, mean(&dec, "bytes")?) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            let je_bop = match (mean(&je_enc, "bytes")?, mean(&je_dec, "bytes")?) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            rows.push(vec![
                display_name(codec),
                fmt::bytes(payload as f64),
                dist(mean_stats(&enc, "allocs")?),
                dist(mean_stats(&dec, "allocs")?),
                opt_bytes(bop),
                opt_count(mean(&rt, "allocs")?),
                opt_bytes(mean(&rt, "bytes")?),
                opt_bytes(je_bop),
            ]);
        }
    }
    let s = spec.scale(&run.manifest.scale).context("manifest scale")?;
    Ok(Table {
        name: "alloc-profile",
        caption: format!(
            "Heap allocations per message: mean [min, max] over {} contiguous messages after {} warm-up, {} \
             repetition(s) (the mean, so periodic allocations count). \
             Counts and B/op (encode+decode, requested bytes) from the dhat build; jemalloc B/op counts usable \
             (size-class) bytes on the thread. No GC column: Rust has no collector, and jemalloc's purges (on a \
             10 s decay timer) read 0 for every codec in runs this short (see the heap-growth caption). {} profile.",
            s.messages, s.warmup, s.repetitions, run.manifest.profile
        ),
        header: vec![
            "Protocol",
            "Payload",
            "Allocs (enc)",
            "Allocs (dec)",
            "B/op",
            "Allocs/RT",
            "B/RT",
            "B/op (jemalloc)",
        ],
        rows,
        source: source_of(run),
    })
}

/// The paper's second table: cumulative heap after N round trips
/// (`name` is `heap-growth`, codecs in process, or `transport-heap-growth`).
pub fn heap_growth(run: &Run, name: &'static str) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let d = select(
                df,
                &[("codec", codec), ("variant", "dhat"), ("kind", "summary")],
                &[("payload", payload as u64)],
            )?;
            let j = select(
                df,
                &[("codec", codec), ("variant", "jemalloc"), ("kind", "summary")],
                &[("payload", payload as u64)],
            )?;
            let n = median(&d, "messages")?.or(median(&j, "messages")?);
            let samples = select(
                df,
                &[("codec", codec), ("variant", "dhat"), ("kind", "sample")],
                &[("payload", payload as u64), ("rep", 0)],
            )?;
            rows.push(vec![
                display_name(codec),
                fmt::bytes(payload as f64),
                opt_count(n),
                opt_bytes(median(&d, "cum_bytes")?),
                opt_bytes(steady_rate(&samples, "cum_bytes")?),
                opt_bytes(median(&d, "peak_live_bytes")?),
                opt_count(median(&d, "cum_allocs")?),
                opt_count(steady_rate(&samples, "cum_allocs")?),
                opt_bytes(median(&j, "peak_rss_bytes")?),
            ]);
        }
    }
    let s = spec.scale(&run.manifest.scale).context("manifest scale")?;
    let what = if name == "heap-growth" {
        "encode+decode round trips in one process, from a cold start"
    } else {
        "round trips over loopback per transport stack (client and server, connection already open)"
    };
    Ok(Table {
        name,
        caption: format!(
            "Cumulative heap after {} {what} ({} repetition(s), median). \
             Total allocated, peak heap (live bytes, whole process) and allocator calls from the dhat build; peak \
             RSS from the jemalloc build. Steady-state rates per million messages are the slope between the first \
             sample and the last, so one-time warm-up growth is excluded. The papers' GC column has no counterpart \
             here: Rust has no collector, and jemalloc's purge count, the nearest event, runs on a 10 s decay \
             timer (jemalloc's default), so runs shorter than that show 0 by construction and it told no stack \
             from another; it is dropped rather than shown as a column of zeros. {} profile.",
            fmt::thousands(s.messages),
            s.repetitions,
            run.manifest.profile
        ),
        header: vec![
            "Stack",
            "Payload",
            "Messages",
            "Total allocated",
            "Steady alloc/M msgs",
            "Peak heap",
            "Allocator calls",
            "Steady calls/M msgs",
            "Peak RSS",
        ],
        rows,
        source: source_of(run),
    })
}

/// Values of a float column, in row order (nulls dropped).
pub fn floats(df: &DataFrame, col: &str) -> Result<Vec<f64>> {
    let c = df.column(col).with_context(|| format!("column `{col}`"))?.cast(&DataType::Float64)?;
    Ok(c.f64()?.iter().flatten().collect())
}

/// Median of element-wise ratios `a[i] / b[i]` (rows paired by round and repetition).
fn median_ratio(a: &[f64], b: &[f64]) -> Result<Option<f64>> {
    let ratios: Vec<f64> = a.iter().zip(b).filter(|(_, d)| **d > 0.0).map(|(n, d)| n / d).collect();
    if ratios.is_empty() || a.len() != b.len() {
        return Ok(None);
    }
    Ok(Series::new("r".into(), ratios).median())
}

pub(crate) fn ratio(v: Option<f64>) -> String {
    v.map_or_else(dash, |r| format!("{}×", fmt::sig3(r)))
}

/// What each instrumented build costs in time: the codec-speed cells run in
/// every build from one run (`experiments/instrumentation-cost.toml`).
pub fn instrumentation_cost(run: &Run) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    // Encode + decode medians of one implementation in one build.
    let per_msg = |codec: &str, payload: usize, variant: &str, implementation: &str| -> Result<Option<f64>> {
        let pick = |op: &str| {
            select(
                df,
                &[("codec", codec), ("implementation", implementation), ("op", op), ("variant", variant)],
                &[("payload", payload as u64)],
            )
        };
        let (e, d) = (median(&pick("encode")?, "ns_per_op")?, median(&pick("decode")?, "ns_per_op")?);
        Ok(e.zip(d).map(|(e, d)| e + d))
    };
    let r = |a: Option<f64>, b: Option<f64>| ratio(a.zip(b).map(|(a, b)| a / b));
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let t = |v: &str| per_msg(codec, payload, v, "codec");
            let (sys, plain, stats, dhat) = (t("system")?, t("jemalloc-plain")?, t("jemalloc")?, t("dhat")?);
            // ZAP allocates nothing, so its ratio across builds is the noise of the comparison.
            let z = |v: &str| per_msg(codec, payload, v, "zap");
            rows.push(vec![
                display_name(codec),
                fmt::bytes(payload as f64),
                sys.map_or_else(dash, fmt::sig3),
                r(plain, sys),
                r(stats, plain),
                r(stats, sys),
                r(dhat, sys),
                r(z("jemalloc")?, z("system")?),
            ]);
        }
    }
    let s = spec.scale(&run.manifest.scale).context("manifest scale")?;
    Ok(Table {
        name: "instrumentation-cost",
        caption: format!(
            "What each build costs in time: encode + decode ns per message (medians over rounds of {} operations, \
             {} repetition(s)) of the codec-speed cells run in every build in one run, cells interleaved, as \
             ratios. jemalloc ÷ system is the allocator change alone (jemalloc with its statistics compiled \
             out); stats ÷ no stats is the price of jemalloc's statistics (the probe's jemalloc build); dhat ÷ \
             system is the counting build, never used for timings. The last column times ZAP, which allocates \
             nothing, in the jemalloc-stats build against the system build of the same cells: the noise of \
             these ratios. {} profile.",
            fmt::thousands(s.messages),
            s.repetitions,
            run.manifest.profile
        ),
        header: vec![
            "Protocol",
            "Payload",
            "System ns/msg",
            "jemalloc ÷ system",
            "stats ÷ no stats",
            "jemalloc-stats ÷ system",
            "dhat ÷ system",
            "ZAP: stats ÷ system",
        ],
        rows,
        source: source_of(run),
    })
}

/// Encode/decode speed per codec, with ratios to ZAP and memcpy from the same rounds.
pub fn codec_speed(run: &Run) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    let mut rounds = 0;
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let pick = |implementation: &str, op: &str| {
                select(
                    df,
                    &[("codec", codec), ("implementation", implementation), ("op", op)],
                    &[("payload", payload as u64)],
                )
            };
            let (enc, dec) = (pick("codec", "encode")?, pick("codec", "decode")?);
            let (zenc, zdec, copy) = (pick("zap", "encode")?, pick("zap", "decode")?, pick("memcpy", "copy")?);
            rounds = rounds.max(enc.height());
            let ns = |d: &DataFrame| -> Result<Vec<f64>> { floats(d, "ns_per_op") };
            let (e, d, ze, zd, m) = (ns(&enc)?, ns(&dec)?, ns(&zenc)?, ns(&zdec)?, ns(&copy)?);
            let ns_dist = |s: Option<(f64, f64, f64)>| match s {
                Some((med, min, max)) => format!("{} [{}, {}]", fmt::sig3(med), fmt::sig3(min), fmt::sig3(max)),
                None => dash(),
            };
            rows.push(vec![
                display_name(codec),
                fmt::bytes(payload as f64),
                opt_count(median(&enc, "wire_bytes")?),
                ns_dist(stats(&enc, "ns_per_op")?),
                ns_dist(stats(&dec, "ns_per_op")?),
                ratio(median_ratio(&e, &ze)?),
                ratio(median_ratio(&d, &zd)?),
                ratio(median_ratio(&e, &m)?),
                ratio(median_ratio(&d, &m)?),
            ]);
        }
    }
    let s = spec.scale(&run.manifest.scale).context("manifest scale")?;
    Ok(Table {
        name: "codec-speed",
        caption: format!(
            "Encode and decode time per message, ns/op: median [min, max] over {rounds} timed rounds of {} operations \
             each ({} repetition(s)). In every round the codec, ZAP and a memcpy of the codec's encoded bytes run back \
             to back in one process, in an order that alternates round by round (codec, ZAP, memcpy; memcpy, ZAP, \
             codec); ratios are medians of the per-round ratios. The ZAP row's \"vs ZAP\" ratios measure ZAP against \
             itself (an A/A test): they are the noise floor of every ratio in the table. System allocator, {} \
             profile; a shared 2-core machine, so read spreads before differences.",
            fmt::thousands(s.messages),
            s.repetitions,
            run.manifest.profile
        ),
        header: vec![
            "Protocol",
            "Payload",
            "Wire bytes",
            "Encode ns/op",
            "Decode ns/op",
            "Enc vs ZAP",
            "Dec vs ZAP",
            "Enc vs memcpy",
            "Dec vs memcpy",
        ],
        rows,
        source: source_of(run),
    })
}

/// Allocations per round trip over each transport stack.
pub fn transport_alloc(run: &Run) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for t in &spec.codecs {
        for &payload in &spec.payloads {
            let d = select(df, &[("codec", t), ("variant", "dhat")], &[("payload", payload as u64)])?;
            let j = select(df, &[("codec", t), ("variant", "jemalloc")], &[("payload", payload as u64)])?;
            rows.push(vec![
                display_name(t),
                fmt::bytes(payload as f64),
                dist(mean_stats(&d, "allocs")?),
                opt_bytes(mean(&d, "bytes")?),
                dist(mean_stats(&d, "client_allocs")?),
                opt_bytes(mean(&d, "client_bytes")?),
                dist(mean_stats(&d, "server_allocs")?),
                opt_bytes(mean(&d, "server_bytes")?),
                dist(mean_stats(&d, "other_allocs")?),
                opt_bytes(mean(&j, "bytes")?),
            ]);
        }
    }
    let s = spec.scale(&run.manifest.scale).context("manifest scale")?;
    Ok(Table {
        name: "transport-alloc",
        caption: format!(
            "Heap allocations per round trip over loopback TCP, client and server together: mean [min, max] over \
             {} contiguous round trips (the mean, so periodic allocations count) after {} warm-up, {} repetition(s), dhat build. Client and server split the total by \
             the thread that allocated (harness thread, server thread); Other counts threads a library started on \
             its own. The jemalloc column counts the client thread only (per-thread counters, usable size). {} \
             profile.",
            fmt::thousands(s.messages),
            s.warmup,
            s.repetitions,
            run.manifest.profile
        ),
        header: vec![
            "Stack",
            "Payload",
            "Allocs/RT",
            "B/RT",
            "Client allocs",
            "Client B",
            "Server allocs",
            "Server B",
            "Other allocs",
            "B/RT client (jemalloc)",
        ],
        rows,
        source: source_of(run),
    })
}

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
        let floor = match spec.codecs.iter().any(|c| c == FLOOR) {
            true => percentile(&latencies_us(run, FLOOR, payload as u64)?, 50.0),
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
const FLOOR: &str = "raw-tcp";

pub fn tex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '–' => out.push_str("--"),
            '×' => out.push_str("$\\times$"),
            'µ' => out.push_str("$\\mu$"),
            '^' => out.push_str("\\^{}"),
            _ => out.push(c),
        }
    }
    out
}

impl Table {
    pub fn to_latex(&self) -> String {
        let mut s = format!("% Generated by `workbench tables` from {}; do not edit.\n", self.source);
        s += "\\begin{table}[h]\n\\centering\n\\small\n";
        s += &format!("\\caption{{{}}}\n\\label{{tab:{}}}\n", tex_escape(&self.caption), self.name);
        // NOTE: shrink a table wider than the text to fit (graphicx), never widen one.
        s += "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n";
        s += &format!("\\begin{{tabular}}{{l{}}}\n\\toprule\n", "r".repeat(self.header.len() - 1));
        s += &self.header.iter().map(|h| format!("\\textbf{{{}}}", tex_escape(h))).collect::<Vec<_>>().join(" & ");
        s += " \\\\\n\\midrule\n";
        for row in &self.rows {
            s += &row.iter().map(|c| tex_escape(c)).collect::<Vec<_>>().join(" & ");
            s += " \\\\\n";
        }
        s += "\\bottomrule\n\\end{tabular}}\n\\end{table}\n";
        s
    }

    pub fn to_markdown(&self) -> String {
        let mut s = format!("<!-- Generated by `workbench tables` from {}; do not edit. -->\n\n", self.source);
        s += &format!("**{}**\n\n", self.caption);
        s += &format!("| {} |\n", self.header.join(" | "));
        s += &format!(
            "|{}\n",
            self.header.iter().enumerate().map(|(i, _)| if i == 0 { "---|" } else { "---:|" }).collect::<String>()
        );
        for row in &self.rows {
            s += &format!("| {} |\n", row.join(" | "));
        }
        s
    }
}

/// Loads the newest run of each experiment at `scale` and computes every table.
pub fn compute(data: &Path, scale: &str) -> Result<Vec<Table>> {
    let mut tables = Vec::new();
    for r in crate::reports::REPORTS {
        if let Some(dir) = dataset::latest_run(data, r.dataset, scale)? {
            let run = dataset::load_run(&dir)?;
            tables.push((r.table)(&run).with_context(|| format!("table {} from {}", r.name, dir.display()))?);
        }
    }
    for t in &mut tables {
        if t.rows.iter().any(|r| r.first().is_some_and(|n| n.ends_with('*'))) {
            t.caption.push(' ');
            t.caption.push_str(IDIOMS);
        }
    }
    Ok(tables)
}

/// Where the outputs of a scale go: quick-scale ones at `base`, the others in
/// a subfolder named after the scale, so a full run never overwrites the
/// quick suite's tables and figures (the paper includes both).
pub fn scale_dir(root: &Path, base: &str, scale: &str) -> PathBuf {
    match scale {
        "quick" => root.join(base),
        other => root.join(base).join(other),
    }
}

/// Writes every table to `paper/generated/[<scale>/]<name>.{tex,md}` and
/// removes those of experiments without a dataset; the paths written.
pub fn write_all(root: &Path, data: &Path, scale: &str) -> Result<(Vec<Table>, Vec<PathBuf>)> {
    let tables = compute(data, scale)?;
    let dir = scale_dir(root, "paper/generated", scale);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for t in &tables {
        for (ext, text) in [("tex", t.to_latex()), ("md", t.to_markdown())] {
            let path = dir.join(format!("{}.{ext}", t.name));
            dataset::write_atomic(&path, text.as_bytes())?;
            written.push(path);
        }
    }
    // A table whose dataset is gone must not outlive it: the paper would
    // print its numbers as if measured.
    for exp in crate::reports::REPORTS.iter().map(|r| r.name) {
        if tables.iter().any(|t| t.name == exp) {
            continue;
        }
        for ext in ["tex", "md"] {
            let stale = dir.join(format!("{exp}.{ext}"));
            if stale.exists() {
                std::fs::remove_file(&stale).with_context(|| format!("removing the stale {}", stale.display()))?;
            }
        }
    }
    Ok((tables, written))
}
