//! Records ↔ polars frames ↔ Parquet, manifests, and finding runs on disk.

use crate::manifest::Manifest;
use anyhow::{bail, Context, Result};
use polars::prelude::{Column, DataFrame, ParquetReader, ParquetWriter, SerReader};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One record as a subject printed it, plus the cell fields the runner adds.
pub type Record = serde_json::Map<String, Value>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Null,
    Bool,
    UInt,
    Int,
    Float,
    Str,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_u64() => Kind::UInt,
        Value::Number(n) if n.is_i64() => Kind::Int,
        Value::Number(_) => Kind::Float,
        _ => Kind::Str,
    }
}

fn widen(a: Kind, b: Kind, column: &str) -> Result<Kind> {
    use Kind::*;
    Ok(match (a, b) {
        (Null, k) | (k, Null) => k,
        (x, y) if x == y => x,
        (UInt, Int) | (Int, UInt) => Int,
        (UInt | Int, Float) | (Float, UInt | Int) => Float,
        (x, y) => bail!("column `{column}` mixes {x:?} and {y:?} values"),
    })
}

/// Builds a frame from records: one column per key (in first-seen order;
/// within a record keys come sorted, as serde_json's map keeps them),
/// typed from the values; a key missing from a record is a null there.
pub fn frame_from_records(records: &[Record]) -> Result<DataFrame> {
    let mut names: Vec<&str> = Vec::new();
    for r in records {
        for k in r.keys() {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    let mut columns = Vec::with_capacity(names.len());
    for name in names {
        let values = records.iter().map(|r| r.get(name).unwrap_or(&Value::Null));
        let mut kind = Kind::Null;
        for v in values.clone() {
            kind = widen(kind, kind_of(v), name)?;
        }
        let col = match kind {
            Kind::Bool => Column::new(name.into(), values.map(Value::as_bool).collect::<Vec<_>>()),
            Kind::UInt => Column::new(name.into(), values.map(Value::as_u64).collect::<Vec<_>>()),
            Kind::Int => Column::new(name.into(), values.map(Value::as_i64).collect::<Vec<_>>()),
            Kind::Float => Column::new(name.into(), values.map(Value::as_f64).collect::<Vec<_>>()),
            Kind::Str | Kind::Null => {
                Column::new(name.into(), values.map(|v| v.as_str().map(str::to_string)).collect::<Vec<_>>())
            }
        };
        columns.push(col);
    }
    Ok(DataFrame::new(records.len(), columns)?)
}

pub fn write_parquet(df: &mut DataFrame, path: &Path) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    ParquetWriter::new(file).finish(df).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    ParquetReader::new(file).finish().with_context(|| format!("reading {}", path.display()))
}

/// A finished run: its directory, manifest and records.
pub struct Run {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub records: DataFrame,
}

/// Loads the run in `dir`.
pub fn load_run(dir: &Path) -> Result<Run> {
    let mpath = dir.join("manifest.json");
    let text = std::fs::read_to_string(&mpath).with_context(|| format!("reading {}", mpath.display()))?;
    let manifest: Manifest = serde_json::from_str(&text).with_context(|| format!("parsing {}", mpath.display()))?;
    let records = read_parquet(&dir.join("records.parquet"))?;
    Ok(Run { dir: dir.into(), manifest, records })
}

/// The newest finished run of `experiment` at `scale` under `data`, if any.
/// Run ids sort by time, so the newest is the last name.
pub fn latest_run(data: &Path, experiment: &str, scale: &str) -> Result<Option<PathBuf>> {
    let dir = data.join(experiment);
    if !dir.exists() {
        return Ok(None);
    }
    let prefix = format!("{scale}-");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix) && e.path().join("manifest.json").exists())
        .map(|e| e.path())
        .collect();
    runs.sort();
    Ok(runs.pop())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: Value) -> Record {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn records_round_trip_through_parquet() {
        let records = vec![
            rec(json!({"codec": "zap", "msg": 0, "allocs": 0, "bytes": null, "t": 1.5})),
            rec(json!({"codec": "json-rpc", "msg": 1, "allocs": 12, "bytes": 3072, "t": 2})),
            rec(json!({"codec": "zap", "msg": 2, "delta": -4})),
        ];
        let mut df = frame_from_records(&records).unwrap();
        assert_eq!(
            df.get_column_names().iter().map(|n| n.as_str()).collect::<Vec<_>>(),
            ["allocs", "bytes", "codec", "msg", "t", "delta"]
        );
        let dir = std::env::temp_dir().join(format!("wb-dataset-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.parquet");
        write_parquet(&mut df, &path).unwrap();
        let back = read_parquet(&path).unwrap();
        assert!(back.equals_missing(&df));
        let allocs: Vec<Option<u64>> = back.column("allocs").unwrap().u64().unwrap().iter().collect();
        assert_eq!(allocs, [Some(0), Some(12), None]);
        let t: Vec<Option<f64>> = back.column("t").unwrap().f64().unwrap().iter().collect();
        assert_eq!(t, [Some(1.5), Some(2.0), None]);
        let delta: Vec<Option<i64>> = back.column("delta").unwrap().i64().unwrap().iter().collect();
        assert_eq!(delta, [None, None, Some(-4)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mixed_types_name_the_column() {
        let e = frame_from_records(&[rec(json!({"x": 1})), rec(json!({"x": "a"}))]).unwrap_err();
        assert!(e.to_string().contains("column `x`"), "{e}");
    }
}
