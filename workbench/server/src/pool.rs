//! The worker pool: a fixed number of threads running queries and inserts
//! for every connection, fed by a bounded queue.
//!
//! NOTE: the engine is synchronous (file reads, CPU-bound scans), so calls
//! leave the I/O thread; the queue's bound is the backpressure — a connection
//! whose call cannot be queued waits, stops reading, and TCP pushes back.

use crate::handler::Handler;
use datastore::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
    /// Answer bytes the connection may still take (`--conn-answer-budget`
    /// less what it holds and queues); the run's answers draw it down, and
    /// one that does not fit is refused with 429 (see [`crate::budget`]).
    pub room: usize,
}

impl Queries {
    /// A run of one query.
    pub fn one(promise: u32, sql: &str, prev: Prev) -> Queries {
        let mut q = Queries { calls: Vec::with_capacity(1), texts: String::with_capacity(sql.len()), room: 0 };
        q.push(promise, sql, prev);
        q
    }

    pub fn push(&mut self, promise: u32, sql: &str, prev: Prev) {
        let at = self.texts.len();
        self.texts.push_str(sql);
        self.calls.push(QueryCall { promise, sql: at..self.texts.len(), prev, wanted: true });
    }

    /// Marks the calls a `finish` already releases (see [`QueryCall::wanted`]).
    pub fn release(&mut self, run: zap::rpc::Run) {
        self.calls.iter_mut().filter(|c| run.contains(c.promise)).for_each(|c| c.wanted = false);
    }

    /// Whether `sql` is the text of the last call (a chain's step, sent
    /// again and again).
    pub fn repeats(&self, sql: &[u8]) -> bool {
        self.calls.last().is_some_and(|c| self.texts.as_bytes().get(c.sql.clone()) == Some(sql))
    }

    /// Adds a call with the last call's text, shared: neither copied nor
    /// checked as UTF-8 again. See [`Queries::repeats`].
    pub fn push_repeat(&mut self, promise: u32, prev: Prev) {
        if let Some(sql) = self.calls.last().map(|c| c.sql.clone()) {
            self.calls.push(QueryCall { promise, sql, prev, wanted: true });
        }
    }

    /// The calls, each with its SQL text, and the run's room.
    pub fn into_calls(self) -> (String, Vec<QueryCall>, usize) {
        (self.texts, self.calls, self.room)
    }
}

/// One query of a [`Work::Queries`] run; its SQL is `texts[sql]` of the run.
pub struct QueryCall {
    pub promise: u32,
    pub sql: std::ops::Range<usize>,
    pub prev: Prev,
    /// False when the client finished the promise in the same flight, before
    /// its answer: the query still runs (a later call may bind `$prev` to it)
    /// but, when its first value is an integer the run keeps, is answered
    /// without a body. PERF: a pipelined chain's client needs only the last
    /// link's rows; the others are neither encoded, stored nor sent.
    pub wanted: bool,
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
    /// Bytes the worker reserved in the server's [`crate::budget::Budget`]
    /// for this answer (stored and queued: twice its body), or 0.
    pub reserved: usize,
}

impl Answer {
    pub fn new(status: u32, body: impl Into<Vec<u8>>) -> Answer {
        Answer { status, body: body.into(), reserved: 0 }
    }
}

struct Job {
    work: Work,
    reply: oneshot::Sender<Vec<Answer>>,
}

pub struct Pool {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    /// See [`IDLE_SPIN`].
    idle_spin: Duration,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Jobs sent and not yet answered, over every connection.
    in_flight: AtomicUsize,
}

/// IDLE_SPIN = 100 µs: how long the I/O thread polls for the answer to the
/// only job in flight before it sleeps in epoll (`--idle-spin-us`, 0 = never).
/// PERF: a wake-up shaped by this VM, not by the engine: the VM halts an idle
/// vCPU at once (`haltpoll.guest_halt_poll_ns=0` on the kernel command line),
/// and waking a halted one costs tens of µs, so a job long enough for the I/O
/// thread's vCPU to halt (a pipelined chain of 64, ~25 µs of engine work)
/// paid that wake on top of its work. A host that polls before halting
/// (haltpoll's default) or runs on bare metal gains little from it.
///
/// It must not cost other connections their turn: each poll that finds no
/// answer yields to the runtime (`tokio::task::yield_now`), which checks
/// every socket (epoll with a zero timeout) and runs whatever became ready
/// before polling again, so a ping or an accept waits one poll, not the
/// whole spin. Only while no other job is in flight; a job longer than the
/// spin (a scan) then sleeps as before, after 100 µs of the I/O thread's
/// CPU. The io-wakeup experiment measures both costs: background pings'
/// p99 while chains run, and an idle server's CPU time, with it and
/// without.
pub const IDLE_SPIN: Duration = Duration::from_micros(100);

/// Counts a job out of [`Pool::in_flight`] however its wait ends (the
/// connection's task may be dropped at shutdown).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Pool {
    pub fn start(handler: Arc<Handler>, workers: usize, queue: usize, idle_spin: Duration) -> Pool {
        let (tx, rx) = mpsc::channel::<Job>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..workers.max(1))
            .map(|i| {
                let (rx, handler) = (rx.clone(), handler.clone());
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    // NOTE: the engine plans and evaluates SQL recursively; its
                    // limits bound the depth, and this stack fits it with a
                    // margin of four (see `datastore::sql::limits::STACK`).
                    .stack_size(datastore::sql::limits::STACK)
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
        Pool { tx: Mutex::new(Some(tx)), idle_spin, threads: Mutex::new(threads), in_flight: AtomicUsize::new(0) }
    }

    /// Runs `work` on a worker; waits for room in the queue, then for the
    /// answers (one per query of a run, one for an insert).
    pub async fn run(&self, work: Work) -> Vec<Answer> {
        let (reply, mut rx) = oneshot::channel();
        let alone = self.in_flight.fetch_add(1, Ordering::AcqRel) == 0;
        let _counted = InFlight(&self.in_flight);
        let tx = self.tx.lock().ok().and_then(|t| t.clone());
        let sent = match tx {
            Some(tx) => tx.send(Job { work, reply }).await.is_ok(),
            None => false,
        };
        if sent && alone && !self.idle_spin.is_zero() {
            let t0 = Instant::now();
            loop {
                match rx.try_recv() {
                    Ok(a) => return a,
                    Err(oneshot::error::TryRecvError::Empty) if t0.elapsed() < self.idle_spin => {
                        // Other connections' turn: see IDLE_SPIN.
                        tokio::task::yield_now().await
                    }
                    Err(_) => break,
                }
            }
        }
        match (sent, rx.await) {
            (true, Ok(a)) => a,
            _ => vec![Answer::new(crate::protocol::UNAVAILABLE, "worker pool stopped")],
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeated text is shared by the calls that send it; any other text
    /// (or none before it) is not a repeat.
    #[test]
    fn a_repeated_text_is_shared_not_copied() {
        let mut q = Queries::default();
        assert!(!q.repeats(b"SELECT 1"), "nothing to repeat yet");
        q.push(1, "SELECT 1", Prev::None);
        assert!(q.repeats(b"SELECT 1") && !q.repeats(b"SELECT 2") && !q.repeats(b"SELECT 1 "));
        q.push_repeat(2, Prev::None);
        q.push(3, "SELECT 2", Prev::None);
        let (texts, calls, _) = q.into_calls();
        let sql: Vec<&str> = calls.iter().map(|c| &texts[c.sql.clone()]).collect();
        assert_eq!(sql, ["SELECT 1", "SELECT 1", "SELECT 2"]);
        assert_eq!(texts, "SELECT 1SELECT 2", "the repeat added no text");
    }
}
