//! Server memory against idle connections: each connection makes one
//! `ping` and stays open; at each step the server reports its RSS, live heap
//! and (jemalloc build) `stats.allocated/active/resident`.
//!
//! Params: `steps` (connection counts, ascending), `settle_ms` (pause before
//! each sample, so the last replies and frees have happened).

use super::{ping_once, progress, Cell, Experiment, Records, ServerChild};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::time::Duration;

pub const EXPERIMENT: Experiment = Experiment { name: "connection-scaling", run };

fn run(cell: &Cell, out: &mut Records) -> Result<()> {
    let steps: Vec<usize> = cell.param("steps", vec![10, 100, 1000])?;
    let settle = Duration::from_millis(cell.param("settle_ms", 300)?);
    if steps.is_empty() || steps.windows(2).any(|w| w[0] >= w[1]) {
        bail!("{}: params.steps must be ascending and non-empty, got {steps:?}", cell.experiment);
    }
    let max = *steps.last().expect("non-empty");
    let fds = crate::limits::raise_fd_limit();
    if (fds as usize) < max + 64 {
        bail!("the load driver may open {fds} files; {max} connections need {} (params.steps)", max + 64);
    }
    let data = cell.work_dir.join("db");
    let max_conn = (max + 16).to_string();
    let server = ServerChild::spawn(&data, cell.trace.as_deref(), &["--max-connections", &max_conn])?;
    let server_fds = server.open_files_limit();
    if server_fds.is_some_and(|f| (f as usize) < max + 64) {
        bail!("the server may open {server_fds:?} files, fewer than {max} connections need");
    }
    // The control connection asks for stats; it is one of the counted ones.
    let mut ctl = ping_once(server.addr)?;
    let mut held = Vec::with_capacity(max);
    for (i, &n) in steps.iter().enumerate() {
        while held.len() + 1 < n {
            held.push(ping_once(server.addr).with_context(|| format!("opening connection {}", held.len() + 2))?);
        }
        std::thread::sleep(settle);
        let s = server.stats(&mut ctl)?;
        out.emit(json!({
            "server": "ours",
            "connections": n,
            "server_connections": s["connections"],
            "rss_bytes": s["rss_bytes"],
            "peak_rss_bytes": s["peak_rss_bytes"],
            "live_heap_bytes": s["live_heap_bytes"],
            "jemalloc_allocated": s["jemalloc_allocated"],
            "jemalloc_active": s["jemalloc_active"],
            "jemalloc_resident": s["jemalloc_resident"],
            "server_open_files_limit": server_fds,
            "driver_open_files_limit": fds,
        }))?;
        progress(i + 1, steps.len());
    }
    drop(held);
    drop(ctl);
    server.stop()
}
