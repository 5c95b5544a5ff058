//! The records of `subject`'s experiments (codecs and transport stacks).
//! Allocation fields are `None` where the build cannot count them (see
//! `probe`'s table of variants).

use serde::{Deserialize, Serialize};

/// The `[params]` of the transport round-trip experiments
/// (transport-alloc and the roundtrip-latency family).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RoundtripParams {
    /// The core the client and server threads run on; none = they float.
    pub pin_core: Option<usize>,
    /// Requests per second of the open loop (roundtrip-latency-open, which
    /// needs it).
    pub rate: Option<f64>,
}

/// alloc-profile: one message's cost in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AllocProfile {
    pub msg: u64,
    pub phase: Phase,
    /// Encoded request size in bytes (the same in every phase of a message).
    pub wire_bytes: u64,
    pub allocs: Option<u64>,
    pub bytes: Option<u64>,
    pub bytes_freed: Option<u64>,
}

/// What alloc-profile brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The client's encode of the request.
    Encode,
    /// The server's decode of it.
    Decode,
    /// Request and reply, each encoded and decoded.
    Roundtrip,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Encode, Phase::Decode, Phase::Roundtrip];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Encode => "encode",
            Phase::Decode => "decode",
            Phase::Roundtrip => "roundtrip",
        }
    }
}

/// The `[params]` of sampling-accuracy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct SamplingParams {
    /// The sampling intervals, each as log2 of the mean bytes between
    /// samples (jemalloc's `lg_prof_sample`; 0 samples every allocation,
    /// 19 is jemalloc's default of 512 KiB).
    pub intervals: Vec<u32>,
}

impl Default for SamplingParams {
    fn default() -> SamplingParams {
        SamplingParams { intervals: vec![0, 8, 12, 16, 19, 21] }
    }
}

/// sampling-accuracy: one heap profile of alloc-profile's workload, the
/// exact one (the dhat build: `lg_sample` none) or one sampled by jemalloc
/// at a mean interval of 2^`lg_sample` bytes, each from a process of its
/// own. Its totals; the per-site comparison of a sampled profile with the
/// exact one is read from the two traces (`trace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SamplingAccuracy {
    /// log2 of the mean bytes between samples; none: the exact profile.
    pub lg_sample: Option<u32>,
    /// Allocation calls from the probe's start to its end (estimated where
    /// sampled; none in a build that neither counts nor samples).
    pub allocs: Option<f64>,
    /// Bytes allocated: requested (exact) or usable, size-class rounded (sampled).
    pub bytes: Option<f64>,
    /// Bytes still live at the end.
    pub live_bytes: Option<f64>,
    /// Stacks in the sampled profile that hold a sample (none: exact).
    pub stacks: Option<u64>,
    /// The profile's file in the dataset's `traces/` directory.
    pub trace: Option<String>,
    /// The process's wall time, s: the workload, and where sampled the dump
    /// and its resolution too (the sampled profiles' processes run as many at
    /// a time as there are cores: not a timing to compare).
    pub elapsed_s: f64,
}

/// heap-growth and transport-heap-growth: a sample every `sample_every`
/// messages, and a summary at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeapGrowth {
    pub kind: HeapKind,
    pub messages: u64,
    /// Bytes allocated since the loop started.
    pub cum_bytes: Option<u64>,
    /// Allocation calls since the loop started (dhat build only).
    pub cum_allocs: Option<u64>,
    pub live_bytes: Option<u64>,
    pub peak_live_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    /// jemalloc purges since the loop started (dirty + muzzy; jemalloc build only).
    pub purges: Option<u64>,
    pub elapsed_s: f64,
}

/// A heap-growth record's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum HeapKind {
    Sample,
    Summary,
}

/// codec-speed (and instrumentation-cost): one timed batch of one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CodecSpeed {
    pub round: u64,
    pub implementation: Implementation,
    pub op: Op,
    pub ns_per_op: f64,
    pub ops: u64,
    pub wire_bytes: u64,
    /// The round's placement: the first vote of the source window and the
    /// padding before the codec instances, in bytes.
    pub window: u64,
    pub pad: u64,
}

/// Bytes the padding before each codec-speed round's codec instances grows
/// a round (mod 4 KiB): the subject places them by it, the table's caption
/// says it.
pub const PAD_STEP: usize = 208;

/// Whose batch a codec-speed record times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Implementation {
    /// The cell's codec.
    Codec,
    /// ZAP in the same round (the reference each codec is timed against).
    Zap,
    /// A copy of the codec's bytes (the floor).
    Memcpy,
}

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Codec => "codec",
            Implementation::Zap => "zap",
            Implementation::Memcpy => "memcpy",
        }
    }
}

/// The operation a codec-speed batch times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Encode,
    Decode,
    /// memcpy of the encoded bytes.
    Copy,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Encode => "encode",
            Op::Decode => "decode",
            Op::Copy => "copy",
        }
    }
}

/// transport-alloc and the roundtrip-latency experiments: one round trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RoundTrip {
    pub msg: u64,
    pub allocs: Option<u64>,
    pub bytes: Option<u64>,
    /// Latency: from the send (closed loop) or from when it was due (open loop).
    pub ns: u64,
    /// Open loop: from the actual send, the stack's service time alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ns: Option<u64>,
    /// Per side (dhat build): the harness thread, the server thread, and
    /// threads a library started on its own.
    pub client_allocs: Option<u64>,
    pub client_bytes: Option<u64>,
    pub server_allocs: Option<u64>,
    pub server_bytes: Option<u64>,
    pub other_allocs: Option<u64>,
    /// How many round trips this record stands for, each with these
    /// counts: transport-alloc writes a run of consecutive equal round trips
    /// as one record ([`RoundTrip::runs`]; `ns` is then their mean), the
    /// latency experiments the round trips of one latency
    /// ([`RoundTrip::latencies`]). Every mean, sum and percentile weighs by
    /// it. 1 when absent.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    // What a record without it stands for, in the schema too (schemars
    // leaves out a default that `skip_serializing_if` would skip).
    #[cfg_attr(feature = "schema", schemars(extend("default" = 1)))]
    pub repeat: u64,
}

fn one() -> u64 {
    1
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

impl RoundTrip {
    /// Whether two round trips have the same counts (what a run of them shares).
    fn same_counts(&self, o: &RoundTrip) -> bool {
        (self.allocs, self.bytes, self.client_allocs, self.client_bytes)
            == (o.allocs, o.bytes, o.client_allocs, o.client_bytes)
            && (self.server_allocs, self.server_bytes, self.other_allocs)
                == (o.server_allocs, o.server_bytes, o.other_allocs)
    }

    /// `rows` with each run of consecutive round trips of equal counts as
    /// one record: the first's index, `repeat` = the run's length, `ns` their
    /// mean (rounded), no service time. What a table of counts reads (their
    /// mean, min and max, their sums) is unchanged; a steady stack's 100,000
    /// round trips become a handful of records.
    pub fn runs(rows: Vec<RoundTrip>) -> Vec<RoundTrip> {
        let mut out: Vec<RoundTrip> = Vec::new();
        let mut ns_sum: u128 = 0;
        for r in rows {
            match out.last_mut() {
                Some(last) if last.same_counts(&r) => {
                    last.repeat += r.repeat;
                    ns_sum += u128::from(r.ns) * u128::from(r.repeat);
                    last.ns = (ns_sum / u128::from(last.repeat)) as u64;
                }
                _ => {
                    ns_sum = u128::from(r.ns) * u128::from(r.repeat);
                    out.push(RoundTrip { service_ns: None, ..r });
                }
            }
        }
        out
    }
}

/// Significant bits a latency keeps in [`RoundTrip::latencies`]: within
/// 1/2048 of the measured value, the resolution of an HdrHistogram at three
/// significant figures (what the percentile plot draws with), finer than
/// the three digits a table prints.
pub const LATENCY_BITS: u32 = 11;

/// `ns` to [`LATENCY_BITS`] significant bits: the middle of its bucket, so
/// that rounding does not bias a mean (values below 2^11 ns are exact).
pub fn latency_bucket(ns: u64) -> u64 {
    let shift = (64 - ns.leading_zeros()).saturating_sub(LATENCY_BITS);
    if shift == 0 {
        return ns;
    }
    ((ns >> shift) << shift) + (1 << (shift - 1))
}

impl RoundTrip {
    /// `rows` as a histogram: one record per distinct latency (to
    /// [`LATENCY_BITS`]) and counts, `repeat` = how many round trips had it,
    /// `msg` the first of them, `service_ns` their mean (kept jointly, the
    /// open loop's pairs would hardly repeat); sorted by latency. The
    /// latency experiments read distributions (percentiles, the spectrum)
    /// and nothing of the order: a full run's 2.2 million rows of
    /// latencies, 5 MB of Parquet a dataset, become ~60,000. `workbench
    /// compare` then compares repetitions' medians, not batches of one run.
    pub fn latencies(rows: Vec<RoundTrip>) -> Vec<RoundTrip> {
        let mut by: std::collections::BTreeMap<_, (RoundTrip, u128)> = std::collections::BTreeMap::new();
        for r in rows {
            let ns = latency_bucket(r.ns);
            let counts = (r.allocs, r.bytes, r.client_allocs, r.client_bytes, r.server_allocs, r.server_bytes);
            let service = u128::from(r.service_ns.unwrap_or(0)) * u128::from(r.repeat);
            by.entry((ns, counts, r.other_allocs))
                .and_modify(|(e, sum)| {
                    e.repeat += r.repeat;
                    e.msg = e.msg.min(r.msg);
                    *sum += service;
                })
                .or_insert((RoundTrip { ns, ..r }, service));
        }
        by.into_values()
            .map(|(mut r, sum)| {
                r.service_ns = r.service_ns.map(|_| (sum / u128::from(r.repeat)) as u64);
                r
            })
            .collect()
    }
}

impl crate::Compared for AllocProfile {
    const COLUMNS: crate::Columns =
        crate::Columns { keys: &["phase"], counts: &["allocs", "bytes", "bytes_freed"], times: &[] };
}

impl crate::Compared for SamplingAccuracy {
    // A sampled profile's estimates change with the seed, so none is a count
    // that must repeat; the exact profile's counts are alloc-profile's.
    const COLUMNS: crate::Columns = crate::Columns { keys: &["lg_sample"], counts: &[], times: &[] };
}

impl crate::Compared for HeapGrowth {
    const COLUMNS: crate::Columns =
        crate::Columns { keys: &["kind"], counts: &["cum_allocs", "cum_bytes"], times: &[] };
}

impl crate::Compared for CodecSpeed {
    const COLUMNS: crate::Columns =
        crate::Columns { keys: &["implementation", "op"], counts: &[], times: &["ns_per_op"] };
}

impl crate::Compared for RoundTrip {
    const COLUMNS: crate::Columns = crate::Columns {
        keys: &[],
        counts: &["allocs", "bytes", "client_allocs", "client_bytes", "server_allocs", "server_bytes", "other_allocs"],
        times: &["ns"],
    };
}

impl RoundTrip {
    /// What compares of transport-alloc, which writes runs ([`RoundTrip::runs`]):
    /// the counts alone (a run's `ns` is a mean, no sample of one round trip).
    pub const RUNS_COLUMNS: crate::Columns = crate::Columns { times: &[], ..<RoundTrip as crate::Compared>::COLUMNS };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(msg: u64, allocs: u64, ns: u64) -> RoundTrip {
        RoundTrip {
            msg,
            allocs: Some(allocs),
            bytes: Some(allocs * 10),
            ns,
            service_ns: Some(1),
            client_allocs: Some(allocs),
            client_bytes: None,
            server_allocs: Some(0),
            server_bytes: None,
            other_allocs: Some(0),
            repeat: 1,
        }
    }

    #[test]
    fn runs_of_equal_counts_keep_every_mean_sum_min_and_max() {
        let rows = vec![rt(0, 5, 10), rt(1, 5, 20), rt(2, 5, 30), rt(3, 7, 40), rt(4, 5, 50), rt(5, 5, 70)];
        let runs = RoundTrip::runs(rows.clone());
        assert_eq!(
            runs.iter().map(|r| (r.msg, r.repeat, r.ns)).collect::<Vec<_>>(),
            [(0, 3, 20), (3, 1, 40), (4, 2, 60)]
        );
        let weighted: u64 = runs.iter().map(|r| r.allocs.unwrap() * r.repeat).sum();
        assert_eq!(weighted, rows.iter().map(|r| r.allocs.unwrap()).sum::<u64>());
        assert_eq!(runs.iter().map(|r| r.repeat).sum::<u64>(), rows.len() as u64);
        // Written without `repeat` when 1, read back as 1 when absent.
        let one = serde_json::to_string(&runs[1]).unwrap();
        assert!(!one.contains("repeat"), "{one}");
        assert_eq!(serde_json::from_str::<RoundTrip>(&one).unwrap().repeat, 1);
        assert!(serde_json::to_string(&runs[0]).unwrap().contains("\"repeat\":3"));
    }

    #[test]
    fn a_latency_keeps_eleven_significant_bits_from_the_middle_of_its_bucket() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(2047), 2047);
        // 2^11..2^12 in steps of 2: 2048 and 2049 share [2048, 2050), middle 2049.
        assert_eq!((latency_bucket(2048), latency_bucket(2049), latency_bucket(2050)), (2049, 2049, 2051));
        for ns in [3_000u64, 41_234, 999_999, 12_345_678_901] {
            let b = latency_bucket(ns);
            assert!(b.abs_diff(ns) as f64 <= ns as f64 / 2048.0, "{ns} → {b}");
        }
    }

    #[test]
    fn a_histogram_of_latencies_keeps_every_round_trip_and_its_counts() {
        let rows = vec![rt(0, 5, 40_000), rt(1, 5, 40_010), rt(2, 7, 40_000), rt(3, 5, 90_000), rt(4, 5, 40_001)];
        let h = RoundTrip::latencies(rows.clone());
        // 40,000, 40,001 and 40,010 share a bucket (32 ns wide there); the one with 7 allocations stands apart.
        assert_eq!(
            h.iter().map(|r| (r.msg, r.repeat, r.allocs)).collect::<Vec<_>>(),
            [(0, 3, Some(5)), (2, 1, Some(7)), (3, 1, Some(5))]
        );
        assert_eq!(h.iter().map(|r| r.repeat).sum::<u64>(), rows.len() as u64);
        let weighted: u64 = h.iter().map(|r| r.allocs.unwrap() * r.repeat).sum();
        assert_eq!(weighted, rows.iter().map(|r| r.allocs.unwrap()).sum::<u64>());
        assert!(h.windows(2).all(|w| w[0].ns <= w[1].ns));
        let mut open = rt(0, 5, 40_000);
        open.service_ns = Some(30);
        assert_eq!(RoundTrip::latencies(vec![rt(1, 5, 40_000), open])[0].service_ns, Some(15));
    }
}
