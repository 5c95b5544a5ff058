//! One client connection: frames in, calls resolved in order, answers out.
//!
//! Memory per connection is bounded and, between frames, minimal: an idle
//! connection holds its socket, an empty answer table and no buffer. A read
//! buffer comes from the shared pool when bytes arrive and goes back once no
//! partial frame remains; it grows with the bytes that arrive, never ahead of
//! them by more than [`zap::frame::READ_CHUNK`].
//!
//! Pipelining: calls run in arrival order, each awaited before the next, so a
//! call naming an earlier promise as its target finds that answer already
//! stored; the server resolves a whole chain from one client flight.

use crate::limits::Config;
use crate::pool::{Answer, Pool, Work};
use crate::protocol::{self, ColumnsView};
use crate::shutdown::Shutdown;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use zap::frame::{decode_frame, grow_towards, BufPool, FrameError, PREFIX_LEN, READ_CHUNK};
use zap::rpc::{Answers, FINISH};
use zap::{Builder, Request, Response};

/// State shared by every connection.
pub struct Shared {
    pub cfg: Config,
    pub pool: Pool,
    pub bufs: Mutex<BufPool>,
    pub shutdown: Shutdown,
    pub connections: AtomicUsize,
    pub counters: Counters,
}

/// What the server has done, for `stats` and the exit summary.
#[derive(Default)]
pub struct Counters {
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub closed_bad_frame: AtomicU64,
    pub closed_stalled: AtomicU64,
}

/// FIRST_READ = 4 KiB: room a pooled buffer offers for the first read of a
/// burst; a ping is 52 bytes, a chain of 64 queries a few KiB.
const FIRST_READ: usize = 4 << 10;

/// Serves one connection until the peer closes, a frame is unusable, or the
/// server shuts down.
pub async fn serve(mut stream: TcpStream, sh: &Shared) {
    let mut answers = Answers::new(sh.cfg.max_promises);
    let mut inbuf: Vec<u8> = Vec::new();
    if let Err(e) = run(&mut stream, &mut answers, &mut inbuf, sh).await {
        // A peer that vanished is routine; anything else is worth a line.
        if !matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) {
            eprintln!("connection: {e}");
        }
    }
    if inbuf.capacity() > 0 {
        put_buf(sh, inbuf);
    }
}

fn put_buf(sh: &Shared, buf: Vec<u8>) {
    if let Ok(mut p) = sh.bufs.lock() {
        p.put(buf);
    }
}

/// The length of the frame at the front of `buf`, prefix included, once known.
fn pending_len(buf: &[u8]) -> Option<usize> {
    buf.first_chunk::<PREFIX_LEN>().map(|p| PREFIX_LEN + u32::from_le_bytes(*p) as usize)
}

async fn run(stream: &mut TcpStream, answers: &mut Answers, inbuf: &mut Vec<u8>, sh: &Shared) -> io::Result<()> {
    loop {
        if inbuf.is_empty() {
            // Between frames: no buffer, no timer.
            tokio::select! {
                r = stream.readable() => r?,
                _ = sh.shutdown.wait() => return Ok(()),
            }
        } else if tokio::time::timeout(sh.cfg.stall_timeout, stream.readable()).await.is_err() {
            sh.counters.closed_stalled.fetch_add(1, Ordering::Relaxed);
            let why = format!("stalled for {} s inside a frame; closing", sh.cfg.stall_timeout.as_secs());
            return refuse(stream, protocol::TIMEOUT, &why).await;
        }
        if inbuf.capacity() == 0 {
            *inbuf = sh.bufs.lock().map(|mut p| p.get()).unwrap_or_default();
        }
        // Room for what may arrive: up to the rest of a known frame, a chunk at a time.
        let (want, limit) = match pending_len(inbuf) {
            Some(total) if total <= sh.cfg.max_frame + PREFIX_LEN => {
                let total = total.max(inbuf.len() + FIRST_READ);
                ((inbuf.len() + READ_CHUNK).min(total), total)
            }
            _ => (inbuf.len() + FIRST_READ, inbuf.len() + FIRST_READ),
        };
        grow_towards(inbuf, want, limit);
        match stream.try_read_buf(inbuf) {
            // End of stream; a partial frame left behind is simply dropped.
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if inbuf.is_empty() {
                    put_buf(sh, std::mem::take(inbuf));
                }
                continue;
            }
            Err(e) => return Err(e),
        }
        let mut out = sh.bufs.lock().map(|mut p| p.get()).unwrap_or_default();
        let mut b = Builder::new();
        let mut used = 0;
        let mut close = false;
        loop {
            match decode_frame(&inbuf[used..], sh.cfg.max_frame) {
                Ok(Some((frame, n))) => {
                    call(sh, answers, frame, &mut out, &mut b).await;
                    used += n;
                }
                Ok(None) => break,
                Err(e @ FrameError::TooLarge { .. }) => {
                    // The stream cannot be resynchronised past a frame we will not read.
                    sh.counters.closed_bad_frame.fetch_add(1, Ordering::Relaxed);
                    push_response(&mut out, &mut b, protocol::TOO_LARGE, 0, format!("{e}; closing").as_bytes());
                    close = true;
                    break;
                }
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        let wrote = stream.write_all(&out).await;
        put_buf(sh, out);
        wrote?;
        inbuf.drain(..used);
        if close {
            return Ok(());
        }
        if inbuf.is_empty() {
            put_buf(sh, std::mem::take(inbuf));
            answers.shrink_if_empty();
        }
    }
}

/// Sends one connection-level answer (promise 0) and closes.
async fn refuse(stream: &mut TcpStream, status: u32, why: &str) -> io::Result<()> {
    let mut out = Vec::new();
    push_response(&mut out, &mut Builder::new(), status, 0, why.as_bytes());
    let _ = stream.write_all(&out).await;
    Ok(())
}

/// The refusal frame for a connection over `--max-connections`, written
/// without waiting (the socket's buffer is empty; if it fails, the close says enough).
pub fn refusal_frame(max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let why = format!("server at its limit of {max} connections; try later");
    push_response(&mut out, &mut Builder::new(), protocol::UNAVAILABLE, 0, why.as_bytes());
    out
}

/// Appends one framed response to `out`.
pub fn push_response(out: &mut Vec<u8>, b: &mut Builder, status: u32, promise: u32, body: &[u8]) {
    let mut r = b.root::<Response>();
    r.status(status);
    r.promise(promise);
    r.body(body);
    if let Ok(msg) = r.finish() {
        out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
        out.extend_from_slice(msg);
    }
}

/// Resolves one call against the answer table and appends its response.
async fn call(sh: &Shared, answers: &mut Answers, frame: &[u8], out: &mut Vec<u8>, b: &mut Builder) {
    sh.counters.calls.fetch_add(1, Ordering::Relaxed);
    let parsed = zap::read::<Request>(frame).and_then(|r| Ok((r.method(), r.promise(), r.target(), r.payload()?)));
    let (method, promise, target, payload) = match parsed {
        Ok(v) => v,
        Err(e) => {
            sh.counters.errors.fetch_add(1, Ordering::Relaxed);
            return push_response(out, b, protocol::BAD_REQUEST, 0, format!("malformed request: {e}").as_bytes());
        }
    };
    if method == FINISH {
        answers.release(target);
        return;
    }
    let mut why = Vec::new();
    // The target's first value, read zero-copy from its stored answer.
    let prev = match answers.admit(promise, target, &mut why) {
        Ok(None) => Ok(None),
        Ok(Some(t)) => match ColumnsView::parse(t).and_then(|v| v.first_value()) {
            Ok(Some(v)) => Ok(Some(v)),
            Ok(None) => {
                Err((protocol::UNPROCESSABLE, format!("target promise {target} has no value to bind to $prev")))
            }
            Err(e) => Err((protocol::UNPROCESSABLE, format!("target promise {target}: {e}"))),
        },
        Err(s @ (protocol::BAD_REQUEST | protocol::TOO_MANY)) => {
            // Refused calls are answered and not stored.
            sh.counters.errors.fetch_add(1, Ordering::Relaxed);
            return push_response(out, b, s, promise, &why);
        }
        Err(s) => Err((s, String::from_utf8_lossy(&why).into_owned())),
    };
    let a = match (prev, method) {
        (Err((status, why)), _) => Answer { status, body: why.into_bytes() },
        (Ok(None), protocol::PING) => Answer { status: protocol::OK, body: empty_columns() },
        (Ok(None), protocol::STATS) => Answer { status: protocol::OK, body: stats(sh).into_bytes() },
        (Ok(prev), protocol::QUERY) => match std::str::from_utf8(payload) {
            Ok(sql) => sh.pool.run(Work::Query { sql: sql.to_string(), prev }).await,
            Err(e) => Answer { status: protocol::BAD_REQUEST, body: format!("SQL is not UTF-8: {e}").into_bytes() },
        },
        (Ok(None), protocol::INSERT) => sh.pool.run(Work::Insert { msg: payload.to_vec() }).await,
        (Ok(Some(_)), protocol::PING | protocol::STATS | protocol::INSERT) => {
            Answer { status: protocol::BAD_REQUEST, body: format!("method {method} takes no target").into_bytes() }
        }
        (Ok(_), m) => Answer { status: protocol::NOT_FOUND, body: format!("unknown method {m}").into_bytes() },
    };
    if a.status != protocol::OK {
        sh.counters.errors.fetch_add(1, Ordering::Relaxed);
    }
    let body = answers.store(promise, a.status, a.body);
    push_response(out, b, a.status, promise, body);
}

/// A `Columns` message with no rows and no columns: the answer to `ping`.
fn empty_columns() -> Vec<u8> {
    let mut w = protocol::ColumnsWriter::default();
    w.start(0);
    w.finish(&mut Builder::new(), "").map(<[u8]>::to_vec).unwrap_or_default()
}

/// The server's own view of its memory, as JSON.
pub fn stats(sh: &Shared) -> String {
    let rss = probe::rss::read();
    let c = &sh.counters;
    let je = probe::jemalloc_now();
    serde_json::json!({
        "variant": probe::VARIANT.name(),
        "rss_bytes": rss.map(|r| r.rss),
        "peak_rss_bytes": rss.map(|r| r.peak),
        "live_heap_bytes": probe::live_heap(),
        "jemalloc_allocated": je.map(|j| j.allocated),
        "jemalloc_active": je.map(|j| j.active),
        "jemalloc_resident": je.map(|j| j.resident),
        "connections": sh.connections.load(Ordering::Relaxed),
        "accepted": c.accepted.load(Ordering::Relaxed),
        "refused": c.refused.load(Ordering::Relaxed),
        "calls": c.calls.load(Ordering::Relaxed),
        "errors": c.errors.load(Ordering::Relaxed),
    })
    .to_string()
}
