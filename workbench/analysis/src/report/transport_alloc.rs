//! transport-alloc: allocations per round trip of each transport stack,
//! split into client, server and other threads (dhat build).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{self, dist, opt_bytes, row, source_of, Acc, Table};
use anyhow::Result;
use records::subject::RoundTrip;
use registry::{self, display_name};
use std::collections::HashMap;

pub const REPORT: Report =
    Report::of::<records::subject::RoundTrip>(registry::Experiment::TransportAlloc, transport_alloc, None);

/// The fields the table summarises, and their places in [`FIELDS`].
const FIELDS: [fn(&RoundTrip) -> Option<u64>; 7] = [
    |r| r.allocs,
    |r| r.bytes,
    |r| r.client_allocs,
    |r| r.client_bytes,
    |r| r.server_allocs,
    |r| r.server_bytes,
    |r| r.other_allocs,
];
const ALLOCS: usize = 0;
const BYTES: usize = 1;
const CLIENT_ALLOCS: usize = 2;
const CLIENT_BYTES: usize = 3;
const SERVER_ALLOCS: usize = 4;
const SERVER_BYTES: usize = 5;
const OTHER_ALLOCS: usize = 6;

/// Allocations per round trip over each transport stack.
pub fn transport_alloc(run: &Run) -> Result<Table> {
    let spec = &run.manifest.spec;
    // PERF: millions of rows: each cell keeps a summary of the fields it shows.
    let mut cells: HashMap<(&str, u64, &str), [Acc; FIELDS.len()]> = HashMap::new();
    for r in run.each::<RoundTrip>() {
        let r = r?;
        let accs = cells.entry((r.cell.codec.unwrap_or(""), r.cell.payload(), r.cell.variant)).or_default();
        for (acc, f) in accs.iter_mut().zip(FIELDS) {
            acc.push_n(f(&r.record), r.record.repeat);
        }
    }
    let mut rows = Vec::new();
    for t in &spec.codecs {
        for &payload in &spec.payloads {
            let cell =
                |variant: &'static str| cells.get(&(t.as_str(), payload as u64, variant)).copied().unwrap_or_default();
            let (d, j) = (cell("dhat"), cell("jemalloc"));
            rows.push(row![
                crate::report::tables::TableCell::keyed(display_name(t), t),
                crate::report::tables::TableCell::keyed(fmt::bytes(payload as f64), payload),
                dist(d[ALLOCS].mean_stats()),
                opt_bytes(d[BYTES].mean()),
                dist(d[CLIENT_ALLOCS].mean_stats()),
                opt_bytes(d[CLIENT_BYTES].mean()),
                dist(d[SERVER_ALLOCS].mean_stats()),
                opt_bytes(d[SERVER_BYTES].mean()),
                dist(d[OTHER_ALLOCS].mean_stats()),
                opt_bytes(j[BYTES].mean()),
            ]);
        }
    }
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "transport-alloc",
        caption: format!(
            "Heap allocations per round trip over loopback TCP, client and server together: mean [min, max] over \
             {} contiguous round trips (the mean, so periodic allocations count) after {} warm-up, {} repetition(s), dhat build.",
            tables::messages(s, &spec.payloads),
            s.warmup,
            s.repetitions,
        ),
        method: format!(
            "Client and server split the total by \
             the thread that allocated (harness thread, server thread); Other counts threads a library started on \
             its own. The jemalloc column counts the client thread only (per-thread counters, usable size). Built \
             with the {} profile.",
            run.manifest.profile
        ),
        header: vec![
            "Stack",
            "Payload",
            crate::report::tables::col::ALLOCS_RT,
            crate::report::tables::col::B_RT,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};

    fn trip(allocs: u64, client: u64, server: u64) -> RoundTrip {
        RoundTrip {
            msg: 0,
            allocs: Some(allocs),
            bytes: Some(allocs * 10),
            ns: 1,
            service_ns: None,
            client_allocs: Some(client),
            client_bytes: Some(client * 10),
            server_allocs: Some(server),
            server_bytes: Some(server * 10),
            other_allocs: Some(allocs - client - server),
            repeat: 1,
        }
    }

    #[test]
    fn sides_split_the_total() {
        let rows = vec![
            (subject("grpc", 0, "dhat", 0), trip(10, 4, 5)),
            (subject("grpc", 0, "dhat", 0), trip(20, 8, 10)),
            (subject("grpc", 0, "jemalloc", 0), RoundTrip { bytes: Some(64), ..trip(0, 0, 0) }),
        ];
        let t = transport_alloc(&run("transport-alloc", None, &rows)).unwrap();
        let key = [display_name("grpc"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "Allocs/RT"), fmt::count(15.0));
        assert_eq!(cell(&t, &key, "Client allocs"), fmt::count(6.0));
        assert_eq!(cell(&t, &key, "Server B"), fmt::bytes(75.0));
        assert_eq!(cell(&t, &key, "Other allocs"), fmt::count(1.5));
        assert_eq!(cell(&t, &key, "B/RT client (jemalloc)"), fmt::bytes(64.0));
    }

    #[test]
    fn a_record_standing_for_a_run_weighs_as_its_round_trips() {
        // Three round trips of 10 and one of 30: a mean of 15, not of 20.
        let rows = vec![
            (subject("grpc", 0, "dhat", 0), RoundTrip { repeat: 3, ..trip(10, 4, 5) }),
            (subject("grpc", 0, "dhat", 0), trip(30, 12, 15)),
        ];
        let t = transport_alloc(&run("transport-alloc", None, &rows)).unwrap();
        let key = [display_name("grpc"), fmt::bytes(0.0)];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "Allocs/RT"), fmt::count(15.0));
    }
}
