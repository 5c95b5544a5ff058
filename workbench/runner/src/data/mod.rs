//! What a run leaves on disk, as the runner writes it: the run's files
//! ([`dataset`]), what the run says about itself ([`manifest`]) and the
//! machine facts it reads ([`host`]).
//!
//! # Layout
//! - [`dataset`]: the records' file name and the sink they are written
//!   through, finding runs ([`dataset::latest_run`], [`dataset::best_run`]:
//!   full, else quick), atomic writes and publishing a run whole.
//! - [`manifest`]: what a run records about the machine and the build.
//! - [`host`]: git state, rustc, CPU, kernel, dates.
//! - [`traces`]: a run's traces as one archive, unpacked on first read.
//! - [`prune`]: what the tree keeps of `data/` (the newest run per
//!   experiment and scale, every cited run), pruning the rest and
//!   restoring a pruned run from git history.

pub mod dataset;
pub mod host;
pub mod manifest;
pub mod prune;
pub mod traces;
