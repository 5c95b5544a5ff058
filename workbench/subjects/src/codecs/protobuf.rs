//! Protocol Buffers with prost, as its users write it: the generated struct
//! owns its bytes (`Vec<u8>` fields), encoded into a reused buffer and
//! decoded into a fresh struct.

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
