//! Closed-loop query throughput over ZAP: for each concurrency c, c
//! clients (threads, one connection each) run one workload query back to
//! back for a fixed time; QPS and latency percentiles per (query, c,
//! round). The server's RSS is sampled every 100 ms throughout.
//!
//! Beside it, when `chdb` names a command, upstream ClickHouse in process
//! (chDB, `scripts/chdb_engine.py`) on the same rows (loaded from this
//! cell's Parquet export into `MergeTree ORDER BY (category, ts)`, optimised
//! to one part), the same queries (`quantileExact` for our exact quantile),
//! the same closed loop; at each `chdb_threads` setting (0 = its default,
//! one per core). chDB runs one query at a time per process, so each
//! ClickHouse client is a process of its own over a hard-linked copy of the
//! loaded table (see the script): c clients are c queries at once, as on
//! our server.
//!
//! Ours runs at each `threads` setting (a server per setting, started with
//! `--query-threads`; 0 = every core the CPU budget grants).
//!
//! Every (c, query) runs `rounds` times; in each round every engine runs
//! once, ours first in even rounds and ClickHouse first in odd ones, so a
//! ratio has one value a round and drift favours neither side.
//!
//! Params: `rows` (table size), `concurrency` (client counts), `seconds`
//! per (query, c, engine, round), `rounds`, `batch` (rows per insert when
//! loading), `threads`, `chdb` (command, e.g. `[".venv/bin/python",
//! "scripts/chdb_engine.py"]`), `chdb_threads`.
//! Records ([`records::server::throughput`]): a query record per engine,
//! query, concurrency and round; memory samples through the mix (ours:
//! VmRSS; ClickHouse: the PSS summed over the client processes running);
//! one peer record per ClickHouse setting: whether the peer ran, its
//! version, the max_threads in effect, its active part count, or why not;
//! per query and threads setting of ours, `rounds` floor records (the
//! bytes it must touch read once, [`crate::floor`]), after the engines stop;
//! from the sampling build, one heap-profile record per server of ours (the
//! `heap_profile` call after the loops: its time and size).
//!
//! Every answer is checked: ours equal to our first answer of the query
//! (exactly), each ClickHouse client's answers equal to its own first (in
//! the script), and every ClickHouse client's first equal to ours (counts
//! exact, floats to 1e-9 relative, rows in order where the query orders
//! them): an engine that answers differently fails the cell.

use super::{percentile, progress, Cell, Records, ServerChild};
use crate::client::{Client, Rows};
use crate::workload;
use anyhow::{bail, Context, Result};
use records::server::throughput::{Anatomy, HeapProfile, Params, Peer as PeerRecord, Query, Record, Rss};
use serde_json::json;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    let (rows, seconds, rounds, batch) = (p.rows, p.seconds, p.rounds, p.batch);
    let levels: Vec<usize> = p.concurrency.clone();
    if levels.is_empty() || levels.contains(&0) || !seconds.is_finite() || seconds <= 0.0 || rounds == 0 {
        bail!("{}: params.concurrency needs counts ≥ 1, params.seconds > 0 and params.rounds ≥ 1", cell.experiment);
    }
    let data = super::work_dir(cell)?.join("db");
    let t0 = Instant::now();
    let db = datastore::Db::open(&data)?;
    workload::load(&db, rows, cell.seed, batch, true, |_, _| {})
        .with_context(|| format!("loading {rows} rows into {}", data.display()))?;
    drop(db);
    eprintln!("loaded {rows} rows in {:.1} s", t0.elapsed().as_secs_f64());

    let fds = crate::limits::raise_fd_limit();
    let max = levels.iter().copied().max().unwrap_or(1);
    if (fds as usize) < 3 * max + 64 {
        bail!("the load driver may open {fds} files; {max} clients need more (params.concurrency)");
    }
    let our_threads: Vec<u64> = p.threads.clone();
    if our_threads.is_empty() {
        bail!("{}: params.threads needs one setting at least", cell.experiment);
    }
    // One server per setting, all on the same (read-only) table; only the
    // first writes a dhat trace.
    let mut servers = Vec::new();
    for (i, &t) in our_threads.iter().enumerate() {
        let trace = if i == 0 { cell.trace.as_deref() } else { None };
        let server = ServerChild::spawn(&data, trace, &["--query-threads", &t.to_string()])?;
        servers.push((engine_label("ours", t), server));
    }
    let server = &servers[0].1;
    let chdb_cmd: Vec<String> = p.chdb.clone();
    let chdb_threads: Vec<u64> = p.chdb_threads.clone();
    let mut peer = match chdb_cmd.is_empty() {
        true => None,
        false => match Peer::start(&chdb_cmd, cell, rows, batch, max) {
            Ok(mut p) => {
                for &t in &chdb_threads {
                    let effective = p.max_threads(t)?;
                    out.emit(&Record::Peer(PeerRecord {
                        engine: engine_label("clickhouse", t),
                        available: true,
                        version: Some(p.version.clone()),
                        load_seconds: Some(p.load_seconds),
                        parts: Some(p.parts),
                        max_threads: Some(effective),
                        client_processes: Some(p.workers.len() as u64),
                        reason: None,
                    }))?;
                }
                Some(p)
            }
            Err(e) => {
                eprintln!("note: ClickHouse (chDB) not measured: {e:#}");
                out.emit(&Record::Peer(PeerRecord {
                    engine: "clickhouse".into(),
                    available: false,
                    version: None,
                    load_seconds: None,
                    parts: None,
                    max_threads: None,
                    client_processes: None,
                    reason: Some(format!("{e:#}")),
                }))?;
                None
            }
        },
    };
    let expected: Vec<Rows> = {
        let mut c = Client::connect(server.addr)?;
        workload::QUERIES.iter().map(|(_, sql)| c.execute(sql)).collect::<Result<_, _>>()?
    };
    if let Some(p) = peer.as_mut() {
        // Each ClickHouse client process answers each query once before
        // anything is timed, as our server did for `expected` just above.
        for (qi, (name, sql)) in workload::QUERIES.iter().enumerate() {
            for &t in &chdb_threads {
                let r = p.run(&clickhouse_sql(sql), p.workers.len(), 1e-6, t)?;
                r.check(name, sql, &expected[qi])?;
            }
        }
    }

    // The sampler: the memory of the engine running now, every 100 ms.
    let phase = Arc::new(Mutex::new(Phase {
        engine: "ours".into(),
        query: "warm-up".into(),
        c: 0,
        pids: vec![server.pid()],
        pss: false,
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (phase, stop) = (phase.clone(), stop.clone());
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let p = phase.lock().map(|p| p.clone()).ok();
                if let Some(p) = p {
                    if let Some(bytes) = p.bytes() {
                        samples.push((start.elapsed().as_secs_f64(), bytes, p));
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            samples
        })
    };
    let set_phase = |engine: &str, query: &str, c: usize, pids: Vec<u32>, pss: bool| {
        if let Ok(mut p) = phase.lock() {
            *p = Phase { engine: engine.into(), query: query.into(), c, pids, pss };
        }
    };

    let engines = servers.len() + peer.as_ref().map_or(0, |_| chdb_threads.len());
    let total = levels.len() * workload::QUERIES.len() * rounds * engines;
    let mut done = 0;
    let result = (|| -> Result<()> {
        for &c in &levels {
            for (qi, (name, sql)) in workload::QUERIES.iter().enumerate() {
                for round in 0..rounds {
                    // Ours first in even rounds, ClickHouse first in odd ones.
                    for side in [round % 2, 1 - round % 2] {
                        if side == 0 {
                            for (engine, server) in &servers {
                                set_phase(engine, name, c, vec![server.pid()], false);
                                let (lat, secs) = closed_loop(server.addr, sql, &expected[qi], c, seconds)
                                    .with_context(|| format!("{engine}: {name} at {c} client(s)"))?;
                                let n = lat.len();
                                emit_query(out, engine, name, c, round, rows, lat, secs, n as u64, None)?;
                                // Where its resident set came from, after the round.
                                if let Some(a) = probe::smaps::Anatomy::read(server.pid()) {
                                    out.emit(&Record::Anatomy(Anatomy {
                                        engine: engine.to_string(),
                                        query: name.to_string(),
                                        concurrency: c as u64,
                                        round: round as u64,
                                        rows,
                                        text_bytes: a.text,
                                        text_size_bytes: a.text_size,
                                        binary_other_bytes: a.binary_other,
                                        files_bytes: a.files,
                                        heap_bytes: a.heap,
                                        stack_bytes: a.stacks,
                                        anon_bytes: a.anon,
                                        rss_bytes: a.rss(),
                                    }))?;
                                }
                                done += 1;
                                progress(done, total);
                            }
                            continue;
                        }
                        let Some(p) = peer.as_mut() else { continue };
                        for &threads in &chdb_threads {
                            let engine = engine_label("clickhouse", threads);
                            set_phase(&engine, name, c, p.pids(c), true);
                            let r = p
                                .run(&clickhouse_sql(sql), c, seconds, threads)
                                .with_context(|| format!("ClickHouse: {name} at {c} client(s)"))?;
                            r.check(name, sql, &expected[qi])?;
                            let mut engine_ms = r.engine_ms;
                            let engine_p50 = Some(percentile(&mut engine_ms, 50.0));
                            let checked = r.answers as u64;
                            emit_query(
                                out,
                                &engine,
                                name,
                                c,
                                round,
                                rows,
                                r.latencies,
                                r.elapsed,
                                checked,
                                engine_p50,
                            )?;
                            done += 1;
                            progress(done, total);
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    for (t, rss, p) in samples {
        out.emit(&Record::Rss(Rss {
            t_s: t,
            rss_bytes: rss,
            engine: p.engine,
            query: p.query,
            concurrency: p.c as u64,
            rows,
        }))?;
    }
    if let Some(p) = peer {
        p.quit();
    }
    result?;
    for (engine, s) in &servers {
        if let Some(h) = heap_profile(engine, s)? {
            out.emit(&Record::HeapProfile(h))?;
        }
    }
    for (_, s) in servers {
        s.stop()?;
    }
    // Each query's floor at each of our threads settings, on the quiet
    // machine the engines have just left ([`crate::floor`]).
    for &t in &our_threads {
        super::datastore_queries::floors(out, rows, rounds, t as usize, Record::Floor)?;
    }
    Ok(())
}

/// One `heap_profile` call, timed; `None` from a build that does not sample
/// (it answers 501: not in this build).
fn heap_profile(engine: &str, server: &ServerChild) -> Result<Option<HeapProfile>> {
    let mut c = Client::connect(server.addr)?;
    let t = Instant::now();
    let p = c.heap_profile()?;
    match c.wait_bytes(p) {
        Ok(body) => Ok(Some(HeapProfile {
            engine: engine.to_string(),
            answer_ms: t.elapsed().as_secs_f64() * 1e3,
            answer_bytes: body.len() as u64,
        })),
        Err(crate::client::ClientError::Status { status: crate::protocol::NOT_BUILT, .. }) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("{engine}: heap_profile")),
    }
}

/// An engine's name in the records: `ours`, `ours-1-thread`, `clickhouse`, …
pub fn engine_label(base: &str, threads: u64) -> String {
    match threads {
        0 => base.to_string(),
        n => format!("{base}-{n}-thread"),
    }
}

/// What runs now, for the memory sampler.
#[derive(Clone, Default)]
struct Phase {
    engine: String,
    query: String,
    c: usize,
    pids: Vec<u32>,
    /// Sum the processes' PSS (ClickHouse's client processes share chDB's
    /// library and the table's page cache); else the one pid's VmRSS.
    pss: bool,
}

impl Phase {
    fn bytes(&self) -> Option<u64> {
        match self.pss {
            false => probe::rss::read_pid(*self.pids.first()?).map(|r| r.rss),
            true => self.pids.iter().map(|&p| probe::rss::read_pss(p)).sum(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn emit_query(
    out: &mut Records,
    engine: &str,
    query: &str,
    c: usize,
    round: usize,
    rows: u64,
    lat: Vec<f64>,
    secs: f64,
    answers_checked: u64,
    engine_p50_ms: Option<f64>,
) -> Result<()> {
    let mut ms: Vec<f64> = lat.iter().map(|d| d * 1e3).collect();
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    out.emit(&Record::Query(Query {
        engine: engine.to_string(),
        query: query.to_string(),
        concurrency: c as u64,
        round: Some(round as u64),
        rows,
        queries: ms.len() as u64,
        seconds: secs,
        qps: ms.len() as f64 / secs,
        p50_ms: percentile(&mut ms, 50.0),
        p99_ms: percentile(&mut ms, 99.0),
        mean_ms: mean,
        answers_checked: Some(answers_checked),
        engine_p50_ms,
    }))
}

/// Our SQL in ClickHouse's dialect: our `quantile` is exact, ClickHouse's
/// is sampled, so theirs is `quantileExact`.
pub fn clickhouse_sql(sql: &str) -> String {
    sql.replace("quantile(", "quantileExact(")
}

/// A cell of an answer, compared across engines.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Num(f64),
    Text(String),
    Null,
}

fn ours_cells(r: &Rows) -> Vec<Vec<Answer>> {
    use datastore::Value;
    r.rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    Value::U(x) => Answer::Num(*x as f64),
                    Value::I(x) => Answer::Num(*x as f64),
                    Value::F(x) => Answer::Num(*x),
                    Value::S(s) => Answer::Text(s.clone()),
                    Value::Null => Answer::Null,
                })
                .collect()
        })
        .collect()
}

fn their_cells(rows: &[Vec<serde_json::Value>]) -> Vec<Vec<Answer>> {
    rows.iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    serde_json::Value::Number(n) => Answer::Num(n.as_f64().unwrap_or(f64::NAN)),
                    // 64-bit integers may arrive quoted.
                    serde_json::Value::String(s) => s.parse().map_or_else(|_| Answer::Text(s.clone()), Answer::Num),
                    serde_json::Value::Null => Answer::Null,
                    other => Answer::Text(other.to_string()),
                })
                .collect()
        })
        .collect()
}

fn close(a: &Answer, b: &Answer) -> bool {
    match (a, b) {
        (Answer::Num(x), Answer::Num(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

/// Both engines' answers agree: counts exactly, floats to 1e-9 relative;
/// rows compared in order when the query orders them, as sets otherwise.
fn same_answer(name: &str, sql: &str, ours: &Rows, theirs: &[Vec<serde_json::Value>]) -> Result<()> {
    let (mut a, mut b) = (ours_cells(ours), their_cells(theirs));
    if !sql.contains("ORDER BY") {
        let key = |r: &Vec<Answer>| format!("{:?}", r.first());
        a.sort_by_key(key);
        b.sort_by_key(key);
    }
    let same = a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(p, q)));
    if !same {
        bail!("{name}: ClickHouse answered {b:?}, we answered {a:?}");
    }
    Ok(())
}

/// One `scripts/chdb_engine.py` process: a JSON-lines conversation.
struct Worker {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Worker {
    /// Starts the script; its first line says whether chDB is there.
    fn start(cmd: &[String]) -> Result<(Worker, serde_json::Value)> {
        let (prog, args) = cmd.split_first().context("params.chdb is empty")?;
        let mut child = std::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} (params.chdb)", cmd.join(" ")))?;
        let stdin = child.stdin.take().context("chdb stdin")?;
        let stdout = std::io::BufReader::new(child.stdout.take().context("chdb stdout")?);
        let mut w = Worker { child, stdin, stdout };
        let hello = w.read()?;
        if hello["ready"] != true {
            bail!("{}", hello["reason"].as_str().unwrap_or("chDB did not start"));
        }
        Ok((w, hello))
    }

    fn send(&mut self, req: serde_json::Value) -> Result<()> {
        writeln!(self.stdin, "{req}")?;
        self.stdin.flush()?;
        Ok(())
    }

    fn read(&mut self) -> Result<serde_json::Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("a chDB process closed its output");
        }
        let r: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("chDB printed {line:?}"))?;
        if let Some(e) = r.get("error") {
            bail!("chDB: {e}");
        }
        Ok(r)
    }

    fn call(&mut self, req: serde_json::Value) -> Result<serde_json::Value> {
        self.send(req)?;
        self.read()
    }

    fn quit(mut self) {
        let _ = self.send(json!({"cmd": "quit"}));
        let _ = self.child.wait();
    }
}

/// Upstream ClickHouse as concurrent clients: the table loaded once into a
/// data directory, then one chDB process per client over its own
/// hard-linked copy of it.
struct Peer {
    workers: Vec<Worker>,
    version: String,
    load_seconds: f64,
    parts: u64,
}

/// What `clients` ClickHouse clients did in one closed loop.
struct PeerRun {
    latencies: Vec<f64>,
    engine_ms: Vec<f64>,
    elapsed: f64,
    answers: usize,
    /// Each client's first answer.
    firsts: Vec<Vec<Vec<serde_json::Value>>>,
}

impl PeerRun {
    /// Every client's first answer is ours (each client compared its other
    /// answers with its first and found none differing, or `run` failed).
    fn check(&self, name: &str, sql: &str, ours: &Rows) -> Result<()> {
        self.firsts.iter().try_for_each(|f| same_answer(name, sql, ours, f))
    }
}

impl Peer {
    fn start(cmd: &[String], cell: &Cell, rows: u64, batch: u64, clients: usize) -> Result<Peer> {
        let parquet = super::work_dir(cell)?.join("t.parquet");
        workload::write_parquet(&parquet, cell.seed, rows, batch)
            .with_context(|| format!("writing {}", parquet.display()))?;
        let dir = super::work_dir(cell)?.join("clickhouse");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let loaded_dir = dir.join("loaded");
        let (mut loader, hello) = Worker::start(cmd)?;
        let version = format!(
            "ClickHouse {} (chDB {})",
            hello["version"].as_str().unwrap_or("?"),
            hello["chdb"].as_str().unwrap_or("?")
        );
        let loaded = loader.call(
            json!({"cmd": "load", "dir": loaded_dir, "parquet": parquet, "create": workload::CREATE_CLICKHOUSE}),
        )?;
        let _ = loader.child.wait();
        let load_seconds = loaded["seconds"].as_f64().unwrap_or(f64::NAN);
        if loaded["rows"].as_u64() != Some(rows) {
            bail!("chDB loaded {} rows from {}, not {rows}", loaded["rows"], parquet.display());
        }
        eprintln!("{version} loaded {rows} rows in {load_seconds:.1} s; starting {clients} client process(es)");
        let mut workers = Vec::with_capacity(clients);
        for _ in 0..clients {
            workers.push(Worker::start(cmd)?.0);
        }
        for (i, w) in workers.iter_mut().enumerate() {
            w.send(json!({"cmd": "open", "from": loaded_dir, "dir": dir.join(format!("client-{i}"))}))?;
        }
        let mut parts = 0;
        for w in &mut workers {
            parts = w.read()?["parts"].as_u64().unwrap_or(0);
        }
        Ok(Peer { workers, version, load_seconds, parts })
    }

    /// The max_threads ClickHouse runs a query with at setting `threads`.
    fn max_threads(&mut self, threads: u64) -> Result<u64> {
        let w = self.workers.first_mut().context("no chDB client process")?;
        let r = w.call(json!({"cmd": "info", "max_threads": threads}))?;
        r["max_threads"].as_u64().context("chDB info: max_threads")
    }

    fn pids(&self, clients: usize) -> Vec<u32> {
        self.workers.iter().take(clients).map(|w| w.child.id()).collect()
    }

    /// The first `clients` client processes run `sql` in a closed loop
    /// for `seconds`, all at once; elapsed runs from the first request to
    /// the last reply.
    fn run(&mut self, sql: &str, clients: usize, seconds: f64, threads: u64) -> Result<PeerRun> {
        let start = Instant::now();
        let ws = self.workers.get_mut(..clients).context("more clients than chDB client processes")?;
        for w in ws.iter_mut() {
            w.send(json!({"cmd": "run", "sql": sql, "seconds": seconds, "max_threads": threads}))?;
        }
        let mut r =
            PeerRun { latencies: Vec::new(), engine_ms: Vec::new(), elapsed: 0.0, answers: 0, firsts: Vec::new() };
        for w in ws.iter_mut() {
            let one = w.read()?;
            let differing = one["differing"].as_u64().unwrap_or(u64::MAX);
            if differing != 0 {
                bail!("a ClickHouse client's answers differed from its first answer ({differing} of them)");
            }
            let lat: Vec<f64> = serde_json::from_value(one["latencies"].clone()).context("chDB latencies")?;
            let ems: Vec<f64> = serde_json::from_value(one["engine_ms"].clone()).context("chDB engine_ms")?;
            r.answers += lat.len();
            r.latencies.extend(lat);
            r.engine_ms.extend(ems);
            r.firsts.push(serde_json::from_value(one["first"].clone()).context("chDB first answer")?);
        }
        r.elapsed = start.elapsed().as_secs_f64();
        Ok(r)
    }

    fn quit(self) {
        for w in self.workers {
            w.quit();
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use datastore::{ColumnType, Value};
    use serde_json::json;

    fn ours(rows: Vec<Vec<Value>>) -> Rows {
        Rows { names: vec!["c".into(), "n".into()], types: vec![ColumnType::String, ColumnType::UInt64], rows }
    }

    #[test]
    fn answers_compare_as_sets_unless_ordered() {
        let a =
            ours(vec![vec![Value::S("api".into()), Value::U(3)], vec![Value::S("web".into()), Value::F(0.1 + 0.2)]]);
        let theirs = |x: serde_json::Value| serde_json::from_value::<Vec<Vec<serde_json::Value>>>(x).unwrap();
        // Unordered GROUP BY: their order differs, 64-bit counts arrive quoted, floats within 1e-9.
        let b = theirs(json!([["web", 0.3], ["api", "3"]]));
        same_answer("q", "SELECT c, count() FROM t GROUP BY c", &a, &b).unwrap();
        // An ordered query must match in order.
        assert!(same_answer("q", "SELECT c, n FROM t ORDER BY n", &a, &b).is_err());
        // A count off by one is a different answer.
        let c = theirs(json!([["api", 4], ["web", 0.3]]));
        let e = same_answer("q", "SELECT c, count() FROM t GROUP BY c", &a, &c).unwrap_err().to_string();
        assert!(e.contains("ClickHouse answered"), "{e}");
    }

    #[test]
    fn our_exact_quantile_is_theirs_exact() {
        assert_eq!(clickhouse_sql("SELECT quantile(0.9)(value) FROM t"), "SELECT quantileExact(0.9)(value) FROM t");
    }
}
