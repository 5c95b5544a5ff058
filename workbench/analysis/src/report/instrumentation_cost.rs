//! instrumentation-cost: how much slower each instrumented build runs the
//! codec-speed cells than the system build, from one run.

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{self, dash, ratio, row, source_of, stats_of, Table};
use anyhow::Result;
use records::subject::{Implementation, Op};
use registry::{self, display_name};

pub const REPORT: Report =
    Report::of::<records::subject::CodecSpeed>(registry::Experiment::InstrumentationCost, instrumentation_cost, None);

/// What each instrumented build costs in time: the codec-speed cells run in
/// every build from one run (`experiments/instrumentation-cost.toml`).
pub fn instrumentation_cost(run: &Run) -> Result<Table> {
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    let variants = spec.variants_at(run.manifest.scale);
    let by_variant: Vec<(&str, super::codec_speed::Timings)> =
        variants.iter().map(|v| Ok((v.as_str(), super::codec_speed::timings(run, Some(v))?))).collect::<Result<_>>()?;
    // Encode + decode medians of one implementation in one build.
    let per_msg = |codec: &str, payload: usize, variant: &str, implementation| -> Result<Option<f64>> {
        let Some((_, t)) = by_variant.iter().find(|(v, _)| *v == variant) else { return Ok(None) };
        let median = |op| {
            let ns: Vec<f64> = t
                .get(&(codec, payload as u64, implementation, op))
                .map_or(Vec::new(), |v| v.iter().map(|x| x.0).collect());
            stats_of(&ns).map(|s| s.0)
        };
        Ok(median(Op::Encode).zip(median(Op::Decode)).map(|(e, d)| e + d))
    };
    let r = |a: Option<f64>, b: Option<f64>| ratio(a.zip(b).map(|(a, b)| a / b));
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let t = |v: &str| per_msg(codec, payload, v, Implementation::Codec);
            let (sys, plain, stats, dhat) = (t("system")?, t("jemalloc-plain")?, t("jemalloc")?, t("dhat")?);
            let (events, prof) = (t("events")?, t("jemalloc-prof")?);
            // ZAP allocates nothing, so its ratio across builds is the noise of the comparison.
            let z = |v: &str| per_msg(codec, payload, v, Implementation::Zap);
            rows.push(row![
                display_name(codec),
                fmt::bytes(payload as f64),
                sys.map_or_else(dash, fmt::sig3),
                r(plain, sys),
                r(stats, plain),
                r(stats, sys),
                r(dhat, sys),
                r(events, dhat),
                r(prof, plain),
                r(z("jemalloc")?, z("system")?),
            ]);
        }
    }
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "instrumentation-cost",
        caption: format!(
            "What each build costs in time: encode + decode ns per message (medians over rounds of {} operations, \
             {} repetition(s)) of the codec-speed cells run in every build in one run, cells interleaved, as \
             ratios.",
            tables::messages(s, &spec.payloads),
            s.repetitions,
        ),
        method: format!(
            "jemalloc ÷ system is the allocator change alone (jemalloc with its statistics compiled \
             out); stats ÷ no stats is the price of jemalloc's statistics (the probe's jemalloc build); dhat ÷ \
             system is the counting build, never used for timings; events ÷ dhat prices the heap timeline's \
             build (every allocation and free by site and operation) against dhat's; sampling ÷ no stats prices jemalloc's \
             heap profiler at its default interval (512 KiB, the sampled profile dumped after the timed rounds) \
             against jemalloc alone. The last column times ZAP, which allocates \
             nothing, in the jemalloc-stats build against the system build of the same cells: the noise of \
             these ratios. Built with the {} profile.",
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
            "events ÷ dhat",
            "sampling ÷ no stats",
            "ZAP: stats ÷ system",
        ],
        rows,
        source: source_of(run),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};
    use records::subject::CodecSpeed;

    #[test]
    fn each_build_is_priced_against_the_one_below_it() {
        let mut rows = Vec::new();
        for (variant, ns) in [
            ("system", 10.0),
            ("jemalloc-plain", 11.0),
            ("jemalloc", 22.0),
            ("dhat", 100.0),
            ("events", 110.0),
            ("jemalloc-prof", 13.2),
        ] {
            for (implementation, op) in [
                (Implementation::Codec, Op::Encode),
                (Implementation::Codec, Op::Decode),
                (Implementation::Zap, Op::Encode),
                (Implementation::Zap, Op::Decode),
            ] {
                let rec = CodecSpeed {
                    round: 0,
                    implementation,
                    op,
                    ns_per_op: ns,
                    ops: 1,
                    wire_bytes: 1,
                    window: 0,
                    pad: 0,
                };
                rows.push((subject("protobuf", 64, variant, 0), rec));
            }
        }
        let t = instrumentation_cost(&run("instrumentation-cost", None, &rows)).unwrap();
        let key = [display_name("protobuf"), fmt::bytes(64.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        let col = |i: usize| cell(&t, &key, t.header[i]);
        assert_eq!(col(2), fmt::sig3(20.0));
        assert_eq!(col(3), format!("{}×", fmt::sig3(1.1)));
        assert_eq!(col(4), format!("{}×", fmt::sig3(2.0)));
        assert_eq!(col(6), format!("{}×", fmt::sig3(10.0)));
        assert_eq!(col(7), format!("{}×", fmt::sig3(1.1)));
        assert_eq!(col(8), format!("{}×", fmt::sig3(1.2)));
        assert_eq!(col(9), format!("{}×", fmt::sig3(2.2)));
    }
}
