//! `ORDER BY … [LIMIT k]` of a plain SELECT: a bounded heap of the best rows.

use super::query::Select;
use crate::types::Value;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
pub(super) struct TopK {
    order: Vec<(usize, bool)>,
    k: Option<usize>,
    heap: BinaryHeap<Ranked>,
    seq: u64,
    /// Heap bytes the held rows own (their keys and values).
    owned: usize,
}

impl Ranked {
    fn heap_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<SortKey>()
            + self
                .keys
                .iter()
                .map(|k| match k {
                    SortKey::Asc(v) | SortKey::Desc(Reverse(v)) => v.heap_bytes(),
                })
                .sum::<usize>()
            + super::memory::row_bytes(&self.row)
    }
}

impl TopK {
    pub(super) fn new(q: &Select) -> TopK {
        TopK { order: q.order_by.clone(), k: q.limit.map(|l| l as usize), heap: BinaryHeap::new(), seq: 0, owned: 0 }
    }

    pub(super) fn push(&mut self, row: Vec<Value>) {
        let keys = self
            .order
            .iter()
            .map(|&(i, desc)| if desc { SortKey::Desc(Reverse(row[i].clone())) } else { SortKey::Asc(row[i].clone()) })
            .collect();
        self.seq += 1;
        if self.k == Some(0) {
            return;
        }
        let ranked = Ranked { keys, seq: self.seq, row };
        self.owned += ranked.heap_bytes();
        self.heap.push(ranked);
        if self.k.is_some_and(|k| self.heap.len() > k) {
            if let Some(out) = self.heap.pop() {
                self.owned -= out.heap_bytes();
            }
        }
    }

    /// Heap bytes held: the heap's slots and what its rows own.
    pub(super) fn heap_bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Ranked>() + self.owned
    }

    /// Rows held (at most k).
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(super) fn finish(self) -> Vec<Vec<Value>> {
        self.heap.into_sorted_vec().into_iter().map(|r| r.row).collect()
    }
}
