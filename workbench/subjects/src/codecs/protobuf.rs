//! Protocol Buffers with prost, two rows. `protobuf`: as its users write it,
//! the generated struct (owning `Vec<u8>` fields) built per message, encoded
//! into a reused buffer and decoded into a fresh struct. `protobuf-reuse`:
//! prost's documented way to keep allocation off the path, one message value
//! reused both ways: its fields overwritten in place before `encode`, and
//! `clear` + `merge` to decode into the capacity it already has.

use super::generated::pb;
use super::{Codec, Side};
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
    const NAME: &'static str = "protobuf";

    fn new() -> Self {
        Protobuf { buf: Vec::new() }
    }

    fn encode(&mut self, v: &VoteData, _side: Side) -> Result<&[u8]> {
        let m = to_pb(v);
        self.buf.clear();
        m.encode(&mut self.buf)?;
        Ok(&self.buf)
    }

    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Side) -> Result<()> {
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
    const NAME: &'static str = "protobuf-reuse";

    fn new() -> Self {
        ProtobufReuse { buf: Vec::new(), out: pb::Vote::default(), inbox: pb::Vote::default() }
    }

    fn encode(&mut self, v: &VoteData, _side: Side) -> Result<&[u8]> {
        fill(&mut self.out, v);
        self.buf.clear();
        self.out.encode(&mut self.buf)?;
        Ok(&self.buf)
    }

    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Side) -> Result<()> {
        // NOTE: `clear` empties the byte fields but keeps their capacity, and
        // prost's `merge` of a bytes field into a `Vec` reuses it.
        self.inbox.clear();
        self.inbox.merge(bytes)?;
        ensure!(same(&self.inbox, e), "decoded vote differs from the one encoded");
        Ok(())
    }
}
