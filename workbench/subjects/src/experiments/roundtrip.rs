//! Round trips over a transport: per round trip, allocations and bytes
//! (client and server together, in the dhat build) and wall-clock latency.
//! Registered twice: `transport-alloc` (dhat spec) and `roundtrip-latency`
//! (jemalloc spec), so each has its own dataset and table.

use super::Ctx;
use crate::transports::Transport;
use crate::vote::VoteData;
use anyhow::Result;
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
}

pub fn run<T: Transport>(ctx: Ctx<'_>) -> Result<()> {
    let cell = ctx.cell;
    let probe = ctx.probe;
    let mut t = T::start(cell.seed, cell.payload)?;
    let mut v = VoteData::with_payload(cell.payload);
    let mut rows: Vec<(u64, probe::Counters, u64)> = Vec::with_capacity(cell.messages as usize);
    let total = cell.warmup + cell.messages;
    let step = (total / 20).max(1);
    for i in 0..total {
        v.set(cell.seed, i);
        let c0 = probe.counters();
        let t0 = Instant::now();
        t.round_trip(&v)?;
        let ns = t0.elapsed().as_nanos() as u64;
        let c1 = probe.counters();
        if i >= cell.warmup {
            rows.push((i - cell.warmup, c1.since(&c0), ns));
        }
        if (i + 1) % step == 0 {
            super::progress(i + 1, total);
        }
    }
    drop(t);
    for (msg, c, ns) in rows {
        serde_json::to_writer(&mut *ctx.out, &Record { msg, allocs: c.allocs, bytes: c.bytes_allocated, ns })?;
        ctx.out.write_all(b"\n")?;
    }
    Ok(())
}
