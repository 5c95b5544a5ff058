//! The paper's generated inputs and its build (`workbench paper`).
//!
//! The hand-written LaTeX in `paper/` holds no number: every figure in its
//! prose is a macro from `paper/generated/macros.tex`, every table an
//! `\input` of a file `workbench tables` wrote, every figure a PDF converted
//! from `figures/` at build time. Each experiment is shown at the largest
//! scale it has a dataset for (full, else quick), the same choice for its
//! table, its figure and its macros; a missing one renders as a framed "not
//! yet measured" box, never a number from an earlier run.
//!
//! # Layout
//! - [`claims`]: the source papers' claims against ours (`workbench claims`).
//! - [`MACROS`]: the prose numbers, each a cell of a generated table.
//! - [`write_macros`] writes `paper/generated/macros.tex`; [`write_determinism`]
//!   the allocation gate's determinism map.
//! - [`build`]: figures → PDF (rsvg-convert), then latexmk → `paper/build/main.pdf`,
//!   then [`check_log`].
//! - [`hand_written_digits`]: the test that keeps numbers out of the prose.

pub mod claims;

use crate::report::codec_speed::TARGET_CPU;
use crate::report::tables::{self, col, Table};
use crate::report::Analysis;
use crate::spec::variants;
use crate::spec::Scale;
use crate::{data::dataset, fmt};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One prose number: the headline of a table cell (the text before any
/// ` [min, max]`), found by the row's keys (the stack's registered name, the
/// payload in bytes: [`tables::TableCell::key`]) and the column's header
/// constant ([`tables::col`]), never by a rendered label.
pub struct Macro {
    pub name: &'static str,
    pub table: &'static str,
    /// The codec's or stack's registered name and the payload in bytes.
    pub row: (&'static str, u64),
    pub column: &'static str,
    /// The build's instruction set ([`variants::target_cpu`]), where a table
    /// has rows for several; `None` is the reference build's.
    pub cpu: Option<&'static str>,
}

const fn m(name: &'static str, table: &'static str, key: &'static str, payload: u64, column: &'static str) -> Macro {
    Macro { name, table, row: (key, payload), column, cpu: None }
}

/// [`m`] for the rows of the build compiled for `cpu`. A table without such
/// rows (a run that did not build it) gives `\notmeasured`.
const fn m_cpu(
    name: &'static str,
    table: &'static str,
    key: &'static str,
    payload: u64,
    cpu: &'static str,
    column: &'static str,
) -> Macro {
    Macro { name, table, row: (key, payload), column, cpu: Some(cpu) }
}

/// Every prose number of the paper. NOTE: LaTeX macro names are letters only.
pub const MACROS: &[Macro] = &[
    m("zapEncAllocs", "alloc-profile", "zap", 0, col::ALLOCS_ENC),
    m("zapDecAllocs", "alloc-profile", "zap", 0, col::ALLOCS_DEC),
    m("zapBytesOp", "alloc-profile", "zap", 0, col::B_OP),
    m("flatbuffersEncAllocs", "alloc-profile", "flatbuffers", 0, col::ALLOCS_ENC),
    m("capnpEncAllocs", "alloc-profile", "capnp", 0, col::ALLOCS_ENC),
    m("capnpBytesOp", "alloc-profile", "capnp", 0, col::B_OP),
    m("capnpScratchEncAllocs", "alloc-profile", "capnp-scratch", 0, col::ALLOCS_ENC),
    m("protobufRTAllocs", "alloc-profile", "protobuf", 64, col::ALLOCS_RT),
    m("protobufBytesOp", "alloc-profile", "protobuf", 64, col::B_OP),
    m("jsonRTAllocs", "alloc-profile", "json-rpc", 64, col::ALLOCS_RT),
    m("jsonBytesOp", "alloc-profile", "json-rpc", 64, col::B_OP),
    m("heapMessages", "heap-growth", "zap", 0, col::MESSAGES),
    m("zapHeapTotal", "heap-growth", "zap", 0, col::TOTAL_ALLOCATED),
    m("zapHeapSteady", "heap-growth", "zap", 0, col::STEADY),
    m("jsonHeapTotal", "heap-growth", "json-rpc", 0, col::TOTAL_ALLOCATED),
    m("jsonPeakHeap", "heap-growth", "json-rpc", 0, col::PEAK_HEAP),
    m("zapTcpAllocsRT", "transport-alloc", "zap-tcp", 0, col::ALLOCS_RT),
    m("grpcAllocsRT", "transport-alloc", "grpc", 0, col::ALLOCS_RT),
    m("grpcBytesRT", "transport-alloc", "grpc", 0, col::B_RT),
    m("quicAllocsRT", "transport-alloc", "quic", 0, col::ALLOCS_RT),
    m("transportMessages", "transport-heap-growth", "zap-tcp", 0, col::MESSAGES),
    m("zapTcpHeapSteady", "transport-heap-growth", "zap-tcp", 0, col::STEADY),
    m("grpcHeapTotal", "transport-heap-growth", "grpc", 0, col::TOTAL_ALLOCATED),
    m("floorIdle", "roundtrip-latency", "raw-tcp", 0, col::P50),
    m("zapIdle", "roundtrip-latency", "zap-tcp", 0, col::P50),
    m("zapIdleTimesFloor", "roundtrip-latency", "zap-tcp", 0, col::TIMES_FLOOR),
    m("floorIdleTail", "roundtrip-latency", "raw-tcp", 0, col::P95),
    m("zapIdleTail", "roundtrip-latency", "zap-tcp", 0, col::P95),
    m("floorAwake", "roundtrip-latency-awake", "raw-tcp", 0, col::P50),
    m("zapAwake", "roundtrip-latency-awake", "zap-tcp", 0, col::P50),
    m("zapAwakeTimesFloor", "roundtrip-latency-awake", "zap-tcp", 0, col::TIMES_FLOOR),
    m("zapAwakeAboveFloor", "roundtrip-latency-awake", "zap-tcp", 0, col::ABOVE_FLOOR),
    m("floorOpen", "roundtrip-latency-open", "raw-tcp", 0, col::P50),
    m("zapOpen", "roundtrip-latency-open", "zap-tcp", 0, col::P50),
    m("zapEncodeNs", "codec-speed", "zap", 64, col::ENCODE_NS),
    m("zapDecodeNs", "codec-speed", "zap", 64, col::DECODE_NS),
    m("zapAAEnc", "codec-speed", "zap", 1024, col::ENC_VS_ZAP),
    m("zapSixtyFourAAEnc", "codec-speed", "zap", 64, col::ENC_VS_ZAP),
    m("flatbuffersEncVsZap", "codec-speed", "flatbuffers", 64, col::ENC_VS_ZAP),
    m("zapBareEncVsMemcpy", "codec-speed", "zap", 0, col::ENC_VS_MEMCPY),
    m("zapBareDecVsMemcpy", "codec-speed", "zap", 0, col::DEC_VS_MEMCPY),
    m("zapSixtyFourEncVsMemcpy", "codec-speed", "zap", 64, col::ENC_VS_MEMCPY),
    m("zapSixtyFourDecVsMemcpy", "codec-speed", "zap", 64, col::DEC_VS_MEMCPY),
    m_cpu("zapBareEncVsMemcpyBaseline", "codec-speed", "zap", 0, "x86-64", col::ENC_VS_MEMCPY),
    m_cpu("zapBareDecVsMemcpyBaseline", "codec-speed", "zap", 0, "x86-64", col::DEC_VS_MEMCPY),
    m_cpu("zapSixtyFourEncVsMemcpyBaseline", "codec-speed", "zap", 64, "x86-64", col::ENC_VS_MEMCPY),
    m_cpu("zapSixtyFourDecVsMemcpyBaseline", "codec-speed", "zap", 64, "x86-64", col::DEC_VS_MEMCPY),
    // The findings the abstract and the conclusion state.
    m("aggVsClickhouse", "throughput-vs-clickhouse", "group-by-category", 1, col::OURS_VS_CLICKHOUSE),
    m("topVsClickhouse", "throughput-vs-clickhouse", "top-20-users", 1, col::OURS_VS_CLICKHOUSE),
    m("filterVsClickhouse", "throughput-vs-clickhouse", "filtered-count", 1, col::OURS_VS_CLICKHOUSE),
    m("oursConnRss", "connection-scaling", "ours/system", 10_000, col::RSS_PER_CONNECTION),
    m("clickhouseConnRss", "connection-scaling", "clickhouse/system", 1_000, col::RSS_PER_CONNECTION),
    m("clickhouseConnStacks", "connection-scaling", "clickhouse/system", 1_000, col::STACKS_PER_CONNECTION),
    m("clickhouseConnAnon", "connection-scaling", "clickhouse/system", 1_000, col::ANON_PER_CONNECTION),
    m("oursConnStacks", "connection-scaling", "ours/system", 10_000, col::STACKS_PER_CONNECTION),
    m("oursConnAnon", "connection-scaling", "ours/system", 10_000, col::ANON_PER_CONNECTION),
    m("pipeSpeedup", "pipeline-depth", "500", 64, col::SPEEDUP),
    // Where resident memory comes from, build stage by stage: the binary's
    // text pages resident after the mix, and the resident set.
    m("anatomyTextOthree", "build-stages-anatomy", "o3", 0, col::TEXT_PAGES),
    m("anatomyTextThinlto", "build-stages-anatomy", "thinlto", 0, col::TEXT_PAGES),
    m("anatomyTextFatlto", "build-stages-anatomy", "fatlto", 0, col::TEXT_PAGES),
    m("anatomyTextPgo", "build-stages-anatomy", "pgo", 0, col::TEXT_PAGES),
    m("anatomyTextBolt", "build-stages-anatomy", "pgo-bolt", 0, col::TEXT_PAGES),
    m("anatomyRssOthree", "build-stages-anatomy", "o3", 0, col::RSS),
    m("anatomyRssThinlto", "build-stages-anatomy", "thinlto", 0, col::RSS),
    m("anatomyRssBolt", "build-stages-anatomy", "pgo-bolt", 0, col::RSS),
    m("pipeDepth", "pipeline-depth", "500", 64, col::DEPTH),
    m("pipeDelay", "pipeline-depth", "500", 64, col::DELAY),
    // How wrong a sampled heap profile is: jemalloc's default interval
    // (2^19), a fine one (2^12), and every allocation against dhat.
    m("samplingDefaultInterval", "sampling-accuracy", "19", 1 << 19, col::INTERVAL),
    m("samplingDefaultError", "sampling-accuracy", "19", 1 << 19, col::SAMPLING_ERROR),
    m("samplingDefaultFoundSmall", "sampling-accuracy", "19", 1 << 19, col::FOUND_SMALL),
    m("samplingDefaultFoundMid", "sampling-accuracy", "19", 1 << 19, col::FOUND_MID),
    m("samplingDefaultFoundLarge", "sampling-accuracy", "19", 1 << 19, col::FOUND_LARGE),
    m("samplingDefaultTop", "sampling-accuracy", "19", 1 << 19, col::TOP_TEN),
    m("samplingMidInterval", "sampling-accuracy", "16", 1 << 16, col::INTERVAL),
    m("samplingMidError", "sampling-accuracy", "16", 1 << 16, col::SAMPLING_ERROR),
    m("samplingMidFoundMid", "sampling-accuracy", "16", 1 << 16, col::FOUND_MID),
    m("samplingFineInterval", "sampling-accuracy", "12", 1 << 12, col::INTERVAL),
    m("samplingFineError", "sampling-accuracy", "12", 1 << 12, col::SAMPLING_ERROR),
    m("samplingFineTop", "sampling-accuracy", "12", 1 << 12, col::TOP_TEN),
    m("samplingFineFoundMid", "sampling-accuracy", "12", 1 << 12, col::FOUND_MID),
    m("samplingEveryVsDhat", "sampling-accuracy", "0", 1, col::ERROR_VS_DHAT),
    m("samplingDefaultMissed", "sampling-accuracy", "19", 1 << 19, col::LARGEST_MISSED),
    m("samplingTransportsDefaultError", "sampling-accuracy-transports", "19", 1 << 19, col::SAMPLING_ERROR),
    m("samplingTransportsDefaultFoundSmall", "sampling-accuracy-transports", "19", 1 << 19, col::FOUND_SMALL),
    m("samplingTransportsDefaultFoundLarge", "sampling-accuracy-transports", "19", 1 << 19, col::FOUND_LARGE),
    m("samplingTransportsDefaultTop", "sampling-accuracy-transports", "19", 1 << 19, col::TOP_TEN),
    m("samplingTransportsFineInterval", "sampling-accuracy-transports", "12", 1 << 12, col::INTERVAL),
    m("samplingTransportsFineError", "sampling-accuracy-transports", "12", 1 << 12, col::SAMPLING_ERROR),
    m("samplingServerDefaultError", "sampling-accuracy-server", "19", 1 << 19, col::SAMPLING_ERROR),
    m("samplingServerDefaultFoundMid", "sampling-accuracy-server", "19", 1 << 19, col::FOUND_MID),
    m("samplingServerDefaultFoundLarge", "sampling-accuracy-server", "19", 1 << 19, col::FOUND_LARGE),
    m("samplingServerDefaultTop", "sampling-accuracy-server", "19", 1 << 19, col::TOP_TEN),
    m("samplingServerFineError", "sampling-accuracy-server", "12", 1 << 12, col::SAMPLING_ERROR),
    m("samplingServerEveryVsDhat", "sampling-accuracy-server", "0", 1, col::ERROR_VS_DHAT),
    m("samplingDefaultModelFound", "sampling-accuracy", "19", 1 << 19, col::MODEL_FOUND),
    // What is live at the peak: the last high-water dump against the
    // every-allocation profile's, and against dhat's byte peak.
    m("samplingDefaultPeak", "sampling-accuracy", "19", 1 << 19, col::PEAK_ERROR),
    m("samplingFinePeak", "sampling-accuracy", "12", 1 << 12, col::PEAK_ERROR),
    m("samplingEveryPeakVsDhat", "sampling-accuracy", "0", 1, col::PEAK_VS_DHAT),
    m("samplingServerDefaultPeak", "sampling-accuracy-server", "19", 1 << 19, col::PEAK_ERROR),
    m("samplingServerFinePeak", "sampling-accuracy-server", "12", 1 << 12, col::PEAK_ERROR),
    m("samplingServerEveryPeakVsDhat", "sampling-accuracy-server", "0", 1, col::PEAK_VS_DHAT),
    // What the profiler costs the server at four clients, and the A/A beside it.
    m("profilerCostFilter", "profiler-cost", "filtered-count", 4, col::SAMPLING_VS_JEMALLOC),
    m("profilerCostAgg", "profiler-cost", "group-by-category", 4, col::SAMPLING_VS_JEMALLOC),
    m("profilerCostTop", "profiler-cost", "top-20-users", 4, col::SAMPLING_VS_JEMALLOC),
    m("profilerCostAA", "profiler-cost", "group-by-category", 4, col::A_A_JEMALLOC),
    // What a call costs at four clients, and the memory budget's charge for it.
    m("requestPeakAgg", "request-cost", "group-by-category", 4, col::CALL_PEAK),
    m("requestPeakTop", "request-cost", "top-20-users", 4, col::CALL_PEAK),
    m("requestPeakFilter", "request-cost", "filtered-count", 4, col::CALL_PEAK),
    m("requestChargeAgg", "request-cost", "group-by-category", 4, col::CHARGE_VS_PEAK),
    m("requestChargeTop", "request-cost", "top-20-users", 4, col::CHARGE_VS_PEAK),
    m("requestChargeFilter", "request-cost", "filtered-count", 4, col::CHARGE_VS_PEAK),
    m("requestConnIdle", "request-cost", crate::report::request_cost::PER_CONNECTION, 4, col::CALL_BYTES),
    m("requestConnPeak", "request-cost", crate::report::request_cost::PER_CONNECTION, 4, col::CALL_PEAK),
    m("requestConnAfter", "request-cost", crate::report::request_cost::PER_CONNECTION, 4, col::HELD_AFTER),
];

/// The tables the paper shows: per name, the full-scale table if there is
/// one, else the quick one.
pub fn chosen_tables(root: &Path, data: &Path) -> Result<BTreeMap<String, Table>> {
    let analyses: Vec<Analysis> =
        Scale::ALL.iter().map(|&s| crate::report::analyse(root, data, s)).collect::<Result<_>>()?;
    Ok(chosen_of(&analyses))
}

/// [`chosen_tables`] from analyses already made (one a scale): per table,
/// the one of the first scale in [`Scale::PREFERRED`] that has it, the rule
/// [`dataset::best_run`] and `main.tex`'s `\wbtable` follow.
pub fn chosen_of(analyses: &[Analysis]) -> BTreeMap<String, Table> {
    let mut out = BTreeMap::new();
    for scale in Scale::PREFERRED {
        for t in analyses.iter().filter(|a| a.scale == scale).flat_map(|a| &a.tables) {
            out.entry(t.name.to_string()).or_insert_with(|| t.clone());
        }
    }
    out
}

/// The headline of `mac`'s cell ([`tables::TableCell::text`]), or `None` if its
/// table or row is missing.
pub fn cell(tables: &BTreeMap<String, Table>, mac: &Macro) -> Option<String> {
    let t = tables.get(mac.table)?;
    let col = t.header.iter().position(|h| *h == mac.column)?;
    // A row is found by its cells' keys (the registered name, the payload
    // in bytes, the instruction set), never by how they are rendered.
    let key = |c: Option<&tables::TableCell>| c.and_then(|c| c.key.clone());
    let (name, payload) = (mac.row.0.to_string(), mac.row.1.to_string());
    let cpu_col = t.header.iter().position(|h| *h == TARGET_CPU);
    let cpu = mac.cpu.unwrap_or(variants::REFERENCE.label);
    // A table whose rows one key names (a build stage) has no second key:
    // its macros name payload 0.
    let row = t.rows.iter().find(|r| {
        key(r.first()) == Some(name.clone())
            && match key(r.get(1)) {
                Some(k) => k == payload,
                None => mac.row.1 == 0,
            }
            && match cpu_col {
                Some(i) => key(r.get(i)).is_some_and(|c| c == cpu),
                None => mac.cpu.is_none(),
            }
    })?;
    Some(row.get(col)?.text.clone())
}

/// Whether `mac` names a build its table has no rows for (a run that did not build it):
/// an instruction set, or a build stage its rows are named by (the quick
/// scale builds two of the five).
fn build_not_run(tables: &BTreeMap<String, Table>, mac: &Macro) -> bool {
    if variants::get(mac.row.0).is_some() {
        let Some(t) = tables.get(mac.table) else { return true };
        return !t.rows.iter().any(|r| r.first().and_then(|c| c.key.as_deref()) == Some(mac.row.0));
    }
    let Some(cpu) = mac.cpu else { return false };
    let Some(t) = tables.get(mac.table) else { return true };
    match t.header.iter().position(|h| *h == TARGET_CPU) {
        Some(i) => !t.rows.iter().any(|r| r.get(i).and_then(|c| c.key.as_deref()) == Some(cpu)),
        None => true,
    }
}

/// Writes `paper/generated/macros.tex`: every [`MACROS`] entry, the machine
/// facts, and the engine-alone figures; a missing value is `\notmeasured{…}`.
pub fn write_macros(root: &Path, data: &Path) -> Result<PathBuf> {
    write_macros_of(root, data, chosen_tables(root, data)?)
}

/// [`write_macros`] from the tables the paper shows ([`chosen_of`]).
pub fn write_macros_of(root: &Path, data: &Path, tables: BTreeMap<String, Table>) -> Result<PathBuf> {
    let mut s = String::from("% Generated by `workbench paper` (and `workbench tables`) from data/; do not edit.\n");
    for (name, t) in &tables {
        s += &format!("% {name}: {}\n", t.source);
    }
    let mut def = |name: &str, value: Option<String>, what: &str| {
        let body = match value {
            Some(v) => tables::tex_escape(&v),
            None => format!("\\notmeasured{{{}}}", tables::tex_escape(what)),
        };
        s += &format!("\\newcommand{{\\{name}}}{{{body}}}\n");
    };
    for mac in MACROS {
        let value = cell(&tables, mac);
        if value.is_none() && tables.contains_key(mac.table) && !build_not_run(&tables, mac) {
            // A renamed header or label must not turn a number into \notmeasured unseen.
            anyhow::bail!(
                "macro \\{}: table {} has no row {} / {} or no column {:?} (renamed?); see paper::MACROS",
                mac.name,
                mac.table,
                mac.row.0,
                mac.row.1,
                mac.column
            );
        }
        def(mac.name, value, mac.table);
    }
    // The engine alone (datastore-queries), at the scale its table shows.
    let dq = tables.get(crate::report::datastore_queries::REPORT.name);
    let every = crate::report::datastore_queries::threads_label(0);
    let dq_cell = |query: &str, col: &str| -> Option<String> {
        let t = dq?;
        let c = t.header.iter().position(|h| *h == col)?;
        let row = t
            .rows
            .iter()
            .find(|r| r.first().map(|c| c.text.as_str()) == Some(query) && r.get(1).map(|c| &c.text) == Some(&every))?;
        Some(row.get(c)?.text.clone())
    };
    let dq_rows = dq_run(data)?.and_then(|r| crate::report::datastore_queries::table_rows(&r).ok().flatten());
    def("dsRows", dq_rows.map(fmt::thousands), "datastore-queries");
    def("dsAggMs", dq_cell("group-by-category", "Median (ms)"), "datastore-queries");
    def("dsTopMs", dq_cell("top-20-users", "Median (ms)"), "datastore-queries");
    def("dsFilterMs", dq_cell("filtered-count", "Median (ms)"), "datastore-queries");
    def("dsPeakRss", dq_cell("group-by-category", "Peak RSS"), "datastore-queries");
    // The claims audit's verdicts, counted (what the abstract says of it).
    // (A tree without paper/claims.toml has them \notmeasured.)
    let claims_file = root.join("paper/claims.toml");
    let audit = match claims_file.exists() {
        true => Some(claims::audit(&claims::load(&claims_file)?, root, data)?),
        false => None,
    };
    let results = audit.as_ref().map_or(&[][..], |a| &a.claims[..]);
    let count = |label: Option<&str>| {
        audit.as_ref()?;
        Some(results.iter().filter(|c| label.is_none_or(|l| c.verdict.label() == l)).count().to_string())
    };
    def("claimsTotal", count(None), "claims");
    def("claimsReproduced", count(Some("reproduced")), "claims");
    def("claimsNotReproduced", count(Some("not reproduced")), "claims");
    def("claimsNotComparable", count(Some("not comparable")), "claims");
    def("claimsNotMeasured", count(Some("not yet measured")), "claims");
    // The verdicts the abstract names, by claim id.
    for (id, name) in [
        ("zap-enc", "zapEncVerdict"),
        ("zap-dec", "zapDecVerdict"),
        ("ds-pgo-halves", "pgoHalvesVerdict"),
        ("ds-pgo-via-text", "pgoTextVerdict"),
    ] {
        let verdict = results.iter().find(|c| c.spec.id == id).map(|c| c.verdict.label().to_string());
        def(name, verdict, "claims");
    }
    // Ours for the claims the text quotes: a ratio (×) and a share (per cent).
    let ours = |id: &str| results.iter().find(|c| c.spec.id == id).and_then(|c| c.ours);
    def("pgoHalvesOurs", ours("ds-pgo-halves").map(|v| format!("{v:.2}×")), "claims");
    let paper = |id: &str| results.iter().find(|c| c.spec.id == id).map(|c| c.spec.value);
    def("pgoHalvesPaper", paper("ds-pgo-halves").map(|v| format!("{v:.2}×")), "claims");
    def("pgoTextShare", ours("ds-pgo-via-text").map(|v| format!("{:.0} %", 100.0 * v)), "claims");
    // The instruction sets the codec-speed table's builds are named by.
    def("cpuBaseline", Some(variants::BASELINE.label.into()), "variants");
    def("cpuVThree", Some(variants::REFERENCE.label.into()), "variants");
    let path = root.join("paper/generated/macros.tex");
    std::fs::create_dir_all(path.parent().expect("has a parent"))
        .with_context(|| format!("creating {}", path.display()))?;
    dataset::write_atomic(&path, s.as_bytes())?;
    Ok(path)
}

/// `paper/generated/provenance.{tex,md}`: every dataset the paper reads (per
/// dataset, the scale [`chosen_of`] picks), with its revision, date,
/// machine and freshness, each from its own manifest.
pub fn write_provenance_of(root: &Path, analyses: &[Analysis]) -> Result<Vec<PathBuf>> {
    let mut rows: Vec<[String; 6]> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for scale in Scale::PREFERRED {
        let Some(a) = analyses.iter().find(|a| a.scale == scale) else { continue };
        for (r, dir, run) in a.runs() {
            if !seen.insert(r.dataset().to_string()) {
                continue;
            }
            let m = &run.manifest;
            let shown = a.shown(dir).map_or("unknown".to_string(), |s| {
                if s.is_fresh() {
                    "fresh".into()
                } else {
                    format!("{}: {}", s.word(), s.why())
                }
            });
            // The certification goes with the freshness (a column that
            // wraps), so the revision column stays seven digits wide.
            let shown = match m.certified.last() {
                Some(c) => format!("{shown}; certified at {}", c.git_revision.chars().take(7).collect::<String>()),
                None => shown,
            };
            rows.push([
                r.dataset().to_string(),
                scale.to_string(),
                m.git_revision.chars().take(7).collect(),
                m.date.get(..10).unwrap_or(&m.date).to_string(),
                format!("{} ({} cores)", m.cpu_model, m.cores),
                shown,
            ]);
        }
    }
    rows.sort();
    let fresh = rows.iter().filter(|r| r[5] == "fresh" || r[5].starts_with("fresh; ")).count();
    let mut tex = String::from("% Generated by `workbench paper` from data/ (each dataset's manifest); do not edit.\n");
    tex += &claims::longtable_head(
        // Within the text width: the four short columns take about half of
        // it (the longest dataset name is 28 characters), the two that wrap the rest.
        "@{}llll>{\\raggedright\\arraybackslash}p{0.14\\textwidth}>{\\raggedright\\arraybackslash}p{0.2\\textwidth}@{}",
        &format!(
            "Every dataset the paper reads: its scale, revision, date and machine, and whether the code at this \
             revision would still measure it the same ({fresh} of {} fresh).",
            rows.len()
        ),
        "tab:provenance",
        &["Dataset", "Scale", "Revision", "Date", "Machine", "Freshness"],
    );
    let mut md = format!("{fresh} of {} datasets the paper reads are fresh.\n\n| dataset | scale | revision | date | machine | freshness |\n|---|---|---|---|---|---|\n", rows.len());
    for r in &rows {
        // A path among the inputs (`src:workbench/…/sampling_accuracy.rs`)
        // is one word to LaTeX: it may break after each slash, or it runs
        // past the margin.
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let t = tables::tex_escape(c);
                if i == 5 {
                    t.replace('/', "/\\allowbreak{}")
                } else {
                    t
                }
            })
            .collect();
        tex += &format!("{} \\\\\n", cells.join(" & "));
        md += &format!("| {} |\n", r.join(" | "));
    }
    tex += "\\bottomrule\n\\end{longtable}\n";
    let dir = root.join("paper/generated");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (t, m) = (dir.join("provenance.tex"), dir.join("provenance.md"));
    dataset::write_atomic(&t, tex.as_bytes())?;
    dataset::write_atomic(&m, md.as_bytes())?;
    Ok(vec![t, m])
}

/// `paper/generated/determinism.{tex,md}`: the allocation gate's
/// determinism map (which counts repeat exactly), from its committed baseline.
pub fn write_determinism(root: &Path) -> Result<Vec<PathBuf>> {
    let map = crate::gate::map::of(&crate::gate::baseline::Baseline::load(root)?);
    let dir = root.join("paper/generated");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (tex, md) = (dir.join("determinism.tex"), dir.join("determinism.md"));
    dataset::write_atomic(&tex, map.to_latex().as_bytes())?;
    dataset::write_atomic(&md, map.to_markdown().as_bytes())?;
    Ok(vec![tex, md])
}

/// The newest datastore-queries run, full scale preferred (as its table).
fn dq_run(data: &Path) -> Result<Option<dataset::Run>> {
    dataset::best_run(data, crate::report::datastore_queries::REPORT.dataset())?
        .map(|(_, d)| dataset::load_run(&d))
        .transpose()
}

/// Builds `paper/build/main.pdf`: converts every figure SVG to PDF
/// (rsvg-convert), runs latexmk, and checks the log. Returns the PDF.
pub fn build(root: &Path) -> Result<PathBuf> {
    let paper = root.join("paper");
    let out = paper.join("build");
    for scale in Scale::ALL {
        let (src, dst) = (scale.dir(root, "figures"), scale.dir(&out, "figures"));
        std::fs::create_dir_all(&dst).with_context(|| format!("creating {}", dst.display()))?;
        // Stale conversions would outlive their SVG: start from none.
        for e in std::fs::read_dir(&dst).with_context(|| format!("listing {}", dst.display()))?.flatten() {
            if e.path().extension().is_some_and(|x| x == "pdf") {
                std::fs::remove_file(e.path()).with_context(|| format!("removing {}", e.path().display()))?;
            }
        }
        let Ok(entries) = std::fs::read_dir(&src) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "svg") {
                let pdf = dst.join(p.with_extension("pdf").file_name().expect("a file name"));
                let st = Command::new("rsvg-convert")
                    .args(["-f", "pdf", "-o"])
                    .arg(&pdf)
                    .arg(&p)
                    .status()
                    .context("running rsvg-convert (Debian: librsvg2-bin; scripts/setup.sh installs it)")?;
                if !st.success() {
                    bail!("rsvg-convert failed on {} ({st})", p.display());
                }
            }
        }
    }
    let log = out.join("latexmk.log");
    let st = Command::new("latexmk")
        .current_dir(&paper)
        .args(["-pdf", "-interaction=nonstopmode", "-halt-on-error", "-outdir=build", "main.tex"])
        .stdout(std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?)
        .stderr(std::process::Stdio::inherit())
        .status()
        .context("running latexmk (Debian: latexmk, texlive-latex-extra; scripts/setup.sh installs them)")?;
    if !st.success() {
        bail!("latexmk failed ({st}); see {} and {}", log.display(), out.join("main.log").display());
    }
    check_log(&out.join("main.log"))?;
    Ok(out.join("main.pdf"))
}

/// Fails on an undefined reference or citation, or a missing file, in a
/// LaTeX log.
pub fn check_log(log: &Path) -> Result<()> {
    let text = std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("undefined")
                && (l.contains("Reference") || l.contains("Citation") || l.contains("control sequence"))
                || l.contains("File `") && l.contains("not found")
                || l.starts_with("! ")
        })
        .collect();
    if !bad.is_empty() {
        bail!("{}: {}", log.display(), bad.join("; "));
    }
    Ok(())
}

/// Digits in hand-written LaTeX outside comments, macro names, labels and
/// references, citations, file names and lengths: each one a number typed by
/// hand. Returns `file:line: text` for each offending line.
pub fn hand_written_digits(paper: &Path) -> Result<Vec<String>> {
    let mut files = vec![paper.join("main.tex")];
    let sections = paper.join("sections");
    if sections.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&sections)
            .with_context(|| format!("listing {}", sections.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "tex"))
            .collect();
        v.sort();
        files.extend(v);
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        for (i, line) in text.lines().enumerate() {
            let cleaned = strip_allowed(line);
            if cleaned.chars().any(|c| c.is_ascii_digit()) {
                out.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    Ok(out)
}

/// `line` without what may hold digits: a comment, the arguments of
/// referencing and file commands, and LaTeX lengths (`0.5\textwidth`, `2pt`).
fn strip_allowed(line: &str) -> String {
    let line = match line.find('%') {
        Some(i) if !line[..i].ends_with('\\') => &line[..i],
        _ => line,
    };
    let mut s = line.to_string();
    for cmd in [
        "\\label",
        "\\ref",
        "\\cref",
        "\\Cref",
        "\\eqref",
        "\\cite",
        "\\citep",
        "\\citet",
        "\\input",
        "\\include",
        "\\wbtable",
        "\\wbfigure",
        "\\includegraphics",
        "\\usepackage",
        "\\documentclass",
        "\\notmeasured",
        "\\DeclareUnicodeCharacter",
        "\\newcommand",
    ] {
        while let Some(at) = s.find(&format!("{cmd}{{")).or_else(|| s.find(&format!("{cmd}["))) {
            // Drop the command with its optional and mandatory arguments.
            let mut end = at + cmd.len();
            let bytes = s.as_bytes();
            while end < s.len() && (bytes[end] == b'{' || bytes[end] == b'[') {
                let close = if bytes[end] == b'{' { '}' } else { ']' };
                end = s[end..].find(close).map_or(s.len(), |j| end + j + 1);
            }
            s.replace_range(at..end, " ");
        }
    }
    // Lengths: a number directly followed by a unit or a length command;
    // macro parameters (`#1`).
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '#' && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) {
            i += 2;
            continue;
        }
        if chars[i].is_ascii_digit() || (chars[i] == '.' && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit())) {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let rest: String = chars[i..].iter().take(12).collect();
            let unit =
                ["pt", "em", "ex", "cm", "mm", "in", "\\textwidth", "\\linewidth", "\\columnwidth", "\\baselineskip"]
                    .iter()
                    .any(|u| rest.starts_with(u));
            if !unit {
                out.extend(&chars[start..i]);
            }
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_macro_whose_row_or_column_is_gone_is_an_error_not_notmeasured() {
        let tmp = std::env::temp_dir().join(format!("wb-macros-{}", std::process::id()));
        let table = Table {
            name: "alloc-profile",
            caption: String::new(),
            method: String::new(),
            header: vec!["Protocol", "Payload", "Allocs (encode)"],
            rows: vec![vec!["ZAP".into(), "0 B".into(), "0".into()]],
            source: String::new(),
        };
        let tables = BTreeMap::from([("alloc-profile".to_string(), table)]);
        let e = write_macros_of(&tmp, &tmp.join("no-data"), tables).unwrap_err().to_string();
        assert!(e.contains("zapEncAllocs") && e.contains("Allocs (enc)"), "{e}");
        // Without the table at all the macro is \notmeasured (no dataset yet).
        let path = write_macros_of(&tmp, &tmp.join("no-data"), BTreeMap::new()).unwrap();
        assert!(std::fs::read_to_string(path).unwrap().contains("\\newcommand{\\zapEncAllocs}{\\notmeasured"));
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    use super::*;

    #[test]
    fn the_committed_paper_types_no_number() {
        let found = hand_written_digits(&crate::default_root().join("paper")).unwrap();
        assert!(
            found.is_empty(),
            "numbers typed by hand (use a macro from generated/macros.tex):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn every_prose_macro_is_used_and_defined_once() {
        let root = crate::default_root().join("paper");
        let mut prose = String::new();
        for f in std::fs::read_dir(root.join("sections")).unwrap().flatten() {
            prose += &std::fs::read_to_string(f.path()).unwrap();
        }
        let mut names: Vec<&str> = MACROS.iter().map(|m| m.name).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a macro name is defined twice");
        for m in MACROS {
            assert!(m.name.chars().all(|c| c.is_ascii_alphabetic()), "{}: LaTeX macro names are letters only", m.name);
            assert!(
                prose.contains(&format!("\\{}{{}}", m.name)),
                "{} is generated but never used in paper/sections",
                m.name
            );
        }
    }

    #[test]
    fn digits_outside_allowed_places_are_found() {
        let kept = strip_allowed(r"see Table~\ref{tab:alloc-profile} and \cite{zap2025}");
        assert!(kept.starts_with("see Table~") && kept.trim_end().ends_with("and") && !kept.contains("2025"), "{kept}");
        assert!(!strip_allowed(r"\includegraphics[width=0.9\textwidth]{build/figures/heap-growth.pdf}").contains('9'));
        assert!(!strip_allowed(r"\vspace{2pt} text").chars().any(|c| c.is_ascii_digit()));
        assert!(strip_allowed(r"ZAP allocates 0 times").contains('0'));
        assert!(strip_allowed(r"ZAP allocates 0 times % a comment with 3").contains('0'));
        assert!(!strip_allowed(r"text % a comment with 3").contains('3'));
        assert!(strip_allowed(r"\zapEncAllocs{} and 64 bytes").contains("64"));
    }
}
