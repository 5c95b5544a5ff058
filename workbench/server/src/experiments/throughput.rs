//! Closed-loop query throughput over ZAP: for each concurrency c, c
//! clients (threads, one connection each) run one workload query back to
//! back for a fixed time; QPS and latency percentiles per (query, c). The
//! server's RSS is sampled every 100 ms throughout.
//!
//! Params: `rows` (table size), `concurrency` (client counts), `seconds`
//! per (query, c), `batch` (rows per insert when loading).
//! Records: `kind = "query"`: engine, query, concurrency, queries, seconds,
//! qps, p50_ms, p99_ms, mean_ms; `kind = "rss"`: t_s, rss_bytes and the
//! query and concurrency running then (`load` while the table loads).
//!
//! Every answer is compared with the first answer of its query: a server
//! that answers differently under load fails the cell.

use super::{percentile, progress, Cell, Experiment, Records, ServerChild};
use crate::client::{Client, Rows};
use anyhow::{bail, Context, Result};
use datastore::gen;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const EXPERIMENT: Experiment = Experiment { name: "throughput", run };

fn run(cell: &Cell, out: &mut Records) -> Result<()> {
    let rows: u64 = cell.param("rows", 1_000_000)?;
    let levels: Vec<usize> = cell.param("concurrency", vec![1, 2, 4, 8])?;
    let seconds: f64 = cell.param("seconds", 1.0)?;
    let batch: u64 = cell.param("batch", 1_000_000)?;
    if levels.is_empty() || levels.contains(&0) || !seconds.is_finite() || seconds <= 0.0 {
        bail!("{}: params.concurrency needs counts ≥ 1 and params.seconds > 0", cell.experiment);
    }
    let data = cell.work_dir.join("db");
    let t0 = Instant::now();
    let db = datastore::Db::open(&data)?;
    gen::load(&db, rows, cell.seed, batch, true, |_, _| {})
        .with_context(|| format!("loading {rows} rows into {}", data.display()))?;
    drop(db);
    eprintln!("loaded {rows} rows in {:.1} s", t0.elapsed().as_secs_f64());

    let fds = crate::limits::raise_fd_limit();
    let max = levels.iter().copied().max().unwrap_or(1);
    if (fds as usize) < max + 64 {
        bail!("the load driver may open {fds} files; {max} clients need more (params.concurrency)");
    }
    let server = ServerChild::spawn(&data, cell.trace.as_deref(), &[])?;
    let expected: Vec<Rows> = {
        let mut c = Client::connect(server.addr)?;
        gen::QUERIES.iter().map(|(_, sql)| c.execute(sql)).collect::<Result<_, _>>()?
    };

    // The sampler: the server's RSS every 100 ms, tagged with what runs.
    let phase = Arc::new(Mutex::new(("warm-up".to_string(), 0usize)));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (phase, stop, pid) = (phase.clone(), stop.clone(), server.pid());
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Some(r) = probe::rss::read_pid(pid) {
                    let (q, c) = phase.lock().map(|p| p.clone()).unwrap_or_default();
                    samples.push((start.elapsed().as_secs_f64(), r.rss, q, c));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            samples
        })
    };

    let total = levels.len() * gen::QUERIES.len();
    let mut done = 0;
    let result = (|| -> Result<()> {
        for &c in &levels {
            for (qi, (name, sql)) in gen::QUERIES.iter().enumerate() {
                if let Ok(mut p) = phase.lock() {
                    *p = (name.to_string(), c);
                }
                let (lat, secs) = closed_loop(server.addr, sql, &expected[qi], c, seconds)
                    .with_context(|| format!("{name} at {c} client(s)"))?;
                let mut ms: Vec<f64> = lat.iter().map(|d| d * 1e3).collect();
                let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
                out.emit(json!({
                    "kind": "query", "engine": "ours", "query": name, "concurrency": c, "rows": rows,
                    "queries": ms.len(), "seconds": secs, "qps": ms.len() as f64 / secs,
                    "p50_ms": percentile(&mut ms, 50.0), "p99_ms": percentile(&mut ms, 99.0), "mean_ms": mean,
                }))?;
                done += 1;
                progress(done, total);
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    for (t, rss, q, c) in samples {
        out.emit(json!({"kind": "rss", "t_s": t, "rss_bytes": rss, "query": q, "concurrency": c, "rows": rows}))?;
    }
    result?;
    server.stop()
}

/// `clients` threads each run `sql` back to back until `seconds` have passed
/// (a query started before the deadline finishes); every latency (s) and
/// the time from start to the last answer.
fn closed_loop(
    addr: std::net::SocketAddr,
    sql: &str,
    expected: &Rows,
    clients: usize,
    seconds: f64,
) -> Result<(Vec<f64>, f64)> {
    let mut conns = (0..clients).map(|_| Client::connect(addr)).collect::<Result<Vec<_>, _>>()?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let lat = std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .iter_mut()
            .map(|c| {
                s.spawn(move || -> Result<Vec<f64>> {
                    let mut lat = Vec::new();
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        let got = c.execute(sql)?;
                        lat.push(t.elapsed().as_secs_f64());
                        if &got != expected {
                            bail!("answer differs from the first answer: {:?} vs {:?}", got.rows, expected.rows);
                        }
                    }
                    Ok(lat)
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??);
        }
        Ok::<_, anyhow::Error>(all)
    })?;
    Ok((lat, start.elapsed().as_secs_f64()))
}
