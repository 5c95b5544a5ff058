//! The exact quantile in bounded memory: radix selection over the values'
//! order-preserving bit patterns.
//!
//! A group keeps its values while it has few ([`SPILL`]); past that it keeps
//! a histogram of the top 16 bits instead (256 KiB, the size of `SPILL`
//! values), whatever its row count. Once the scan is over, the bucket that
//! holds rank ⌊p·n⌋ is known; another pass over the same rows keeps only
//! that bucket's values — or, if the bucket is itself large, a histogram of
//! the next 16 bits, and so on (at most four passes for 64 bits). The answer
//! is the value an exact sort would give, `quantileExact` semantics, with
//! memory per group bounded by 256 KiB instead of 8 bytes per row.

/// Values a group keeps before it switches to a histogram (same bytes).
pub(super) const SPILL: usize = 32_768;
const BITS: u32 = 16;
const BUCKETS: usize = 1 << BITS;

/// The f64's bits, mapped so that integer order is `f64::total_cmp` order.
// PERF: branch-free (a negative value flips every bit, a positive one its
// sign bit), so the histogram loops vectorise their key computation.
#[inline(always)]
pub(super) fn order_key(x: f64) -> u64 {
    let b = x.to_bits();
    b ^ (((b as i64 >> 63) as u64) | 1 << 63)
}

fn from_order_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

/// The rank an exact quantile picks among `n` sorted values.
pub(super) fn rank(p: f64, n: u64) -> u64 {
    if p >= 1.0 {
        n - 1
    } else {
        ((p * n as f64).floor() as u64).min(n - 1)
    }
}

/// One group's state during the scan.
#[derive(Clone, Default)]
pub(super) struct Quant {
    pub n: u64,
    pub values: Vec<f64>,
    /// Counts by the top [`BITS`] bits of the order key, once spilled.
    pub hist: Option<Box<[u32]>>,
}

impl Quant {
    /// Heap bytes held: the values kept, or the histogram.
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        Quant::bytes_of(self.values.capacity(), self.hist.is_some())
    }

    /// [`Quant::heap_bytes`] of a state with room for `cap` values, or spilled.
    #[inline]
    pub fn bytes_of(cap: usize, spilled: bool) -> usize {
        cap * 8 + if spilled { BUCKETS * 4 } else { 0 }
    }

    /// Pushes a run of one group's values.
    // PERF: a granule inside one key's run (the paper's table is sorted by
    // the group key) is one call, not a call a value: the histogram loop
    // then holds nothing but the key and the increment. Quant::push called
    // per value was 15 % of the group-by query's CPU (perf, 10M rows).
    pub fn push_slice(&mut self, xs: &[f64]) {
        match &mut self.hist {
            Some(h) => {
                self.n += xs.len() as u64;
                for &x in xs {
                    h[(order_key(x) >> (64 - BITS)) as usize] += 1;
                }
            }
            None => xs.iter().for_each(|&x| self.push(x)),
        }
    }

    #[inline]
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        match &mut self.hist {
            Some(h) => h[(order_key(x) >> (64 - BITS)) as usize] += 1,
            None => {
                self.values.push(x);
                if self.values.len() > SPILL {
                    self.spill()
                }
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn spill(&mut self) {
        let h = self.hist.get_or_insert_with(|| vec![0u32; BUCKETS].into_boxed_slice());
        for x in self.values.drain(..) {
            h[(order_key(x) >> (64 - BITS)) as usize] += 1;
        }
        self.values = Vec::new();
    }

    pub fn merge(&mut self, mut other: Quant) {
        if other.hist.is_some() && self.hist.is_none() {
            std::mem::swap(self, &mut other);
        }
        if let (Some(a), Some(b)) = (&mut self.hist, other.hist) {
            a.iter_mut().zip(b.iter()).for_each(|(x, y)| *x += y);
        }
        self.n += other.n - other.values.len() as u64;
        for x in other.values {
            self.push(x);
        }
    }

    /// The answer, if no further pass is needed; else where the next pass
    /// must look.
    pub fn resolve(mut self, p: f64) -> Resolved {
        if self.n == 0 {
            return Resolved::Empty;
        }
        let k = rank(p, self.n);
        match &self.hist {
            None => Resolved::Value(select(&mut self.values, k)),
            Some(h) => Refine::narrow(h, 0, 0, k),
        }
    }
}

fn select(v: &mut [f64], k: u64) -> f64 {
    *v.select_nth_unstable_by(k as usize, f64::total_cmp).1
}

pub(super) enum Resolved {
    Empty,
    Value(f64),
    More(Refine),
}

/// A pass in progress: the values whose top `bits` bits equal `prefix` hold
/// the answer at `rank` among them.
pub(super) struct Refine {
    pub bits: u32,
    pub prefix: u64,
    pub rank: u64,
    /// How many values the prefix matches (known from the last histogram).
    pub count: u64,
}

impl Refine {
    /// From a histogram of the `BITS` bits after `bits` fixed ones: the
    /// bucket holding rank `k`.
    fn narrow(h: &[u32], bits: u32, prefix: u64, mut k: u64) -> Resolved {
        for (b, &c) in h.iter().enumerate() {
            if k < c as u64 {
                let bits = bits + BITS;
                let prefix = (prefix << BITS) | b as u64;
                if bits == 64 {
                    // Every value in the bucket has these 64 bits: it is the answer.
                    return Resolved::Value(from_order_key(prefix));
                }
                return Resolved::More(Refine { bits, prefix, rank: k, count: c as u64 });
            }
            k -= c as u64;
        }
        unreachable!("rank below the histogram's total")
    }

    /// Whether the next pass keeps the values themselves (few enough) or
    /// a histogram of the next bits.
    pub fn collects(&self) -> bool {
        self.count as usize <= SPILL
    }

    pub fn matches(&self, key: u64) -> bool {
        key >> (64 - self.bits) == self.prefix
    }

    pub fn bucket(&self, key: u64) -> usize {
        ((key >> (64 - self.bits - BITS)) as usize) & (BUCKETS - 1)
    }

    /// Heap bytes one worker's state for this group holds in the next pass:
    /// a histogram, or at most the values the prefix matches.
    pub fn pass_bytes(&self) -> usize {
        if self.collects() {
            self.count as usize * 8
        } else {
            BUCKETS * 4
        }
    }

    pub fn empty_hist() -> Box<[u32]> {
        vec![0u32; BUCKETS].into_boxed_slice()
    }

    /// After the pass: the answer from the kept values, or the next step.
    pub fn finish(self, mut values: Vec<f64>, hist: Option<Box<[u32]>>) -> Resolved {
        match hist {
            None => Resolved::Value(select(&mut values, self.rank)),
            Some(h) => Refine::narrow(&h, self.bits, self.prefix, self.rank),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the passes over `vals` as the executor does, in memory.
    fn radix_quantile(vals: &[f64], p: f64) -> Option<f64> {
        let mut q = Quant::default();
        vals.iter().for_each(|&x| q.push(x));
        let mut step = q.resolve(p);
        loop {
            match step {
                Resolved::Empty => return None,
                Resolved::Value(v) => return Some(v),
                Resolved::More(r) => {
                    let (mut kept, mut hist) = (Vec::new(), (!r.collects()).then(Refine::empty_hist));
                    for &x in vals {
                        let k = order_key(x);
                        if r.matches(k) {
                            match &mut hist {
                                Some(h) => h[r.bucket(k)] += 1,
                                None => kept.push(x),
                            }
                        }
                    }
                    step = r.finish(kept, hist);
                }
            }
        }
    }

    fn sorted_pick(vals: &[f64], p: f64) -> f64 {
        let mut v = vals.to_vec();
        v.sort_by(f64::total_cmp);
        v[rank(p, v.len() as u64) as usize]
    }

    #[test]
    fn order_key_is_total_order_and_invertible() {
        let xs = [f64::NEG_INFINITY, -2.5, -0.0, 0.0, 1e-300, 3.0, f64::INFINITY];
        for w in xs.windows(2) {
            assert!(order_key(w[0]) < order_key(w[1]), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(from_order_key(order_key(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn radix_passes_pick_what_a_sort_picks() {
        let mut s = 7u64;
        let mut rnd = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        // Spread values, one spilled group; values sharing their top 32
        // bits (a histogram, then another); a constant (64 bits in one bucket).
        let spread: Vec<f64> = (0..200_000).map(|_| (rnd() >> 11) as f64 / 1e6 - 4e9).collect();
        let close: Vec<f64> = (0..100_000).map(|_| 1.0 + (rnd() % 1_000_000) as f64 * f64::EPSILON).collect();
        let same = vec![2.5; 70_000];
        let few: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        for vals in [&spread, &close, &same, &few] {
            for p in [0.0, 0.1, 0.5, 0.9, 0.999, 1.0] {
                assert_eq!(radix_quantile(vals, p).unwrap().to_bits(), sorted_pick(vals, p).to_bits(), "p {p}");
            }
        }
        assert_eq!(radix_quantile(&[], 0.5), None);
    }

    #[test]
    fn merged_states_count_every_value() {
        let (mut a, mut b) = (Quant::default(), Quant::default());
        (0..40_000).for_each(|i| a.push(i as f64));
        (0..10).for_each(|i| b.push(-(i as f64)));
        a.merge(b);
        assert_eq!(a.n, 40_010);
        let mut c = Quant::default();
        (0..10).for_each(|i| c.push(i as f64));
        let mut d = Quant::default();
        (0..40_000).for_each(|i| d.push(i as f64));
        c.merge(d);
        assert_eq!(c.n, 40_010);
        assert_eq!(c.hist.as_ref().unwrap().iter().map(|&x| x as u64).sum::<u64>(), 40_010);
    }
}
