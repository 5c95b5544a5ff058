//! The runner: specs, building the measured binaries per variant, one
//! process per cell, resume, provenance, and publishing a run whole.
//! It links no analysis stack: a run's records reach their file through a
//! [`data::dataset::RecordsSink`] its caller supplies (the `analysis`
//! crate's writes Parquet).
//!
//! Data flows one way: spec file → measured process → records → dataset on
//! disk. Nothing here is measured, and no measured binary links it.
//!
//! # The `data/` contract
//! ```text
//! data/<experiment>/<scale>-<YYYYmmddTHHMMSSZ>/   one finished run, renamed into place whole
//!     records.parquet     one row per record, with the cell's axes (codec, payload), variant, rep
//!     manifest.json       git revision and dirty flag, rustc, profile, features, allocators,
//!                         CPU model, cores, kernel, date, command line, spec, cells
//!     traces.tar.zst      every cell's trace (dhat's `<cell>.dhat.json`, events files, sampled
//!                         profiles), one zstd stream; unpacked on first read into traces/,
//!                         which git ignores (`data::traces`; open a dhat trace with dh_view.html)
//! data/<experiment>/.tmp-<scale>-<key>/           an unfinished run: cells/<cell>.jsonl are kept
//!                                                 and reused when the same run is started again
//! ```
//!
//! # Layout
//! The folders follow the data, each using only those above it:
//! - [`spec`]: experiment specs (`experiments/*.toml`), [`spec::Scale`], and
//!   the build variants; checked against [`registry`].
//! - [`data`]: a run's files on disk (finding runs, atomic writes),
//!   manifests, and the host facts they record.
//! - [`run`]: the runner (cells, processes, progress, resume), building a
//!   target binary per variant, provenance (clean tree, lock, load), the
//!   fingerprint that says whether a dataset is stale, and Slurm.

pub mod data;
pub mod run;
pub mod spec;

use std::path::{Path, PathBuf};

/// The repository root this binary was built from (the default `--root`).
pub fn default_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| PathBuf::from("."))
}
