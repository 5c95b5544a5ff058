//! The scan of one granule ([`Reader`]): the filter's columns read and
//! evaluated into a selection, then the other columns read only when some
//! row passes; and the projection of a plain SELECT's rows.

use super::filter::{eval, key_span, MaskPool};
use super::group::Rows;
use super::query::{Item, Select};
use super::{Plan, Stats};
use crate::error::Result;
use crate::storage::part::{Part, Scratch};
use crate::types::{ColumnData, ColumnType, Value};
use std::sync::Arc;

/// INLINE_COLS = 8: the chain table has 1 column, the paper's hits table more
/// (its scans are long enough not to notice one allocation).
const INLINE_COLS: usize = 8;

/// An empty column of type `t`, shared until written.
pub(super) fn empty(t: ColumnType) -> Arc<ColumnData> {
    static EMPTY: std::sync::OnceLock<[Arc<ColumnData>; 4]> = std::sync::OnceLock::new();
    let e = EMPTY.get_or_init(|| {
        [ColumnType::UInt64, ColumnType::Int64, ColumnType::Float64, ColumnType::String]
            .map(|t| Arc::new(ColumnData::empty_for(t)))
    });
    let i = match ColumnData::empty_for(t) {
        ColumnData::U64(_) => 0,
        ColumnData::I64(_) => 1,
        ColumnData::F64(_) => 2,
        _ => 3,
    };
    e[i].clone()
}

/// One output row of a plain (non-aggregate) SELECT.
pub(super) fn project(q: &Select, cols: &[Arc<ColumnData>], i: usize) -> Vec<Value> {
    q.items
        .iter()
        .map(|it| match it {
            Item::Column(c) => cols[*c].value(i),
            Item::Agg(_) => unreachable!("plain select"),
        })
        .collect()
}

/// The scan of one granule: reads the filter columns, evaluates the filter
/// into a selection of rows, and reads the other columns only when some
/// row passes.
pub(super) struct Reader<'p> {
    plan: &'p Plan<'p>,
    other: &'p [usize],
    scratch: Scratch,
    /// Every column of the table, by index; those read hold this granule.
    /// Shared with the cache in a small scan, owned (decoded into) otherwise.
    /// PERF: inline up to [`INLINE_COLS`] columns, so a short query on a
    /// narrow table allocates no vector for them.
    pub(super) cols: smallvec::SmallVec<[Arc<ColumnData>; INLINE_COLS]>,
    cached: bool,
    /// Heap bytes this scan's reads put into the granule cache: allocated
    /// while the query runs, so charged to it (the cache keeps them after).
    filled: usize,
    mask: Vec<bool>,
    pool: MaskPool,
    sel: Vec<u32>,
    n: usize,
    /// The passing rows when they are one run `a..b`; else those in `sel`.
    span: Option<(usize, usize)>,
    /// A column known non-decreasing over `span` (the first sort key, when
    /// the run came from [`key_span`]), whose min and max are its ends.
    pub(super) sorted: Option<usize>,
    pub(super) stats: Stats,
}

impl<'p> Reader<'p> {
    #[inline]
    pub(super) fn new(plan: &'p Plan<'p>, other: &'p [usize], cached: bool) -> Self {
        let cols = plan.schema.columns.iter().map(|c| empty(c.ty)).collect();
        Reader {
            plan,
            other,
            scratch: Scratch::default(),
            cols,
            cached,
            filled: 0,
            mask: Vec::new(),
            pool: MaskPool::default(),
            sel: Vec::new(),
            n: 0,
            span: None,
            sorted: None,
            stats: Stats::default(),
        }
    }

    /// Reads granule `g` of `part`; `false` when no row passes the filter.
    pub(super) fn read(&mut self, part: &Part, g: usize) -> Result<bool> {
        self.stats.granules_read += 1;
        for &c in &self.plan.shape.filter_cols {
            self.load(part, c, g)?;
        }
        let n = part.granule_rows(g);
        self.n = n;
        self.stats.rows_scanned += n as u64;
        self.span = Some((0, n));
        self.sorted = None;
        if let Some(p) = self.plan.filter {
            let key0 = self.plan.schema.order_by.first().copied();
            if let Some((a, b)) = key0.and_then(|k| key_span(p, k, &self.cols[k], n)) {
                if a == b {
                    return Ok(false);
                }
                self.span = Some((a, b));
                self.sorted = key0;
                return self.load_others(part, g);
            }
            eval(p, &self.cols, n, &mut self.mask, &mut self.pool);
            // PERF: a range predicate passes one contiguous run, which the
            // operators take as a slice, with no index list to build or
            // gather through; a scattered mask fails the test within a few
            // rows of its first passing one.
            let Some(first) = self.mask.iter().position(|&m| m) else { return Ok(false) };
            let last = self.mask.iter().rposition(|&m| m).expect("one row passes");
            if self.mask[first..=last].iter().all(|&m| m) {
                self.span = Some((first, last + 1));
            } else {
                self.span = None;
                // PERF: branch-free: every index is written, the count
                // advances only for passing rows.
                self.sel.resize(n, 0);
                let mut j = 0;
                for (i, &m) in self.mask.iter().enumerate() {
                    self.sel[j] = i as u32;
                    j += m as usize;
                }
                self.sel.truncate(j);
            }
        }
        self.load_others(part, g)
    }

    /// Reads the columns the filter did not need; `Ok(true)`.
    fn load_others(&mut self, part: &Part, g: usize) -> Result<bool> {
        for i in 0..self.other.len() {
            self.load(part, self.other[i], g)?;
        }
        Ok(true)
    }

    fn load(&mut self, part: &Part, c: usize, g: usize) -> Result<()> {
        if self.cached {
            let (col, filled) = part.read_cached_filling(c, g, &mut self.scratch)?;
            self.cols[c] = col;
            self.filled += filled;
            Ok(())
        } else {
            // Unique after the first granule, so decoding reuses the buffer.
            part.read(c, g, &mut self.scratch, Arc::make_mut(&mut self.cols[c]))
        }
    }

    /// Heap bytes of the granule held: its decoded columns (a small
    /// scan's belong to the granule cache, and count as far as this scan
    /// filled it), the read buffers and the filter's masks.
    pub(super) fn heap_bytes(&self) -> usize {
        let cols = if self.cached { self.filled } else { self.cols.iter().map(|c| c.heap_bytes()).sum::<usize>() };
        cols + self.scratch.heap_bytes() + self.mask.capacity() + self.pool.heap_bytes() + self.sel.capacity() * 4
    }

    pub(super) fn rows(&self) -> Rows<'_> {
        match self.span {
            Some((a, b)) => Rows::Span(a, b),
            None => Rows::Sel(&self.sel),
        }
    }
}
