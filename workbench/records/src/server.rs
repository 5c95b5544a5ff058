//! The records of the datastore server's experiments (`datastore-load
//! --cell`), one module per experiment, and the server's `stats` answer.

use serde::{Deserialize, Serialize};

/// The server's own view of its memory and connections: its answer to the
/// `stats` call, written by the server and read by the drivers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// throughput: the closed loop of every engine, query and concurrency.
pub mod throughput {
    pub use super::Floor;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Peer(Peer),
        Query(Query),
        Rss(Rss),
        Floor(Floor),
    }

    /// The peer engine (ClickHouse in chDB), once per threads setting:
    /// measured (`available`) or why not.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub struct Rss {
        pub t_s: f64,
        pub rss_bytes: u64,
        pub engine: String,
        pub query: String,
        pub concurrency: u64,
        pub rows: u64,
    }
}

/// build-stages: per stage, the binary, then throughput's records.
pub mod build_stages {
    use super::throughput::{Query, Rss};
    use crate::runner::BuildFailed;
    use serde::{Deserialize, Serialize};

    /// What the driver writes before throughput's records.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Written {
        Binary(Binary),
    }

    /// A build-stages dataset's rows: the driver's, throughput's, and the
    /// runner's for a stage it could not build.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Binary(Binary),
        Query(Query),
        Rss(Rss),
        #[serde(rename = "build-failed")]
        BuildFailed(BuildFailed),
    }

    /// The measured server's file.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(untagged)]
    pub enum Record {
        Peer(Peer),
        Failed(Failed),
        Ours(Ours),
        Theirs(Theirs),
    }

    /// `kind` of a [`Peer`] record (the only one with a kind).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum PeerKind {
        Peer,
    }

    /// The peer server (clickhouse-server), measured or why not.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub struct Failed {
        pub server: String,
        pub connections: u64,
        pub reached: u64,
        pub error: String,
    }

    /// Our server at one step, from its own `stats` (`server_connections`
    /// tells it from [`Theirs`]).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    }

    /// The peer at one step, from `/proc`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Theirs {
        pub server: String,
        pub connections: u64,
        pub rss_bytes: u64,
        pub peak_rss_bytes: u64,
        pub server_threads: Option<u64>,
        pub server_open_files_limit: Option<u64>,
        pub driver_open_files_limit: Option<u64>,
    }
}

/// The floor under one query (`server::floor`): one timed streaming read
/// of the bytes it must touch, on `threads` threads (0: every core).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Table(Table),
        Query(Query),
        Memory(Memory),
        Floor(Floor),
    }

    /// The loaded table.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Table {
        pub rows: u64,
        pub parts: u64,
        pub disk_bytes: u64,
    }

    /// One timed run of one query.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Sample(Sample),
        Summary(Summary),
        Kills(Kills),
    }

    /// The server's RSS during a workload.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Sample {
        pub workload: String,
        pub t_s: f64,
        pub rss_bytes: u64,
    }

    /// A workload's outcome: what every workload reports, and its own.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[serde(untagged)]
    pub enum Detail {
        /// A greedy query against the query and server memory budgets.
        Greedy(Greedy),
        /// The flight and soak workloads, against the answer budget.
        Load(Load),
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Greedy {
        pub query_memory_bytes: u64,
        pub server_memory_bytes: u64,
        pub greedy_rows: u64,
        /// 1 when the peak stayed within the baseline plus the server budget.
        pub within_server_budget: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
pub mod server_heap_growth {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Sample(Sample),
    }

    /// The server's `stats` after `queries` queries.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    pub enum Record {
        Pings(Pings),
        Chains(Chains),
        Cpu(Cpu),
    }

    /// Background pings' latency in one phase (`quiet`, or during `chains`).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub struct Chain {
        pub depth: u64,
        pub rtt_us: u64,
        pub run: u64,
        pub ms: f64,
        /// Flights the proxy saw (a flight: writes with no reply between).
        pub flights: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Ratio {
        pub depth: u64,
        pub rtt_us: u64,
        pub runs: u64,
        pub speedup: f64,
    }
}
