//! The engine alone, without the server or the protocol: the workload's
//! three queries timed in one process that only opens the table and runs
//! them (`datastore-load engine`, a child of the cell, so that its memory
//! figures are those of serving queries, not of loading the table).
//!
//! For each `threads` setting (0 = every core): one warm-up round, then
//! `runs` rounds of the three queries interleaved; each query's time per
//! run, and the process's RSS after opening the table, after the mix, and
//! at its peak. Then each query's floor ([`crate::floor`]): `runs` timed
//! reads of the bytes it must touch, at the same threads setting.
//!
//! Params: `rows`, `batch` (rows per insert when loading), `runs`, `threads`.
//! Records: [`records::server::datastore_queries`].

use super::{progress, Cell, Records};
use crate::workload;
use anyhow::{bail, Context, Result};
use records::server::datastore_queries::{Floor, Memory, Params, Query, Record, Table};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    let (rows, batch, runs) = (p.rows, p.batch, p.runs);
    let threads: Vec<usize> = p.threads.clone();
    if runs == 0 || threads.is_empty() {
        bail!("{}: params.runs must be ≥ 1 and params.threads name one setting at least", cell.experiment);
    }
    let data = super::work_dir(cell)?.join("db");
    let db = datastore::Db::open(&data)?;
    workload::load(&db, rows, cell.seed, batch, true, |_, _| {})
        .with_context(|| format!("loading {rows} rows into {}", data.display()))?;
    let t = db.table("t")?;
    let parts = t.snapshot();
    let disk: u64 = parts.iter().map(|p| p.meta.columns.iter().map(|c| c.compressed).sum::<u64>()).sum();
    out.emit(&Record::Table(Table { rows, parts: parts.len() as u64, disk_bytes: disk }))?;
    drop((parts, t, db));

    let exe = std::env::current_exe().context("locating this executable")?;
    for (i, &n) in threads.iter().enumerate() {
        let mut child = Command::new(&exe)
            .args(["engine", "--runs", &runs.to_string(), "--threads", &n.to_string(), "--data"])
            .arg(&data)
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} engine", exe.display()))?;
        let stdout = child.stdout.take().context("engine stdout")?;
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line?;
            let rec: Record = serde_json::from_str(&line).with_context(|| format!("the engine printed {line:?}"))?;
            out.emit(&rec)?;
        }
        let status = child.wait()?;
        if !status.success() {
            bail!("{} engine --threads {n} failed ({status})", exe.display());
        }
        progress(i + 1, threads.len());
    }
    Ok(())
}

/// `datastore-load engine`: opens `data`, times the workload's queries,
/// prints records as JSON lines.
pub fn engine(data: &Path, runs: usize, threads: usize) -> Result<()> {
    let mut out = Records::new(Box::new(std::io::stdout()));
    let rss = || probe::rss::read().map_or((0, 0), |r| (r.rss, r.peak));
    let db = datastore::Db::open(data)?;
    db.table("t").with_context(|| format!("opening table t in {}", data.display()))?;
    let (rss_open, _) = rss();
    let limits = datastore::Limits { threads, ..Default::default() };
    for round in 0..=runs {
        for (name, sql) in workload::QUERIES {
            let t0 = Instant::now();
            let (r, stats) = db.select(sql, &[], &limits).with_context(|| format!("{name}: {sql}"))?;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            std::hint::black_box(r);
            // Round 0 warms the page cache and the allocator.
            if round > 0 {
                out.emit(&Record::Query(Query {
                    threads: threads as u64,
                    query: name.to_string(),
                    run: round as u64,
                    ms,
                    threads_used: stats.threads as u64,
                    passes: stats.passes as u64,
                }))?;
            }
        }
    }
    let (rss_after, rss_peak) = rss();
    out.emit(&Record::Memory(Memory {
        threads: threads as u64,
        rss_open_bytes: rss_open,
        rss_after_bytes: rss_after,
        rss_peak_bytes: rss_peak,
    }))?;
    // The floors, after the memory figures so that their buffer is not in them.
    let rows: u64 = db.table("t")?.snapshot().iter().map(|p| p.meta.rows).sum();
    floors(&mut out, rows, runs, threads, Record::Floor)
}

/// Emits `runs` timed reads of each workload query's touched bytes
/// ([`crate::floor`]) at `threads`, after one untimed read to warm the buffer.
pub fn floors<R: serde::Serialize>(
    out: &mut Records,
    rows: u64,
    runs: usize,
    threads: usize,
    wrap: impl Fn(Floor) -> R,
) -> Result<()> {
    let sizes: Vec<(&str, u64)> =
        workload::QUERIES.iter().filter_map(|(q, _)| Some((*q, crate::floor::touched(q, rows)?))).collect();
    let Some(max) = sizes.iter().map(|s| s.1).max() else { return Ok(()) };
    let buf = crate::floor::buffer(max);
    for run in 0..=runs {
        for &(query, bytes) in &sizes {
            let words = (bytes.div_ceil(8) as usize).min(buf.len());
            let ms = crate::floor::read_ms(&buf[..words], threads);
            if run > 0 {
                out.emit(&wrap(Floor {
                    threads: threads as u64,
                    query: query.to_string(),
                    run: run as u64,
                    bytes,
                    ms,
                }))?;
            }
        }
    }
    Ok(())
}
