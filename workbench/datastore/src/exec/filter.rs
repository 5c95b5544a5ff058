//! WHERE: granule pruning from the sparse index, and the predicate evaluated
//! over a granule into a row mask.

use super::query::{CmpOp, Pred};
use crate::storage::part::{Part, Schema};
use crate::types::{ColumnData, Value};
use std::cmp::Ordering;

pub(super) fn cmp_lit(col: &ColumnData, i: usize, lit: &Value) -> Ordering {
    match (col, lit) {
        (ColumnData::U64(v), Value::U(x)) => v[i].cmp(x),
        (ColumnData::I64(v), Value::I(x)) => v[i].cmp(x),
        (ColumnData::F64(v), Value::F(x)) => v[i].total_cmp(x),
        (ColumnData::Str(v), Value::S(x)) => v[i].as_str().cmp(x.as_str()),
        _ => col.value(i).total_cmp(lit),
    }
}

fn lit_str(v: &Value) -> &str {
    match v {
        Value::S(s) => s,
        _ => "",
    }
}

/// SMALL_LIST = 8: an `IN` list this short is scanned; a longer sorted one
/// is probed by binary search ([`Pred::sort_in_lists`]).
const SMALL_LIST: usize = 8;

/// Mask buffers reused from granule to granule, so evaluating a predicate
/// allocates nothing once a query has warmed up.
#[derive(Default)]
pub(super) struct MaskPool(Vec<Vec<bool>>);

impl MaskPool {
    fn take(&mut self) -> Vec<bool> {
        self.0.pop().unwrap_or_default()
    }
    fn give(&mut self, v: Vec<bool>) {
        self.0.push(v)
    }

    /// Heap bytes its masks hold: a query's charge, as its own mask is
    /// (request-cost found the scratch of an `AND`'s right side, a mask per
    /// reader, uncharged: a filtered count's true peak 18 KB over its charge).
    pub(super) fn heap_bytes(&self) -> usize {
        self.0.iter().map(Vec::capacity).sum::<usize>() + self.0.capacity() * std::mem::size_of::<Vec<bool>>()
    }
}

/// Evaluates `p` on `n` rows into `out`.
pub(super) fn eval(p: &Pred, cols: &[std::sync::Arc<ColumnData>], n: usize, out: &mut Vec<bool>, pool: &mut MaskPool) {
    out.clear();
    match p {
        Pred::Cmp { col, op, lit } => match &*cols[*col] {
            ColumnData::Dict { keys, dict } => {
                // One comparison per dictionary entry, then a lookup per row.
                let mut t = pool.take();
                t.clear();
                t.extend(dict.iter().map(|s| op.test(s.as_str().cmp(lit_str(lit)))));
                out.extend(keys.iter().map(|&k| t[k as usize]));
                pool.give(t);
            }
            // PERF: typed loops over the column (no per-row Value), which the
            // compiler vectorises for the common comparisons.
            ColumnData::U64(v) if matches!(lit, Value::U(_)) => {
                let Value::U(x) = *lit else { unreachable!() };
                cmp_loop(v, x, *op, out)
            }
            ColumnData::I64(v) if matches!(lit, Value::I(_)) => {
                let Value::I(x) = *lit else { unreachable!() };
                cmp_loop(v, x, *op, out)
            }
            ColumnData::F64(v) if matches!(lit, Value::F(_)) => {
                let Value::F(x) = *lit else { unreachable!() };
                // total_cmp order, as everywhere else in the engine.
                let key = |f: f64| {
                    let b = f.to_bits() as i64;
                    b ^ ((((b >> 63) as u64) >> 1) as i64)
                };
                let x = key(x);
                out.extend(v.iter().map(|&a| op.test(key(a).cmp(&x))));
            }
            c => out.extend((0..n).map(|i| op.test(cmp_lit(c, i, lit)))),
        },
        Pred::In { col, list, negated } => {
            let sorted = list.len() > SMALL_LIST && list.is_sorted();
            match &*cols[*col] {
                ColumnData::Dict { keys, dict } => {
                    let mut t = pool.take();
                    t.clear();
                    t.extend(dict.iter().map(|s| {
                        let s = s.as_str();
                        let hit = match sorted {
                            true => list.binary_search_by(|l| lit_str(l).cmp(s)).is_ok(),
                            false => list.iter().any(|l| s == lit_str(l)),
                        };
                        hit != *negated
                    }));
                    out.extend(keys.iter().map(|&k| t[k as usize]));
                    pool.give(t);
                }
                c if sorted => out
                    .extend((0..n).map(|i| list.binary_search_by(|l| cmp_lit(c, i, l).reverse()).is_ok() != *negated)),
                c => out.extend((0..n).map(|i| list.iter().any(|l| cmp_lit(c, i, l) == Ordering::Equal) != *negated)),
            }
        }
        Pred::And(a, b) | Pred::Or(a, b) => {
            let mut rhs = pool.take();
            eval(a, cols, n, out, pool);
            eval(b, cols, n, &mut rhs, pool);
            if matches!(p, Pred::And(..)) {
                out.iter_mut().zip(&rhs).for_each(|(o, &r)| *o &= r);
            } else {
                out.iter_mut().zip(&rhs).for_each(|(o, &r)| *o |= r);
            }
            pool.give(rhs);
        }
        Pred::Not(a) => {
            eval(a, cols, n, out, pool);
            out.iter_mut().for_each(|o| *o = !*o);
        }
    }
}

/// The rows of a granule that `p` passes, as one run `a..b`, when the sort
/// order alone tells: `p` compares the part's first sort-key column (an
/// integer, so non-decreasing down every granule of a part) with a literal
/// of its type, or is a conjunction of such comparisons. Two binary
/// searches instead of a comparison and a mask per row; `None` when `p`
/// is of another shape (then [`eval`] decides row by row).
pub(super) fn key_span(p: &Pred, key0: usize, key: &ColumnData, n: usize) -> Option<(usize, usize)> {
    match p {
        Pred::Cmp { col, op, lit } if *col == key0 => match (key, lit) {
            (ColumnData::U64(v), Value::U(x)) => run_of(&v[..n], *x, *op),
            (ColumnData::I64(v), Value::I(x)) => run_of(&v[..n], *x, *op),
            _ => None,
        },
        Pred::And(a, b) => {
            let (a0, a1) = key_span(a, key0, key, n)?;
            let (b0, b1) = key_span(b, key0, key, n)?;
            let (lo, hi) = (a0.max(b0), a1.min(b1));
            Some((lo, hi.max(lo)))
        }
        _ => None,
    }
}

/// Where `v[i] op x` holds in non-decreasing `v`: one run, or `None` for `!=`.
fn run_of<T: Ord + Copy>(v: &[T], x: T, op: CmpOp) -> Option<(usize, usize)> {
    let below = || v.partition_point(|&y| y < x);
    let through = || v.partition_point(|&y| y <= x);
    Some(match op {
        CmpOp::Eq => (below(), through()),
        CmpOp::Lt => (0, below()),
        CmpOp::Le => (0, through()),
        CmpOp::Gt => (through(), v.len()),
        CmpOp::Ge => (below(), v.len()),
        CmpOp::Ne => return None,
    })
}

fn cmp_loop<T: Ord + Copy>(v: &[T], x: T, op: CmpOp, out: &mut Vec<bool>) {
    // One loop per operator: the comparison is then a single instruction
    // the compiler can vectorise, not a match per row.
    match op {
        CmpOp::Eq => out.extend(v.iter().map(|&a| a == x)),
        CmpOp::Ne => out.extend(v.iter().map(|&a| a != x)),
        CmpOp::Lt => out.extend(v.iter().map(|&a| a < x)),
        CmpOp::Le => out.extend(v.iter().map(|&a| a <= x)),
        CmpOp::Gt => out.extend(v.iter().map(|&a| a > x)),
        CmpOp::Ge => out.extend(v.iter().map(|&a| a >= x)),
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
        // A sorted list hits the granule if its first value not below the
        // granule's low end is within it; an unsorted one is scanned.
        Pred::In { col, list, negated: false } if list.is_sorted() => match range(*col) {
            Some((lo, _)) => list.get(list.partition_point(|l| l < lo)).is_some_and(|l| hits(*col, CmpOp::Eq, l)),
            None => true,
        },
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

/// The granules of `part` that may match `filter`, in order.
pub fn prune<'a>(filter: Option<&'a Pred>, schema: &'a Schema, part: &'a Part) -> impl Iterator<Item = usize> + 'a {
    key_granules(filter, schema, part).filter(move |&g| filter.is_none_or(|p| may_match(p, schema, part, g)))
}

/// The granules of `part` inside the bounds `filter` puts on the first key
/// column, in order: the sparse index's binary search alone.
pub(super) fn key_granules(filter: Option<&Pred>, schema: &Schema, part: &Part) -> std::ops::Range<usize> {
    let n = part.granules();
    let (mut lo, mut hi) = (None, None);
    if let (Some(p), Some(&key0)) = (filter, schema.order_by.first()) {
        first_key_bounds(p, key0, &mut lo, &mut hi);
    }
    // Granule g spans index[g]..=index[g+1] on the first key column, which
    // is sorted across the part: binary search both ends.
    let start = lo.map_or(0, |l| part.index[1..].partition_point(|k| k[0] < l));
    let end = hi.map_or(n, |h| part.index[..n].partition_point(|k| k[0] <= h));
    start..end.max(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::query::Pred;

    /// Every operator and a conjunction, at literals below, inside (on
    /// runs of equal keys) and above a sorted granule: the run found by
    /// binary search is exactly the rows the row-by-row mask passes.
    #[test]
    fn key_runs_are_the_rows_the_mask_passes() {
        // Column 0 (k) is the first sort key; column 1 (i) is not.
        let k: Vec<u64> = vec![2, 2, 3, 5, 5, 5, 8, 9, 9, 12];
        let i: Vec<i64> = (0..10).map(|x| 4 - x).collect();
        let cols = [std::sync::Arc::new(ColumnData::U64(k.clone())), std::sync::Arc::new(ColumnData::I64(i))];
        let mut pool = MaskPool::default();
        let ops = [CmpOp::Eq, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
        let mut checked = 0;
        for n in [0, 1, 6, 10] {
            for x in 0..14 {
                for op in ops {
                    for second in [None, Some((CmpOp::Lt, 9)), Some((CmpOp::Ge, 3))] {
                        let one = Pred::Cmp { col: 0, op, lit: Value::U(x) };
                        let p = match second {
                            None => one,
                            Some((op2, y)) => {
                                Pred::And(Box::new(one), Box::new(Pred::Cmp { col: 0, op: op2, lit: Value::U(y) }))
                            }
                        };
                        let (a, b) = key_span(&p, 0, &cols[0], n).expect("a key range");
                        let mut mask = Vec::new();
                        eval(&p, &cols, n, &mut mask, &mut pool);
                        let want: Vec<bool> = (0..n).map(|j| (a..b).contains(&j)).collect();
                        assert_eq!(mask[..n], want[..], "{p:?} over {n} rows");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 4 * 14 * 5 * 3);
        // Not on the first key column, `!=`, a mismatched literal, an OR: row by row.
        for p in [
            Pred::Cmp { col: 1, op: CmpOp::Gt, lit: Value::I(0) },
            Pred::Cmp { col: 0, op: CmpOp::Ne, lit: Value::U(5) },
            Pred::Cmp { col: 0, op: CmpOp::Gt, lit: Value::I(-1) },
            Pred::Or(
                Box::new(Pred::Cmp { col: 0, op: CmpOp::Lt, lit: Value::U(3) }),
                Box::new(Pred::Cmp { col: 0, op: CmpOp::Gt, lit: Value::U(8) }),
            ),
        ] {
            assert_eq!(key_span(&p, 0, &cols[0], 10), None, "{p:?}");
        }
    }

    #[test]
    fn float_comparisons_follow_total_order() {
        let vals = [f64::NEG_INFINITY, -1.5, -0.0, 0.0, 0.5, 1.0, f64::INFINITY, f64::NAN];
        let cols = [std::sync::Arc::new(ColumnData::F64(vals.to_vec()))];
        let mut pool = MaskPool::default();
        for lit in [-1.5, -0.0, 0.0, 0.5, f64::NAN] {
            for op in [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge] {
                let p = Pred::Cmp { col: 0, op, lit: Value::F(lit) };
                let mut out = Vec::new();
                eval(&p, &cols, vals.len(), &mut out, &mut pool);
                let want: Vec<bool> = vals.iter().map(|v| op.test(v.total_cmp(&lit))).collect();
                assert_eq!(out, want, "{op:?} {lit}");
            }
        }
    }
}
