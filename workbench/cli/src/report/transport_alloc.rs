//! transport-alloc: allocations per round trip of each transport stack,
//! split into client, server and other threads (dhat build).

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{self, display_name, dist, mean, mean_stats, opt_bytes, row, select, source_of, Table};
use anyhow::Result;
use probe::registry;

pub const REPORT: Report = Report::of::<records::subject::RoundTrip>(registry::TRANSPORT_ALLOC, transport_alloc, None);

/// Allocations per round trip over each transport stack.
pub fn transport_alloc(run: &Run) -> Result<Table> {
    let df = &run.records;
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for t in &spec.codecs {
        // PERF: the stack's rows first, as in alloc_profile.
        let of_stack = select(df, &[("codec", t)], &[])?;
        for &payload in &spec.payloads {
            let d = select(&of_stack, &[("variant", "dhat")], &[("payload", payload as u64)])?;
            let j = select(&of_stack, &[("variant", "jemalloc")], &[("payload", payload as u64)])?;
            rows.push(row![
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
    let s = spec.scale(run.manifest.scale);
    Ok(Table {
        name: "transport-alloc",
        caption: format!(
            "Heap allocations per round trip over loopback TCP, client and server together: mean [min, max] over \
             {} contiguous round trips (the mean, so periodic allocations count) after {} warm-up, {} repetition(s), dhat build. Client and server split the total by \
             the thread that allocated (harness thread, server thread); Other counts threads a library started on \
             its own. The jemalloc column counts the client thread only (per-thread counters, usable size). {} \
             profile.",
            tables::messages(s, &spec.payloads),
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
