//! A run's files on disk, written whole and found again: the records'
//! file's name, the manifest, finding runs, atomic writes, and what a run
//! takes as git stores it. The records' format (Parquet, through polars)
//! is the analysis side's: the runner hands them to a
//! [`RecordsSink`] its caller supplies.

use crate::data::manifest::Manifest;
use crate::spec::Scale;
use anyhow::{bail, Context, Result};
use registry::{AnyRecord, Experiment};
use std::path::{Path, PathBuf};

/// A run's records, in its directory.
pub const RECORDS: &str = "records.parquet";

/// One record as the cell's process printed it, decoded into its
/// experiment's type, and the fields the runner adds to it: typed from the
/// line a cell prints to the dataset's writer. Serialised flat, as one
/// object (a cell's `.jsonl` line, a row of the dataset).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Record {
    #[serde(flatten)]
    pub record: AnyRecord,
    #[serde(flatten)]
    pub cell: records::CellFields,
}

impl Record {
    /// Reads a line back (a cell's process printed it, or a cell's file
    /// holds it): the record as `experiment`'s type, the cell's fields from
    /// the same object. The error names the field at fault.
    pub fn decode(experiment: Experiment, line: &str) -> Result<Record, serde_json::Error> {
        Ok(Record { record: experiment.decode_record(line)?, cell: serde_json::from_str(line)? })
    }
}

/// Where a run's records go as the runner reads them back from its cells,
/// in order, and the file they end as ([`RECORDS`]). The runner links no
/// dataframe library; the analysis side's sink writes Parquet.
pub trait RecordsSink {
    fn push(&mut self, r: &Record) -> Result<()>;
    /// Writes every record pushed to `path`.
    fn finish(self: Box<Self>, path: &Path) -> Result<()>;
}

/// A fresh [`RecordsSink`] for one run.
pub type NewSink = fn() -> Box<dyn RecordsSink>;

/// The manifest of the run in `dir`, without its records.
pub fn load_run_manifest(dir: &Path) -> Result<Manifest> {
    let mpath = dir.join("manifest.json");
    let text = std::fs::read_to_string(&mpath).with_context(|| format!("reading {}", mpath.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", mpath.display()))
}

/// The finished runs of `experiment` at `scale` under `data`, oldest first
/// (run ids sort by time); none if the experiment has no directory.
pub fn runs(data: &Path, experiment: &str, scale: Scale) -> Result<Vec<PathBuf>> {
    let dir = data.join(experiment);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let prefix = format!("{scale}-");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix) && e.path().join("manifest.json").exists())
        .map(|e| e.path())
        .collect();
    runs.sort();
    Ok(runs)
}

/// The newest finished run of `experiment` at `scale` under `data`, if any.
pub fn latest_run(data: &Path, experiment: &str, scale: Scale) -> Result<Option<PathBuf>> {
    Ok(runs(data, experiment, scale)?.pop())
}

/// The run a reader shows for `experiment`: the newest at the largest
/// scale that has one (full, else quick), with its scale. The paper, its
/// macros and the claims all choose through here, so they show one run.
pub fn best_run(data: &Path, experiment: &str) -> Result<Option<(Scale, PathBuf)>> {
    for scale in Scale::PREFERRED {
        if let Some(d) = latest_run(data, experiment, scale)? {
            return Ok(Some((scale, d)));
        }
    }
    Ok(None)
}

/// Replaces `to` by `from` in one rename, so readers see a whole run or none.
pub fn publish(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        bail!("{} already exists; not overwriting a finished run", to.display());
    }
    std::fs::rename(from, to).with_context(|| format!("renaming {} to {}", from.display(), to.display()))
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Gzips `path` in place (`F` → `F.gz`): an events file of a timer-driven
/// stack (QUIC) repeats few operations exactly, and shrinks ≈ 11× so.
pub fn gzip_in_place(path: &Path) -> Result<PathBuf> {
    use std::io::Write;
    let out = PathBuf::from(format!("{}.gz", path.display()));
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    gz.write_all(&text).and_then(|_| gz.finish().map(drop)).with_context(|| format!("writing {}", out.display()))?;
    std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    Ok(out)
}

/// What a full suite's datasets may add to the repository, as git stores
/// them (the owner's decision: 25 MB): `workbench status --check` refuses
/// the newest full runs past it.
pub const FULL_SUITE_BYTES: u64 = 25_000_000;

/// Bytes the files under `dir` take as git stores them: each file
/// zlib-compressed at zlib's default level, as git compresses a blob
/// (Parquet and gzip files hardly shrink; a dhat trace's JSON ~10×). A
/// run's traces unpacked beside their archive are not stored: git ignores
/// them ([`crate::data::traces`]).
pub fn stored_bytes(dir: &Path) -> Result<u64> {
    use std::io::Write;
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry.with_context(|| format!("reading {}", dir.display()))?.path();
        if crate::data::traces::unpacked_beside_archive(dir, &path) {
            continue;
        }
        if path.is_dir() {
            total += stored_bytes(&path)?;
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&bytes).with_context(|| format!("compressing {}", path.display()))?;
        total += z.finish().with_context(|| format!("compressing {}", path.display()))?.len() as u64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dataset_is_sized_as_git_stores_it() {
        let dir = std::env::temp_dir().join(format!("wb-stored-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 4 KB of noise does not compress; 100 KB of one repeated line
        // compresses to a few hundred bytes.
        let mut x: u64 = 1;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        std::fs::write(dir.join("records.parquet"), &noise).unwrap();
        let records = stored_bytes(&dir).unwrap();
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        std::fs::write(dir.join("traces/t.dhat.json"), "{\"pps\": []}\n".repeat(8_000)).unwrap();
        let n = stored_bytes(&dir).unwrap();
        assert!((4096..4200).contains(&records) && (records + 50..records + 1000).contains(&n), "{records} {n}");
        // Packed, then unpacked for a reader: the archive counts, the
        // directory beside it (which git ignores) does not.
        let archive = crate::data::traces::pack(&dir).unwrap().unwrap();
        assert!(crate::data::traces::unpacked(&dir).unwrap().join("t.dhat.json").is_file());
        let packed = std::fs::metadata(&archive).unwrap().len();
        let after = stored_bytes(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!((records + packed..records + packed + 64).contains(&after), "{records} + {packed} ≠ {after}");
    }
}
