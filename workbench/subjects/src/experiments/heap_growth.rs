//! N round trips from a cold start; a heap sample every k messages, and a
//! summary at the end: total allocated, peak heap, allocator calls, purges.

use super::Ctx;
use crate::codecs::{Codec, Envelope};
use crate::transports::Transport;
use crate::vote::VoteData;
use anyhow::Result;
use probe::Snapshot;
use records::subject::{HeapGrowth, HeapKind};
use std::time::Instant;

fn record(kind: HeapKind, messages: u64, s: &Snapshot, base: &Snapshot, elapsed_s: f64) -> HeapGrowth {
    let d = s.counters.since(&base.counters);
    let purges = match (s.jemalloc, base.jemalloc) {
        (Some(a), Some(b)) => Some((a.dirty_npurge + a.muzzy_npurge) - (b.dirty_npurge + b.muzzy_npurge)),
        _ => None,
    };
    HeapGrowth {
        kind,
        messages,
        cum_bytes: d.bytes_allocated,
        cum_allocs: d.allocs,
        live_bytes: s.live_bytes,
        peak_live_bytes: s.peak_live_bytes,
        rss_bytes: s.rss_bytes,
        peak_rss_bytes: s.peak_rss_bytes,
        purges,
        elapsed_s,
    }
}

/// In-process round trips through a codec.
pub fn run<C: Codec>(ctx: Ctx<'_>) -> Result<()> {
    let (mut client, mut server) = (C::new(), C::new());
    run_loop(ctx, |v| {
        let req = client.encode(v, Envelope::Request)?;
        server.decode(req, v, Envelope::Request)?;
        let resp = server.encode(v, Envelope::Response)?;
        client.decode(resp, v, Envelope::Response)
    })
}

/// Round trips over a transport stack, client and server (`transport-heap-growth`).
/// The connection is set up before the baseline snapshot: growth is per message.
pub fn run_transport<T: Transport>(ctx: Ctx<'_>) -> Result<()> {
    let mut t = T::start(ctx.cell.seed, ctx.cell.payload)?;
    run_loop(ctx, |v| t.round_trip(v))
}

fn run_loop(ctx: Ctx<'_>, mut round_trip: impl FnMut(&VoteData) -> Result<()>) -> Result<()> {
    let cell = ctx.cell;
    let probe = ctx.probe;
    let every = cell.sample_every.max(1);
    let mut samples: Vec<(u64, Snapshot, f64)> = Vec::with_capacity((cell.messages / every + 2) as usize);
    let mut v = VoteData::with_payload(cell.payload);
    let base = probe.snapshot();
    let start = Instant::now();
    samples.push((0, base, 0.0));
    for i in 0..cell.messages {
        probe::operation(i);
        v.set(cell.seed, i);
        round_trip(&v)?;
        if (i + 1) % every == 0 {
            samples.push((i + 1, probe.snapshot(), start.elapsed().as_secs_f64()));
            super::progress(i + 1, cell.messages);
        }
    }
    probe::operations_done();
    let end = probe.snapshot();
    let elapsed = start.elapsed().as_secs_f64();
    for (n, s, t) in &samples {
        records::line(ctx.out, &record(HeapKind::Sample, *n, s, &base, *t))?;
    }
    records::line(ctx.out, &record(HeapKind::Summary, cell.messages, &end, &base, elapsed))?;
    Ok(())
}
