//! Query execution, vectorized over granules: a [`Plan`] derived once from
//! the parsed SELECT, run by three operators — the scan (pruning, reading,
//! filtering), the aggregation, and the top-k — under per-query [`Limits`].
//!
//! For each part of a snapshot the primary index prunes granules (binary
//! search on the first key column, then an exclusion test per granule on
//! the key columns whose prefix is constant inside it); each surviving
//! granule's filter columns are read and evaluated into a mask, and only if
//! some row passes are the other columns read. A comparison on an integer
//! first sort key (or a conjunction of them) needs no mask: the key is
//! non-decreasing down a part, so each granule's passing rows are one run,
//! found by binary search, and min/max of the key over it are its ends.
//! Scans of at most `SMALL_SCAN` (8) granules read decoded granules through
//! [`crate::storage::cache`] instead of reading and decoding blocks.
//!
//! Aggregating queries split the surviving granules into a fixed number of
//! contiguous partitions (one per core, fewer for small scans), each
//! aggregated into its own partial state and merged in partition order;
//! the partitions run on as many threads as the process-wide CPU budget
//! ([`cpu`]) grants at that moment. Since the partitioning does not depend
//! on the grant, a query's answer — float sums included — is the same
//! whether it ran on one thread or several.
//!
//! Memory: one granule of the columns read per thread (plus the shared,
//! bounded granule cache for small scans), the group states
//! (one slot per group and aggregate), and for `quantile` at most 256 KiB
//! per group ([`quantile`]: exact, by radix selection over extra passes);
//! a plain `ORDER BY … LIMIT k` keeps a heap of k rows. All of it is
//! charged to the query's memory budget ([`memory`], [`Limits::memory`]),
//! which stops the query when the working set would pass it.
//!
//! # Layout
//! - this file: the [`Plan`] (what to read, which operator runs), the
//!   partitioning of a scan over threads, and the per-query [`Limits`].
//! - [`query`]: the checked SELECT a plan is made from.
//! - [`filter`]: pruning and predicate evaluation into masks.
//! - [`scan`]: reading one granule, filter first.
//! - [`group`]: group keys and dense group ids.
//! - [`agg`]: the columnar aggregate states, partials and their merge.
//! - [`topk`]: `ORDER BY … LIMIT k` of a plain SELECT.
//! - [`quantile`]: the exact quantile's radix passes.
//! - [`cpu`]: the process-wide CPU budget.
//! - [`memory`]: memory budgets (a query's, the server's) and what each operator charges.

mod agg;
pub mod cpu;
mod filter;
mod group;
pub mod memory;
mod quantile;
pub mod query;
mod scan;
mod topk;

use crate::error::{Error, Result};
use crate::storage::part::{Part, Schema, Scratch};
use crate::storage::table::Table;
use crate::types::{ColumnType, Value};
use agg::Partial;
use filter::key_span;
pub use filter::prune;
use memory::{row_bytes, Account, Tracker};
use query::{Agg, Item, Pred, Select};
use scan::{project, Reader};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use topk::TopK;

#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    /// Shared with the plan (a prepared statement's answers do not copy them).
    pub columns: Arc<[String]>,
    /// Each output column's type (aggregates typed as ClickHouse types them).
    pub types: Arc<[ColumnType]>,
    pub rows: Vec<Vec<Value>>,
}

/// What a query did, for benchmarks and `EXPLAIN`-like output.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub granules_total: usize,
    pub granules_read: usize,
    pub rows_scanned: u64,
    /// Scans over the data (more than one when an exact quantile needed
    /// further passes).
    pub passes: usize,
    /// Threads the query ran on.
    pub threads: usize,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.granules_read += o.granules_read;
        self.rows_scanned += o.rows_scanned;
    }
}

/// Bounds on one query's work, checked as it runs (the server's per-query
/// limits; the CLI runs unbounded).
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Give up with [`Error::Deadline`] once this instant has passed
    /// (checked once per granule, so it overshoots by one granule at most).
    pub deadline: Option<Instant>,
    /// The deadline's length, for the error message.
    pub deadline_ms: u64,
    /// Largest number of result rows: a bound on the answer, not on the
    /// groups or rows a query holds on the way (those are [`Limits::memory`]'s).
    pub max_rows: Option<usize>,
    /// Most threads the query may use (0: as many as there are cores),
    /// further bounded by the process's CPU budget ([`cpu::lease`]).
    pub threads: usize,
    /// The query's memory budget (its parent the server's), charged with
    /// its working set as it grows ([`memory`]); none: unbounded.
    pub memory: Option<Arc<Tracker>>,
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
    fn account(&self) -> Account<'_> {
        Account::new(self.memory.as_deref())
    }
}

/// Runs a planned SELECT against a table, without limits.
pub fn run(table: &Table, q: &Select) -> Result<(QueryResult, Stats)> {
    Plan::new(&table.schema, q).execute(&table.snapshot(), &Limits::default())
}

/// Scans smaller than this many granules run as one partition.
const MIN_SPLIT: usize = 4;

/// SMALL_SCAN = 8 granules (65,536 rows): scans this small read decoded
/// granules through [`crate::storage::cache`]; larger ones decode into their own
/// buffers and leave the cache to the short queries it is for.
const SMALL_SCAN: usize = 8;

/// A scan's granules, as (part, granule) in part order.
type Unit = (usize, usize);

/// What a SELECT reads and returns, derived from it once: the columns the
/// filter needs, the columns read only for rows that pass, the aggregates,
/// and the output's names and types. A prepared statement keeps its shape
/// ([`crate::sql::ParseCache`]), so a call binds literals and runs.
#[derive(Debug, Clone)]
pub struct Shape {
    filter_cols: Vec<usize>,
    other_cols: Vec<usize>,
    aggs: Vec<Agg>,
    columns: Arc<[String]>,
    types: Arc<[ColumnType]>,
    spare: agg::Spare,
    /// Every item is `min` or `max` of the integer first sort key, with no
    /// GROUP BY, ORDER BY or LIMIT 0: see [`Plan::key_extremes`].
    extremes: bool,
}

impl Shape {
    pub fn new(schema: &Schema, q: &Select) -> Shape {
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
        let shown = q.items.len() - q.hidden;
        let ty = |c: usize| schema.columns[c].ty;
        let types = q.items[..shown]
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
            .collect();
        let key0 = schema.order_by.first().copied();
        let extremes = q.aggregate
            && q.group_by.is_empty()
            && q.order_by.is_empty()
            && q.hidden == 0
            && q.limit != Some(0)
            && !q.items.is_empty()
            && key0.is_some_and(|k| ty(k).is_unsigned() || ty(k).is_signed())
            && q.items.iter().all(|it| matches!(it, Item::Agg(Agg::Min(c) | Agg::Max(c)) if Some(*c) == key0));
        let columns = q.names[..shown].into();
        Shape { filter_cols, other_cols, aggs, columns, types, spare: agg::Spare::default(), extremes }
    }
}

/// A SELECT ready to run: the query, its [`Shape`], and its filter (the
/// query's own, or the same predicate with placeholders bound anew).
pub struct Plan<'a> {
    q: &'a Select,
    filter: Option<&'a Pred>,
    schema: &'a Schema,
    shape: Cow<'a, Shape>,
}

impl<'a> Plan<'a> {
    pub fn new(schema: &'a Schema, q: &'a Select) -> Plan<'a> {
        Plan { q, filter: q.filter.as_ref(), schema, shape: Cow::Owned(Shape::new(schema, q)) }
    }

    /// A plan from a kept `shape` of `q`, with `filter` (`q.filter` with
    /// other literals) in its place.
    pub fn prepared(schema: &'a Schema, q: &'a Select, shape: &'a Shape, filter: Option<&'a Pred>) -> Plan<'a> {
        Plan { q, filter, schema, shape: Cow::Borrowed(shape) }
    }

    /// Runs the plan over a snapshot of parts.
    pub fn execute(&self, parts: &[Arc<Part>], limits: &Limits) -> Result<(QueryResult, Stats)> {
        self.execute_reusing(parts, limits, Vec::new())
    }

    /// [`Plan::execute`], answering into `spare`'s allocations where it can
    /// (a result of one row: see [`crate::BoundSelect::recycle`]).
    pub(crate) fn execute_reusing(
        &self,
        parts: &[Arc<Part>],
        limits: &Limits,
        spare: Vec<Vec<Value>>,
    ) -> Result<(QueryResult, Stats)> {
        let q = self.q;
        let mut stats = Stats {
            granules_total: parts.iter().map(|p| p.granules()).sum(),
            passes: 1,
            threads: 1,
            ..Stats::default()
        };
        if self.shape.extremes {
            let mut read = Stats::default();
            if let Some(rows) = self.key_extremes(parts, limits, &mut read, spare)? {
                stats.add(&read);
                let (columns, types) = (self.shape.columns.clone(), self.shape.types.clone());
                return Ok((QueryResult { columns, types, rows }, stats));
            }
        }
        // PERF: a small scan's granules are listed on the stack; a larger
        // one spills them (and those after) into a vector.
        let (mut small, mut n, mut spilled) = ([(0, 0); SMALL_SCAN], 0, Vec::new());
        for (i, p) in parts.iter().enumerate() {
            for g in prune(self.filter, self.schema, p) {
                if n < SMALL_SCAN && spilled.is_empty() {
                    small[n] = (i, g);
                    n += 1;
                } else {
                    if spilled.is_empty() {
                        spilled.extend_from_slice(&small[..n]);
                    }
                    spilled.push((i, g));
                }
            }
        }
        let work: &[Unit] = if spilled.is_empty() { &small[..n] } else { &spilled };
        let cached = work.len() <= SMALL_SCAN;
        let mut rows = if q.aggregate {
            self.aggregate(parts, work, cached, limits, &mut stats)?
        } else {
            let mut r = Reader::new(self, &self.shape.other_cols, cached);
            // The rows held (or the top-k heap), and the granule read.
            let (mut held, mut reading) = (limits.account(), limits.account());
            let rows = if q.order_by.is_empty() {
                // A plain LIMIT stops the scan as soon as it has its rows.
                let limit = q.limit.map_or(usize::MAX, |l| l as usize);
                let (mut rows, mut row_heap) = (Vec::new(), 0);
                for &(p, g) in work {
                    if rows.len() >= limit {
                        break;
                    }
                    limits.check_time()?;
                    if r.read(&parts[p], g)? {
                        let (take, from) = (limit - rows.len(), rows.len());
                        rows.extend(r.rows().indices().take(take).map(|i| project(q, &r.cols, i)));
                        limits.check_rows(rows.len())?;
                        if held.tracked() {
                            reading.set(r.heap_bytes())?;
                            row_heap += rows[from..].iter().map(row_bytes).sum::<usize>();
                            held.set(row_heap + memory::vec_bytes(&rows))?;
                        }
                    }
                }
                rows
            } else {
                let mut top = TopK::new(q);
                for &(p, g) in work {
                    limits.check_time()?;
                    if r.read(&parts[p], g)? {
                        if reading.tracked() {
                            reading.set(r.heap_bytes())?;
                        }
                        r.rows().indices().for_each(|i| top.push(project(q, &r.cols, i)));
                        limits.check_rows(top.len())?;
                        held.set(top.heap_bytes())?;
                    }
                }
                // The sorted rows are built beside the heap's.
                held.add(top.heap_bytes())?;
                top.finish()
            };
            stats.add(&r.stats);
            rows
        };
        if q.hidden > 0 {
            let keep = q.items.len() - q.hidden;
            rows.iter_mut().for_each(|r| r.truncate(keep));
        }
        let (columns, types) = (self.shape.columns.clone(), self.shape.types.clone());
        Ok((QueryResult { columns, types, rows }, stats))
    }

    /// `min`/`max` of an integer first sort key, the only items, under a
    /// filter on that key alone (a dependent chain's step, a seek to the
    /// next key): down a part the key is non-decreasing, so its minimum is
    /// the first passing row of the first granule with one, and its maximum
    /// the last of the last. Each part reads a granule or two from either
    /// end of its key range, where the scan reads every granule in it.
    /// PERF: a chain step through the scan and aggregation was about 2.2k
    /// instructions of 3.2k in `Db::select` (callgrind, `chain_step`).
    /// `None` sends the query to the scan: the filter is of another shape
    /// (or its literal of another type), or SMALL_SCAN granules from one end
    /// passed no row (a long run of equal keys at the bound).
    fn key_extremes(
        &self,
        parts: &[Arc<Part>],
        limits: &Limits,
        stats: &mut Stats,
        spare: Vec<Vec<Value>>,
    ) -> Result<Option<Vec<Vec<Value>>>> {
        let key0 = self.schema.order_by[0];
        let is_max = |it: &Item| matches!(it, Item::Agg(Agg::Max(_)));
        // Which ends the items ask for: [min, max].
        let wanted = [self.q.items.iter().any(|it| !is_max(it)), self.q.items.iter().any(is_max)];
        let mut scratch = Scratch::default();
        // [min, max] so far over the parts.
        let mut found: [Option<Value>; 2] = [None, None];
        for part in parts {
            let granules = filter::key_granules(self.filter, self.schema, part);
            for max in [false, true] {
                if !wanted[max as usize] {
                    continue;
                }
                let mut walk = granules.clone();
                let mut read = 0;
                while let Some(g) = if max { walk.next_back() } else { walk.next() } {
                    if read == SMALL_SCAN {
                        return Ok(None);
                    }
                    read += 1;
                    limits.check_time()?;
                    let col = part.read_cached(key0, g, &mut scratch)?;
                    let n = part.granule_rows(g);
                    stats.granules_read += 1;
                    stats.rows_scanned += n as u64;
                    let (a, b) = match self.filter {
                        None => (0, n),
                        Some(p) => match key_span(p, key0, &col, n) {
                            Some(run) => run,
                            None => return Ok(None),
                        },
                    };
                    if a < b {
                        let v = col.value(if max { b - 1 } else { a });
                        let best = &mut found[max as usize];
                        if best.as_ref().is_none_or(|x| if max { v > *x } else { v < *x }) {
                            *best = Some(v);
                        }
                        break;
                    }
                }
            }
        }
        let value = |it: &Item| found[is_max(it) as usize].clone().unwrap_or(Value::Null);
        let mut rows = spare;
        rows.truncate(1);
        match rows.first_mut() {
            Some(row) => {
                row.clear();
                row.extend(self.q.items.iter().map(value));
            }
            None => rows.push(self.q.items.iter().map(value).collect()),
        }
        Ok(Some(rows))
    }

    /// GROUP BY / aggregates: partitions aggregated in parallel and merged,
    /// then as many further passes as exact quantiles need.
    fn aggregate(
        &self,
        parts: &[Arc<Part>],
        work: &[Unit],
        cached: bool,
        limits: &Limits,
        stats: &mut Stats,
    ) -> Result<Vec<Vec<Value>>> {
        let (q, schema, aggs) = (self.q, self.schema, &self.shape.aggs[..]);
        let many: Vec<&[Unit]>;
        let chunks = match partitions(work.len()) {
            1 => std::slice::from_ref(&work),
            n => {
                many = work.chunks(work.len().div_ceil(n)).collect();
                &many[..]
            }
        };
        let want = if limits.threads == 0 { cpu::cores() } else { limits.threads };
        let lease = cpu::lease(want.min(chunks.len()));
        stats.threads = lease.threads();
        // Each partition's account holds its state, the granule it reads,
        // and the growth the granule can cause, charged before it is folded in.
        let scan = |chunk: &[Unit], stop: &AtomicBool, p: &mut Partial, acct: &mut Account| -> Result<Stats> {
            let mut r = Reader::new(self, &self.shape.other_cols, cached);
            for &(pi, g) in chunk {
                if stop.load(AtomicOrdering::Relaxed) {
                    break;
                }
                limits.check_time()?;
                if r.read(&parts[pi], g)? {
                    if acct.tracked() {
                        acct.set(p.heap_bytes() + p.headroom(r.rows().len()) + r.heap_bytes())?;
                    }
                    p.push(q, aggs, &r.cols, r.rows(), r.sorted);
                }
            }
            Ok(r.stats)
        };
        let mut acct = limits.account();
        let mut total = if let [only] = chunks {
            // PERF: one partition aggregates into the total in place; a
            // partial state is a few hundred bytes, and a short query moved
            // it through a result and an iterator several times.
            let mut total = self.shape.spare.take(q, aggs, schema);
            stats.add(&scan(only, &AtomicBool::new(false), &mut total, &mut acct)?);
            total
        } else {
            let mut partials = in_parallel(chunks, lease.threads(), |chunk, stop| {
                let mut p = Partial::new(q, aggs, schema);
                let mut acct = limits.account();
                scan(chunk, stop, &mut p, &mut acct).map(|s| (p, s, acct))
            })?
            .into_iter();
            let (mut total, s, first) = partials.next().expect("one chunk at least");
            acct = first;
            stats.add(&s);
            for (p, s, held) in partials {
                acct.set(total.heap_bytes() + total.merge_headroom(&p))?;
                total.merge(q, aggs, schema, p);
                drop(held);
                stats.add(&s);
            }
            Box::new(total)
        };
        acct.set(total.heap_bytes())?;
        let mut pending = total.resolve_quantiles(aggs);
        while !pending.is_empty() {
            stats.passes += 1;
            // Every worker keeps, for each group still pending, a histogram
            // or the values its prefix matches.
            let mut pass = limits.account();
            pass.set(chunks.len() * pending.iter().map(agg::Pending::pass_bytes).sum::<usize>())?;
            // Only the group keys and the quantiles' columns are needed now.
            let mut cols: Vec<usize> = q.group_by.iter().copied().chain(pending.iter().map(|p| p.col)).collect();
            cols.retain(|c| !self.shape.filter_cols.contains(c));
            cols.dedup();
            let kept = in_parallel(chunks, lease.threads(), |chunk, stop| {
                let mut r = Reader::new(self, &cols, cached);
                let mut look = total.lookup_scratch();
                let mut kept: Vec<agg::Kept> = pending.iter().map(|p| p.start()).collect();
                for &(pi, g) in chunk {
                    if stop.load(AtomicOrdering::Relaxed) {
                        break;
                    }
                    limits.check_time()?;
                    if r.read(&parts[pi], g)? {
                        if let Some(group) = total.lookup(q, &r.cols, r.rows(), &mut look) {
                            for (p, k) in pending.iter().zip(&mut kept) {
                                p.scan(k, &r.cols[p.col], r.rows(), group);
                            }
                        }
                    }
                }
                Ok(kept)
            })?;
            let mut kept = kept.into_iter();
            let mut all = kept.next().expect("one chunk at least");
            for k in kept {
                all.iter_mut().zip(k).for_each(|(a, b)| a.merge(b));
            }
            pending = total.apply(pending, all);
        }
        // The sort keys and ids over every group, and the rows returned.
        acct.add(total.rows_bytes(q))?;
        let rows = total.rows(q, schema);
        limits.check_rows(rows.len())?;
        self.shape.spare.give(total);
        Ok(rows)
    }
}

/// How many contiguous partitions a scan of `granules` is cut into: a
/// fixed number (the cores), not the threads granted, so that answers do
/// not depend on load.
fn partitions(granules: usize) -> usize {
    if granules >= MIN_SPLIT {
        cpu::cores().min(granules)
    } else {
        1
    }
}

/// What a caller carries onto the threads a query spawns: `capture` runs on
/// the query's thread before it spawns, `enter` with that value on each
/// spawned thread before its share of the work. The server sets it to its
/// per-call allocation tag (`probe::calls`), so that a query's allocations
/// on its helper threads count for the call that asked; the engine has no
/// such context of its own and does not depend on the probe (which would
/// compile it once per allocator build).
#[derive(Clone, Copy)]
pub struct ThreadContext {
    pub capture: fn() -> u64,
    pub enter: fn(u64),
}

static THREAD_CONTEXT: std::sync::OnceLock<ThreadContext> = std::sync::OnceLock::new();

/// Sets the [`ThreadContext`] once per process; `false` if one was set.
pub fn set_thread_context(c: ThreadContext) -> bool {
    THREAD_CONTEXT.set(c).is_ok()
}

/// Runs `f` on every chunk, on up to `threads` threads; results in chunk
/// order, or the first chunk's error. A failing chunk stops the others.
fn in_parallel<T: Send>(
    chunks: &[&[Unit]],
    threads: usize,
    f: impl Fn(&[Unit], &AtomicBool) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let stop = AtomicBool::new(false);
    if let [only] = chunks {
        // PERF: a small scan is one chunk, run here without the slots.
        return f(only, &stop).map(|t| vec![t]);
    }
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..chunks.len()).map(|_| None).collect());
    let work = || loop {
        let i = next.fetch_add(1, AtomicOrdering::Relaxed);
        if i >= chunks.len() || stop.load(AtomicOrdering::Relaxed) {
            break;
        }
        let r = f(chunks[i], &stop);
        if r.is_err() {
            stop.store(true, AtomicOrdering::Relaxed);
        }
        slots.lock().expect("no panics while held")[i] = Some(r);
    };
    let threads = threads.min(chunks.len());
    if threads <= 1 {
        work();
    } else {
        let context = THREAD_CONTEXT.get().map(|c| (c.enter, (c.capture)()));
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(move || {
                    if let Some((enter, value)) = context {
                        enter(value);
                    }
                    work()
                });
            }
            work();
        });
    }
    let mut out = Vec::with_capacity(chunks.len());
    let mut first_err = None;
    for slot in slots.into_inner().expect("no panics while held") {
        match slot {
            Some(Ok(t)) => out.push(t),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
