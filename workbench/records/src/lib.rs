//! The records of every experiment, typed once for the process that writes
//! them and the report that reads them.
//!
//! A measured process (`subject`, `datastore-load`) prints one JSON object
//! per line; the runner adds the cell's fields ([`CellFields`]) and stores
//! the lines of a dataset as one Parquet table. The writer serialises the
//! types below; the CLI reads a dataset's rows back into the same types
//! ([`Row`]), so a field renamed on one side is a compile error on the
//! other, and no report finds a value by a string.
//!
//! This crate links serde only: measured binaries link it, and it must not
//! pull the analysis stack (polars, plotters) into them. Its feature
//! `schema` derives each type's JSON Schema (schemars) for the CLI, which
//! generates the notebooks' typed columns from it (`cli::data::columns`).
//!
//! A record type's serialised form is the dataset's format: committed
//! datasets are read through these types too, so a field is renamed only
//! with `#[serde(alias)]` for the old name. Where an experiment writes
//! several kinds of record they are one enum tagged by `kind` (or by the
//! field the experiment always used, as pipeline-depth's `mode`).
//!
//! # Layout
//! - [`CellFields`], [`Row`], [`line`]: what the runner adds, a stored row,
//!   and the one way a record is written.
//! - [`subject`]: the codec and transport experiments of `subject`.
//! - [`server`]: the datastore server's experiments, and [`server::Stats`],
//!   the server's answer to `stats`.
//! - [`runner`]: records the runner writes itself (a build that failed).

use serde::{Deserialize, Serialize};

pub mod runner;
pub mod server;
pub mod subject;

/// What the runner adds to every record of a cell. `S` is the text type:
/// owned, or `&str` borrowed from a dataset read whole (millions of rows
/// share a few names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CellFields<S = String> {
    /// The build variant (`dhat`, `jemalloc`, `system`, a build stage).
    pub variant: S,
    /// The repetition of the cell (0-based).
    pub rep: u64,
    /// The codec or transport stack (subject experiments).
    #[serde(default = "none::<S>", skip_serializing_if = "Option::is_none")]
    pub codec: Option<S>,
    /// Bytes of optional payload per vote (subject experiments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<u64>,
}

fn none<S>() -> Option<S> {
    None
}

impl<S: AsRef<str>> CellFields<S> {
    /// The build variant.
    pub fn variant(&self) -> &str {
        self.variant.as_ref()
    }

    /// The codec or transport stack, `""` for a server cell.
    pub fn codec(&self) -> &str {
        self.codec.as_ref().map_or("", |c| c.as_ref())
    }

    /// The payload, 0 for a server cell.
    pub fn payload(&self) -> u64 {
        self.payload.unwrap_or(0)
    }
}

/// One stored row: the record as its process wrote it, and its cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<R, S = String> {
    pub cell: CellFields<S>,
    pub record: R,
}

/// What `workbench compare` reads of a record type: the columns that tell
/// its cells apart (beside the cell's own: codec, payload, variant), the
/// exact counts (summed per cell, any change is a change) and the timings
/// (one sample per record). Written beside the type, so that a field
/// renamed here is renamed for the comparison too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    pub keys: &'static [&'static str],
    pub counts: &'static [&'static str],
    pub times: &'static [&'static str],
}

impl Columns {
    /// The cell's own key columns ([`CellFields`]), before a record's.
    pub const CELL_KEYS: &'static [&'static str] = &[columns::CODEC, columns::PAYLOAD, columns::VARIANT];
}

/// A record type's [`Columns`].
pub trait Compared {
    const COLUMNS: Columns;
}

/// The `[params]` of an experiment that takes none (its axes are the spec's
/// own keys): any key is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// Writes `record` as one JSON line: the one way a measured process prints
/// a record.
pub fn line<R: Serialize>(out: &mut dyn std::io::Write, record: &R) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, record)?;
    out.write_all(b"\n")
}

/// Column names of the cell's fields, for code that reads a dataset's
/// columns generically (`compare`, `bisect`) rather than through a type.
pub mod columns {
    pub const VARIANT: &str = "variant";
    pub const REP: &str = "rep";
    pub const CODEC: &str = "codec";
    pub const PAYLOAD: &str = "payload";
    pub const KIND: &str = "kind";
    /// How many identical records one stands for ([`crate::subject::RoundTrip::repeat`]).
    pub const REPEAT: &str = "repeat";
}
