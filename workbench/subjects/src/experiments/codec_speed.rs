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

use super::Ctx;
use crate::codecs::zap::ZapCodec;
use crate::codecs::{Codec, Side};
use crate::vote::VoteData;
use anyhow::Result;
use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;

pub const NAME: &str = "codec-speed";

/// Distinct votes cycled through, so a batch does not re-encode one message.
const DISTINCT: usize = 64;
/// Timed rounds per cell.
const ROUNDS: u64 = 15;

#[derive(Serialize)]
struct Record {
    round: u64,
    /// `codec` (the cell's codec), `zap`, or `memcpy`.
    implementation: &'static str,
    op: &'static str,
    ns_per_op: f64,
    ops: u64,
    wire_bytes: u64,
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
        wire = black_box(c.encode(&votes[i % DISTINCT], Side::Request)?).len();
    }
    let enc = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    for i in 0..n as usize {
        peer.decode(black_box(&encoded[i % DISTINCT]), &votes[i % DISTINCT], Side::Request)?;
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
    votes.iter().map(|v| Ok(c.encode(v, Side::Request)?.to_vec())).collect()
}

pub fn run<C: Codec>(ctx: Ctx<'_>) -> Result<()> {
    let cell = ctx.cell;
    let n = cell.messages.max(1);
    let votes: Vec<VoteData> = (0..DISTINCT as u64)
        .map(|i| {
            let mut v = VoteData::with_payload(cell.payload);
            v.set(cell.seed, i);
            v
        })
        .collect();
    let (mut c, mut c_peer) = (C::new(), C::new());
    let (mut z, mut z_peer) = (ZapCodec::new(), ZapCodec::new());
    let c_bytes = encode_all(&mut c, &votes)?;
    let z_bytes = encode_all(&mut z, &votes)?;
    let mut dst = vec![0u8; c_bytes.iter().chain(&z_bytes).map(Vec::len).max().unwrap_or(0)];
    let total = cell.warmup + ROUNDS;
    let mut out = Vec::new();
    for round in 0..total {
        let (a, b, m) = if round % 2 == 0 {
            let a = time_codec(&mut c, &mut c_peer, &votes, &c_bytes, n)?;
            let b = time_codec(&mut z, &mut z_peer, &votes, &z_bytes, n)?;
            (a, b, time_memcpy(&c_bytes, &mut dst, n))
        } else {
            let m = time_memcpy(&c_bytes, &mut dst, n);
            let b = time_codec(&mut z, &mut z_peer, &votes, &z_bytes, n)?;
            (time_codec(&mut c, &mut c_peer, &votes, &c_bytes, n)?, b, m)
        };
        super::progress(round + 1, total);
        if round < cell.warmup {
            continue;
        }
        let r = round - cell.warmup;
        let rec = |implementation, op, ns_per_op, wire_bytes| Record {
            round: r,
            implementation,
            op,
            ns_per_op,
            ops: n,
            wire_bytes,
        };
        out.push(rec("codec", "encode", a.enc, a.wire));
        out.push(rec("codec", "decode", a.dec, a.wire));
        out.push(rec("zap", "encode", b.enc, b.wire));
        out.push(rec("zap", "decode", b.dec, b.wire));
        out.push(rec("memcpy", "copy", m, a.wire));
    }
    for r in out {
        serde_json::to_writer(&mut *ctx.out, &r)?;
        ctx.out.write_all(b"\n")?;
    }
    Ok(())
}
