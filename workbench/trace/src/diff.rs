//! Per-site changes between two traces of the same cell (`trace diff`).

use super::site::{merge, Site};
use super::Trace;
use std::collections::{BTreeMap, HashSet};

/// One row of [`diff`]: a normalised stack and its totals in A and B.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub key: String,
    pub site: Site,
    pub a: (u64, u64),
    pub b: (u64, u64),
}

impl Delta {
    pub fn bytes(&self) -> i128 {
        self.b.0 as i128 - self.a.0 as i128
    }

    pub fn blocks(&self) -> i128 {
        self.b.1 as i128 - self.a.1 as i128
    }
}

/// Per-site changes from `a` to `b` (bytes, blocks), sites matched by
/// normalised stack, largest absolute byte change first. Identical traces
/// give an empty list.
pub fn diff(a: &Trace, b: &Trace) -> Vec<Delta> {
    let index = |t: &Trace| -> BTreeMap<String, Site> { merge(&t.sites).into_iter().map(|s| (s.key(), s)).collect() };
    let (ia, ib) = (index(a), index(b));
    let keys: HashSet<&String> = ia.keys().chain(ib.keys()).collect();
    let mut out: Vec<Delta> = keys
        .into_iter()
        .filter_map(|k| {
            let (sa, sb) = (ia.get(k), ib.get(k));
            let ta = sa.map_or((0, 0), |s| (s.bytes, s.blocks));
            let tb = sb.map_or((0, 0), |s| (s.bytes, s.blocks));
            (ta != tb).then(|| Delta { key: k.clone(), site: sb.or(sa).cloned().unwrap_or_default(), a: ta, b: tb })
        })
        .collect();
    out.sort_by(|x, y| {
        y.bytes()
            .abs()
            .cmp(&x.bytes().abs())
            .then_with(|| y.blocks().abs().cmp(&x.blocks().abs()))
            .then_with(|| x.key.cmp(&y.key))
    });
    out
}
