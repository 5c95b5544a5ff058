//! Each gated experiment's records turned into exact counts: one exhaustive
//! match over the experiments ([`counts_of`]), each reading its own record
//! type; [`GATED`] lists those it gives counts for.
//!
//! A count is a total over the cell's measured operations (never a mean: a
//! mean of 77.003 hides whether 3 allocations in 1,000 moved), named
//! `<what>.<metric>` so that the baseline's lines sort by what they count.

use crate::data::dataset::Record;
use anyhow::{Context, Result};
use records::server::server_heap_growth;
use records::subject::{AllocProfile, RoundTrip};
use registry::{Experiment, RecordType};
use std::collections::BTreeMap;

/// One exact count of a cell: its total, and how many operations (messages,
/// queries) it is the total of, for the per-operation figure printed beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub value: u64,
    pub per: u64,
}

pub type Counts = BTreeMap<String, Count>;

/// How a gated experiment's records become counts.
pub type CountsFn = fn(&[Record]) -> Result<Counts>;

/// A gated experiment: its registry entry and how its records become counts.
pub struct Gated {
    pub experiment: Experiment,
    pub counts: CountsFn,
}

/// How `e`'s records become exact counts, `None` for an experiment that
/// does not count (one exhaustive match: a new experiment says which it is).
pub const fn counts_of(e: Experiment) -> Option<CountsFn> {
    use Experiment as E;
    match e {
        E::AllocProfile => Some(alloc_profile),
        E::TransportAlloc => Some(transport_alloc),
        E::ServerHeapGrowth => Some(server_heap_growth),
        E::HeapGrowth
        | E::SamplingAccuracy
        | E::SamplingAccuracyTransports
        | E::SamplingAccuracyServer
        | E::CodecSpeed
        | E::TransportHeapGrowth
        | E::RoundtripLatency
        | E::RoundtripLatencyAwake
        | E::RoundtripLatencyOpen
        | E::InstrumentationCost
        | E::DatastoreQueries
        | E::BuildStages
        | E::ConnectionScaling
        | E::PipelineDepth
        | E::IoWakeup
        | E::FaultSoak
        | E::RequestCost
        | E::Throughput
        | E::ProfilerCost => None,
    }
}

/// Every experiment the gate runs (a spec with a `[gate]` table must be one).
pub static GATED: std::sync::LazyLock<Vec<Gated>> = std::sync::LazyLock::new(|| {
    Experiment::ALL
        .iter()
        .filter_map(|&experiment| Some(Gated { experiment, counts: counts_of(experiment)? }))
        .collect()
});

/// The entry of the dataset `name`.
pub fn gated(name: &str) -> Option<&'static Gated> {
    GATED.iter().find(|g| g.experiment.name() == name)
}

fn typed<R: RecordType + Clone>(records: &[Record]) -> Result<Vec<R>> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            R::of(&r.record)
                .cloned()
                .with_context(|| format!("record {} is not a {}", i + 1, std::any::type_name::<R>()))
        })
        .collect()
}

fn add(out: &mut Counts, metric: String, value: Option<u64>) {
    add_n(out, metric, value, 1);
}

/// [`add`] for a record that stands for `n` identical ones.
fn add_n(out: &mut Counts, metric: String, value: Option<u64>, n: u64) {
    let c = out.entry(metric).or_insert(Count { value: 0, per: 0 });
    c.value += value.unwrap_or(0) * n;
    c.per += n;
}

/// Per phase: allocation calls and bytes over the cell's messages.
fn alloc_profile(records: &[Record]) -> Result<Counts> {
    let mut out = Counts::new();
    for r in typed::<AllocProfile>(records)? {
        add(&mut out, format!("{}.allocs", r.phase.name()), r.allocs);
        add(&mut out, format!("{}.bytes", r.phase.name()), r.bytes);
    }
    Ok(out)
}

/// Allocation calls and bytes over the round trips, and the calls by side.
fn transport_alloc(records: &[Record]) -> Result<Counts> {
    let mut out = Counts::new();
    for r in typed::<RoundTrip>(records)? {
        let n = r.repeat;
        add_n(&mut out, "allocs".into(), r.allocs, n);
        add_n(&mut out, "bytes".into(), r.bytes, n);
        add_n(&mut out, "client.allocs".into(), r.client_allocs, n);
        add_n(&mut out, "server.allocs".into(), r.server_allocs, n);
        add_n(&mut out, "other.allocs".into(), r.other_allocs, n);
    }
    Ok(out)
}

/// Per workload: the server's allocation calls and bytes from its first
/// sample to its last (start-up excluded), and its peak heap at the end.
fn server_heap_growth(records: &[Record]) -> Result<Counts> {
    let mut by: BTreeMap<String, Vec<server_heap_growth::Sample>> = BTreeMap::new();
    for server_heap_growth::Record::Sample(s) in typed::<server_heap_growth::Record>(records)? {
        by.entry(s.workload.clone()).or_default().push(s);
    }
    let mut out = Counts::new();
    for (w, mut samples) in by {
        samples.sort_by_key(|s| s.queries);
        let (first, last) = (&samples[0], &samples[samples.len() - 1]);
        let per = last.queries - first.queries;
        let delta = |a: Option<u64>, b: Option<u64>| b.unwrap_or(0).saturating_sub(a.unwrap_or(0));
        out.insert(format!("{w}.allocs"), Count { value: delta(first.total_allocs, last.total_allocs), per });
        out.insert(format!("{w}.bytes"), Count { value: delta(first.total_bytes, last.total_bytes), per });
        out.insert(format!("{w}.peak"), Count { value: last.peak_heap_bytes.unwrap_or(0), per: 1 });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A line of `e`'s as a cell's file holds it, read back as the runner does.
    fn rec(e: Experiment, v: serde_json::Value) -> Record {
        Record::decode(e, &v.to_string()).unwrap()
    }

    #[test]
    fn phases_are_totalled_over_messages() {
        let rows: Vec<Record> = (0..3)
            .flat_map(|m| {
                ["encode", "decode"].map(|p| {
                    rec(
                        Experiment::AllocProfile,
                        json!({"msg": m, "phase": p, "wire_bytes": 10, "allocs": if p == "decode" { 2 } else { 0 },
                               "bytes": 7, "bytes_freed": 0, "variant": "dhat", "rep": 0}),
                    )
                })
            })
            .collect();
        let c = alloc_profile(&rows).unwrap();
        assert_eq!(c["decode.allocs"], Count { value: 6, per: 3 });
        assert_eq!(c["encode.allocs"], Count { value: 0, per: 3 });
        assert_eq!(c["encode.bytes"].value, 21);
    }

    #[test]
    fn server_counts_exclude_start_up() {
        let s = |q: u64, a: u64| {
            rec(
                Experiment::ServerHeapGrowth,
                json!({"kind": "sample", "workload": "ping", "queries": q, "total_allocs": a, "total_bytes": a * 10,
                       "peak_heap_bytes": 500, "live_heap_bytes": 1, "jemalloc_allocated": null,
                       "jemalloc_active": null, "jemalloc_resident": null, "rss_bytes": 1, "variant": "dhat", "rep": 0}),
            )
        };
        let c = server_heap_growth(&[s(100, 900), s(0, 400), s(50, 650)]).unwrap();
        assert_eq!(c["ping.allocs"], Count { value: 500, per: 100 });
        assert_eq!(c["ping.bytes"].value, 5000);
        assert_eq!(c["ping.peak"].value, 500);
    }

    #[test]
    fn a_record_of_another_experiment_is_an_error() {
        let alloc = json!({"msg": 0, "phase": "encode", "wire_bytes": 10, "allocs": 0, "bytes": 0, "bytes_freed": 0,
                           "variant": "dhat", "rep": 0});
        let e = transport_alloc(&[rec(Experiment::AllocProfile, alloc)]).unwrap_err();
        assert!(format!("{e:#}").contains("record 1 is not a records::subject::RoundTrip"), "{e:#}");
    }
}
