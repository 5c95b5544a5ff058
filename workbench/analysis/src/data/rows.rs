//! A dataset's rows read back into the `records` crate's types: the same
//! types the measured process wrote, so a report reads fields, not columns
//! named by strings.
//!
//! A row is deserialised straight from the frame's columns (no JSON on the
//! way): its non-null cells, by column name. A column widened to float when
//! the dataset was written (one value of it was fractional) hands a whole
//! number to an integer field as an integer.

use anyhow::{Context, Result};
use polars::prelude::{BooleanChunked, DataFrame, DataType, Float64Chunked, Int64Chunked, UInt64Chunked};
use records::{CellFields, Row};
use serde::de::{self, Deserialize, IntoDeserializer, Visitor};
use std::collections::HashMap;

/// One column's values, typed once. PERF: numbers stay in the frame's own
/// arrays (one chunk each; a copy of millions of rows was most of a read),
/// text becomes a dictionary (millions of rows name a few codecs and
/// variants), handed out borrowed.
enum Values {
    U(UInt64Chunked),
    I(Int64Chunked),
    F(Float64Chunked),
    S(Vec<Option<u32>>, Vec<String>),
    B(BooleanChunked),
}

/// One cell's value.
#[derive(Clone, Copy)]
enum Value<'a> {
    U(u64),
    I(i64),
    F(f64),
    S(&'a str),
    B(bool),
}

impl Values {
    fn get(&self, i: usize) -> Option<Value<'_>> {
        match self {
            Values::U(v) => v.get(i).map(Value::U),
            Values::I(v) => v.get(i).map(Value::I),
            Values::F(v) => v.get(i).map(Value::F),
            Values::S(v, words) => v[i].map(|w| Value::S(&words[w as usize])),
            Values::B(v) => v.get(i).map(Value::B),
        }
    }
}

/// A frame's columns, typed for reading rows.
pub struct Columns {
    cols: Vec<(String, Values)>,
    height: usize,
}

impl Columns {
    pub fn of(df: &DataFrame) -> Result<Columns> {
        let mut cols = Vec::new();
        let n = df.height();
        // PERF: sized up front: polars' iterators give no exact length.
        fn sized<T>(n: usize, it: impl Iterator<Item = T>) -> Vec<T> {
            let mut v = Vec::with_capacity(n);
            v.extend(it);
            v
        }
        for c in df.columns() {
            let name = c.name().to_string();
            let at = || format!("column `{name}`");
            let dt = c.dtype();
            let values = if dt.is_unsigned_integer() {
                Values::U(c.cast(&DataType::UInt64).with_context(at)?.u64()?.rechunk().into_owned())
            } else if dt.is_signed_integer() {
                Values::I(c.cast(&DataType::Int64).with_context(at)?.i64()?.rechunk().into_owned())
            } else if dt.is_float() {
                Values::F(c.cast(&DataType::Float64).with_context(at)?.f64()?.rechunk().into_owned())
            } else if dt.is_bool() {
                Values::B(c.bool().with_context(at)?.rechunk().into_owned())
            } else if dt.is_null() {
                continue;
            } else {
                let s = c.cast(&DataType::String).with_context(at)?;
                let (mut words, mut index) = (Vec::new(), HashMap::new());
                let ids = sized(
                    n,
                    s.str()?.iter().map(|o| {
                        o.map(|w| {
                            *index.entry(w).or_insert_with(|| {
                                words.push(w.to_string());
                                words.len() as u32 - 1
                            })
                        })
                    }),
                );
                Values::S(ids, words)
            };
            cols.push((name, values));
        }
        Ok(Columns { cols, height: df.height() })
    }

    /// Row `i` as `T`.
    pub fn row<'a, T: Deserialize<'a>>(&'a self, i: usize) -> Result<T, de::value::Error> {
        T::deserialize(RowDe { cols: &self.cols, row: i })
    }

    /// Every row as a record of type `R` with its cell's fields, one at a
    /// time (a report that keeps a few fields of millions of rows).
    pub fn each<'a, R: Deserialize<'a> + 'a>(&'a self) -> impl Iterator<Item = Result<Row<R, &'a str>>> + 'a {
        (0..self.height).map(move |i| -> Result<Row<R, &'a str>> {
            let cell: CellFields<&str> = self.row(i).with_context(|| format!("row {i}: the cell's fields"))?;
            let record: R = self.row(i).with_context(|| format!("row {i}"))?;
            Ok(Row { cell, record })
        })
    }

    /// Every row as a record of type `R` with its cell's fields.
    pub fn rows<'a, R: Deserialize<'a> + 'a>(&'a self) -> Result<Vec<Row<R, &'a str>>> {
        self.each().collect()
    }
}

struct RowDe<'a> {
    cols: &'a [(String, Values)],
    row: usize,
}

impl<'de> de::Deserializer<'de> for RowDe<'de> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_map(RowMap { cols: self.cols, row: self.row, next: 0, value: None })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct RowMap<'a> {
    cols: &'a [(String, Values)],
    row: usize,
    next: usize,
    value: Option<Value<'a>>,
}

impl<'de> de::MapAccess<'de> for RowMap<'de> {
    type Error = de::value::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        while let Some((name, values)) = self.cols.get(self.next) {
            self.next += 1;
            if let Some(v) = values.get(self.row) {
                self.value = Some(v);
                return seed.deserialize(de::value::BorrowedStrDeserializer::new(name.as_str())).map(Some);
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        let v = self.value.take().ok_or_else(|| de::Error::custom("a value without its key"))?;
        seed.deserialize(ValueDe(v))
    }
}

struct ValueDe<'a>(Value<'a>);

impl<'de> de::Deserializer<'de> for ValueDe<'de> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::U(x) => visitor.visit_u64(x),
            Value::I(x) => visitor.visit_i64(x),
            // A whole number in a column widened to float.
            Value::F(x) if x.fract() == 0.0 && x >= 0.0 && x < u64::MAX as f64 => visitor.visit_u64(x as u64),
            Value::F(x) if x.fract() == 0.0 && x > i64::MIN as f64 && x < 0.0 => visitor.visit_i64(x as i64),
            Value::F(x) => visitor.visit_f64(x),
            Value::S(s) => visitor.visit_borrowed_str(s),
            Value::B(b) => visitor.visit_bool(b),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::F(x) => visitor.visit_f64(x),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        // A null cell is no key at all: a value here is always `Some`.
        visitor.visit_some(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::S(s) => visitor.visit_enum(IntoDeserializer::<de::value::Error>::into_deserializer(s)),
            _ => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::dataset::frame_from_fields;
    use records::subject::{AllocProfile, Phase};
    use serde_json::json;

    #[test]
    fn rows_read_back_as_written_with_their_cell() {
        let a = AllocProfile {
            msg: 3,
            phase: Phase::Decode,
            wire_bytes: 9,
            allocs: Some(2),
            bytes: None,
            bytes_freed: None,
        };
        let mut r = serde_json::to_value(&a).unwrap();
        let m = r.as_object_mut().unwrap();
        m.insert("variant".into(), json!("dhat"));
        m.insert("rep".into(), json!(1));
        m.insert("codec".into(), json!("zap"));
        m.insert("payload".into(), json!(64));
        let mut other = m.clone();
        other.insert("bytes".into(), json!(4.0));
        let df = frame_from_fields(&[m.clone(), other]).unwrap();
        let cols = Columns::of(&df).unwrap();
        let rows: Vec<Row<AllocProfile, &str>> = cols.rows().unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(rows[0].record, a);
        assert_eq!((rows[0].cell.codec(), rows[0].cell.payload(), rows[0].cell.rep), ("zap", 64, 1));
        // A whole number in a float column reads as an integer …
        assert_eq!(rows[1].record.bytes, Some(4));
        // … and a fraction does not: an integer field refuses 1.5, naming the row.
        let df = frame_from_fields(&[m.clone(), {
            let mut o = m.clone();
            o.insert("wire_bytes".into(), json!(1.5));
            o
        }])
        .unwrap();
        let e = Columns::of(&df).unwrap().rows::<AllocProfile>().unwrap_err();
        assert!(format!("{e:#}").contains("row 1"), "{e:#}");
    }

    #[test]
    fn tagged_enums_read_by_their_kind() {
        use records::server::datastore_queries::{Record, Table};
        let t = Record::Table(Table { rows: 10, parts: 1, disk_bytes: 99 });
        let mut v = serde_json::to_value(&t).unwrap();
        v.as_object_mut().unwrap().insert("variant".into(), json!("system"));
        v.as_object_mut().unwrap().insert("rep".into(), json!(0));
        let df = frame_from_fields(&[v.as_object().unwrap().clone()]).unwrap();
        let cols = Columns::of(&df).unwrap();
        let rows: Vec<Row<Record, &str>> = cols.rows().unwrap();
        assert_eq!(rows[0].record, t);
    }
}
