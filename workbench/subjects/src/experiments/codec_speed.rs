//! Encode and decode ns/op of one codec, interleaved in the same process
//! with ZAP and with a memcpy of the same number of bytes (the physical
//! floor), round after round, so that ratios compare like with like.
//!
//! Each round times a batch of `messages` operations per implementation,
//! after an untimed lead-in, in one of six orders (see [`ORDERS`]), so that
//! whatever the first or last slot of a round costs (cache and frequency
//! state left by the one before) falls on every implementation alike.
//! `warmup` rounds come first and are dropped. The cell whose codec is ZAP
//! measures ZAP against itself: its ratio is the harness's noise floor. A
//! repetition of the cell is a separate process.
//!
//! Placement sweep: a copy's speed depends on where its source and
//! destination sit relative to each other (4 KiB aliasing: ZAP's 1 KiB
//! encode measured 27.5–68.5 ns in one binary, depending only on an
//! allocation made before its buffers). A fixed placement per process made
//! the A/A ratio whatever two placements gave. So every pair of rounds
//! places all implementations afresh: the votes are read from a window that
//! slides by [`SLIDE`] votes a step, every codec instance is built anew (in
//! a heap block of its own) behind a padding allocation that grows by
//! [`PAD_STEP`] bytes a step, the memcpy's destination slides by the same
//! padding, and the instances' blocks sit behind a heap slot that moves each
//! step (cycling through [`SLOTS`]). Each process starts its sweep at a step
//! of its own (its pid), so a cell's processes visit different placements.
//! The pair's second round is the first's mirror: the same step with the
//! codec's and ZAP's roles swapped (built, timed and freed in each other's
//! order), so that the two see the same placements, and an A/A ratio is
//! one only when the harness is fair.

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
/// Timed rounds per cell: three turns of [`ORDERS`], each order a pair.
const ROUNDS: u64 = 18;
/// Votes the source window slides a round (a vote's size is not a multiple of
/// 64, so the sweep visits many offsets modulo 4 KiB).
pub const SLIDE: usize = 5;
/// Windows of votes the sweep cycles through.
const WINDOWS: usize = 64;
/// Slots the instances' own place cycles through, one a round.
const SLOTS: usize = 16;
use records::subject::PAD_STEP;

/// What a round times, in the order of one of [`ORDERS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Codec,
    Zap,
    Memcpy,
}

/// The orders rounds time their slots in, one a pair of rounds in turn;
/// the pair's second round swaps the codec and ZAP (see [`run`]). So each
/// implementation is timed first, between the other two and last equally
/// often. NOTE: with two orders (codec, ZAP, memcpy and its reverse) ZAP
/// was always the middle batch and the codec never.
const ORDERS: [[Slot; 3]; 3] = {
    use Slot::*;
    [[Codec, Zap, Memcpy], [Memcpy, Codec, Zap], [Codec, Memcpy, Zap]]
};

/// `order` with the codec's and ZAP's places swapped.
fn mirrored(order: [Slot; 3]) -> [Slot; 3] {
    order.map(|s| match s {
        Slot::Codec => Slot::Zap,
        Slot::Zap => Slot::Codec,
        Slot::Memcpy => Slot::Memcpy,
    })
}

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
    c: Box<C>,
    c_peer: Box<C>,
    z: Box<ZapCodec>,
    z_peer: Box<ZapCodec>,
    _pad: Vec<u8>,
}

impl<C: Codec> Placed<C> {
    /// The instances, each in a heap block of its own allocated in the
    /// round's order, so that a mirrored round swaps where the codec's and
    /// ZAP's builder state sits as well as their buffers.
    fn new(pad: usize, zap_first: bool) -> Placed<C> {
        let pad = black_box(vec![1u8; pad.max(1)]);
        if zap_first {
            let (z, z_peer) = (Box::new(ZapCodec::new()), Box::new(ZapCodec::new()));
            let (c, c_peer) = (Box::new(C::new()), Box::new(C::new()));
            Placed { c, c_peer, z, z_peer, _pad: pad }
        } else {
            let (c, c_peer) = (Box::new(C::new()), Box::new(C::new()));
            let (z, z_peer) = (Box::new(ZapCodec::new()), Box::new(ZapCodec::new()));
            Placed { c, c_peer, z, z_peer, _pad: pad }
        }
    }

    /// Frees the instances in the order they were built (not the fields'),
    /// so that a mirrored round leaves the allocator's free lists mirrored too.
    fn free(self, zap_first: bool) {
        let Placed { c, c_peer, z, z_peer, _pad } = self;
        if zap_first {
            drop((z, z_peer));
            drop((c, c_peer));
        } else {
            drop((c, c_peer));
            drop((z, z_peer));
        }
    }
}

pub fn run<C: Codec>(ctx: Ctx<'_>) -> Result<()> {
    let cell = ctx.cell;
    let n = cell.messages.max(1);
    let total = cell.warmup + ROUNDS;
    let all = DISTINCT + SLIDE * WINDOWS;
    // Where this process's sweep starts: each process (a repetition of the
    // cell) visits placements of its own, so a cell's rounds cover as many
    // placements as it has pairs of rounds; the records name each.
    let start = std::process::id() as usize;
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
        // Rounds go in pairs (counted so that the warm-up rounds end a
        // pair): the second is the first's mirror, the same placement sweep
        // step and order with the codec's and ZAP's roles swapped, their
        // instances built in the other order. NOTE: rounds that each placed
        // anew, alternating which instance was built first every two
        // rounds, left ZAP against itself at 0.94-0.97 for 1 KiB encodes in
        // every process of a run: per round the ratio followed the round's
        // placement (0.86-0.92 in the same five rounds of every process),
        // and the two instances never saw the same placements.
        let k = round as usize + cell.warmup as usize % 2;
        let (place, mirror) = (start + k / 2, k % 2 == 1);
        let order = ORDERS[place % ORDERS.len()];
        let order = if mirror { mirrored(order) } else { order };
        let w = SLIDE * (place % WINDOWS);
        let pad = PAD_STEP * place % 4096;
        let (votes, c_bytes, z_bytes) = (&votes[w..w + DISTINCT], &c_bytes[w..w + DISTINCT], &z_bytes[w..w + DISTINCT]);
        let dst = &mut dst_area[pad..pad + dst_len];
        // The instances themselves (builder state such as the write cursor)
        // sit in a heap slot that moves by a slot's size each round: on the
        // stack they had one address per process, fixed by the environment's
        // size, and one of ZAP's two instances encoded 64 B at 30 ns and the
        // other at 17 ns in every round of one suite run.
        let mut slots: Vec<Option<Placed<C>>> = (0..=place % SLOTS).map(|_| None).collect();
        let zap_first = mirror;
        let p = slots.last_mut().expect("at least one slot").insert(Placed::<C>::new(pad, zap_first));
        // Untimed: buffers reach their steady size before the clock starts,
        // allocated in the instances' order. NOTE: with the codec's buffers
        // always allocated first, the two ZAP instances of ZAP's own cell sat
        // at one offset from each other in every round, and the second's
        // 64 B encode measured 7.08 ns against the first's 6.50 in all five
        // processes of a full run (A/A 0.917); alternated, 0.97-1.01.
        if zap_first {
            encode_all(&mut *p.z, votes)?;
            encode_all(&mut *p.c, votes)?;
        } else {
            encode_all(&mut *p.c, votes)?;
            encode_all(&mut *p.z, votes)?;
        }
        for (i, v) in votes.iter().enumerate() {
            p.c_peer.decode(&c_bytes[i], v, Envelope::Request)?;
            p.z_peer.decode(&z_bytes[i], v, Envelope::Request)?;
        }
        // Untimed lead-in, in the round's order: the first timed batch after
        // the instances are built ran ≈ 8 % slower than the same batch later
        // in the round (ZAP against itself, 64 B), whichever came first.
        let lead = (n / 4).max(1);
        let (mut a, mut b, mut m) = (None, None, None);
        for batch in [lead, n] {
            for what in order {
                match what {
                    Slot::Codec => a = Some(time_codec(&mut *p.c, &mut *p.c_peer, votes, c_bytes, batch)?),
                    Slot::Zap => b = Some(time_codec(&mut *p.z, &mut *p.z_peer, votes, z_bytes, batch)?),
                    Slot::Memcpy => m = Some(time_memcpy(c_bytes, dst, batch)),
                }
            }
        }
        let (Some(a), Some(b), Some(m)) = (a, b, m) else { unreachable!("every order names every slot") };
        if let Some(p) = slots.pop().flatten() {
            p.free(zap_first);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_of_the_orders_and_their_mirrors_puts_each_slot_in_each_place_twice() {
        for slot in [Slot::Codec, Slot::Zap, Slot::Memcpy] {
            for place in 0..3 {
                let times = ORDERS.iter().flat_map(|&o| [o, mirrored(o)]).filter(|o| o[place] == slot).count();
                assert_eq!(times, 2, "{slot:?} at place {place}");
            }
        }
        for o in ORDERS {
            assert_ne!(o, mirrored(o), "a mirror swaps the codec and ZAP");
        }
    }
}
