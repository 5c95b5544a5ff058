//! One module per codec, each with the same shape: a type implementing
//! [`Codec`]. Adding a codec is copying a module and adding one line to
//! [`run_with`] and [`NAMES`].

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
pub enum Side {
    Request,
    Response,
}

/// The same few operations for every codec.
pub trait Codec {
    /// Name used in specs, records and tables.
    const NAME: &'static str;
    fn new() -> Self;
    /// Encodes `v` into the codec's own buffer and returns the bytes.
    fn encode(&mut self, v: &VoteData, side: Side) -> Result<&[u8]>;
    /// Obtains and validates every field of `bytes` and compares it to `expect`.
    fn decode(&mut self, bytes: &[u8], expect: &VoteData, side: Side) -> Result<()>;
}

/// Every registered codec, in table order.
pub const NAMES: &[&str] = &[
    zap::ZapCodec::NAME,
    flatbuffers::FlatBuffers::NAME,
    flatbuffers::FlatBuffersStruct::NAME,
    capnp::Capnp::NAME,
    capnp::CapnpScratch::NAME,
    protobuf::Protobuf::NAME,
    protobuf::ProtobufReuse::NAME,
    protobuf::ProtobufBytes::NAME,
    json::JsonRpc::NAME,
    json::JsonRpcBorrowed::NAME,
];

/// Something generic over the codec type, run for a codec named at run time.
pub trait WithCodec {
    type Out;
    fn run<C: Codec>(self) -> Self::Out;
}

/// Runs `f` with the codec called `name`; `None` for an unknown name.
pub fn run_with<F: WithCodec>(name: &str, f: F) -> Option<F::Out> {
    Some(match name {
        zap::ZapCodec::NAME => f.run::<zap::ZapCodec>(),
        flatbuffers::FlatBuffers::NAME => f.run::<flatbuffers::FlatBuffers>(),
        flatbuffers::FlatBuffersStruct::NAME => f.run::<flatbuffers::FlatBuffersStruct>(),
        capnp::Capnp::NAME => f.run::<capnp::Capnp>(),
        capnp::CapnpScratch::NAME => f.run::<capnp::CapnpScratch>(),
        protobuf::Protobuf::NAME => f.run::<protobuf::Protobuf>(),
        protobuf::ProtobufReuse::NAME => f.run::<protobuf::ProtobufReuse>(),
        protobuf::ProtobufBytes::NAME => f.run::<protobuf::ProtobufBytes>(),
        json::JsonRpc::NAME => f.run::<json::JsonRpc>(),
        json::JsonRpcBorrowed::NAME => f.run::<json::JsonRpcBorrowed>(),
        _ => return None,
    })
}
