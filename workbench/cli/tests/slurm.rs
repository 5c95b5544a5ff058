//! A tiny spec through a real Slurm cluster (the test command starts a
//! one-node one with `scripts/slurm-cluster.sh` and sets `SLURM_CONF`): the
//! same cells and the same exact counts as a local run, every cell's node
//! and time in the manifest, the timed spec's tasks pinned to one node, no
//! binary in the published dataset, and `--no-wait` + `collect` over a run that had
//! one cell done already, whose job held only the missing cells.
//!
//! Without `SLURM_CONF` (a plain `cargo test`) the test says so and passes;
//! `scripts/test.sh` runs it again with the cluster up, where it must run.

mod common;
#[path = "common/tiny_alloc.rs"]
mod tiny_alloc;

use analysis::data::dataset;
use analysis::run::{runner, slurm};
use analysis::spec::{Scale, Spec};
use std::path::Path;
use std::time::{Duration, Instant};
use tiny_alloc::{allocs_of, column_u64, ALLOC};

#[test]
fn tiny_spec_through_slurm_matches_a_local_run() {
    if std::env::var_os("SLURM_CONF").is_none() {
        eprintln!("slurm: no SLURM_CONF, no cluster: not run here (scripts/test.sh runs it with one)");
        return;
    }
    let out = std::env::temp_dir().join(format!("wb-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let (mut opts, multi, mut bins) = common::setup(&out.join("local"), "slurm");
    let spec = Spec::parse(ALLOC, Path::new("alloc.toml")).unwrap();
    let local = runner::run_spec(&opts, Path::new("alloc.toml"), &spec, &mut bins, &multi).unwrap();

    // The same spec as a job array, waited for and published.
    let s = slurm::Options { workbench: env!("CARGO_BIN_EXE_workbench").into(), ..Default::default() };
    opts.data = out.join("slurm").join("data");
    let outcome = match slurm::run(&opts, Path::new("alloc.toml"), &spec, &mut bins, &multi, &s).unwrap() {
        slurm::Done::Published(o) => o,
        _ => panic!("a waited-for run publishes its dataset"),
    };
    assert_eq!((outcome.cells, outcome.resumed), (local.cells, 0));
    let (l, r) = (dataset::load_run(&local.dir).unwrap(), dataset::load_run(&outcome.dir).unwrap());
    assert_eq!(l.manifest.cells, r.manifest.cells);
    assert_eq!(l.records.height(), r.records.height());
    for codec in ["zap", "json-rpc"] {
        let (a, b) = (allocs_of(&local.dir, codec, "dhat"), allocs_of(&outcome.dir, codec, "dhat"));
        assert_eq!(a.len(), 20 * 3, "{codec}");
        assert_eq!(a, b, "{codec}: exact counts differ between the local run and the Slurm run");
    }
    let host = analysis::data::host::hostname();
    assert_eq!(r.manifest.nodes.len(), r.manifest.cells.len(), "{:?}", r.manifest.nodes);
    assert!(r.manifest.nodes.values().all(|n| n.hostname == host && n.cores >= 1), "{:?}", r.manifest.nodes);
    assert_eq!(r.manifest.cell_seconds.len(), r.manifest.cells.len());
    assert_eq!(l.manifest.cell_seconds.len(), l.manifest.cells.len(), "a local run records cell times too");
    // A timed spec (jemalloc) ran on one named node; no binary was published.
    let job = std::fs::read_to_string(outcome.dir.join("slurm/job.sh")).unwrap();
    assert!(job.contains("#SBATCH --exclusive\n") && job.contains(&format!("#SBATCH --nodelist={host}\n")), "{job}");
    assert!(!outcome.dir.join("bin").exists(), "the tasks' binaries were published with the dataset");
    assert!(l.manifest.nodes.is_empty(), "a local run's cells ran on the machine its manifest describes");

    // --no-wait over a run with one cell done: only the others are submitted,
    // and collect publishes once they are all on disk.
    opts.data = out.join("resume").join("data");
    let inputs =
        analysis::run::fingerprint::Inputs::of(&opts.root, Path::new("alloc.toml"), &spec, Scale::Quick).unwrap();
    let staging = runner::staging_dir(&opts, &spec, &inputs).unwrap();
    std::fs::create_dir_all(staging.join("cells")).unwrap();
    let first = &runner::plan(&spec, Scale::Quick).unwrap()[0];
    // A whole alloc-profile record (the runner decodes it into its type) whose
    // message number no run reaches: the marker that the cell was resumed.
    let done = format!(
        "{{\"msg\":7777,\"phase\":\"encode\",\"wire_bytes\":0,\"allocs\":0,\"bytes\":0,\"bytes_freed\":0,\
         \"codec\":\"zap\",\"payload\":64,\"variant\":\"{}\",\"rep\":0}}\n",
        first.variant
    );
    std::fs::write(staging.join("cells").join(format!("{}.jsonl", first.id)), done).unwrap();
    let no_wait = slurm::Options { no_wait: true, ..s.clone() };
    match slurm::run(&opts, Path::new("alloc.toml"), &spec, &mut bins, &multi, &no_wait).unwrap() {
        slurm::Done::Submitted { tasks, .. } => assert_eq!(tasks, local.cells - 1),
        _ => panic!("--no-wait returns once submitted"),
    }
    let start = Instant::now();
    let collected = loop {
        match slurm::collect(&opts, Path::new("alloc.toml"), &spec) {
            Ok(o) => break o,
            Err(e) if start.elapsed() < Duration::from_secs(120) => {
                assert!(format!("{e:#}").contains("not finished"), "{e:#}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("the job did not finish in 120 s: {e:#}"),
        }
    };
    assert_eq!((collected.cells, collected.resumed), (local.cells, 1));
    let records = dataset::load_run(&collected.dir).unwrap().records;
    assert_eq!(column_u64(&records, "msg").iter().flatten().filter(|&&m| m == 7777).count(), 1);
    assert_eq!(allocs_of(&collected.dir, "json-rpc", "dhat"), allocs_of(&local.dir, "json-rpc", "dhat"));
    let _ = std::fs::remove_dir_all(&out);
}
