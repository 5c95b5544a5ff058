//! One module per codec, each with the same shape: a type implementing
//! [`Codec`]. Adding a codec is its line in [`registry::Codec`] (name,
//! label, idiom mark), a copy of a module here, and the arm of [`run_with`]
//! the compiler then asks for.
//!
//! PERF: every implementation marks `encode` and `decode` `#[inline]`, the
//! hint a library gives its small functions, so that a timing loop measures
//! the codec rather than a call into it wherever the compiler finds it small
//! enough to inline (its memcpy floor is one call). Measured in the suite's
//! own build (2 processes × 15 rounds a binary, bare vote): ZAP's encode 5.1
//! → 4.2 ns with the hint (its decode stays a call, 4.7 ns); FlatBuffers'
//! and prost's encodes gain too (45 → 38, 49 → 44 ns), no codec loses.
//! `#[inline(always)]` also inlined ZAP's decode (4.4 ns) but slowed
//! JSON-RPC's encode (≈ 345 → 400 ns) and FlatBuffers' decode (≈ 85 → 95
//! ns): a harness must not handicap the peers.

use crate::vote::VoteData;
use anyhow::Result;

pub mod capnp;
pub mod flatbuffers;
pub(crate) mod generated;
pub mod json;
pub mod protobuf;
pub mod zap;

/// Which envelope a message travels in (JSON-RPC distinguishes them; ZAP does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    Request,
    Response,
}

/// The same few operations for every codec.
pub trait Codec {
    /// Its entry in the registry.
    const ID: registry::Codec;
    /// Name used in specs, records and tables.
    const NAME: &'static str = Self::ID.name();
    fn new() -> Self;
    /// Encodes `v` into the codec's own buffer and returns the bytes.
    fn encode(&mut self, v: &VoteData, side: Envelope) -> Result<&[u8]>;
    /// Obtains and validates every field of `bytes` and compares it to `expect`.
    fn decode(&mut self, bytes: &[u8], expect: &VoteData, side: Envelope) -> Result<()>;
}

/// Something generic over the codec type, run for a codec named at run time.
pub trait WithCodec {
    type Out;
    fn run<C: Codec>(self) -> Self::Out;
}

/// Runs `f` with the codec `id`.
pub fn run_with<F: WithCodec>(id: registry::Codec, f: F) -> F::Out {
    use registry::Codec as C;
    match id {
        C::Zap => f.run::<zap::ZapCodec>(),
        C::FlatBuffers => f.run::<flatbuffers::FlatBuffers>(),
        C::FlatBuffersStruct => f.run::<flatbuffers::FlatBuffersStruct>(),
        C::Capnp => f.run::<capnp::Capnp>(),
        C::CapnpScratch => f.run::<capnp::CapnpScratch>(),
        C::Protobuf => f.run::<protobuf::Protobuf>(),
        C::ProtobufReuse => f.run::<protobuf::ProtobufReuse>(),
        C::ProtobufBytes => f.run::<protobuf::ProtobufBytes>(),
        C::JsonRpc => f.run::<json::JsonRpc>(),
        C::JsonRpcBorrowed => f.run::<json::JsonRpcBorrowed>(),
    }
}
