//! Looking into runs beyond their tables.
//!
//! # Layout
//! - [`trace`]: loading, checking and reviewing dhat traces (`workbench
//!   trace`): the `trace` crate, re-exported where the CLI has always named it.
//! - [`compare`]: two runs of one experiment, benchstat-style (`workbench compare`).

pub mod compare;
pub use ::trace;
