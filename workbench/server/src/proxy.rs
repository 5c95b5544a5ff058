//! A delay proxy: holds every byte for a fixed one-way delay in each
//! direction (so RTT grows by twice the delay), keeps order, and counts
//! client→server *flights*.
//!
//! A flight is a run of client→server bytes with no server→client bytes in
//! between: a pipelined chain is one flight however many calls it holds; a
//! request-response loop of n calls is n flights.
//!
//! One timer for every packet: readers (a thread per connection direction)
//! stamp each chunk with its release time and queue it; a single delay thread
//! releases chunks in time order. NOTE: not tokio's timers, whose 1 ms
//! resolution would turn a 0.25 ms delay into 1 ms or more; the delay thread
//! sleeps until shortly before a release time, then spins to it, so delays
//! hold to a few microseconds (the spin costs CPU only while packets wait).

use std::collections::BinaryHeap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

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

/// SPIN = 200 µs: the delay thread sleeps until this long before a release
/// time and spins the rest (a timed sleep here wakes 50–100 µs late).
const SPIN: Duration = Duration::from_micros(200);

/// QUEUE_BYTES = 64 MiB: readers wait while this much is held, bounding the
/// proxy's memory whatever the peers send.
const QUEUE_BYTES: usize = 64 << 20;

/// A chunk waiting for its release time; ordered by time, then arrival, so
/// chunks of one direction leave in the order they came.
struct Held {
    at: Instant,
    seq: u64,
    to: Arc<TcpStream>,
    bytes: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // BinaryHeap is a max-heap: the earliest release time ranks highest.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct Line {
    heap: BinaryHeap<Held>,
    seq: u64,
    bytes: usize,
    stop: bool,
}

/// The delay line shared by the readers and the delay thread.
struct DelayLine {
    line: Mutex<Line>,
    changed: Condvar,
}

impl DelayLine {
    fn hold(&self, to: &Arc<TcpStream>, bytes: Vec<u8>, at: Instant) -> bool {
        let Ok(mut l) = self.line.lock() else { return false };
        while l.bytes > QUEUE_BYTES && !l.stop {
            l = match self.changed.wait(l) {
                Ok(l) => l,
                Err(_) => return false,
            };
        }
        l.seq += 1;
        l.bytes += bytes.len();
        let seq = l.seq;
        l.heap.push(Held { at, seq, to: to.clone(), bytes });
        self.changed.notify_all();
        !l.stop
    }

    /// The delay thread: releases each chunk at its time.
    fn release_loop(&self) {
        let Ok(mut l) = self.line.lock() else { return };
        loop {
            if l.stop {
                return;
            }
            let Some(at) = l.heap.peek().map(|h| h.at) else {
                l = match self.changed.wait(l) {
                    Ok(l) => l,
                    Err(_) => return,
                };
                continue;
            };
            let now = Instant::now();
            if at > now + SPIN {
                l = match self.changed.wait_timeout(l, at - now - SPIN) {
                    Ok((l, _)) => l,
                    Err(_) => return,
                };
                continue;
            }
            if at > now {
                drop(l);
                while Instant::now() < at {
                    std::hint::spin_loop();
                }
                l = match self.line.lock() {
                    Ok(l) => l,
                    Err(_) => return,
                };
                continue;
            }
            let Some(h) = l.heap.pop() else { continue };
            l.bytes -= h.bytes.len();
            self.changed.notify_all();
            drop(l);
            // A peer that has gone just loses its bytes; the reader sees the close.
            let _ = (&*h.to).write_all(&h.bytes);
            l = match self.line.lock() {
                Ok(l) => l,
                Err(_) => return,
            };
        }
    }
}

/// A proxy on threads of its own; stops when dropped.
pub struct RunningProxy {
    pub addr: SocketAddr,
    pub stats: Arc<ProxyStats>,
    stop: Arc<AtomicBool>,
    line: Arc<DelayLine>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Starts a proxy on `listen` (port 0 allowed) to `upstream`.
pub fn start(listen: &str, upstream: SocketAddr, delay: Duration) -> std::io::Result<RunningProxy> {
    let listener = TcpListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let stats = Arc::new(ProxyStats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let line = Arc::new(DelayLine { line: Mutex::new(Line::default()), changed: Condvar::new() });
    let l = line.clone();
    let releaser = std::thread::Builder::new().name("proxy-delay".into()).spawn(move || l.release_loop())?;
    let (st, sp, l) = (stats.clone(), stop.clone(), line.clone());
    let acceptor = std::thread::Builder::new().name("proxy-accept".into()).spawn(move || {
        while !sp.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((client, _)) => {
                    if let Err(e) = connect(client, upstream, delay, &st, &l) {
                        eprintln!("proxy: upstream {upstream}: {e}");
                    }
                }
                // NOTE: a non-blocking accept polled every 10 ms, so a stop is seen.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => {
                    eprintln!("proxy accept: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    })?;
    Ok(RunningProxy { addr, stats, stop, line, threads: vec![releaser, acceptor] })
}

fn connect(
    client: TcpStream,
    upstream: SocketAddr,
    delay: Duration,
    stats: &Arc<ProxyStats>,
    line: &Arc<DelayLine>,
) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    stats.connections.fetch_add(1, Ordering::SeqCst);
    let (client, server) = (Arc::new(client), Arc::new(server));
    let last = Arc::new(AtomicU8::new(0));
    for (from, to, dir) in [(client.clone(), server.clone(), UP), (server, client, DOWN)] {
        let (stats, line, last) = (stats.clone(), line.clone(), last.clone());
        std::thread::Builder::new().name("proxy-read".into()).spawn(move || {
            pump(&from, &to, delay, dir, &last, &stats, &line);
        })?;
    }
    Ok(())
}

/// Reads one direction, stamping each chunk with its release time.
fn pump(
    from: &Arc<TcpStream>,
    to: &Arc<TcpStream>,
    delay: Duration,
    dir: u8,
    last: &AtomicU8,
    stats: &ProxyStats,
    line: &DelayLine,
) {
    loop {
        let mut buf = vec![0u8; 16 << 10];
        let n = match (&**from).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let at = Instant::now() + delay;
        buf.truncate(n);
        let counter = if dir == UP { &stats.bytes_up } else { &stats.bytes_down };
        counter.fetch_add(n as u64, Ordering::SeqCst);
        if last.swap(dir, Ordering::SeqCst) != dir && dir == UP {
            stats.flights.fetch_add(1, Ordering::SeqCst);
        }
        if !line.hold(to, buf, at) {
            break;
        }
    }
    // Pass the close on once everything before it has left.
    let mut left = true;
    while left {
        std::thread::sleep(delay.max(Duration::from_millis(1)));
        left = line.line.lock().map(|l| l.heap.iter().any(|h| Arc::ptr_eq(&h.to, to))).unwrap_or(false);
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut l) = self.line.line.lock() {
            l.stop = true;
        }
        self.line.changed.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
