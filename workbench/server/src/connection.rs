//! One client connection: frames in, calls resolved in order, answers out.
//!
//! Memory per connection is bounded and, between frames, minimal: an idle
//! connection holds its socket, an empty answer table and no buffer. A read
//! buffer comes from the shared pool when bytes arrive and goes back once no
//! partial frame remains; it grows with the bytes that arrive, never ahead of
//! them by more than [`zap::frame::READ_CHUNK`].
//!
//! Pipelining: calls run in arrival order, each finished before the next, so
//! a call naming an earlier promise as its target finds that answer already
//! stored; the server resolves a whole chain from one client flight. A run
//! of consecutive queries goes to one worker as one job, and the worker binds
//! `$prev` from the run's earlier answers itself, so a chain's links cost no
//! thread hand-off each.

use crate::limits::Config;
use crate::pool::Pool;
use crate::protocol::{self, ColumnsView};
use crate::shutdown::Shutdown;
use crate::work::{Answer, Prev, Queries, Work};
use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use zap::frame::{decode_frame, grow_towards, BufPool, FrameError, PREFIX_LEN, READ_CHUNK};
use zap::rpc::{finish_run, Answers, FINISH};
use zap::{Builder, Request, Response};

/// State shared by every connection.
pub struct Shared {
    pub cfg: Config,
    pub handler: Arc<crate::handler::Handler>,
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
    /// Peers closed for leaving their answers unread past `write_timeout`.
    pub closed_unread: AtomicU64,
}

/// OUT_FLUSH = 256 KiB: answers queued for one socket are written once they
/// pass this, before the next call is taken, so a flight of large answers
/// is never all in memory twice (stored and queued), and a peer that does
/// not read stops the connection's reading at the first blocked write.
const OUT_FLUSH: usize = 256 << 10;

/// FIRST_READ = 4 KiB: room a pooled buffer offers for the first read of a
/// burst; a ping is 52 bytes, a chain of 64 queries a few KiB.
const FIRST_READ: usize = 4 << 10;

/// One connection's state: all an idle connection holds, besides its task.
struct Conn {
    stream: TcpStream,
    answers: Answers,
    /// Bytes of an incomplete frame; empty (and unallocated) between frames.
    inbuf: Vec<u8>,
    /// When the incomplete frame at the front of `inbuf` began: the stall
    /// timeout runs from there, so trickling a byte at a time does not reset it.
    frame_began: tokio::time::Instant,
}

/// Serves one connection until the peer closes, a frame is unusable, or the
/// server shuts down.
pub async fn serve(stream: TcpStream, sh: Arc<Shared>) {
    // Counts the connection out when it ends, or when the task is dropped at shutdown.
    let _open = Open(&sh);
    let mut c = Conn {
        stream,
        answers: Answers::new(sh.cfg.max_promises),
        inbuf: Vec::new(),
        frame_began: tokio::time::Instant::now(),
    };
    loop {
        if c.inbuf.is_empty() {
            // Between frames: no buffer, no timer, no waiter node.
            // PERF: poll_read_ready keeps the waker in the socket's own slot,
            // so this await adds a pointer to the task, where `readable()`
            // would add a linked-list waiter.
            if let Err(e) = std::future::poll_fn(|cx| c.stream.poll_read_ready(cx)).await {
                log(e);
                break;
            }
        }
        // PERF: everything after the wake-up is boxed: a task's size is set by
        // its largest await, and 10,000 idle tasks would each pay for the
        // reads, timers and worker calls of a busy one.
        match Box::pin(c.on_readable(&sh)).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                log(e);
                break;
            }
        }
    }
    if c.inbuf.capacity() > 0 {
        put_buf(&sh, c.inbuf);
    }
    // The answers it held go with it.
    sh.handler.budget().release(c.answers.bytes());
}

/// A peer that vanished is routine; anything else is worth a line.
fn log(e: io::Error) {
    if !matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) {
        eprintln!("connection: {e}");
    }
}

struct Open<'a>(&'a Shared);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

fn put_buf(sh: &Shared, buf: Vec<u8>) {
    if let Ok(mut p) = sh.bufs.lock() {
        p.put(buf);
    }
}

/// Room to make for the next read, `(want, limit)` for [`grow_towards`]:
/// up to the rest of a known frame, a chunk at a time. A frame larger than
/// [`FIRST_READ`] is read only to its end, so the buffer never holds more
/// than `max_frame + PREFIX_LEN` bytes; a small one reads [`FIRST_READ`]
/// ahead (the rest of a pipelined flight). `None`: the frame at the front
/// is large and whole, and is answered before anything more is read.
fn read_room(len: usize, pending: Option<usize>, max_frame: usize) -> Option<(usize, usize)> {
    match pending {
        Some(total) if total > FIRST_READ && total <= max_frame + PREFIX_LEN => {
            (len < total).then(|| ((len + READ_CHUNK).min(total), total))
        }
        // Small, not yet announced, or over the limit (refused once read).
        _ => Some((len + FIRST_READ, len + FIRST_READ)),
    }
}

/// The length of the frame at the front of `buf`, prefix included, once known.
fn pending_len(buf: &[u8]) -> Option<usize> {
    buf.first_chunk::<PREFIX_LEN>().map(|p| PREFIX_LEN + u32::from_le_bytes(*p) as usize)
}

impl Conn {
    /// Reads what arrived, answers every complete frame, writes the answers.
    /// `Ok(false)` when the connection is to close.
    async fn on_readable(&mut self, sh: &Shared) -> io::Result<bool> {
        let Conn { stream, answers, inbuf, frame_began } = self;
        if !inbuf.is_empty()
            && tokio::time::timeout_at(*frame_began + sh.cfg.stall_timeout, stream.readable()).await.is_err()
        {
            sh.counters.closed_stalled.fetch_add(1, Ordering::Relaxed);
            let why = format!("stalled for {} ms inside a frame; closing", sh.cfg.stall_timeout.as_millis());
            refuse(stream, protocol::TIMEOUT, why).await?;
            return Ok(false);
        }
        if inbuf.capacity() == 0 {
            *inbuf = sh.bufs.lock().map(|mut p| p.get()).unwrap_or_default();
        }
        // PERF: read until the socket is drained (or READ_CHUNK is held), so
        // a flight larger than one read (a chain of 64 is ~6 KiB) is one
        // worker job and one write, not one per read.
        let mut got = false;
        while let Some((want, limit)) = read_room(inbuf.len(), pending_len(inbuf), sh.cfg.max_frame) {
            grow_towards(inbuf, want, limit);
            let room = inbuf.capacity() - inbuf.len();
            match stream.try_read_buf(inbuf) {
                // End of stream; a partial frame left behind is simply dropped.
                // After bytes, the frames that came are answered first; the
                // next read sees the end again.
                Ok(0) if !got => return Ok(false),
                Ok(0) => break,
                Ok(n) => {
                    if n == inbuf.len() {
                        *frame_began = tokio::time::Instant::now();
                    }
                    got = true;
                    if n < room || inbuf.len() >= READ_CHUNK {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && got => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if inbuf.is_empty() {
                        put_buf(sh, std::mem::take(inbuf));
                    }
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
        let _busy = sh.shutdown.working();
        let mut out = Out { buf: sh.bufs.lock().map(|mut p| p.get()).unwrap_or_default(), counted: 0 };
        // Calls that need no worker (ping, stats, finish, every error) are
        // answered inline, without awaiting.
        let mut used = 0;
        let close = loop {
            let (promise, mut work) = match answer_inline(sh, answers, inbuf, &mut used, &mut out) {
                Inline::Done { close } => break close,
                Inline::Pool { promise, work } => (promise, work),
                Inline::Failed(e) => {
                    out.discard(sh);
                    return Err(e);
                }
            };
            if let Work::Queries(run) = &mut work {
                gather_queries(sh, answers, inbuf, &mut used, run);
                released_early(sh, inbuf, used, run);
                run.room = sh.cfg.conn_answer_budget.saturating_sub(answers.bytes() + out.counted);
            }
            let calls = work.calls(promise);
            let mut results = sh.pool.run(work).await.into_iter();
            let mut failed = None;
            for ((p, call), a) in calls.into_iter().zip(&mut results) {
                let tag = probe::calls::tag(call);
                complete(sh, answers, p, a, &mut out);
                drop(tag);
                probe::calls::finish(call);
                if out.buf.len() >= OUT_FLUSH {
                    if let Err(e) = out.write(stream, sh).await {
                        failed = Some(e);
                        break;
                    }
                }
            }
            // Answers never stored (the connection is closing) give back what
            // the worker reserved for them.
            results.for_each(|a| sh.handler.budget().release(a.reserved));
            if let Some(e) = failed {
                return Err(e);
            }
        };
        out.write(stream, sh).await?;
        put_buf(sh, out.buf);
        if used > 0 {
            *frame_began = tokio::time::Instant::now();
        }
        inbuf.drain(..used);
        if close {
            return Ok(false);
        }
        if inbuf.is_empty() {
            put_buf(sh, std::mem::take(inbuf));
            answers.shrink_if_empty();
        }
        Ok(true)
    }
}

/// Adds to `calls` the queries that follow it in `inbuf`, so one worker runs
/// the whole run in order and a dependent chain costs no thread hand-off
/// per link. Stops, leaving the frame for the ordinary path, at anything
/// that is not a query the answer table would admit as it stands.
fn gather_queries(sh: &Shared, answers: &Answers, inbuf: &[u8], used: &mut usize, run: &mut Queries) {
    // PERF: a client numbers its calls upwards and chains each on the one
    // before, so a new promise above every one in the run is no duplicate,
    // and the target is found from the end: O(1) a link, not O(run).
    let mut top = run.calls.iter().map(|c| c.promise).max().unwrap_or(0);
    while let Ok(Some((frame, n))) = decode_frame(&inbuf[*used..], sh.cfg.max_frame) {
        let Ok(r) = zap::read::<Request>(frame) else { return };
        let (promise, target) = (r.promise(), r.target());
        if r.method() != protocol::QUERY || answers.len() + run.calls.len() >= sh.cfg.max_promises {
            return;
        }
        let Ok(payload) = r.payload() else { return };
        // PERF: a repeated text was checked as UTF-8 with the call before it.
        let text = match run.repeats(payload) {
            true => None,
            false => match std::str::from_utf8(payload) {
                Ok(sql) => Some(sql),
                Err(_) => return,
            },
        };
        let mut why = Vec::new();
        if (promise <= top && run.calls.iter().any(|c| c.promise == promise))
            || answers.admit(promise, 0, &mut why).is_err()
        {
            return;
        }
        top = top.max(promise);
        let prev = if target == 0 {
            Prev::None
        } else if let Some(index) = run.calls.iter().rposition(|c| c.promise == target) {
            Prev::Earlier { index, promise: target }
        } else {
            match answers.admit(promise, target, &mut why) {
                Ok(Some(t)) if !t.is_empty() => match ColumnsView::parse(t).and_then(|v| v.first_value()) {
                    Ok(Some(v)) => Prev::Value(v),
                    _ => return,
                },
                _ => return,
            }
        };
        let call = sh.counters.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let _tag = probe::calls::tag(call);
        match text {
            Some(sql) => run.push(promise, call, sql, prev),
            None => run.push_repeat(promise, call, prev),
        }
        *used += n;
    }
}

/// Marks the calls of `run` that the `finish` frames right after it (still
/// in `inbuf[used..]`, answered later as usual) release: their answers need
/// no body ([`crate::work::QueryCall::wanted`]).
fn released_early(sh: &Shared, inbuf: &[u8], mut used: usize, run: &mut Queries) {
    while let Ok(Some((frame, n))) = decode_frame(&inbuf[used..], sh.cfg.max_frame) {
        let Ok(r) = zap::read::<Request>(frame) else { return };
        let Ok(payload) = r.payload() else { return };
        if r.method() != FINISH {
            return;
        }
        run.release(finish_run(r.target(), payload));
        used += n;
    }
}

/// Where [`answer_inline`] stopped.
enum Inline {
    /// Every complete frame is answered; `close` after an oversized frame.
    Done {
        close: bool,
    },
    /// This call needs a worker; answer it with [`complete`], then continue.
    Pool {
        promise: u32,
        work: Work,
    },
    Failed(io::Error),
}

/// Answers complete frames from `inbuf[*used..]` into `out`, advancing
/// `used`, until they run out or one needs the worker pool.
fn answer_inline(sh: &Shared, answers: &mut Answers, inbuf: &[u8], used: &mut usize, out: &mut Out) -> Inline {
    loop {
        match decode_frame(&inbuf[*used..], sh.cfg.max_frame) {
            Ok(Some((frame, n))) => {
                *used += n;
                if let Some((promise, work)) = prepare(sh, answers, frame, out) {
                    return Inline::Pool { promise, work };
                }
            }
            Ok(None) => return Inline::Done { close: false },
            Err(e @ FrameError::TooLarge { .. }) => {
                // The stream cannot be resynchronised past a frame we will not read.
                sh.counters.closed_bad_frame.fetch_add(1, Ordering::Relaxed);
                push_response(&mut out.buf, protocol::TOO_LARGE, 0, format!("{e}; closing").as_bytes());
                return Inline::Done { close: true };
            }
            Err(e) => return Inline::Failed(io::Error::other(e.to_string())),
        }
    }
}

/// Sends one connection-level answer (promise 0) and closes.
async fn refuse(stream: &mut TcpStream, status: u32, why: String) -> io::Result<()> {
    let mut out = Vec::new();
    push_response(&mut out, status, 0, why.as_bytes());
    let _ = stream.write_all(&out).await;
    Ok(())
}

/// The refusal frame for a connection over `--max-connections`, written
/// without waiting (the socket's buffer is empty; if it fails, the close says enough).
pub fn refusal_frame(max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let why = format!("server at its limit of {max} connections; try later");
    push_response(&mut out, protocol::UNAVAILABLE, 0, why.as_bytes());
    out
}

thread_local! {
    /// The I/O thread's response builder. PERF: one for every connection, so
    /// answering allocates nothing per batch.
    static RESPONSE: RefCell<Builder> = RefCell::new(Builder::new());
    /// The answer to `ping`, built once.
    static EMPTY: Vec<u8> = empty_columns();
}

/// Appends one framed response to `out`.
pub fn push_response(out: &mut Vec<u8>, status: u32, promise: u32, body: &[u8]) {
    RESPONSE.with_borrow_mut(|b| {
        let mut r = b.root::<Response>();
        r.status(status);
        r.promise(promise);
        r.body(body);
        if let Ok(msg) = r.finish() {
            out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
            out.extend_from_slice(msg);
        }
    })
}

/// Resolves one call against the answer table: answers it into `out`, or
/// returns the work it needs from the pool (answered by [`complete`]).
fn prepare(sh: &Shared, answers: &mut Answers, frame: &[u8], out: &mut Out) -> Option<(u32, Work)> {
    // Call n is operation n of the events build's timeline (free in the
    // others), and call n + 1 of the dhat build's per-call costs (0 there is
    // everything outside a call).
    let n = sh.counters.calls.fetch_add(1, Ordering::Relaxed);
    probe::operation(n);
    let call = n + 1;
    let _tag = probe::calls::tag(call);
    let parsed = zap::read::<Request>(frame).and_then(|r| Ok((r.method(), r.promise(), r.target(), r.payload()?)));
    let (method, promise, target, payload) = match parsed {
        Ok(v) => v,
        Err(e) => {
            sh.counters.errors.fetch_add(1, Ordering::Relaxed);
            push_response(&mut out.buf, protocol::BAD_REQUEST, 0, format!("malformed request: {e}").as_bytes());
            return None;
        }
    };
    if method == FINISH {
        probe::calls::describe(call, crate::costs::FINISH, 0);
        // The bodies go back to the workers (see `Handler::bodies`).
        let held = answers.bytes();
        if let Ok(mut pool) = sh.handler.bodies().lock() {
            answers.release_run(finish_run(target, payload), |b| pool.put(b));
        }
        sh.handler.budget().release(held - answers.bytes());
        return None;
    }
    let mut why = Vec::new();
    // A method that takes no target is refused for having one, whatever the
    // target's state: one mistake, one status (400), not 410/422/424 by turns.
    let no_target =
        matches!(method, protocol::PING | protocol::STATS | protocol::INSERT | protocol::HEAP_PROFILE) && target != 0;
    // The target's first value, read zero-copy from its stored answer.
    let prev = match answers.admit(promise, if no_target { 0 } else { target }, &mut why) {
        Ok(None) => Ok(None),
        // A ping's stored answer is empty (no columns, so no value).
        Ok(Some([])) => {
            Err((protocol::UNPROCESSABLE, format!("target promise {target} has no value to bind to $prev")))
        }
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
            push_response(&mut out.buf, s, promise, &why);
            return None;
        }
        Err(s) => Err((s, String::from_utf8_lossy(&why).into_owned())),
    };
    let a = match (prev, method) {
        (Err((status, why)), _) => Answer::new(status, why),
        (Ok(_), _) if no_target => Answer::new(protocol::BAD_REQUEST, format!("method {method} takes no target")),
        (Ok(None), protocol::PING) => {
            // PERF: the answer is the shared empty `Columns`; the table keeps an
            // empty (unallocated) body for it.
            answers.store(promise, protocol::OK, Vec::new());
            EMPTY.with(|e| push_response(&mut out.buf, protocol::OK, promise, e));
            probe::calls::describe(call, crate::costs::PING, 0);
            probe::calls::finish(call);
            return None;
        }
        (Ok(None), protocol::STATS) => {
            probe::calls::describe(call, crate::costs::STATS, 0);
            // Into a pooled body: released, it goes back to the pool it came
            // from, so sampling the server does not grow that pool.
            let mut body = sh.handler.bodies().lock().map(|mut p| p.get()).unwrap_or_default();
            body.extend_from_slice(stats(sh).as_bytes());
            Answer::new(protocol::OK, body)
        }
        (Ok(prev), protocol::QUERY) => match std::str::from_utf8(payload) {
            Ok(sql) => {
                let prev = prev.map_or(Prev::None, Prev::Value);
                return Some((promise, Work::Queries(Queries::one(promise, call, sql, prev))));
            }
            Err(e) => Answer::new(protocol::BAD_REQUEST, format!("SQL is not UTF-8: {e}")),
        },
        (Ok(None), protocol::INSERT) => return Some((promise, Work::Insert { msg: payload.to_vec(), call })),
        (Ok(None), protocol::HEAP_PROFILE) => return Some((promise, Work::HeapProfile { call })),
        (Ok(_), m) => Answer::new(protocol::NOT_FOUND, format!("unknown method {m}")),
    };
    complete(sh, answers, promise, a, out);
    probe::calls::finish(call);
    None
}

/// Stores a call's answer and queues its response; the budget counts both
/// (the queued copy until it is written).
fn complete(sh: &Shared, answers: &mut Answers, promise: u32, a: Answer, out: &mut Out) {
    if a.status != protocol::OK {
        sh.counters.errors.fetch_add(1, Ordering::Relaxed);
    }
    // Stored and queued: twice the body, less what the worker reserved.
    let len = a.body.len();
    sh.handler.budget().force((2 * len).saturating_sub(a.reserved));
    let body = answers.store(promise, a.status, a.body);
    push_response(&mut out.buf, a.status, promise, body);
    out.counted += len;
}

/// Responses waiting for the socket, and the answer bytes among them that
/// the budget counts.
struct Out {
    buf: Vec<u8>,
    counted: usize,
}

impl Out {
    /// Writes everything queued; a peer that takes none of it for
    /// `write_timeout` is an error (the connection closes, its answers freed).
    async fn write(&mut self, stream: &mut TcpStream, sh: &Shared) -> io::Result<()> {
        let n = match stream.try_write(&self.buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                self.discard(sh);
                return Err(e);
            }
        };
        let wrote = match n == self.buf.len() {
            true => Ok(()),
            false => match tokio::time::timeout(sh.cfg.write_timeout, stream.write_all(&self.buf[n..])).await {
                Ok(r) => r,
                Err(_) => {
                    sh.counters.closed_unread.fetch_add(1, Ordering::Relaxed);
                    let ms = sh.cfg.write_timeout.as_millis();
                    Err(io::Error::new(io::ErrorKind::TimedOut, format!("peer left its answers unread for {ms} ms")))
                }
            },
        };
        self.discard(sh);
        wrote
    }

    /// Empties the queue and gives its bytes back to the budget.
    fn discard(&mut self, sh: &Shared) {
        self.buf.clear();
        sh.handler.budget().release(std::mem::take(&mut self.counted));
    }
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
    let totals = probe::heap_totals();
    let stats = records::server::Stats {
        variant: probe::VARIANT.name().to_string(),
        rss_bytes: rss.map(|r| r.rss),
        peak_rss_bytes: rss.map(|r| r.peak),
        live_heap_bytes: probe::live_heap(),
        total_allocs: totals.map(|t| t.0),
        total_bytes: totals.map(|t| t.1),
        peak_heap_bytes: totals.map(|t| t.2),
        jemalloc_allocated: je.map(|j| j.allocated),
        jemalloc_active: je.map(|j| j.active),
        jemalloc_resident: je.map(|j| j.resident),
        connections: sh.connections.load(Ordering::Relaxed) as u64,
        accepted: c.accepted.load(Ordering::Relaxed),
        refused: c.refused.load(Ordering::Relaxed),
        calls: c.calls.load(Ordering::Relaxed),
        errors: c.errors.load(Ordering::Relaxed),
        answer_bytes: sh.handler.budget().used() as u64,
        closed_stalled: c.closed_stalled.load(Ordering::Relaxed),
        closed_unread: c.closed_unread.load(Ordering::Relaxed),
    };
    serde_json::to_string(&stats).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    /// Reads `wire` as `on_readable` does, `chunk` bytes a read at most; the
    /// largest capacity the buffer reached, and whether it stopped at a
    /// whole frame.
    fn read_as_a_connection(wire: &[u8], chunk: usize) -> (usize, bool) {
        let (mut inbuf, mut at, mut most) = (Vec::new(), 0, 0);
        while at < wire.len() {
            let Some((want, limit)) = read_room(inbuf.len(), pending_len(&inbuf), MAX) else {
                return (most, true);
            };
            grow_towards(&mut inbuf, want, limit);
            // What `try_read_buf` does: fills spare capacity, never grows.
            let n = (inbuf.capacity() - inbuf.len()).min(chunk).min(wire.len() - at);
            assert!(n > 0, "no room to read at {} of {} bytes", inbuf.len(), wire.len());
            inbuf.extend_from_slice(&wire[at..at + n]);
            at += n;
            most = most.max(inbuf.capacity());
        }
        (most, pending_len(&inbuf).is_some_and(|t| inbuf.len() >= t))
    }

    fn frame(len: usize, body: usize) -> Vec<u8> {
        let mut w = (len as u32).to_le_bytes().to_vec();
        w.resize(PREFIX_LEN + body, 0xff);
        w
    }

    #[test]
    fn the_input_buffer_holds_the_frame_limit_to_the_byte() {
        for chunk in [7, 1000, FIRST_READ, READ_CHUNK, usize::MAX] {
            // At the limit, and one short followed by the prefix of the next.
            for wire in [frame(MAX, MAX), [frame(MAX - 1, MAX - 1), frame(MAX, 0)].concat()] {
                let (most, whole) = read_as_a_connection(&wire, chunk);
                assert!(whole, "chunk {chunk}: the frame at the limit was not read whole");
                assert!(most <= MAX + PREFIX_LEN, "chunk {chunk}: held {most} B, over {} B", MAX + PREFIX_LEN);
            }
            // One byte over: read no further than a small frame would be.
            let (most, _) = read_as_a_connection(&frame(MAX + 1, FIRST_READ), chunk);
            assert!(most <= 2 * FIRST_READ, "chunk {chunk}: held {most} B for a refused frame");
        }
    }

    #[test]
    fn small_frames_read_ahead_for_the_rest_of_a_flight() {
        let flight: Vec<u8> = (0..50).flat_map(|_| frame(60, 60)).collect();
        let (len, pending) = (10, pending_len(&flight));
        assert_eq!(read_room(len, pending, MAX), Some((len + FIRST_READ, len + FIRST_READ)));
    }
}
