//! ZAP: a flat, zero-copy wire format, length-prefixed framing, and an RPC
//! layer with promise pipelining — byte-compatible with the Go reference.
//!
//! This crate is a measured subject of the workbench: it depends on nothing
//! beyond `std`, never touches the analysis stack, and its hot paths
//! (building a message into a reused buffer, parsing and reading every field,
//! a framed request/response loop) perform **zero heap allocations** after
//! warm-up. Tests in `tests/alloc_*.rs` assert those counts exactly with dhat.
//! It is not a general serialization framework: no schema evolution rules
//! beyond "fields you don't know are zero", no compression, no encryption.
//!
//! # The format
//!
//! All integers are little-endian. A message is a 16-byte header, the root
//! struct's fixed section, then variable data (text, bytes, lists, nested
//! structs) in the order it was set:
//!
//! ```text
//!  0       4       6       8              12             16
//!  +-------+-------+-------+--------------+--------------+------------------+-----------+
//!  | "ZAP\0" | ver | flags | root offset  | total size   | root struct …    | var data… |
//!  +-------+-------+-------+--------------+--------------+------------------+-----------+
//!           u16     u16     u32 absolute   u32 bytes
//! flags: bit0 compressed, bit1 encrypted, bit2 signed; high byte = message type
//! ```
//!
//! A struct's fields sit at offsets fixed by its schema: each scalar aligned
//! to its own size (1, 2, 4 or 8), fixed byte arrays inline (alignment 1),
//! text/bytes/lists as an 8-byte slot `{rel: u32, len: u32}` (alignment 4),
//! nested structs as a 4-byte `rel` (alignment 4); the struct size is
//! rounded up to 8. Pointers are **self-relative**: the target is at
//! `slot position + rel`, and `rel = 0` means null. Text and bytes are
//! appended unaligned, lists aligned to their element size, nested structs
//! to 8. Offsets are computed once, by [`zap_struct!`], from the declaration.
//!
//! The golden vector (version 1; root of 24 bytes: u32 `0xDEADBEEF` at 0,
//! text `"zap"` at 8, bytes `01 02 03 04` at 16), 47 bytes:
//!
//! ```text
//! 5a415000 0100 0000 10000000 2f000000   header: magic, v1, flags 0, root 16, size 47
//! efbeadde 00000000                      u32 at 0, padding
//! 10000000 03000000                      text slot at 24: rel 16 -> 40, len 3
//! 0b000000 04000000                      bytes slot at 32: rel 11 -> 43, len 4
//! 7a6170 01020304                        "zap", 01 02 03 04
//! ```
//!
//! # Rules for bad input
//!
//! [`parse`] checks length ≥ 16, the magic, the version (1 or 2), that no
//! compressed or encrypted flag is set, and 16 ≤ size ≤ buffer length. A
//! typed root checks that its whole fixed section lies inside the message
//! after the header; scalar and inline-array reads are then infallible.
//! Every pointer read checks that `slot + rel + len` lies inside the message;
//! since `rel` is unsigned and non-zero, targets are always after the slot
//! (so after the header, and cycles are impossible). Failures are [`Error`]
//! values naming the field and offsets; nothing panics, reads out of bounds
//! or allocates, whatever the bytes (fuzzed: `fuzz/`). Documented defaults:
//! a null text/bytes/list reads as empty, a null nested struct as `None`,
//! a field past the end of an older, shorter struct as zero. Text is
//! returned as `&str` only after UTF-8 validation;
//! [`StructReader::bytes`] is the unchecked accessor.
//!
//! # Pipelining
//!
//! See [`rpc`]: calls carry promise ids; a call may target an unresolved
//! earlier promise; the server runs calls in order per connection and feeds
//! the target's result to the dependent call; a failed target fails its
//! dependents with 424; answers live until `finish`, in a bounded table.
//!
//! ```
//! use zap::rpc::{Client, Dispatcher, Limits, ServerConn};
//! use zap::{duplex::MemPipe, frame::{FrameReader, FrameWriter}};
//!
//! let mut d = Dispatcher::new();
//! d.register(1, |c, out| { out.extend_from_slice(c.payload); Ok(()) });
//! d.register(2, |c, out| { out.extend(c.target.unwrap_or(&[]).iter().map(|b| b + 1)); Ok(()) });
//! let (up, down) = (MemPipe::new(), MemPipe::new());
//! let mut c = Client::new(down.clone(), up.clone());
//! let v = c.call(1, &[1, 2]).unwrap();
//! let w = c.call_on(v, 2, &[]).unwrap(); // does not wait for v
//! c.flush().unwrap();
//! let mut server = ServerConn::new(Limits::default());
//! server.serve_available(&d, &mut FrameReader::new(up), &mut FrameWriter::new(down)).unwrap();
//! assert_eq!(c.wait(w).unwrap().body, &[2, 3]);
//! ```
//!
//! # Layout
//! - [`wire`]: header constants, [`parse`], [`Message`], the bounds-checked [`StructReader`].
//! - [`builder`]: [`Builder`] over a growable `Vec` or a caller's slice, [`StructBuilder`].
//! - [`schema`]: field types ([`Text`], [`Bytes`], [`List`], [`Ptr`], scalars, arrays) and [`zap_struct!`].
//! - [`messages`]: [`Vote`] and the RPC [`Request`]/[`Response`] envelopes.
//! - [`frame`]: `[u32 len][message]` framing with a size limit (a buffered,
//!   read-ahead reader: one system call per batch of frames), and [`frame::BufPool`].
//! - [`rpc`]: the dispatcher, per-connection server state, and the pipelining client.
//! - [`duplex`]: an in-memory pipe for tests and in-process measurement.
//! - [`fuzzing`]: the fuzz target's body, shared with the corpus test.

#![forbid(unsafe_code)]

pub mod builder;
pub mod duplex;
mod error;
pub mod frame;
pub mod fuzzing;
pub mod messages;
pub mod rpc;
pub mod schema;
pub mod wire;

pub use builder::{Builder, SliceStorage, Storage, StructBuilder};
pub use error::Error;
pub use messages::{Request, RequestReader, Response, ResponseReader, Vote, VoteBuilder, VoteReader};
pub use schema::{Bytes, FieldType, List, ListReader, Ptr, Scalar, Schema, Text};
pub use wire::{parse, Message, StructReader};

/// Parses `buf` and returns its root as a `T` reader.
#[inline]
pub fn read<T: Schema>(buf: &[u8]) -> Result<T::Reader<'_>, Error> {
    parse(buf)?.root::<T>()
}
