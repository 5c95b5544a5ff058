//! The worker pool: a fixed number of threads running queries and inserts
//! for every connection, fed by a bounded queue.
//!
//! NOTE: the engine is synchronous (file reads, CPU-bound scans), so calls
//! leave the I/O thread; the queue's bound is the backpressure — a connection
//! whose call cannot be queued waits, stops reading, and TCP pushes back.

use crate::handler::Handler;
use datastore::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// What a worker runs.
pub enum Work {
    /// Consecutive queries of one connection, run in order by one worker; a
    /// query may bind `$prev` to an earlier one of the same run.
    Queries(Queries),
    /// A `Columns` message to insert.
    Insert { msg: Vec<u8> },
}

/// A run of queries: the calls, and their SQL texts in one buffer.
/// PERF: one buffer for the run, where a `String` a call was an allocation
/// and a free each link of a pipelined chain.
#[derive(Default)]
pub struct Queries {
    pub calls: Vec<QueryCall>,
    texts: String,
}

impl Queries {
    /// A run of one query.
    pub fn one(promise: u32, sql: &str, prev: Prev) -> Queries {
        let mut q = Queries { calls: Vec::with_capacity(1), texts: String::with_capacity(sql.len()) };
        q.push(promise, sql, prev);
        q
    }

    pub fn push(&mut self, promise: u32, sql: &str, prev: Prev) {
        let at = self.texts.len();
        self.texts.push_str(sql);
        self.calls.push(QueryCall { promise, sql: at..self.texts.len(), prev });
    }

    /// The calls, each with its SQL text.
    pub fn into_calls(self) -> (String, Vec<QueryCall>) {
        (self.texts, self.calls)
    }
}

/// One query of a [`Work::Queries`] run; its SQL is `texts[sql]` of the run.
pub struct QueryCall {
    pub promise: u32,
    pub sql: std::ops::Range<usize>,
    pub prev: Prev,
}

/// Where a query's `$prev` comes from.
pub enum Prev {
    None,
    /// Read from an answer the connection already holds.
    Value(Value),
    /// The first value of the answer to call `index` of the same run
    /// (promise `promise`), which runs first.
    Earlier {
        index: usize,
        promise: u32,
    },
}

/// A call's outcome: its status and answer body.
pub struct Answer {
    pub status: u32,
    pub body: Vec<u8>,
}

struct Job {
    work: Work,
    reply: oneshot::Sender<Vec<Answer>>,
}

pub struct Pool {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Pool {
    pub fn start(handler: Arc<Handler>, workers: usize, queue: usize) -> Pool {
        let (tx, rx) = mpsc::channel::<Job>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..workers.max(1))
            .map(|i| {
                let (rx, handler) = (rx.clone(), handler.clone());
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || {
                        let mut scratch = crate::handler::Scratch::default();
                        loop {
                            // NOTE: one worker waits in recv holding the lock; the
                            // others wait for the lock. Either way they sleep.
                            let job = rx.lock().map(|mut r| r.blocking_recv()).ok().flatten();
                            let Some(job) = job else { break };
                            let answer = handler.run(job.work, &mut scratch);
                            let _ = job.reply.send(answer);
                        }
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        Pool { tx: Mutex::new(Some(tx)), threads: Mutex::new(threads) }
    }

    /// Runs `work` on a worker; waits for room in the queue, then for the
    /// answers (one per query of a run, one for an insert).
    pub async fn run(&self, work: Work) -> Vec<Answer> {
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.lock().ok().and_then(|t| t.clone());
        let sent = match tx {
            Some(tx) => tx.send(Job { work, reply }).await.is_ok(),
            None => false,
        };
        match (sent, rx.await) {
            (true, Ok(a)) => a,
            _ => vec![Answer { status: crate::protocol::UNAVAILABLE, body: b"worker pool stopped".to_vec() }],
        }
    }

    /// Lets the workers finish the queue, then joins them.
    pub fn stop(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        let threads: Vec<_> = self.threads.lock().map(|mut t| t.drain(..).collect()).unwrap_or_default();
        for t in threads {
            let _ = t.join();
        }
    }
}
