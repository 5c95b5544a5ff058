//! The server's build stages (O3, ThinLTO, fat LTO, PGO, PGO + BOLT: the
//! workbench builds one binary per stage as a variant): per stage, the
//! binary's size, then the throughput experiment's closed loop at the
//! spec's concurrency (the paper's c = 4) with the server's RSS sampled
//! every 100 ms through the query mix.
//!
//! Params: those of [`super::throughput`] (no peer).
//! Records: `kind = "binary"` (binary_bytes, and stripped_bytes without
//! debug info), then throughput's.

use super::{Cell, Records};
use anyhow::{bail, Context, Result};
use records::server::build_stages::{Binary, Params, Written};

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    if !p.chdb.is_empty() {
        bail!("{}: params.chdb: the build stages compare our builds only", cell.experiment);
    }
    // The measured server's file, not this driver's.
    let exe = super::server_bin()?;
    let bytes = std::fs::metadata(&exe).with_context(|| format!("reading {}", exe.display()))?.len();
    // Debug info differs by stage (BOLT drops it): the code's size is the
    // file without it, `strip --strip-debug` of a copy.
    let stripped = super::work_dir(cell)?.join("stripped");
    let st = std::process::Command::new("strip").arg("--strip-debug").arg("-o").arg(&stripped).arg(&exe).status();
    let stripped_bytes = match st {
        Ok(s) if s.success() => std::fs::metadata(&stripped).ok().map(|m| m.len()),
        _ => None,
    };
    let _ = std::fs::remove_file(&stripped);
    out.emit(&Written::Binary(Binary { binary_bytes: bytes, stripped_bytes }))?;
    super::throughput::run(cell, p, out)
}
