//! Round trips over a transport: per round trip, allocations and bytes
//! (client and server together, and split by side, in the dhat build) and
//! wall-clock latency.
//! Registered twice: `transport-alloc` (dhat spec) and `roundtrip-latency`
//! (jemalloc spec), so each has its own dataset and table.

use super::Ctx;
use crate::transports::Transport;
use crate::vote::VoteData;
use anyhow::Result;
use probe::{Side, SideCounts};
use serde::Serialize;
use std::time::Instant;

pub const ALLOC: &str = "transport-alloc";
pub const LATENCY: &str = "roundtrip-latency";

#[derive(Serialize)]
struct Record {
    msg: u64,
    allocs: Option<u64>,
    bytes: Option<u64>,
    ns: u64,
    /// Per side (dhat build): the harness thread, the server thread, and
    /// threads a library started on its own.
    client_allocs: Option<u64>,
    client_bytes: Option<u64>,
    server_allocs: Option<u64>,
    server_bytes: Option<u64>,
    other_allocs: Option<u64>,
}

pub fn run<T: Transport>(ctx: Ctx<'_>) -> Result<()> {
    let cell = ctx.cell;
    let probe = ctx.probe;
    probe::set_side(Side::Client);
    let mut t = T::start(cell.seed, cell.payload)?;
    let mut v = VoteData::with_payload(cell.payload);
    let mut rows: Vec<(u64, probe::Counters, Option<SideCounts>, u64)> = Vec::with_capacity(cell.messages as usize);
    let total = cell.warmup + cell.messages;
    let step = (total / 20).max(1);
    for i in 0..total {
        v.set(cell.seed, i);
        let (c0, s0) = (probe.counters(), probe.sides());
        let t0 = Instant::now();
        t.round_trip(&v)?;
        let ns = t0.elapsed().as_nanos() as u64;
        let (c1, s1) = (probe.counters(), probe.sides());
        if i >= cell.warmup {
            let sides = s1.zip(s0).map(|(a, b)| a.since(&b));
            rows.push((i - cell.warmup, c1.since(&c0), sides, ns));
        }
        if (i + 1) % step == 0 {
            super::progress(i + 1, total);
        }
    }
    drop(t);
    for (msg, c, sides, ns) in rows {
        let side = |f: fn(&SideCounts) -> u64| sides.as_ref().map(f);
        let rec = Record {
            msg,
            allocs: c.allocs,
            bytes: c.bytes_allocated,
            ns,
            client_allocs: side(|s| s.calls(Side::Client)),
            client_bytes: side(|s| s.bytes(Side::Client)),
            server_allocs: side(|s| s.calls(Side::Server)),
            server_bytes: side(|s| s.bytes(Side::Server)),
            other_allocs: side(|s| s.calls(Side::Other)),
        };
        serde_json::to_writer(&mut *ctx.out, &rec)?;
        ctx.out.write_all(b"\n")?;
    }
    Ok(())
}
