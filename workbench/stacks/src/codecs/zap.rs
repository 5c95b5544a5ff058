//! ZAP: build into a reused buffer, read in place.

use super::{Codec, Envelope};
use crate::vote::{same_bytes, VoteData};
use anyhow::{ensure, Result};
use zap::{Builder, Vote};

pub struct ZapCodec {
    builder: Builder,
}

impl Codec for ZapCodec {
    const ID: registry::Codec = registry::Codec::Zap;

    fn new() -> Self {
        ZapCodec { builder: Builder::new() }
    }

    // NOTE: ZAP carries a Vote the same way in both directions; `side` is unused.
    #[inline]
    fn encode(&mut self, v: &VoteData, _side: Envelope) -> Result<&[u8]> {
        let mut b = self.builder.root::<Vote>();
        b.round(v.round);
        b.block_hash(&v.block_hash);
        b.voter_id(&v.voter_id);
        b.signature(&v.signature);
        b.timestamp(v.timestamp);
        b.vote_type(v.vote_type);
        b.payload(&v.payload);
        Ok(b.finish()?)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, _side: Envelope) -> Result<()> {
        let r = zap::read::<Vote>(bytes)?;
        ensure!(r.round() == e.round, "round");
        ensure!(r.block_hash() == &e.block_hash, "block_hash");
        ensure!(r.voter_id() == &e.voter_id, "voter_id");
        ensure!(r.signature() == &e.signature, "signature");
        ensure!(r.timestamp() == e.timestamp, "timestamp");
        ensure!(r.vote_type() == e.vote_type, "vote_type");
        ensure!(same_bytes(r.payload()?, &e.payload), "payload");
        Ok(())
    }
}
