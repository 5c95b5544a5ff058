//! The datastore served over ZAP: a server with bounded per-connection state
//! and pipelined dependent calls, its client, and a delay proxy.
//!
//! The server speaks ZAP framing and ZAP's RPC envelope; the methods and the
//! columnar answer are in [`protocol`]. One I/O thread (tokio, current
//! thread) holds every connection; queries and inserts run on a fixed worker
//! pool shared by all connections, behind a bounded queue. Between frames a
//! connection holds no buffer and no timer, which is what lets 10,000 idle
//! connections cost little more than their sockets.
//!
//! It is not a general database server: one data directory, the engine's SQL
//! subset, no authentication, loopback use.
//!
//! ```no_run
//! use server::{client::Client, limits::Config};
//! let running = server::start(std::path::Path::new("/tmp/ds"), "127.0.0.1:0", Config::default()).unwrap();
//! let mut c = Client::connect(running.addr).unwrap();
//! let top = c.query("SELECT user_id, sum(value) AS s FROM t GROUP BY user_id ORDER BY s DESC LIMIT 1").unwrap();
//! // Depends on `top` without waiting for it: one flight for both.
//! let n = c.query_on(top, "SELECT count() FROM t WHERE user_id = $prev").unwrap();
//! println!("{:?}", c.wait(n).unwrap().to_rows().unwrap());
//! running.stop().expect("a clean stop");
//! ```
//!
//! # Layout
//! - [`protocol`]: methods, statuses, the `Columns` message (results and insert batches).
//! - [`limits`]: every bound the server enforces, with its reason; the fd limit.
//! - [`budget`]: the server-wide count of answer bytes held and queued.
//! - [`listener`]: the accept loop, the connection limit, graceful shutdown.
//! - [`connection`]: one connection's read loop, pooled buffers, the answer table.
//! - [`handler`]: what each method does against the engine.
//! - [`pool`]: the worker threads and their bounded queue; [`work`]: what
//!   they run (a run of queries, an insert) and what they answer.
//! - [`shutdown`]: the signal idle connections wait on.
//! - [`experiments`]: the measured runs the workbench drives (one file each).
//! - [`fuzzing`]: the request path as a fuzz target (a server on a small table), its seeds and mutator.
//! - [`workload`]: the paper's table, generated deterministically, its queries and its Parquet export
//!   (what the experiments load, the peers read and the `datastore` binary's `load` writes).
//! - [`chain`]: the dependent-chain workload (pipelined and request-response).
//! - [`client`]: the pipelined client (`call` returns a promise; chains need no waiting).
//! - [`proxy`]: a delay proxy that holds every byte for a fixed one-way delay and counts flights.

pub mod budget;
pub mod chain;
pub mod client;
pub mod connection;
pub mod costs;
pub mod experiments;
pub mod floor;
pub mod fuzzing;
pub mod handler;
pub mod limits;
pub mod listener;
pub mod pool;
pub mod protocol;
pub mod proxy;
pub mod shutdown;
pub mod work;
pub mod workload;

use connection::{Counters, Shared};
use limits::Config;
use listener::Summary;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("opening data directory {dir}: {source}")]
    Open { dir: PathBuf, source: datastore::Error },
    #[error("listening on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("starting the I/O runtime: {0}")]
    Runtime(std::io::Error),
}

/// Serves `data` on `listen` on this thread until `stop` resolves;
/// `bound` is told the address first (port 0 picks a free one).
pub fn serve(
    data: &Path,
    listen: &str,
    cfg: Config,
    bound: impl FnOnce(SocketAddr),
    stop: impl std::future::Future<Output = ()>,
) -> Result<Summary, ServerError> {
    let db = datastore::Db::open(data).map_err(|source| ServerError::Open { dir: data.to_path_buf(), source })?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServerError::Runtime)?;
    let handler = Arc::new(handler::Handler::new(db, cfg.clone()));
    let summary = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| ServerError::Bind { addr: listen.to_string(), source })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: listen.to_string(), source })?;
        bound(addr);
        let sh = Arc::new(Shared {
            // 64 free buffers of up to 64 KiB (4 MiB at most): what a burst of
            // busy connections reuses; idle connections hold none of them, and
            // a buffer grown for a large frame is freed, not pooled.
            bufs: Mutex::new(zap::frame::BufPool::new(64, 64 << 10)),
            pool: pool::Pool::start(handler.clone(), cfg.workers, cfg.queue, cfg.idle_spin),
            handler: handler.clone(),
            cfg,
            shutdown: shutdown::Shutdown::default(),
            connections: AtomicUsize::new(0),
            counters: Counters::default(),
        });
        let summary = listener::run(listener, sh.clone(), stop).await;
        // Queued calls finish; then the workers exit.
        sh.pool.stop();
        Ok(summary)
    });
    handler.stop();
    summary
}

/// A server on its own thread (tests, benchmarks, the examples).
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<Summary, ServerError>>>,
}

/// Starts a server on a thread of its own; returns once it listens.
pub fn start(data: &Path, listen: &str, cfg: Config) -> Result<Running, ServerError> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (data, listen) = (data.to_path_buf(), listen.to_string());
    let thread = std::thread::Builder::new()
        .name("server-io".into())
        .spawn(move || {
            serve(
                &data,
                &listen,
                cfg,
                |a| {
                    let _ = addr_tx.send(a);
                },
                async {
                    let _ = stop_rx.await;
                },
            )
        })
        .map_err(ServerError::Runtime)?;
    match addr_rx.recv() {
        Ok(addr) => Ok(Running { addr, stop: Some(stop_tx), thread: Some(thread) }),
        // The thread ended before binding: its error says why.
        Err(_) => Err(thread.join().map_or_else(
            |_| ServerError::Runtime(std::io::Error::other("server thread panicked")),
            |r| r.err().unwrap_or(ServerError::Runtime(std::io::Error::other("server exited before binding"))),
        )),
    }
}

impl Running {
    /// Shuts down gracefully (in-flight calls finish) and returns the
    /// summary, or why the server thread ended otherwise.
    pub fn stop(mut self) -> Result<Summary, ServerError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<Summary, ServerError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let thread =
            self.thread.take().ok_or_else(|| ServerError::Runtime(std::io::Error::other("already stopped")))?;
        thread.join().map_err(|_| ServerError::Runtime(std::io::Error::other("server thread panicked")))?
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
