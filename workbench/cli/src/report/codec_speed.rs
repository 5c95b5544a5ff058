//! codec-speed: encode and decode time per message of each codec, beside
//! memcpy (the floor) and ZAP measured against itself (the noise).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{
    self, dash, display_name, floats, median, median_ratio, opt_count, ratio, row, select, source_of, stats, Cell,
    Table,
};
use anyhow::Result;
use polars::prelude::DataFrame;
use probe::registry;

pub const REPORT: Report = Report::of::<records::subject::CodecSpeed>(registry::CODEC_SPEED, codec_speed, None);

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
                Some((med, min, max)) => Cell::ranged(fmt::sig3(med), fmt::sig3(min), fmt::sig3(max)),
                None => dash().into(),
            };
            rows.push(row![
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
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "codec-speed",
        caption: format!(
            "Encode and decode time per message, ns/op: median [min, max] over {rounds} timed rounds of {} operations \
             each ({} repetition(s)). In every round the codec, ZAP and a memcpy of the codec's encoded bytes run back \
             to back in one process, in an order that alternates round by round (codec, ZAP, memcpy; memcpy, ZAP, \
             codec), after an untimed lead-in; every round builds all instances afresh at a new placement (the source \
             votes slide through memory, the instances sit behind a padding that grows {} B a round, and the instances' \
             own structs move to another heap slot each round), because a \
             copy's speed depends on where its buffers land relative to each other (4 KiB aliasing). Ratios are \
             medians of the per-round ratios. The ZAP row's \"vs ZAP\" ratios measure ZAP against \
             itself (an A/A test): they are the noise floor of every ratio in the table. System allocator, {} \
             profile; a shared 2-core machine, so read spreads before differences.",
            tables::messages(s, &spec.payloads),
            s.repetitions,
            records::subject::PAD_STEP,
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
