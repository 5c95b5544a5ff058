//! What is on disk and what of it is held: parts, their column blocks, the
//! tables made of them, and the cache of decoded granules.
//!
//! # Layout
//! - [`part`]: the part format, its streaming writer and its reader.
//! - [`codec`]: compressed blocks (LZ4; Delta + LZ4; LowCardinality keys;
//!   stored raw when LZ4 saves under 3 %).
//! - [`table`]: a table's parts, inserts, k-way merges, crash recovery, the
//!   background merger.
//! - [`cache`]: decoded granules of small scans, under a byte budget.
//! - [`name`]: table and column names are identifiers, never paths.
//! - [`failpoint`]: named steps of the write paths where tests kill, hold or fail.

pub mod cache;
pub mod codec;
pub mod failpoint;
pub mod name;
pub mod part;
pub mod table;
