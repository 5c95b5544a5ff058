//! The measured side of the workbench: small processes that run one
//! experiment cell against one codec and print their records.
//!
//! A subject is the heap being measured, so this crate links only the codecs
//! and transport stacks (crate `stacks`, compiled once for every allocator
//! build) and the probe — never the analysis stack. The `workbench` CLI builds the
//! `subject` binary once per allocator variant (`--features dhat|jemalloc`,
//! or neither for the system allocator), spawns it with one [`Cell`] as JSON,
//! and reads one JSON object per line from its stdout. Progress goes to
//! stderr as `progress <done> <total>` lines.
//!
//! Measurement method (the same for every codec): *encode* produces the
//! bytes of a `Vote` into the codec's buffer; *decode* obtains and validates
//! every field of the bytes and compares it to the vote that was encoded; a
//! *round trip* is client encode → server decode → server encode of the
//! reply → client decode, in one process, no transport.
//!
//! # Layout
//! - [`vote`], [`codecs`], [`transports`]: the `stacks` crate's, under the
//!   names the experiments and their traces have always used.
//! - [`experiments`]: one module per experiment; the registry is [`experiments::run`].

pub mod experiments;
pub use stacks::{codecs, transports, vote};

pub use probe::Cell;
