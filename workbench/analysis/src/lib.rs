//! Analysis and report: a dataset read back as typed rows, one report per
//! experiment (its table and figure), run comparison, the allocation gate,
//! history and bisection, and the paper's macros and PDF.
//!
//! Data flows one way: dataset on disk ([`runner`]'s) → tables, figures,
//! macros, the paper. This crate links polars and plotters; the measured
//! binaries and the runner never do.
//!
//! # Layout
//! The folders follow the data, each using only those above it:
//! - [`data`]: records ↔ polars frames ↔ Parquet (the runner's sink), rows
//!   typed as the `records` crate's, the notebooks' columns.
//! - [`report`]: one report per registered dataset (its table and figure),
//!   the table and figure kits, and writing them all.
//! - [`inspect`]: benchstat-style run comparison, and trace review (the
//!   `trace` crate, re-exported).
//! - [`gate`]: the allocation gate: a small dhat suite's exact counts
//!   against the committed baseline (`experiments/gate/`), the bless, and
//!   the determinism map (which counts repeat exactly) that the paper and
//!   the site print.
//! - [`paper`]: the paper's macros and PDF build; [`paper::claims`], the
//!   source papers' claims against ours.
//! - [`history`]: a spec run at every commit of a range (a git worktree,
//!   the runner), and bisection of an exact count.
//! - [`fmt`]: number formatting (the `units` crate); [`par`]: independent
//!   jobs spread over the cores.
//! - [`spec`], [`run`], [`default_root`]: the runner's, re-exported so that
//!   a report names a spec or a fingerprint as the runner does.
//!
//! `scripts/modgraph.py` prints the module graph and fails on a cycle.

pub mod data;
/// Number formatting ([`units`]), as every module of this crate names it.
pub use units as fmt;
pub mod gate;
pub mod history;
pub mod inspect;
pub mod paper;
pub mod par;
pub mod report;

pub use runner::{default_root, run, spec};
