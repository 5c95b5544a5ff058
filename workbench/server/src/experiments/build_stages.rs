//! The server's build stages (O3, ThinLTO, fat LTO, PGO, PGO + BOLT: the
//! workbench builds one binary per stage as a variant): per stage, the
//! binary's size, then the throughput experiment's closed loop at the
//! spec's concurrency (the paper's c = 4) with the server's RSS sampled
//! every 100 ms through the query mix.
//!
//! Params: those of [`super::throughput`] (no peer).
//! Records: `kind = "binary"` (binary_bytes), then throughput's.

use super::{Cell, Experiment, Records};
use anyhow::{bail, Context, Result};
use serde_json::json;

pub const EXPERIMENT: Experiment = Experiment { name: "build-stages", run };

fn run(cell: &Cell, out: &mut Records) -> Result<()> {
    if cell.params.contains_key("chdb") {
        bail!("{}: params.chdb: the build stages compare our builds only", cell.experiment);
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let bytes = std::fs::metadata(&exe).with_context(|| format!("reading {}", exe.display()))?.len();
    out.emit(json!({"kind": "binary", "binary_bytes": bytes}))?;
    (super::throughput::EXPERIMENT.run)(cell, out)
}
