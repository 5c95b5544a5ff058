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
//! The folders follow the data, each using only those above it:
//! - [`spec`]: experiment specs (`experiments/*.toml`), [`spec::Scale`], and
//!   the build variants; checked against [`registry`].
//! - [`data`]: datasets on disk (records, Parquet, finding runs), manifests,
//!   and the host facts they record.
//! - [`run`]: the runner (cells, processes, progress, resume), building a
//!   target binary per variant, provenance (clean tree, lock, load).
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
//! - [`site`]: the browsable report (`report/`): every experiment, trace,
//!   comparison and history as static HTML.
//! - [`fmt`]: number formatting shared by all of them (the `units` crate); [`par`]: independent
//!   jobs spread over the cores.
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
pub mod run;
pub mod site;
pub mod spec;

use std::path::{Path, PathBuf};

/// The repository root this binary was built from (the default `--root`).
pub fn default_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| PathBuf::from("."))
}
