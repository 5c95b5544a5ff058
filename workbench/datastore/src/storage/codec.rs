//! Compressed blocks: one block per granule per column.
//!
//! A block is a 14-byte header — codec (u8), value width (u8), rows (u32),
//! raw length (u32), compressed length (u32), little-endian — then the LZ4
//! block. Integers keep their declared width on disk (a UInt8 takes a byte).
//! `Delta` stores each value minus the previous one, wrapping at the
//! column's width (ClickHouse's Delta), before LZ4: sorted integers and
//! timestamps become runs of small numbers that LZ4 then squeezes.
//! LowCardinality columns store keys into the part's dictionary at the
//! narrowest width that holds the granule's largest key.
//!
//! A block whose LZ4 form would save under [`MIN_GAIN_PCT`] percent (random
//! `Float64`, random `UInt32`) is stored as is instead, flagged by the
//! codec byte's [`STORED`] bit, as ClickHouse's `NONE` codec stores it:
//! reading it costs a copy, not a decompression.
//!
//! A fixed-width block whose values are all one value (a granule inside
//! one key's run of a sorted LowCardinality or integer column) stores that
//! value once, flagged by [`CONST`]: reading it is a fill.

use crate::types::{ColumnData, ColumnType};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub const HEADER: usize = 14;
/// Codec-byte flag: the payload is the raw bytes, not LZ4.
pub const STORED: u8 = 0x80;
/// Codec-byte flag: the payload is one value of the block's width, which
/// every row holds.
// PERF: the paper's table is sorted by category, so each of its granules
// but the few at a key's boundary holds one key. LZ4 stores such a block as
// one overlapping match, and lz4_flex copies an overlapping match a byte at
// a time: that copy was 35 % of the group-by query's CPU (perf, 10M rows).
pub const CONST: u8 = 0x40;
/// LZ4 must save at least this share of a block's bytes to be kept.
pub const MIN_GAIN_PCT: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Codec {
    Lz4,
    DeltaLz4,
}

impl Codec {
    fn tag(self) -> u8 {
        match self {
            Codec::Lz4 => 1,
            Codec::DeltaLz4 => 2,
        }
    }
}

/// Why a block could not be decoded (the caller adds the file).
#[derive(Debug)]
pub struct BlockError(pub String);

fn put(raw: &mut Vec<u8>, v: u64, w: usize) {
    raw.extend_from_slice(&v.to_le_bytes()[..w]);
}

fn mask(w: usize) -> u64 {
    if w == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * w)) - 1
    }
}

fn sign_extend(v: u64, w: usize) -> i64 {
    let shift = 64 - 8 * w as u32;
    ((v << shift) as i64) >> shift
}

/// Encodes rows `[from, to)` of `data` (a column of type `t`) into `out`
/// (cleared first). `keys` are the dictionary keys of a LowCardinality
/// column, already mapped by the writer. `raw` is scratch space.
pub fn encode(
    t: ColumnType,
    codec: Codec,
    data: &ColumnData,
    keys: Option<&[u32]>,
    raw: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    raw.clear();
    let mut width = t.width().unwrap_or(0);
    let rows;
    if let Some(keys) = keys {
        let max = keys.iter().copied().max().unwrap_or(0);
        width = if max <= u8::MAX as u32 {
            1
        } else if max <= u16::MAX as u32 {
            2
        } else {
            4
        };
        rows = keys.len();
        for &k in keys {
            put(raw, k as u64, width);
        }
    } else {
        rows = data.len();
        match data {
            ColumnData::U64(v) => encode_ints(v.iter().copied(), codec, width, raw),
            ColumnData::I64(v) => encode_ints(v.iter().map(|x| *x as u64), codec, width, raw),
            ColumnData::F64(v) => v.iter().for_each(|x| raw.extend_from_slice(&x.to_bits().to_le_bytes())),
            ColumnData::Str(v) => {
                for s in v {
                    raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    raw.extend_from_slice(s.as_bytes());
                }
            }
            ColumnData::Dict { .. } => unreachable!("the writer maps LowCardinality values to keys"),
        }
    }
    out.clear();
    out.push(codec.tag());
    out.push(width as u8);
    out.extend_from_slice(&(rows as u32).to_le_bytes());
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    if width > 0 && rows > 1 && raw.len() == rows * width && raw.chunks_exact(width).all(|c| c == &raw[..width]) {
        out[0] |= CONST;
        out.extend_from_slice(&raw[..width]);
        out[10..14].copy_from_slice(&(width as u32).to_le_bytes());
        return;
    }
    let bound = lz4_flex::block::get_maximum_output_size(raw.len());
    out.resize(HEADER + bound, 0);
    // The bound is LZ4's own worst case, so this cannot fail.
    let n = lz4_flex::block::compress_into(raw, &mut out[HEADER..]).expect("LZ4 bound");
    let n = if n * 100 > raw.len() * (100 - MIN_GAIN_PCT) {
        out[0] |= STORED;
        out.truncate(HEADER);
        out.extend_from_slice(raw);
        raw.len()
    } else {
        out.truncate(HEADER + n);
        n
    };
    out[10..14].copy_from_slice(&(n as u32).to_le_bytes());
}

fn encode_ints(vals: impl Iterator<Item = u64>, codec: Codec, w: usize, raw: &mut Vec<u8>) {
    let m = mask(w);
    let mut prev = 0u64;
    for v in vals {
        let v = v & m;
        match codec {
            Codec::Lz4 => put(raw, v, w),
            Codec::DeltaLz4 => {
                put(raw, v.wrapping_sub(prev) & m, w);
                prev = v;
            }
        }
    }
}

/// The compressed length announced by a block header (to read the rest).
pub fn compressed_len(header: &[u8]) -> usize {
    u32::from_le_bytes(header[10..14].try_into().expect("4 bytes")) as usize
}

/// Decodes one block into `out` (replacing its contents).
pub fn decode(
    t: ColumnType,
    block: &[u8],
    dict: Option<&Arc<Vec<String>>>,
    raw: &mut Vec<u8>,
    out: &mut ColumnData,
) -> Result<(), BlockError> {
    let err = |s: &str| BlockError(s.to_string());
    if block.len() < HEADER {
        return Err(err("block shorter than its header"));
    }
    let codec = match block[0] & !(STORED | CONST) {
        1 => Codec::Lz4,
        2 => Codec::DeltaLz4,
        other => return Err(BlockError(format!("unknown codec tag {other}"))),
    };
    let width = block[1] as usize;
    let rows = u32::from_le_bytes(block[2..6].try_into().expect("4")) as usize;
    let raw_len = u32::from_le_bytes(block[6..10].try_into().expect("4")) as usize;
    let comp_len = compressed_len(block);
    if block.len() != HEADER + comp_len {
        return Err(err("compressed length does not match the block"));
    }
    let raw: &[u8] = if block[0] & CONST != 0 {
        if width == 0 || comp_len != width || raw_len != rows * width {
            return Err(err("constant block's value does not match its width and rows"));
        }
        let one = &block[HEADER..];
        raw.clear();
        if width == 1 {
            raw.resize(raw_len, one[0]);
        } else {
            raw.reserve(raw_len);
            (0..rows).for_each(|_| raw.extend_from_slice(one));
        }
        raw
    } else if block[0] & STORED != 0 {
        if comp_len != raw_len {
            return Err(err("stored block's length differs from the header"));
        }
        &block[HEADER..]
    } else {
        raw.clear();
        raw.resize(raw_len, 0);
        let n = lz4_flex::block::decompress_into(&block[HEADER..], raw).map_err(|e| BlockError(format!("LZ4: {e}")))?;
        if n != raw_len {
            return Err(err("decompressed length differs from the header"));
        }
        raw
    };
    let fixed = |w: usize| -> Result<(), BlockError> {
        if !matches!(w, 1 | 2 | 4 | 8) || rows * w != raw_len {
            return Err(BlockError(format!("{rows} rows of width {w} do not fill {raw_len} bytes")));
        }
        Ok(())
    };
    match t {
        ColumnType::LowCardinalityString => {
            fixed(width)?;
            let dict = dict.ok_or_else(|| err("LowCardinality block without a dictionary"))?;
            let mut keys = match std::mem::replace(out, ColumnData::U64(Vec::new())) {
                ColumnData::Dict { mut keys, .. } => {
                    keys.clear();
                    keys
                }
                _ => Vec::with_capacity(rows),
            };
            widen_into(raw, width, &mut keys, |k| k as u32);
            if let Some(&k) = keys.iter().max().filter(|&&k| k as usize >= dict.len()) {
                return Err(BlockError(format!("key {k} outside a dictionary of {}", dict.len())));
            }
            *out = ColumnData::Dict { keys, dict: dict.clone() };
        }
        ColumnType::String => {
            let mut v = match std::mem::replace(out, ColumnData::U64(Vec::new())) {
                ColumnData::Str(mut v) => {
                    v.clear();
                    v
                }
                _ => Vec::with_capacity(rows),
            };
            let mut at = 0;
            for _ in 0..rows {
                let len = raw.get(at..at + 4).ok_or_else(|| err("string length past the end"))?;
                let len = u32::from_le_bytes(len.try_into().expect("4")) as usize;
                let s = raw.get(at + 4..at + 4 + len).ok_or_else(|| err("string past the end"))?;
                v.push(String::from_utf8(s.to_vec()).map_err(|_| err("string is not UTF-8"))?);
                at += 4 + len;
            }
            *out = ColumnData::Str(v);
        }
        ColumnType::Float64 => {
            fixed(8)?;
            let mut v = take_f64(out);
            v.reserve(rows);
            v.extend(raw.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8"))));
            *out = ColumnData::F64(v);
        }
        t => {
            let w = t.width().expect("integer");
            if width != w {
                return Err(BlockError(format!("width {width} for a {} column", t.name())));
            }
            fixed(w)?;
            let m = mask(w);
            if t.is_signed() {
                let mut v = take_i64(out);
                let from = v.len();
                widen_into(raw, w, &mut v, |x| x as i64);
                let mut prev = 0u64;
                for x in &mut v[from..] {
                    let u = match codec {
                        Codec::Lz4 => *x as u64,
                        Codec::DeltaLz4 => {
                            prev = prev.wrapping_add(*x as u64) & m;
                            prev
                        }
                    };
                    *x = sign_extend(u, w);
                }
                *out = ColumnData::I64(v);
            } else {
                let mut v = take_u64(out);
                let from = v.len();
                widen_into(raw, w, &mut v, |x| x);
                if codec == Codec::DeltaLz4 {
                    let mut prev = 0u64;
                    for x in &mut v[from..] {
                        prev = prev.wrapping_add(*x) & m;
                        *x = prev;
                    }
                }
                *out = ColumnData::U64(v);
            }
        }
    }
    Ok(())
}

/// Appends each little-endian value of width `w` (1, 2, 4 or 8, checked
/// by the caller) in `raw` to `out`, through `f`.
// PERF: one loop per width over fixed-size chunks into an exact-size
// extend: no per-value width arithmetic, and the widening vectorises.
#[inline(always)]
fn widen_into<T>(raw: &[u8], w: usize, out: &mut Vec<T>, f: impl Fn(u64) -> T) {
    match w {
        1 => out.extend(raw.iter().map(|&b| f(b as u64))),
        2 => out.extend(raw.chunks_exact(2).map(|c| f(u16::from_le_bytes([c[0], c[1]]) as u64))),
        4 => out.extend(raw.chunks_exact(4).map(|c| f(u32::from_le_bytes(c.try_into().expect("4")) as u64))),
        _ => out.extend(raw.chunks_exact(8).map(|c| f(u64::from_le_bytes(c.try_into().expect("8"))))),
    }
}

// Reuse the caller's vectors: a query decodes thousands of granules into
// the same few buffers.
fn take_u64(out: &mut ColumnData) -> Vec<u64> {
    match std::mem::replace(out, ColumnData::U64(Vec::new())) {
        ColumnData::U64(mut v) => {
            v.clear();
            v
        }
        _ => Vec::new(),
    }
}
fn take_i64(out: &mut ColumnData) -> Vec<i64> {
    match std::mem::replace(out, ColumnData::U64(Vec::new())) {
        ColumnData::I64(mut v) => {
            v.clear();
            v
        }
        _ => Vec::new(),
    }
}
fn take_f64(out: &mut ColumnData) -> Vec<f64> {
    match std::mem::replace(out, ColumnData::U64(Vec::new())) {
        ColumnData::F64(mut v) => {
            v.clear();
            v
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: ColumnType, codec: Codec, data: ColumnData) {
        let (mut raw, mut out) = (Vec::new(), Vec::new());
        encode(t, codec, &data, None, &mut raw, &mut out);
        let mut back = ColumnData::U64(Vec::new());
        decode(t, &out, None, &mut raw, &mut back).unwrap();
        assert_eq!(format!("{data:?}"), format!("{back:?}"));
    }

    #[test]
    fn every_width_and_codec_round_trips() {
        for codec in [Codec::Lz4, Codec::DeltaLz4] {
            round_trip(ColumnType::UInt8, codec, ColumnData::U64(vec![0, 255, 3, 3, 1]));
            round_trip(ColumnType::Int16, codec, ColumnData::I64(vec![-32768, 32767, 0, -1, 5]));
            round_trip(ColumnType::DateTime, codec, ColumnData::U64(vec![1_700_000_000, 1_700_000_005, 4_000_000_000]));
            round_trip(ColumnType::Int64, codec, ColumnData::I64(vec![i64::MIN, i64::MAX, 0, -7]));
            round_trip(ColumnType::UInt64, codec, ColumnData::U64(vec![u64::MAX, 0, 1 << 40]));
        }
        round_trip(ColumnType::Float64, Codec::Lz4, ColumnData::F64(vec![0.5, -0.0, f64::MAX, 1e-300]));
        round_trip(ColumnType::String, Codec::Lz4, ColumnData::Str(vec!["".into(), "héllo".into(), "x".repeat(300)]));
    }

    #[test]
    fn delta_shrinks_sorted_timestamps() {
        let ts: Vec<u64> = (0..8192).map(|i| 1_700_000_000 + i * 3).collect();
        let (mut raw, mut plain, mut delta) = (Vec::new(), Vec::new(), Vec::new());
        encode(ColumnType::DateTime, Codec::Lz4, &ColumnData::U64(ts.clone()), None, &mut raw, &mut plain);
        encode(ColumnType::DateTime, Codec::DeltaLz4, &ColumnData::U64(ts), None, &mut raw, &mut delta);
        assert!(delta.len() * 4 < plain.len(), "delta {} vs plain {}", delta.len(), plain.len());
    }

    #[test]
    fn incompressible_blocks_are_stored_and_read_back() {
        let mut x = 1u64;
        let noise: Vec<f64> = (0..8192)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 11) as f64
            })
            .collect();
        let (mut raw, mut out) = (Vec::new(), Vec::new());
        encode(ColumnType::Float64, Codec::Lz4, &ColumnData::F64(noise.clone()), None, &mut raw, &mut out);
        assert_eq!(out[0], Codec::Lz4.tag() | STORED, "random floats are stored");
        assert_eq!(out.len(), HEADER + 8 * 8192);
        let mut back = ColumnData::U64(Vec::new());
        decode(ColumnType::Float64, &out, None, &mut raw, &mut back).unwrap();
        assert!(matches!(&back, ColumnData::F64(v) if v == &noise));
        // Compressible data stays LZ4; a truncated stored block is an error.
        let zeros = ColumnData::F64((0..8192).map(|i| (i % 2) as f64).collect());
        let mut z = Vec::new();
        encode(ColumnType::Float64, Codec::Lz4, &zeros, None, &mut raw, &mut z);
        assert_eq!(z[0], Codec::Lz4.tag());
        assert!(decode(ColumnType::Float64, &out[..out.len() - 8], None, &mut raw, &mut back).is_err());
    }

    #[test]
    fn a_block_of_one_value_is_stored_once_and_filled_back() {
        let (mut raw, mut out) = (Vec::new(), Vec::new());
        for (t, data) in [
            (ColumnType::UInt8, ColumnData::U64(vec![7; 8192])),
            (ColumnType::Int32, ColumnData::I64(vec![-5; 100])),
            (ColumnType::Float64, ColumnData::F64(vec![2.5; 300])),
        ] {
            encode(t, Codec::Lz4, &data, None, &mut raw, &mut out);
            assert_eq!(out[0], Codec::Lz4.tag() | CONST, "{t:?}");
            assert_eq!(out.len(), HEADER + t.width().unwrap_or(8));
            let mut back = ColumnData::U64(Vec::new());
            decode(t, &out, None, &mut raw, &mut back).unwrap();
            assert_eq!(format!("{data:?}"), format!("{back:?}"));
        }
        // Dictionary keys: one key a granule.
        let dict = Arc::new(vec!["api".to_string(), "web".to_string()]);
        encode(
            ColumnType::LowCardinalityString,
            Codec::Lz4,
            &ColumnData::U64(vec![]),
            Some(&[1; 8192]),
            &mut raw,
            &mut out,
        );
        assert_eq!(out.len(), HEADER + 1);
        let mut back = ColumnData::U64(Vec::new());
        decode(ColumnType::LowCardinalityString, &out, Some(&dict), &mut raw, &mut back).unwrap();
        assert!(matches!(&back, ColumnData::Dict { keys, .. } if keys.len() == 8192 && keys.iter().all(|&k| k == 1)));
        // Two values are not one; a constant block whose rows lie is an error.
        encode(ColumnType::UInt8, Codec::Lz4, &ColumnData::U64(vec![7, 7, 8]), None, &mut raw, &mut out);
        assert_eq!(out[0] & CONST, 0);
        encode(ColumnType::UInt8, Codec::Lz4, &ColumnData::U64(vec![7; 4]), None, &mut raw, &mut out);
        out[2] = 5;
        assert!(decode(ColumnType::UInt8, &out, None, &mut raw, &mut back).is_err());
    }

    #[test]
    fn corrupt_blocks_are_errors() {
        let (mut raw, mut out) = (Vec::new(), Vec::new());
        encode(ColumnType::UInt32, Codec::Lz4, &ColumnData::U64(vec![1, 2, 3]), None, &mut raw, &mut out);
        let mut back = ColumnData::U64(Vec::new());
        assert!(decode(ColumnType::UInt32, &out[..out.len() - 1], None, &mut raw, &mut back).is_err());
        let mut bad = out.clone();
        bad[0] = 9;
        assert!(decode(ColumnType::UInt32, &bad, None, &mut raw, &mut back).is_err());
        assert!(decode(ColumnType::UInt64, &out, None, &mut raw, &mut back).is_err());
    }
}
