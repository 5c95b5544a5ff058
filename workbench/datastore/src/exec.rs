//! Query execution, vectorized over granules.
//!
//! For each part of a snapshot: the primary index prunes granules (binary
//! search on the first key column, then an exclusion test per granule on
//! the key columns whose prefix is constant inside it); each surviving
//! granule's filter columns are read and evaluated into a mask, and only if
//! some row passes are the other columns read. Aggregation keeps one state
//! per group (memory grows with the number of groups; `quantile` keeps the
//! group's values, as an exact quantile must); `ORDER BY … LIMIT k` keeps a
//! heap of k rows.

use crate::error::Result;
use crate::part::{Part, Schema, Scratch};
use crate::sql::{Agg, CmpOp, Item, Pred, Select};
use crate::table::Table;
use crate::types::{ColumnData, ColumnType, Value};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// What a query did, for benchmarks and `EXPLAIN`-like output.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub granules_total: usize,
    pub granules_read: usize,
    pub rows_scanned: u64,
}

fn cmp_lit(col: &ColumnData, i: usize, lit: &Value) -> Ordering {
    match (col, lit) {
        (ColumnData::U64(v), Value::U(x)) => v[i].cmp(x),
        (ColumnData::I64(v), Value::I(x)) => v[i].cmp(x),
        (ColumnData::F64(v), Value::F(x)) => v[i].total_cmp(x),
        (ColumnData::Str(v), Value::S(x)) => v[i].as_str().cmp(x.as_str()),
        _ => col.value(i).total_cmp(lit),
    }
}

/// Evaluates `p` on `n` rows into `out`.
fn eval(p: &Pred, cols: &[ColumnData], n: usize, out: &mut Vec<bool>) {
    out.clear();
    match p {
        Pred::Cmp { col, op, lit } => match &cols[*col] {
            ColumnData::Dict { keys, dict } => {
                // One comparison per dictionary entry, then a lookup per row.
                let t: Vec<bool> = dict.iter().map(|s| op.test(s.as_str().cmp(lit_str(lit)))).collect();
                out.extend(keys.iter().map(|&k| t[k as usize]));
            }
            ColumnData::U64(v) if matches!(lit, Value::U(_)) => {
                let Value::U(x) = lit else { unreachable!() };
                out.extend(v.iter().map(|a| op.test(a.cmp(x))));
            }
            ColumnData::F64(v) if matches!(lit, Value::F(_)) => {
                let Value::F(x) = lit else { unreachable!() };
                out.extend(v.iter().map(|a| op.test(a.total_cmp(x))));
            }
            c => out.extend((0..n).map(|i| op.test(cmp_lit(c, i, lit)))),
        },
        Pred::In { col, list, negated } => match &cols[*col] {
            ColumnData::Dict { keys, dict } => {
                let t: Vec<bool> =
                    dict.iter().map(|s| list.iter().any(|l| s.as_str() == lit_str(l)) != *negated).collect();
                out.extend(keys.iter().map(|&k| t[k as usize]));
            }
            c => out.extend((0..n).map(|i| list.iter().any(|l| cmp_lit(c, i, l) == Ordering::Equal) != *negated)),
        },
        Pred::And(a, b) | Pred::Or(a, b) => {
            let mut rhs = Vec::with_capacity(n);
            eval(a, cols, n, out);
            eval(b, cols, n, &mut rhs);
            let and = matches!(p, Pred::And(..));
            for (o, r) in out.iter_mut().zip(rhs) {
                *o = if and { *o && r } else { *o || r };
            }
        }
        Pred::Not(a) => {
            eval(a, cols, n, out);
            out.iter_mut().for_each(|o| *o = !*o);
        }
    }
}

fn lit_str(v: &Value) -> &str {
    match v {
        Value::S(s) => s,
        _ => "",
    }
}

/// Whether granule `g` of `part` may hold a row satisfying `p`, judged from
/// the sparse index alone (conservative: `true` when it cannot tell).
fn may_match(p: &Pred, schema: &Schema, part: &Part, g: usize) -> bool {
    let range = |col: usize| -> Option<(&Value, &Value)> {
        let j = schema.order_by.iter().position(|&k| k == col)?;
        let (lo, hi) = (&part.index[g], &part.index[g + 1]);
        // Key column j is bounded inside the granule only if the key
        // prefix before it is the same at both ends.
        (lo[..j] == hi[..j]).then(|| (&lo[j], &hi[j]))
    };
    let hits = |col: usize, op: CmpOp, lit: &Value| -> bool {
        let Some((lo, hi)) = range(col) else { return true };
        match op {
            CmpOp::Eq => lo <= lit && lit <= hi,
            CmpOp::Ne => !(lo == lit && hi == lit),
            CmpOp::Lt => lo < lit,
            CmpOp::Le => lo <= lit,
            CmpOp::Gt => hi > lit,
            CmpOp::Ge => hi >= lit,
        }
    };
    match p {
        Pred::Cmp { col, op, lit } => hits(*col, *op, lit),
        Pred::In { col, list, negated: false } => list.iter().any(|l| hits(*col, CmpOp::Eq, l)),
        Pred::And(a, b) => may_match(a, schema, part, g) && may_match(b, schema, part, g),
        Pred::Or(a, b) => may_match(a, schema, part, g) || may_match(b, schema, part, g),
        _ => true,
    }
}

/// Bounds on the first key column implied by the predicate's conjuncts.
fn first_key_bounds(p: &Pred, key0: usize, lo: &mut Option<Value>, hi: &mut Option<Value>) {
    fn raise(lo: &mut Option<Value>, v: &Value) {
        if lo.as_ref().is_none_or(|l| v > l) {
            *lo = Some(v.clone())
        }
    }
    fn lower(hi: &mut Option<Value>, v: &Value) {
        if hi.as_ref().is_none_or(|h| v < h) {
            *hi = Some(v.clone())
        }
    }
    match p {
        Pred::Cmp { col, op, lit } if *col == key0 => match op {
            CmpOp::Eq => {
                raise(lo, lit);
                lower(hi, lit);
            }
            CmpOp::Gt | CmpOp::Ge => raise(lo, lit),
            CmpOp::Lt | CmpOp::Le => lower(hi, lit),
            CmpOp::Ne => {}
        },
        Pred::In { col, list, negated: false } if *col == key0 && !list.is_empty() => {
            raise(lo, list.iter().min().expect("non-empty"));
            lower(hi, list.iter().max().expect("non-empty"));
        }
        Pred::And(a, b) => {
            first_key_bounds(a, key0, lo, hi);
            first_key_bounds(b, key0, lo, hi);
        }
        _ => {}
    }
}

/// The granules of `part` that may match `filter`.
pub fn prune(filter: Option<&Pred>, schema: &Schema, part: &Part) -> Vec<usize> {
    let n = part.granules();
    let Some(p) = filter else { return (0..n).collect() };
    let (mut lo, mut hi) = (None, None);
    if let Some(&key0) = schema.order_by.first() {
        first_key_bounds(p, key0, &mut lo, &mut hi);
    }
    // Granule g spans index[g]..=index[g+1] on the first key column, which
    // is sorted across the part: binary search both ends.
    let start = lo.map_or(0, |l| part.index[1..].partition_point(|k| k[0] < l));
    let end = hi.map_or(n, |h| part.index[..n].partition_point(|k| k[0] <= h));
    (start..end.max(start)).filter(|&g| may_match(p, schema, part, g)).collect()
}

/// Maps strings to dense ids so group keys are plain integers.
#[derive(Default)]
struct Interner {
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

    fn dict_ids(&mut self, dict: &Arc<Vec<String>>) -> usize {
        if let Some(i) = self.dicts.iter().position(|(d, _)| Arc::ptr_eq(d, dict)) {
            return i;
        }
        let ids = dict.iter().map(|s| self.id(s)).collect();
        self.dicts.push((dict.clone(), ids));
        self.dicts.len() - 1
    }
}

/// A column's value at row i as a u64 group/uniq key.
fn key_of(col: &ColumnData, i: usize, interner: &mut Interner, dict_slot: Option<usize>) -> u64 {
    match col {
        ColumnData::U64(v) => v[i],
        ColumnData::I64(v) => v[i] as u64,
        ColumnData::F64(v) => v[i].to_bits(),
        ColumnData::Str(v) => interner.id(&v[i]) as u64,
        ColumnData::Dict { keys, .. } => interner.dicts[dict_slot.expect("slot")].1[keys[i] as usize] as u64,
    }
}

fn key_value(ty: ColumnType, k: u64, interner: &Interner) -> Value {
    match ty {
        ColumnType::Float64 => Value::F(f64::from_bits(k)),
        ColumnType::String | ColumnType::LowCardinalityString => Value::S(interner.strings[k as usize].clone()),
        t if t.is_signed() => Value::I(k as i64),
        _ => Value::U(k),
    }
}

enum State {
    Count(u64),
    SumU(u128),
    SumI(i128),
    SumF(f64),
    Avg(f64, u64),
    Min(Option<Value>),
    Max(Option<Value>),
    Quantile(Vec<f64>),
    Uniq(FastSet<u64>),
}

impl State {
    fn new(a: &Agg, schema: &Schema) -> State {
        match *a {
            Agg::Count => State::Count(0),
            Agg::Sum(c) => match schema.columns[c].ty {
                ColumnType::Float64 => State::SumF(0.0),
                t if t.is_signed() => State::SumI(0),
                _ => State::SumU(0),
            },
            Agg::Avg(_) => State::Avg(0.0, 0),
            Agg::Min(_) => State::Min(None),
            Agg::Max(_) => State::Max(None),
            Agg::Quantile(..) => State::Quantile(Vec::new()),
            Agg::UniqExact(_) => State::Uniq(FastSet::default()),
        }
    }

    fn finish(self, a: &Agg) -> Value {
        match self {
            State::Count(n) => Value::U(n),
            State::SumU(s) => u64::try_from(s).map_or(Value::F(s as f64), Value::U),
            State::SumI(s) => i64::try_from(s).map_or(Value::F(s as f64), Value::I),
            State::SumF(s) => Value::F(s),
            State::Avg(_, 0) => Value::Null,
            State::Avg(s, n) => Value::F(s / n as f64),
            State::Min(v) | State::Max(v) => v.unwrap_or(Value::Null),
            State::Quantile(mut v) => {
                let Agg::Quantile(p, _) = *a else { unreachable!() };
                if v.is_empty() {
                    return Value::Null;
                }
                let n = v.len();
                let k = if p >= 1.0 { n - 1 } else { ((p * n as f64).floor() as usize).min(n - 1) };
                let (_, x, _) = v.select_nth_unstable_by(k, f64::total_cmp);
                Value::F(*x)
            }
            State::Uniq(s) => Value::U(s.len() as u64),
        }
    }
}

fn num(col: &ColumnData, i: usize) -> f64 {
    match col {
        ColumnData::U64(v) => v[i] as f64,
        ColumnData::I64(v) => v[i] as f64,
        ColumnData::F64(v) => v[i],
        _ => f64::NAN,
    }
}

fn better(col: &ColumnData, i: usize, cur: &Option<Value>, want: Ordering) -> bool {
    match cur {
        None => true,
        Some(c) => {
            let o = match (col, c) {
                (ColumnData::Str(_) | ColumnData::Dict { .. }, Value::S(s)) => {
                    col.str_at(i).expect("str").cmp(s.as_str())
                }
                _ => cmp_lit(col, i, c),
            };
            o == want
        }
    }
}

/// Sort keys of a result row, honouring ASC/DESC, for the top-k heap.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum SortKey {
    Asc(Value),
    Desc(Reverse<Value>),
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Ranked {
    keys: Vec<SortKey>,
    seq: u64,
    row: Vec<Value>,
}

/// ORDER BY with an optional LIMIT: a max-heap of the k best rows so far
/// (ties keep arrival order), or every row when there is no limit.
struct TopK {
    order: Vec<(usize, bool)>,
    k: Option<usize>,
    heap: BinaryHeap<Ranked>,
    seq: u64,
}

impl TopK {
    fn push(&mut self, row: Vec<Value>) {
        let keys = self
            .order
            .iter()
            .map(|&(i, desc)| if desc { SortKey::Desc(Reverse(row[i].clone())) } else { SortKey::Asc(row[i].clone()) })
            .collect();
        self.seq += 1;
        if self.k == Some(0) {
            return;
        }
        self.heap.push(Ranked { keys, seq: self.seq, row });
        if self.k.is_some_and(|k| self.heap.len() > k) {
            self.heap.pop();
        }
    }

    fn finish(self) -> Vec<Vec<Value>> {
        self.heap.into_sorted_vec().into_iter().map(|r| r.row).collect()
    }
}

/// Runs a planned SELECT against a table.
pub fn run(table: &Table, q: &Select) -> Result<(QueryResult, Stats)> {
    let schema = &*table.schema;
    let parts = table.snapshot();
    let ncols = schema.columns.len();
    let mut filter_cols = Vec::new();
    if let Some(p) = &q.filter {
        p.columns(&mut filter_cols);
    }
    let mut other_cols: Vec<usize> = Vec::new();
    let mut want = |c: usize| {
        if !filter_cols.contains(&c) && !other_cols.contains(&c) {
            other_cols.push(c)
        }
    };
    for it in &q.items {
        match it {
            Item::Column(c) => want(*c),
            Item::Agg(a) => {
                if let Some(c) = a.column() {
                    want(c)
                }
            }
        }
    }
    q.group_by.iter().for_each(|&c| want(c));

    let mut stats = Stats::default();
    let mut scratch = Scratch::default();
    let mut cols: Vec<ColumnData> = schema.columns.iter().map(|c| ColumnData::empty_for(c.ty)).collect();
    let mut mask = Vec::new();
    let mut interner = Interner::default();
    let aggs: Vec<Agg> = q.items.iter().filter_map(|i| if let Item::Agg(a) = i { Some(*a) } else { None }).collect();
    // PERF: one group column (the common case) keys a map by the u64
    // itself; several use a boxed slice looked up by the reused key buffer.
    let mut groups1: FastMap<u64, u32> = FastMap::default();
    let mut groups: FastMap<Box<[u64]>, u32> = FastMap::default();
    let single = q.group_by.len() == 1;
    // States of group g: states[g * naggs .. (g + 1) * naggs], one flat vector.
    let naggs = aggs.len();
    let mut states: Vec<State> = Vec::new();
    let mut keys_in_order: Vec<Box<[u64]>> = Vec::new();
    let mut key_buf: Vec<u64> = Vec::with_capacity(q.group_by.len());
    let mut top = TopK { order: q.order_by.clone(), k: q.limit.map(|l| l as usize), heap: BinaryHeap::new(), seq: 0 };
    let mut plain_rows: Vec<Vec<Value>> = Vec::new();
    let stream_limit = if q.order_by.is_empty() && !q.aggregate { q.limit } else { None };
    if q.aggregate && q.group_by.is_empty() {
        // Aggregates without GROUP BY give one row even over no rows.
        groups.insert(Box::new([]), 0);
        keys_in_order.push(Box::new([]));
        states.extend(aggs.iter().map(|a| State::new(a, schema)));
    }

    'parts: for part in &parts {
        stats.granules_total += part.granules();
        for g in prune(q.filter.as_ref(), schema, part) {
            if stream_limit.is_some_and(|l| plain_rows.len() as u64 >= l) {
                break 'parts;
            }
            stats.granules_read += 1;
            for &c in &filter_cols {
                part.read(c, g, &mut scratch, &mut cols[c])?;
            }
            let n = part.meta.rows.min(((g + 1) * crate::part::GRANULE) as u64) as usize - g * crate::part::GRANULE;
            stats.rows_scanned += n as u64;
            match &q.filter {
                Some(p) => {
                    eval(p, &cols, n, &mut mask);
                    if !mask.iter().any(|&m| m) {
                        continue;
                    }
                }
                None => {
                    mask.clear();
                    mask.resize(n, true);
                }
            }
            for &c in &other_cols {
                part.read(c, g, &mut scratch, &mut cols[c])?;
            }
            let slots: Vec<Option<usize>> = (0..ncols)
                .map(|c| match &cols[c] {
                    ColumnData::Dict { dict, .. } if q.aggregate => Some(interner.dict_ids(dict)),
                    _ => None,
                })
                .collect();
            if !q.aggregate {
                for i in (0..n).filter(|&i| mask[i]) {
                    let row: Vec<Value> = q
                        .items
                        .iter()
                        .map(|it| match it {
                            Item::Column(c) => cols[*c].value(i),
                            Item::Agg(_) => unreachable!("plain select"),
                        })
                        .collect();
                    if q.order_by.is_empty() {
                        plain_rows.push(row);
                        if stream_limit.is_some_and(|l| plain_rows.len() as u64 >= l) {
                            break 'parts;
                        }
                    } else {
                        top.push(row);
                    }
                }
                continue;
            }
            for i in (0..n).filter(|&i| mask[i]) {
                key_buf.clear();
                for &c in &q.group_by {
                    key_buf.push(key_of(&cols[c], i, &mut interner, slots[c]));
                }
                let next = keys_in_order.len() as u32;
                let (gi, new) = if q.group_by.is_empty() {
                    (0, false)
                } else if single {
                    let e = groups1.entry(key_buf[0]).or_insert(next);
                    (*e as usize, *e == next)
                } else {
                    match groups.get(&key_buf[..]) {
                        Some(&gi) => (gi as usize, false),
                        None => {
                            groups.insert(key_buf.clone().into_boxed_slice(), next);
                            (next as usize, true)
                        }
                    }
                };
                if new {
                    keys_in_order.push(key_buf.clone().into_boxed_slice());
                    states.extend(aggs.iter().map(|a| State::new(a, schema)));
                }
                for (a, st) in aggs.iter().zip(states[gi * naggs..(gi + 1) * naggs].iter_mut()) {
                    let col = a.column().map(|c| &cols[c]);
                    match st {
                        State::Count(n) => *n += 1,
                        State::SumU(s) => {
                            if let Some(ColumnData::U64(v)) = col {
                                *s += v[i] as u128
                            }
                        }
                        State::SumI(s) => {
                            if let Some(ColumnData::I64(v)) = col {
                                *s += v[i] as i128
                            }
                        }
                        State::SumF(s) => *s += num(col.expect("column"), i),
                        State::Avg(s, n) => {
                            *s += num(col.expect("column"), i);
                            *n += 1
                        }
                        State::Min(m) => {
                            let c = col.expect("column");
                            if better(c, i, m, Ordering::Less) {
                                *m = Some(c.value(i))
                            }
                        }
                        State::Max(m) => {
                            let c = col.expect("column");
                            if better(c, i, m, Ordering::Greater) {
                                *m = Some(c.value(i))
                            }
                        }
                        State::Quantile(v) => v.push(num(col.expect("column"), i)),
                        State::Uniq(set) => {
                            let c = a.column().expect("column");
                            set.insert(key_of(&cols[c], i, &mut interner, slots[c]));
                        }
                    }
                }
            }
        }
    }

    let mut rows = if q.aggregate {
        drop((groups, groups1));
        let mut out = Vec::with_capacity(keys_in_order.len());
        let mut states = states.into_iter();
        for key in keys_in_order {
            let st: Vec<State> = states.by_ref().take(naggs).collect();
            let mut finished = st.into_iter().zip(&aggs).map(|(s, a)| s.finish(a));
            let row: Vec<Value> = q
                .items
                .iter()
                .map(|it| match it {
                    Item::Column(c) => {
                        let pos = q.group_by.iter().position(|g| g == c).expect("checked by the planner");
                        key_value(schema.columns[*c].ty, key[pos], &interner)
                    }
                    Item::Agg(_) => finished.next().expect("one state per aggregate"),
                })
                .collect();
            out.push(row);
        }
        if q.order_by.is_empty() {
            out.truncate(q.limit.map_or(usize::MAX, |l| l as usize));
            out
        } else {
            out.into_iter().for_each(|r| top.push(r));
            top.finish()
        }
    } else if q.order_by.is_empty() {
        plain_rows
    } else {
        top.finish()
    };
    if q.hidden > 0 {
        let keep = q.items.len() - q.hidden;
        rows.iter_mut().for_each(|r| r.truncate(keep));
    }
    let columns = q.names[..q.items.len() - q.hidden].to_vec();
    Ok((QueryResult { columns, rows }, stats))
}
