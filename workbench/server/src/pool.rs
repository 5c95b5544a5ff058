//! The worker pool: a fixed number of threads running queries and inserts
//! for every connection, fed by a bounded queue.
//!
//! NOTE: the engine is synchronous (file reads, CPU-bound scans), so calls
//! leave the I/O thread; the queue's bound is the backpressure — a connection
//! whose call cannot be queued waits, stops reading, and TCP pushes back.

use crate::handler::Handler;
use crate::work::{Answer, Work};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

struct Job {
    work: Work,
    reply: oneshot::Sender<Vec<Answer>>,
}

pub struct Pool {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    /// See [`crate::limits::IDLE_SPIN`].
    idle_spin: Duration,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Jobs sent and not yet answered, over every connection.
    in_flight: AtomicUsize,
}

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
                        // Other connections' turn: see limits::IDLE_SPIN.
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
