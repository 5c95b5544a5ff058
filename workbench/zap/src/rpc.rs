//! RPC over framed ZAP envelopes, with promise pipelining.
//!
//! A client numbers its calls 1, 2, …; each call may name as `target` the
//! promise of an earlier call on the same connection. The server runs calls
//! in arrival order per connection, so when a dependent call arrives its
//! target has already run: the server hands the target's stored result to the
//! dependent handler, and a chain of n dependent calls costs one round trip.
//!
//! Answers stay in a per-connection table until the client sends `finish`
//! (method [`FINISH`], target = the first promise to release, payload = how
//! many consecutive promises, see [`finish_run`]). The table is bounded
//! by [`Limits::max_promises`]; a call over the limit is answered with
//! [`status::TOO_MANY`] and not stored, so a client that never finishes costs
//! bounded memory.

use crate::frame::{BufPool, FrameError, FrameReader, FrameWriter, DEFAULT_MAX_FRAME};
use crate::messages::{Request, Response};
use crate::{parse, Builder, Error};
use std::collections::VecDeque;
use std::fmt;
use std::io::{Read, Write};

/// Status codes carried in responses (HTTP-like, as in the Go reference).
pub mod status {
    pub const OK: u32 = 200;
    /// The request envelope was malformed, or its promise id is 0 or reused.
    pub const BAD_REQUEST: u32 = 400;
    /// No handler for the method.
    pub const NOT_FOUND: u32 = 404;
    /// The target promise is unknown or already finished.
    pub const GONE: u32 = 410;
    /// The target promise failed, so this call did not run.
    pub const FAILED_DEPENDENCY: u32 = 424;
    /// The connection's promise table is full; finish some promises.
    pub const TOO_MANY: u32 = 429;
    /// A handler failed.
    pub const INTERNAL: u32 = 500;
}

/// Reserved method id: release the answer of promise `target` (and of the
/// promises after it, when the payload says how many: [`finish_run`]). Gets
/// no response.
pub const FINISH: u32 = 0;

/// The promises a `finish` releases: `target` and the `n − 1` after it, where
/// `n` is the payload read as a little-endian `u32` (an empty payload, the
/// Go reference's form, is 1). PERF: a client finishing a pipelined chain of
/// 64 sends one frame, not 64, and the server reads one.
pub fn finish_run(target: u32, payload: &[u8]) -> Run {
    Run { first: target, n: payload.first_chunk::<4>().map_or(1, |b| u32::from_le_bytes(*b)) }
}

/// Promises `first`, `first + 1`, … (`n` of them), as one `finish` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub first: u32,
    pub n: u32,
}

impl Run {
    pub fn contains(&self, promise: u32) -> bool {
        promise.checked_sub(self.first).is_some_and(|d| d < self.n)
    }
}

/// Per-connection bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Answers kept per connection until finished.
    pub max_promises: usize,
    /// Largest frame body accepted or sent. A connection's frame reader
    /// holds at most `max_frame + frame::READER_SLACK` bytes.
    pub max_frame: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // max_promises = 1024: deep enough for any pipelined chain we measure,
        // and bounds a connection's answer table to 1024 pooled buffers.
        Limits { max_promises: 1024, max_frame: DEFAULT_MAX_FRAME }
    }
}

/// One call as a handler sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub method: u32,
    pub promise: u32,
    pub capability: &'a [u8],
    pub payload: &'a [u8],
    /// The result body of the target promise, when the call named one.
    pub target: Option<&'a [u8]>,
}

/// A method: writes its result into `out`; `Err(status)` fails the call
/// (whatever it wrote to `out` becomes the error body).
pub type Handler = Box<dyn Fn(&Call<'_>, &mut Vec<u8>) -> Result<(), u32> + Send + Sync>;

/// The method table: transport-agnostic, shared by every connection.
#[derive(Default)]
pub struct Dispatcher {
    methods: Vec<(u32, Handler)>,
}

impl Dispatcher {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `f` for `method` (replacing any earlier one). Method 0 is [`FINISH`].
    pub fn register<F>(&mut self, method: u32, f: F) -> &mut Self
    where
        F: Fn(&Call<'_>, &mut Vec<u8>) -> Result<(), u32> + Send + Sync + 'static,
    {
        assert_ne!(method, FINISH, "method 0 is reserved for finish");
        match self.methods.binary_search_by_key(&method, |(m, _)| *m) {
            Ok(i) => self.methods[i].1 = Box::new(f),
            Err(i) => self.methods.insert(i, (method, Box::new(f))),
        }
        self
    }

    /// Runs the handler for `call.method`; the status.
    pub fn dispatch(&self, call: &Call<'_>, out: &mut Vec<u8>) -> u32 {
        match self.methods.binary_search_by_key(&call.method, |(m, _)| *m) {
            Ok(i) => match (self.methods[i].1)(call, out) {
                Ok(()) => status::OK,
                Err(s) => s,
            },
            Err(_) => {
                let _ = write!(out, "unknown method {}", call.method);
                status::NOT_FOUND
            }
        }
    }
}

struct Answer {
    promise: u32,
    status: u32,
    body: Vec<u8>,
}

/// The promise table of one connection: each call's answer, kept until the
/// client sends `finish`, bounded by [`Limits::max_promises`].
///
/// Transport-agnostic, so a server that runs calls elsewhere (a worker pool,
/// an async task) keeps the same pipelining rules as [`ServerConn`]: a call's
/// promise must be new and non-zero (400), the table must have room (429), a
/// target must be live (410) and must have succeeded (424).
pub struct Answers {
    answers: Vec<Answer>,
    max: usize,
    /// The stored bodies' bytes: what a server counts against its memory budget.
    bytes: usize,
}

impl Answers {
    /// An empty table; allocates nothing until the first answer is stored.
    pub fn new(max_promises: usize) -> Self {
        Answers { answers: Vec::new(), max: max_promises, bytes: 0 }
    }

    /// Answers currently held.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// Bytes of the answers' bodies held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn find(&self, promise: u32) -> Option<usize> {
        self.answers.iter().position(|a| a.promise == promise)
    }

    /// Checks a call before it runs. `Ok(target's body)` (`None` without a
    /// target), or the refusal status with its reason written to `why`.
    pub fn admit(&self, promise: u32, target: u32, why: &mut Vec<u8>) -> Result<Option<&[u8]>, u32> {
        if promise == 0 || self.find(promise).is_some() {
            let _ = write!(why, "promise id {promise} is reserved or already in use");
            return Err(status::BAD_REQUEST);
        }
        if self.answers.len() >= self.max {
            let _ = write!(why, "promise table full ({} answers); finish some", self.max);
            return Err(status::TOO_MANY);
        }
        if target == 0 {
            return Ok(None);
        }
        match self.find(target) {
            None => {
                let _ = write!(why, "target promise {target} is unknown or finished");
                Err(status::GONE)
            }
            Some(i) if self.answers[i].status != status::OK => {
                let _ = write!(why, "target promise {target} failed with status {}", self.answers[i].status);
                Err(status::FAILED_DEPENDENCY)
            }
            Some(i) => Ok(Some(&self.answers[i].body)),
        }
    }

    /// Stores the answer of an admitted call; its body, as stored.
    pub fn store(&mut self, promise: u32, status: u32, body: Vec<u8>) -> &[u8] {
        self.bytes += body.len();
        self.answers.push(Answer { promise, status, body });
        &self.answers[self.answers.len() - 1].body
    }

    /// Releases `promise`'s answer (a `finish`); its body, for reuse.
    pub fn release(&mut self, promise: u32) -> Option<Vec<u8>> {
        let i = self.find(promise)?;
        let body = self.answers.swap_remove(i).body;
        self.bytes -= body.len();
        Some(body)
    }

    /// Releases every answer whose promise is in `run` (a `finish` of
    /// several, [`finish_run`]), handing each body to `reuse`.
    pub fn release_run(&mut self, run: Run, mut reuse: impl FnMut(Vec<u8>)) {
        if run.n == 1 {
            if let Some(b) = self.release(run.first) {
                reuse(b);
            }
            return;
        }
        let mut i = 0;
        while i < self.answers.len() {
            if run.contains(self.answers[i].promise) {
                let body = self.answers.swap_remove(i).body;
                self.bytes -= body.len();
                reuse(body);
            } else {
                i += 1;
            }
        }
    }

    /// Gives the table's capacity back when it holds nothing, so an idle
    /// connection costs no table. NOTE: a request/response loop that wants
    /// zero allocations per call keeps the capacity instead (no call here).
    pub fn shrink_if_empty(&mut self) {
        if self.answers.is_empty() {
            self.answers = Vec::new();
        }
    }
}

/// Server-side state of one connection: the answer table and reused buffers.
pub struct ServerConn {
    answers: Answers,
    pool: BufPool,
    builder: Builder,
    limits: Limits,
}

impl ServerConn {
    pub fn new(limits: Limits) -> Self {
        ServerConn {
            answers: Answers::new(limits.max_promises),
            // Keep as many free buffers as answers may be live, each at most one frame.
            pool: BufPool::new(limits.max_promises, limits.max_frame),
            builder: Builder::new(),
            limits,
        }
    }

    /// Answers currently held for this connection.
    pub fn live_answers(&self) -> usize {
        self.answers.len()
    }

    /// Handles one request message; the response to send, or `None` for `finish`.
    ///
    /// PERF: after warm-up this allocates nothing: answer bodies come from the
    /// pool, the response is built in a reused builder, and the answer table
    /// keeps its capacity.
    pub fn handle(&mut self, d: &Dispatcher, req: &[u8]) -> Option<&[u8]> {
        let parsed = parse(req)
            .and_then(|m| m.root::<Request>())
            .and_then(|r| Ok((r.method(), r.promise(), r.target(), r.capability()?, r.payload()?)));
        let (method, promise, target, capability, payload) = match parsed {
            Ok(v) => v,
            Err(e) => {
                let mut body = self.pool.get();
                let _ = write!(body, "malformed request: {e}");
                let out = self.respond_owned(status::BAD_REQUEST, 0, body);
                return Some(out);
            }
        };
        if method == FINISH {
            let pool = &mut self.pool;
            self.answers.release_run(finish_run(target, payload), |b| pool.put(b));
            return None;
        }
        let mut body = self.pool.get();
        let status = match self.answers.admit(promise, target, &mut body) {
            Ok(target) => d.dispatch(&Call { method, promise, capability, payload, target }, &mut body),
            Err(s @ (status::BAD_REQUEST | status::TOO_MANY)) => {
                // Refused calls are not stored: they answer and are gone.
                return Some(self.respond_owned(s, promise, body));
            }
            Err(s) => s,
        };
        let stored = self.answers.store(promise, status, body);
        let mut r = self.builder.root::<Response>();
        r.status(status);
        r.promise(promise);
        r.body(stored);
        Some(r.finish().unwrap_or(&[]))
    }

    fn respond_owned(&mut self, status: u32, promise: u32, body: Vec<u8>) -> &[u8] {
        // The body goes straight back to the pool: error answers are not stored.
        let mut r = self.builder.root::<Response>();
        r.status(status);
        r.promise(promise);
        r.body(&body);
        let _ = r.finish();
        self.pool.put(body);
        self.builder.finish().unwrap_or(&[])
    }

    /// Serves frames from `r` until it ends, answering on `w` after each call.
    pub fn serve<R: Read, W: Write>(&mut self, d: &Dispatcher, r: R, w: W) -> Result<u64, FrameError> {
        let mut reader = FrameReader::with_max(r, self.limits.max_frame);
        let mut writer = FrameWriter::with_max(w, self.limits.max_frame);
        let mut calls = 0u64;
        while let Some(frame) = reader.read_frame()? {
            calls += 1;
            if let Some(resp) = self.handle(d, frame) {
                writer.write_frame(resp)?;
            }
        }
        Ok(calls)
    }

    /// Serves exactly the frames already buffered in `r` (for in-memory pipes,
    /// where an empty pipe reads as end of stream).
    pub fn serve_available<R: Read, W: Write>(
        &mut self,
        d: &Dispatcher,
        reader: &mut FrameReader<R>,
        writer: &mut FrameWriter<W>,
    ) -> Result<u64, FrameError> {
        let mut calls = 0u64;
        while let Some(frame) = reader.read_frame()? {
            calls += 1;
            if let Some(resp) = self.handle(d, frame) {
                writer.push(resp)?;
            }
        }
        writer.flush()?;
        Ok(calls)
    }
}

/// A call's handle on the client; pass it to `call_on`, `wait`, `finish`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promise(pub u32);

/// A response as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    pub status: u32,
    pub body: &'a [u8],
}

impl Reply<'_> {
    pub fn is_ok(&self) -> bool {
        self.status == status::OK
    }
}

/// Why a client operation failed (as opposed to a call answered with an error status).
#[derive(Debug)]
pub enum RpcError {
    Frame(FrameError),
    /// A response from the server did not parse.
    Malformed(Error),
    /// The server answered a promise this client is not waiting for.
    UnexpectedPromise(u32),
    /// `wait` on a promise this client never issued or already finished.
    UnknownPromise(u32),
    /// More unfinished promises than the client's limit.
    TooManyPending {
        limit: usize,
    },
    /// The connection ended while waiting for `promise`.
    Closed {
        promise: u32,
    },
    /// The server answered promise 0: an error about the connection itself
    /// (a malformed or oversized frame, a refused connection), not a call.
    Refused {
        status: u32,
        message: String,
    },
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Frame(e) => write!(f, "{e}"),
            RpcError::Malformed(e) => write!(f, "malformed response: {e}"),
            RpcError::UnexpectedPromise(p) => {
                write!(f, "server answered promise {p}, which this client has not issued")
            }
            RpcError::UnknownPromise(p) => {
                write!(f, "promise {p} was never issued or is already finished")
            }
            RpcError::TooManyPending { limit } => {
                write!(f, "more than {limit} unfinished promises; call finish")
            }
            RpcError::Closed { promise } => {
                write!(f, "connection closed while waiting for promise {promise}")
            }
            RpcError::Refused { status, message } => write!(f, "server refused (status {status}): {message}"),
        }
    }
}

impl std::error::Error for RpcError {}

impl From<FrameError> for RpcError {
    fn from(e: FrameError) -> Self {
        RpcError::Frame(e)
    }
}

struct Slot {
    promise: u32,
    /// `None` until the response arrives.
    reply: Option<(u32, Vec<u8>)>,
    /// Finished before its response arrived: drop the response when it does.
    finished: bool,
}

/// The slot of `promise` that `pick` accepts.
///
/// PERF: a binary search, O(log n) where a scan made a pipelined batch of n
/// calls cost O(n²) to wait for and finish; the scan remains for after the
/// numbering wraps past `u32::MAX` (the order breaks there) and for a
/// promise the client does not hold.
fn find_slot(slots: &VecDeque<Slot>, promise: u32, pick: impl Fn(&Slot) -> bool) -> Option<usize> {
    // PERF: while no promise in between has been removed, `promise` sits
    // at its distance from the first: a pipelined batch's answers arrive
    // in that order, and each is found with one comparison.
    let guess = slots.front().map_or(usize::MAX, |f| promise.wrapping_sub(f.promise) as usize);
    if let Some(s) = slots.get(guess) {
        if s.promise == promise && pick(s) {
            return Some(guess);
        }
    }
    match slots.binary_search_by_key(&promise, |s| s.promise) {
        Ok(i) if pick(&slots[i]) => Some(i),
        _ => slots.iter().position(|s| s.promise == promise && pick(s)),
    }
}

/// The client half: issues calls without waiting, then waits for any of them.
pub struct Client<R, W> {
    reader: FrameReader<R>,
    writer: FrameWriter<W>,
    builder: Builder,
    next: u32,
    /// In promise order (pushed as numbered, removed in place), so that a
    /// promise is found by binary search.
    slots: VecDeque<Slot>,
    /// Finished promises not yet told to the server, sent as one `finish`
    /// before the next call or flush.
    finishing: Run,
    pool: BufPool,
    limits: Limits,
}

impl<R: Read, W: Write> Client<R, W> {
    pub fn new(r: R, w: W) -> Self {
        Self::with_limits(r, w, Limits::default())
    }

    pub fn with_limits(r: R, w: W, limits: Limits) -> Self {
        Client {
            reader: FrameReader::with_max(r, limits.max_frame),
            writer: FrameWriter::with_max(w, limits.max_frame),
            builder: Builder::new(),
            next: 1,
            slots: VecDeque::new(),
            finishing: Run { first: 0, n: 0 },
            pool: BufPool::new(limits.max_promises, limits.max_frame),
            limits,
        }
    }

    /// Queues a call; it is sent with the next `flush` or `wait`.
    pub fn call(&mut self, method: u32, args: &[u8]) -> Result<Promise, RpcError> {
        self.call_with(method, 0, &[], args)
    }

    /// Queues a call that consumes the result of `target`, which need not have resolved.
    pub fn call_on(&mut self, target: Promise, method: u32, args: &[u8]) -> Result<Promise, RpcError> {
        self.call_with(method, target.0, &[], args)
    }

    /// Queues a call with every envelope field spelled out.
    pub fn call_with(&mut self, method: u32, target: u32, capability: &[u8], args: &[u8]) -> Result<Promise, RpcError> {
        if self.slots.len() >= self.limits.max_promises {
            return Err(RpcError::TooManyPending { limit: self.limits.max_promises });
        }
        let promise = self.next;
        // Wraps past u32::MAX, skipping 0 (which means "no promise").
        self.next = self.next.checked_add(1).unwrap_or(1);
        // NOTE: finishes leave before the next call, in the order they were
        // made: the server's table has room for this call exactly when the
        // client's does.
        self.send_finishes()?;
        let mut req = self.builder.root::<Request>();
        req.method(method);
        req.promise(promise);
        req.target(target);
        req.capability(capability);
        req.payload(args);
        let msg = req.finish().map_err(RpcError::Malformed)?;
        self.writer.push(msg)?;
        self.slots.push_back(Slot { promise, reply: None, finished: false });
        Ok(Promise(promise))
    }

    /// Sends every queued call.
    pub fn flush(&mut self) -> Result<(), RpcError> {
        self.send_finishes()?;
        Ok(self.writer.flush()?)
    }

    /// Queues the pending run of finishes as one `finish` frame.
    fn send_finishes(&mut self) -> Result<(), RpcError> {
        let run = std::mem::replace(&mut self.finishing, Run { first: 0, n: 0 });
        if run.n == 0 {
            return Ok(());
        }
        let mut req = self.builder.root::<Request>();
        req.method(FINISH);
        req.target(run.first);
        if run.n > 1 {
            req.payload(&run.n.to_le_bytes());
        }
        let msg = req.finish().map_err(RpcError::Malformed)?;
        self.writer.push(msg)?;
        Ok(())
    }

    /// Waits for `p`'s response, storing responses to other promises on the way.
    /// The reply stays available until `finish(p)`.
    pub fn wait(&mut self, p: Promise) -> Result<Reply<'_>, RpcError> {
        self.flush()?;
        let waiting = |s: &Slot| !s.finished;
        let mut idx = find_slot(&self.slots, p.0, waiting).ok_or(RpcError::UnknownPromise(p.0))?;
        while self.slots[idx].reply.is_none() {
            let frame = self.reader.read_frame()?.ok_or(RpcError::Closed { promise: p.0 })?;
            let (promise, status, body) = parse(frame)
                .and_then(|m| m.root::<Response>())
                .and_then(|r| Ok((r.promise(), r.status(), r.body()?)))
                .map_err(RpcError::Malformed)?;
            if promise == 0 {
                let message = String::from_utf8_lossy(body).into_owned();
                return Err(RpcError::Refused { status, message });
            }
            let i =
                find_slot(&self.slots, promise, |s| s.reply.is_none()).ok_or(RpcError::UnexpectedPromise(promise))?;
            if self.slots[i].finished {
                self.slots.remove(i);
                idx = find_slot(&self.slots, p.0, waiting).ok_or(RpcError::UnknownPromise(p.0))?;
                continue;
            }
            let mut buf = self.pool.get();
            buf.extend_from_slice(body);
            self.slots[i].reply = Some((status, buf));
        }
        match &self.slots[idx].reply {
            Some((status, body)) => Ok(Reply { status: *status, body }),
            None => Err(RpcError::Closed { promise: p.0 }),
        }
    }

    /// Releases `p` here and queues a `finish` so the server releases its answer.
    /// Costs no round trip: it leaves with the next batch of calls.
    pub fn finish(&mut self, p: Promise) -> Result<(), RpcError> {
        let idx = find_slot(&self.slots, p.0, |s| !s.finished).ok_or(RpcError::UnknownPromise(p.0))?;
        if self.slots[idx].reply.is_none() {
            // Its response is still on the way; `wait` drops it on arrival.
            self.slots[idx].finished = true;
        } else if let Some((_, buf)) = self.slots.remove(idx).and_then(|s| s.reply) {
            self.pool.put(buf);
        }
        // Consecutive finishes (a chain's, in order) join one run; the run
        // never wraps past u32::MAX.
        let f = self.finishing;
        if f.n > 0 && f.first.checked_add(f.n) == Some(p.0) {
            self.finishing.n += 1;
        } else {
            self.send_finishes()?;
            self.finishing = Run { first: p.0, n: 1 };
        }
        Ok(())
    }

    /// Unfinished promises held by this client.
    pub fn pending(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duplex::MemPipe;

    /// A client and a server over in-memory pipes, the client's numbering
    /// starting at `next`; `up` is the client→server pipe, to inspect.
    struct Pair {
        client: Client<MemPipe, MemPipe>,
        server: ServerConn,
        sr: FrameReader<MemPipe>,
        sw: FrameWriter<MemPipe>,
        up: MemPipe,
    }

    impl Pair {
        fn numbered_from(next: u32) -> Pair {
            let (up, down) = (MemPipe::new(), MemPipe::new());
            let mut client = Client::new(down.clone(), up.clone());
            client.next = next;
            let server = ServerConn::new(Limits::default());
            let (sr, sw) = (FrameReader::new(up.clone()), FrameWriter::new(down));
            Pair { client, server, sr, sw, up }
        }
    }

    /// Calls numbered across the wrap past `u32::MAX` (where the slots stop
    /// being in promise order and the lookup falls back to a scan), waited
    /// for out of order, some finished before their answers arrive: every
    /// wait gets its own call's answer.
    #[test]
    fn promises_across_the_wrap_find_their_answers() {
        let Pair { mut client, mut server, mut sr, mut sw, .. } = Pair::numbered_from(u32::MAX - 2);
        let mut d = Dispatcher::new();
        d.register(1, |c, out| {
            out.extend_from_slice(c.payload);
            Ok(())
        });
        let ps: Vec<Promise> = (0u8..6).map(|i| client.call(1, &[i]).unwrap()).collect();
        assert_eq!(ps.iter().map(|p| p.0).collect::<Vec<_>>(), [u32::MAX - 2, u32::MAX - 1, u32::MAX, 1, 2, 3]);
        client.finish(ps[1]).unwrap();
        client.finish(ps[4]).unwrap();
        client.flush().unwrap();
        server.serve_available(&d, &mut sr, &mut sw).unwrap();
        for i in [5usize, 0, 3, 2] {
            assert_eq!(client.wait(ps[i]).unwrap().body, [i as u8], "promise {}", ps[i].0);
        }
        for i in [0usize, 2, 3, 5] {
            client.finish(ps[i]).unwrap();
        }
        assert_eq!(client.pending(), 0, "finished before and after their answers, all released");
        assert!(matches!(client.wait(ps[1]), Err(RpcError::UnknownPromise(_))));
    }

    /// Finishes in promise order travel as one frame per run (a gap, or the
    /// wrap past `u32::MAX`, starts a new run), and the server releases
    /// exactly the promises each run names.
    #[test]
    fn consecutive_finishes_travel_as_one_run() {
        let Pair { mut client, mut server, mut sr, mut sw, up } = Pair::numbered_from(u32::MAX - 3);
        let mut d = Dispatcher::new();
        d.register(1, |_, _| Ok(()));
        // u32::MAX − 3 ..= u32::MAX, then 1 ..= 6.
        let ps: Vec<Promise> = (0..10).map(|_| client.call(1, &[]).unwrap()).collect();
        client.flush().unwrap();
        server.serve_available(&d, &mut sr, &mut sw).unwrap();
        assert_eq!(server.answers.len(), 10);
        client.wait(ps[9]).unwrap();
        // Runs: [MAX−3, MAX−2, MAX−1, MAX] (stops at the wrap), [1, 2], [4, 5, 6]; 3 stays.
        for i in [0usize, 1, 2, 3, 4, 5, 7, 8, 9] {
            client.finish(ps[i]).unwrap();
        }
        client.flush().unwrap();
        let mut frames = FrameReader::new(up.clone());
        let mut runs = Vec::new();
        while let Some(f) = frames.read_frame().unwrap() {
            let r = parse(f).and_then(|m| m.root::<Request>()).unwrap();
            assert_eq!(r.method(), FINISH);
            runs.push(finish_run(r.target(), r.payload().unwrap()));
        }
        let run = |first, n| Run { first, n };
        assert_eq!(runs, [run(u32::MAX - 3, 4), run(1, 2), run(4, 3)]);
        for r in runs {
            server.answers.release_run(r, drop);
        }
        assert_eq!(server.answers.len(), 1, "only the unfinished promise is held");
        assert!(server.answers.find(3).is_some());
        assert!(!run(u32::MAX, 1).contains(0) && run(u32::MAX, 1).contains(u32::MAX));
    }
}
