//! Aggregates, column at a time: each aggregate runs one typed loop over
//! (group id, value) — no `Value` and no per-row dispatch on the
//! aggregate's kind — into columnar states ([`Partial`]). Each partition
//! of a parallel scan has its own partial; partials merge in partition
//! order, so the first-seen order of groups ([`super::group`]) — and every
//! float sum — is the same whatever the number of threads.

use super::group::{
    column_keys, constant_key, each, each_f64, is_string, key_value, uniform, Batch, FastSet, Group, Groups, Interner,
    Rows, ABSENT,
};
use super::memory::{map_bytes, map_growth, vec_bytes, vec_growth};
use super::quantile::{Quant, Refine, Resolved};
use super::query::{Agg, Item, Select};
use crate::storage::part::Schema;
use crate::types::{ColumnData, ColumnType, Value};
use std::cmp::Ordering;
use std::sync::Arc;

/// The rows' sum, in a fixed order of eight interleaved partial sums.
// PERF: one accumulator is a chain of dependent adds (4 cycles each); eight
// independent ones vectorise. The order is fixed, so the sum is repeatable.
fn sum_f64(col: &ColumnData, rows: Rows) -> f64 {
    fn lanes(it: impl Iterator<Item = f64>) -> f64 {
        let mut acc = [0.0f64; 8];
        for (k, x) in it.enumerate() {
            acc[k & 7] += x;
        }
        ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    }
    match (col, rows) {
        (ColumnData::F64(v), Rows::Span(a, b)) => {
            let mut acc = [0.0f64; 8];
            let chunks = v[a..b].chunks_exact(8);
            let rest = lanes(chunks.remainder().iter().copied());
            for c in chunks {
                for k in 0..8 {
                    acc[k] += c[k];
                }
            }
            ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + rest
        }
        (ColumnData::F64(v), Rows::Sel(s)) => lanes(s.iter().map(|&i| v[i as usize])),
        _ => {
            let mut t = 0.0;
            each_f64(col, rows, Group::One(0), |_, x| t += x);
            t
        }
    }
}

/// The rows' least or greatest value in `total_cmp` order, if any.
fn ext_f64(v: &[f64], rows: Rows, max: bool) -> Option<f64> {
    // Integers ordered as total_cmp orders floats; the map is its own inverse.
    let key = |f: &f64| {
        let b = f.to_bits() as i64;
        b ^ ((((b >> 63) as u64) >> 1) as i64)
    };
    // PERF: eight independent lanes, as sum_f64 keeps: `Iterator::max` is
    // one chain of compares (8 % of the group-by query's CPU, perf, 10M rows).
    let lanes = |xs: &[f64], max: bool| -> Option<i64> {
        let pick = |a: i64, b: i64| if max { a.max(b) } else { a.min(b) };
        let first = key(xs.first()?);
        let mut acc = [first; 8];
        let chunks = xs.chunks_exact(8);
        let rest = chunks.remainder().iter().map(key).fold(first, pick);
        for c in chunks {
            for k in 0..8 {
                acc[k] = pick(acc[k], key(&c[k]));
            }
        }
        Some(acc.into_iter().fold(rest, pick))
    };
    let best = match (rows, max) {
        (Rows::Span(a, b), _) => lanes(&v[a..b], max),
        (Rows::Sel(s), true) => s.iter().map(|&i| key(&v[i as usize])).max(),
        (Rows::Sel(s), false) => s.iter().map(|&i| key(&v[i as usize])).min(),
    };
    best.map(|k| f64::from_bits(key(&f64::from_bits(k as u64)) as u64))
}

/// The rows' least (or, `max`, greatest) value of an integer column; the
/// run's first (last) value when the column is `sorted` over it.
fn ext_ord<T: Ord + Copy>(v: &[T], rows: Rows, max: bool, sorted: bool) -> Option<T> {
    match (rows, max) {
        (Rows::Span(a, b), _) if sorted && a < b => Some(if max { v[b - 1] } else { v[a] }),
        (Rows::Span(a, b), true) => v[a..b].iter().copied().max(),
        (Rows::Span(a, b), false) => v[a..b].iter().copied().min(),
        (Rows::Sel(s), true) => s.iter().map(|&i| v[i as usize]).max(),
        (Rows::Sel(s), false) => s.iter().map(|&i| v[i as usize]).min(),
    }
}

/// One aggregate's state for every group, as columns.
enum Acc {
    Count(Vec<u64>),
    SumU(Vec<u128>),
    SumI(Vec<i128>),
    SumF(Vec<f64>),
    Avg(Vec<f64>, Vec<u64>),
    /// min (false) or max (true), typed.
    ExtU(Vec<Option<u64>>, bool),
    ExtI(Vec<Option<i64>>, bool),
    ExtF(Vec<Option<f64>>, bool),
    ExtS(Vec<Option<String>>, bool),
    Quantile(Vec<Quant>),
    Uniq(Vec<FastSet<u64>>),
    /// Quantiles once resolved.
    Done(Vec<Value>),
}

impl Acc {
    fn new(a: &Agg, schema: &Schema) -> Acc {
        let ty = |c: usize| schema.columns[c].ty;
        let ext = |c: usize, max: bool| match ty(c) {
            ColumnType::Float64 => Acc::ExtF(Vec::new(), max),
            t if is_string(t) => Acc::ExtS(Vec::new(), max),
            t if t.is_signed() => Acc::ExtI(Vec::new(), max),
            _ => Acc::ExtU(Vec::new(), max),
        };
        match *a {
            Agg::Count => Acc::Count(Vec::new()),
            Agg::Sum(c) => match ty(c) {
                ColumnType::Float64 => Acc::SumF(Vec::new()),
                t if t.is_signed() => Acc::SumI(Vec::new()),
                _ => Acc::SumU(Vec::new()),
            },
            Agg::Avg(_) => Acc::Avg(Vec::new(), Vec::new()),
            Agg::Min(c) => ext(c, false),
            Agg::Max(c) => ext(c, true),
            Agg::Quantile(..) => Acc::Quantile(Vec::new()),
            Agg::UniqExact(_) => Acc::Uniq(Vec::new()),
        }
    }

    /// Heap bytes of the per-group columns (a set's or a buffer's own
    /// contents are counted as they change: [`Partial::state`]).
    fn fixed_bytes(&self) -> usize {
        self.vecs(&|b, _| b, 0)
    }

    /// What the per-group columns allocate when `more` groups are added.
    fn growth(&self, more: usize) -> usize {
        self.vecs(&|_, g| g, more)
    }

    /// `f(bytes, growth by more)` summed over the state's vectors.
    fn vecs(&self, f: &dyn Fn(usize, usize) -> usize, more: usize) -> usize {
        fn one<T>(v: &Vec<T>, f: &dyn Fn(usize, usize) -> usize, more: usize) -> usize {
            f(vec_bytes(v), vec_growth(v, more))
        }
        match self {
            Acc::Count(v) => one(v, f, more),
            Acc::SumU(v) => one(v, f, more),
            Acc::SumI(v) => one(v, f, more),
            Acc::SumF(v) => one(v, f, more),
            Acc::Avg(s, c) => one(s, f, more) + one(c, f, more),
            Acc::ExtU(v, _) => one(v, f, more),
            Acc::ExtI(v, _) => one(v, f, more),
            Acc::ExtF(v, _) => one(v, f, more),
            Acc::ExtS(v, _) => one(v, f, more),
            Acc::Quantile(v) => one(v, f, more),
            Acc::Uniq(v) => one(v, f, more),
            Acc::Done(v) => one(v, f, more),
        }
    }

    /// A state that never outgrows one value a group (no set, no buffer of
    /// values), so a kept one costs a few bytes: see [`Spare`].
    fn fixed(&self) -> bool {
        !matches!(self, Acc::Quantile(_) | Acc::Uniq(_) | Acc::Done(_))
    }

    /// No groups; the variant and capacity stay.
    fn clear(&mut self) {
        match self {
            Acc::Count(v) => v.clear(),
            Acc::SumU(v) => v.clear(),
            Acc::SumI(v) => v.clear(),
            Acc::SumF(v) => v.clear(),
            Acc::Avg(s, c) => {
                s.clear();
                c.clear()
            }
            Acc::ExtU(v, _) => v.clear(),
            Acc::ExtI(v, _) => v.clear(),
            Acc::ExtF(v, _) => v.clear(),
            Acc::ExtS(v, _) => v.clear(),
            Acc::Quantile(v) => v.clear(),
            Acc::Uniq(v) => v.clear(),
            Acc::Done(v) => v.clear(),
        }
    }

    fn grow(&mut self, n: usize) {
        match self {
            Acc::Count(v) => v.resize(n, 0),
            Acc::SumU(v) => v.resize(n, 0),
            Acc::SumI(v) => v.resize(n, 0),
            Acc::SumF(v) => v.resize(n, 0.0),
            Acc::Avg(s, c) => {
                s.resize(n, 0.0);
                c.resize(n, 0)
            }
            Acc::ExtU(v, _) => v.resize(n, None),
            Acc::ExtI(v, _) => v.resize(n, None),
            Acc::ExtF(v, _) => v.resize(n, None),
            Acc::ExtS(v, _) => v.resize(n, None),
            Acc::Quantile(v) => v.resize_with(n, Quant::default),
            Acc::Uniq(v) => v.resize_with(n, FastSet::default),
            Acc::Done(v) => v.resize(n, Value::Null),
        }
    }

    /// Folds the rows in; returns the change in bytes of the per-group
    /// states' own contents (sets, value buffers, strings).
    fn update(&mut self, col: Option<&ColumnData>, rows: Rows, group: Group, uniq_keys: &[u64], sorted: bool) -> isize {
        let col = || col.expect("the aggregate's column");
        fn ext<T: Copy>(slot: &mut Option<T>, x: T, max: bool, cmp: impl Fn(&T, &T) -> Ordering) {
            let want = if max { Ordering::Greater } else { Ordering::Less };
            if slot.as_ref().is_none_or(|c| cmp(&x, c) == want) {
                *slot = Some(x)
            }
        }
        // PERF: one group for the whole batch: reductions over the column
        // instead of a read-modify-write of the group's slot per row.
        if let Group::One(g) = group {
            match self {
                Acc::Count(c) => {
                    c[g] += rows.len() as u64;
                    return 0;
                }
                Acc::SumF(s) => {
                    s[g] += sum_f64(col(), rows);
                    return 0;
                }
                Acc::Avg(s, n) => {
                    s[g] += sum_f64(col(), rows);
                    n[g] += rows.len() as u64;
                    return 0;
                }
                Acc::ExtF(e, max) => {
                    if let ColumnData::F64(v) = col() {
                        if let Some(x) = ext_f64(v, rows, *max) {
                            ext(&mut e[g], x, *max, f64::total_cmp)
                        }
                    }
                    return 0;
                }
                Acc::ExtU(e, max) => {
                    if let ColumnData::U64(v) = col() {
                        if let Some(x) = ext_ord(v, rows, *max, sorted) {
                            ext(&mut e[g], x, *max, u64::cmp)
                        }
                    }
                    return 0;
                }
                Acc::ExtI(e, max) => {
                    if let ColumnData::I64(v) = col() {
                        if let Some(x) = ext_ord(v, rows, *max, sorted) {
                            ext(&mut e[g], x, *max, i64::cmp)
                        }
                    }
                    return 0;
                }
                Acc::Quantile(q) => {
                    let q = &mut q[g];
                    let before = q.heap_bytes();
                    match (col(), rows) {
                        (ColumnData::F64(v), Rows::Span(a, b)) => q.push_slice(&v[a..b]),
                        (c, _) => each_f64(c, rows, Group::One(0), |_, x| q.push(x)),
                    }
                    return q.heap_bytes() as isize - before as isize;
                }
                _ => {}
            }
        }
        match self {
            Acc::Count(c) => each(rows, group, |g, _| c[g] += 1),
            Acc::SumU(s) => {
                if let ColumnData::U64(v) = col() {
                    each(rows, group, |g, i| s[g] += v[i] as u128)
                }
            }
            Acc::SumI(s) => {
                if let ColumnData::I64(v) = col() {
                    each(rows, group, |g, i| s[g] += v[i] as i128)
                }
            }
            Acc::SumF(s) => each_f64(col(), rows, group, |g, x| s[g] += x),
            Acc::Avg(s, n) => each_f64(col(), rows, group, |g, x| {
                s[g] += x;
                n[g] += 1
            }),
            Acc::ExtU(e, max) => {
                if let ColumnData::U64(v) = col() {
                    each(rows, group, |g, i| ext(&mut e[g], v[i], *max, u64::cmp))
                }
            }
            Acc::ExtI(e, max) => {
                if let ColumnData::I64(v) = col() {
                    each(rows, group, |g, i| ext(&mut e[g], v[i], *max, i64::cmp))
                }
            }
            Acc::ExtF(e, max) => {
                if let ColumnData::F64(v) = col() {
                    each(rows, group, |g, i| ext(&mut e[g], v[i], *max, f64::total_cmp))
                }
            }
            Acc::ExtS(e, max) => {
                let c = col();
                let want = if *max { Ordering::Greater } else { Ordering::Less };
                let mut delta = 0isize;
                each(rows, group, |g, i| {
                    let s = c.str_at(i).expect("a string column");
                    if e[g].as_deref().is_none_or(|cur| s.cmp(cur) == want) {
                        let old = e[g].as_ref().map_or(0, String::capacity);
                        delta += s.len() as isize - old as isize;
                        e[g] = Some(s.to_string())
                    }
                });
                return delta;
            }
            Acc::Quantile(q) => {
                let mut delta = 0isize;
                each_f64(col(), rows, group, |g, x| {
                    let q = &mut q[g];
                    let (cap, spilled) = (q.values.capacity(), q.hist.is_some());
                    q.push(x);
                    if q.values.capacity() != cap || q.hist.is_some() != spilled {
                        delta += q.heap_bytes() as isize - Quant::bytes_of(cap, spilled) as isize;
                    }
                });
                return delta;
            }
            Acc::Uniq(u) => {
                let (mut j, mut delta) = (0, 0isize);
                each(rows, group, |g, _| {
                    let set = &mut u[g];
                    let cap = set.capacity();
                    set.insert(uniq_keys[j]);
                    j += 1;
                    if set.capacity() != cap {
                        delta += map_bytes(set.capacity(), 8) as isize - map_bytes(cap, 8) as isize;
                    }
                });
                return delta;
            }
            Acc::Done(_) => unreachable!("resolved after the scan"),
        }
        0
    }

    /// Moves `other`'s group `from` into this one's group `to`; `remap`
    /// translates `other`'s interned string ids (for uniqExact on strings).
    /// Returns the change in bytes of this state's own contents.
    fn merge(&mut self, to: usize, other: &mut Acc, from: usize, remap: &mut dyn FnMut(u64) -> u64) -> isize {
        fn ext<T>(a: &mut Option<T>, b: Option<T>, max: bool, cmp: impl Fn(&T, &T) -> Ordering) {
            let want = if max { Ordering::Greater } else { Ordering::Less };
            if let Some(b) = b {
                if a.as_ref().is_none_or(|c| cmp(&b, c) == want) {
                    *a = Some(b)
                }
            }
        }
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => a[to] += b[from],
            (Acc::SumU(a), Acc::SumU(b)) => a[to] += b[from],
            (Acc::SumI(a), Acc::SumI(b)) => a[to] += b[from],
            (Acc::SumF(a), Acc::SumF(b)) => a[to] += b[from],
            (Acc::Avg(a, m), Acc::Avg(b, n)) => {
                a[to] += b[from];
                m[to] += n[from]
            }
            (Acc::ExtU(a, max), Acc::ExtU(b, _)) => ext(&mut a[to], b[from], *max, u64::cmp),
            (Acc::ExtI(a, max), Acc::ExtI(b, _)) => ext(&mut a[to], b[from], *max, i64::cmp),
            (Acc::ExtF(a, max), Acc::ExtF(b, _)) => ext(&mut a[to], b[from], *max, f64::total_cmp),
            (Acc::ExtS(a, max), Acc::ExtS(b, _)) => {
                let before = a[to].as_ref().map_or(0, String::capacity);
                ext(&mut a[to], b[from].take(), *max, String::cmp);
                return a[to].as_ref().map_or(0, String::capacity) as isize - before as isize;
            }
            (Acc::Quantile(a), Acc::Quantile(b)) => {
                let before = a[to].heap_bytes();
                a[to].merge(std::mem::take(&mut b[from]));
                return a[to].heap_bytes() as isize - before as isize;
            }
            (Acc::Uniq(a), Acc::Uniq(b)) => {
                let before = a[to].capacity();
                a[to].extend(std::mem::take(&mut b[from]).into_iter().map(remap));
                return map_bytes(a[to].capacity(), 8) as isize - map_bytes(before, 8) as isize;
            }
            _ => unreachable!("partials of one plan have the same aggregates"),
        }
        0
    }

    fn value(&self, g: usize) -> Value {
        match self {
            Acc::Count(c) => Value::U(c[g]),
            Acc::SumU(s) => u64::try_from(s[g]).map_or(Value::F(s[g] as f64), Value::U),
            Acc::SumI(s) => i64::try_from(s[g]).map_or(Value::F(s[g] as f64), Value::I),
            Acc::SumF(s) => Value::F(s[g]),
            Acc::Avg(_, n) if n[g] == 0 => Value::Null,
            Acc::Avg(s, n) => Value::F(s[g] / n[g] as f64),
            Acc::ExtU(e, _) => e[g].map_or(Value::Null, Value::U),
            Acc::ExtI(e, _) => e[g].map_or(Value::Null, Value::I),
            Acc::ExtF(e, _) => e[g].map_or(Value::Null, Value::F),
            Acc::ExtS(e, _) => e[g].clone().map_or(Value::Null, Value::S),
            Acc::Uniq(u) => Value::U(u[g].len() as u64),
            Acc::Done(v) => v[g].clone(),
            Acc::Quantile(_) => unreachable!("quantiles are resolved before rows are built"),
        }
    }
}

/// What one partition of the scan (or the whole query, once merged) has
/// aggregated.
pub(super) struct Partial {
    groups: Groups,
    accs: Vec<Acc>,
    /// Per aggregate, the bytes its per-group states hold beyond their
    /// slots (sets, value buffers, strings), kept up to date as they change.
    state: Vec<usize>,
    interner: Interner,
    // Per-granule buffers, reused.
    keycols: Vec<Vec<u64>>,
    gids: Vec<u32>,
    uniq: Vec<u64>,
    buf: Vec<u64>,
}

impl Partial {
    #[inline]
    pub fn new(q: &Select, aggs: &[Agg], schema: &Schema) -> Partial {
        let mut p = Partial {
            groups: Groups::new(q.group_by.len()),
            accs: aggs.iter().map(|a| Acc::new(a, schema)).collect(),
            state: vec![0; aggs.len()],
            interner: Interner::default(),
            keycols: vec![Vec::new(); q.group_by.len()],
            gids: Vec::new(),
            uniq: Vec::new(),
            buf: Vec::new(),
        };
        let n = p.groups.len();
        p.accs.iter_mut().for_each(|a| a.grow(n));
        p
    }

    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Heap bytes held: groups, states, interned strings, granule buffers.
    pub fn heap_bytes(&self) -> usize {
        self.groups.heap_bytes()
            + self.interner.heap_bytes()
            + self.accs.iter().map(Acc::fixed_bytes).sum::<usize>()
            + self.state.iter().sum::<usize>()
            + self.keycols.iter().map(vec_bytes).sum::<usize>()
            + vec_bytes(&self.gids)
            + vec_bytes(&self.uniq)
            + vec_bytes(&self.buf)
    }

    /// The most that folding `other` in ([`Partial::merge`]) can allocate:
    /// its groups as new ones, and without GROUP BY the one group's set
    /// taking every value of `other`'s.
    pub fn merge_headroom(&self, other: &Partial) -> usize {
        if self.groups.width == 0 {
            let sets = self.accs.iter().zip(&other.accs).map(|(a, b)| match (a, b) {
                (Acc::Uniq(u), Acc::Uniq(v)) => match (u.first(), v.first()) {
                    (Some(s), Some(t)) => map_growth(s.len(), s.capacity(), t.len(), 8),
                    _ => 0,
                },
                _ => 0,
            });
            return sets.sum();
        }
        self.headroom(other.groups())
    }

    /// The most that `rows` more rows (as many new groups at most) can
    /// allocate in the group maps and the per-group columns (see
    /// [`super::memory`] for what is not foreseen).
    pub fn headroom(&self, rows: usize) -> usize {
        // Without GROUP BY there is one group, whatever the rows, and its
        // set (uniqExact) can take every row: its next size is foreseen.
        if self.groups.width == 0 {
            let one_set = |a: &Acc| match a {
                Acc::Uniq(u) => u.first().map_or(0, |s| map_growth(s.len(), s.capacity(), rows, 8)),
                _ => 0,
            };
            return self.accs.iter().map(one_set).sum();
        }
        self.groups.headroom(rows) + self.accs.iter().map(|a| a.growth(rows)).sum::<usize>()
    }

    /// A scalar aggregate (no GROUP BY) of fixed-size states: all it holds
    /// is a value per aggregate, so keeping it for the next call is cheap.
    fn scalar(&self) -> bool {
        self.groups.width == 0 && self.accs.iter().all(Acc::fixed)
    }

    /// The group of each of `rows`: one for all, or ids in `self.gids`.
    fn group_ids(&mut self, q: &Select, cols: &[Arc<ColumnData>], rows: Rows) -> Batch {
        if q.group_by.is_empty() {
            return Batch::One(0);
        }
        if let [c] = q.group_by[..] {
            if let Some(k) = constant_key(&cols[c], rows, &mut self.interner) {
                return Batch::One(self.groups.intern(&[k]).0 as usize);
            }
        }
        for (k, &c) in q.group_by.iter().enumerate() {
            column_keys(&cols[c], rows, &mut self.interner, &mut self.keycols[k]);
        }
        if let Some(key) = uniform(&self.keycols, &mut self.buf) {
            return Batch::One(self.groups.intern(key).0 as usize);
        }
        self.groups.ids(&self.keycols, rows.len(), &mut self.buf, &mut self.gids);
        Batch::Many
    }

    /// Aggregates one granule's passing rows; `sorted` names a column known
    /// non-decreasing over them.
    pub fn push(&mut self, q: &Select, aggs: &[Agg], cols: &[Arc<ColumnData>], rows: Rows, sorted: Option<usize>) {
        let group = match self.group_ids(q, cols, rows) {
            Batch::One(g) => Group::One(g),
            Batch::Many => Group::Many(&self.gids),
        };
        let n = self.groups.len();
        for ((a, acc), state) in aggs.iter().zip(&mut self.accs).zip(&mut self.state) {
            acc.grow(n);
            let col = a.column().map(|c| &*cols[c]);
            if let (Agg::UniqExact(c), Acc::Uniq(_)) = (a, &acc) {
                column_keys(&cols[*c], rows, &mut self.interner, &mut self.uniq);
            }
            let delta = acc.update(col, rows, group, &self.uniq, sorted.is_some() && a.column() == sorted);
            *state = state.saturating_add_signed(delta);
        }
    }

    /// Folds `other` (the next partition) into this one.
    pub fn merge(&mut self, q: &Select, aggs: &[Agg], schema: &Schema, mut other: Partial) {
        let strings: Vec<bool> = q.group_by.iter().map(|&c| is_string(schema.columns[c].ty)).collect();
        let uniq_strings: Vec<bool> =
            aggs.iter().map(|a| matches!(a, Agg::UniqExact(c) if is_string(schema.columns[*c].ty))).collect();
        let (mine, theirs) = (&mut self.interner, &other.interner);
        let mut key = Vec::with_capacity(strings.len());
        for g in 0..other.groups.len() {
            key.clear();
            for (&k, &s) in other.groups.key(g).iter().zip(&strings) {
                key.push(if s { mine.id(theirs.string(k)) as u64 } else { k });
            }
            let to = if q.group_by.is_empty() { 0 } else { self.groups.intern(&key).0 as usize };
            let n = self.groups.len();
            for (i, (a, b)) in self.accs.iter_mut().zip(&mut other.accs).enumerate() {
                a.grow(n);
                let mut remap = |k: u64| if uniq_strings[i] { mine.id(theirs.string(k)) as u64 } else { k };
                let delta = a.merge(to, b, g, &mut remap);
                self.state[i] = self.state[i].saturating_add_signed(delta);
            }
        }
    }

    /// The quantile states still needing a pass, after resolving the rest.
    pub fn resolve_quantiles(&mut self, aggs: &[Agg]) -> Vec<Pending> {
        let mut pending = Vec::new();
        for (i, (a, acc)) in aggs.iter().zip(&mut self.accs).enumerate() {
            let (Agg::Quantile(p, col), Acc::Quantile(qs)) = (a, &mut *acc) else { continue };
            let qs = std::mem::take(qs);
            let mut done = vec![Value::Null; qs.len()];
            let mut refs = Vec::new();
            for (g, q) in qs.into_iter().enumerate() {
                match q.resolve(*p) {
                    Resolved::Empty => {}
                    Resolved::Value(v) => done[g] = Value::F(v),
                    Resolved::More(r) => refs.push((g as u32, r)),
                }
            }
            *acc = Acc::Done(done);
            self.state[i] = 0;
            if !refs.is_empty() {
                pending.push(Pending::new(i, *col, refs, self.groups.len()));
            }
        }
        pending
    }

    /// Applies a finished pass: resolved quantiles are stored, the rest
    /// stay pending for the next pass.
    pub fn apply(&mut self, pending: Vec<Pending>, kept: Vec<Kept>) -> Vec<Pending> {
        let mut next = Vec::new();
        for (p, k) in pending.into_iter().zip(kept) {
            let Acc::Done(done) = &mut self.accs[p.acc] else { unreachable!("resolved first") };
            let mut refs = Vec::new();
            for ((g, r), (vals, hist)) in p.refs.into_iter().zip(k.0) {
                match r.finish(vals, hist) {
                    Resolved::Empty => {}
                    Resolved::Value(v) => done[g as usize] = Value::F(v),
                    Resolved::More(r) => refs.push((g, r)),
                }
            }
            if !refs.is_empty() {
                next.push(Pending::new(p.acc, p.col, refs, self.groups.len()));
            }
        }
        next
    }

    /// The groups of a granule's rows for a later pass (no new groups; a
    /// fresh interner clone per worker keeps string ids consistent); `None`
    /// when none of them is a group this pass needs.
    pub fn lookup<'s>(
        &self,
        q: &Select,
        cols: &[Arc<ColumnData>],
        rows: Rows,
        s: &'s mut LookupScratch,
    ) -> Option<Group<'s>> {
        if q.group_by.is_empty() {
            return Some(Group::One(0));
        }
        if let [c] = q.group_by[..] {
            if let Some(k) = constant_key(&cols[c], rows, &mut s.interner) {
                return self.groups.find(&[k]).map(|g| Group::One(g as usize));
            }
        }
        s.keycols.resize_with(q.group_by.len(), Vec::new);
        for (k, &c) in q.group_by.iter().enumerate() {
            column_keys(&cols[c], rows, &mut s.interner, &mut s.keycols[k]);
        }
        if let Some(key) = uniform(&s.keycols, &mut s.buf) {
            return self.groups.find(key).map(|g| Group::One(g as usize));
        }
        self.groups.find_ids(&s.keycols, rows.len(), &mut s.buf, &mut s.gids);
        Some(Group::Many(&s.gids))
    }

    pub fn lookup_scratch(&self) -> LookupScratch {
        LookupScratch { interner: self.interner.clone(), keycols: Vec::new(), gids: Vec::new(), buf: Vec::new() }
    }

    /// Heap bytes [`Partial::rows`] allocates: with an ORDER BY, a sort key
    /// per group and key and a group id each; the rows returned.
    pub fn rows_bytes(&self, q: &Select) -> usize {
        let n = self.groups.len();
        let value = std::mem::size_of::<Value>();
        let sort = if q.order_by.is_empty() { 0 } else { n * (q.order_by.len() * value + 4) };
        let out = q.limit.map_or(n, |l| (l as usize).min(n));
        sort + out * (q.items.len() * value + std::mem::size_of::<Vec<Value>>())
    }

    /// One output row per group (ORDER BY and LIMIT applied over group ids,
    /// so only the rows returned are built).
    pub fn rows(&self, q: &Select, schema: &Schema) -> Vec<Vec<Value>> {
        // The state of item i is the i-th aggregate's: count those before it.
        let agg_of_item =
            |item: usize| -> usize { q.items[..item].iter().filter(|it| matches!(it, Item::Agg(_))).count() };
        let value = |item: usize, g: usize| -> Value {
            match &q.items[item] {
                Item::Agg(_) => self.accs[agg_of_item(item)].value(g),
                Item::Column(c) => {
                    let pos = q.group_by.iter().position(|x| x == c).expect("checked by the planner");
                    key_value(schema.columns[*c].ty, self.groups.key(g)[pos], &self.interner)
                }
            }
        };
        let row = |g: usize| -> Vec<Value> { (0..q.items.len()).map(|i| value(i, g)).collect() };
        let n = self.groups.len();
        let limit = q.limit.map_or(n, |l| (l as usize).min(n));
        if q.order_by.is_empty() {
            return (0..limit).map(row).collect();
        }
        let keys: Vec<SortCol> =
            q.order_by.iter().map(|&(item, _)| SortCol::new((0..n).map(|g| value(item, g)).collect())).collect();
        // Ties keep first-seen order, as a stable sort would.
        let cmp = |a: &u32, b: &u32| {
            for (k, &(_, desc)) in keys.iter().zip(&q.order_by) {
                let o = k.cmp(*a as usize, *b as usize);
                let o = if desc { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            a.cmp(b)
        };
        let mut ids: Vec<u32> = (0..n as u32).collect();
        if limit == 0 {
            ids.clear()
        } else if limit < n {
            // PERF: partial selection, then a sort of the k kept.
            ids.select_nth_unstable_by(limit - 1, cmp);
            ids.truncate(limit);
        }
        ids.sort_unstable_by(cmp);
        ids.into_iter().map(|g| row(g as usize)).collect()
    }
}

/// One ORDER BY key's values over the groups.
enum SortCol {
    /// All floats (a sum, an average): compared without the `Value` match.
    F(Vec<f64>),
    Any(Vec<Value>),
}

impl SortCol {
    fn new(v: Vec<Value>) -> SortCol {
        if v.iter().all(|x| matches!(x, Value::F(_))) {
            SortCol::F(v.iter().map(|x| x.as_f64().expect("a float")).collect())
        } else {
            SortCol::Any(v)
        }
    }

    fn cmp(&self, a: usize, b: usize) -> Ordering {
        match self {
            SortCol::F(v) => v[a].total_cmp(&v[b]),
            SortCol::Any(v) => v[a].cmp(&v[b]),
        }
    }
}

/// A later pass's per-worker state for finding group ids.
pub(super) struct LookupScratch {
    interner: Interner,
    keycols: Vec<Vec<u64>>,
    pub gids: Vec<u32>,
    buf: Vec<u64>,
}

/// One quantile aggregate's groups that need another pass.
pub(super) struct Pending {
    acc: usize,
    pub col: usize,
    /// Per group: index into `refs`, or [`ABSENT`].
    targets: Vec<u32>,
    refs: Vec<(u32, Refine)>,
}

/// What a worker kept during a pass, per pending group: values or a histogram.
pub(super) struct Kept(Vec<(Vec<f64>, Option<Histogram>)>);

/// Counts per bucket of the next bits ([`Refine::empty_hist`]).
type Histogram = Box<[u32]>;

impl Pending {
    fn new(acc: usize, col: usize, refs: Vec<(u32, Refine)>, groups: usize) -> Pending {
        let mut targets = vec![ABSENT; groups];
        for (t, (g, _)) in refs.iter().enumerate() {
            targets[*g as usize] = t as u32;
        }
        Pending { acc, col, targets, refs }
    }

    /// Heap bytes one worker holds for this aggregate during the pass.
    pub fn pass_bytes(&self) -> usize {
        vec_bytes(&self.targets) + self.refs.iter().map(|(_, r)| r.pass_bytes()).sum::<usize>()
    }

    pub fn start(&self) -> Kept {
        Kept(self.refs.iter().map(|(_, r)| (Vec::new(), (!r.collects()).then(Refine::empty_hist))).collect())
    }

    /// Keeps what this pass needs from a granule's rows.
    pub fn scan(&self, kept: &mut Kept, col: &ColumnData, rows: Rows, group: Group) {
        use super::quantile::order_key;
        let target = |g: usize| self.targets.get(g).copied().filter(|&t| t != ABSENT);
        match group {
            Group::One(g) => {
                // PERF: one group: its refinement and buffers hoisted out of the loop.
                let Some(t) = target(g) else { return };
                let r = &self.refs[t as usize].1;
                match &mut kept.0[t as usize] {
                    (_, Some(h)) => each_f64(col, rows, group, |_, x| {
                        let k = order_key(x);
                        if r.matches(k) {
                            h[r.bucket(k)] += 1
                        }
                    }),
                    (v, None) => each_f64(col, rows, group, |_, x| {
                        if r.matches(order_key(x)) {
                            v.push(x)
                        }
                    }),
                }
            }
            Group::Many(_) => each_f64(col, rows, group, |g, x| {
                let Some(t) = target(g) else { return };
                let r = &self.refs[t as usize].1;
                let k = order_key(x);
                if r.matches(k) {
                    match &mut kept.0[t as usize] {
                        (_, Some(h)) => h[r.bucket(k)] += 1,
                        (v, None) => v.push(x),
                    }
                }
            }),
        }
    }
}

impl Kept {
    /// Folds the next partition's kept state into this one.
    pub fn merge(&mut self, other: Kept) {
        for ((va, ha), (vb, hb)) in self.0.iter_mut().zip(other.0) {
            va.extend(vb);
            if let (Some(a), Some(b)) = (ha, hb) {
                a.iter_mut().zip(b.iter()).for_each(|(x, y)| *x += y);
            }
        }
    }
}

/// A prepared statement's spare [`Partial`], so that a short scalar
/// aggregate (a dependent chain's step) builds no aggregation state.
/// PERF: a new partial was four allocations and three hasher seeds, a
/// fifth of such a step. Only a scalar partial of fixed-size states is
/// kept (a few bytes), so a GROUP BY's groups never linger between calls.
#[derive(Default)]
pub(crate) struct Spare(std::sync::Mutex<Option<Box<Partial>>>);

impl Spare {
    /// The spare, reset, or a new partial when there is none (or another
    /// call of the same statement holds it). Boxed, so that keeping and
    /// taking it moves a pointer, not the partial's few hundred bytes.
    pub fn take(&self, q: &Select, aggs: &[Agg], schema: &Schema) -> Box<Partial> {
        match self.0.try_lock().ok().and_then(|mut s| s.take()) {
            Some(mut p) => {
                p.accs.iter_mut().for_each(|a| {
                    a.clear();
                    a.grow(1)
                });
                p.state.iter_mut().for_each(|s| *s = 0);
                p
            }
            None => Box::new(Partial::new(q, aggs, schema)),
        }
    }

    /// Keeps `p` for the next call if it is scalar.
    pub fn give(&self, p: Box<Partial>) {
        if p.scalar() {
            if let Ok(mut s) = self.0.try_lock() {
                *s = Some(p);
            }
        }
    }
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spare")
    }
}

impl Clone for Spare {
    /// A clone starts without a spare (a partial is per statement).
    fn clone(&self) -> Self {
        Spare::default()
    }
}
