//! GROUP BY and aggregates, column at a time: a granule's group keys are
//! computed for all its passing rows, then turned into group ids, then each
//! aggregate runs one typed loop over (group id, value) — no `Value` and no
//! per-row dispatch on the aggregate's kind.
//!
//! Group ids are dense and in first-seen order. One integer key below
//! [`DENSE`] (the top-k query's `user_id`, a LowCardinality code) is looked
//! up in a flat array; larger single keys in an open-addressing map; several
//! keys by their tuple. Each partition of a parallel scan has its own
//! [`Partial`]; partials merge in partition order, so the first-seen order —
//! and every float sum — is the same whatever the number of threads.

use super::quantile::{Quant, Refine, Resolved};
use crate::part::Schema;
use crate::sql::{Agg, Item, Select};
use crate::types::{ColumnData, ColumnType, Value};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// Single integer keys below this are looked up in an array (4 MiB at most).
const DENSE: u64 = 1 << 20;
const ABSENT: u32 = u32::MAX;

/// The rows of a granule an operator sees: all of them, or a selection.
#[derive(Clone, Copy)]
pub(super) enum Rows<'a> {
    All(usize),
    Sel(&'a [u32]),
}

impl<'a> Rows<'a> {
    /// The row indices, in order.
    pub fn indices(self) -> impl Iterator<Item = usize> + 'a {
        (0..self.len()).map(move |j| match self {
            Rows::All(_) => j,
            Rows::Sel(s) => s[j] as usize,
        })
    }

    pub fn len(&self) -> usize {
        match self {
            Rows::All(n) => *n,
            Rows::Sel(s) => s.len(),
        }
    }
}

/// Calls `f(group, row)` for each row; `gids` (aligned with the rows) absent
/// means one group.
#[inline(always)]
fn each(rows: Rows, gids: Option<&[u32]>, mut f: impl FnMut(usize, usize)) {
    match (rows, gids) {
        (Rows::All(n), None) => (0..n).for_each(|i| f(0, i)),
        (Rows::All(n), Some(g)) => g[..n].iter().enumerate().for_each(|(i, &g)| f(g as usize, i)),
        (Rows::Sel(s), None) => s.iter().for_each(|&i| f(0, i as usize)),
        (Rows::Sel(s), Some(g)) => s.iter().zip(g).for_each(|(&i, &g)| f(g as usize, i as usize)),
    }
}

/// [`each`] with the column's value as f64 (how sum, avg and quantile of
/// a Float64 — or of an integer, as `num` always did — accumulate).
#[inline(always)]
fn each_f64(col: &ColumnData, rows: Rows, gids: Option<&[u32]>, mut f: impl FnMut(usize, f64)) {
    match col {
        ColumnData::F64(v) => each(rows, gids, |g, i| f(g, v[i])),
        ColumnData::U64(v) => each(rows, gids, |g, i| f(g, v[i] as f64)),
        ColumnData::I64(v) => each(rows, gids, |g, i| f(g, v[i] as f64)),
        _ => each(rows, gids, |g, _| f(g, f64::NAN)),
    }
}

fn gather<T: Copy>(v: &[T], rows: Rows, out: &mut Vec<u64>, f: impl Fn(T) -> u64) {
    match rows {
        Rows::All(n) => out.extend(v[..n].iter().map(|&x| f(x))),
        Rows::Sel(s) => out.extend(s.iter().map(|&i| f(v[i as usize]))),
    }
}

/// Strings to dense ids, so that string keys are integers too. Each
/// partial has its own; merging reconciles them by string.
#[derive(Default, Clone)]
pub(super) struct Interner {
    ids: FastMap<String, u32>,
    strings: Vec<String>,
    /// Per part dictionary (by address; the Arc keeps it alive): its ids.
    dicts: Vec<(Arc<Vec<String>>, Vec<u32>)>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.ids.insert(s.to_string(), i);
        self.strings.push(s.to_string());
        i
    }

    fn dict_slot(&mut self, dict: &Arc<Vec<String>>) -> usize {
        if let Some(i) = self.dicts.iter().position(|(d, _)| Arc::ptr_eq(d, dict)) {
            return i;
        }
        let ids = dict.iter().map(|s| self.id(s)).collect();
        self.dicts.push((dict.clone(), ids));
        self.dicts.len() - 1
    }
}

/// The u64 keys of `col` for `rows` (strings interned), appended to `out`.
fn column_keys(col: &ColumnData, rows: Rows, interner: &mut Interner, out: &mut Vec<u64>) {
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
            Rows::All(n) => out.extend(v[..n].iter().map(|s| interner.id(s) as u64)),
            Rows::Sel(s) => out.extend(s.iter().map(|&i| interner.id(&v[i as usize]) as u64)),
        },
    }
}

fn is_string(t: ColumnType) -> bool {
    matches!(t, ColumnType::String | ColumnType::LowCardinalityString)
}

fn key_value(ty: ColumnType, k: u64, interner: &Interner) -> Value {
    match ty {
        ColumnType::Float64 => Value::F(f64::from_bits(k)),
        t if is_string(t) => Value::S(interner.strings[k as usize].clone()),
        t if t.is_signed() => Value::I(k as i64),
        _ => Value::U(k),
    }
}

/// The groups seen so far: their keys in first-seen order and the maps
/// from key to id.
#[derive(Default)]
pub(super) struct Groups {
    width: usize,
    len: usize,
    /// `width` keys per group.
    keys: Vec<u64>,
    /// One key below [`DENSE`]: id + 1 (0: not seen).
    dense: Vec<u32>,
    hash1: FastMap<u64, u32>,
    multi: FastMap<Box<[u64]>, u32>,
}

impl Groups {
    fn new(width: usize) -> Groups {
        // Without GROUP BY there is one group, present even over no rows.
        Groups { width, len: usize::from(width == 0), ..Groups::default() }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn key(&self, g: usize) -> &[u64] {
        &self.keys[g * self.width..(g + 1) * self.width]
    }

    fn add(&mut self, key: &[u64]) -> u32 {
        self.keys.extend_from_slice(key);
        self.len += 1;
        (self.len - 1) as u32
    }

    /// The id of `key`, adding it if new; (id, whether new).
    fn intern(&mut self, key: &[u64]) -> (u32, bool) {
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

    fn find(&self, key: &[u64]) -> Option<u32> {
        match *key {
            [k] if k < DENSE => self.dense.get(k as usize).filter(|&&g| g != 0).map(|g| g - 1),
            [k] => self.hash1.get(&k).copied(),
            _ => self.multi.get(key).copied(),
        }
    }

    /// Group ids for `n` rows of per-column keys (`cols[c][j]`), interning
    /// new groups when `add`, else [`ABSENT`] for unseen ones.
    fn ids(&mut self, cols: &[Vec<u64>], n: usize, add: bool, buf: &mut Vec<u64>, out: &mut Vec<u32>) {
        out.clear();
        if let [c] = cols {
            // PERF: the common single-key case without the tuple buffer.
            for &k in &c[..n] {
                let key = [k];
                out.push(if add { self.intern(&key).0 } else { self.find(&key).unwrap_or(ABSENT) });
            }
            return;
        }
        for j in 0..n {
            buf.clear();
            buf.extend(cols.iter().map(|c| c[j]));
            out.push(if add { self.intern(buf).0 } else { self.find(buf).unwrap_or(ABSENT) });
        }
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

    fn update(&mut self, col: Option<&ColumnData>, rows: Rows, gids: Option<&[u32]>, uniq_keys: &[u64]) {
        let col = || col.expect("the aggregate's column");
        fn ext<T: Copy>(slot: &mut Option<T>, x: T, max: bool, cmp: impl Fn(&T, &T) -> Ordering) {
            let want = if max { Ordering::Greater } else { Ordering::Less };
            if slot.as_ref().is_none_or(|c| cmp(&x, c) == want) {
                *slot = Some(x)
            }
        }
        match self {
            Acc::Count(c) => match gids {
                None => c[0] += rows.len() as u64,
                Some(g) => g.iter().for_each(|&g| c[g as usize] += 1),
            },
            Acc::SumU(s) => {
                if let ColumnData::U64(v) = col() {
                    each(rows, gids, |g, i| s[g] += v[i] as u128)
                }
            }
            Acc::SumI(s) => {
                if let ColumnData::I64(v) = col() {
                    each(rows, gids, |g, i| s[g] += v[i] as i128)
                }
            }
            Acc::SumF(s) => each_f64(col(), rows, gids, |g, x| s[g] += x),
            Acc::Avg(s, n) => each_f64(col(), rows, gids, |g, x| {
                s[g] += x;
                n[g] += 1
            }),
            Acc::ExtU(e, max) => {
                if let ColumnData::U64(v) = col() {
                    each(rows, gids, |g, i| ext(&mut e[g], v[i], *max, u64::cmp))
                }
            }
            Acc::ExtI(e, max) => {
                if let ColumnData::I64(v) = col() {
                    each(rows, gids, |g, i| ext(&mut e[g], v[i], *max, i64::cmp))
                }
            }
            Acc::ExtF(e, max) => {
                if let ColumnData::F64(v) = col() {
                    each(rows, gids, |g, i| ext(&mut e[g], v[i], *max, f64::total_cmp))
                }
            }
            Acc::ExtS(e, max) => {
                let c = col();
                let want = if *max { Ordering::Greater } else { Ordering::Less };
                each(rows, gids, |g, i| {
                    let s = c.str_at(i).expect("a string column");
                    if e[g].as_deref().is_none_or(|cur| s.cmp(cur) == want) {
                        e[g] = Some(s.to_string())
                    }
                })
            }
            Acc::Quantile(q) => each_f64(col(), rows, gids, |g, x| q[g].push(x)),
            Acc::Uniq(u) => {
                let mut j = 0;
                each(rows, gids, |g, _| {
                    u[g].insert(uniq_keys[j]);
                    j += 1
                })
            }
            Acc::Done(_) => unreachable!("resolved after the scan"),
        }
    }

    /// Moves `other`'s group `from` into this one's group `to`; `remap`
    /// translates `other`'s interned string ids (for uniqExact on strings).
    fn merge(&mut self, to: usize, other: &mut Acc, from: usize, remap: &mut dyn FnMut(u64) -> u64) {
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
            (Acc::ExtS(a, max), Acc::ExtS(b, _)) => ext(&mut a[to], b[from].take(), *max, String::cmp),
            (Acc::Quantile(a), Acc::Quantile(b)) => a[to].merge(std::mem::take(&mut b[from])),
            (Acc::Uniq(a), Acc::Uniq(b)) => a[to].extend(std::mem::take(&mut b[from]).into_iter().map(remap)),
            _ => unreachable!("partials of one plan have the same aggregates"),
        }
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
    interner: Interner,
    // Per-granule buffers, reused.
    keycols: Vec<Vec<u64>>,
    gids: Vec<u32>,
    uniq: Vec<u64>,
    buf: Vec<u64>,
}

impl Partial {
    pub fn new(q: &Select, aggs: &[Agg], schema: &Schema) -> Partial {
        let mut p = Partial {
            groups: Groups::new(q.group_by.len()),
            accs: aggs.iter().map(|a| Acc::new(a, schema)).collect(),
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

    /// Group ids of `rows` into `self.gids`; `None` without GROUP BY.
    fn group_ids(&mut self, q: &Select, cols: &[ColumnData], rows: Rows, add: bool) -> bool {
        if q.group_by.is_empty() {
            return false;
        }
        for (k, &c) in q.group_by.iter().enumerate() {
            column_keys(&cols[c], rows, &mut self.interner, &mut self.keycols[k]);
        }
        self.groups.ids(&self.keycols, rows.len(), add, &mut self.buf, &mut self.gids);
        true
    }

    /// Aggregates one granule's passing rows.
    pub fn push(&mut self, q: &Select, aggs: &[Agg], cols: &[ColumnData], rows: Rows) {
        let grouped = self.group_ids(q, cols, rows, true);
        let n = self.groups.len();
        for (a, acc) in aggs.iter().zip(&mut self.accs) {
            acc.grow(n);
            let col = a.column().map(|c| &cols[c]);
            if let (Agg::UniqExact(c), Acc::Uniq(_)) = (a, &acc) {
                column_keys(&cols[*c], rows, &mut self.interner, &mut self.uniq);
            }
            acc.update(col, rows, grouped.then_some(&self.gids[..]), &self.uniq);
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
                key.push(if s { mine.id(&theirs.strings[k as usize]) as u64 } else { k });
            }
            let to = if q.group_by.is_empty() { 0 } else { self.groups.intern(&key).0 as usize };
            let n = self.groups.len();
            for (i, (a, b)) in self.accs.iter_mut().zip(&mut other.accs).enumerate() {
                a.grow(n);
                let mut remap = |k: u64| if uniq_strings[i] { mine.id(&theirs.strings[k as usize]) as u64 } else { k };
                a.merge(to, b, g, &mut remap);
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

    /// Group ids of a granule's rows for a later pass (no new groups; a
    /// fresh interner clone per worker keeps string ids consistent).
    pub fn lookup(&self, q: &Select, cols: &[ColumnData], rows: Rows, s: &mut LookupScratch) -> bool {
        if q.group_by.is_empty() {
            return false;
        }
        s.keycols.resize_with(q.group_by.len(), Vec::new);
        for (k, &c) in q.group_by.iter().enumerate() {
            column_keys(&cols[c], rows, &mut s.interner, &mut s.keycols[k]);
        }
        s.gids.clear();
        let n = rows.len();
        if let [c] = &s.keycols[..] {
            s.gids.extend(c[..n].iter().map(|&k| self.groups.find(&[k]).unwrap_or(ABSENT)));
        } else {
            for j in 0..n {
                s.buf.clear();
                s.buf.extend(s.keycols.iter().map(|c| c[j]));
                s.gids.push(self.groups.find(&s.buf).unwrap_or(ABSENT));
            }
        }
        true
    }

    pub fn lookup_scratch(&self) -> LookupScratch {
        LookupScratch { interner: self.interner.clone(), keycols: Vec::new(), gids: Vec::new(), buf: Vec::new() }
    }

    /// One output row per group (ORDER BY and LIMIT applied over group ids,
    /// so only the rows returned are built).
    pub fn rows(self, q: &Select, schema: &Schema) -> Vec<Vec<Value>> {
        let mut agg_of_item = Vec::with_capacity(q.items.len());
        let mut next = 0;
        for it in &q.items {
            agg_of_item.push(matches!(it, Item::Agg(_)).then(|| {
                next += 1;
                next - 1
            }));
        }
        let value = |item: usize, g: usize| -> Value {
            match (&q.items[item], agg_of_item[item]) {
                (_, Some(a)) => self.accs[a].value(g),
                (Item::Column(c), None) => {
                    let pos = q.group_by.iter().position(|x| x == c).expect("checked by the planner");
                    key_value(schema.columns[*c].ty, self.groups.key(g)[pos], &self.interner)
                }
                (Item::Agg(_), None) => unreachable!("every aggregate item has a state"),
            }
        };
        let n = self.groups.len();
        let limit = q.limit.map_or(n, |l| (l as usize).min(n));
        let order: Vec<u32> = if q.order_by.is_empty() {
            (0..limit as u32).collect()
        } else {
            let keys: Vec<Vec<Value>> =
                q.order_by.iter().map(|&(item, _)| (0..n).map(|g| value(item, g)).collect()).collect();
            // Ties keep first-seen order, as a stable sort would.
            let cmp = |a: &u32, b: &u32| {
                for (k, &(_, desc)) in keys.iter().zip(&q.order_by) {
                    let o = k[*a as usize].cmp(&k[*b as usize]);
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
            ids
        };
        order.into_iter().map(|g| (0..q.items.len()).map(|i| value(i, g as usize)).collect()).collect()
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
pub(super) struct Kept(Vec<(Vec<f64>, Option<Box<[u32]>>)>);

impl Pending {
    fn new(acc: usize, col: usize, refs: Vec<(u32, Refine)>, groups: usize) -> Pending {
        let mut targets = vec![ABSENT; groups];
        for (t, (g, _)) in refs.iter().enumerate() {
            targets[*g as usize] = t as u32;
        }
        Pending { acc, col, targets, refs }
    }

    pub fn start(&self) -> Kept {
        Kept(self.refs.iter().map(|(_, r)| (Vec::new(), (!r.collects()).then(Refine::empty_hist))).collect())
    }

    /// Keeps what this pass needs from a granule's rows.
    pub fn scan(&self, kept: &mut Kept, col: &ColumnData, rows: Rows, gids: Option<&[u32]>) {
        each_f64(col, rows, gids, |g, x| {
            let Some(&t) = self.targets.get(g) else { return };
            if t == ABSENT {
                return;
            }
            let r = &self.refs[t as usize].1;
            let k = super::quantile::order_key(x);
            if r.matches(k) {
                match &mut kept.0[t as usize] {
                    (_, Some(h)) => h[r.bucket(k)] += 1,
                    (v, None) => v.push(x),
                }
            }
        })
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
