//! A run's records as a polars frame: built from the runner's records as
//! they stream ([`FrameBuilder`], the runner's [`RecordsSink`] through
//! [`parquet_sink`]), written and read as Parquet, and a finished run
//! loaded whole ([`Run`]). The files around them (the manifest, finding
//! runs) are the runner's, re-exported here so a reader names one module.

pub use runner::data::dataset::*;

use crate::data::manifest::Manifest;
use crate::data::rows::Columns;
use anyhow::{bail, Context, Result};
use polars::prelude::{Column, DataFrame, ParquetReader, ParquetWriter, SerReader};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One column being built, typed as its values arrive and widened when a
/// later value needs it (unsigned → signed → float); `Null` until the
/// first non-null value.
enum Col {
    Null(usize),
    Bool(Vec<Option<bool>>),
    UInt(Vec<Option<u64>>),
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Str(Vec<Option<String>>),
}

impl Col {
    fn len(&self) -> usize {
        match self {
            Col::Null(n) => *n,
            Col::Bool(v) => v.len(),
            Col::UInt(v) => v.len(),
            Col::Int(v) => v.len(),
            Col::Float(v) => v.len(),
            Col::Str(v) => v.len(),
        }
    }

    fn push_null(&mut self) {
        match self {
            Col::Null(n) => *n += 1,
            Col::Bool(v) => v.push(None),
            Col::UInt(v) => v.push(None),
            Col::Int(v) => v.push(None),
            Col::Float(v) => v.push(None),
            Col::Str(v) => v.push(None),
        }
    }

    fn name_of(&self) -> &'static str {
        match self {
            Col::Null(_) => "null",
            Col::Bool(_) => "boolean",
            Col::UInt(_) => "unsigned",
            Col::Int(_) => "signed",
            Col::Float(_) => "float",
            Col::Str(_) => "string",
        }
    }

    fn push(&mut self, v: &Value, column: &str) -> Result<()> {
        if v.is_null() {
            self.push_null();
            return Ok(());
        }
        // Retype first if this value does not fit the column as it is.
        let n = self.len();
        let retyped = match (&*self, v) {
            (Col::Null(_), Value::Bool(_)) => Some(Col::Bool(vec![None; n])),
            (Col::Null(_), Value::Number(x)) if x.is_u64() => Some(Col::UInt(vec![None; n])),
            (Col::Null(_), Value::Number(x)) if x.is_i64() => Some(Col::Int(vec![None; n])),
            (Col::Null(_), Value::Number(_)) => Some(Col::Float(vec![None; n])),
            (Col::Null(_), Value::String(_)) => Some(Col::Str(vec![None; n])),
            (Col::UInt(u), Value::Number(x)) if !x.is_u64() && x.is_i64() => {
                Some(Col::Int(u.iter().map(|o| o.map(|a| a as i64)).collect()))
            }
            (Col::UInt(u), Value::Number(x)) if !x.is_u64() && !x.is_i64() => {
                Some(Col::Float(u.iter().map(|o| o.map(|a| a as f64)).collect()))
            }
            (Col::Int(u), Value::Number(x)) if !x.is_u64() && !x.is_i64() => {
                Some(Col::Float(u.iter().map(|o| o.map(|a| a as f64)).collect()))
            }
            _ => None,
        };
        if let Some(c) = retyped {
            *self = c;
        }
        match (self, v) {
            (Col::Bool(c), Value::Bool(b)) => c.push(Some(*b)),
            (Col::UInt(c), Value::Number(x)) if x.is_u64() => c.push(x.as_u64()),
            (Col::Int(c), Value::Number(x)) if x.is_i64() || x.is_u64() => c.push(x.as_i64()),
            (Col::Float(c), Value::Number(x)) => c.push(x.as_f64()),
            (Col::Str(c), Value::String(s)) => c.push(Some(s.clone())),
            (c, v) => {
                let got = if v.is_string() {
                    "string"
                } else if v.is_boolean() {
                    "boolean"
                } else {
                    "other"
                };
                bail!("column `{column}` mixes {} and {got} values", c.name_of())
            }
        }
        Ok(())
    }

    fn into_column(self, name: &str) -> Column {
        match self {
            Col::Null(n) => Column::new(name.into(), vec![None::<String>; n]),
            Col::Bool(v) => Column::new(name.into(), v),
            Col::UInt(v) => Column::new(name.into(), v),
            Col::Int(v) => Column::new(name.into(), v),
            Col::Float(v) => Column::new(name.into(), v),
            Col::Str(v) => Column::new(name.into(), v),
        }
    }
}

/// Builds a frame from records streamed one at a time: one column per key
/// (in first-seen order; within a record keys come sorted, as serde_json's
/// map keeps them), typed from the values; a key missing from a record is a
/// null there. PERF: holds typed columns, not the records, so a full-scale
/// run of millions of records fits in a fraction of the memory.
#[derive(Default)]
pub struct FrameBuilder {
    names: Vec<String>,
    index: std::collections::HashMap<String, usize>,
    cols: Vec<Col>,
    rows: usize,
}

impl FrameBuilder {
    /// Adds a typed record as a row: its fields as its type serialises them
    /// (the form a cell's line has), the cell's fields beside them.
    pub fn push(&mut self, r: &Record) -> Result<()> {
        match serde_json::to_value(r)? {
            Value::Object(m) => self.push_fields(&m),
            other => bail!("a record serialised as {other}, not as an object"),
        }
    }

    /// Adds one row of named values (a record as serialised, a notebook's row).
    pub fn push_fields(&mut self, r: &serde_json::Map<String, Value>) -> Result<()> {
        for (k, v) in r {
            let i = match self.index.get(k) {
                Some(&i) => i,
                None => {
                    self.names.push(k.clone());
                    self.index.insert(k.clone(), self.cols.len());
                    self.cols.push(Col::Null(self.rows));
                    self.cols.len() - 1
                }
            };
            self.cols[i].push(v, k)?;
        }
        self.rows += 1;
        // Keys this record lacks.
        for c in &mut self.cols {
            if c.len() < self.rows {
                c.push_null();
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Result<DataFrame> {
        let columns: Vec<Column> = self.cols.into_iter().zip(&self.names).map(|(c, n)| c.into_column(n)).collect();
        Ok(DataFrame::new(self.rows, columns)?)
    }
}

/// Builds a frame from rows of named values in memory (a report's test
/// fixture, a notebook's rows; see [`FrameBuilder`]).
pub fn frame_from_fields(rows: &[serde_json::Map<String, Value>]) -> Result<DataFrame> {
    let mut b = FrameBuilder::default();
    for r in rows {
        b.push_fields(r)?;
    }
    b.finish()
}

/// Writes `df` as Parquet. NOTE: without statistics. polars 0.55 gives a
/// dictionary-encoded column's null count to its dictionary page and to its
/// data pages alike, so a column chunk holding some nulls (a key present in
/// some records only) records twice its null count, as many as its rows
/// when half are null; DuckDB, trusting the statistic, then reads the whole
/// column as null. Null counts alone cannot be left out (polars' page index
/// requires them), and a records file is read whole, never pruned by its
/// statistics. `scripts/interop.py` reads fresh files with polars, pyarrow
/// and DuckDB in the test command.
pub fn write_parquet(df: &mut DataFrame, path: &Path) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let statistics = polars::prelude::StatisticsOptions::empty();
    ParquetWriter::new(file)
        .with_statistics(statistics)
        .finish(df)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    ParquetReader::new(file).finish().with_context(|| format!("reading {}", path.display()))
}

/// The records of the run in `dir` read back as the objects they were
/// written from: each row's non-null fields, in row order (what
/// [`runner::run::runner::carry`] decodes into records again). A float
/// with no fraction is written back as an integer, since a column mixing
/// an integer field of one record kind with a float of another was widened
/// to float, and the integer field must still decode.
pub fn read_back(dir: &Path) -> Result<Vec<serde_json::Map<String, Value>>> {
    use polars::prelude::AnyValue;
    let df = read_parquet(&dir.join(RECORDS))?;
    let mut rows = vec![serde_json::Map::new(); df.height()];
    for col in df.columns() {
        let name = col.name().to_string();
        for (i, row) in rows.iter_mut().enumerate() {
            let v = match col.get(i).with_context(|| format!("{}: column {name}, row {i}", dir.display()))? {
                AnyValue::Null => continue,
                AnyValue::Boolean(b) => Value::Bool(b),
                AnyValue::UInt8(x) => x.into(),
                AnyValue::UInt16(x) => x.into(),
                AnyValue::UInt32(x) => x.into(),
                AnyValue::UInt64(x) => x.into(),
                AnyValue::Int8(x) => x.into(),
                AnyValue::Int16(x) => x.into(),
                AnyValue::Int32(x) => x.into(),
                AnyValue::Int64(x) => x.into(),
                AnyValue::Float32(x) => float(f64::from(x)),
                AnyValue::Float64(x) => float(x),
                AnyValue::String(x) => Value::String(x.to_string()),
                AnyValue::StringOwned(x) => Value::String(x.to_string()),
                other => bail!("{}: column {name} holds {other:?}, which no record field is written as", dir.display()),
            };
            row.insert(name.clone(), v);
        }
    }
    Ok(rows)
}

fn float(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        if x >= 0.0 {
            return (x as u64).into();
        }
        return (x as i64).into();
    }
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// The runner's sink: records into a [`FrameBuilder`], then Parquet.
pub fn parquet_sink() -> Box<dyn RecordsSink> {
    struct Parquet(FrameBuilder);
    impl RecordsSink for Parquet {
        fn push(&mut self, r: &Record) -> Result<()> {
            self.0.push(r)
        }
        fn finish(self: Box<Self>, path: &Path) -> Result<()> {
            let mut df = self.0.finish()?;
            write_parquet(&mut df, path)
        }
    }
    Box::new(Parquet(FrameBuilder::default()))
}

/// A finished run: its directory, manifest and records.
pub struct Run {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub records: DataFrame,
    /// The records' columns typed for [`Run::rows`], made on first use.
    pub columns: std::sync::OnceLock<Columns>,
}

impl Run {
    pub fn new(dir: PathBuf, manifest: Manifest, records: DataFrame) -> Run {
        Run { dir, manifest, records, columns: Default::default() }
    }

    /// The run's traces directory, unpacked from its archive on first use
    /// ([`runner::data::traces`]).
    pub fn traces(&self) -> Result<PathBuf> {
        Ok(runner::data::traces::unpacked(&self.dir)?)
    }

    fn columns(&self) -> Result<&Columns> {
        if let Some(c) = self.columns.get() {
            return Ok(c);
        }
        let c = Columns::of(&self.records).with_context(|| format!("reading {}", self.dir.display()))?;
        Ok(self.columns.get_or_init(|| c))
    }

    /// Its records as `R` (the experiment's type in the `records` crate),
    /// each with its cell's fields, in the order they were written.
    pub fn rows<'a, R: serde::Deserialize<'a> + 'a>(&'a self) -> Result<Vec<records::Row<R, &'a str>>> {
        self.each().collect()
    }

    /// The experiment its manifest names, if `R` is that experiment's record
    /// type; an error naming both types otherwise. A row deserialises into
    /// any type whose fields it has (serde skips the others), so a report
    /// handed the wrong type would read defaults and empty options, not fail.
    pub fn check_record_type<R>(&self) -> Result<registry::Experiment> {
        let e: registry::Experiment = (self.manifest.experiment.parse())
            .map_err(|e| anyhow::anyhow!("{}: its manifest's experiment: {e}", self.dir.display()))?;
        // The registry names its record type by `type_name` (its schema's
        // `rust_type`), the one path from an experiment to its type that the
        // analysis can compare without a change to the registry, which the
        // measured binaries link.
        let (own, asked) = (e.record_schema().rust_type, std::any::type_name::<R>());
        if own != asked {
            bail!("{}: a run of {e}, whose records are {own}, read as {asked}", self.dir.display());
        }
        Ok(e)
    }

    /// As [`Run::rows`], one at a time (for millions of rows).
    pub fn each<'a, R: serde::Deserialize<'a> + 'a>(
        &'a self,
    ) -> impl Iterator<Item = Result<records::Row<R, &'a str>>> + 'a {
        let path = format!("reading {} as {}", self.dir.join(RECORDS).display(), std::any::type_name::<R>());
        let (cols, err) = match self.check_record_type::<R>().and_then(|_| self.columns()) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e)),
        };
        err.map(Err).into_iter().chain(cols.into_iter().flat_map(|c| c.each())).map(move |r| r.context(path.clone()))
    }
}

/// Loads the run in `dir`.
pub fn load_run(dir: &Path) -> Result<Run> {
    let manifest = load_run_manifest(dir)?;
    let records = read_parquet(&dir.join(RECORDS))?;
    Ok(Run::new(dir.into(), manifest, records))
}

/// Loads the run in `dir` with only those of `columns` its records have:
/// what a reader that needs a few columns of many runs (the comparisons)
/// decodes, instead of every column of every run.
pub fn load_run_columns(dir: &Path, columns: &[&str]) -> Result<Run> {
    let manifest = load_run_manifest(dir)?;
    let path = dir.join(RECORDS);
    let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = ParquetReader::new(file);
    let schema = reader.schema().with_context(|| format!("reading the schema of {}", path.display()))?;
    let present: Vec<String> = columns
        .iter()
        .filter(|c| schema.contains(c))
        .map(|c| c.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let records = reader.with_columns(Some(present)).finish().with_context(|| format!("reading {}", path.display()))?;
    Ok(Run::new(dir.into(), manifest, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn records_round_trip_through_parquet() {
        let records = vec![
            rec(json!({"codec": "zap", "msg": 0, "allocs": 0, "bytes": null, "t": 1.5})),
            rec(json!({"codec": "json-rpc", "msg": 1, "allocs": 12, "bytes": 3072, "t": 2})),
            rec(json!({"codec": "zap", "msg": 2, "delta": -4})),
        ];
        let mut df = frame_from_fields(&records).unwrap();
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
        let e = frame_from_fields(&[rec(json!({"x": 1})), rec(json!({"x": "a"}))]).unwrap_err();
        assert!(e.to_string().contains("column `x`"), "{e}");
    }
}
