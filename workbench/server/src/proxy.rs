//! A delay proxy: holds every byte for a fixed one-way delay in each
//! direction (so RTT grows by twice the delay), keeps order, and counts
//! client→server *flights*.
//!
//! A flight is a run of client→server bytes with no server→client bytes in
//! between: a pipelined chain is one flight however many calls it holds; a
//! request-response loop of n calls is n flights. Timers, not threads: each
//! direction is a reader task and a writer task joined by a queue of
//! (release time, bytes).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What the proxy has seen, over every connection.
#[derive(Debug, Default)]
pub struct ProxyStats {
    pub connections: AtomicU64,
    pub flights: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
}

impl ProxyStats {
    pub fn flights(&self) -> u64 {
        self.flights.load(Ordering::SeqCst)
    }
}

const UP: u8 = 1;
const DOWN: u8 = 2;

/// QUEUE = 1024 chunks per direction: a reader that gets this far ahead of
/// its delayed writer waits, bounding the proxy's memory per connection.
const QUEUE: usize = 1024;

/// Proxies every connection accepted on `listener` to `upstream` until `stop`.
pub async fn run(
    listener: TcpListener,
    upstream: SocketAddr,
    delay: Duration,
    stats: Arc<ProxyStats>,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((client, _)) => {
                    let stats = stats.clone();
                    tokio::spawn(async move {
                        if let Err(e) = connection(client, upstream, delay, stats).await {
                            eprintln!("proxy: {e}");
                        }
                    });
                }
                Err(e) => {
                    eprintln!("proxy accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = &mut stop => return,
        }
    }
}

async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    delay: Duration,
    stats: Arc<ProxyStats>,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    stats.connections.fetch_add(1, Ordering::SeqCst);
    let last = Arc::new(AtomicU8::new(0));
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = tokio::spawn(pump(cr, sw, delay, UP, last.clone(), stats.clone()));
    let down = tokio::spawn(pump(sr, cw, delay, DOWN, last, stats));
    let _ = tokio::join!(up, down);
    Ok(())
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    dir: u8,
    last: Arc<AtomicU8>,
    stats: Arc<ProxyStats>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    let writer = tokio::spawn(async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    loop {
        let mut buf = vec![0u8; 16 << 10];
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.truncate(n);
        let counter = if dir == UP { &stats.bytes_up } else { &stats.bytes_down };
        counter.fetch_add(n as u64, Ordering::SeqCst);
        if last.swap(dir, Ordering::SeqCst) != dir && dir == UP {
            stats.flights.fetch_add(1, Ordering::SeqCst);
        }
        if tx.send((Instant::now() + delay, buf)).await.is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// A proxy on its own thread (tests and benchmarks).
pub struct RunningProxy {
    pub addr: SocketAddr,
    pub stats: Arc<ProxyStats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a proxy on `listen` (port 0 allowed) to `upstream`.
pub fn start(listen: &str, upstream: SocketAddr, delay: Duration) -> std::io::Result<RunningProxy> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let listener = rt.block_on(TcpListener::bind(listen))?;
    let addr = listener.local_addr()?;
    let stats = Arc::new(ProxyStats::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let st = stats.clone();
    let thread = std::thread::Builder::new().name("proxy".into()).spawn(move || {
        rt.block_on(run(listener, upstream, delay, st, async {
            let _ = stop_rx.await;
        }))
    })?;
    Ok(RunningProxy { addr, stats, stop: Some(stop_tx), thread: Some(thread) })
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
