//! Every codec and transport stack a subject measures: ZAP and its peers,
//! the same vote through each, in process and over loopback.
//!
//! Apart from the `subject` binary (crate `subjects`) because that binary
//! is built once per allocator (dhat, events, jemalloc, the system's): the
//! allocator is a feature of the probe, and a feature change compiles again
//! everything that links the probe. This crate links neither the probe nor
//! anything above it, so its code (the generated schemas, tonic, quinn,
//! capnp-rpc: most of the subject's build) compiles once and every
//! allocator build links the same object code. What a subject needs of the
//! probe here (tagging a server thread as the server side) it hands in as a
//! hook ([`transports::on_server_thread`]).
//!
//! Method (the same for every codec): *encode* produces the bytes of a
//! `Vote` into the codec's buffer; *decode* obtains and validates every
//! field of the bytes and compares it to the vote that was encoded; a
//! *round trip* is client encode → server decode → server encode of the
//! reply → client decode, in one process (codecs) or over loopback
//! (transports).
//!
//! # Layout
//! - [`vote`]: seeded `Vote` values, identical for every codec.
//! - [`codecs`]: one module per codec, same shape; the registry is [`codecs::run_with`].
//! - [`transports`]: one module per transport stack, same shape; the registry is [`transports::run_with`].
//!
//! Schemas live beside their modules (`src/codecs/vote.{fbs,capnp,proto}`)
//! and are compiled by each ecosystem's generator in `build.rs`.

pub mod codecs;
pub mod transports;
pub mod vote;
