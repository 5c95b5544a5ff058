//! codec-speed: encode and decode time per message of each codec, beside
//! memcpy (the floor) and ZAP measured against itself (the noise).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{self, dash, median_ratio, opt_count, ratio, row, source_of, stats_of, Table, TableCell};
use crate::spec::variants;
use anyhow::Result;
use records::subject::{CodecSpeed, Implementation, Op};
use registry::{self, display_name};
use std::collections::HashMap;

/// Per codec and payload, per implementation and operation: `(ns_per_op,
/// wire_bytes)` of every round, in the order written (ratios pair rounds by
/// their place).
pub(crate) type Timings<'a> = HashMap<(&'a str, u64, Implementation, Op), Vec<(f64, u64)>>;

pub(crate) fn timings<'a>(run: &'a Run, variant: Option<&str>) -> Result<Timings<'a>> {
    let mut out: Timings = HashMap::new();
    for r in run.each::<CodecSpeed>() {
        let r = r?;
        if variant.is_some_and(|v| v != r.cell.variant) {
            continue;
        }
        let key = (r.cell.codec.unwrap_or(""), r.cell.payload(), r.record.implementation, r.record.op);
        out.entry(key).or_default().push((r.record.ns_per_op, r.record.wire_bytes));
    }
    Ok(out)
}

/// The column naming a row's instruction set, present when a run has more than one.
pub const TARGET_CPU: &str = "Target CPU";

pub const REPORT: Report =
    Report::of::<records::subject::CodecSpeed>(registry::Experiment::CodecSpeed, codec_speed, None);

/// Encode/decode speed per codec, with ratios to ZAP and memcpy from the same rounds.
pub fn codec_speed(run: &Run) -> Result<Table> {
    let spec = &run.manifest.spec;
    let variants = spec.variants_at(run.manifest.scale);
    let several = variants.len() > 1;
    let by_variant: Vec<(&str, Timings)> =
        variants.iter().map(|v| Ok((v.as_str(), timings(run, Some(v))?))).collect::<Result<_>>()?;
    let mut rows = Vec::new();
    let mut rounds = 0;
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            for (variant, all) in &by_variant {
                let pick = |i: Implementation, op: Op| {
                    all.get(&(codec.as_str(), payload as u64, i, op)).map_or(&[][..], Vec::as_slice)
                };
                let enc = pick(Implementation::Codec, Op::Encode);
                rounds = rounds.max(enc.len());
                let ns = |i, op| -> Vec<f64> { pick(i, op).iter().map(|t| t.0).collect() };
                let e = ns(Implementation::Codec, Op::Encode);
                let d = ns(Implementation::Codec, Op::Decode);
                let (ze, zd) = (ns(Implementation::Zap, Op::Encode), ns(Implementation::Zap, Op::Decode));
                let m = ns(Implementation::Memcpy, Op::Copy);
                let wire: Vec<f64> = enc.iter().map(|t| t.1 as f64).collect();
                let ns_dist = |s: Option<(f64, f64, f64)>| match s {
                    Some((med, min, max)) => TableCell::ranged(fmt::sig3(med), fmt::sig3(min), fmt::sig3(max)),
                    None => dash().into(),
                };
                let mut r = row![
                    crate::report::tables::TableCell::keyed(display_name(codec), codec),
                    crate::report::tables::TableCell::keyed(fmt::bytes(payload as f64), payload),
                    opt_count(stats_of(&wire).map(|s| s.0)),
                    ns_dist(stats_of(&e)),
                    ns_dist(stats_of(&d)),
                    ratio(median_ratio(&e, &ze)?),
                    ratio(median_ratio(&d, &zd)?),
                    ratio(median_ratio(&e, &m)?),
                    ratio(median_ratio(&d, &m)?),
                ];
                if several {
                    let cpu = run.manifest.target_cpu(variant);
                    r.insert(2, crate::report::tables::TableCell::keyed(cpu, cpu));
                }
                rows.push(r);
            }
        }
    }
    let mut header = vec![
        "Protocol",
        "Payload",
        "Wire bytes",
        crate::report::tables::col::ENCODE_NS,
        crate::report::tables::col::DECODE_NS,
        crate::report::tables::col::ENC_VS_ZAP,
        crate::report::tables::col::DEC_VS_ZAP,
        crate::report::tables::col::ENC_VS_MEMCPY,
        crate::report::tables::col::DEC_VS_MEMCPY,
    ];
    let builds = if several {
        header.insert(2, TARGET_CPU);
        let named: Vec<String> = variants
            .iter()
            .map(|v| {
                let how = run.manifest.builds.get(v).cloned().unwrap_or_else(|| variants::describe(v));
                format!("{} ({how})", run.manifest.target_cpu(v))
            })
            .collect();
        format!(
            " Each codec is timed in {} builds of the same code, named by the instruction set it was compiled \
             for: {}; the memcpy is glibc's, which picks its code for the CPU at run time in every build.",
            variants.len(),
            named.join("; ")
        )
    } else {
        String::new()
    };
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "codec-speed",
        caption: format!(
            "Encode and decode time per message, ns/op: median [min, max] over {rounds} timed rounds of {} operations \
             each ({} repetition(s)), with each codec's ratio to ZAP and to a memcpy of its encoded bytes.",
            tables::messages(s, &spec.payloads),
            s.repetitions,
        ),
        method: format!(
            "In every round the codec, ZAP and a memcpy of the codec's encoded bytes run back \
             to back in one process after an untimed lead-in, in one of six orders, so that each is first, \
             between the others and last equally often. Every pair of rounds builds all instances afresh at a new \
             placement (the source votes slide through memory, the instances sit behind a padding that grows {} B \
             a step, the memcpy's destination slides by as much, and the instances' own structs move to another \
             heap slot), because a copy's speed depends on where its buffers land relative to each other (4 KiB \
             aliasing); each process starts its sweep at a placement of its own, and the pair's second round is \
             the first's mirror, the codec's and ZAP's roles swapped, so that both see the same placements. Ratios are \
             medians of the per-round ratios. The ZAP row's \"vs ZAP\" ratios measure ZAP against \
             itself (an A/A test): they are the noise floor of every ratio in the table. Every codec's encode and \
             decode carries an inline hint; the compiler inlines it into the timing loop where it is small enough \
             (ZAP's encode, not its decode), as the memcpy is one call. System allocator, {} \
             profile; a shared 2-core machine, so read spreads before differences.{builds}",
            records::subject::PAD_STEP,
            run.manifest.profile
        ),
        header,
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};

    #[test]
    fn ratios_pair_each_round_with_its_own_zap_and_memcpy() {
        let mut rows = Vec::new();
        // Two rounds: the codec is 2× ZAP and 4× memcpy in each, though the
        // machine ran twice as fast in the second.
        for (round, scale) in [(0, 1.0), (1, 0.5)] {
            let rec = |implementation, op, ns: f64| CodecSpeed {
                round,
                implementation,
                op,
                ns_per_op: ns * scale,
                ops: 1000,
                wire_bytes: 200,
                window: 0,
                pad: 0,
            };
            let c = || subject("json-rpc", 0, "system", 0);
            rows.push((c(), rec(Implementation::Codec, Op::Encode, 40.0)));
            rows.push((c(), rec(Implementation::Codec, Op::Decode, 80.0)));
            rows.push((c(), rec(Implementation::Zap, Op::Encode, 20.0)));
            rows.push((c(), rec(Implementation::Zap, Op::Decode, 20.0)));
            rows.push((c(), rec(Implementation::Memcpy, Op::Copy, 10.0)));
        }
        let t = codec_speed(&run("codec-speed", None, &rows)).unwrap();
        let key = [display_name("json-rpc"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "Wire bytes"), fmt::count(200.0));
        assert_eq!(cell(&t, &key, "Encode ns/op"), fmt::sig3(30.0));
        assert_eq!(cell(&t, &key, "Enc vs ZAP"), format!("{}×", fmt::sig3(2.0)));
        assert_eq!(cell(&t, &key, "Dec vs ZAP"), format!("{}×", fmt::sig3(4.0)));
        assert_eq!(cell(&t, &key, "Enc vs memcpy"), format!("{}×", fmt::sig3(4.0)));
    }

    fn two_builds(reference: &str, baseline: &str) -> Run {
        let mut rows = Vec::new();
        // ZAP at 0 B: 1.5× memcpy in the reference build, 3× in the baseline one.
        for (variant, zap) in [(reference, 15.0), (baseline, 30.0)] {
            for (implementation, op, ns) in [
                (Implementation::Codec, Op::Encode, zap),
                (Implementation::Codec, Op::Decode, zap),
                (Implementation::Zap, Op::Encode, zap),
                (Implementation::Zap, Op::Decode, zap),
                (Implementation::Memcpy, Op::Copy, 10.0),
            ] {
                let rec = CodecSpeed {
                    round: 0,
                    implementation,
                    op,
                    ns_per_op: ns,
                    ops: 1,
                    wire_bytes: 176,
                    window: 0,
                    pad: 0,
                };
                rows.push((subject("zap", 0, variant, 0), rec));
            }
        }
        let mut r = run("codec-speed", None, &rows);
        r.manifest.spec.codecs = vec!["zap".into()];
        r.manifest.spec.payloads = vec![0];
        r.manifest.spec.quick.variants = Some(vec![reference.into(), baseline.into()]);
        r
    }

    #[test]
    fn two_builds_give_a_row_each_and_the_paper_picks_by_instruction_set() {
        let mut r = two_builds("system", "x86-64");
        r.manifest.target_cpus = [("system", "x86-64-v3"), ("x86-64", "x86-64")]
            .into_iter()
            .map(|(v, c)| (v.to_string(), c.to_string()))
            .collect();
        r.manifest.builds =
            [("system", "RUSTFLAGS=-C target-cpu=x86-64-v3"), ("x86-64", "RUSTFLAGS=-C target-cpu=x86-64")]
                .into_iter()
                .map(|(v, c)| (v.to_string(), c.to_string()))
                .collect();
        let t = codec_speed(&r).unwrap();
        assert_eq!(t.rows.len(), 2);
        let zap = display_name("zap");
        let at = |cpu: &str| cell(&t, &[zap.as_str(), &fmt::bytes(0.0), cpu], "Enc vs memcpy");
        assert_eq!(at(variants::BASELINE.label), format!("{}×", fmt::sig3(3.0)));
        assert_eq!(at(variants::REFERENCE.label), format!("{}×", fmt::sig3(1.5)));
        assert!(t.method.contains("target-cpu=x86-64-v3"), "{}", t.method);
        assert!(t.source.contains("built for x86-64-v3, x86-64"), "{}", t.source);

        let tables = [(t.name.to_string(), t)].into_iter().collect();
        let by_name = |n: &str| crate::paper::MACROS.iter().find(|m| m.name == n).unwrap();
        let value = |n: &str| crate::paper::cell(&tables, by_name(n));
        assert_eq!(value("zapBareEncVsMemcpy"), Some(format!("{}×", fmt::sig3(1.5))));
        assert_eq!(value("zapBareEncVsMemcpyBaseline"), Some(format!("{}×", fmt::sig3(3.0))));
    }

    #[test]
    fn a_run_from_before_the_reference_build_labels_its_builds_as_they_were() {
        // Then `system` was the baseline build and `x86-64-v3` a variant of its own.
        let r = two_builds("x86-64-v3", "system");
        assert!(r.manifest.target_cpus.is_empty());
        let t = codec_speed(&r).unwrap();
        let zap = display_name("zap");
        let at = |cpu: &str| cell(&t, &[zap.as_str(), &fmt::bytes(0.0), cpu], "Enc vs memcpy");
        assert_eq!(at("x86-64"), format!("{}×", fmt::sig3(3.0)));
        assert_eq!(at("x86-64-v3"), format!("{}×", fmt::sig3(1.5)));
    }
}
