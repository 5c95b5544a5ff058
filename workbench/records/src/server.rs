//! The records of the datastore server's experiments (`datastore-load
//! --cell`), one module per experiment, and the server's `stats` answer.

use serde::{Deserialize, Serialize};

/// The server's own view of its memory and connections: its answer to the
/// `stats` call, written by the server and read by the drivers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    pub variant: String,
    pub rss_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    /// Live heap bytes (dhat: exact; jemalloc: `stats.allocated`).
    pub live_heap_bytes: Option<u64>,
    /// Process-wide allocation calls, bytes and peak live bytes (dhat build only).
    pub total_allocs: Option<u64>,
    pub total_bytes: Option<u64>,
    pub peak_heap_bytes: Option<u64>,
    pub jemalloc_allocated: Option<u64>,
    pub jemalloc_active: Option<u64>,
    pub jemalloc_resident: Option<u64>,
    pub connections: u64,
    pub accepted: u64,
    pub refused: u64,
    pub calls: u64,
    pub errors: u64,
    /// Answer bytes held against the server's answer budget now.
    pub answer_bytes: u64,
    pub closed_stalled: u64,
    pub closed_unread: u64,
}

/// The workload's queries: each one's name, as the records' `query` field
/// holds it, and its SQL (the server's workload runs them; the reports list
/// their columns by them).
pub const QUERIES: [(&str, &str); 3] = [
    (
        "group-by-category",
        "SELECT category, count(), avg(value), sum(value), max(value), quantile(0.9)(value) FROM t GROUP BY category",
    ),
    ("top-20-users", "SELECT user_id, sum(value) AS s FROM t GROUP BY user_id ORDER BY s DESC LIMIT 20"),
    ("filtered-count", "SELECT count() FROM t WHERE value > 0.5 AND category = 'api'"),
];

/// throughput: the closed loop of every engine, query and concurrency.
pub mod throughput {
    pub use super::Floor;
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`: the closed loop's axes and the peer.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// Rows loaded into the table.
        pub rows: u64,
        /// Rows an insert carries while loading.
        pub batch: u64,
        /// Clients at once, one level after another.
        pub concurrency: Vec<usize>,
        /// Seconds of closed loop per query, level and round.
        pub seconds: f64,
        /// Rounds, engines and queries interleaved within each.
        pub rounds: usize,
        /// Our engine's threads settings (0 = every core).
        pub threads: Vec<u64>,
        /// The command that runs the peer engine (chDB); empty = no peer.
        pub chdb: Vec<String>,
        /// The peer's threads settings (0 = its default).
        pub chdb_threads: Vec<u64>,
    }

    impl Default for Params {
        fn default() -> Params {
            Params {
                rows: 1_000_000,
                batch: 1_000_000,
                concurrency: vec![1, 2, 4, 8],
                seconds: 1.0,
                rounds: 5,
                threads: vec![0],
                chdb: Vec::new(),
                chdb_threads: vec![0],
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Peer(Peer),
        Query(Query),
        Rss(Rss),
        Anatomy(Anatomy),
        Floor(Floor),
        #[serde(rename = "heap-profile")]
        HeapProfile(HeapProfile),
    }

    pub use super::anatomy::Anatomy;

    /// The server's `heap_profile` call, once after the closed loops, from a
    /// build that samples (the others answer 501 and write none of these):
    /// what it costs to ask a running server for its heap.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct HeapProfile {
        /// The engine asked (`ours`, `ours-1-thread`).
        pub engine: String,
        /// From the call sent to its answer read: the dump, its reading and
        /// symbols, the pprof encoding and gzip.
        pub answer_ms: f64,
        /// The answer's size: gzipped pprof.
        pub answer_bytes: u64,
    }

    /// The peer engine (ClickHouse in chDB), once per threads setting:
    /// measured (`available`) or why not.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Peer {
        pub engine: String,
        pub available: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub load_seconds: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub parts: Option<u64>,
        /// The threads setting the engine reports in effect.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_threads: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub client_processes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
    }

    /// One round of one query at one concurrency on one engine.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Query {
        pub engine: String,
        pub query: String,
        pub concurrency: u64,
        /// `None` in runs from before rounds were recorded (one round).
        #[serde(default)]
        pub round: Option<u64>,
        /// The table's rows.
        pub rows: u64,
        pub queries: u64,
        pub seconds: f64,
        pub qps: f64,
        pub p50_ms: f64,
        pub p99_ms: f64,
        pub mean_ms: f64,
        /// Answers compared with the expected answer (every one); `None`
        /// in runs from before answers were checked.
        #[serde(default)]
        pub answers_checked: Option<u64>,
        /// The peer's own time for the query, its client excluded (ClickHouse only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub engine_p50_ms: Option<f64>,
    }

    /// A sample of the running engine's memory (RSS, or PSS summed over
    /// the peer's processes).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Rss {
        pub t_s: f64,
        pub rss_bytes: u64,
        pub engine: String,
        pub query: String,
        pub concurrency: u64,
        pub rows: u64,
    }
}

/// Where the server's resident set came from after one round of one query
/// of the mix (`probe::smaps`, from `/proc/<pid>/smaps`): bytes by part,
/// which sum to `rss_bytes`.
pub mod anatomy {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Anatomy {
        pub engine: String,
        pub query: String,
        pub concurrency: u64,
        pub round: u64,
        pub rows: u64,
        /// The binary's executable mapping: resident, and its whole size.
        pub text_bytes: u64,
        pub text_size_bytes: u64,
        /// The binary's other mappings (read-only data, relocations, data).
        pub binary_other_bytes: u64,
        /// Other file-backed mappings: shared libraries, the vdso.
        pub files_bytes: u64,
        /// The brk heap.
        pub heap_bytes: u64,
        /// Thread stacks.
        pub stack_bytes: u64,
        /// Other anonymous memory: malloc's mmap'd arenas and large blocks.
        pub anon_bytes: u64,
        pub rss_bytes: u64,
    }
}

/// build-stages: per stage, the binary, then throughput's records.
pub mod build_stages {
    use super::throughput::{Anatomy, HeapProfile, Peer, Query, Rss};
    use super::Floor;
    use crate::runner::BuildFailed;
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`: throughput's, without a peer (the stages
    /// compare our builds only, so `chdb` is refused by the driver).
    pub type Params = super::throughput::Params;

    /// What the driver writes before throughput's records.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Written {
        Binary(Binary),
    }

    /// A build-stages dataset's rows: the driver's, throughput's (its
    /// floors too, measured after the engines stopped), and the runner's for
    /// a stage it could not build.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Binary(Binary),
        Peer(Peer),
        Query(Query),
        Rss(Rss),
        Anatomy(Anatomy),
        Floor(Floor),
        #[serde(rename = "heap-profile")]
        HeapProfile(HeapProfile),
        #[serde(rename = "build-failed")]
        BuildFailed(BuildFailed),
    }

    /// The measured server's file.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Binary {
        pub binary_bytes: u64,
        /// Without debug info (`strip --strip-debug`); `None` if strip failed.
        pub stripped_bytes: Option<u64>,
    }
}

/// connection-scaling: per step, each server's memory at that many idle
/// connections.
pub mod connection_scaling {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// Connections held at each step, ascending.
        pub steps: Vec<usize>,
        /// Milliseconds to wait at each step before reading memory.
        pub settle_ms: u64,
        /// The peer's server binary (Debian's clickhouse-server); none = no peer.
        pub clickhouse: Option<std::path::PathBuf>,
    }

    impl Default for Params {
        fn default() -> Params {
            Params { steps: vec![10, 100, 1000], settle_ms: 300, clickhouse: None }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(untagged)]
    pub enum Record {
        Peer(Peer),
        Failed(Failed),
        Ours(Ours),
        Theirs(Theirs),
    }

    /// `kind` of a [`Peer`] record (the only one with a kind).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(rename_all = "lowercase")]
    pub enum PeerKind {
        Peer,
    }

    /// The peer server (clickhouse-server), measured or why not.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Peer {
        pub server: String,
        pub kind: PeerKind,
        pub available: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub server_open_files_limit: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub query: Option<String>,
    }

    /// A step the peer could not reach.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Failed {
        pub server: String,
        pub connections: u64,
        pub reached: u64,
        pub error: String,
    }

    /// Our server at one step, from its own `stats` (`server_connections`
    /// tells it from [`Theirs`]).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Ours {
        pub server: String,
        /// The query each connection sent; `None` in runs from when each
        /// connection sent a ping.
        #[serde(default)]
        pub query: Option<String>,
        pub connections: u64,
        pub server_connections: u64,
        pub rss_bytes: Option<u64>,
        pub peak_rss_bytes: Option<u64>,
        pub live_heap_bytes: Option<u64>,
        pub jemalloc_allocated: Option<u64>,
        pub jemalloc_active: Option<u64>,
        pub jemalloc_resident: Option<u64>,
        pub server_threads: Option<u64>,
        pub server_open_files_limit: Option<u64>,
        pub driver_open_files_limit: Option<u64>,
        /// Where the resident set lies at this step (`/proc/<pid>/smaps`).
        #[serde(flatten)]
        pub anatomy: StepAnatomy,
    }

    /// The peer at one step, from `/proc`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Theirs {
        pub server: String,
        pub connections: u64,
        pub rss_bytes: u64,
        pub peak_rss_bytes: u64,
        pub server_threads: Option<u64>,
        pub server_open_files_limit: Option<u64>,
        pub driver_open_files_limit: Option<u64>,
        /// Where the resident set lies at this step (`/proc/<pid>/smaps`).
        #[serde(flatten)]
        pub anatomy: StepAnatomy,
    }

    /// The server's resident set at a step, by kind of mapping (`None` in
    /// runs from before it was read).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct StepAnatomy {
        /// The brk heap.
        #[serde(default)]
        pub heap_bytes: Option<u64>,
        /// Other anonymous memory: malloc's mmap'd arenas, an allocator's extents.
        #[serde(default)]
        pub anon_bytes: Option<u64>,
        /// Thread stacks.
        #[serde(default)]
        pub stack_bytes: Option<u64>,
        /// The binary's mappings (text and the rest) and other files'.
        #[serde(default)]
        pub file_bytes: Option<u64>,
    }
}

/// The floor under one query (`server::floor`): one timed streaming read
/// of the bytes it must touch, on `threads` threads (0: every core).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Floor {
    pub threads: u64,
    pub query: String,
    pub run: u64,
    pub bytes: u64,
    pub ms: f64,
}

/// datastore-queries: the engine alone.
pub mod datastore_queries {
    pub use super::Floor;
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        pub rows: u64,
        /// Rows an insert carries while loading.
        pub batch: u64,
        /// Timed runs of each query.
        pub runs: usize,
        /// The engine's threads settings (0 = every core).
        pub threads: Vec<usize>,
    }

    impl Default for Params {
        fn default() -> Params {
            Params { rows: 1_000_000, batch: 1_000_000, runs: 10, threads: vec![0] }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Table(Table),
        Query(Query),
        Memory(Memory),
        Floor(Floor),
    }

    /// The loaded table.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Table {
        pub rows: u64,
        pub parts: u64,
        pub disk_bytes: u64,
    }

    /// One timed run of one query.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Query {
        /// The threads setting (0: every core).
        pub threads: u64,
        pub query: String,
        pub run: u64,
        pub ms: f64,
        pub threads_used: u64,
        pub passes: u64,
    }

    /// The engine process's RSS at one threads setting.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Memory {
        pub threads: u64,
        pub rss_open_bytes: u64,
        pub rss_after_bytes: u64,
        pub rss_peak_bytes: u64,
    }
}

/// fault-soak: hostile clients, kills and greedy queries.
pub mod fault_soak {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        pub rows: u64,
        /// Hostile connections of the flight act.
        pub connections: usize,
        /// Calls each hostile connection keeps in flight.
        pub flight: u32,
        /// Honest clients of the soak.
        pub clients: usize,
        pub seconds: f64,
        /// Milliseconds between memory samples.
        pub sample_ms: u64,
        /// The server's answer budget, MiB.
        pub answer_budget_mib: usize,
        /// The server's per-connection answer budget, MiB.
        pub conn_answer_budget_mib: usize,
        /// SIGKILLs of the server under writes (the crash act; 0 = none).
        pub kills: usize,
        /// Writers during the crash act.
        pub kill_writers: usize,
        /// Rows of the greedy act's table (0 = no greedy act).
        pub greedy_rows: u64,
        /// The greedy act's `[query budget, server budget]` pairs, MiB.
        pub greedy_budgets_mib: Vec<[usize; 2]>,
    }

    impl Default for Params {
        fn default() -> Params {
            Params {
                rows: 200_000,
                connections: 10,
                flight: 100,
                clients: 8,
                seconds: 60.0,
                sample_ms: 10,
                answer_budget_mib: 256,
                conn_answer_budget_mib: 64,
                kills: 0,
                kill_writers: 2,
                greedy_rows: 0,
                greedy_budgets_mib: Vec::new(),
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Sample(Sample),
        Summary(Summary),
        Kills(Kills),
    }

    /// The server's RSS during a workload.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Sample {
        pub workload: String,
        pub t_s: f64,
        pub rss_bytes: u64,
    }

    /// A workload's outcome: what every workload reports, and its own.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Summary {
        pub workload: String,
        pub connections: u64,
        pub seconds: f64,
        pub calls: u64,
        /// `status:count` pairs, space-separated.
        pub statuses: String,
        /// Per act, its statuses (`act[status:count …]; …`).
        pub acts: String,
        pub errors_5xx_internal: u64,
        pub crashes: u64,
        pub baseline_rss_bytes: u64,
        pub peak_rss_bytes: u64,
        #[serde(flatten)]
        pub detail: Detail,
    }

    /// What only some workloads report.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(untagged)]
    pub enum Detail {
        /// A greedy query against the query and server memory budgets.
        Greedy(Greedy),
        /// The flight and soak workloads, against the answer budget.
        Load(Load),
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Greedy {
        pub query_memory_bytes: u64,
        pub server_memory_bytes: u64,
        pub greedy_rows: u64,
        /// 1 when the peak stayed within the baseline plus the server budget.
        pub within_server_budget: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Load {
        pub flight: u64,
        pub warm_peak_rss_bytes: u64,
        pub sampled_peak_rss_bytes: u64,
        pub end_rss_bytes: Option<u64>,
        pub answer_budget_bytes: u64,
        pub conn_answer_budget_bytes: u64,
        pub rows: u64,
        pub answer_size_bytes: u64,
        pub held_answer_bytes: Option<u64>,
    }

    /// The kill workload: SIGKILLs during inserts, then every acknowledged row checked.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Kills {
        pub workload: String,
        pub kills: u64,
        pub writers: u64,
        pub batch_rows: u64,
        pub batches_acked: u64,
        pub rows_acked: u64,
        pub rows_present: u64,
        pub rows_lost: u64,
        pub duplicates: u64,
        pub partial_batches: u64,
        pub reads: u64,
        pub restart_ms_median: f64,
        pub restart_ms_max: f64,
    }
}

/// server-heap-growth: the server's heap every few queries of a workload.
/// How wrong a sampled heap profile of the server is: its query mix
/// profiled exactly (the dhat build) and by jemalloc's sampler at several
/// intervals. Its records are the codecs' ([`crate::subject::SamplingAccuracy`]).
pub mod sampling_accuracy {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// Rows loaded into the table.
        pub rows: u64,
        /// Rounds of the workload's queries (one call of each a round), from one client.
        pub rounds: u64,
        /// The sampling intervals, as log2 of the mean bytes between
        /// samples (`lg_prof_sample`; 0 samples every allocation).
        pub intervals: Vec<u32>,
    }

    impl Default for Params {
        fn default() -> Params {
            Params { rows: 100_000, rounds: 10, intervals: vec![0, 8, 12, 16, 19, 21] }
        }
    }
}

/// What each call costs in memory, exactly, under concurrency (the dhat
/// build's per-call attribution, `probe::calls`), and the query memory
/// tracker's charge against it.
pub mod request_cost {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// Rows loaded into the table.
        pub rows: u64,
        /// Clients at once, a fresh server for each count.
        pub concurrency: Vec<usize>,
        /// Rounds of the workload's queries each client runs (one call
        /// of each query a round).
        pub rounds: u64,
    }

    impl Default for Params {
        fn default() -> Params {
            Params { rows: 100_000, concurrency: vec![1, 4, 16, 64], rounds: 10 }
        }
    }

    /// The part of a cell's trace names (`<cell>-kind-<name>.dhat.json`)
    /// that holds one kind's calls alone, from a server that served nothing
    /// else; the site draws each against [`BASELINE_KIND`]'s.
    pub const KIND_PART: &str = "kind-";
    /// The kind whose server is the others' baseline: the same start, the
    /// same connection, calls that do no work.
    pub const BASELINE_KIND: &str = "ping";
    /// The part before [`KIND_PART`] in the traces of the kinds served to
    /// many clients at once (`<cell>-clients-<c>-kind-<name>.dhat.json`):
    /// against the one-client traces, the sites whose cost per call changes
    /// with concurrency.
    pub const CLIENTS_PART: &str = "clients-";

    /// The part of a cell's trace name that holds `kind`'s calls served to
    /// `clients` clients at once (one: `kind-<name>`).
    pub fn kind_part(clients: usize, kind: &str) -> String {
        match clients {
            1 => format!("{KIND_PART}{kind}"),
            c => format!("{CLIENTS_PART}{c}-{KIND_PART}{kind}"),
        }
    }

    /// A line of the server's `--call-costs` file.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "line", rename_all = "lowercase")]
    pub enum CostLine {
        Call(CallCost),
        /// dhat's process totals when the file was written, for the check
        /// that the calls and call 0 account for every allocation.
        Process(ProcessTotals),
    }

    /// One call's exact cost (call 0: everything outside a call).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct CallCost {
        pub call: u64,
        /// The workload query's name, or the method's (`ping`, `insert`, …).
        pub kind: String,
        #[serde(flatten)]
        pub counts: Counts,
        /// Whether it answered.
        pub finished: bool,
    }

    /// What one call's own blocks did, counted exactly: the dhat build's
    /// per-call table (`probe::calls`) holds these, and the file has them.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Counts {
        /// Allocations as dhat counts them (a `realloc` is one, of its new
        /// size; the old block is a free).
        pub allocs: u64,
        pub bytes: u64,
        pub frees: u64,
        pub bytes_freed: u64,
        /// The most bytes the call's own blocks held at once.
        pub peak_bytes: u64,
        /// Bytes its blocks held when it had answered (its stored answer).
        pub held_bytes: u64,
        /// Bytes its blocks hold now (at the end, in the file).
        pub live_bytes: u64,
        /// The process's own estimate of its peak: the query memory
        /// tracker's charge (0: none).
        pub estimate_bytes: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ProcessTotals {
        pub allocs: u64,
        pub bytes: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Calls(Calls),
        Total(Total),
        Connections(Connections),
    }

    /// One client count's connections: the server's exact live heap (its
    /// `stats` answer, dhat build) before the clients connect, once each has
    /// connected and pinged (idle), and after their rounds with every
    /// connection still open and every answer released; and its peak live
    /// heap, reached while they were busy. Divided by the client count in
    /// the report.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Connections {
        pub concurrency: u64,
        pub before_live_bytes: u64,
        pub idle_live_bytes: u64,
        pub after_live_bytes: u64,
        /// The process's peak live heap since it started (the single client
        /// that fetched the expected answers came first, with less in flight).
        pub busy_peak_bytes: u64,
    }

    /// One kind of call at one client count: its cost as a distribution
    /// over its calls (median, 99th percentile, largest), and the tracker.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Calls {
        pub concurrency: u64,
        /// The workload query's name, or the method's.
        pub call_kind: String,
        pub calls: u64,
        pub allocs_median: f64,
        pub allocs_p99: f64,
        pub allocs_max: u64,
        pub bytes_median: f64,
        pub bytes_p99: f64,
        pub bytes_max: u64,
        /// The most bytes a call held at once.
        pub peak_median: f64,
        pub peak_p99: f64,
        pub peak_max: u64,
        /// Bytes a call still held once it had answered.
        pub held_median: f64,
        pub held_max: u64,
        /// The query memory tracker's peak charge per call.
        pub estimate_median: f64,
        /// Per call, the tracker's charge over the call's true peak: median and lowest.
        pub charge_ratio_median: Option<f64>,
        pub charge_ratio_min: Option<f64>,
        /// Calls whose charge fell short of their true peak by more than a tenth.
        pub under_charged: u64,
    }

    /// One client count's whole run: what the calls and call 0 account for
    /// against dhat's process totals (equal when attribution is exact).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Total {
        pub concurrency: u64,
        pub calls: u64,
        pub attributed_allocs: u64,
        pub attributed_bytes: u64,
        /// Call 0: the runtime, connections, caches, background merges.
        pub outside_allocs: u64,
        pub outside_bytes: u64,
        pub outside_live_bytes: u64,
        pub process_allocs: u64,
        pub process_bytes: u64,
    }
}

pub mod server_heap_growth {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// `ping`, `mix`, or one of the workload's query names.
        pub workloads: Vec<String>,
        /// Calls of the ping workload (and of every other, unless `mix_queries`).
        pub queries: u64,
        /// Calls of every workload but ping; `queries` when left out.
        pub mix_queries: Option<u64>,
        /// Heap samples over a workload.
        pub samples: u64,
        pub rows: u64,
    }

    impl Default for Params {
        fn default() -> Params {
            Params {
                workloads: vec!["ping".to_string(), "mix".to_string()],
                queries: 100_000,
                mix_queries: None,
                samples: 100,
                rows: 10_000,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Sample(Sample),
    }

    /// The server's `stats` after `queries` queries.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Sample {
        pub workload: String,
        pub queries: u64,
        pub total_allocs: Option<u64>,
        pub total_bytes: Option<u64>,
        pub peak_heap_bytes: Option<u64>,
        pub live_heap_bytes: Option<u64>,
        pub jemalloc_allocated: Option<u64>,
        pub jemalloc_active: Option<u64>,
        pub jemalloc_resident: Option<u64>,
        pub rss_bytes: Option<u64>,
    }
}

/// io-wakeup: pings, chains and CPU with and without the idle spin.
pub mod io_wakeup {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// The I/O thread's spin settings, µs; none = the server's own
        /// (`server::limits::IDLE_SPIN`) and 0.
        pub spins_us: Option<Vec<u64>>,
        pub rounds: usize,
        pub rows: u64,
        /// Idle connections beside the pinging one.
        pub background: usize,
        pub ping_every_ms: u64,
        /// Chain depth of the chains act.
        pub depth: usize,
        pub seconds: f64,
        /// Clients of the CPU act.
        pub clients: usize,
        pub cpu_seconds: f64,
    }

    impl Default for Params {
        fn default() -> Params {
            Params {
                spins_us: None,
                rounds: 5,
                rows: 100_000,
                background: 100,
                ping_every_ms: 50,
                depth: 64,
                seconds: 2.0,
                clients: 1000,
                cpu_seconds: 5.0,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Pings(Pings),
        Chains(Chains),
        Cpu(Cpu),
    }

    /// Background pings' latency in one phase (`quiet`, or during `chains`).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Pings {
        pub spin_us: u64,
        pub round: u64,
        pub phase: String,
        pub pings: u64,
        pub p50_us: Option<f64>,
        pub p99_us: Option<f64>,
        pub max_us: f64,
    }

    /// Pipelined chains run meanwhile.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Chains {
        pub spin_us: u64,
        pub round: u64,
        pub depth: u64,
        pub chains: u64,
        pub median_us: Option<f64>,
        pub p99_us: Option<f64>,
    }

    /// The server's CPU at a fixed query rate.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Cpu {
        pub spin_us: u64,
        pub round: u64,
        pub clients: u64,
        pub queries: u64,
        pub seconds: f64,
        pub cpu_s: f64,
        pub cpu_per_s: f64,
    }
}

/// pipeline-depth: dependent calls pipelined against request-response.
pub mod pipeline_depth {
    use serde::{Deserialize, Serialize};

    /// The spec's `[params]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields, default)]
    pub struct Params {
        /// Chain depths.
        pub depths: Vec<usize>,
        /// Round-trip delays the proxy adds, µs (0 = its own forwarding only).
        pub rtt_us: Vec<u64>,
        /// Runs per (delay, depth, mode).
        pub runs: usize,
    }

    impl Default for Params {
        fn default() -> Params {
            Params { depths: vec![1, 2, 4, 8, 16, 32, 64], rtt_us: vec![0, 500], runs: 20 }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(tag = "mode")]
    pub enum Record {
        #[serde(rename = "pipelined")]
        Pipelined(Chain),
        #[serde(rename = "request-response")]
        RequestResponse(Chain),
        /// The median request-response time over the median pipelined one.
        #[serde(rename = "ratio")]
        Ratio(Ratio),
    }

    /// One chain of `depth` dependent calls.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Chain {
        pub depth: u64,
        pub rtt_us: u64,
        pub run: u64,
        pub ms: f64,
        /// Flights the proxy saw (a flight: writes with no reply between).
        pub flights: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Ratio {
        pub depth: u64,
        pub rtt_us: u64,
        pub runs: u64,
        pub speedup: f64,
    }
}

impl crate::Compared for server_heap_growth::Record {
    const COLUMNS: crate::Columns = crate::Columns {
        keys: &["kind", "workload"],
        counts: &["total_allocs", "total_bytes", "peak_heap_bytes", "live_heap_bytes"],
        times: &[],
    };
}

impl crate::Compared for request_cost::Record {
    const COLUMNS: crate::Columns = crate::Columns {
        keys: &["kind", "call_kind", "concurrency"],
        counts: &["allocs_max", "bytes_max"],
        times: &[],
    };
}

impl crate::Compared for throughput::Record {
    const COLUMNS: crate::Columns =
        crate::Columns { keys: &["kind", "engine", "query", "concurrency"], counts: &[], times: &["p50_ms"] };
}

impl crate::Compared for build_stages::Record {
    const COLUMNS: crate::Columns = <throughput::Record as crate::Compared>::COLUMNS;
}

impl crate::Compared for datastore_queries::Record {
    const COLUMNS: crate::Columns = crate::Columns { keys: &["kind", "query", "threads"], counts: &[], times: &["ms"] };
}

impl crate::Compared for pipeline_depth::Record {
    const COLUMNS: crate::Columns = crate::Columns { keys: &["mode", "rtt_us", "depth"], counts: &[], times: &["ms"] };
}

impl crate::Compared for connection_scaling::Record {
    const COLUMNS: crate::Columns = crate::Columns { keys: &["server", "connections"], counts: &[], times: &[] };
}

impl crate::Compared for io_wakeup::Record {
    const COLUMNS: crate::Columns = crate::Columns { keys: &["kind", "spin_us", "phase"], counts: &[], times: &[] };
}

impl crate::Compared for fault_soak::Record {
    const COLUMNS: crate::Columns = crate::Columns { keys: &["kind"], counts: &[], times: &[] };
}
