//! What each method does against the engine; runs on a worker thread.

use crate::budget::{Budget, Refused};
use crate::limits::Config;
use crate::protocol::{self, ColumnsView, ColumnsWriter};
use crate::work::{Answer, Prev, Work};
use datastore::exec::memory::{Scope, Tracker};
use datastore::storage::table::Merger;
use datastore::{ColumnType, Db, Error, Limits, Output, Value};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use zap::frame::BufPool;
use zap::Builder;

/// A worker's reused encoding buffers, and answer bodies taken from
/// [`Handler::bodies`] for the run at hand.
#[derive(Default)]
pub struct Scratch {
    writer: ColumnsWriter,
    builder: Builder,
    bodies: Vec<Vec<u8>>,
    /// This worker's query memory budget, made once: a query's accounts
    /// give back all they charged when it ends, so the next one starts at 0.
    memory: Option<Arc<Tracker>>,
}

/// A query of a run: its SQL is `text[sql]`; `id` its call number.
struct Call<'a> {
    id: u64,
    text: &'a str,
    sql: std::ops::Range<usize>,
    wanted: bool,
}

/// The run's last SELECT, bound, and where its text lies in the run.
type Kept = (std::ops::Range<usize>, datastore::BoundSelect);

/// Answer bodies kept for reuse: 64 of up to 1 KiB (64 KiB at most). A
/// pipelined chain needs one (its links but the last have no rows), a
/// request-response call one.
const BODIES: usize = 64;
const BODY_CAPACITY: usize = 1 << 10;

/// The engine behind the server: the data directory, the limits, and one
/// background merger per table that has taken inserts.
pub struct Handler {
    db: Db,
    cfg: Config,
    mergers: Mutex<HashMap<String, Merger>>,
    bodies: Mutex<BufPool>,
    budget: Budget,
    /// When the server started: the span a heap profile covers (the
    /// sampling build only; the others answer no heap profile).
    #[cfg(feature = "jemalloc-prof")]
    started: Instant,
}

fn answer(status: u32, body: impl Into<Vec<u8>>) -> Answer {
    Answer::new(status, body)
}

/// The answer to an engine error. The caller's mistakes (SQL, names, limits)
/// are 4xx with the engine's message; a storage failure is 500 with a
/// message that names no path (the server's log has the whole error), but
/// for a full disk, which is 507 and says so: the operator's to fix. A
/// query past its memory budget is 413 (the query is too large for it);
/// past the server's total, 503 (others hold it: try again).
fn failed(e: &Error) -> Answer {
    if let Error::MemoryLimit { scope, limit, wanted } = e {
        return match scope {
            Scope::Query => answer(
                protocol::TOO_LARGE,
                format!(
                    "query stopped: its working memory would reach {wanted} bytes, past the query memory limit of \
                     {limit} bytes (--max-query-memory)"
                ),
            ),
            Scope::Server => answer(
                protocol::UNAVAILABLE,
                format!(
                    "query refused: the server's memory budget of {limit} bytes (--max-server-memory) is held by \
                     other queries and answers; try again"
                ),
            ),
        };
    }
    if let Error::Io { source, .. } = e {
        if source.kind() == std::io::ErrorKind::StorageFull {
            eprintln!("storage error: {e}");
            return answer(
                protocol::INSUFFICIENT_STORAGE,
                "not stored: no space left on the data directory's disk; nothing of this call was written, and \
                 every insert acknowledged before it is kept",
            );
        }
    }
    let status = match e {
        Error::Sql { .. }
        | Error::Parse(_)
        | Error::Table { .. }
        | Error::Column { .. }
        | Error::Name { .. }
        | Error::SqlLimit { .. } => protocol::UNPROCESSABLE,
        Error::Deadline { .. } => protocol::TIMEOUT,
        Error::MemoryLimit { .. } => unreachable!("answered above"),
        Error::ResultTooLarge { .. } => protocol::TOO_LARGE,
        Error::Io { .. } | Error::Corrupt { .. } => protocol::INTERNAL,
    };
    if e.is_user_error() {
        return answer(status, e.to_string());
    }
    eprintln!("storage error: {e}");
    answer(status, "internal error: the storage failed on this call (the server's log has the details)")
}

impl Handler {
    pub fn new(db: Db, cfg: Config) -> Handler {
        Handler {
            db,
            mergers: Mutex::new(HashMap::new()),
            bodies: Mutex::new(BufPool::new(BODIES, BODY_CAPACITY)),
            budget: Budget::new(cfg.answer_budget, Tracker::server(cfg.max_server_memory)),
            #[cfg(feature = "jemalloc-prof")]
            started: Instant::now(),
            cfg,
        }
    }

    /// The server-wide answer budget (`--answer-budget`).
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Released answer bodies, for the workers to answer into again.
    /// PERF: a body is made on a worker and freed on the I/O thread when its
    /// promise is finished; through the allocator that crossing missed the
    /// thread caches every time (callgrind: a slow `malloc` and three slow
    /// `free`s a chain link). A run takes and gives its bodies under one lock.
    pub fn bodies(&self) -> &Mutex<BufPool> {
        &self.bodies
    }

    /// Runs a unit of work: one answer per query of a run, or one for an insert.
    pub fn run(&self, work: Work, s: &mut Scratch) -> Vec<Answer> {
        match work {
            Work::Insert { msg, call } => {
                let _tag = probe::calls::tag(call);
                probe::calls::describe(call, crate::costs::INSERT, 0);
                vec![guarded(|| self.insert(&msg, s))]
            }
            Work::HeapProfile { call } => {
                let _tag = probe::calls::tag(call);
                probe::calls::describe(call, crate::costs::HEAP_PROFILE, 0);
                vec![guarded(|| self.heap_profile())]
            }
            Work::Queries(run) => {
                let (texts, calls, mut room) = run.into_calls();
                if let Ok(mut pool) = self.bodies.lock() {
                    s.bodies.extend((s.bodies.len()..calls.len()).map(|_| pool.get()));
                }
                let mut out: Vec<Answer> = Vec::with_capacity(calls.len());
                // Each answer's first value when it is a 64-bit integer (the
                // value its body decodes to), so `$prev` skips the decode.
                let mut firsts: Vec<Option<Value>> = Vec::with_capacity(calls.len());
                // The last SELECT bound, by its text's place in the run: a
                // repeated text shares that place (`Queries::push_repeat`).
                let mut kept: Option<Kept> = None;
                for c in calls {
                    let _tag = probe::calls::tag(c.call);
                    let prev = match c.prev {
                        Prev::None => Ok(None),
                        Prev::Value(v) => Ok(Some(v)),
                        Prev::Earlier { index, promise } => match &firsts[index] {
                            Some(v) => Ok(Some(v.clone())),
                            None => bind(&out[index], promise),
                        },
                    };
                    let (a, first) = match prev {
                        Ok(prev) => {
                            let mut first = None;
                            let call = Call { id: c.call, text: &texts, sql: c.sql, wanted: c.wanted };
                            (guarded(|| self.query(call, prev, s, &mut kept, &mut first, &mut room)), first)
                        }
                        Err(a) => (a, None),
                    };
                    out.push(a);
                    firsts.push(first);
                }
                if let (false, Ok(mut pool)) = (s.bodies.is_empty(), self.bodies.lock()) {
                    s.bodies.drain(..).for_each(|b| pool.put(b));
                }
                out
            }
        }
    }

    /// The sampled heap as gzipped pprof. jemalloc writes its dump to a
    /// file, so it goes through the temporary directory (not the data
    /// directory, whose files are the store's).
    #[cfg(feature = "jemalloc-prof")]
    fn heap_profile(&self) -> Answer {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            eprintln!("heap_profile: {what}: {e}");
            answer(protocol::INTERNAL, format!("heap profile: {what}: {e}"))
        };
        let text = match probe::sampled::snapshot(&std::env::temp_dir(), self.started) {
            Ok(t) => t,
            Err(e) => return fail("dumping jemalloc's profile", &e),
        };
        let t = match trace::Trace::parse(std::path::Path::new("heap_profile"), &text) {
            Ok(t) => t,
            Err(e) => return fail("reading it", &e),
        };
        let labels = trace::pprof::Labels { variant: Some(probe::VARIANT.name().into()), ..Default::default() };
        answer(protocol::OK, trace::pprof::encode(&t, &labels))
    }

    #[cfg(not(feature = "jemalloc-prof"))]
    fn heap_profile(&self) -> Answer {
        answer(
            protocol::NOT_BUILT,
            format!(
                "heap_profile: this server is the {} build; only the sampling build (variant jemalloc-prof, \
                 jemalloc's heap profiler) keeps a heap profile",
                probe::VARIANT.name()
            ),
        )
    }

    /// One query's answer; `first` gets its first value if that is a
    /// UInt64 or Int64 (which travel exactly) and the answer is OK. Not
    /// `wanted` (released already) and with such a first value, the answer
    /// has no body: the run binds `$prev` from `first`, no one reads the rows.
    /// A SELECT whose text is `kept`'s is rebound, not looked up again.
    fn query(
        &self,
        call: Call<'_>,
        prev: Option<Value>,
        s: &mut Scratch,
        kept: &mut Option<Kept>,
        first: &mut Option<Value>,
        room: &mut usize,
    ) -> Answer {
        let sql = &call.text[call.sql.clone()];
        if sql.trim_start().get(..6).is_some_and(|w| w.eq_ignore_ascii_case("create")) {
            return match self.db.execute(sql) {
                Ok(Output::Created(name)) => self.encode(&one_row("created", Value::S(name)), s, None),
                Ok(Output::Rows(r, _)) => self.encode(&r, s, Some(room)),
                Err(e) => failed(&e),
            };
        }
        let bound = prev.map(|v| [("$prev", v)]);
        let params: &[(&str, Value)] = bound.as_ref().map_or(&[], |b| b);
        let memory = s
            .memory
            .get_or_insert_with(|| Tracker::query(self.cfg.max_query_memory, Some(self.budget.server().clone())));
        let limits = Limits {
            deadline: Some(Instant::now() + self.cfg.query_timeout),
            deadline_ms: self.cfg.query_timeout.as_millis() as u64,
            max_rows: Some(self.cfg.max_result_rows),
            threads: self.cfg.query_threads,
            memory: Some(memory.clone()),
        };
        let select = match kept.take() {
            Some((at, b)) if at == call.sql => b.rebind(params),
            _ => self.db.bind(sql, params),
        };
        // The dhat build's per-call costs hold the tracker's charge for this
        // query against what it allocated (`probe::calls`).
        let recording = probe::calls::recording();
        if recording {
            memory.reset_peak();
        }
        let result = select.and_then(|mut b| {
            let r = b.run(&limits);
            *kept = Some((call.sql.clone(), b));
            r
        });
        if recording {
            probe::calls::describe(call.id, crate::costs::query_kind(sql), memory.peak() as u64);
        }
        let r = match result {
            Ok((r, _)) => r,
            Err(e) => return failed(&e),
        };
        let int = match (r.types.first(), r.rows.first().and_then(|row| row.first())) {
            (Some(ColumnType::UInt64), Some(v @ Value::U(_))) => Some(v.clone()),
            (Some(ColumnType::Int64), Some(v @ Value::I(_))) => Some(v.clone()),
            _ => None,
        };
        let a = if !call.wanted && int.is_some() {
            *first = int;
            answer(protocol::OK, Vec::new())
        } else {
            let a = self.encode(&r, s, Some(room));
            if a.status == protocol::OK {
                *first = int;
            }
            a
        };
        if let Some((_, b)) = kept {
            b.recycle(r.rows);
        }
        a
    }

    /// A result's answer. With `room` (a query's answer) its bytes are
    /// reserved first, against the connection's room and the server's
    /// budget, and an answer that does not fit is refused before it is
    /// copied out of the encoding buffer. Without (a CREATE's or an
    /// insert's one row), it is counted when stored.
    fn encode(&self, r: &datastore::QueryResult, s: &mut Scratch, room: Option<&mut usize>) -> Answer {
        match protocol::encode_result(&mut s.writer, &mut s.builder, r) {
            // The envelope around the body is 40 bytes; keep the frame under the limit.
            Ok(msg) if msg.len() + 64 > self.cfg.max_frame => answer(
                protocol::TOO_LARGE,
                format!("result of {} bytes exceeds the {}-byte frame limit", msg.len(), self.cfg.max_frame),
            ),
            Ok(msg) => {
                // Stored until `finish` and queued for the socket: twice its bytes.
                let need = 2 * msg.len();
                let reserved = match room {
                    Some(room) if need > *room => {
                        let why = format!(
                            "answer of {} bytes refused: with the answers this connection holds and queues it would \
                             pass the connection's answer budget of {} bytes (--conn-answer-budget); finish promises \
                             to free them",
                            msg.len(),
                            self.cfg.conn_answer_budget
                        );
                        return answer(protocol::TOO_MANY, why);
                    }
                    Some(_) if let Err(refused) = self.budget.try_reserve(need) => {
                        let why = match refused {
                            Refused::Answers => format!(
                                "answer of {} bytes refused: the server's answer budget of {} bytes (--answer-budget) \
                                 is held by other answers; try again",
                                msg.len(),
                                self.budget.max()
                            ),
                            Refused::Server => format!(
                                "answer of {} bytes refused: the server's memory budget of {} bytes \
                                 (--max-server-memory) is held by queries and answers; try again",
                                msg.len(),
                                self.budget.server().limit()
                            ),
                        };
                        return answer(protocol::UNAVAILABLE, why);
                    }
                    Some(room) => {
                        *room -= need;
                        need
                    }
                    None => 0,
                };
                let mut body = s.bodies.pop().unwrap_or_default();
                body.extend_from_slice(msg);
                Answer { status: protocol::OK, body, reserved }
            }
            Err(e) => answer(protocol::INTERNAL, format!("encoding the result: {e}")),
        }
    }

    fn insert(&self, msg: &[u8], s: &mut Scratch) -> Answer {
        let view = match ColumnsView::parse(msg) {
            Ok(v) => v,
            Err(e) => return answer(protocol::UNPROCESSABLE, format!("insert batch: {e}")),
        };
        let table = match self.db.table(view.table()) {
            Ok(t) => t,
            Err(e) => return failed(&e),
        };
        let schema: Vec<_> = table.schema.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
        let batch = match protocol::batch_for(&view, &schema) {
            Ok(b) => b,
            Err(e) => return answer(protocol::UNPROCESSABLE, format!("insert into `{}`: {e}", view.table())),
        };
        // NOTE: `Table::insert` returns once the part's files, its directory and
        // the table directory are fsynced: the acknowledgement below is durable.
        if let Err(e) = table.insert(&batch) {
            return failed(&e);
        }
        if let Ok(mut m) = self.mergers.lock() {
            m.entry(view.table().to_string()).or_insert_with(|| Merger::start(table.clone(), 4)).poke();
        }
        self.encode(&one_row("inserted", Value::U(batch.rows() as u64)), s, None)
    }

    /// Stops the background mergers (each finishes the merge it is in).
    pub fn stop(&self) {
        let mergers: Vec<Merger> =
            self.mergers.lock().map(|mut m| m.drain().map(|(_, v)| v).collect()).unwrap_or_default();
        for m in mergers {
            if let Err(e) = m.stop() {
                eprintln!("merger: {e}");
            }
        }
    }
}

/// A panic in the engine is a bug, but it fails its call (500), not the server.
fn guarded(f: impl FnOnce() -> Answer) -> Answer {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| answer(protocol::INTERNAL, "internal error: the engine panicked on this call"))
}

/// `$prev` from an earlier answer of the same run, or the answer that fails
/// the dependent call (the same statuses the answer table gives).
pub fn bind(target: &Answer, promise: u32) -> Result<Option<Value>, Answer> {
    if target.status != protocol::OK {
        let why = format!("target promise {promise} failed with status {}", target.status);
        return Err(answer(protocol::FAILED_DEPENDENCY, why));
    }
    match ColumnsView::parse(&target.body).and_then(|v| v.first_value()) {
        Ok(Some(v)) => Ok(Some(v)),
        Ok(None) => {
            Err(answer(protocol::UNPROCESSABLE, format!("target promise {promise} has no value to bind to $prev")))
        }
        Err(e) => Err(answer(protocol::UNPROCESSABLE, format!("target promise {promise}: {e}"))),
    }
}

fn one_row(name: &str, v: Value) -> datastore::QueryResult {
    let ty = match v {
        Value::S(_) => datastore::ColumnType::String,
        _ => datastore::ColumnType::UInt64,
    };
    datastore::QueryResult { columns: [name.to_string()].into(), types: [ty].into(), rows: vec![vec![v]] }
}
