//! Encode and decode ns/op of one codec, interleaved in the same process
//! with ZAP and with a memcpy of the same number of bytes (the physical
//! floor), round after round, so that ratios compare like with like.
//!
//! Each round times a batch of `messages` operations per implementation;
//! the order alternates round by round (codec, ZAP, memcpy, then memcpy,
//! ZAP, codec), so whatever the first or last slot of a round costs (cache
//! and frequency state left by the one before) falls on every implementation
//! alike. `warmup` rounds come first and are dropped. The cell whose codec is
//! ZAP measures ZAP against itself: its ratio is the harness's noise floor.
//! A repetition of the cell is a separate process.
//!
//! Placement sweep: a copy's speed depends on where its source and
//! destination sit relative to each other (4 KiB aliasing: ZAP's 1 KiB
//! encode measured 27.5–68.5 ns in one binary, depending only on an
//! allocation made before its buffers). A fixed placement per process made
//! the A/A ratio whatever two placements gave. So every round places all
//! implementations afresh: the votes are read from a window that slides by
//! [`SLIDE`] votes a round, every codec instance is built anew behind a
//! padding allocation that grows by [`PAD_STEP`] bytes a round, in an order
//! that alternates with the timing order, the memcpy's destination slides
//! by the same padding, and the instances themselves live
//! in a heap slot that moves each round (cycling through [`SLOTS`]). Each implementation's median is
//! then over the same sweep of placements.

use super::Ctx;
use crate::codecs::zap::ZapCodec;
use crate::codecs::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::Result;
use records::subject::{CodecSpeed, Implementation, Op};
use std::hint::black_box;
use std::time::Instant;

/// Distinct votes cycled through, so a batch does not re-encode one message.
const DISTINCT: usize = 64;
/// Timed rounds per cell.
const ROUNDS: u64 = 15;
/// Votes the source window slides a round (a vote's size is not a multiple of
/// 64, so the sweep visits many offsets modulo 4 KiB).
pub const SLIDE: usize = 5;
/// Slots the instances' own place cycles through, one a round.
const SLOTS: usize = 16;
use records::subject::PAD_STEP;

struct Timed {
    enc: f64,
    dec: f64,
    wire: u64,
}

/// Times `n` encodes and `n` decodes of `c`; ns per operation.
///
/// NOTE: never inlined, so that `time_codec::<ZapCodec>` is one function in
/// the binary, the same machine code in every cell. Inlined, each codec's
/// `run` got its own copy, laid out and optimised differently: ZAP's encode
/// measured 42 ns in the protobuf cells and 16 ns in the others (quick run,
/// 15 rounds each, every round alike), and ZAP against itself was no A/A test.
#[inline(never)]
fn time_codec<C: Codec>(c: &mut C, peer: &mut C, votes: &[VoteData], encoded: &[Vec<u8>], n: u64) -> Result<Timed> {
    let t = Instant::now();
    let mut wire = 0;
    for i in 0..n as usize {
        wire = black_box(c.encode(&votes[i % DISTINCT], Envelope::Request)?).len();
    }
    let enc = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    for i in 0..n as usize {
        peer.decode(black_box(&encoded[i % DISTINCT]), &votes[i % DISTINCT], Envelope::Request)?;
    }
    let dec = t.elapsed().as_nanos() as f64 / n as f64;
    Ok(Timed { enc, dec, wire: wire as u64 })
}

#[inline(never)]
fn time_memcpy(src: &[Vec<u8>], dst: &mut [u8], n: u64) -> f64 {
    let t = Instant::now();
    for i in 0..n as usize {
        let s = &src[i % DISTINCT];
        dst[..s.len()].copy_from_slice(black_box(s));
        black_box(&mut *dst);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn encode_all<C: Codec>(c: &mut C, votes: &[VoteData]) -> Result<Vec<Vec<u8>>> {
    votes.iter().map(|v| Ok(c.encode(v, Envelope::Request)?.to_vec())).collect()
}

/// One round's instances, built behind `pad` bytes of padding that live as long as they do.
struct Placed<C> {
    c: C,
    c_peer: C,
    z: ZapCodec,
    z_peer: ZapCodec,
    _pad: Vec<u8>,
}

impl<C: Codec> Placed<C> {
    fn new(pad: usize, zap_first: bool) -> Placed<C> {
        let pad = black_box(vec![1u8; pad.max(1)]);
        if zap_first {
            let (z, z_peer) = (ZapCodec::new(), ZapCodec::new());
            let (c, c_peer) = (C::new(), C::new());
            Placed { c, c_peer, z, z_peer, _pad: pad }
        } else {
            let (c, c_peer) = (C::new(), C::new());
            let (z, z_peer) = (ZapCodec::new(), ZapCodec::new());
            Placed { c, c_peer, z, z_peer, _pad: pad }
        }
    }
}

pub fn run<C: Codec>(ctx: Ctx<'_>) -> Result<()> {
    let cell = ctx.cell;
    let n = cell.messages.max(1);
    let total = cell.warmup + ROUNDS;
    let all = DISTINCT + SLIDE * total as usize;
    let votes: Vec<VoteData> = (0..all as u64)
        .map(|i| {
            let mut v = VoteData::with_payload(cell.payload);
            v.set(cell.seed, i);
            v
        })
        .collect();
    let c_bytes = encode_all(&mut C::new(), &votes)?;
    let z_bytes = encode_all(&mut ZapCodec::new(), &votes)?;
    // The floor's destination slides with the round's padding, so that the
    // copy sweeps placements as the codecs do. NOTE: a destination allocated
    // once, or anew each round (malloc hands back the chunk just freed), sat
    // at one offset from its sources for every round, fixed by the codec's
    // own allocations: a memcpy of JSON-RPC's 410 bytes measured 3.6 ns in
    // one cell and 13.0 ns in its borrowed twin's, 7.6 to 25 ns on another
    // machine; sliding, 7.0 ns in both (2 processes each, 2026-12-05).
    let dst_len = c_bytes.iter().chain(&z_bytes).map(Vec::len).max().unwrap_or(0);
    let mut dst_area = vec![0u8; dst_len + 4096];
    let mut out = Vec::new();
    for round in 0..total {
        let w = SLIDE * round as usize;
        let pad = PAD_STEP * round as usize % 4096;
        let (votes, c_bytes, z_bytes) = (&votes[w..w + DISTINCT], &c_bytes[w..w + DISTINCT], &z_bytes[w..w + DISTINCT]);
        let dst = &mut dst_area[pad..pad + dst_len];
        // The instances themselves (builder state such as the write cursor)
        // sit in a heap slot that moves by a slot's size each round: on the
        // stack they had one address per process, fixed by the environment's
        // size, and one of ZAP's two instances encoded 64 B at 30 ns and the
        // other at 17 ns in every round of one suite run.
        let mut slots: Vec<Option<Placed<C>>> = (0..=round as usize % SLOTS).map(|_| None).collect();
        let zap_first = round % 4 < 2;
        let p = slots.last_mut().expect("at least one slot").insert(Placed::<C>::new(pad, zap_first));
        // Untimed: buffers reach their steady size before the clock starts,
        // allocated in the instances' order. NOTE: with the codec's buffers
        // always allocated first, the two ZAP instances of ZAP's own cell sat
        // at one offset from each other in every round, and the second's
        // 64 B encode measured 7.08 ns against the first's 6.50 in all five
        // processes of a full run (A/A 0.917); alternated, 0.97-1.01.
        if zap_first {
            encode_all(&mut p.z, votes)?;
            encode_all(&mut p.c, votes)?;
        } else {
            encode_all(&mut p.c, votes)?;
            encode_all(&mut p.z, votes)?;
        }
        for (i, v) in votes.iter().enumerate() {
            p.c_peer.decode(&c_bytes[i], v, Envelope::Request)?;
            p.z_peer.decode(&z_bytes[i], v, Envelope::Request)?;
        }
        // Untimed lead-in, in the round's order: the first timed batch after
        // the instances are built ran ≈ 8 % slower than the same batch later
        // in the round (ZAP against itself, 64 B), whichever came first.
        let lead = (n / 4).max(1);
        if round % 2 == 0 {
            time_codec(&mut p.c, &mut p.c_peer, votes, c_bytes, lead)?;
            time_codec(&mut p.z, &mut p.z_peer, votes, z_bytes, lead)?;
        } else {
            time_memcpy(c_bytes, dst, lead);
            time_codec(&mut p.z, &mut p.z_peer, votes, z_bytes, lead)?;
        }
        let (a, b, m) = if round % 2 == 0 {
            let a = time_codec(&mut p.c, &mut p.c_peer, votes, c_bytes, n)?;
            let b = time_codec(&mut p.z, &mut p.z_peer, votes, z_bytes, n)?;
            (a, b, time_memcpy(c_bytes, dst, n))
        } else {
            let m = time_memcpy(c_bytes, dst, n);
            let b = time_codec(&mut p.z, &mut p.z_peer, votes, z_bytes, n)?;
            (time_codec(&mut p.c, &mut p.c_peer, votes, c_bytes, n)?, b, m)
        };
        drop(slots);
        super::progress(round + 1, total);
        if round < cell.warmup {
            continue;
        }
        let r = round - cell.warmup;
        let rec = |implementation, op, ns_per_op, wire_bytes| CodecSpeed {
            round: r,
            implementation,
            op,
            ns_per_op,
            ops: n,
            wire_bytes,
            window: w as u64,
            pad: pad as u64,
        };
        out.push(rec(Implementation::Codec, Op::Encode, a.enc, a.wire));
        out.push(rec(Implementation::Codec, Op::Decode, a.dec, a.wire));
        out.push(rec(Implementation::Zap, Op::Encode, b.enc, b.wire));
        out.push(rec(Implementation::Zap, Op::Decode, b.dec, b.wire));
        out.push(rec(Implementation::Memcpy, Op::Copy, m, a.wire));
    }
    for r in out {
        records::line(ctx.out, &r)?;
    }
    Ok(())
}
