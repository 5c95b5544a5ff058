//! A dataset as the analysis reads it: records as polars frames and typed
//! rows, and the notebooks' typed columns. The run's files, its manifest
//! and the host facts are the runner's ([`runner::data`]), re-exported
//! under the same names.
//!
//! # Layout
//! - [`dataset`]: records ↔ polars frames ↔ Parquet, the runner's sink,
//!   a finished run loaded whole; the runner's files re-exported.
//! - [`rows`]: a dataset's rows read back into the `records` crate's types.
//! - [`columns`]: every dataset's columns as a typed Python module for the
//!   notebooks, generated from the record types.
//! - [`manifest`], [`host`], [`prune`], [`traces`]: the runner's.

pub use runner::data::{host, manifest, prune, traces};

pub mod columns;
pub mod dataset;
pub mod rows;
