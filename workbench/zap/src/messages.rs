//! The message types of the workbench: the benchmark `Vote` and the RPC envelopes.

use crate::schema::Bytes;

crate::zap_struct! {
    /// The consensus vote of the benchmark paper: 145 bytes of fixed payload,
    /// plus an optional `payload` for size sweeps.
    pub struct Vote / VoteReader / VoteBuilder {
        round: u64,
        block_hash: [u8; 32],
        voter_id: [u8; 32],
        signature: [u8; 64],
        timestamp: u64,
        vote_type: u8,
        /// Extra bytes for size sweeps (64 B … 1 MiB); null when absent.
        payload: Bytes,
    }
}

crate::zap_struct! {
    /// An RPC call. `target` names the promise of an earlier call on the same
    /// connection whose result this call consumes (0 = none).
    pub struct Request / RequestReader / RequestBuilder {
        method: u32,
        promise: u32,
        target: u32,
        capability: Bytes,
        payload: Bytes,
    }
}

crate::zap_struct! {
    /// The answer to one call, matched to it by `promise`.
    pub struct Response / ResponseReader / ResponseBuilder {
        status: u32,
        promise: u32,
        /// NOTE: offset 8 is unused by the envelope; the body sits at 12.
        reserved: u32,
        body: Bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_documented_offsets() {
        assert_eq!(
            (Vote::round, Vote::block_hash, Vote::voter_id, Vote::signature, Vote::timestamp, Vote::vote_type),
            (0, 8, 40, 72, 136, 144)
        );
        assert_eq!((Vote::payload, Vote::SIZE), (148, 160));
        assert_eq!(
            (Request::method, Request::promise, Request::target, Request::capability, Request::payload, Request::SIZE),
            (0, 4, 8, 12, 20, 32)
        );
        assert_eq!((Response::status, Response::promise, Response::body, Response::SIZE), (0, 4, 12, 24));
    }
}
