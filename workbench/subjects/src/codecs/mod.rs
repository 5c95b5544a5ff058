//! One module per codec, each with the same shape: a type implementing
//! [`Codec`]. Adding a codec is its line in [`probe::registry::Codec`] (name,
//! label, idiom mark), a copy of a module here, and the arm of [`run_with`]
//! the compiler then asks for.
//!
//! PERF: every implementation marks `encode` and `decode`
//! `#[inline(always)]`, so that a timing loop measures the codec and not a
//! call into it, as its memcpy floor is one call. Left to LLVM, ZAP's were
//! calls: 5.1 and 4.7 ns for the bare vote, 4.3 and 4.3 ns inlined (2
//! processes × 15 rounds each); the same call was in every codec's time.

use crate::vote::VoteData;
use anyhow::Result;
use probe::registry;

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
