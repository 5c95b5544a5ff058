//! The paper's workload, generated deterministically: the same seed gives
//! the same rows on any machine, whatever the batch size, because every row
//! is a pure function of (seed, row number).
//!
//! `t (id UInt64, user_id UInt32, ts DateTime, value Float64,
//!     category LowCardinality(String)) ORDER BY (category, ts)`:
//! id = row number; user_id uniform over [`USERS`]; ts uniform over the 30
//! days before [`EPOCH`]; value = a uniform u32 / 4e6; category round-robin
//! over [`CATEGORIES`].

use datastore::{Batch, ColumnData};
use datastore::{Error, Result};
use std::path::Path;
use std::sync::Arc;

pub const USERS: u64 = 100_000;
/// 2026-01-01T00:00:00Z: the fixed end of the timestamp window.
pub const EPOCH: u64 = 1_767_225_600;
pub const WINDOW: u64 = 30 * 86_400;
pub const CATEGORIES: [&str; 4] = ["ads", "web", "api", "iot"];

/// The three workload queries of the paper's PGO profile (defined beside
/// the records that name them, so the workbench reads their names without
/// linking the server).
pub use records::server::QUERIES;

pub const CREATE: &str = "CREATE TABLE t (id UInt64, user_id UInt32, ts DateTime, value Float64, \
                          category LowCardinality(String)) ORDER BY (category, ts)";

/// The same table in upstream ClickHouse's DDL (the comparison's peer).
pub const CREATE_CLICKHOUSE: &str = "CREATE TABLE t (id UInt64, user_id UInt32, ts DateTime, value Float64, \
                                     category LowCardinality(String)) ENGINE = MergeTree ORDER BY (category, ts)";

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in [0, n) by multiply-shift (no modulo bias worth the name at these n).
fn below(r: u64, n: u64) -> u64 {
    ((r >> 32) * n) >> 32
}

/// Rows `[from, to)` of the workload for `seed`.
pub fn batch(seed: u64, from: u64, to: u64) -> Batch {
    let n = (to - from) as usize;
    let (mut id, mut user, mut ts, mut value, mut cat) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in from..to {
        let mut s = seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ i;
        let (a, b, c) = (splitmix(&mut s), splitmix(&mut s), splitmix(&mut s));
        id.push(i);
        user.push(below(a, USERS));
        ts.push(EPOCH - WINDOW + below(b, WINDOW));
        value.push((c >> 32) as u32 as f64 / 4e6);
        cat.push(CATEGORIES[(i % 4) as usize].to_string());
    }
    Batch {
        columns: vec![
            ColumnData::U64(id),
            ColumnData::U64(user),
            ColumnData::U64(ts),
            ColumnData::F64(value),
            ColumnData::Str(cat),
        ],
    }
}

/// The position of `ts` in [`CREATE`] and in a [`batch`].
const TS_COLUMN: usize = 2;

/// Writes rows `[0, rows)` for `seed` as Parquet (LZ4), one row group per
/// `batch_rows`, so other engines can load identical data. `ts` is a
/// timestamp in milliseconds adjusted to UTC (Parquet's `TIMESTAMP(MILLIS,
/// true)`), so pyarrow, polars and ClickHouse read a time, not an integer;
/// our `DateTime` is whole seconds, so the milliseconds are always ×1000.
pub fn write_parquet(path: &Path, seed: u64, rows: u64, batch_rows: u64) -> Result<()> {
    use parquet::basic::Compression;
    use parquet::column::writer::ColumnWriter;
    use parquet::data_type::ByteArray;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    let pq = |e: parquet::errors::ParquetError| Error::Corrupt { path: path.to_path_buf(), what: e.to_string() };
    let schema = Arc::new(
        parse_message_type(
            "message t {
                REQUIRED INT64 id (INTEGER(64, false));
                REQUIRED INT32 user_id (INTEGER(32, false));
                REQUIRED INT64 ts (TIMESTAMP(MILLIS, true));
                REQUIRED DOUBLE value;
                REQUIRED BYTE_ARRAY category (STRING);
            }",
        )
        .map_err(pq)?,
    );
    let props = Arc::new(WriterProperties::builder().set_compression(Compression::LZ4_RAW).build());
    let file = std::fs::File::create(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let mut w = SerializedFileWriter::new(file, schema, props).map_err(pq)?;
    let mut from = 0;
    while from < rows {
        let to = (from + batch_rows).min(rows);
        let b = batch(seed, from, to);
        let mut rg = w.next_row_group().map_err(pq)?;
        let mut i = 0;
        while let Some(mut col) = rg.next_column().map_err(pq)? {
            match (col.untyped(), &b.columns[i]) {
                (ColumnWriter::Int64ColumnWriter(cw), ColumnData::U64(v)) => {
                    let unit = if i == TS_COLUMN { 1000 } else { 1 };
                    let v: Vec<i64> = v.iter().map(|&x| x as i64 * unit).collect();
                    cw.write_batch(&v, None, None).map_err(pq)?;
                }
                (ColumnWriter::Int32ColumnWriter(cw), ColumnData::U64(v)) => {
                    let v: Vec<i32> = v.iter().map(|&x| x as u32 as i32).collect();
                    cw.write_batch(&v, None, None).map_err(pq)?;
                }
                (ColumnWriter::DoubleColumnWriter(cw), ColumnData::F64(v)) => {
                    cw.write_batch(v, None, None).map_err(pq)?;
                }
                (ColumnWriter::ByteArrayColumnWriter(cw), ColumnData::Str(v)) => {
                    let v: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                    cw.write_batch(&v, None, None).map_err(pq)?;
                }
                _ => unreachable!("schema and batch are declared together"),
            }
            col.close().map_err(pq)?;
            i += 1;
        }
        rg.close().map_err(pq)?;
        from = to;
    }
    w.close().map_err(pq)?;
    Ok(())
}

/// Creates table `t` in `db` and inserts `rows` rows of the workload for
/// `seed`, `batch` rows an insert, merging in the background (and into one
/// part when `optimize`); `progress(rows so far, parts)` after each insert.
pub fn load(
    db: &datastore::Db,
    rows: u64,
    seed: u64,
    batch: u64,
    optimize: bool,
    mut progress: impl FnMut(u64, usize),
) -> Result<Arc<datastore::Table>> {
    if batch == 0 {
        return Err(Error::Table { table: "t".into(), what: "load: the batch size must be at least 1".into() });
    }
    if db.table_names()?.iter().any(|n| n == "t") {
        return Err(Error::Table {
            table: "t".into(),
            what: "already exists; load into an empty data directory".into(),
        });
    }
    db.execute(CREATE)?;
    let t = db.table("t")?;
    let merger = datastore::storage::table::Merger::start(t.clone(), 4);
    let mut from = 0;
    while from < rows {
        let to = (from + batch).min(rows);
        t.insert(&self::batch(seed, from, to))?;
        merger.poke();
        from = to;
        progress(from, t.snapshot().len());
    }
    merger.stop()?;
    if optimize {
        t.optimize()?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_do_not_depend_on_batching() {
        let whole = batch(7, 0, 100);
        let a = batch(7, 0, 37);
        let b = batch(7, 37, 100);
        for c in 0..5 {
            for i in 0..100 {
                let x = whole.columns[c].value(i);
                let y = if i < 37 { a.columns[c].value(i) } else { b.columns[c].value(i - 37) };
                assert_eq!(x, y, "column {c} row {i}");
            }
        }
        assert_ne!(format!("{:?}", batch(8, 0, 10).columns[3]), format!("{:?}", batch(7, 0, 10).columns[3]));
    }

    #[test]
    fn values_stay_in_their_ranges() {
        let b = batch(1, 0, 10_000);
        let ColumnData::U64(u) = &b.columns[1] else { panic!() };
        let ColumnData::U64(ts) = &b.columns[2] else { panic!() };
        let ColumnData::F64(v) = &b.columns[3] else { panic!() };
        assert!(u.iter().all(|&x| x < USERS));
        assert!(ts.iter().all(|&x| (EPOCH - WINDOW..EPOCH).contains(&x)));
        assert!(v.iter().all(|&x| (0.0..=(u32::MAX as f64 / 4e6)).contains(&x)));
        assert_eq!(b.columns[4].str_at(6), Some("api"));
    }
}
