//! The tiny alloc-profile spec two tests run (the end-to-end suite, and the
//! Slurm test against a local run), and reading its exact counts back.
//! Included by path where used, not from `common/mod.rs`, which every runner
//! test compiles.

use analysis::data::dataset;
use analysis::report::tables;
use std::path::Path;

/// Two codecs at 64 B, dhat and jemalloc: 4 cells of 20 messages.
pub const ALLOC: &str = r#"
experiment = "alloc-profile"
codecs = ["zap", "json-rpc"]
payloads = [64]
variants = ["dhat", "jemalloc"]
[quick]
messages = 20
warmup = 2
[full]
messages = 100
"#;

pub fn column_u64(df: &polars::prelude::DataFrame, col: &str) -> Vec<Option<u64>> {
    df.column(col).unwrap().u64().unwrap().iter().collect()
}

/// The `allocs` column of one codec and build in the dataset at `dir`.
pub fn allocs_of(dir: &Path, codec: &str, variant: &str) -> Vec<Option<u64>> {
    let run = dataset::load_run(dir).unwrap();
    let df = tables::select(&run.records, &[("codec", codec), ("variant", variant)], &[]).unwrap();
    let allocs = column_u64(&df, "allocs");
    // A record that stands for a run of equal round trips (transport-alloc) is
    // each of them: the counts a message at a time, as the subject measured them.
    if df.column(records::columns::REPEAT).is_err() {
        return allocs;
    }
    let repeat = column_u64(&df, records::columns::REPEAT);
    allocs.into_iter().zip(repeat).flat_map(|(a, n)| std::iter::repeat_n(a, n.unwrap_or(1) as usize)).collect()
}
