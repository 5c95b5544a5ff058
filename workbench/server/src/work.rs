//! What a worker runs and what it answers: the types the connection hands
//! to the pool and the handler fills in, kept apart from both so that
//! neither needs the other's module.

use datastore::Value;

/// What a worker runs.
pub enum Work {
    /// Consecutive queries of one connection, run in order by one worker; a
    /// query may bind `$prev` to an earlier one of the same run.
    Queries(Queries),
    /// A `Columns` message to insert; `call` as in [`QueryCall::call`].
    Insert { msg: Vec<u8>, call: u64 },
    /// The sampled heap profile ([`crate::protocol::HEAP_PROFILE`]): a dump
    /// read and resolved, too slow for the I/O thread.
    HeapProfile { call: u64 },
}

impl Work {
    /// The calls it answers, in order: (promise, call number).
    pub fn calls(&self, promise: u32) -> Vec<(u32, u64)> {
        match self {
            Work::Queries(q) => q.calls.iter().map(|c| (c.promise, c.call)).collect(),
            Work::Insert { call, .. } | Work::HeapProfile { call } => vec![(promise, *call)],
        }
    }
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
    pub fn one(promise: u32, call: u64, sql: &str, prev: Prev) -> Queries {
        let mut q = Queries { calls: Vec::with_capacity(1), texts: String::with_capacity(sql.len()), room: 0 };
        q.push(promise, call, sql, prev);
        q
    }

    pub fn push(&mut self, promise: u32, call: u64, sql: &str, prev: Prev) {
        let at = self.texts.len();
        self.texts.push_str(sql);
        self.calls.push(QueryCall { promise, call, sql: at..self.texts.len(), prev, wanted: true });
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
    pub fn push_repeat(&mut self, promise: u32, call: u64, prev: Prev) {
        if let Some(sql) = self.calls.last().map(|c| c.sql.clone()) {
            self.calls.push(QueryCall { promise, call, sql, prev, wanted: true });
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
    /// The server's number for the call (1 up, in arrival order over every
    /// connection): what its allocations count for in the dhat build's
    /// per-call costs (`probe::calls`).
    pub call: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeated text is shared by the calls that send it; any other text
    /// (or none before it) is not a repeat.
    #[test]
    fn a_repeated_text_is_shared_not_copied() {
        let mut q = Queries::default();
        assert!(!q.repeats(b"SELECT 1"), "nothing to repeat yet");
        q.push(1, 1, "SELECT 1", Prev::None);
        assert!(q.repeats(b"SELECT 1") && !q.repeats(b"SELECT 2") && !q.repeats(b"SELECT 1 "));
        q.push_repeat(2, 2, Prev::None);
        q.push(3, 3, "SELECT 2", Prev::None);
        let (texts, calls, _) = q.into_calls();
        let sql: Vec<&str> = calls.iter().map(|c| &texts[c.sql.clone()]).collect();
        assert_eq!(sql, ["SELECT 1", "SELECT 1", "SELECT 2"]);
        assert_eq!(texts, "SELECT 1SELECT 2", "the repeat added no text");
    }
}
