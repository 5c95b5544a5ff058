//! Column types, values, and the in-memory column data of one granule or batch.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnType {
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Int8,
    Int16,
    Int32,
    Int64,
    Float64,
    /// Seconds since the Unix epoch, stored as u32 (ClickHouse's DateTime).
    DateTime,
    String,
    LowCardinalityString,
}

impl ColumnType {
    /// Bytes per value on disk; `None` for strings.
    pub fn width(self) -> Option<usize> {
        use ColumnType::*;
        Some(match self {
            UInt8 | Int8 => 1,
            UInt16 | Int16 => 2,
            UInt32 | Int32 | DateTime => 4,
            UInt64 | Int64 | Float64 => 8,
            String | LowCardinalityString => return None,
        })
    }

    pub fn is_signed(self) -> bool {
        matches!(self, ColumnType::Int8 | ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64)
    }

    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 | ColumnType::DateTime
        )
    }

    pub fn name(self) -> &'static str {
        use ColumnType::*;
        match self {
            UInt8 => "UInt8",
            UInt16 => "UInt16",
            UInt32 => "UInt32",
            UInt64 => "UInt64",
            Int8 => "Int8",
            Int16 => "Int16",
            Int32 => "Int32",
            Int64 => "Int64",
            Float64 => "Float64",
            DateTime => "DateTime",
            String => "String",
            LowCardinalityString => "LowCardinality(String)",
        }
    }

    /// The largest value an unsigned column of this type holds.
    pub fn max_unsigned(self) -> u64 {
        match self.width() {
            Some(8) | None => u64::MAX,
            Some(w) => (1u64 << (8 * w)) - 1,
        }
    }

    pub fn signed_range(self) -> (i64, i64) {
        match self.width() {
            Some(8) | None => (i64::MIN, i64::MAX),
            Some(w) => (-(1i64 << (8 * w - 1)), (1i64 << (8 * w - 1)) - 1),
        }
    }
}

/// One value: a cell of a result, a key in the primary index, a literal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Value {
    Null,
    U(u64),
    I(i64),
    F(f64),
    S(String),
}

impl Value {
    /// Heap bytes the value owns (a string's text).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::S(s) => s.capacity(),
            _ => 0,
        }
    }

    /// A total order across numeric kinds (ints compared exactly, floats by
    /// `total_cmp`), strings after numbers, NULL first.
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (S(a), S(b)) => a.cmp(b),
            (S(_), _) => Ordering::Greater,
            (_, S(_)) => Ordering::Less,
            (U(a), U(b)) => a.cmp(b),
            (I(a), I(b)) => a.cmp(b),
            (U(a), I(b)) => (*a as i128).cmp(&(*b as i128)),
            (I(a), U(b)) => (*a as i128).cmp(&(*b as i128)),
            (F(a), F(b)) => a.total_cmp(b),
            (F(a), U(b)) => a.total_cmp(&(*b as f64)),
            (F(a), I(b)) => a.total_cmp(&(*b as f64)),
            (U(a), F(b)) => (*a as f64).total_cmp(b),
            (I(a), F(b)) => (*a as f64).total_cmp(b),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::U(v) => Some(*v as f64),
            Value::I(v) => Some(*v as f64),
            Value::F(v) => Some(*v),
            _ => None,
        }
    }
}

impl Value {
    /// The value as ClickHouse prints a column of type `ty` in its text
    /// formats: a DateTime as `YYYY-MM-DD hh:mm:ss` (UTC), others as usual.
    pub fn display_as(&self, ty: ColumnType) -> String {
        match (self, ty) {
            (Value::U(secs), ColumnType::DateTime) => {
                let (y, mo, d, h, mi, s) = civil(*secs);
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            }
            (v, _) => v.to_string(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.total_cmp(other) == Ordering::Equal
    }
}
impl Eq for Value {}
impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Value {
    fn cmp(&self, other: &Value) -> Ordering {
        self.total_cmp(other)
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::U(v) => write!(f, "{v}"),
            Value::I(v) => write!(f, "{v}"),
            Value::F(v) => write!(f, "{v}"),
            Value::S(v) => f.write_str(v),
        }
    }
}

/// The values of one column for a run of rows. Integers of every width are
/// widened in memory (u64 / i64); they keep their width on disk.
#[derive(Debug, Clone)]
pub enum ColumnData {
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<String>),
    /// LowCardinality as read from a part: keys into the part's dictionary.
    Dict {
        keys: Vec<u32>,
        dict: Arc<Vec<String>>,
    },
}

impl ColumnData {
    /// Heap bytes of the values held (a shared dictionary is its part's, not counted).
    pub fn heap_bytes(&self) -> usize {
        match self {
            ColumnData::U64(v) => v.capacity() * 8,
            ColumnData::I64(v) => v.capacity() * 8,
            ColumnData::F64(v) => v.capacity() * 8,
            ColumnData::Str(v) => {
                v.capacity() * std::mem::size_of::<String>() + v.iter().map(String::capacity).sum::<usize>()
            }
            ColumnData::Dict { keys, .. } => keys.capacity() * 4,
        }
    }

    pub fn empty_for(t: ColumnType) -> ColumnData {
        match t {
            ColumnType::Float64 => ColumnData::F64(Vec::new()),
            ColumnType::String | ColumnType::LowCardinalityString => ColumnData::Str(Vec::new()),
            t if t.is_signed() => ColumnData::I64(Vec::new()),
            _ => ColumnData::U64(Vec::new()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ColumnData::U64(v) => v.len(),
            ColumnData::I64(v) => v.len(),
            ColumnData::F64(v) => v.len(),
            ColumnData::Str(v) => v.len(),
            ColumnData::Dict { keys, .. } => keys.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        match self {
            ColumnData::U64(v) => v.clear(),
            ColumnData::I64(v) => v.clear(),
            ColumnData::F64(v) => v.clear(),
            ColumnData::Str(v) => v.clear(),
            ColumnData::Dict { keys, .. } => keys.clear(),
        }
    }

    /// The value at row `i`.
    pub fn value(&self, i: usize) -> Value {
        match self {
            ColumnData::U64(v) => Value::U(v[i]),
            ColumnData::I64(v) => Value::I(v[i]),
            ColumnData::F64(v) => Value::F(v[i]),
            ColumnData::Str(v) => Value::S(v[i].clone()),
            ColumnData::Dict { keys, dict } => Value::S(dict[keys[i] as usize].clone()),
        }
    }

    /// The string at row `i` of a string column.
    pub fn str_at(&self, i: usize) -> Option<&str> {
        match self {
            ColumnData::Str(v) => Some(&v[i]),
            ColumnData::Dict { keys, dict } => Some(&dict[keys[i] as usize]),
            _ => None,
        }
    }

    /// Compares row `i` of `self` with row `j` of `other` (same column type).
    pub fn cmp_rows(&self, i: usize, other: &ColumnData, j: usize) -> Ordering {
        match (self, other) {
            (ColumnData::U64(a), ColumnData::U64(b)) => a[i].cmp(&b[j]),
            (ColumnData::I64(a), ColumnData::I64(b)) => a[i].cmp(&b[j]),
            (ColumnData::F64(a), ColumnData::F64(b)) => a[i].total_cmp(&b[j]),
            _ => match (self.str_at(i), other.str_at(j)) {
                (Some(a), Some(b)) => a.cmp(b),
                _ => self.value(i).cmp(&other.value(j)),
            },
        }
    }
}

/// Seconds since the epoch (a DateTime) as `(YYYY, MM, DD, hh, mm, ss)` in UTC.
pub fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

/// Strings numbered densely in first-seen order: a LowCardinality
/// column's dictionary as a part is written, and string group keys as a
/// query aggregates.
#[derive(Debug, Clone, Default)]
pub struct StringIds {
    ids: std::collections::HashMap<String, u32, foldhash::fast::RandomState>,
    /// The strings, by id.
    pub strings: Vec<String>,
    /// Bytes of the strings' text (each held twice: in `ids` and `strings`).
    text: usize,
}

impl StringIds {
    /// The id of `s`, numbering it if new.
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.ids.insert(s.to_string(), i);
        self.strings.push(s.to_string());
        self.text += s.len();
        i
    }

    /// Heap bytes held (a query's interned strings count against its memory budget).
    pub fn heap_bytes(&self) -> usize {
        let buckets = if self.ids.capacity() == 0 { 0 } else { (self.ids.capacity() * 8 / 7).next_power_of_two() };
        buckets * (std::mem::size_of::<(String, u32)>() + 1)
            + self.strings.capacity() * std::mem::size_of::<String>()
            + 2 * self.text
    }
}

/// Rows to insert: one [`ColumnData`] per table column, in table order.
#[derive(Debug, Clone)]
pub struct Batch {
    pub columns: Vec<ColumnData>,
}

impl Batch {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_display_as_clickhouse_prints_them() {
        assert_eq!(Value::U(1_765_445_523).display_as(ColumnType::DateTime), "2025-12-11 09:32:03");
        assert_eq!(Value::U(0).display_as(ColumnType::DateTime), "1970-01-01 00:00:00");
        assert_eq!(Value::U(1_765_445_523).display_as(ColumnType::UInt32), "1765445523");
        assert_eq!(Value::Null.display_as(ColumnType::DateTime), "NULL");
    }
}
