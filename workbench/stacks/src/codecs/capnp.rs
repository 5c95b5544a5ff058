//! Cap'n Proto, two rows, both serializing into a reused `Vec`. `capnp`: a
//! message builder per message, as the crate's examples and most users do
//! (`Builder::new_default`), read with `read_message_from_flat_slice` (no
//! copy of the segments, a segment table on the heap). `capnp-scratch`: the
//! documented zero-allocation pair, building into a reused scratch buffer
//! (`ScratchSpaceHeapAllocator`) and reading with
//! `read_message_from_flat_slice_no_alloc`.

use super::generated::vote_capnp::vote;
use super::{Codec, Envelope};
use crate::vote::{same_bytes, VoteData};
use anyhow::{ensure, Result};
use capnp::message::{Allocator, Builder, ReaderOptions, ScratchSpaceHeapAllocator};

fn fill<A: Allocator>(msg: &mut Builder<A>, v: &VoteData) {
    set(msg.init_root::<vote::Builder<'_>>(), v);
}

/// Sets every field of a vote builder (also the capnp-rpc row's params and results).
pub(crate) fn set(mut b: vote::Builder<'_>, v: &VoteData) {
    b.set_round(v.round);
    b.set_block_hash(&v.block_hash);
    b.set_voter_id(&v.voter_id);
    b.set_signature(&v.signature);
    b.set_timestamp(v.timestamp);
    b.set_vote_type(v.vote_type);
    if !v.payload.is_empty() {
        b.set_payload(&v.payload);
    }
}

/// Fills a message built on any allocator and serializes it into `buf`.
fn encode_into<'b, A: Allocator>(mut msg: Builder<A>, v: &VoteData, buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
    fill(&mut msg, v);
    buf.clear();
    capnp::serialize::write_message(&mut *buf, &msg)?;
    Ok(buf)
}

fn check(bytes: &[u8], e: &VoteData) -> Result<()> {
    let mut slice = bytes;
    let msg = capnp::serialize::read_message_from_flat_slice(&mut slice, ReaderOptions::new())?;
    same(msg.get_root::<vote::Reader<'_>>()?, e)
}

/// Checks every field of a vote reader against `e` (also used by the capnp-rpc row).
pub(crate) fn same(r: vote::Reader<'_>, e: &VoteData) -> Result<()> {
    ensure!(r.get_round() == e.round, "round");
    ensure!(r.get_block_hash()? == e.block_hash, "block_hash");
    ensure!(r.get_voter_id()? == e.voter_id, "voter_id");
    ensure!(r.get_signature()? == e.signature, "signature");
    ensure!(r.get_timestamp() == e.timestamp, "timestamp");
    ensure!(r.get_vote_type() == e.vote_type, "vote_type");
    let payload = if r.has_payload() { r.get_payload()? } else { &[] };
    ensure!(same_bytes(payload, &e.payload), "payload");
    Ok(())
}

pub struct Capnp {
    buf: Vec<u8>,
}

impl Codec for Capnp {
    const ID: registry::Codec = registry::Codec::Capnp;

    fn new() -> Self {
        Capnp { buf: Vec::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        encode_into(Builder::new_default(), v, &mut self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        check(bytes, e)
    }
}

/// The no-allocation reader: segment boundaries are parsed from the slice
/// on each access instead of into a table.
fn check_no_alloc(bytes: &[u8], e: &VoteData) -> Result<()> {
    let mut slice = bytes;
    let msg = capnp::serialize::read_message_from_flat_slice_no_alloc(&mut slice, ReaderOptions::new())?;
    same(msg.get_root::<vote::Reader<'_>>()?, e)
}

pub struct CapnpScratch {
    buf: Vec<u8>,
    scratch: Vec<capnp::Word>,
}

impl Codec for CapnpScratch {
    const ID: registry::Codec = registry::Codec::CapnpScratch;

    fn new() -> Self {
        CapnpScratch { buf: Vec::new(), scratch: Vec::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        // PERF: the scratch space must hold the whole message or capnp falls
        // back to the heap; it grows once, on the first message of a size.
        let words = (v.payload.len() + 512) / 8;
        if self.scratch.len() < words {
            self.scratch = capnp::Word::allocate_zeroed_vec(words);
        }
        let alloc = ScratchSpaceHeapAllocator::new(capnp::Word::words_to_bytes_mut(&mut self.scratch));
        encode_into(Builder::new(alloc), v, &mut self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        check_no_alloc(bytes, e)
    }
}
