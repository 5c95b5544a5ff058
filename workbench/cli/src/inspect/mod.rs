//! Looking into runs beyond their tables.
//!
//! # Layout
//! - [`trace`]: loading, checking and reviewing dhat traces (`workbench trace`).
//! - [`compare`]: two runs of one experiment, benchstat-style (`workbench compare`).

pub mod compare;
pub mod trace;
