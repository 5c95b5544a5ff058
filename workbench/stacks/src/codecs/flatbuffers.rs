//! FlatBuffers, two rows, both with one builder reused across messages
//! (`reset` keeps its buffer) and the verifier run on every read
//! (`flatbuffers::root`). `flatbuffers`: the byte fields as vectors
//! (`[ubyte]`), as most schemas write them. `flatbuffers-struct`: the
//! documented fastest layout for fixed-size fields, arrays inside a struct
//! (`[ubyte:32]`) stored inline in the table (`vote_fixed.fbs`).

use super::generated::fbs::bench::{Vote, VoteArgs};
use super::generated::fbs_fixed::benchfixed::{Keys, VoteFixed, VoteFixedArgs};
use super::{Codec, Envelope};
use crate::vote::{same_bytes, VoteData};
use anyhow::{ensure, Result};
use flatbuffers::{FlatBufferBuilder, Vector};

/// A vector's bytes, or empty for an absent field.
fn data(v: Option<Vector<'_, u8>>) -> &[u8] {
    v.map_or(&[], |v| v.bytes())
}

pub struct FlatBuffers {
    b: FlatBufferBuilder<'static>,
}

impl Codec for FlatBuffers {
    const ID: registry::Codec = registry::Codec::FlatBuffers;

    fn new() -> Self {
        FlatBuffers { b: FlatBufferBuilder::new() }
    }

    #[inline]
    // NOTE: the same table travels both ways; `side` is unused.
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        self.b.reset();
        let block_hash = Some(self.b.create_vector(&v.block_hash));
        let voter_id = Some(self.b.create_vector(&v.voter_id));
        let signature = Some(self.b.create_vector(&v.signature));
        let payload = (!v.payload.is_empty()).then(|| self.b.create_vector(&v.payload));
        let args = VoteArgs {
            round: v.round,
            block_hash,
            voter_id,
            signature,
            timestamp: v.timestamp,
            vote_type: v.vote_type,
            payload,
        };
        let root = Vote::create(&mut self.b, &args);
        self.b.finish(root, None);
        Ok(self.b.finished_data())
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        let r = flatbuffers::root::<Vote>(bytes)?;
        ensure!(r.round() == e.round, "round");
        ensure!(data(r.block_hash()) == e.block_hash, "block_hash");
        ensure!(data(r.voter_id()) == e.voter_id, "voter_id");
        ensure!(data(r.signature()) == e.signature, "signature");
        ensure!(r.timestamp() == e.timestamp, "timestamp");
        ensure!(r.vote_type() == e.vote_type, "vote_type");
        ensure!(same_bytes(data(r.payload()), &e.payload), "payload");
        Ok(())
    }
}

pub struct FlatBuffersStruct {
    b: FlatBufferBuilder<'static>,
}

impl Codec for FlatBuffersStruct {
    const ID: registry::Codec = registry::Codec::FlatBuffersStruct;

    fn new() -> Self {
        FlatBuffersStruct { b: FlatBufferBuilder::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        self.b.reset();
        let keys = Keys::new(&v.block_hash, &v.voter_id, &v.signature);
        let payload = (!v.payload.is_empty()).then(|| self.b.create_vector(&v.payload));
        let args = VoteFixedArgs {
            round: v.round,
            keys: Some(&keys),
            timestamp: v.timestamp,
            vote_type: v.vote_type,
            payload,
        };
        let root = VoteFixed::create(&mut self.b, &args);
        self.b.finish(root, None);
        Ok(self.b.finished_data())
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        let r = flatbuffers::root::<VoteFixed>(bytes)?;
        ensure!(r.round() == e.round, "round");
        let k = r.keys().ok_or_else(|| anyhow::anyhow!("keys missing"))?;
        ensure!(<[u8; 32]>::from(k.block_hash()) == e.block_hash, "block_hash");
        ensure!(<[u8; 32]>::from(k.voter_id()) == e.voter_id, "voter_id");
        ensure!(<[u8; 64]>::from(k.signature()) == e.signature, "signature");
        ensure!(r.timestamp() == e.timestamp, "timestamp");
        ensure!(r.vote_type() == e.vote_type, "vote_type");
        ensure!(same_bytes(data(r.payload()), &e.payload), "payload");
        Ok(())
    }
}
