//! Protocol Buffers with prost, two rows. `protobuf`: as its users write it,
//! the generated struct (owning `Vec<u8>` fields) built per message, encoded
//! into a reused buffer and decoded into a fresh struct. `protobuf-reuse`:
//! prost's documented way to keep allocation off the path, one message value
//! reused both ways: its fields overwritten in place before `encode`, and
//! `clear` + `merge` to decode into the capacity it already has (prost still
//! copies each bytes field through `copy_to_bytes`, one allocation each).
//! `protobuf-bytes`: prost with `bytes::Bytes` fields, decoded from a
//! `Bytes` buffer, so that every bytes field is a slice of the frame rather
//! than a copy. The frame arrives in a reused receive buffer (`BytesMut`,
//! as a network read would fill it) and the outgoing fields are slices of a
//! reused staging buffer; both reclaim their memory once the message drops.

use super::generated::{pb, pb_bytes};
use super::{Codec, Envelope};
use crate::vote::{same_bytes, VoteData};
use anyhow::{ensure, Result};
use prost::Message;

/// The generated struct for a vote, owning copies of its bytes (as prost users build it).
pub(crate) fn to_pb(v: &VoteData) -> pb::Vote {
    use pb::Vote;
    Vote {
        round: v.round,
        block_hash: v.block_hash.to_vec(),
        voter_id: v.voter_id.to_vec(),
        signature: v.signature.to_vec(),
        timestamp: v.timestamp,
        vote_type: u32::from(v.vote_type),
        payload: v.payload.clone(),
    }
}

/// Every field equal to the expected vote.
pub(crate) fn same(m: &pb::Vote, e: &VoteData) -> bool {
    m.round == e.round
        && m.block_hash == e.block_hash
        && m.voter_id == e.voter_id
        && m.signature == e.signature
        && m.timestamp == e.timestamp
        && m.vote_type == u32::from(e.vote_type)
        && same_bytes(&m.payload, &e.payload)
}

pub struct Protobuf {
    buf: Vec<u8>,
}

impl Codec for Protobuf {
    const ID: registry::Codec = registry::Codec::Protobuf;

    fn new() -> Self {
        Protobuf { buf: Vec::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        let m = to_pb(v);
        self.buf.clear();
        m.encode(&mut self.buf)?;
        Ok(&self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        let m = pb::Vote::decode(bytes)?;
        ensure!(same(&m, e), "decoded vote differs from the one encoded");
        Ok(())
    }
}

pub struct ProtobufReuse {
    buf: Vec<u8>,
    out: pb::Vote,
    inbox: pb::Vote,
}

/// Overwrites every field of `m` with `v`, reusing the fields' capacity.
fn fill(m: &mut pb::Vote, v: &VoteData) {
    let put = |dst: &mut Vec<u8>, src: &[u8]| {
        dst.clear();
        dst.extend_from_slice(src);
    };
    m.round = v.round;
    put(&mut m.block_hash, &v.block_hash);
    put(&mut m.voter_id, &v.voter_id);
    put(&mut m.signature, &v.signature);
    m.timestamp = v.timestamp;
    m.vote_type = u32::from(v.vote_type);
    put(&mut m.payload, &v.payload);
}

impl Codec for ProtobufReuse {
    const ID: registry::Codec = registry::Codec::ProtobufReuse;

    fn new() -> Self {
        ProtobufReuse { buf: Vec::new(), out: pb::Vote::default(), inbox: pb::Vote::default() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        fill(&mut self.out, v);
        self.buf.clear();
        self.out.encode(&mut self.buf)?;
        Ok(&self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        // NOTE: `clear` empties the byte fields but keeps their capacity, and
        // prost's `merge` of a bytes field into a `Vec` reuses it.
        self.inbox.clear();
        self.inbox.merge(bytes)?;
        ensure!(same(&self.inbox, e), "decoded vote differs from the one encoded");
        Ok(())
    }
}

pub struct ProtobufBytes {
    buf: Vec<u8>,
    /// Outgoing field bytes, sliced into the message's `Bytes` fields.
    staging: bytes::BytesMut,
    /// Incoming frames, frozen into the `Bytes` that prost decodes from.
    rx: bytes::BytesMut,
}

impl Codec for ProtobufBytes {
    const ID: registry::Codec = registry::Codec::ProtobufBytes;

    fn new() -> Self {
        ProtobufBytes { buf: Vec::new(), staging: bytes::BytesMut::new(), rx: bytes::BytesMut::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        // NOTE: `reserve` reclaims the staging buffer in place when no slice
        // of it is alive (the previous message was dropped below).
        self.staging.reserve(128 + v.payload.len());
        self.staging.extend_from_slice(&v.block_hash);
        let block_hash = self.staging.split().freeze();
        self.staging.extend_from_slice(&v.voter_id);
        let voter_id = self.staging.split().freeze();
        self.staging.extend_from_slice(&v.signature);
        let signature = self.staging.split().freeze();
        self.staging.extend_from_slice(&v.payload);
        let payload = self.staging.split().freeze();
        let m = pb_bytes::Vote {
            round: v.round,
            block_hash,
            voter_id,
            signature,
            timestamp: v.timestamp,
            vote_type: u32::from(v.vote_type),
            payload,
        };
        self.buf.clear();
        m.encode(&mut self.buf)?;
        Ok(&self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        self.rx.reserve(bytes.len());
        self.rx.extend_from_slice(bytes);
        let frame = self.rx.split().freeze();
        let m = pb_bytes::Vote::decode(frame)?;
        ensure!(
            m.round == e.round
                && m.block_hash[..] == e.block_hash
                && m.voter_id[..] == e.voter_id
                && m.signature[..] == e.signature
                && m.timestamp == e.timestamp
                && m.vote_type == u32::from(e.vote_type)
                && same_bytes(&m.payload, &e.payload),
            "decoded vote differs from the one encoded"
        );
        Ok(())
    }
}
