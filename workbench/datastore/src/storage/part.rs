//! Parts: immutable, sorted runs of rows on disk, and their writer.
//!
//! A part is a directory named `all_<min block>_<max block>_<level>`:
//! - `<column>.bin`: compressed blocks, one per granule of [`GRANULE`] rows;
//! - `<column>.mrk`: per granule, the block's offset in `.bin` and the
//!   row's offset inside the decompressed block (u64 LE pairs);
//! - `<column>.dict`: a LowCardinality column's dictionary (JSON array);
//! - `primary.idx`: the sort key of each granule's first row, plus the key
//!   of the part's last row (JSON), loaded into memory when the part opens;
//! - `part.json`: rows, granules, block range, level, sizes; written last.
//!
//! The writer builds the part in a `tmp_` directory, fsyncs every file and
//! the directory, and renames it into place ([`Written::publish`]), then
//! fsyncs the table directory: a crash leaves either the whole part or a
//! `tmp_` directory that the next open deletes.

use crate::error::{corrupt, IoPath, Result};
use crate::storage::cache;
use crate::storage::codec::{self, Codec};
use crate::storage::failpoint::{self, Point};
use crate::types::{ColumnData, ColumnType, StringIds, Value};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per granule, the unit of reading and of the sparse index.
pub const GRANULE: usize = 8192;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: ColumnType,
    pub codec: Codec,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Schema {
    pub table: String,
    pub columns: Vec<ColumnDef>,
    /// Indices of the ORDER BY columns, in key order.
    pub order_by: Vec<usize>,
}

impl Schema {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ColumnStats {
    pub compressed: u64,
    pub uncompressed: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartMeta {
    pub name: String,
    pub min_block: u64,
    pub max_block: u64,
    pub level: u32,
    pub rows: u64,
    pub granules: usize,
    pub columns: Vec<ColumnStats>,
    /// The parts a merge combined (their directory names); empty for an
    /// insert's part. On open, a part whose blocks this part's range
    /// covers is deleted only if a source's range covers it too: a part
    /// inside the range that no source held is rows the merge never read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

impl PartMeta {
    pub fn dir_name(min_block: u64, max_block: u64, level: u32) -> String {
        format!("all_{min_block}_{max_block}_{level}")
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|f| f.sync_all()).at(dir)
}

enum Buf {
    Data(ColumnData),
    /// LowCardinality: keys into the writer's dictionary.
    Keys(Vec<u32>),
}

/// Streams sorted rows into a new part. Memory: one granule of rows, plus
/// the LowCardinality dictionaries and the sparse index. Dropped before
/// [`Written::publish`] (a failed write), it deletes its `tmp_` directory,
/// so a full disk gets its space back at once.
pub struct PartWriter {
    schema: Arc<Schema>,
    table_dir: PathBuf,
    tmp: TmpDir,
    meta: PartMeta,
    bufs: Vec<Buf>,
    dicts: Vec<Option<StringIds>>,
    bins: Vec<BufWriter<File>>,
    offsets: Vec<u64>,
    marks: Vec<Vec<u8>>,
    index: Vec<Vec<Value>>,
    last_key: Vec<Value>,
    raw: Vec<u8>,
    block: Vec<u8>,
}

impl PartWriter {
    /// Starts a part for blocks `[min_block, max_block]` at `level`, in
    /// `tmp_<part name>` (block numbers are unique, so writers never share one).
    pub fn new(schema: Arc<Schema>, table_dir: &Path, min_block: u64, max_block: u64, level: u32) -> Result<Self> {
        let name = PartMeta::dir_name(min_block, max_block, level);
        let tmp = TmpDir(table_dir.join(format!("tmp_{name}")));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).at(&tmp)?;
        }
        std::fs::create_dir_all(&tmp).at(&tmp)?;
        let mut bins = Vec::new();
        for c in &schema.columns {
            let p = tmp.join(format!("{}.bin", c.name));
            bins.push(BufWriter::with_capacity(1 << 16, File::create(&p).at(&p)?));
        }
        let n = schema.columns.len();
        Ok(PartWriter {
            bufs: schema
                .columns
                .iter()
                .map(|c| match c.ty {
                    ColumnType::LowCardinalityString => Buf::Keys(Vec::with_capacity(GRANULE)),
                    t => Buf::Data(ColumnData::empty_for(t)),
                })
                .collect(),
            dicts: schema
                .columns
                .iter()
                .map(|c| (c.ty == ColumnType::LowCardinalityString).then(StringIds::default))
                .collect(),
            meta: PartMeta {
                name,
                min_block,
                max_block,
                level,
                rows: 0,
                granules: 0,
                columns: vec![ColumnStats::default(); n],
                sources: Vec::new(),
            },
            schema,
            table_dir: table_dir.to_path_buf(),
            tmp,
            bins,
            offsets: vec![0; n],
            marks: vec![Vec::new(); n],
            index: Vec::new(),
            last_key: Vec::new(),
            raw: Vec::new(),
            block: Vec::new(),
        })
    }

    fn buffered(&self) -> usize {
        match &self.bufs[0] {
            Buf::Data(d) => d.len(),
            Buf::Keys(k) => k.len(),
        }
    }

    /// Appends row `i` of `cols` (one per column, in table order). Rows must
    /// arrive in sort-key order.
    pub fn push_row(&mut self, cols: &[ColumnData], i: usize) -> Result<()> {
        for (c, (buf, dict)) in self.bufs.iter_mut().zip(self.dicts.iter_mut()).enumerate() {
            match (buf, &cols[c]) {
                (Buf::Keys(keys), src) => {
                    let s = src.str_at(i).expect("LowCardinality source is a string column");
                    keys.push(dict.as_mut().expect("dict").id(s));
                }
                (Buf::Data(ColumnData::U64(v)), ColumnData::U64(s)) => v.push(s[i]),
                (Buf::Data(ColumnData::I64(v)), ColumnData::I64(s)) => v.push(s[i]),
                (Buf::Data(ColumnData::F64(v)), ColumnData::F64(s)) => v.push(s[i]),
                (Buf::Data(ColumnData::Str(v)), src) => v.push(src.str_at(i).expect("string").to_string()),
                _ => unreachable!("batch types are checked on insert"),
            }
        }
        if self.buffered() == GRANULE {
            self.flush()?;
        }
        Ok(())
    }

    fn key_at(&self, row: usize) -> Vec<Value> {
        self.schema
            .order_by
            .iter()
            .map(|&c| match &self.bufs[c] {
                Buf::Data(d) => d.value(row),
                Buf::Keys(k) => Value::S(self.dicts[c].as_ref().expect("dict").strings[k[row] as usize].clone()),
            })
            .collect()
    }

    fn flush(&mut self) -> Result<()> {
        let rows = self.buffered();
        if rows == 0 {
            return Ok(());
        }
        self.index.push(self.key_at(0));
        self.last_key = self.key_at(rows - 1);
        for (c, col) in self.schema.columns.iter().enumerate() {
            match &self.bufs[c] {
                Buf::Data(d) => codec::encode(col.ty, col.codec, d, None, &mut self.raw, &mut self.block),
                Buf::Keys(k) => {
                    let dummy = ColumnData::U64(Vec::new());
                    codec::encode(col.ty, col.codec, &dummy, Some(k), &mut self.raw, &mut self.block)
                }
            }
            let path = || self.tmp.join(format!("{}.bin", col.name));
            failpoint::hit(Point::WriteBlock, &self.table_dir).at(&path())?;
            self.bins[c].write_all(&self.block).at(&path())?;
            self.marks[c].extend_from_slice(&self.offsets[c].to_le_bytes());
            self.marks[c].extend_from_slice(&0u64.to_le_bytes());
            self.offsets[c] += self.block.len() as u64;
            self.meta.columns[c].compressed += self.block.len() as u64;
            self.meta.columns[c].uncompressed += self.raw.len() as u64;
        }
        for b in &mut self.bufs {
            match b {
                Buf::Data(d) => d.clear(),
                Buf::Keys(k) => k.clear(),
            }
        }
        self.meta.rows += rows as u64;
        self.meta.granules += 1;
        Ok(())
    }

    /// The merge's input parts, recorded in the result's `part.json`.
    pub fn set_sources(&mut self, sources: Vec<String>) {
        self.meta.sources = sources;
    }

    /// Writes the remaining files and makes them durable, still under the
    /// `tmp_` name: [`Written::publish`] renames the part into place. An
    /// empty part is not written (`None`).
    pub fn finish(mut self) -> Result<Option<Written>> {
        self.flush()?;
        if self.meta.rows == 0 {
            return Ok(None);
        }
        let mut index = std::mem::take(&mut self.index);
        index.push(std::mem::take(&mut self.last_key));
        let write = |name: String, bytes: &[u8]| -> Result<()> {
            let p = self.tmp.join(name);
            failpoint::hit(Point::WriteBlock, &self.table_dir).at(&p)?;
            let mut f = File::create(&p).at(&p)?;
            f.write_all(bytes).at(&p)?;
            f.sync_all().at(&p)
        };
        for (c, col) in self.schema.columns.iter().enumerate() {
            let p = self.tmp.join(format!("{}.bin", col.name));
            self.bins[c].flush().at(&p)?;
            self.bins[c].get_ref().sync_all().at(&p)?;
            write(format!("{}.mrk", col.name), &self.marks[c])?;
            if let Some(d) = &self.dicts[c] {
                write(format!("{}.dict", col.name), &serde_json::to_vec(&d.strings).expect("strings serialize"))?;
            }
        }
        write("primary.idx".into(), &serde_json::to_vec(&index).expect("values serialize"))?;
        write("part.json".into(), &serde_json::to_vec_pretty(&self.meta).expect("meta serializes"))?;
        sync_dir(&self.tmp)?;
        let tmp = TmpDir(self.tmp.keep());
        Ok(Some(Written {
            meta: self.meta.clone(),
            dest: self.table_dir.join(&self.meta.name),
            table_dir: self.table_dir.clone(),
            tmp,
        }))
    }
}

/// A part's directory while it is written, deleted when dropped unless
/// kept ([`TmpDir::keep`]): a failed write (a full disk) gives its space
/// back at once, and the next open has nothing to clean.
struct TmpDir(PathBuf);

impl TmpDir {
    /// The path, no longer deleted on drop.
    fn keep(&mut self) -> PathBuf {
        std::mem::take(&mut self.0)
    }
}

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TmpDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A part written and fsynced under its `tmp_` name, not yet in place.
/// Dropped unpublished (a failed rename too), it deletes itself.
pub struct Written {
    pub meta: PartMeta,
    tmp: TmpDir,
    dest: PathBuf,
    table_dir: PathBuf,
}

impl Written {
    /// Renames the part into place and makes the rename durable (the table
    /// directory fsynced): from here a crash keeps it.
    pub fn publish(mut self) -> Result<PartMeta> {
        std::fs::rename(&self.tmp, &self.dest).at(&self.dest)?;
        self.tmp.keep();
        sync_dir(&self.table_dir)?;
        Ok(self.meta.clone())
    }
}

/// An open part: metadata, sparse index, marks and dictionaries in memory,
/// column files open (so a part stays readable by queries that hold it
/// while a merge replaces and deletes it).
pub struct Part {
    pub meta: PartMeta,
    pub dir: PathBuf,
    /// `granules + 1` keys: each granule's first row, then the last row.
    pub index: Vec<Vec<Value>>,
    marks: Vec<Vec<u64>>,
    dicts: Vec<Option<Arc<Vec<String>>>>,
    files: Vec<(File, u64)>,
    schema: Arc<Schema>,
    /// Unique in the process: the key of this part's granules in [`cache`].
    id: u64,
}

impl Drop for Part {
    fn drop(&mut self) {
        cache::global().forget(self.id);
    }
}

/// Per-query scratch for reading blocks.
#[derive(Default)]
pub struct Scratch {
    comp: Vec<u8>,
    raw: Vec<u8>,
}

impl Scratch {
    /// Heap bytes of the read buffers (a query's memory budget counts them).
    pub fn heap_bytes(&self) -> usize {
        self.comp.capacity() + self.raw.capacity()
    }
}

impl Part {
    /// The part's `part.json` alone.
    pub fn read_meta(dir: &Path) -> Result<PartMeta> {
        let p = dir.join("part.json");
        serde_json::from_slice(&std::fs::read(&p).at(&p)?).map_err(|e| corrupt(&p, e.to_string()))
    }

    pub fn open(schema: Arc<Schema>, dir: &Path) -> Result<Part> {
        let read = |name: &str| -> Result<Vec<u8>> {
            let p = dir.join(name);
            std::fs::read(&p).at(&p)
        };
        let meta = Part::read_meta(dir)?;
        let index: Vec<Vec<Value>> = serde_json::from_slice(&read("primary.idx")?)
            .map_err(|e| corrupt(&dir.join("primary.idx"), e.to_string()))?;
        if index.len() != meta.granules + 1 {
            return Err(corrupt(
                &dir.join("primary.idx"),
                format!("{} keys for {} granules", index.len(), meta.granules),
            ));
        }
        let (mut marks, mut dicts, mut files) = (Vec::new(), Vec::new(), Vec::new());
        for col in &schema.columns {
            let m = read(&format!("{}.mrk", col.name))?;
            if m.len() != meta.granules * 16 {
                return Err(corrupt(&dir.join(format!("{}.mrk", col.name)), "mark count differs from granules"));
            }
            marks.push(m.chunks_exact(16).map(|c| u64::from_le_bytes(c[..8].try_into().expect("8"))).collect());
            dicts.push(if col.ty == ColumnType::LowCardinalityString {
                let p = dir.join(format!("{}.dict", col.name));
                let d: Vec<String> = serde_json::from_slice(&read(&format!("{}.dict", col.name))?)
                    .map_err(|e| corrupt(&p, e.to_string()))?;
                Some(Arc::new(d))
            } else {
                None
            });
            let p = dir.join(format!("{}.bin", col.name));
            let f = File::open(&p).at(&p)?;
            let len = f.metadata().at(&p)?.len();
            files.push((f, len));
        }
        Ok(Part { meta, dir: dir.to_path_buf(), index, marks, dicts, files, schema, id: cache::next_part_id() })
    }

    pub fn granules(&self) -> usize {
        self.meta.granules
    }

    /// Rows in granule `g` (the last one may be short).
    pub fn granule_rows(&self, g: usize) -> usize {
        self.meta.rows.min(((g + 1) * GRANULE) as u64) as usize - g * GRANULE
    }

    /// Decodes granule `g` of column `c` into `out`.
    pub fn read(&self, c: usize, g: usize, s: &mut Scratch, out: &mut ColumnData) -> Result<()> {
        let col = &self.schema.columns[c];
        let path = || self.dir.join(format!("{}.bin", col.name));
        let (file, len) = &self.files[c];
        let start = self.marks[c][g];
        let end = self.marks[c].get(g + 1).copied().unwrap_or(*len);
        if end < start || end > *len {
            return Err(corrupt(&path(), format!("mark of granule {g} out of range")));
        }
        s.comp.resize((end - start) as usize, 0);
        file.read_exact_at(&mut s.comp, start).at(&path())?;
        codec::decode(col.ty, &s.comp, self.dicts[c].as_ref(), &mut s.raw, out)
            .map_err(|e| corrupt(&path(), format!("granule {g}: {}", e.0)))
    }

    /// Granule `g` of column `c` from the process's cache of decoded
    /// granules, decoded and kept there on a miss (small scans only: see
    /// [`cache`]).
    pub fn read_cached(&self, c: usize, g: usize, s: &mut Scratch) -> Result<Arc<ColumnData>> {
        self.read_cached_filling(c, g, s).map(|(col, _)| col)
    }

    /// [`Part::read_cached`], and the heap bytes this read put into the
    /// cache (0 on a hit): a query that fills the cache allocates them while
    /// it runs, so its memory account holds them until it ends.
    pub fn read_cached_filling(&self, c: usize, g: usize, s: &mut Scratch) -> Result<(Arc<ColumnData>, usize)> {
        let key = (self.id, c as u32, g as u32);
        if let Some(hit) = cache::global().get(key) {
            return Ok((hit, 0));
        }
        let mut out = ColumnData::empty_for(self.schema.columns[c].ty);
        self.read(c, g, s, &mut out)?;
        let filled = out.heap_bytes();
        let out = Arc::new(out);
        cache::global().put(key, out.clone());
        Ok((out, filled))
    }

    /// Bytes the part keeps in memory for its index and marks.
    pub fn index_bytes(&self) -> usize {
        let v = |x: &Value| {
            std::mem::size_of::<Value>()
                + match x {
                    Value::S(s) => s.len(),
                    _ => 0,
                }
        };
        self.index.iter().map(|k| k.iter().map(v).sum::<usize>()).sum::<usize>()
            + self.marks.iter().map(|m| m.len() * 8).sum::<usize>()
    }
}

/// Reads a part row by row in key order, one granule of every column at a
/// time (the merge's input).
pub struct Cursor {
    pub part: Arc<Part>,
    granule: usize,
    pub row: usize,
    pub cols: Vec<ColumnData>,
    scratch: Scratch,
}

impl Cursor {
    pub fn new(part: Arc<Part>) -> Result<Option<Cursor>> {
        let cols = part.schema.columns.iter().map(|c| ColumnData::empty_for(c.ty)).collect();
        let mut c = Cursor { part, granule: 0, row: 0, cols, scratch: Scratch::default() };
        if c.part.granules() == 0 {
            return Ok(None);
        }
        c.load()?;
        Ok(Some(c))
    }

    fn load(&mut self) -> Result<()> {
        for i in 0..self.cols.len() {
            self.part.read(i, self.granule, &mut self.scratch, &mut self.cols[i])?;
        }
        self.row = 0;
        Ok(())
    }

    /// Moves to the next row; `false` at the end of the part.
    pub fn advance(&mut self) -> Result<bool> {
        self.row += 1;
        if self.row < self.cols[0].len() {
            return Ok(true);
        }
        self.granule += 1;
        if self.granule >= self.part.granules() {
            return Ok(false);
        }
        self.load()?;
        Ok(true)
    }
}
