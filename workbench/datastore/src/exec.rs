//! Query execution, vectorized over granules: a [`Plan`] derived once from
//! the parsed SELECT, run by three operators — the scan (pruning, reading,
//! filtering), the aggregation, and the top-k — under per-query [`Limits`].
//!
//! For each part of a snapshot: the primary index prunes granules (binary
//! search on the first key column, then an exclusion test per granule on
//! the key columns whose prefix is constant inside it); each surviving
//! granule's filter columns are read and evaluated into a mask, and only if
//! some row passes are the other columns read. Aggregation keeps one state
//! per group (memory grows with the number of groups; `quantile` keeps the
//! group's values, as an exact quantile must); `ORDER BY … LIMIT k` keeps a
//! heap of k rows.

use crate::error::{Error, Result};
use crate::part::{Part, Schema, Scratch};
use crate::sql::{Agg, CmpOp, Item, Pred, Select};
use crate::table::Table;
use crate::types::{ColumnData, ColumnType, Value};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub columns: Vec<String>,
    /// Each output column's type (aggregates typed as ClickHouse types them).
    pub types: Vec<ColumnType>,
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
    fn new(q: &Select) -> TopK {
        TopK { order: q.order_by.clone(), k: q.limit.map(|l| l as usize), heap: BinaryHeap::new(), seq: 0 }
    }

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

/// Bounds on one query's work, checked as it runs (the server's per-query
/// limits; the CLI runs unbounded).
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Give up with [`Error::Deadline`] once this instant has passed
    /// (checked once per granule, so it overshoots by one granule at most).
    pub deadline: Option<Instant>,
    /// The deadline's length, for the error message.
    pub deadline_ms: u64,
    /// Largest number of result rows (or groups held while aggregating).
    pub max_rows: Option<usize>,
}

impl Limits {
    fn check_time(&self) -> Result<()> {
        match self.deadline {
            Some(d) if Instant::now() > d => Err(Error::Deadline { ms: self.deadline_ms }),
            _ => Ok(()),
        }
    }
    fn check_rows(&self, rows: usize) -> Result<()> {
        match self.max_rows {
            Some(max) if rows > max => Err(Error::ResultTooLarge { max }),
            _ => Ok(()),
        }
    }
}

/// Runs a planned SELECT against a table, without limits.
pub fn run(table: &Table, q: &Select) -> Result<(QueryResult, Stats)> {
    Plan::new(&table.schema, q).execute(&table.snapshot(), &Limits::default())
}

/// What a SELECT reads and computes, derived once from the parsed query:
/// the columns the filter needs, the columns read only for rows that pass,
/// the aggregates, and the output types.
pub struct Plan<'a> {
    q: &'a Select,
    schema: &'a Schema,
    filter_cols: Vec<usize>,
    other_cols: Vec<usize>,
    aggs: Vec<Agg>,
}

impl<'a> Plan<'a> {
    pub fn new(schema: &'a Schema, q: &'a Select) -> Plan<'a> {
        let mut filter_cols = Vec::new();
        if let Some(p) = &q.filter {
            p.columns(&mut filter_cols);
        }
        let mut other_cols: Vec<usize> = Vec::new();
        let needed = q.items.iter().filter_map(|it| match it {
            Item::Column(c) => Some(*c),
            Item::Agg(a) => a.column(),
        });
        for c in needed.chain(q.group_by.iter().copied()) {
            if !filter_cols.contains(&c) && !other_cols.contains(&c) {
                other_cols.push(c)
            }
        }
        let aggs = q.items.iter().filter_map(|i| if let Item::Agg(a) = i { Some(*a) } else { None }).collect();
        Plan { q, schema, filter_cols, other_cols, aggs }
    }

    /// The type of each output column (as ClickHouse types them).
    pub fn output_types(&self) -> Vec<ColumnType> {
        let ty = |c: usize| self.schema.columns[c].ty;
        let shown = self.q.items.len() - self.q.hidden;
        self.q.items[..shown]
            .iter()
            .map(|it| match *it {
                Item::Column(c) => ty(c),
                Item::Agg(Agg::Count | Agg::UniqExact(_)) => ColumnType::UInt64,
                Item::Agg(Agg::Avg(_) | Agg::Quantile(..)) => ColumnType::Float64,
                Item::Agg(Agg::Min(c) | Agg::Max(c)) => ty(c),
                Item::Agg(Agg::Sum(c)) => match ty(c) {
                    ColumnType::Float64 => ColumnType::Float64,
                    t if t.is_signed() => ColumnType::Int64,
                    _ => ColumnType::UInt64,
                },
            })
            .collect()
    }

    /// Runs the plan over a snapshot of parts.
    pub fn execute(&self, parts: &[Arc<Part>], limits: &Limits) -> Result<(QueryResult, Stats)> {
        let q = self.q;
        let mut scan = Scan::new(self);
        let mut rows = if q.aggregate {
            let mut agg = Aggregate::new(self);
            scan.run(parts, limits, |cols, mask, n| {
                agg.push(cols, mask, n);
                limits.check_rows(agg.groups())?;
                Ok(true)
            })?;
            let mut rows = agg.finish();
            if q.order_by.is_empty() {
                rows.truncate(q.limit.map_or(usize::MAX, |l| l as usize));
                rows
            } else {
                let mut top = TopK::new(q);
                rows.into_iter().for_each(|r| top.push(r));
                top.finish()
            }
        } else if q.order_by.is_empty() {
            // A plain LIMIT stops the scan as soon as it has its rows.
            let limit = q.limit.map_or(usize::MAX, |l| l as usize);
            let mut rows = Vec::new();
            let parts = if limit == 0 { &[][..] } else { parts };
            scan.run(parts, limits, |cols, mask, n| {
                for i in (0..n).filter(|&i| mask[i]).take(limit - rows.len()) {
                    rows.push(project(q, cols, i));
                }
                limits.check_rows(rows.len())?;
                Ok(rows.len() < limit)
            })?;
            rows
        } else {
            let mut top = TopK::new(q);
            scan.run(parts, limits, |cols, mask, n| {
                for i in (0..n).filter(|&i| mask[i]) {
                    top.push(project(q, cols, i));
                }
                limits.check_rows(top.heap.len())?;
                Ok(true)
            })?;
            top.finish()
        };
        if q.hidden > 0 {
            let keep = q.items.len() - q.hidden;
            rows.iter_mut().for_each(|r| r.truncate(keep));
        }
        let columns = q.names[..q.items.len() - q.hidden].to_vec();
        Ok((QueryResult { columns, types: self.output_types(), rows }, scan.stats))
    }
}

/// One output row of a plain (non-aggregate) SELECT.
fn project(q: &Select, cols: &[ColumnData], i: usize) -> Vec<Value> {
    q.items
        .iter()
        .map(|it| match it {
            Item::Column(c) => cols[*c].value(i),
            Item::Agg(_) => unreachable!("plain select"),
        })
        .collect()
}

/// The scan operator: prunes granules by the sparse index, reads the filter
/// columns, evaluates the filter into a mask, and reads the other columns
/// only for granules where some row passes.
struct Scan<'p> {
    plan: &'p Plan<'p>,
    scratch: Scratch,
    cols: Vec<ColumnData>,
    mask: Vec<bool>,
    stats: Stats,
}

impl<'p> Scan<'p> {
    fn new(plan: &'p Plan<'p>) -> Self {
        let cols = plan.schema.columns.iter().map(|c| ColumnData::empty_for(c.ty)).collect();
        Scan { plan, scratch: Scratch::default(), cols, mask: Vec::new(), stats: Stats::default() }
    }

    /// Calls `f(columns, mask, rows)` per granule with a passing row, until
    /// `f` answers `false` (enough rows) or fails.
    fn run(
        &mut self,
        parts: &[Arc<Part>],
        limits: &Limits,
        mut f: impl FnMut(&[ColumnData], &[bool], usize) -> Result<bool>,
    ) -> Result<()> {
        let (q, schema) = (self.plan.q, self.plan.schema);
        for part in parts {
            self.stats.granules_total += part.granules();
        }
        for part in parts {
            for g in prune(q.filter.as_ref(), schema, part) {
                limits.check_time()?;
                self.stats.granules_read += 1;
                for &c in &self.plan.filter_cols {
                    part.read(c, g, &mut self.scratch, &mut self.cols[c])?;
                }
                let n = part.meta.rows.min(((g + 1) * crate::part::GRANULE) as u64) as usize - g * crate::part::GRANULE;
                self.stats.rows_scanned += n as u64;
                match &q.filter {
                    Some(p) => {
                        eval(p, &self.cols, n, &mut self.mask);
                        if !self.mask.iter().any(|&m| m) {
                            continue;
                        }
                    }
                    None => {
                        self.mask.clear();
                        self.mask.resize(n, true);
                    }
                }
                for &c in &self.plan.other_cols {
                    part.read(c, g, &mut self.scratch, &mut self.cols[c])?;
                }
                if !f(&self.cols, &self.mask, n)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// The aggregation operator: one state per (group, aggregate), keyed by the
/// group columns' values as u64 (strings interned).
struct Aggregate<'p> {
    plan: &'p Plan<'p>,
    interner: Interner,
    // PERF: one group column (the common case) keys a map by the u64
    // itself; several use a boxed slice looked up by the reused key buffer.
    groups1: FastMap<u64, u32>,
    groups: FastMap<Box<[u64]>, u32>,
    /// States of group g: states[g * naggs .. (g + 1) * naggs], one flat vector.
    states: Vec<State>,
    keys_in_order: Vec<Box<[u64]>>,
    key_buf: Vec<u64>,
}

impl<'p> Aggregate<'p> {
    fn new(plan: &'p Plan<'p>) -> Self {
        let mut a = Aggregate {
            plan,
            interner: Interner::default(),
            groups1: FastMap::default(),
            groups: FastMap::default(),
            states: Vec::new(),
            keys_in_order: Vec::new(),
            key_buf: Vec::with_capacity(plan.q.group_by.len()),
        };
        if plan.q.group_by.is_empty() {
            // Aggregates without GROUP BY give one row even over no rows.
            a.keys_in_order.push(Box::new([]));
            a.states.extend(plan.aggs.iter().map(|ag| State::new(ag, plan.schema)));
        }
        a
    }

    fn groups(&self) -> usize {
        self.keys_in_order.len()
    }

    fn push(&mut self, cols: &[ColumnData], mask: &[bool], n: usize) {
        let plan = self.plan;
        let (q, aggs) = (plan.q, &plan.aggs);
        let naggs = aggs.len();
        let single = q.group_by.len() == 1;
        let slots: Vec<Option<usize>> = cols
            .iter()
            .map(|c| match c {
                ColumnData::Dict { dict, .. } => Some(self.interner.dict_ids(dict)),
                _ => None,
            })
            .collect();
        for i in (0..n).filter(|&i| mask[i]) {
            self.key_buf.clear();
            for &c in &q.group_by {
                self.key_buf.push(key_of(&cols[c], i, &mut self.interner, slots[c]));
            }
            let next = self.keys_in_order.len() as u32;
            let (gi, new) = if q.group_by.is_empty() {
                (0, false)
            } else if single {
                let e = self.groups1.entry(self.key_buf[0]).or_insert(next);
                (*e as usize, *e == next)
            } else {
                match self.groups.get(&self.key_buf[..]) {
                    Some(&gi) => (gi as usize, false),
                    None => {
                        self.groups.insert(self.key_buf.clone().into_boxed_slice(), next);
                        (next as usize, true)
                    }
                }
            };
            if new {
                self.keys_in_order.push(self.key_buf.clone().into_boxed_slice());
                self.states.extend(aggs.iter().map(|a| State::new(a, plan.schema)));
            }
            for (a, st) in aggs.iter().zip(self.states[gi * naggs..(gi + 1) * naggs].iter_mut()) {
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
                        set.insert(key_of(&cols[c], i, &mut self.interner, slots[c]));
                    }
                }
            }
        }
    }

    /// One row per group, in first-seen order.
    fn finish(self) -> Vec<Vec<Value>> {
        let plan = self.plan;
        let (q, aggs, schema) = (plan.q, &plan.aggs, plan.schema);
        let naggs = aggs.len();
        drop((self.groups, self.groups1));
        let mut out = Vec::with_capacity(self.keys_in_order.len());
        let mut states = self.states.into_iter();
        for key in self.keys_in_order {
            let st: Vec<State> = states.by_ref().take(naggs).collect();
            let mut finished = st.into_iter().zip(aggs).map(|(s, a)| s.finish(a));
            let row: Vec<Value> = q
                .items
                .iter()
                .map(|it| match it {
                    Item::Column(c) => {
                        let pos = q.group_by.iter().position(|g| g == c).expect("checked by the planner");
                        key_value(schema.columns[*c].ty, key[pos], &self.interner)
                    }
                    Item::Agg(_) => finished.next().expect("one state per aggregate"),
                })
                .collect();
            out.push(row);
        }
        out
    }
}
