//! Hostile clients against the server's memory bounds (issue 27's findings,
//! replayed as a measurement). Two workloads, each on a fresh server:
//!
//! - `flight`: `connections` connections each send one flight of `flight`
//!   × `SELECT * FROM t` (a 6.2 MB answer each at 200,000 rows) and never
//!   finish a promise. Without a budget this reached 1.35 GB of RSS from
//!   10 connections; with one, answers past it are refused (429, 503).
//! - `soak`: `clients` threads for `seconds`, each picking hostile acts at
//!   random (seeded): deep SQL, path-like names, held and unread flights
//!   of large answers, a stalled frame, fuzz mutants
//!   ([`crate::fuzzing::mutate`], of every seed but the insert, so that
//!   the table stays as loaded), 10,000-value IN lists, and ordinary
//!   workload queries whose answers must equal the first one seen.
//!
//! For both: the server's RSS sampled every `sample_ms` (the driver reads
//! `/proc`), the baseline after a warm-up in which every worker has answered
//! the large query once, the statuses seen, and whether the server was
//! still there at the end (`crashes`: 0 or 1). The bound the paper states
//! is peak RSS ≤ baseline + `--answer-budget`.
//!
//! Then `kill`, on a data directory of its own: `kill_writers` threads
//! stream insert batches of `KILL_BATCH` unique ids (each batch's number in
//! a column of its own) and record every batch answered 200, a reader
//! counts rows, the server merges in the background, and after a random
//! (seeded) 20–400 ms the server is killed with SIGKILL and started again
//! on the same directory, `kills` times. At the end every batch is counted:
//! `rows_lost` (acknowledged rows not there: must be 0), `duplicates` (ids
//! twice: 0), `partial_batches` (a batch neither whole nor absent: 0), and
//! each restart's time until it answers.
//!
//! Then `greedy`, on a table of `greedy_rows` rows of its own: the queries
//! that grew a server without bound before queries had a memory budget
//! ([`GREEDY`]: exact distinct count of every id, an exact quantile per
//! user, a sort of every row, GROUP BY every id), each on a fresh server,
//! alone and then four at once, under each pair of `greedy_budgets_mib`
//! (`--max-query-memory`, `--max-server-memory`): statuses, the RSS before
//! (baseline, the table opened) and its high-water mark after. The bound:
//! peak RSS ≤ baseline + the server's budget.
//!
//! Params: `rows`, `connections`, `flight`, `clients`, `seconds`,
//! `sample_ms`, `answer_budget_mib`, `conn_answer_budget_mib`, `kills`,
//! `kill_writers`, `greedy_rows`, `greedy_budgets_mib`.
//! Records ([`records::server::fault_soak`]): RSS samples, a summary per
//! workload (the greedy ones one per budget and concurrency) and one of
//! the kills.

use super::{progress, Cell, Records, ServerChild};
use crate::fuzzing::{self, frame, Rng};
use crate::protocol;
use crate::workload;
use anyhow::{bail, Context, Result};
use records::server::fault_soak::{Detail, Greedy, Kills, Load, Record, Sample, Summary};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIG: &[u8] = b"SELECT * FROM t";

/// Statuses seen, by act.
type Seen = Arc<Mutex<BTreeMap<String, BTreeMap<u32, u64>>>>;

pub fn run(cell: &Cell, p: &records::server::fault_soak::Params, out: &mut Records) -> Result<()> {
    let (rows, connections, flight, clients, seconds, sample_ms) =
        (p.rows, p.connections, p.flight, p.clients, p.seconds, p.sample_ms);
    let budget: usize = p.answer_budget_mib << 20;
    let conn_budget: usize = p.conn_answer_budget_mib << 20;
    if connections == 0 || flight == 0 || clients == 0 || sample_ms == 0 {
        bail!("{}: params.connections, flight, clients and sample_ms must be at least 1", cell.experiment);
    }
    let (kills, kill_writers, greedy_rows) = (p.kills, p.kill_writers, p.greedy_rows);
    let greedy_budgets: Vec<[usize; 2]> = p.greedy_budgets_mib.clone();
    let data = super::work_dir(cell)?.join("db");
    let db = datastore::Db::open(&data)?;
    workload::load(&db, rows, cell.seed, 50_000.min(rows.max(1)), true, |_, _| {})?;
    drop(db);
    let flags = [
        "--answer-budget".to_string(),
        budget.to_string(),
        "--conn-answer-budget".to_string(),
        conn_budget.to_string(),
        // Hostile clients hold their results for seconds; answer what they ask.
        "--max-result-rows".to_string(),
        rows.max(1).to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    for (i, workload) in ["flight", "soak"].into_iter().enumerate() {
        let mut server = ServerChild::spawn(&data, None, &flags)?;
        let (baseline, warm_peak) = warm_up(&server)?;
        let seen: Seen = Default::default();
        let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::<(f64, u64)>::new())));
        let sampler = {
            let (stop, samples, pid) = (stop.clone(), peak.clone(), server.pid());
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(r) = probe::rss::read_pid(pid) {
                        samples.lock().unwrap().push((t0.elapsed().as_secs_f64(), r.rss));
                    }
                    std::thread::sleep(Duration::from_millis(sample_ms));
                }
            })
        };
        let t0 = Instant::now();
        let (calls, answer_size, held) = match workload {
            "flight" => run_flight(&server, connections, flight, &seen)?,
            _ => (run_soak(server.addr, clients, seconds, cell.seed, &seen)?, 0, None),
        };
        let elapsed = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let _ = sampler.join();
        // Still there? It answers a ping and has not exited.
        let alive = server.exited().is_none() && super::ping_once(server.addr).is_ok();
        let rss_end = server.rss().map(|r| (r.rss, r.peak));
        let samples = std::mem::take(&mut *peak.lock().unwrap());
        let sampled_peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
        for (t, rss) in &samples {
            out.emit(&Record::Sample(Sample { workload: workload.into(), t_s: *t, rss_bytes: *rss }))?;
        }
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        let mut all: BTreeMap<u32, u64> = BTreeMap::new();
        for s in seen.values() {
            for (k, v) in s {
                *all.entry(*k).or_default() += v;
            }
        }
        let text = |m: &BTreeMap<u32, u64>| m.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(" ");
        let acts = seen.iter().map(|(a, m)| format!("{a}[{}]", text(m))).collect::<Vec<_>>().join("; ");
        out.emit(&Record::Summary(Summary {
            workload: workload.into(),
            connections: if workload == "flight" { connections } else { clients } as u64,
            seconds: elapsed,
            calls,
            statuses: text(&all),
            acts,
            errors_5xx_internal: all.get(&500).copied().unwrap_or(0),
            crashes: u64::from(!alive),
            baseline_rss_bytes: baseline,
            peak_rss_bytes: sampled_peak.max(rss_end.map_or(0, |r| r.1)),
            detail: Detail::Load(Load {
                flight: flight as u64,
                warm_peak_rss_bytes: warm_peak,
                sampled_peak_rss_bytes: sampled_peak,
                end_rss_bytes: rss_end.map(|r| r.0),
                answer_budget_bytes: budget as u64,
                conn_answer_budget_bytes: conn_budget as u64,
                rows,
                answer_size_bytes: answer_size as u64,
                held_answer_bytes: held,
            }),
        }))?;
        progress(i + 1, 2);
        if alive {
            server.stop()?;
        }
    }
    if kills > 0 {
        let dir = super::work_dir(cell)?.join("kill-db");
        let _ = std::fs::remove_dir_all(&dir);
        out.emit(&Record::Kills(run_kills(&dir, kills, kill_writers.max(1), cell.seed)?))?;
    }
    if greedy_rows > 0 && !greedy_budgets.is_empty() {
        let dir = super::work_dir(cell)?.join("greedy-db");
        let _ = std::fs::remove_dir_all(&dir);
        let db = datastore::Db::open(&dir)?;
        workload::load(&db, greedy_rows, cell.seed, 1_000_000.min(greedy_rows), true, |_, _| {})?;
        drop(db);
        for [query_mib, server_mib] in greedy_budgets {
            for four in [false, true] {
                out.emit(&Record::Summary(run_greedy(&dir, greedy_rows, query_mib << 20, server_mib << 20, four)?))?;
            }
        }
    }
    Ok(())
}

/// The queries whose working sets had no bound (the `greedy` workload).
pub const GREEDY: [&str; 5] = [
    "SELECT uniqExact(id) FROM t",
    "SELECT user_id, quantile(0.9)(value) FROM t GROUP BY user_id ORDER BY user_id LIMIT 10",
    "SELECT id, value FROM t ORDER BY value",
    "SELECT id, user_id, sum(value) FROM t GROUP BY id, user_id ORDER BY id LIMIT 5",
    "SELECT id, count() FROM t GROUP BY id ORDER BY id LIMIT 10",
];

/// The greedy queries on a fresh server with the budgets given: each alone
/// (a server each, so that each has its own high-water mark; the largest
/// reported), or the four that aggregate at once; the summary record.
fn run_greedy(dir: &std::path::Path, rows: u64, query: usize, server_budget: usize, four: bool) -> Result<Summary> {
    let flags = [
        "--max-query-memory".to_string(),
        query.to_string(),
        "--max-server-memory".to_string(),
        server_budget.to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let statuses: Seen = Default::default();
    let (mut baseline, mut peak) = (0u64, 0u64);
    let t0 = Instant::now();
    let sets: Vec<Vec<&str>> = if four {
        vec![GREEDY.iter().copied().filter(|q| q.contains("GROUP BY") || q.contains("uniqExact")).collect()]
    } else {
        GREEDY.iter().map(|q| vec![*q]).collect()
    };
    let mut within = true;
    for set in &sets {
        let server = ServerChild::spawn(dir, None, &flags)?;
        // The table opened (its index loaded) before the baseline is read.
        crate::client::Client::connect(server.addr)?.execute("SELECT count() FROM t")?;
        let base = server.rss().map_or(0, |r| r.rss);
        let threads: Vec<_> = set
            .iter()
            .map(|q| {
                let (addr, q, seen) = (server.addr, q.to_string(), statuses.clone());
                std::thread::spawn(move || -> Result<()> {
                    let mut s = Raw::connect(addr)?;
                    s.send(&frame(protocol::QUERY, 1, 0, q.as_bytes()))?;
                    let (st, _) = s.recv()?.context("a greedy query went unanswered")?;
                    count(&seen, "greedy", st);
                    Ok(())
                })
            })
            .collect();
        for t in threads {
            t.join().map_err(|_| anyhow::anyhow!("a greedy query's thread panicked"))??;
        }
        let high = server.rss().map_or(0, |r| r.peak);
        within &= high <= base + server_budget as u64;
        if high.saturating_sub(base) >= peak.saturating_sub(baseline) {
            (baseline, peak) = (base, high);
        }
        server.stop()?;
    }
    let seen = std::mem::take(&mut *statuses.lock().unwrap());
    let text = seen
        .get("greedy")
        .map(|m| m.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    Ok(Summary {
        workload: format!(
            "greedy {} MiB / {} MiB{}",
            query >> 20,
            server_budget >> 20,
            if four { ", four at once" } else { "" }
        ),
        connections: if four { 4 } else { 1 },
        seconds: t0.elapsed().as_secs_f64(),
        calls: sets.iter().map(Vec::len).sum::<usize>() as u64,
        statuses: text,
        acts: String::new(),
        errors_5xx_internal: seen.get("greedy").and_then(|m| m.get(&500)).copied().unwrap_or(0),
        crashes: 0,
        baseline_rss_bytes: baseline,
        peak_rss_bytes: peak,
        detail: Detail::Greedy(Greedy {
            query_memory_bytes: query as u64,
            server_memory_bytes: server_budget as u64,
            greedy_rows: rows,
            within_server_budget: u64::from(within),
        }),
    })
}

/// Rows an insert batch of the kill workload.
const KILL_BATCH: u64 = 500;

/// The `kill` workload (module docs): its summary record.
fn run_kills(dir: &std::path::Path, kills: usize, writers: usize, seed: u64) -> Result<Kills> {
    use crate::client::Client;
    use datastore::{Batch, ColumnData, ColumnType, Value};
    use std::sync::atomic::AtomicU64;
    let schema = [("id".to_string(), ColumnType::UInt64), ("batch".to_string(), ColumnType::UInt64)];
    let next = Arc::new(AtomicU64::new(0));
    let acked: Arc<Mutex<Vec<u64>>> = Default::default();
    let mut rng = Rng(seed | 1);
    let mut restart_ms: Vec<f64> = Vec::new();
    let mut reads = 0u64;
    // A restart's time: from spawning the process until it has answered a
    // query on the table (which opens it: the recovery of what a kill left).
    let start = |restart_ms: &mut Vec<f64>| -> Result<ServerChild> {
        let t0 = Instant::now();
        let server = ServerChild::spawn(dir, None, &[])?;
        Client::connect(server.addr)?.execute("SELECT count() FROM d")?;
        restart_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        Ok(server)
    };
    {
        let server = ServerChild::spawn(dir, None, &[])?;
        Client::connect(server.addr)?.execute("CREATE TABLE d (id UInt64, batch UInt64) ORDER BY id")?;
        server.stop()?;
    }
    for _ in 0..kills {
        let server = start(&mut restart_ms)?;
        let addr = server.addr;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads: Vec<std::thread::JoinHandle<u64>> = (0..writers)
            .map(|_| {
                let (next, acked, stop, schema) = (next.clone(), acked.clone(), stop.clone(), schema.clone());
                std::thread::spawn(move || {
                    let Ok(mut c) = Client::connect(addr) else { return 0 };
                    while !stop.load(Ordering::Relaxed) {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        let ids: Vec<u64> = (b * KILL_BATCH..(b + 1) * KILL_BATCH).collect();
                        let batch = Batch {
                            columns: vec![ColumnData::U64(ids), ColumnData::U64(vec![b; KILL_BATCH as usize])],
                        };
                        let answered = c.insert("d", &schema, &batch).and_then(|p| {
                            c.wait(p)?;
                            c.finish(p)
                        });
                        match answered {
                            Ok(_) => acked.lock().unwrap().push(b),
                            // The kill: this batch's answer never came.
                            Err(_) => break,
                        }
                    }
                    0
                })
            })
            .collect();
        threads.push({
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                let Ok(mut c) = Client::connect(addr) else { return 0 };
                while !stop.load(Ordering::Relaxed) && c.execute("SELECT count() FROM d").is_ok() {
                    n += 1;
                }
                n
            })
        });
        std::thread::sleep(Duration::from_millis(20 + rng.below(380) as u64));
        server.kill()?;
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            reads += t.join().map_err(|_| anyhow::anyhow!("a kill-workload thread panicked"))?;
        }
    }
    // Every batch counted, on a server started once more.
    let server = start(&mut restart_ms)?;
    let mut c = Client::connect(server.addr)?;
    let per_batch = c.execute("SELECT batch, count() FROM d GROUP BY batch")?;
    let totals = c.execute("SELECT count(), uniqExact(id) FROM d")?;
    server.stop()?;
    let mut present: BTreeMap<u64, u64> = BTreeMap::new();
    for row in &per_batch.rows {
        if let [Value::U(b), Value::U(n)] = row[..] {
            present.insert(b, n);
        }
    }
    let acked = acked.lock().unwrap().clone();
    let rows_lost: u64 = acked.iter().map(|b| KILL_BATCH.saturating_sub(present.get(b).copied().unwrap_or(0))).sum();
    let partial = present.values().filter(|&&n| n != KILL_BATCH).count();
    let (rows, unique) = match totals.rows.first().map(|r| &r[..]) {
        Some([Value::U(n), Value::U(u)]) => (*n, *u),
        other => bail!("kill workload: the totals query answered {other:?}"),
    };
    restart_ms.sort_by(f64::total_cmp);
    let restarts = &restart_ms;
    Ok(Kills {
        workload: "kill".into(),
        kills: kills as u64,
        writers: writers as u64,
        batch_rows: KILL_BATCH,
        batches_acked: acked.len() as u64,
        rows_acked: acked.len() as u64 * KILL_BATCH,
        rows_present: rows,
        rows_lost,
        duplicates: rows - unique,
        partial_batches: partial as u64,
        reads,
        restart_ms_median: restarts[restarts.len() / 2],
        restart_ms_max: restarts[restarts.len() - 1],
    })
}

/// Every worker answers the large query at once (so its encoding buffers
/// are grown, as in any busy server), then all is closed. The RSS after
/// that is the baseline; the peak during it (VmHWM: the server loaded
/// nothing before) is one large answer's working set on every worker, the
/// base the answer budget adds to.
fn warm_up(server: &ServerChild) -> Result<(u64, u64)> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let addr = server.addr;
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            std::thread::spawn(move || -> Result<()> {
                let mut s = Raw::connect(addr)?;
                s.send(&frame(protocol::QUERY, 1, 0, BIG))?;
                let (st, body) = s.recv()?.context("warm-up: no answer")?;
                if st != 200 {
                    bail!("warm-up query: status {st}: {}", String::from_utf8_lossy(&body));
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| anyhow::anyhow!("warm-up thread panicked"))??;
    }
    std::thread::sleep(Duration::from_millis(200));
    Ok(server.rss().map_or((0, 0), |r| (r.rss, r.peak)))
}

/// The flights, all answered before any connection closes; the calls, the
/// size of one large answer, and the answer bytes the server then holds
/// (its `stats`, every flight's connection still open).
fn run_flight(server: &ServerChild, connections: usize, flight: u32, seen: &Seen) -> Result<(u64, usize, Option<u64>)> {
    let addr = server.addr;
    let threads: Vec<_> = (0..connections)
        .map(|_| {
            let seen = seen.clone();
            std::thread::spawn(move || -> Result<(Raw, usize)> {
                let mut s = Raw::connect(addr)?;
                let bytes: Vec<u8> = (1..=flight).flat_map(|p| frame(protocol::QUERY, p, 0, BIG)).collect();
                s.send(&bytes)?;
                let mut size = 0;
                for _ in 0..flight {
                    let (st, body) = s.recv()?.context("flight: the server closed")?;
                    if st == 200 {
                        size = body.len();
                    }
                    count(&seen, "flight", st);
                }
                Ok((s, size))
            })
        })
        .collect();
    let mut held_open = Vec::new();
    let mut size = 0;
    for t in threads {
        let (conn, n) = t.join().map_err(|_| anyhow::anyhow!("flight thread panicked"))??;
        held_open.push(conn);
        size = size.max(n);
    }
    let mut c = crate::client::Client::connect(addr)?;
    let held = Some(server.stats(&mut c)?.answer_bytes);
    Ok((u64::from(flight) * connections as u64, size, held))
}

fn count(seen: &Seen, act: &str, status: u32) {
    *seen.lock().unwrap().entry(act.to_string()).or_default().entry(status).or_default() += 1;
}

fn run_soak(addr: SocketAddr, clients: usize, seconds: f64, seed: u64, seen: &Seen) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let answers: Arc<Mutex<BTreeMap<&'static str, Vec<u8>>>> = Default::default();
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (seen, answers) = (seen.clone(), answers.clone());
            std::thread::spawn(move || -> Result<u64> {
                let mut rng = Rng((seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(i as u64 + 1) | 1);
                // NOTE: not the insert seed: its mutants insert rows into `t`,
                // and the ordinary queries' answers would change for a good reason.
                let seeds: Vec<_> = fuzzing::seeds().into_iter().filter(|(n, _)| *n != "insert").collect();
                let mut calls = 0;
                while Instant::now() < deadline {
                    calls += act(addr, &mut rng, &seeds, &seen, &answers)?;
                }
                Ok(calls)
            })
        })
        .collect();
    let mut calls = 0;
    for t in threads {
        calls += t.join().map_err(|_| anyhow::anyhow!("soak thread panicked"))??;
    }
    Ok(calls)
}

/// One hostile (or ordinary) act on a new connection; the calls it made.
fn act(
    addr: SocketAddr,
    rng: &mut Rng,
    seeds: &[(&'static str, Vec<u8>)],
    seen: &Seen,
    answers: &Mutex<BTreeMap<&'static str, Vec<u8>>>,
) -> Result<u64> {
    let mut s = Raw::connect(addr)?;
    let one = |s: &mut Raw, name: &str, sql: &[u8]| -> Result<u64> {
        s.send(&frame(protocol::QUERY, 1, 0, sql))?;
        if let Some((st, _)) = s.recv()? {
            count(seen, name, st);
        }
        Ok(1)
    };
    Ok(match rng.below(8) {
        0 => {
            let sql = format!("SELECT count() FROM t WHERE {}", vec!["id = 1"; 4_000].join(" AND "));
            one(&mut s, "deep", sql.as_bytes())?
        }
        1 => one(&mut s, "names", br#"CREATE TABLE "q/../../escape" (a UInt64) ORDER BY a"#)?,
        2 => {
            // A held flight: 20 large answers, read, never finished, then closed.
            let bytes: Vec<u8> = (1..=20).flat_map(|p| frame(protocol::QUERY, p, 0, BIG)).collect();
            s.send(&bytes)?;
            for _ in 0..20 {
                match s.recv()? {
                    Some((st, _)) => count(seen, "held", st),
                    None => break,
                }
            }
            20
        }
        3 => {
            // Unread: 20 large answers asked for, none read, closed after a second.
            let bytes: Vec<u8> = (1..=20).flat_map(|p| frame(protocol::QUERY, p, 0, BIG)).collect();
            s.send(&bytes)?;
            std::thread::sleep(Duration::from_secs(1));
            count(seen, "unread", 0);
            20
        }
        4 => {
            // A stalled frame: a header promising 1 MiB, three bytes of it, then gone.
            let mut bytes = (1u32 << 20).to_le_bytes().to_vec();
            bytes.extend_from_slice(&[1, 2, 3]);
            s.send(&bytes)?;
            std::thread::sleep(Duration::from_millis(200));
            count(seen, "stalled", 0);
            0
        }
        5 => {
            let base = &seeds[rng.below(seeds.len())].1;
            let input = fuzzing::mutate(rng, base);
            let _ = s.stream.write_all(&input).and_then(|_| s.stream.shutdown(Shutdown::Write));
            let mut n = 0;
            while let Some((st, _)) = s.recv()? {
                count(seen, "mutant", st);
                n += 1;
            }
            n
        }
        6 => {
            let list = (0..10_000).map(|i| (i * 13).to_string()).collect::<Vec<_>>().join(",");
            one(&mut s, "in-list", format!("SELECT count() FROM t WHERE id IN ({list})").as_bytes())?
        }
        _ => {
            // Ordinary work: its answer must not change while others misbehave.
            let (name, sql) = workload::QUERIES[rng.below(workload::QUERIES.len())];
            s.send(&frame(protocol::QUERY, 1, 0, sql.as_bytes()))?;
            let (st, body) = s.recv()?.context("an ordinary query went unanswered")?;
            count(seen, "ordinary", st);
            if st == 200 {
                let mut a = answers.lock().unwrap();
                let first = a.entry(name).or_insert_with(|| body.clone());
                if *first != body {
                    bail!("{name}: an answer differs from the first one while hostile clients ran");
                }
            }
            1
        }
    })
}

/// A raw connection: frames out, (status, body) in.
struct Raw {
    stream: TcpStream,
    got: Vec<u8>,
}

impl Raw {
    fn connect(addr: SocketAddr) -> Result<Raw> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Raw { stream, got: Vec::new() })
    }

    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        Ok(self.stream.write_all(bytes)?)
    }

    /// The next answer, or `None` once the server closed.
    fn recv(&mut self) -> Result<Option<(u32, Vec<u8>)>> {
        loop {
            if let Some(p) = self.got.first_chunk::<4>() {
                let len = u32::from_le_bytes(*p) as usize;
                if self.got.len() >= 4 + len {
                    let r =
                        zap::read::<zap::Response>(&self.got[4..4 + len]).context("an answer that does not decode")?;
                    let answer = (r.status(), r.body().map(<[u8]>::to_vec).unwrap_or_default());
                    self.got.drain(..4 + len);
                    return Ok(Some(answer));
                }
            }
            let mut buf = [0u8; 64 << 10];
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(None),
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
}
