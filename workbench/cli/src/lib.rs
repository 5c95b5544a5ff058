//! The workbench CLI as a library: specs, the runner that builds and spawns
//! instrumented subjects, datasets on disk, and the analysis that turns them
//! into tables and figures.
//!
//! Data flows one way: spec file → subject process → records → dataset on
//! disk → tables and figures. Nothing here is measured: this crate links
//! polars and plotters, the subjects never do.
//!
//! # The `data/` contract
//! ```text
//! data/<experiment>/<scale>-<YYYYmmddTHHMMSSZ>/   one finished run, renamed into place whole
//!     records.parquet     one row per record, with the cell's axes (codec, payload), variant, rep
//!     manifest.json       git revision and dirty flag, rustc, profile, features, allocators,
//!                         CPU model, cores, kernel, date, command line, spec, cells
//!     traces/<cell>.dhat.json   dhat trace of each dhat cell (open with dh_view.html)
//! data/<experiment>/.tmp-<scale>-<key>/           an unfinished run: cells/<cell>.jsonl are kept
//!                                                 and reused when the same run is started again
//! ```
//!
//! # Layout
//! - [`spec`]: experiment specs (`experiments/*.toml`), their target binary and scales.
//! - [`variants`]: building a target binary (`subject`, `datastore-server`) per allocator variant.
//! - [`runner`]: cells, their processes, progress, resume.
//! - [`dataset`]: JSON-lines records ↔ polars frames ↔ Parquet; manifests; finding runs.
//! - [`manifest`]: what a run records about the machine and the build;
//!   [`host`]: the facts it reads (git state, rustc, CPU, kernel, dates).
//! - [`reports`]: one report per experiment (its table and figure), the registry
//!   tables, figures and the paper walk.
//! - [`tables`]: polars analysis into LaTeX and Markdown tables.
//! - [`figures`]: plotters figures (SVG and PNG).
//! - [`fmt`]: number formatting shared by tables and figures.
//! - [`trace`]: loading, checking and reviewing dhat traces (`workbench trace`).
//! - [`compare`]: two runs of one experiment, benchstat-style (`workbench compare`).
//! - [`claims`]: the source papers' claims against ours (`workbench claims`).
//! - [`paper`]: the paper's macros and its PDF build (`workbench paper`).

pub mod claims;
pub mod compare;
pub mod dataset;
pub mod figures;
pub mod fmt;
pub mod host;
pub mod manifest;
pub mod paper;
pub mod provenance;
pub mod reports;
pub mod runner;
pub mod spec;
pub mod tables;
pub mod trace;
pub mod variants;

use std::path::{Path, PathBuf};

/// The repository root this binary was built from (the default `--root`).
pub fn default_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| PathBuf::from("."))
}
