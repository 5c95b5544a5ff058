//! Tables: a schema, a set of parts, inserts and merges.
//!
//! A table lives in `<data>/<name>/` with `table.json` (the schema) and its
//! parts. Inserts sort the batch by the ORDER BY key and write one part.
//! Merges combine consecutive parts (by block number) into one, streaming:
//! a k-way merge over one granule per input part, so its memory is bounded
//! by the number of inputs, not their size. The merge result is renamed into
//! place before the inputs are deleted; on open, parts covered by another
//! part's block range (inputs of a merge that committed) and `tmp_`
//! directories (writes that did not) are removed.
//!
//! # Crash consistency
//! An insert is acknowledged only once its part is renamed into place and
//! the table directory fsynced, and nothing later removes it but a merge
//! that read it. Two rules keep that true:
//! - A merge never spans a block number an insert has taken but not yet
//!   made visible (the insert's block is *in flight* from when it is taken
//!   until its part is published or its write fails): since a merge result
//!   covers its whole block range, a part committed inside that range
//!   afterwards would look like one of its inputs on the next open and be
//!   deleted with its rows.
//! - On open a covered part is deleted only if one of the covering part's
//!   recorded sources ([`PartMeta::sources`]) covers it too, so a part that
//!   no merge read is kept whatever its name says.
//!
//! Every step of an insert, a merge and an open has a
//! [`failpoint`](crate::storage::failpoint) where the crash tests kill the
//! process.

use crate::error::{Error, IoPath, Result};
use crate::storage::failpoint::{self, Point};
use crate::storage::part::{Cursor, Part, PartMeta, PartWriter, Schema, GRANULE};
use crate::types::{Batch, ColumnData, ColumnType};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

/// Most parts one merge combines.
pub const MAX_MERGE: usize = 10;

pub struct Table {
    pub schema: Arc<Schema>,
    pub dir: PathBuf,
    /// Replaced whole on a change, so a query's snapshot is one `Arc` clone.
    parts: RwLock<Arc<Vec<Arc<Part>>>>,
    blocks: Mutex<Blocks>,
    /// One merge at a time per table.
    merging: Mutex<()>,
}

/// Block numbers: the next to give out, and those taken by inserts whose
/// parts are not yet visible (see the module docs: no merge spans one).
struct Blocks {
    next: u64,
    in_flight: BTreeSet<u64>,
}

/// An insert's block while it is in flight; dropped (the part published,
/// or the write failed) it is no longer.
struct InFlight<'t> {
    table: &'t Table,
    block: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.table.blocks.lock().expect("block lock").in_flight.remove(&self.block);
    }
}

fn table_err(schema: &Schema, what: impl Into<String>) -> Error {
    Error::Table { table: schema.table.clone(), what: what.into() }
}

impl Table {
    /// Creates `<data>/<schema.table>/` and its `table.json`.
    /// The names are checked first ([`crate::storage::name::check_schema`]).
    pub fn create(data: &Path, schema: Schema) -> Result<Table> {
        crate::storage::name::check_schema(&schema)?;
        let dir = data.join(&schema.table);
        if dir.join("table.json").exists() {
            // NOTE: no path in the message: a server answers with it.
            return Err(table_err(&schema, "already exists"));
        }
        std::fs::create_dir_all(&dir).at(&dir)?;
        let p = dir.join("table.json");
        let tmp = dir.join("table.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&schema).expect("schema serializes")).at(&tmp)?;
        std::fs::rename(&tmp, &p).at(&p)?;
        Table::open(data, &schema.table)
    }

    /// Opens a table, finishing what a crash interrupted (see the module docs).
    /// `name` is checked first ([`crate::storage::name::check`]).
    pub fn open(data: &Path, name: &str) -> Result<Table> {
        crate::storage::name::check(crate::storage::name::Kind::Table, name)?;
        let dir = data.join(name);
        let p = dir.join("table.json");
        let bytes = std::fs::read(&p).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Table { table: name.into(), what: "does not exist".into() }
            } else {
                Error::Io { path: p.clone(), source: e }
            }
        })?;
        let schema: Arc<Schema> =
            Arc::new(serde_json::from_slice(&bytes).map_err(|e| crate::error::corrupt(&p, e.to_string()))?);
        // Block ranges come from the directory names, so covered parts are
        // recognised (and removed) without reading them: a crash may have
        // left one half-deleted.
        let mut found: Vec<(u64, u64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(&dir).at(&dir)? {
            let entry = entry.at(&dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("tmp_") {
                std::fs::remove_dir_all(entry.path()).at(&entry.path())?;
                failpoint::hit(Point::OpenMidRemove, &dir).at(&entry.path())?;
            } else if let Some((min, max)) = parse_part_name(&name) {
                found.push((min, max, entry.path()));
            }
        }
        // What each merge result read: its range, its sources' ranges.
        type Range = (u64, u64);
        let mut merged: Vec<(Range, Vec<Range>)> = Vec::new();
        for (min, max, path) in &found {
            if min != max {
                let meta = Part::read_meta(path)?;
                merged.push(((*min, *max), meta.sources.iter().filter_map(|s| parse_part_name(s)).collect()));
            }
        }
        let inside = |(m, x): (u64, u64), (min, max): (u64, u64)| m <= min && max <= x && (m, x) != (min, max);
        let mut parts: Vec<Arc<Part>> = Vec::new();
        for (min, max, path) in &found {
            let me = (*min, *max);
            // A part some merge read (a source's range holds it) is in that
            // merge's result; one that only lies inside a result's range is not.
            let read_by_a_merge = merged.iter().any(|(range, sources)| {
                inside(*range, me) && (sources.is_empty() || sources.iter().any(|s| *s == me || inside(*s, me)))
            });
            if read_by_a_merge {
                std::fs::remove_dir_all(path).at(path)?;
                failpoint::hit(Point::OpenMidRemove, &dir).at(path)?;
            } else {
                parts.push(Arc::new(Part::open(schema.clone(), path)?));
            }
        }
        parts.sort_by_key(|p| p.meta.min_block);
        let next = parts.iter().map(|p| p.meta.max_block + 1).max().unwrap_or(1);
        Ok(Table {
            schema,
            dir,
            parts: RwLock::new(Arc::new(parts)),
            blocks: Mutex::new(Blocks { next, in_flight: BTreeSet::new() }),
            merging: Mutex::new(()),
        })
    }

    /// The parts a query reads: a consistent set, kept alive while held.
    pub fn snapshot(&self) -> Arc<Vec<Arc<Part>>> {
        self.parts.read().expect("parts lock").clone()
    }

    fn check(&self, batch: &Batch) -> Result<()> {
        let s = &self.schema;
        if batch.columns.len() != s.columns.len() {
            return Err(table_err(
                s,
                format!("insert has {} columns, table has {}", batch.columns.len(), s.columns.len()),
            ));
        }
        let rows = batch.rows();
        for (data, def) in batch.columns.iter().zip(&s.columns) {
            let bad = |what: String| Error::Column { table: s.table.clone(), column: def.name.clone(), what };
            if data.len() != rows {
                return Err(bad(format!("{} values where the first column has {rows}", data.len())));
            }
            match (def.ty, data) {
                (ColumnType::Float64, ColumnData::F64(_)) => {}
                (ColumnType::String | ColumnType::LowCardinalityString, ColumnData::Str(_)) => {}
                (t, ColumnData::U64(v)) if t.is_unsigned() => {
                    if let Some(x) = v.iter().find(|&&x| x > t.max_unsigned()) {
                        return Err(bad(format!("value {x} does not fit {}", t.name())));
                    }
                }
                (t, ColumnData::I64(v)) if t.is_signed() => {
                    let (lo, hi) = t.signed_range();
                    if let Some(x) = v.iter().find(|&&x| x < lo || x > hi) {
                        return Err(bad(format!("value {x} does not fit {}", t.name())));
                    }
                }
                (t, _) => return Err(bad(format!("values of the wrong kind for {}", t.name()))),
            }
        }
        Ok(())
    }

    /// Inserts a batch as one new part; when this returns, the part is on
    /// disk (fsynced and renamed) and visible to new queries.
    pub fn insert(&self, batch: &Batch) -> Result<Option<PartMeta>> {
        self.check(batch)?;
        let rows = batch.rows();
        let key = &self.schema.order_by;
        let mut perm: Vec<u32> = (0..rows as u32).collect();
        perm.sort_by(|&a, &b| {
            key.iter()
                .map(|&c| batch.columns[c].cmp_rows(a as usize, &batch.columns[c], b as usize))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        });
        let block = {
            let mut b = self.blocks.lock().expect("block lock");
            b.next += 1;
            let block = b.next - 1;
            b.in_flight.insert(block);
            InFlight { table: self, block }
        };
        failpoint::hit(Point::InsertBlockTaken, &self.dir).at(&self.dir)?;
        let mut w = PartWriter::new(self.schema.clone(), &self.dir, block.block, block.block, 0)?;
        for &i in &perm {
            w.push_row(&batch.columns, i as usize)?;
        }
        let Some(written) = w.finish()? else { return Ok(None) };
        failpoint::hit(Point::InsertPartWritten, &self.dir).at(&self.dir)?;
        let meta = written.publish()?;
        failpoint::hit(Point::InsertRenamed, &self.dir).at(&self.dir)?;
        let part = self.open_published(&meta)?;
        self.publish(part, &[]);
        // NOTE: the block leaves the in-flight set only after its part is
        // visible: a merge that reads the set, then the parts, sees it in one.
        drop(block);
        failpoint::hit(Point::InsertVisible, &self.dir).at(&self.dir)?;
        Ok(Some(meta))
    }

    /// Opens a part just renamed into place. If it cannot be opened (out of
    /// file descriptors, say), the call fails and the part is removed
    /// again: its rows were never acknowledged, and left on disk they would
    /// appear after a restart, twice if the client retried.
    fn open_published(&self, meta: &PartMeta) -> Result<Arc<Part>> {
        let dir = self.dir.join(&meta.name);
        Part::open(self.schema.clone(), &dir).map(Arc::new).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })
    }

    /// Makes `part` visible in place of `inputs`.
    fn publish(&self, part: Arc<Part>, inputs: &[Arc<Part>]) {
        let mut guard = self.parts.write().expect("parts lock");
        let parts = Arc::make_mut(&mut guard);
        parts.retain(|p| !inputs.iter().any(|i| Arc::ptr_eq(i, p)));
        parts.push(part);
        parts.sort_by_key(|p| p.meta.min_block);
    }

    /// The merge to do next: up to [`MAX_MERGE`] consecutive visible parts
    /// (the most, then the fewest rows) whose block range holds no block
    /// in flight. Empty if none.
    fn choose_merge(&self, min_parts: usize) -> Vec<Arc<Part>> {
        // NOTE: the in-flight set before the parts (see `insert`).
        let in_flight: Vec<u64> = self.blocks.lock().expect("block lock").in_flight.iter().copied().collect();
        let parts = self.parts.read().expect("parts lock");
        if parts.len() < min_parts.max(2) {
            return Vec::new();
        }
        // Runs of consecutive parts with no block in flight between them.
        let mut runs: Vec<&[Arc<Part>]> = Vec::new();
        let mut start = 0;
        for i in 1..=parts.len() {
            let split = i == parts.len()
                || in_flight.iter().any(|&b| parts[i - 1].meta.max_block < b && b < parts[i].meta.min_block);
            if split {
                runs.push(&parts[start..i]);
                start = i;
            }
        }
        let mut best: Option<(usize, u64, &[Arc<Part>])> = None;
        for run in runs {
            let n = run.len().min(MAX_MERGE);
            if n < 2 {
                continue;
            }
            // The smallest window: cheap merges first keep part counts low.
            for w in run.windows(n) {
                let rows: u64 = w.iter().map(|p| p.meta.rows).sum();
                if best.is_none_or(|(bn, br, _)| n > bn || (n == bn && rows < br)) {
                    best = Some((n, rows, w));
                }
            }
        }
        best.map_or_else(Vec::new, |(_, _, w)| w.to_vec())
    }

    /// Merges up to [`MAX_MERGE`] consecutive parts if at least `min_parts`
    /// exist. Returns the new part, or `None` when there was nothing to do.
    /// On error the inputs stay in place and the table is unchanged.
    pub fn merge_once(&self, min_parts: usize) -> Result<Option<PartMeta>> {
        let _one = self.merging.lock().expect("merge lock");
        let inputs = self.choose_merge(min_parts);
        if inputs.is_empty() {
            return Ok(None);
        }
        failpoint::hit(Point::MergeChosen, &self.dir).at(&self.dir)?;
        let min = inputs.iter().map(|p| p.meta.min_block).min().expect("inputs");
        let max = inputs.iter().map(|p| p.meta.max_block).max().expect("inputs");
        let level = inputs.iter().map(|p| p.meta.level).max().expect("inputs") + 1;
        let mut w = PartWriter::new(self.schema.clone(), &self.dir, min, max, level)?;
        w.set_sources(inputs.iter().map(|p| p.meta.name.clone()).collect());
        let mut cursors = Vec::new();
        for p in &inputs {
            if let Some(c) = Cursor::new(p.clone())? {
                cursors.push(c);
            }
        }
        let key = self.schema.order_by.clone();
        let cmp = |a: &Cursor, b: &Cursor| {
            key.iter()
                .map(|&c| a.cols[c].cmp_rows(a.row, &b.cols[c], b.row))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        };
        let mut rows = 0usize;
        while !cursors.is_empty() {
            rows += 1;
            if rows.is_multiple_of(GRANULE) {
                failpoint::hit(Point::MergeMidway, &self.dir).at(&self.dir)?;
            }
            // PERF: at most MAX_MERGE inputs, so a linear scan beats a heap's bookkeeping.
            let mut best = 0;
            for i in 1..cursors.len() {
                if cmp(&cursors[i], &cursors[best]) == Ordering::Less {
                    best = i;
                }
            }
            let c = &mut cursors[best];
            w.push_row(&c.cols, c.row)?;
            if !c.advance()? {
                cursors.swap_remove(best);
            }
        }
        let Some(written) = w.finish()? else { return Ok(None) };
        failpoint::hit(Point::MergeWritten, &self.dir).at(&self.dir)?;
        let meta = written.publish()?;
        failpoint::hit(Point::MergeRenamed, &self.dir).at(&self.dir)?;
        let part = self.open_published(&meta)?;
        self.publish(part, &inputs);
        // NOTE: queries holding an input keep its files open; deleting the
        // directory only unlinks the names. Renaming first makes the removal
        // atomic as far as `open` is concerned (it deletes `tmp_` leftovers).
        for p in &inputs {
            let name = p.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let doomed = self.dir.join(format!("tmp_delete_{name}"));
            std::fs::rename(&p.dir, &doomed).at(&p.dir)?;
            std::fs::remove_dir_all(&doomed).at(&doomed)?;
            failpoint::hit(Point::MergeMidDelete, &self.dir).at(&doomed)?;
        }
        Ok(Some(meta))
    }

    /// Merges until one part remains.
    pub fn optimize(&self) -> Result<()> {
        while self.merge_once(2)?.is_some() {}
        Ok(())
    }
}

/// `all_<min>_<max>_<level>` → (min, max).
fn parse_part_name(name: &str) -> Option<(u64, u64)> {
    let mut it = name.strip_prefix("all_")?.split('_');
    let (min, max, _level) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.next()?.parse::<u32>().ok()?);
    Some((min, max))
}

/// A background thread that merges whenever a table has `min_parts` parts.
pub struct Merger {
    table: String,
    state: Arc<(Mutex<MergerState>, Condvar)>,
    handle: Option<JoinHandle<Result<()>>>,
}

#[derive(Default)]
struct MergerState {
    stop: bool,
    pokes: u64,
}

impl Merger {
    pub fn start(table: Arc<Table>, min_parts: usize) -> Merger {
        let state = Arc::new((Mutex::new(MergerState::default()), Condvar::new()));
        let s = state.clone();
        let name = table.schema.table.clone();
        let handle = std::thread::spawn(move || -> Result<()> {
            let mut seen = 0;
            loop {
                while table.merge_once(min_parts)?.is_some() {}
                let (lock, cv) = &*s;
                let mut g = lock.lock().expect("merger lock");
                while !g.stop && g.pokes == seen {
                    g = cv.wait(g).expect("merger lock");
                }
                if g.stop {
                    return Ok(());
                }
                seen = g.pokes;
            }
        });
        Merger { table: name, state, handle: Some(handle) }
    }

    /// Tells the merger that parts were added.
    pub fn poke(&self) {
        let (lock, cv) = &*self.state;
        lock.lock().expect("merger lock").pokes += 1;
        cv.notify_all();
    }

    /// Stops after the merge in progress; returns its error, if any.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        {
            let (lock, cv) = &*self.state;
            lock.lock().expect("merger lock").stop = true;
            cv.notify_all();
        }
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_else(|_| {
                Err(Error::Table { table: self.table.clone(), what: "merge thread panicked".into() })
            }),
            None => Ok(()),
        }
    }
}

impl Drop for Merger {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
