//! The datastore server's experiments through the runner: the server target
//! built in a variant, a cell process driving its own server child, a
//! published dataset whose records say what the protocol guarantees, and
//! the reports' tables.

mod common;

use analysis::data::dataset;
use analysis::report::tables;
use analysis::report::REPORTS;
use analysis::run::runner;
use analysis::spec::Spec;
use std::path::Path;

const CHAINS: &str = r#"
experiment = "pipeline-depth"
target = "datastore-server"
variants = ["system"]
[quick.params]
depths = [1, 5]
rtt_us = [200]
runs = 3
[full.params]
"#;

const CONNECTIONS: &str = r#"
experiment = "connection-scaling"
target = "datastore-server"
variants = ["jemalloc"]
[quick.params]
steps = [2, 40]
settle_ms = 50
[full.params]
"#;

const THROUGHPUT: &str = r#"
experiment = "throughput"
target = "datastore-server"
variants = ["system"]
[quick.params]
rows = 30000
concurrency = [1, 2]
seconds = 0.2
rounds = 2
threads = [0, 1]
[full.params]
"#;

const WAKEUP: &str = r#"
experiment = "io-wakeup"
target = "datastore-server"
variants = ["system"]
[quick.params]
spins_us = [100, 0]
rounds = 2
rows = 2000
background = 5
ping_every_ms = 20
depth = 8
seconds = 0.2
clients = 20
cpu_seconds = 0.5
[full.params]
"#;

const QUERIES: &str = r#"
experiment = "datastore-queries"
target = "datastore-server"
variants = ["system"]
[quick.params]
rows = 20000
runs = 2
threads = [0, 1]
[full.params]
"#;

fn u64s(df: &polars::prelude::DataFrame, col: &str) -> Vec<u64> {
    let c = df.column(col).unwrap().cast(&polars::prelude::DataType::UInt64).unwrap();
    c.u64().unwrap().iter().map(|v| v.unwrap()).collect()
}

#[test]
fn server_experiments_end_to_end() {
    let out = std::env::temp_dir().join(format!("wb-server-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let (opts, multi, mut bins) = common::setup(&out, "server-e2e");

    // Pipelined chains leave in one flight and end where request-response ends.
    let chains = Spec::parse(CHAINS, Path::new("chains.toml")).unwrap();
    let run = runner::run_spec(&opts, Path::new("chains.toml"), &chains, &mut bins, &multi).unwrap();
    assert_eq!((run.cells, run.records), (1, 2 * (3 * 2 + 1)));
    let r = dataset::load_run(&run.dir).unwrap();
    let flights = |mode: &str, depth: u64| {
        u64s(&tables::select(&r.records, &[("mode", mode)], &[("depth", depth)]).unwrap(), "flights")
    };
    assert_eq!(flights("pipelined", 5), [1, 1, 1]);
    assert_eq!(flights("request-response", 5), [5, 5, 5]);
    let ratio = tables::select(&r.records, &[("mode", "ratio")], &[]).unwrap();
    assert_eq!(ratio.height(), 2);
    assert!(tables::floats(&ratio, "speedup").unwrap().iter().all(|s| *s > 0.0));

    // The server counts every connection the driver holds; the jemalloc build reports its live heap.
    let conns = Spec::parse(CONNECTIONS, Path::new("conns.toml")).unwrap();
    let run = runner::run_spec(&opts, Path::new("conns.toml"), &conns, &mut bins, &multi).unwrap();
    let c = dataset::load_run(&run.dir).unwrap();
    assert_eq!(u64s(&c.records, "connections"), [2, 40]);
    assert_eq!(u64s(&c.records, "server_connections"), [2, 40]);
    assert!(u64s(&c.records, "live_heap_bytes").iter().all(|b| *b > 0));
    assert!(u64s(&c.records, "server_open_files_limit").iter().all(|f| *f >= 104));

    // Ours at every core and at one thread a query, each answer checked
    // against the first (so the two servers agree); no peer configured.
    let tp = Spec::parse(THROUGHPUT, Path::new("tp.toml")).unwrap();
    let run = runner::run_spec(&opts, Path::new("tp.toml"), &tp, &mut bins, &multi).unwrap();
    let t = dataset::load_run(&run.dir).unwrap();
    for engine in ["ours", "ours-1-thread"] {
        let q = tables::select(&t.records, &[("kind", "query"), ("engine", engine)], &[]).unwrap();
        assert_eq!(q.height(), 3 * 2 * 2, "{engine}: 3 queries × 2 client counts × 2 rounds");
        assert!(u64s(&q, "queries").iter().all(|n| *n > 0), "{engine}");
        let mut rounds = u64s(&q, "round");
        rounds.sort_unstable();
        rounds.dedup();
        assert_eq!(rounds, [0, 1], "{engine}");
    }

    // The wake-up on and off, alternating: every phase of every round
    // recorded, chains ran and ended at their depth, every query answered.
    let wk = Spec::parse(WAKEUP, Path::new("wk.toml")).unwrap();
    let wk_run = runner::run_spec(&opts, Path::new("wk.toml"), &wk, &mut bins, &multi).unwrap();
    let w = dataset::load_run(&wk_run.dir).unwrap();
    let kind = |k: &str| tables::select(&w.records, &[("kind", k)], &[]).unwrap();
    assert_eq!((kind("pings").height(), kind("chains").height(), kind("cpu").height()), (8, 4, 4));
    assert!(u64s(&kind("chains"), "chains").iter().all(|n| *n > 0));
    assert!(u64s(&kind("cpu"), "queries").iter().all(|n| *n > 0));
    let mut order = u64s(&kind("cpu"), "spin_us");
    assert_eq!(order.split_off(2), [0, 100], "odd rounds run the settings in reverse");
    assert_eq!(order, [100, 0]);

    // The engine alone: every query timed per run and setting, one-thread
    // queries ran on one thread, and the engine process's memory recorded.
    let dq = Spec::parse(QUERIES, Path::new("dq.toml")).unwrap();
    let dq_run = runner::run_spec(&opts, Path::new("dq.toml"), &dq, &mut bins, &multi).unwrap();
    let d = dataset::load_run(&dq_run.dir).unwrap();
    let times = tables::select(&d.records, &[("kind", "query")], &[]).unwrap();
    assert_eq!(times.height(), 3 * 2 * 2, "3 queries × 2 runs × 2 settings");
    let one = tables::select(&d.records, &[("kind", "query")], &[("threads", 1)]).unwrap();
    assert!(u64s(&one, "threads_used").iter().all(|t| *t == 1));
    let mem = tables::select(&d.records, &[("kind", "memory")], &[]).unwrap();
    assert!(u64s(&mem, "rss_peak_bytes").iter().all(|b| *b > 0) && mem.height() == 2);

    // Each report renders from its dataset alone.
    for (name, dir) in [
        ("pipeline-depth", &r.dir),
        ("connection-scaling", &c.dir),
        ("throughput", &run.dir),
        ("throughput-vs-clickhouse", &run.dir),
        ("io-wakeup", &wk_run.dir),
        ("datastore-queries", &dq_run.dir),
    ] {
        let report = REPORTS.iter().find(|x| x.name == name).unwrap();
        let t = (report.table)(&dataset::load_run(dir).unwrap()).unwrap();
        assert!(!t.rows.is_empty(), "{name}");
        assert!(t.to_markdown().contains("| 40 |") || name != "connection-scaling", "{}", t.to_markdown());
    }
    std::fs::remove_dir_all(&out).unwrap();
}
