//! Server heap growth over many queries: one client sends `queries` calls
//! back to back (`ping`, or the three workload queries in turn on a small
//! table) and every `sample_every` calls asks the server for its heap:
//! cumulative allocation calls and bytes and peak heap (dhat build, exact),
//! live heap (dhat; jemalloc `stats.allocated`), jemalloc active/resident,
//! RSS. Growth per million queries between the first sample and the last
//! is what a leak or a per-query cost would show; the samples' own `stats`
//! calls are counted too (one per sample).
//!
//! Params: `workloads` (["ping", "mix"], or one workload query by name,
//! e.g. "top-20-users", which the allocation gate runs one by one so that a
//! change is told to its query), `queries` (ping's), `mix_queries` (every
//! query workload's; a mix query allocates thousands of times, and the dhat
//! build takes ≈ 35 ms each), `samples` per workload, `rows` (the table).
//! Records: [`records::server::server_heap_growth`].

use super::{progress, Cell, Records, ServerChild};
use crate::client::Client;
use crate::workload;
use anyhow::{bail, Context, Result};
use records::server::server_heap_growth::{Params, Record, Sample};

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    let workloads: Vec<String> = p.workloads.clone();
    let ping_queries: u64 = p.queries;
    let mix_queries: u64 = p.mix_queries.unwrap_or(ping_queries);
    let (samples, rows) = (p.samples, p.rows);
    if samples == 0 || ping_queries == 0 || mix_queries == 0 {
        bail!("{}: params.queries, mix_queries and samples must be at least 1", cell.experiment);
    }
    if let Some(w) = workloads.iter().find(|w| !matches!(w.as_str(), "ping" | "mix") && query(w).is_none()) {
        bail!(
            "{}: params.workloads: unknown workload {w:?}; use ping, mix or one of {:?}",
            cell.experiment,
            workload::QUERIES.map(|(n, _)| n)
        );
    }
    let count = |w: &str| if w == "ping" { ping_queries } else { mix_queries };
    let total: u64 = workloads.iter().map(|w| count(w)).sum();
    let mut done_before = 0;
    let data = super::work_dir(cell)?.join("db");
    let db = datastore::Db::open(&data)?;
    workload::load(&db, rows, cell.seed, rows.max(1), true, |_, _| {})?;
    drop(db);
    // One server per workload: each starts from the same cold heap.
    for w in &workloads {
        let queries = count(w);
        let every = (queries / samples).max(1);
        let trace = super::part_trace(cell, w);
        let server = ServerChild::spawn(&data, trace.as_deref(), &[])?;
        let mut c = Client::connect(server.addr)?;
        let mut sample = |c: &mut Client, done: u64| -> Result<()> {
            let s = server.stats(c)?;
            out.emit(&Record::Sample(Sample {
                workload: w.clone(),
                queries: done,
                total_allocs: s.total_allocs,
                total_bytes: s.total_bytes,
                peak_heap_bytes: s.peak_heap_bytes,
                live_heap_bytes: s.live_heap_bytes,
                jemalloc_allocated: s.jemalloc_allocated,
                jemalloc_active: s.jemalloc_active,
                jemalloc_resident: s.jemalloc_resident,
                rss_bytes: s.rss_bytes,
            }))
        };
        sample(&mut c, 0)?;
        for i in 1..=queries {
            match w.as_str() {
                "ping" => {
                    let p = c.ping()?;
                    c.wait(p)?;
                    c.finish(p)?;
                }
                "mix" => {
                    let (_, sql) = workload::QUERIES[(i % workload::QUERIES.len() as u64) as usize];
                    c.execute(sql).with_context(|| format!("query {i}"))?;
                }
                name => {
                    let sql = query(name).expect("workloads checked above");
                    c.execute(sql).with_context(|| format!("query {i}"))?;
                }
            }
            if i % every == 0 || i == queries {
                sample(&mut c, i)?;
                progress((done_before + i) as usize, total as usize);
            }
        }
        done_before += queries;
        drop(c);
        server.stop()?;
    }
    Ok(())
}

/// The SQL of the workload query called `name`.
fn query(name: &str) -> Option<&'static str> {
    workload::QUERIES.iter().find(|(n, _)| *n == name).map(|(_, sql)| *sql)
}
