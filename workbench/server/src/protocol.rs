//! The datastore protocol: method ids, statuses, and the one columnar message
//! (`Columns`) that carries both query results and insert batches.
//!
//! Calls travel in ZAP's RPC envelope ([`zap::Request`] / [`zap::Response`]),
//! framed `[u32 len][message]`:
//!
//! | method | payload | answer body (status 200) |
//! |---|---|---|
//! | [`QUERY`] = 1 | SQL text (UTF-8); `$prev` binds the first value of the target's result | `Columns` |
//! | [`INSERT`] = 2 | a `Columns` message naming its table | `Columns`: one row, `inserted` UInt64 |
//! | [`PING`] = 3 | ignored | `Columns` with no columns |
//! | [`STATS`] = 4 | ignored | JSON text: RSS, live heap, connections |
//! | [`HEAP_PROFILE`] = 5 | ignored | gzipped pprof `profile.proto` of the sampled heap (sampling build; else [`NOT_BUILT`]) |
//!
//! An answer with promise 0 concerns the connection, not a call (a malformed
//! or oversized frame, a refused connection); the connection closes after it
//! unless the frame boundary is intact.
//!
//! # `Columns`
//! Column-major: `types` (one code per column, [`type_code`]), `names`
//! (concatenated, `name_ends` marking each end), and `data`, 8-aligned, where
//! column `i` occupies `offsets[i]..offsets[i+1]` (each start 8-aligned):
//! fixed-width columns as `rows` little-endian values at their declared width
//! (`UInt32` is 4 bytes, `DateTime` 4, `Float64` 8), strings as `rows + 1`
//! u32 offsets, padded to 8, then the bytes. `nulls` is empty, or one bitmap
//! of `ceil(rows / 8)` bytes per column (LSB first; a NULL reads as 0). A
//! reader borrows every array from the frame it arrived in.

use datastore::{Batch, ColumnData, ColumnType, Value};
use zap::{Builder, Bytes, List, Text};

pub use zap::rpc::status::{BAD_REQUEST, FAILED_DEPENDENCY, GONE, INTERNAL, NOT_FOUND, OK, TOO_MANY};

pub const QUERY: u32 = 1;
pub const INSERT: u32 = 2;
pub const PING: u32 = 3;
pub const STATS: u32 = 4;
/// The server's heap as jemalloc sampled it since start: what is live now
/// and every allocation so far, by stack (estimates; the interval is the
/// profile's `period`). `workbench trace top` and `trace export` read it.
pub const HEAP_PROFILE: u32 = 5;

/// The query timed out (the server's `--query-timeout-ms`).
pub const TIMEOUT: u32 = 408;
/// A frame, a result or a batch exceeds its limit.
pub const TOO_LARGE: u32 = 413;
/// The SQL or the batch is wrong (the message names the construct or column).
pub const UNPROCESSABLE: u32 = 422;
/// The server is at `--max-connections`, or shutting down.
pub const UNAVAILABLE: u32 = 503;
/// The method exists, but this build of the server cannot answer it (a
/// heap profile asked of a build without jemalloc's profiler).
pub const NOT_BUILT: u32 = 501;
/// The data directory's disk is full: the insert was not stored (nothing of
/// it is visible), and every batch acknowledged before it is kept.
pub const INSUFFICIENT_STORAGE: u32 = 507;

/// The name a status is documented under, for messages.
pub fn status_name(status: u32) -> &'static str {
    match status {
        OK => "ok",
        BAD_REQUEST => "bad request",
        NOT_FOUND => "unknown method",
        TIMEOUT => "query timed out",
        GONE => "target gone",
        TOO_LARGE => "too large",
        UNPROCESSABLE => "bad SQL or batch",
        FAILED_DEPENDENCY => "target failed",
        TOO_MANY => "too many promises",
        INTERNAL => "internal error",
        UNAVAILABLE => "unavailable",
        INSUFFICIENT_STORAGE => "disk full",
        NOT_BUILT => "not in this build",
        _ => "unknown status",
    }
}

zap::zap_struct! {
    /// A columnar batch: a query's result, or rows to insert into `table`.
    pub struct Columns / ColumnsReader / ColumnsBuilder {
        rows: u64,
        types: List<u8>,
        name_ends: List<u32>,
        names: Bytes,
        offsets: List<u32>,
        nulls: Bytes,
        data: List<u64>,
        table: Text,
    }
}

/// TYPES[code] is the column type with that wire code.
const TYPES: [ColumnType; 12] = [
    ColumnType::UInt8,
    ColumnType::UInt16,
    ColumnType::UInt32,
    ColumnType::UInt64,
    ColumnType::Int8,
    ColumnType::Int16,
    ColumnType::Int32,
    ColumnType::Int64,
    ColumnType::Float64,
    ColumnType::DateTime,
    ColumnType::String,
    ColumnType::LowCardinalityString,
];

/// The wire code of a column type.
pub fn type_code(t: ColumnType) -> u8 {
    TYPES.iter().position(|&x| x == t).expect("every type has a code") as u8
}

/// Why a `Columns` message could not be built or read; names the field,
/// column or row at fault.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("malformed message: {0}")]
    Zap(#[from] zap::Error),
    #[error("field `{field}`: {what}")]
    Field { field: &'static str, what: String },
    #[error("column `{column}`: {what}")]
    Column { column: String, what: String },
}

fn field(field: &'static str, what: impl Into<String>) -> ProtocolError {
    ProtocolError::Field { field, what: what.into() }
}

fn column_err(column: &str, what: impl Into<String>) -> ProtocolError {
    ProtocolError::Column { column: column.to_string(), what: what.into() }
}

/// One cell as the encoder sees it, borrowed from a result row or a batch.
#[derive(Debug, Clone, Copy)]
pub enum Cell<'a> {
    Null,
    U(u64),
    I(i64),
    F(f64),
    S(&'a str),
}

impl<'a> From<&'a Value> for Cell<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::Null => Cell::Null,
            Value::U(x) => Cell::U(*x),
            Value::I(x) => Cell::I(*x),
            Value::F(x) => Cell::F(*x),
            Value::S(s) => Cell::S(s),
        }
    }
}

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// Accumulates columns, then writes one `Columns` message.
///
/// PERF: values are written once into `data`, then copied once into the
/// message; a reused writer and builder allocate nothing after warm-up.
/// A result shaped as the one before it (same columns, rows and data
/// length, no nulls: a chain's every link) is the previous message with
/// its data replaced, not built again ([`Template`]).
#[derive(Default)]
pub struct ColumnsWriter {
    rows: usize,
    types: Vec<u8>,
    name_ends: Vec<u32>,
    names: Vec<u8>,
    offsets: Vec<u32>,
    nulls: Vec<u8>,
    any_null: bool,
    data: Vec<u8>,
    last: Template,
    /// Messages served from the template (for the tests).
    #[cfg(test)]
    templated: usize,
}

/// The last result message and what it was built from, everything but its
/// data: the message depends on nothing else, so a result agreeing on all
/// of it is this message with the new data written over the old.
#[derive(Default)]
struct Template {
    msg: Vec<u8>,
    /// Where the data section starts in `msg`; `None`: no template.
    data_at: Option<usize>,
    rows: usize,
    types: Vec<u8>,
    name_ends: Vec<u32>,
    names: Vec<u8>,
    offsets: Vec<u32>,
}

impl Template {
    fn fits(&self, w: &ColumnsWriter) -> Option<usize> {
        let at = self.data_at?;
        (self.msg.len() - at == w.data.len()
            && self.rows == w.rows
            && self.types == w.types
            && self.offsets == w.offsets
            && self.name_ends == w.name_ends
            && self.names == w.names)
            .then_some(at)
    }
}

impl ColumnsWriter {
    /// Starts a message of `rows` rows.
    pub fn start(&mut self, rows: usize) {
        self.rows = rows;
        self.types.clear();
        self.name_ends.clear();
        self.names.clear();
        self.offsets.clear();
        self.nulls.clear();
        self.any_null = false;
        self.data.clear();
    }

    /// Appends a column; `cell(i)` gives row `i`. A value that does not fit
    /// the declared type is an error naming the column and row.
    pub fn column<'c>(
        &mut self,
        name: &str,
        ty: ColumnType,
        cell: impl Fn(usize) -> Cell<'c>,
    ) -> Result<(), ProtocolError> {
        let rows = self.rows;
        self.types.push(type_code(ty));
        self.names.extend_from_slice(name.as_bytes());
        self.name_ends.push(self.names.len() as u32);
        self.data.resize(align8(self.data.len()), 0);
        self.offsets.push(self.data.len() as u32);
        let null_base = self.nulls.len();
        self.nulls.resize(null_base + rows.div_ceil(8), 0);
        let bad = |i: usize, c: Cell<'_>| column_err(name, format!("row {i}: {c:?} does not fit {}", ty.name()));
        match ty.width() {
            Some(w) => {
                for i in 0..rows {
                    let c = cell(i);
                    let bits: u64 = match (c, ty) {
                        (Cell::Null, _) => {
                            self.nulls[null_base + i / 8] |= 1 << (i % 8);
                            self.any_null = true;
                            0
                        }
                        (Cell::F(f), ColumnType::Float64) => f.to_bits(),
                        (Cell::U(u), ColumnType::Float64) => (u as f64).to_bits(),
                        (Cell::I(x), ColumnType::Float64) => (x as f64).to_bits(),
                        (Cell::U(u), t) if t.is_unsigned() && u <= t.max_unsigned() => u,
                        (Cell::I(x), t) if t.is_unsigned() && x >= 0 && x as u64 <= t.max_unsigned() => x as u64,
                        (Cell::I(x), t) if t.is_signed() && (t.signed_range().0..=t.signed_range().1).contains(&x) => {
                            x as u64
                        }
                        (Cell::U(u), t) if t.is_signed() && u <= t.signed_range().1 as u64 => u,
                        _ => return Err(bad(i, c)),
                    };
                    self.data.extend_from_slice(&bits.to_le_bytes()[..w]);
                }
            }
            None => {
                let offs_at = self.data.len();
                self.data.resize(offs_at + 4 * (rows + 1), 0);
                self.data.resize(align8(self.data.len()), 0);
                let bytes_at = self.data.len();
                for i in 0..rows {
                    match cell(i) {
                        Cell::S(s) => self.data.extend_from_slice(s.as_bytes()),
                        Cell::Null => {
                            self.nulls[null_base + i / 8] |= 1 << (i % 8);
                            self.any_null = true;
                        }
                        c => return Err(bad(i, c)),
                    }
                    let end = (self.data.len() - bytes_at) as u32;
                    let at = offs_at + 4 * (i + 1);
                    self.data[at..at + 4].copy_from_slice(&end.to_le_bytes());
                }
            }
        }
        Ok(())
    }

    /// Writes the message into `b`; `table` names an insert's target ("" for results).
    pub fn finish<'b>(&'b mut self, b: &'b mut Builder, table: &str) -> Result<&'b [u8], ProtocolError> {
        self.data.resize(align8(self.data.len()), 0);
        self.offsets.push(self.data.len() as u32);
        if self.data.len() > u32::MAX as usize {
            return Err(field("data", format!("{} bytes exceed the 4 GiB a message addresses", self.data.len())));
        }
        // A result (no table) without nulls may reuse the last message.
        let templated = table.is_empty() && !self.any_null;
        if let Some(at) = self.last.fits(self).filter(|_| templated) {
            self.last.msg[at..].copy_from_slice(&self.data);
            #[cfg(test)]
            {
                self.templated += 1;
            }
            return Ok(&self.last.msg);
        }
        let mut m = b.root::<Columns>();
        m.rows(self.rows as u64);
        m.types(&self.types);
        m.name_ends(&self.name_ends);
        m.names(&self.names);
        m.offsets(&self.offsets);
        m.nulls(if self.any_null { &self.nulls } else { &[] });
        let data = &self.data;
        m.s.set_list_with(Columns::data, 8, data.len() / 8, |dst| dst.copy_from_slice(data));
        m.table(table);
        let msg = m.finish()?;
        self.last.data_at = None;
        if templated {
            // NOTE: the data is the message's last section only while the
            // table is empty; `fits` checks the length, this the position.
            let t = &mut self.last;
            t.msg.clear();
            t.msg.extend_from_slice(msg);
            let at = ColumnsView::parse(&t.msg).map(|v| v.data.as_ptr() as usize - t.msg.as_ptr() as usize);
            if let Some(at) = at.ok().filter(|&at| t.msg.len() - at == self.data.len()) {
                t.data_at = Some(at);
                t.rows = self.rows;
                t.types.clear();
                t.name_ends.clear();
                t.names.clear();
                t.offsets.clear();
                t.types.extend_from_slice(&self.types);
                t.name_ends.extend_from_slice(&self.name_ends);
                t.names.extend_from_slice(&self.names);
                t.offsets.extend_from_slice(&self.offsets);
            }
        }
        Ok(msg)
    }
}

/// Encodes a query result (row-major values) as a `Columns` message.
pub fn encode_result<'b>(
    w: &'b mut ColumnsWriter,
    b: &'b mut Builder,
    r: &datastore::QueryResult,
) -> Result<&'b [u8], ProtocolError> {
    w.start(r.rows.len());
    for (c, (name, ty)) in r.columns.iter().zip(r.types.iter()).enumerate() {
        w.column(name, *ty, |i| Cell::from(&r.rows[i][c]))?;
    }
    w.finish(b, "")
}

/// Encodes rows to insert into `table` (columns in the schema's order).
pub fn encode_batch<'b>(
    w: &'b mut ColumnsWriter,
    b: &'b mut Builder,
    table: &str,
    columns: &[(String, ColumnType)],
    batch: &Batch,
) -> Result<&'b [u8], ProtocolError> {
    w.start(batch.rows());
    for ((name, ty), data) in columns.iter().zip(&batch.columns) {
        w.column(name, *ty, |i| match data {
            ColumnData::U64(v) => Cell::U(v[i]),
            ColumnData::I64(v) => Cell::I(v[i]),
            ColumnData::F64(v) => Cell::F(v[i]),
            ColumnData::Str(_) | ColumnData::Dict { .. } => data.str_at(i).map_or(Cell::Null, Cell::S),
        })?;
    }
    w.finish(b, table)
}

/// A `Columns` message, validated, every array borrowed from its bytes.
#[derive(Debug, Clone, Copy)]
pub struct ColumnsView<'a> {
    rows: usize,
    types: &'a [u8],
    name_ends: zap::ListReader<'a, u32>,
    names: &'a [u8],
    offsets: zap::ListReader<'a, u32>,
    nulls: &'a [u8],
    data: &'a [u8],
    table: &'a str,
}

/// One column of a [`ColumnsView`].
#[derive(Debug, Clone, Copy)]
pub struct ColumnView<'a> {
    pub name: &'a str,
    pub ty: ColumnType,
    rows: usize,
    /// Fixed-width values, or a string column's u32 offsets.
    values: &'a [u8],
    /// A string column's bytes.
    strings: &'a [u8],
    nulls: Option<&'a [u8]>,
}

impl<'a> ColumnsView<'a> {
    /// Parses and checks a message: every column's region lies inside `data`
    /// and has the length its type and the row count imply.
    pub fn parse(msg: &'a [u8]) -> Result<Self, ProtocolError> {
        let r = zap::read::<Columns>(msg)?;
        let types = r.types()?.as_bytes();
        let name_ends = r.name_ends()?;
        let offsets = r.offsets()?;
        let data = r.data()?.as_bytes();
        let nulls = r.nulls()?;
        let names = r.names()?;
        let n = types.len();
        let rows = usize::try_from(r.rows()).map_err(|_| field("rows", "does not fit this machine"))?;
        if name_ends.len() != n {
            return Err(field("name_ends", format!("{} entries for {n} columns", name_ends.len())));
        }
        if offsets.len() != n + 1 && !(n == 0 && offsets.len() <= 1) {
            return Err(field("offsets", format!("{} entries for {n} columns (want {})", offsets.len(), n + 1)));
        }
        if !nulls.is_empty() && nulls.len() != n * rows.div_ceil(8) {
            return Err(field("nulls", format!("{} bytes; want 0 or {}", nulls.len(), n * rows.div_ceil(8))));
        }
        let v = ColumnsView { rows, types, name_ends, names, offsets, nulls, data, table: r.table()? };
        for i in 0..n {
            v.column(i)?;
        }
        Ok(v)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn len(&self) -> usize {
        self.types.len()
    }

    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// The target table of an insert batch.
    pub fn table(&self) -> &'a str {
        self.table
    }

    /// Column `i`, checked.
    pub fn column(&self, i: usize) -> Result<ColumnView<'a>, ProtocolError> {
        let code = *self.types.get(i).ok_or_else(|| field("types", format!("no column {i}")))?;
        let ty =
            *TYPES.get(code as usize).ok_or_else(|| field("types", format!("column {i}: unknown type code {code}")))?;
        let start = if i == 0 { 0 } else { self.name_ends.get(i - 1).unwrap_or(0) as usize };
        let end = self.name_ends.get(i).unwrap_or(0) as usize;
        let name = self
            .names
            .get(start..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| field("names", format!("column {i}: bad name range {start}..{end}")))?;
        let (lo, hi) = (self.offsets.get(i).unwrap_or(0) as usize, self.offsets.get(i + 1).unwrap_or(0) as usize);
        let region = self
            .data
            .get(lo..hi)
            .filter(|_| lo % 8 == 0)
            .ok_or_else(|| column_err(name, format!("data range {lo}..{hi} outside {} bytes", self.data.len())))?;
        let rows = self.rows;
        let (values, strings) = match ty.width() {
            Some(w) => {
                let want = rows.checked_mul(w).filter(|&n| n <= region.len() && region.len() - n < 8);
                let n =
                    want.ok_or_else(|| column_err(name, format!("{} bytes for {rows} rows of {w}", region.len())))?;
                (&region[..n], &[][..])
            }
            None => {
                let offs_len = rows
                    .checked_add(1)
                    .and_then(|r| r.checked_mul(4))
                    .filter(|&n| align8(n) <= region.len())
                    .ok_or_else(|| {
                        column_err(name, format!("{} bytes cannot hold {rows} string offsets", region.len()))
                    })?;
                (&region[..offs_len], &region[align8(offs_len)..])
            }
        };
        let nulls = (!self.nulls.is_empty()).then(|| {
            let per = rows.div_ceil(8);
            &self.nulls[i * per..(i + 1) * per]
        });
        Ok(ColumnView { name, ty, rows, values, strings, nulls })
    }

    /// Every row as values (allocates; for printing and tests).
    pub fn to_rows(&self) -> Result<Vec<Vec<Value>>, ProtocolError> {
        let cols: Vec<ColumnView<'a>> = (0..self.len()).map(|i| self.column(i)).collect::<Result<_, _>>()?;
        (0..self.rows).map(|r| cols.iter().map(|c| c.value(r)).collect()).collect()
    }

    /// The first value of the first column: what `$prev` binds to.
    pub fn first_value(&self) -> Result<Option<Value>, ProtocolError> {
        if self.rows == 0 || self.is_empty() {
            return Ok(None);
        }
        self.column(0)?.value(0).map(Some)
    }
}

impl<'a> ColumnView<'a> {
    pub fn is_null(&self, i: usize) -> bool {
        self.nulls.is_some_and(|n| n.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
    }

    fn raw(&self, i: usize) -> u64 {
        let w = self.ty.width().unwrap_or(0);
        let mut a = [0u8; 8];
        if let Some(b) = self.values.get(i * w..(i + 1) * w) {
            a[..w].copy_from_slice(b);
        }
        u64::from_le_bytes(a)
    }

    /// Row `i` of an unsigned or DateTime column.
    pub fn u64(&self, i: usize) -> Option<u64> {
        (self.ty.is_unsigned() && i < self.rows && !self.is_null(i)).then(|| self.raw(i))
    }

    /// Row `i` of a signed column, sign-extended from its width.
    pub fn i64(&self, i: usize) -> Option<i64> {
        let w = self.ty.width()? as u32 * 8;
        (self.ty.is_signed() && i < self.rows && !self.is_null(i))
            .then(|| ((self.raw(i) << (64 - w)) as i64) >> (64 - w))
    }

    pub fn f64(&self, i: usize) -> Option<f64> {
        (self.ty == ColumnType::Float64 && i < self.rows && !self.is_null(i)).then(|| f64::from_bits(self.raw(i)))
    }

    /// Row `i` of a string column, borrowed from the message.
    pub fn str(&self, i: usize) -> Result<Option<&'a str>, ProtocolError> {
        if self.ty.width().is_some() || i >= self.rows || self.is_null(i) {
            return Ok(None);
        }
        let off = |k: usize| {
            self.values.get(4 * k..4 * k + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        };
        let (lo, hi) = (off(i), off(i + 1));
        let bytes =
            self.strings.get(lo..hi).ok_or_else(|| column_err(self.name, format!("row {i}: bad range {lo}..{hi}")))?;
        std::str::from_utf8(bytes).map(Some).map_err(|e| column_err(self.name, format!("row {i}: {e}")))
    }

    /// Row `i` as a value (NULL where the bitmap says so).
    pub fn value(&self, i: usize) -> Result<Value, ProtocolError> {
        if self.is_null(i) {
            return Ok(Value::Null);
        }
        Ok(match self.ty {
            ColumnType::String | ColumnType::LowCardinalityString => {
                self.str(i)?.map_or(Value::Null, |s| Value::S(s.to_string()))
            }
            ColumnType::Float64 => Value::F(self.f64(i).unwrap_or(f64::NAN)),
            t if t.is_signed() => Value::I(self.i64(i).unwrap_or(0)),
            _ => Value::U(self.u64(i).unwrap_or(0)),
        })
    }

    /// The column as a batch column for an insert (widened in memory, as the engine keeps it).
    pub fn to_column_data(&self) -> Result<ColumnData, ProtocolError> {
        if self.nulls.is_some_and(|n| n.iter().any(|&b| b != 0)) {
            return Err(column_err(self.name, "NULL in an insert batch (columns are not nullable)"));
        }
        Ok(match self.ty {
            ColumnType::String | ColumnType::LowCardinalityString => ColumnData::Str(
                (0..self.rows)
                    .map(|i| self.str(i).map(|s| s.unwrap_or_default().to_string()))
                    .collect::<Result<_, _>>()?,
            ),
            ColumnType::Float64 => ColumnData::F64((0..self.rows).map(|i| f64::from_bits(self.raw(i))).collect()),
            t if t.is_signed() => ColumnData::I64((0..self.rows).map(|i| self.i64(i).unwrap_or(0)).collect()),
            _ => ColumnData::U64((0..self.rows).map(|i| self.raw(i)).collect()),
        })
    }
}

/// Builds an insert batch for a table from a view: every table column must
/// be present once, by name, with the table's type.
pub fn batch_for(view: &ColumnsView<'_>, schema: &[(String, ColumnType)]) -> Result<Batch, ProtocolError> {
    if view.len() != schema.len() {
        return Err(field("types", format!("{} columns; the table has {}", view.len(), schema.len())));
    }
    let mut columns = Vec::with_capacity(schema.len());
    for (name, ty) in schema {
        let col = (0..view.len())
            .map(|i| view.column(i))
            .find(|c| c.as_ref().is_ok_and(|c| c.name == name))
            .ok_or_else(|| column_err(name, "missing from the batch"))??;
        if col.ty != *ty {
            return Err(column_err(name, format!("is {} in the batch, {} in the table", col.ty.name(), ty.name())));
        }
        columns.push(col.to_column_data()?);
    }
    Ok(Batch { columns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_round_trips_with_nulls_strings_and_widths() {
        let r = datastore::QueryResult {
            columns: ["c".into(), "n".into(), "x".into(), "d".into(), "i".into()].into(),
            types: [
                ColumnType::LowCardinalityString,
                ColumnType::UInt64,
                ColumnType::Float64,
                ColumnType::DateTime,
                ColumnType::Int8,
            ]
            .into(),
            rows: vec![
                vec![Value::S("api".into()), Value::U(3), Value::F(0.5), Value::U(1_765_445_523), Value::I(-128)],
                vec![Value::S("".into()), Value::U(u64::MAX), Value::Null, Value::U(0), Value::I(127)],
            ],
        };
        let (mut w, mut b) = (ColumnsWriter::default(), Builder::new());
        let msg = encode_result(&mut w, &mut b, &r).unwrap().to_vec();
        let v = ColumnsView::parse(&msg).unwrap();
        assert_eq!((v.rows(), v.len()), (2, 5));
        assert_eq!(v.to_rows().unwrap(), r.rows);
        assert_eq!(v.column(3).unwrap().values.len(), 8, "DateTime travels as 4 bytes a row");
        assert!(v.column(2).unwrap().is_null(1));
        assert_eq!(v.first_value().unwrap(), Some(Value::S("api".into())));
    }

    /// Results shaped alike reuse the last message with new data; every one
    /// is byte for byte what a fresh writer builds, and a change of shape
    /// (another name, row count, a null, a string's length) builds anew.
    #[test]
    fn a_templated_result_is_what_a_fresh_writer_builds() {
        let one = |name: &str, rows: Vec<Vec<Value>>| {
            let ty = match rows.iter().flatten().find(|v| !matches!(v, Value::Null)) {
                Some(Value::S(_)) => ColumnType::String,
                _ => ColumnType::UInt64,
            };
            datastore::QueryResult { columns: [name.to_string()].into(), types: [ty].into(), rows }
        };
        let cases = [
            one("min(k)", vec![vec![Value::U(1)]]),
            one("min(k)", vec![vec![Value::U(2)]]),
            one("min(k)", vec![vec![Value::U(u64::MAX)]]),
            one("max(k)", vec![vec![Value::U(7)]]),
            one("max(k)", vec![vec![Value::U(8)], vec![Value::U(9)]]),
            one("max(k)", vec![vec![Value::Null], vec![Value::U(9)]]),
            one("max(k)", vec![vec![Value::U(3)], vec![Value::U(9)]]),
            one("s", vec![vec![Value::S("ab".into())]]),
            one("s", vec![vec![Value::S("cd".into())]]),
            one("s", vec![vec![Value::S("abcdefghij".into())]]),
        ];
        let (mut w, mut b) = (ColumnsWriter::default(), Builder::new());
        for r in &cases {
            let fresh = encode_result(&mut ColumnsWriter::default(), &mut Builder::new(), r).unwrap().to_vec();
            let msg = encode_result(&mut w, &mut b, r).unwrap().to_vec();
            assert_eq!(msg, fresh, "{:?}", r.rows);
            assert_eq!(ColumnsView::parse(&msg).unwrap().to_rows().unwrap(), r.rows);
        }
        // From the template: min(k) = 2 and u64::MAX, and "cd" (the length of "ab").
        assert_eq!(w.templated, 3);
    }

    #[test]
    fn a_value_that_does_not_fit_names_column_and_row() {
        let mut w = ColumnsWriter::default();
        w.start(2);
        let e = w.column("small", ColumnType::UInt8, |i| Cell::U(if i == 1 { 300 } else { 1 })).unwrap_err();
        assert_eq!(e.to_string(), "column `small`: row 1: U(300) does not fit UInt8");
    }

    #[test]
    fn corrupt_offsets_are_errors_naming_the_column() {
        let r = datastore::QueryResult {
            columns: ["n".into()].into(),
            types: [ColumnType::UInt64].into(),
            rows: vec![vec![Value::U(1)], vec![Value::U(2)]],
        };
        let (mut w, mut b) = (ColumnsWriter::default(), Builder::new());
        let mut msg = encode_result(&mut w, &mut b, &r).unwrap().to_vec();
        // rows = 3 where the data holds 2: the region is too short.
        msg[16..24].copy_from_slice(&3u64.to_le_bytes());
        let e = ColumnsView::parse(&msg).unwrap_err();
        assert_eq!(e.to_string(), "column `n`: 16 bytes for 3 rows of 8");
    }
}
