//! Running a spec: building its target binary per variant, spawning one
//! process per cell, and publishing the dataset whole.
//!
//! # Layout
//! - [`runner`]: cells, their processes, progress, resume, the manifest.
//! - [`build`]: building a target binary (`subject`, `datastore-server`)
//!   per build variant (allocators, LTO, PGO, BOLT).
//! - [`provenance`]: the clean-tree check, the run lock, load and busy processes.
//! - [`certify`]: a dataset whose sources changed judged by its binaries
//!   built again: certified when every one is identical.
//! - [`identity`]: a measured binary's identity (what it loads, hashed),
//!   by which a dataset ages when the code that ran changed.
//! - [`fingerprint`]: exactly what a run measured, and whether it is stale now;
//!   [`lock`]: what of the lock file and the resolved features it links.
//! - [`slurm`]: the cells as a Slurm job array instead (submit, wait,
//!   collect, one task), and a projection of a suite's time on N nodes.

pub mod build;
pub mod certify;
pub mod fingerprint;
pub mod identity;
pub mod lock;
pub mod provenance;
pub mod runner;
pub mod slurm;
