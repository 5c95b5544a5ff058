//! What each call costs in memory, exactly (the dhat build's
//! [`probe::calls`], for the request-cost experiment): the kinds of call
//! the server tells apart, and the file it writes at shutdown with every
//! call's cost (`--call-costs`), one [`records::server::request_cost::CallCost`]
//! a line.
//!
//! The server tags each call with its number while the I/O thread reads and
//! answers it, while its worker runs it and on the threads its query
//! spawns (`datastore::exec::ThreadContext`); a free counts for the call
//! that allocated the block. Call 0 is everything outside a call: the
//! runtime, connection state, caches, background merges.

use records::server::request_cost::{CallCost, CostLine, ProcessTotals};
use records::server::QUERIES;
use std::io::Write;
use std::path::Path;

pub const PING: u16 = 1;
pub const STATS: u16 = 2;
pub const INSERT: u16 = 3;
pub const HEAP_PROFILE: u16 = 4;
/// A query that is none of the workload's.
pub const OTHER_QUERY: u16 = 5;
/// A `finish` frame: the client releasing answers (their frees count for
/// the calls that made them).
pub const FINISH: u16 = 6;
/// Call 0's name: what was allocated outside every call.
pub const OUTSIDE: &str = "outside-calls";
/// The workload's queries: this plus their index in [`QUERIES`].
const WORKLOAD: u16 = 16;

/// The kind of a query by its text: one of the workload's, else other.
pub fn query_kind(sql: &str) -> u16 {
    QUERIES.iter().position(|(_, q)| *q == sql).map_or(OTHER_QUERY, |i| WORKLOAD + i as u16)
}

/// A kind's name in the file: the workload query's name, or the method's.
pub fn kind_name(kind: u16) -> &'static str {
    match kind {
        PING => "ping",
        STATS => "stats",
        INSERT => "insert",
        HEAP_PROFILE => "heap-profile",
        OTHER_QUERY => "other-query",
        FINISH => "finish",
        k if k >= WORKLOAD => QUERIES.get(usize::from(k - WORKLOAD)).map_or("unknown", |q| q.0),
        // A call the server never described (a statement that failed
        // before it ran, a refused frame).
        _ => "undescribed",
    }
}

/// Starts recording (the server's `--call-costs`), and carries each call's
/// tag onto the threads its query spawns. Only the dhat build records.
pub fn start() {
    probe::calls::record(true);
    datastore::exec::set_thread_context(datastore::exec::ThreadContext {
        capture: probe::calls::current,
        enter: probe::calls::adopt,
    });
}

/// Writes every call's cost to `path`, then dhat's process totals; how many calls.
pub fn write(path: &Path) -> std::io::Result<usize> {
    // Totals first: the copy of the table allocates.
    let (allocs, bytes, _) = probe::heap_totals().unwrap_or_default();
    let costs = probe::calls::drain();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for c in &costs {
        let line = CostLine::Call(CallCost {
            call: c.call,
            kind: if c.call == 0 { OUTSIDE } else { kind_name(c.kind) }.to_string(),
            counts: c.counts,
            finished: c.finished,
        });
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    serde_json::to_writer(&mut out, &CostLine::Process(ProcessTotals { allocs, bytes }))?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(costs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_query_is_a_kind_of_its_own() {
        for (name, sql) in QUERIES {
            assert_eq!(kind_name(query_kind(sql)), name);
        }
        assert_eq!(kind_name(query_kind("SELECT 1")), "other-query");
        assert_eq!(kind_name(0), "undescribed");
    }
}
