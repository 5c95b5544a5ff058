//! alloc-profile: allocations per operation of each codec, encode and
//! decode apart, per payload (exact in the dhat build).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{self, dist, opt_bytes, opt_count, row, source_of, Acc, Table};
use anyhow::Result;
use records::subject::{AllocProfile, Phase};
use registry::{self, display_name};
use std::collections::HashMap;

pub const REPORT: Report =
    Report::of::<records::subject::AllocProfile>(registry::Experiment::AllocProfile, alloc_profile, None);

/// What the table shows of one cell's messages in one phase.
#[derive(Clone, Copy, Default)]
struct Counts {
    allocs: Acc,
    bytes: Acc,
}

/// The paper's first table: allocations per message, encode and decode.
pub fn alloc_profile(run: &Run) -> Result<Table> {
    let spec = &run.manifest.spec;
    // PERF: millions of rows: each cell keeps a summary of the two fields it shows.
    let mut cells: HashMap<(&str, u64, &str, Phase), Counts> = HashMap::new();
    for r in run.each::<AllocProfile>() {
        let r = r?;
        let key = (r.cell.codec.unwrap_or(""), r.cell.payload(), r.cell.variant, r.record.phase);
        let c = cells.entry(key).or_default();
        c.allocs.push(r.record.allocs);
        c.bytes.push(r.record.bytes);
    }
    let mut rows = Vec::new();
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let cell = |variant: &'static str, phase: Phase| -> Counts {
                cells.get(&(codec.as_str(), payload as u64, variant, phase)).copied().unwrap_or_default()
            };
            let bytes = |c: Counts| c.bytes.mean();
            let (enc, dec, rt) =
                (cell("dhat", Phase::Encode), cell("dhat", Phase::Decode), cell("dhat", Phase::Roundtrip));
            let (je_enc, je_dec) = (cell("jemalloc", Phase::Encode), cell("jemalloc", Phase::Decode));
            let bop = match (bytes(enc), bytes(dec)) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            let je_bop = match (bytes(je_enc), bytes(je_dec)) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            rows.push(row![
                crate::report::tables::TableCell::keyed(display_name(codec), codec),
                crate::report::tables::TableCell::keyed(fmt::bytes(payload as f64), payload),
                dist(enc.allocs.mean_stats()),
                dist(dec.allocs.mean_stats()),
                opt_bytes(bop),
                opt_count(rt.allocs.mean()),
                opt_bytes(bytes(rt)),
                opt_bytes(je_bop),
            ]);
        }
    }
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "alloc-profile",
        caption: format!(
            "Heap allocations per message: mean [min, max] over {} contiguous messages after {} warm-up, {} \
             repetition(s) (the mean, so periodic allocations count).",
            tables::messages(s, &spec.payloads),
            s.warmup,
            s.repetitions,
        ),
        method: format!(
            "Counts and B/op (encode+decode, requested bytes) from the dhat build; jemalloc B/op counts usable \
             (size-class) bytes on the thread. No GC column: Rust has no collector, and jemalloc's purges (on a \
             10 s decay timer) read 0 for every codec in runs this short (see the heap-growth method). Built with the {} profile.",
            run.manifest.profile
        ),
        header: vec![
            "Protocol",
            "Payload",
            crate::report::tables::col::ALLOCS_ENC,
            crate::report::tables::col::ALLOCS_DEC,
            crate::report::tables::col::B_OP,
            crate::report::tables::col::ALLOCS_RT,
            crate::report::tables::col::B_RT,
            "B/op (jemalloc)",
        ],
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};

    #[test]
    fn counts_are_means_per_phase_and_bytes_add_encode_and_decode() {
        let rec = |msg, phase, allocs, bytes| AllocProfile {
            msg,
            phase,
            wire_bytes: 9,
            allocs: Some(allocs),
            bytes: Some(bytes),
            bytes_freed: None,
        };
        let d = || subject("zap", 0, "dhat", 0);
        let rows = vec![
            (d(), rec(0, Phase::Encode, 0, 0)),
            (d(), rec(0, Phase::Decode, 2, 100)),
            (d(), rec(1, Phase::Decode, 4, 300)),
            (d(), rec(0, Phase::Roundtrip, 7, 50)),
            (subject("zap", 0, "jemalloc", 0), AllocProfile { allocs: None, ..rec(0, Phase::Encode, 0, 8) }),
            (subject("zap", 0, "jemalloc", 0), AllocProfile { allocs: None, ..rec(0, Phase::Decode, 0, 16) }),
        ];
        let t = alloc_profile(&run("alloc-profile", None, &rows)).unwrap();
        let key = [display_name("zap"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "Allocs (enc)"), "0");
        assert_eq!(cell(&t, &key, "Allocs (dec)"), fmt::count(3.0));
        assert_eq!(cell(&t, &key, "B/op"), fmt::bytes(200.0));
        assert_eq!(cell(&t, &key, "Allocs/RT"), fmt::count(7.0));
        assert_eq!(cell(&t, &key, "B/op (jemalloc)"), fmt::bytes(24.0));
        // A payload with no records shows dashes, not zeros.
        let other = [display_name("zap"), fmt::bytes(64.0)];
        assert_eq!(cell(&t, &[&other[0], &other[1]], "Allocs (enc)"), crate::report::tables::dash());
    }
}
