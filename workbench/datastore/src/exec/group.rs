//! Group keys and group ids: a granule's key columns computed for its
//! passing rows (strings interned), then turned into dense ids in
//! first-seen order. One integer key below [`DENSE`] (the top-k query's
//! `user_id`, a LowCardinality code) is looked up in a flat array; larger
//! single keys in an open-addressing map; several keys by their tuple.
//! Also the iteration every aggregate loop shares: rows ([`Rows`]) paired
//! with their group ([`Group`]).

use super::memory::{map_bytes, map_growth, vec_grown};
use crate::types::{ColumnData, ColumnType, StringIds, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
pub(super) type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// Single integer keys below this are looked up in an array (4 MiB at most).
pub(super) const DENSE: u64 = 1 << 20;
pub(super) const ABSENT: u32 = u32::MAX;

/// The rows of a granule an operator sees: a contiguous run `a..b` (all of
/// them, or those a range predicate on the sort key passes), or a selection.
#[derive(Clone, Copy)]
pub(super) enum Rows<'a> {
    Span(usize, usize),
    Sel(&'a [u32]),
}

impl<'a> Rows<'a> {
    /// The row indices, in order.
    pub(super) fn indices(self) -> impl Iterator<Item = usize> + 'a {
        (0..self.len()).map(move |j| match self {
            Rows::Span(a, _) => a + j,
            Rows::Sel(s) => s[j] as usize,
        })
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Rows::Span(a, b) => b - a,
            Rows::Sel(s) => s.len(),
        }
    }
}

/// Which group each row of a batch belongs to.
#[derive(Clone, Copy)]
pub(super) enum Group<'a> {
    /// All of them to one (no GROUP BY, or — the common case on a table
    /// sorted by the group key — a granule inside one key's run).
    One(usize),
    /// Per row, aligned with the rows.
    Many(&'a [u32]),
}

/// Calls `f(group, row)` for each row.
#[inline(always)]
pub(super) fn each(rows: Rows, group: Group, mut f: impl FnMut(usize, usize)) {
    match (rows, group) {
        (Rows::Span(a, b), Group::One(g)) => (a..b).for_each(|i| f(g, i)),
        (Rows::Span(a, b), Group::Many(ids)) => ids[..b - a].iter().zip(a..).for_each(|(&g, i)| f(g as usize, i)),
        (Rows::Sel(s), Group::One(g)) => s.iter().for_each(|&i| f(g, i as usize)),
        (Rows::Sel(s), Group::Many(ids)) => s.iter().zip(ids).for_each(|(&i, &g)| f(g as usize, i as usize)),
    }
}

/// [`each`] with the column's value as f64 (how sum, avg and quantile of
/// a Float64 — or of an integer — accumulate).
#[inline(always)]
pub(super) fn each_f64(col: &ColumnData, rows: Rows, group: Group, mut f: impl FnMut(usize, f64)) {
    match col {
        ColumnData::F64(v) => each(rows, group, |g, i| f(g, v[i])),
        ColumnData::U64(v) => each(rows, group, |g, i| f(g, v[i] as f64)),
        ColumnData::I64(v) => each(rows, group, |g, i| f(g, v[i] as f64)),
        _ => each(rows, group, |g, _| f(g, f64::NAN)),
    }
}

pub(super) fn gather<T: Copy>(v: &[T], rows: Rows, out: &mut Vec<u64>, f: impl Fn(T) -> u64) {
    match rows {
        Rows::Span(a, b) => out.extend(v[a..b].iter().map(|&x| f(x))),
        Rows::Sel(s) => out.extend(s.iter().map(|&i| f(v[i as usize]))),
    }
}

/// Strings to dense ids, so that string keys are integers too. Each
/// partial has its own; merging reconciles them by string.
#[derive(Default, Clone)]
pub(super) struct Interner {
    strings: StringIds,
    /// Per part dictionary (by address; the Arc keeps it alive): its ids.
    dicts: Vec<(Arc<Vec<String>>, Vec<u32>)>,
}

impl Interner {
    pub(super) fn id(&mut self, s: &str) -> u32 {
        self.strings.id(s)
    }

    pub(super) fn string(&self, id: u64) -> &str {
        &self.strings.strings[id as usize]
    }

    /// Heap bytes held: the strings and, per part dictionary, its ids.
    pub(super) fn heap_bytes(&self) -> usize {
        self.strings.heap_bytes()
            + self.dicts.capacity() * std::mem::size_of::<(Arc<Vec<String>>, Vec<u32>)>()
            + self.dicts.iter().map(|(_, ids)| ids.capacity() * 4).sum::<usize>()
    }

    pub(super) fn dict_slot(&mut self, dict: &Arc<Vec<String>>) -> usize {
        if let Some(i) = self.dicts.iter().position(|(d, _)| Arc::ptr_eq(d, dict)) {
            return i;
        }
        let ids = dict.iter().map(|s| self.id(s)).collect();
        self.dicts.push((dict.clone(), ids));
        self.dicts.len() - 1
    }
}

/// The u64 keys of `col` for `rows` (strings interned), appended to `out`.
pub(super) fn column_keys(col: &ColumnData, rows: Rows, interner: &mut Interner, out: &mut Vec<u64>) {
    out.clear();
    match col {
        ColumnData::U64(v) => gather(v, rows, out, |x| x),
        ColumnData::I64(v) => gather(v, rows, out, |x| x as u64),
        ColumnData::F64(v) => gather(v, rows, out, f64::to_bits),
        ColumnData::Dict { keys, dict } => {
            let slot = interner.dict_slot(dict);
            let ids = &interner.dicts[slot].1;
            gather(keys, rows, out, |k| ids[k as usize] as u64)
        }
        ColumnData::Str(v) => match rows {
            Rows::Span(a, b) => out.extend(v[a..b].iter().map(|s| interner.id(s) as u64)),
            Rows::Sel(s) => out.extend(s.iter().map(|&i| interner.id(&v[i as usize]) as u64)),
        },
    }
}

/// The one key every row of `rows` holds in `col`, if they all hold one
/// (an integer or a dictionary code; strings are left to [`column_keys`]).
// PERF: on a table sorted by the group key nearly every granule holds one
// key; checking that is a vectorised compare over the codes, where
// [`column_keys`] and [`uniform`] gathered, mapped and compared every row
// (7 % of the group-by query's CPU, perf, 10M rows).
pub(super) fn constant_key(col: &ColumnData, rows: Rows, interner: &mut Interner) -> Option<u64> {
    fn same<T: Copy + PartialEq>(v: &[T], rows: Rows) -> Option<T> {
        match rows {
            Rows::Span(a, b) if b > a => {
                let k = v[a];
                // Branch-free within a chunk, so the compare vectorises.
                let chunks = v[a..b].chunks(64);
                chunks.into_iter().all(|c| c.iter().fold(true, |same, &x| same & (x == k))).then_some(k)
            }
            _ => None,
        }
    }
    match col {
        ColumnData::U64(v) => same(v, rows),
        ColumnData::I64(v) => same(v, rows).map(|x| x as u64),
        ColumnData::Dict { keys, dict } => {
            let k = same(keys, rows)?;
            let slot = interner.dict_slot(dict);
            Some(interner.dicts[slot].1[k as usize] as u64)
        }
        _ => None,
    }
}

pub(super) fn is_string(t: ColumnType) -> bool {
    matches!(t, ColumnType::String | ColumnType::LowCardinalityString)
}

pub(super) fn key_value(ty: ColumnType, k: u64, interner: &Interner) -> Value {
    match ty {
        ColumnType::Float64 => Value::F(f64::from_bits(k)),
        t if is_string(t) => Value::S(interner.string(k).to_string()),
        t if t.is_signed() => Value::I(k as i64),
        _ => Value::U(k),
    }
}

/// The key tuple shared by every row, if they all share one.
pub(super) fn uniform<'b>(cols: &[Vec<u64>], buf: &'b mut Vec<u64>) -> Option<&'b [u64]> {
    buf.clear();
    for c in cols {
        let k = *c.first()?;
        if !c.iter().all(|&x| x == k) {
            return None;
        }
        buf.push(k);
    }
    Some(buf)
}

/// [`Group`] before it borrows the ids.
pub(super) enum Batch {
    One(usize),
    Many,
}

/// The groups seen so far: their keys in first-seen order and the maps
/// from key to id.
#[derive(Default)]
pub(super) struct Groups {
    pub(super) width: usize,
    len: usize,
    /// `width` keys per group.
    keys: Vec<u64>,
    /// One key below [`DENSE`]: id + 1 (0: not seen).
    dense: Vec<u32>,
    hash1: FastMap<u64, u32>,
    multi: FastMap<Box<[u64]>, u32>,
}

impl Groups {
    pub(super) fn new(width: usize) -> Groups {
        // Without GROUP BY there is one group, present even over no rows.
        Groups { width, len: usize::from(width == 0), ..Groups::default() }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes held, by capacity (`multi`'s keys are boxed, one each).
    pub(super) fn heap_bytes(&self) -> usize {
        self.keys.capacity() * 8
            + self.dense.capacity() * 4
            + map_bytes(self.hash1.capacity(), 16)
            + map_bytes(self.multi.capacity(), 24)
            + self.multi.len() * self.width * 8
    }

    /// The most that `rows` new groups can allocate beyond
    /// [`Groups::heap_bytes`]: each structure that would grow, at its next
    /// size (a table being rehashed and a vector being moved live beside
    /// their old selves).
    pub(super) fn headroom(&self, rows: usize) -> usize {
        if self.width == 0 {
            return 0;
        }
        let keys = vec_grown(self.keys.len(), self.keys.capacity(), rows * self.width);
        let keys = if keys > self.keys.capacity() { keys * 8 } else { 0 };
        if self.width > 1 {
            return keys + map_growth(self.multi.len(), self.multi.capacity(), rows, 24) + rows * self.width * 8;
        }
        let dense = (2 * self.dense.capacity()).max(rows).min(DENSE as usize) * 4;
        keys + dense + map_growth(self.hash1.len(), self.hash1.capacity(), rows, 16)
    }

    pub(super) fn key(&self, g: usize) -> &[u64] {
        &self.keys[g * self.width..(g + 1) * self.width]
    }

    pub(super) fn add(&mut self, key: &[u64]) -> u32 {
        self.keys.extend_from_slice(key);
        self.len += 1;
        (self.len - 1) as u32
    }

    /// The id of `key`, adding it if new; (id, whether new).
    pub(super) fn intern(&mut self, key: &[u64]) -> (u32, bool) {
        if let [k] = *key {
            if k < DENSE {
                let k = k as usize;
                if k >= self.dense.len() {
                    self.dense.resize((k + 1).max(2 * self.dense.len()).min(DENSE as usize), 0);
                }
                if self.dense[k] != 0 {
                    return (self.dense[k] - 1, false);
                }
                let g = self.add(key);
                self.dense[k] = g + 1;
                return (g, true);
            }
            if let Some(&g) = self.hash1.get(&k) {
                return (g, false);
            }
            let g = self.add(key);
            self.hash1.insert(k, g);
            return (g, true);
        }
        if let Some(&g) = self.multi.get(key) {
            return (g, false);
        }
        let g = self.add(key);
        self.multi.insert(key.into(), g);
        (g, true)
    }

    pub(super) fn find(&self, key: &[u64]) -> Option<u32> {
        match *key {
            [k] if k < DENSE => self.dense.get(k as usize).filter(|&&g| g != 0).map(|g| g - 1),
            [k] => self.hash1.get(&k).copied(),
            _ => self.multi.get(key).copied(),
        }
    }

    /// Group ids for `n` rows of per-column keys (`cols[c][j]`), interning
    /// new groups when `add`, else [`ABSENT`] for unseen ones.
    pub(super) fn ids(&mut self, cols: &[Vec<u64>], n: usize, buf: &mut Vec<u64>, out: &mut Vec<u32>) {
        out.clear();
        if let [c] = cols {
            // PERF: the common single-key case without the tuple buffer, and
            // a key already in the dense array without a call.
            for &k in &c[..n] {
                let seen = self.dense.get(k as usize).copied().unwrap_or(0);
                out.push(if seen != 0 && k < DENSE { seen - 1 } else { self.intern(&[k]).0 });
            }
            return;
        }
        for j in 0..n {
            buf.clear();
            buf.extend(cols.iter().map(|c| c[j]));
            out.push(self.intern(buf).0);
        }
    }

    /// As [`Groups::ids`] without adding groups: [`ABSENT`] for unseen keys.
    pub(super) fn find_ids(&self, cols: &[Vec<u64>], n: usize, buf: &mut Vec<u64>, out: &mut Vec<u32>) {
        out.clear();
        if let [c] = cols {
            out.extend(c[..n].iter().map(|&k| self.find(&[k]).unwrap_or(ABSENT)));
            return;
        }
        for j in 0..n {
            buf.clear();
            buf.extend(cols.iter().map(|c| c[j]));
            out.push(self.find(buf).unwrap_or(ABSENT));
        }
    }
}
