//! The server's limits, each with its reason.

use std::time::Duration;

/// Every bound the server enforces. `Default` is what `serve` starts with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Connections held at once; one more gets a 503 refusal frame and is closed.
    pub max_connections: usize,
    /// Largest frame read or written (requests, results, insert batches). A
    /// connection's input buffer holds at most `max_frame + PREFIX_LEN`
    /// bytes, whatever arrives (`connection::read_room`).
    pub max_frame: usize,
    /// Answers a connection may hold before `finish` (429 beyond).
    pub max_promises: usize,
    /// Result rows of one query's answer (413 beyond). Not the groups or
    /// rows a query holds on the way: those are `max_query_memory`'s.
    pub max_result_rows: usize,
    /// Bytes of working memory one query may hold (hash tables, aggregate
    /// states, sort buffers, decoded granules): past it the query stops
    /// with 413 naming the limit.
    pub max_query_memory: usize,
    /// Bytes the server holds for every query's working memory and every
    /// answer (held and queued) together: work that would pass it is
    /// refused with 503 naming the limit, the rest served.
    pub max_server_memory: usize,
    /// Time one query may run (408 beyond).
    pub query_timeout: Duration,
    /// How long a peer may stall in the middle of a frame before it is closed.
    /// An idle peer (between frames) is never timed out: holding connections
    /// open is what the connection-scaling experiment measures.
    pub stall_timeout: Duration,
    /// Worker threads running queries and inserts, shared by all connections.
    pub workers: usize,
    /// Threads one query may scan on (0: every core). Workers and their
    /// queries' helpers draw on the engine's one CPU budget
    /// (`datastore::exec::cpu`), so a lone query uses every core and
    /// concurrent ones share them.
    pub query_threads: usize,
    /// Calls queued for the workers before connections wait (backpressure).
    pub queue: usize,
    /// Bytes of answers the whole server holds, for dependents (stored until
    /// `finish`) and for sending (queued on a socket): an answer that would
    /// pass it is refused with 503, and nothing grows.
    pub answer_budget: usize,
    /// The same for one connection: an answer that would pass it is refused
    /// with 429 (the client holds too much; `finish` frees it).
    pub conn_answer_budget: usize,
    /// How long a peer may leave answers unread (a write that cannot go on)
    /// before it is closed and everything it held freed.
    pub write_timeout: Duration,
    /// How long the I/O thread keeps polling for the answer to the only
    /// call in flight before it sleeps in epoll (zero: never). A wake-up
    /// tuned to a VM, not a bound: see [`IDLE_SPIN`].
    pub idle_spin: Duration,
}

impl Default for Config {
    fn default() -> Self {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        Config {
            // max_connections = 16,384: above the 10,000 the papers measure, below
            // the 20,000 open files a process may hold here.
            max_connections: 16_384,
            max_frame: zap::frame::DEFAULT_MAX_FRAME,
            // max_promises = 1024: a chain of 64 with room for 15 more in flight.
            max_promises: 1024,
            // max_result_rows = 1,000,000: a plain SELECT of a 10M-row table is
            // refused instead of building a 100 MB answer.
            max_result_rows: 1_000_000,
            // max_query_memory = 2 GiB: `GROUP BY id ORDER BY id LIMIT 10`
            // over the paper's 10M rows (10M groups: two partitions' maps,
            // their merge's growth, a sort key a group) is answered, as
            // ClickHouse answers it; at 1 GiB it was refused at 1.13 GB
            // charged (measured, 2026-12-04). A query that would hold more
            // is stopped.
            max_query_memory: 2 << 30,
            // max_server_memory = 4 GiB: two such queries at once, or one
            // and the whole answer budget and more, on a machine of 24 GiB;
            // clients together cannot take the process past it.
            max_server_memory: 4 << 30,
            query_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(10),
            workers,
            query_threads: 0,
            // queue = 64 per worker: deep enough that 64 clients each with a call in
            // flight never wait on the queue itself, shallow enough to bound memory.
            queue: 64 * workers,
            // answer_budget = 256 MiB: forty of the largest answers the
            // papers' workloads ask for (a 6.2 MB `SELECT *` of 200,000 rows)
            // held and queued at once; a hostile flight of 100 of them on 10
            // connections reached 1.35 GB of RSS without it.
            answer_budget: 256 << 20,
            // conn_answer_budget = 64 MiB: four frames at the 16 MiB limit,
            // so any one answer fits, and a quarter of the server's budget,
            // so one connection cannot take it all.
            conn_answer_budget: 64 << 20,
            // write_timeout = 10 s: the stall timeout's bound, for the other
            // direction; a reader on loopback drains a 16 MiB answer in ms.
            write_timeout: Duration::from_secs(10),
            idle_spin: IDLE_SPIN,
        }
    }
}

/// Raises this process's open-files soft limit to its hard limit; the limit now.
/// NOTE: 10,000 connections need more than the default soft limit of 1,024.
pub fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
    }
    r.rlim_cur
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

#[cfg(test)]
mod tests {
    use super::Config;

    /// The defaults keep the relations their reasons state.
    #[test]
    fn the_defaults_keep_their_stated_relations() {
        let c = Config::default();
        assert!(c.conn_answer_budget >= c.max_frame, "any one answer fits a connection's budget");
        assert_eq!(c.conn_answer_budget * 4, c.answer_budget, "a connection holds a quarter of the server's answers");
        assert!(c.max_query_memory * 2 <= c.max_server_memory, "two of the largest queries at once");
        assert!(
            c.max_connections > 10_000 && c.max_connections < 20_000,
            "the papers' 10,000, below the open-files limit"
        );
    }
}
