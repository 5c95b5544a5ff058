//! Protocol Buffers with prost, as its users write it: the generated struct
//! owns its bytes (`Vec<u8>` fields), encoded into a reused buffer and
//! decoded into a fresh struct.

use super::generated::pb;
use super::{Codec, Side};
use crate::vote::VoteData;
use anyhow::{ensure, Result};
use prost::Message;

pub struct Protobuf {
    buf: Vec<u8>,
}

impl Codec for Protobuf {
    const NAME: &'static str = "protobuf";

    fn new() -> Self {
        Protobuf { buf: Vec::new() }
    }

    fn encode(&mut self, v: &VoteData, _side: Side) -> Result<&[u8]> {
        let m = pb::Vote {
            round: v.round,
            block_hash: v.block_hash.to_vec(),
            voter_id: v.voter_id.to_vec(),
            signature: v.signature.to_vec(),
            timestamp: v.timestamp,
            vote_type: u32::from(v.vote_type),
            payload: v.payload.clone(),
        };
        self.buf.clear();
        m.encode(&mut self.buf)?;
        Ok(&self.buf)
    }

    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Side) -> Result<()> {
        let m = pb::Vote::decode(bytes)?;
        ensure!(m.round == e.round, "round");
        ensure!(m.block_hash == e.block_hash, "block_hash");
        ensure!(m.voter_id == e.voter_id, "voter_id");
        ensure!(m.signature == e.signature, "signature");
        ensure!(m.timestamp == e.timestamp, "timestamp");
        ensure!(m.vote_type == u32::from(e.vote_type), "vote_type");
        ensure!(m.payload == e.payload, "payload");
        Ok(())
    }
}
