//! Per message: allocations and bytes during encode, during decode, and per
//! round trip, for every measured message (the CLI computes distributions).

use super::Ctx;
use crate::codecs::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::Result;
use probe::Counters;
use records::subject::{AllocProfile, Phase};

/// One measured message: its index, its request's size, and the counters
/// of its encode, decode and round trip.
pub type Row = (u64, u64, [Counters; 3]);

pub fn run<C: Codec>(ctx: Ctx<'_>) -> Result<()> {
    let rows = measure::<C>(ctx.cell, ctx.probe)?;
    for (msg, wire_bytes, phases) in rows {
        for (phase, c) in Phase::ALL.into_iter().zip(phases) {
            let r = AllocProfile {
                msg,
                phase,
                wire_bytes,
                allocs: c.allocs,
                bytes: c.bytes_allocated,
                bytes_freed: c.bytes_freed,
            };
            records::line(ctx.out, &r)?;
        }
    }
    Ok(())
}

/// The workload: the cell's warm-up and measured messages, each encoded,
/// decoded and sent round trip (sampling-accuracy profiles the same).
pub fn measure<C: Codec>(cell: &probe::Cell, probe: &probe::Probe) -> Result<Vec<Row>> {
    let (mut client, mut server) = (C::new(), C::new());
    let mut v = VoteData::with_payload(cell.payload);
    // PERF: every container the loop writes to is sized before measuring.
    let mut rows: Vec<Row> = Vec::with_capacity(cell.messages as usize);
    let total = cell.warmup + cell.messages;
    let step = (total / 20).max(1);
    for i in 0..total {
        v.set(cell.seed, i);
        let c0 = probe.counters();
        let req = client.encode(&v, Envelope::Request)?;
        let c1 = probe.counters();
        server.decode(req, &v, Envelope::Request)?;
        let c2 = probe.counters();
        let wire = req.len() as u64;

        let c3 = probe.counters();
        let req = client.encode(&v, Envelope::Request)?;
        server.decode(req, &v, Envelope::Request)?;
        let resp = server.encode(&v, Envelope::Response)?;
        client.decode(resp, &v, Envelope::Response)?;
        let c4 = probe.counters();

        if i >= cell.warmup {
            rows.push((i - cell.warmup, wire, [c1.since(&c0), c2.since(&c1), c4.since(&c3)]));
        }
        if (i + 1) % step == 0 {
            super::progress(i + 1, total);
        }
    }
    Ok(rows)
}
