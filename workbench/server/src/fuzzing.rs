//! The request path under fuzzing: bytes as a client's flight → frames →
//! envelopes → SQL parser → planner → executor, on a small table, through
//! a real server on loopback.
//!
//! One [`Target`] serves every input: [`Target::exercise`] sends the input
//! on a new connection, half-closes it, and reads answers until the server
//! closes. An input passes when the server answers with a known status or
//! closes within [`Target::DEADLINE`], and every answer status is one the
//! protocol documents, never a 500 (every mistake a client can make is
//! 4xx). A crash (a stack overflow, an abort) ends the process, so the
//! harness fails.
//!
//! Two drivers share it: `tests/fuzz_requests.rs` (the test command: the
//! seeds, then structure-aware mutations for a bounded time; no nightly
//! toolchain needed) and `fuzz/fuzz_targets/requests.rs` (coverage-guided,
//! libFuzzer through cargo-fuzz, for longer runs by hand). Inputs that
//! failed belong in `fuzz/seeds/`, which both drivers replay.

use crate::limits::Config;
use crate::protocol;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use zap::{Builder, Request, Response};

/// A server over a small table, for one fuzzing process.
pub struct Target {
    running: crate::Running,
    /// How many answers of each status the inputs drew.
    pub statuses: std::collections::BTreeMap<u32, u64>,
    pub inputs: u64,
}

/// Why an input failed.
#[derive(Debug)]
pub enum Failure {
    /// No answer and no close within [`Target::DEADLINE`].
    Hang { answers: usize },
    /// An answer with a status the protocol does not document, or a 500.
    Status { status: u32, body: String },
    /// An answer the client cannot decode.
    Garbled(String),
    /// A fresh connection's ping went unanswered after the input.
    Dead(String),
}

/// Frames a request envelope (what any client sends).
pub fn frame(method: u32, promise: u32, target: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Builder::new();
    let mut r = b.root::<Request>();
    r.method(method);
    r.promise(promise);
    r.target(target);
    r.payload(payload);
    let msg = r.finish().map(<[u8]>::to_vec).unwrap_or_default();
    let mut out = (msg.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

/// Every status the server documents but two: 500 (the server failed) and
/// 507 (its disk is full, which fuzzing never makes so).
const KNOWN: &[u32] = &[
    protocol::OK,
    protocol::BAD_REQUEST,
    protocol::NOT_FOUND,
    protocol::TIMEOUT,
    protocol::GONE,
    protocol::TOO_LARGE,
    protocol::UNPROCESSABLE,
    protocol::FAILED_DEPENDENCY,
    protocol::TOO_MANY,
    protocol::UNAVAILABLE,
    protocol::NOT_BUILT,
];

impl Target {
    /// DEADLINE = 10 s: twice the fuzzing server's query timeout, room for
    /// a stalled frame's timeout, far below a hang.
    pub const DEADLINE: Duration = Duration::from_secs(10);

    /// Starts a server on `dir` with table `t` (1,000 rows) and small limits
    /// (so that fuzzing reaches them): 2 s per query, 1 MiB frames, 16
    /// promises, 4 MiB of answers a connection.
    pub fn start(dir: &Path) -> Result<Target, String> {
        let _ = std::fs::remove_dir_all(dir);
        let db = datastore::Db::open(dir).map_err(|e| e.to_string())?;
        crate::workload::load(&db, 1_000, 7, 500, true, |_, _| {}).map_err(|e| e.to_string())?;
        drop(db);
        let cfg = Config {
            max_frame: 1 << 20,
            max_promises: 16,
            query_timeout: Duration::from_secs(2),
            stall_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(2),
            conn_answer_budget: 4 << 20,
            answer_budget: 16 << 20,
            max_result_rows: 10_000,
            ..Config::default()
        };
        let running = crate::start(dir, "127.0.0.1:0", cfg).map_err(|e| e.to_string())?;
        Ok(Target { running, statuses: Default::default(), inputs: 0 })
    }

    /// Sends `flight` on a new connection, half-closes, reads to the end.
    pub fn exercise(&mut self, flight: &[u8]) -> Result<(), Failure> {
        self.inputs += 1;
        let dead = |e: std::io::Error| Failure::Dead(e.to_string());
        let mut s = TcpStream::connect(self.running.addr).map_err(dead)?;
        s.set_read_timeout(Some(Self::DEADLINE)).map_err(dead)?;
        // A refused write (the server closed first, after a bad frame) is an answer too.
        let _ = s.write_all(flight).and_then(|_| s.shutdown(Shutdown::Write));
        let t0 = Instant::now();
        let (mut got, mut answers) = (Vec::new(), 0);
        let mut buf = [0u8; 64 << 10];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => break,
                Err(_) => return Err(Failure::Hang { answers }),
            }
            answers += self.take_answers(&mut got)?;
            if t0.elapsed() > Self::DEADLINE {
                return Err(Failure::Hang { answers });
            }
        }
        self.take_answers(&mut got)?;
        Ok(())
    }

    /// Decodes and checks the complete answers at the front of `got`.
    fn take_answers(&mut self, got: &mut Vec<u8>) -> Result<usize, Failure> {
        let mut used = 0;
        let mut n = 0;
        while let Some(p) = got[used..].first_chunk::<4>() {
            let len = u32::from_le_bytes(*p) as usize;
            let Some(msg) = got.get(used + 4..used + 4 + len) else { break };
            let r = zap::read::<Response>(msg).map_err(|e| Failure::Garbled(e.to_string()))?;
            let status = r.status();
            *self.statuses.entry(status).or_default() += 1;
            if !KNOWN.contains(&status) {
                let body = String::from_utf8_lossy(r.body().unwrap_or_default()).into_owned();
                return Err(Failure::Status { status, body });
            }
            used += 4 + len;
            n += 1;
        }
        got.drain(..used);
        Ok(n)
    }

    /// A fresh connection's ping is answered.
    pub fn alive(&self) -> Result<(), Failure> {
        let mut c = crate::client::Client::connect(self.running.addr).map_err(|e| Failure::Dead(e.to_string()))?;
        let p = c.ping().map_err(|e| Failure::Dead(e.to_string()))?;
        c.wait(p).map(|_| ()).map_err(|e| Failure::Dead(e.to_string()))
    }

    /// Bytes of answers the server holds (`stats`), all connections closed.
    pub fn held(&self) -> Result<u64, Failure> {
        let mut c = crate::client::Client::connect(self.running.addr).map_err(|e| Failure::Dead(e.to_string()))?;
        let p = c.stats().map_err(|e| Failure::Dead(e.to_string()))?;
        let text = c.wait_text(p).map_err(|e| Failure::Dead(e.to_string()))?;
        let v: records::server::Stats = serde_json::from_str(&text).map_err(|e| Failure::Garbled(e.to_string()))?;
        Ok(v.answer_bytes)
    }
}

/// The seed flights: every method, a dependent chain, an insert, a finish,
/// and SQL at each of the parser's limits.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let q = |p: u32, t: u32, sql: &str| frame(protocol::QUERY, p, t, sql.as_bytes());
    let (mut w, mut b) = (protocol::ColumnsWriter::default(), Builder::new());
    let batch = crate::workload::batch(3, 5_000, 5_010);
    use datastore::ColumnType as T;
    let schema = [("id", T::UInt64), ("user_id", T::UInt32), ("ts", T::DateTime), ("value", T::Float64)]
        .into_iter()
        .chain([("category", T::LowCardinalityString)])
        .map(|(n, t)| (n.to_string(), t))
        .collect::<Vec<_>>();
    let insert = protocol::encode_batch(&mut w, &mut b, "t", &schema, &batch).map(<[u8]>::to_vec).unwrap_or_default();
    let and_chain = format!("SELECT count() FROM t WHERE {}", vec!["id = 1"; 300].join(" AND "));
    let long_in = format!(
        "SELECT count() FROM t WHERE id IN ({})",
        (0..2_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    );
    vec![
        ("ping", frame(protocol::PING, 1, 0, b"")),
        ("stats", frame(protocol::STATS, 1, 0, b"")),
        ("heap-profile", frame(protocol::HEAP_PROFILE, 1, 0, b"")),
        ("query", q(1, 0, "SELECT category, count() FROM t GROUP BY category ORDER BY category")),
        ("top", q(1, 0, "SELECT user_id, sum(value) AS s FROM t GROUP BY user_id ORDER BY s DESC LIMIT 5")),
        ("chain", [q(1, 0, "SELECT min(id) FROM t"), q(2, 1, "SELECT max(id) FROM t WHERE id > $prev"), q(3, 2, "SELECT count() FROM t WHERE id <= $prev")].concat()),
        ("finish", [q(1, 0, "SELECT count() FROM t"), frame(zap::rpc::FINISH, 0, 1, &1u32.to_le_bytes()), q(2, 1, "SELECT 1")].concat()),
        ("insert", frame(protocol::INSERT, 1, 0, &insert)),
        ("create", q(1, 0, "CREATE TABLE u (a UInt64, b String) ORDER BY (a)")),
        ("and-chain", q(1, 0, &and_chain)),
        ("in-list", q(1, 0, &long_in)),
        ("nested", q(1, 0, &format!("SELECT count() FROM t WHERE {}id = 1{}", "(".repeat(30), ")".repeat(30)))),
        ("quantile", q(1, 0, "SELECT quantile(0.9)(value), uniqExact(user_id) FROM t WHERE ts BETWEEN '2020-01-01 00:00:00' AND '2030-01-01 00:00:00'")),
        ("bad-frame", [frame(protocol::PING, 1, 0, b""), vec![0xff, 0xff, 0xff, 0x7f, 1, 2, 3]].concat()),
    ]
}

/// Pieces of SQL the mutator splices in: the engine's keywords, operators
/// and names, and the constructs that once broke the server.
const PIECES: &[&str] = &[
    "SELECT ",
    " FROM t",
    " WHERE ",
    " GROUP BY ",
    " ORDER BY ",
    " LIMIT ",
    " AND ",
    " OR ",
    "NOT ",
    " IN (",
    ")",
    "(",
    ", ",
    " = ",
    " != ",
    " < ",
    " >= ",
    " BETWEEN ",
    "count()",
    "sum(value)",
    "avg(value)",
    "min(id)",
    "max(ts)",
    "quantile(0.5)(value)",
    "uniqExact(user_id)",
    "id",
    "user_id",
    "category",
    "value",
    "ts",
    "$prev",
    "'a'",
    "1",
    "-1",
    "18446744073709551615",
    "1e308",
    "NULL",
    " DESC",
    "*",
    "+",
    "\"q/../x\"",
    "CREATE TABLE ",
    " (a UInt64) ORDER BY a",
    "\u{0}",
    "é",
];

/// A small xorshift generator: the fuzz test's runs are repeatable by seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// One mutation of `input`: a byte flipped, a cut, a frame repeated, or a
/// new query frame whose SQL splices [`PIECES`] (repeated up to thousands of
/// times: chains, nesting, long lists) into a seed's.
pub fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    match rng.below(6) {
        0 if !out.is_empty() => {
            let i = rng.below(out.len());
            out[i] ^= 1 << rng.below(8);
        }
        1 if !out.is_empty() => out.truncate(rng.below(out.len())),
        2 => {
            let copy = out.clone();
            out.extend_from_slice(&copy);
        }
        3 => {
            // Promise and target numbers from a small range, so calls collide and chain.
            let (p, t) = (rng.below(20) as u32, rng.below(4) as u32);
            out.extend(frame(rng.below(6) as u32, p, t, &sql(rng)));
        }
        _ => out.extend(frame(protocol::QUERY, 1 + rng.below(8) as u32, rng.below(3) as u32, &sql(rng))),
    }
    out
}

/// SQL built from [`PIECES`]: mostly plausible, often wrong, sometimes huge.
pub fn sql(rng: &mut Rng) -> Vec<u8> {
    let mut s = String::from(["SELECT ", "SELECT count() FROM t WHERE ", ""][rng.below(3)]);
    for _ in 0..1 + rng.below(12) {
        let piece = PIECES[rng.below(PIECES.len())];
        // Now and then a piece many times over: the chains and nesting that crashed a worker.
        let times = if rng.below(8) == 0 { 1 + rng.below(3_000) } else { 1 };
        for _ in 0..times {
            s.push_str(piece);
        }
    }
    s.into_bytes()
}
