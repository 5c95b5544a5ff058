//! WHERE: granule pruning from the sparse index, and the predicate evaluated
//! over a granule into a row mask.

use crate::part::{Part, Schema};
use crate::sql::{CmpOp, Pred};
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
}

/// Evaluates `p` on `n` rows into `out`.
pub(super) fn eval(p: &Pred, cols: &[ColumnData], n: usize, out: &mut Vec<bool>, pool: &mut MaskPool) {
    out.clear();
    match p {
        Pred::Cmp { col, op, lit } => match &cols[*col] {
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
        Pred::In { col, list, negated } => match &cols[*col] {
            ColumnData::Dict { keys, dict } => {
                let mut t = pool.take();
                t.clear();
                t.extend(dict.iter().map(|s| list.iter().any(|l| s.as_str() == lit_str(l)) != *negated));
                out.extend(keys.iter().map(|&k| t[k as usize]));
                pool.give(t);
            }
            c => out.extend((0..n).map(|i| list.iter().any(|l| cmp_lit(c, i, l) == Ordering::Equal) != *negated)),
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::Pred;

    #[test]
    fn float_comparisons_follow_total_order() {
        let vals = [f64::NEG_INFINITY, -1.5, -0.0, 0.0, 0.5, 1.0, f64::INFINITY, f64::NAN];
        let cols = [ColumnData::F64(vals.to_vec())];
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
