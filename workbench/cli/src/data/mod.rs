//! What a run leaves on disk and how it is found again: the records
//! ([`dataset`]), what the run says about itself ([`manifest`]) and the
//! machine facts it reads ([`host`]).
//!
//! # Layout
//! - [`dataset`]: JSON-lines records ↔ polars frames ↔ Parquet; finding runs
//!   ([`dataset::latest_run`], and [`dataset::best_run`]: full, else quick).
//! - [`rows`]: a dataset's rows read back into the `records` crate's types.
//! - [`columns`]: every dataset's columns as a typed Python module for the
//!   notebooks, generated from the record types.
//! - [`manifest`]: what a run records about the machine and the build.
//! - [`host`]: git state, rustc, CPU, kernel, dates.

pub mod columns;
pub mod dataset;
pub mod host;
pub mod manifest;
pub mod rows;
