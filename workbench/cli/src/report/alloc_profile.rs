//! alloc-profile: allocations per operation of each codec, encode and
//! decode apart, per payload (exact in the dhat build).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{
    self, display_name, dist, mean, mean_stats, opt_bytes, opt_count, row, select, source_of, Table,
};
use anyhow::Result;
use probe::registry;

pub const REPORT: Report = Report::of::<records::subject::AllocProfile>(registry::ALLOC_PROFILE, alloc_profile, None);

/// The paper's first table: allocations per message, encode and decode.
pub fn alloc_profile(run: &Run) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for codec in &spec.codecs {
        // PERF: the codec's rows first, then each cell from those: every
        // `select` builds a mask over the frame it is given, and over the
        // whole frame (every codec) this table was most of `workbench
        // report`'s time (7 of 33 s on the committed data, 2026-12-03).
        let of_codec = select(df, &[("codec", codec)], &[])?;
        for &payload in &spec.payloads {
            let cell = |variant: &str, phase: &str| {
                select(&of_codec, &[("variant", variant), ("phase", phase)], &[("payload", payload as u64)])
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
            rows.push(row![
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
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "alloc-profile",
        caption: format!(
            "Heap allocations per message: mean [min, max] over {} contiguous messages after {} warm-up, {} \
             repetition(s) (the mean, so periodic allocations count). \
             Counts and B/op (encode+decode, requested bytes) from the dhat build; jemalloc B/op counts usable \
             (size-class) bytes on the thread. No GC column: Rust has no collector, and jemalloc's purges (on a \
             10 s decay timer) read 0 for every codec in runs this short (see the heap-growth caption). {} profile.",
            tables::messages(s, &spec.payloads),
            s.warmup,
            s.repetitions,
            run.manifest.profile
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
