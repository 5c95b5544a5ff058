//! The floor under a workload query: how long this machine takes to read
//! the bytes the query must touch at all, measured in the same run as the
//! query, so that a query's time can be told as a multiple of what the
//! machine could do.
//!
//! - [`touched`]: the bytes a query must read: per row, the declared width
//!   of each column it reads (a LowCardinality key of four values is one
//!   byte, as ClickHouse stores it; a UInt32 four; a Float64 eight), times
//!   the rows it must read (filtered-count needs only its category's rows:
//!   the table is sorted by category, and either engine's primary index
//!   finds them).
//! - [`read_ms`]: a streaming read (a sum of 64-bit words) of a buffer of
//!   that size, on one thread or on every core, each thread its slice: the
//!   memory bandwidth a scan of that many bytes gets here.
//!
//! Decoding, hashing and the answer are above the floor; a query that runs
//! at 3× its floor spends two thirds of its time on them.

use crate::workload::{CATEGORIES, QUERIES};
use std::time::Instant;

/// The columns a query reads, each with its declared width in bytes, and
/// the share of the table's rows it must read (numerator, denominator).
pub struct Touch {
    pub columns: &'static [(&'static str, u64)],
    pub share: (u64, u64),
}

/// What each of [`QUERIES`] must read, by name.
pub fn touch(query: &str) -> Option<Touch> {
    match query {
        "group-by-category" => Some(Touch { columns: &[("category", 1), ("value", 8)], share: (1, 1) }),
        "top-20-users" => Some(Touch { columns: &[("user_id", 4), ("value", 8)], share: (1, 1) }),
        // One category of the four, each an equal share of the rows.
        "filtered-count" => {
            Some(Touch { columns: &[("category", 1), ("value", 8)], share: (1, CATEGORIES.len() as u64) })
        }
        _ => None,
    }
}

/// The bytes `query` must read in a table of `rows` rows.
pub fn touched(query: &str, rows: u64) -> Option<u64> {
    let t = touch(query)?;
    let per_row: u64 = t.columns.iter().map(|c| c.1).sum();
    Some(per_row * rows * t.share.0 / t.share.1)
}

/// A buffer of `bytes` (rounded up to whole words), every page written
/// once so that the reads measure memory, not page faults.
pub fn buffer(bytes: u64) -> Vec<u64> {
    let words = bytes.div_ceil(8) as usize;
    (0..words as u64).collect()
}

/// Milliseconds to read `buf` once, summing its words, on `threads`
/// threads (0: every core), each over its own contiguous slice.
pub fn read_ms(buf: &[u64], threads: usize) -> f64 {
    let n = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let chunk = buf.len().div_ceil(n).max(1);
    let t0 = Instant::now();
    let total: u64 = if n == 1 {
        sum(buf)
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = buf.chunks(chunk).map(|c| s.spawn(move || sum(c))).collect();
            hs.into_iter().map(|h| h.join().expect("a summing thread")).fold(0, u64::wrapping_add)
        })
    };
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box(total);
    ms
}

/// Eight independent lanes, so that the sum is bound by the loads.
fn sum(v: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder().iter().fold(0u64, |a, &x| a.wrapping_add(x));
    for c in chunks {
        for k in 0..8 {
            acc[k] = acc[k].wrapping_add(c[k]);
        }
    }
    acc.iter().fold(rest, |a, &x| a.wrapping_add(x))
}

/// Every workload query has a [`Touch`].
pub fn covers_every_query() -> bool {
    QUERIES.iter().all(|(name, _)| touch(name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_has_a_floor_and_the_read_sums_every_word() {
        assert!(covers_every_query());
        assert_eq!(touched("group-by-category", 1000), Some(9000));
        assert_eq!(touched("filtered-count", 1000), Some(9000 / 4));
        assert_eq!(touched("nope", 1000), None);
        let b = buffer(8 * 1001);
        assert_eq!(b.len(), 1001);
        assert_eq!(sum(&b), 1000 * 1001 / 2);
        assert!(read_ms(&b, 0) >= 0.0 && read_ms(&b, 1) >= 0.0);
    }
}
