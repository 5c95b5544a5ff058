//! The server's measured runs, one file each, driven by the workbench:
//! `datastore-load --cell '<json>'` runs one [`Cell`] and prints its records
//! as JSON lines on stdout (and `progress DONE TOTAL` on stderr).
//!
//! The process that runs a cell is the load driver; the measured server is
//! a child process of the same build (same allocator variant), so the
//! driver's own allocations and sockets never enter the server's figures,
//! and each side has its own open-files limit (10,000 connections need
//! 10,000 descriptors on each side of the loopback).
//!
//! Adding an experiment: its variant in `registry::Experiment`, its
//! `Params` and records in `records::server`, then copy one file here (its
//! `pub fn run(cell, params, out)`); the compiler asks for its arm in [`run`].
//!
//! # Layout
//! - [`Cell`] (probe's, shared with every target): what the workbench asks
//!   for; [`Cell::params`] reads the spec's per-scale settings into the
//!   experiment's type; [`work_dir`] its scratch directory.
//! - [`run`]: one exhaustive match over the experiments, to each one's
//!   module (build-stages, connection-scaling, datastore-queries,
//!   fault-soak, server-heap-growth, io-wakeup, pipeline-depth,
//!   request-cost, sampling-accuracy-server, throughput).
//! - [`ServerChild`]: the measured server: spawn, RSS, stats, stop.
//! - [`Records`]: the JSON-lines sink of the `records` crate's types.

use crate::client::Client;
use anyhow::{bail, Context, Result};
pub use probe::Cell;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub mod build_stages;
pub mod connection_scaling;
pub mod datastore_queries;
pub mod fault_soak;
pub mod heap_growth;
pub mod io_wakeup;
pub mod pipeline_depth;
pub mod request_cost;
pub mod sampling_accuracy;
pub mod throughput;

/// Runs `cell`, writing its records to `out`: one arm per experiment the
/// server runs, each reading the spec's params into its own type (the type
/// the spec loader checked them with). A subject experiment is refused.
pub fn run(cell: &Cell, out: &mut Records) -> Result<()> {
    use registry::Experiment as E;
    let dir = work_dir(cell)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    match cell.experiment.runs() {
        E::BuildStages => build_stages::run(cell, &cell.params()?, out),
        E::ConnectionScaling => connection_scaling::run(cell, &cell.params()?, out),
        E::DatastoreQueries => datastore_queries::run(cell, &cell.params()?, out),
        E::FaultSoak => fault_soak::run(cell, &cell.params()?, out),
        E::ServerHeapGrowth => heap_growth::run(cell, &cell.params()?, out),
        E::RequestCost => request_cost::run(cell, &cell.params()?, out),
        E::SamplingAccuracyServer => sampling_accuracy::run(cell, &cell.params()?, out),
        E::IoWakeup => io_wakeup::run(cell, &cell.params()?, out),
        E::PipelineDepth => pipeline_depth::run(cell, &cell.params()?, out),
        E::Throughput | E::ProfilerCost => throughput::run(cell, &cell.params()?, out),
        E::AllocProfile
        | E::HeapGrowth
        | E::SamplingAccuracy
        | E::SamplingAccuracyTransports
        | E::CodecSpeed
        | E::TransportAlloc
        | E::TransportHeapGrowth
        | E::RoundtripLatency
        | E::RoundtripLatencyAwake
        | E::RoundtripLatencyOpen
        | E::InstrumentationCost => {
            bail!("{}: runs in the subject binary, not the server's driver", cell.experiment)
        }
    }
}

/// The cell's scratch directory (a server cell must have one).
pub fn work_dir(cell: &Cell) -> Result<&Path> {
    cell.work_dir.as_deref().with_context(|| format!("{}: the cell has no work_dir", cell.experiment))
}

/// The trace of one server of a cell that starts several (one per
/// workload, per kind of call): `<cell>.dhat.json` → `<cell>-<part>.dhat.json`
/// (and so for the events build's `.events.json`), beside the cell's own,
/// where the runner collects every trace named for the cell.
pub fn part_trace(cell: &Cell, part: &str) -> Option<std::path::PathBuf> {
    cell.trace.as_ref().map(|t| {
        let name = t.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let ext = if name.ends_with(".events.json") { ".events.json" } else { ".dhat.json" };
        t.with_file_name(format!("{}-{part}{ext}", name.trim_end_matches(ext)))
    })
}

/// The JSON-lines sink: one object per line, flushed at once so that a
/// crash loses no record already measured.
pub struct Records {
    out: Box<dyn Write>,
    pub count: usize,
}

impl Records {
    pub fn new(out: Box<dyn Write>) -> Records {
        Records { out, count: 0 }
    }

    /// Writes one record (a type of the `records` crate) and flushes it.
    pub fn emit<R: serde::Serialize>(&mut self, record: &R) -> Result<()> {
        records::line(&mut *self.out, record)?;
        self.out.flush()?;
        self.count += 1;
        Ok(())
    }
}

/// `progress DONE TOTAL` on stderr: the workbench draws it as a bar.
pub fn progress(done: usize, total: usize) {
    eprintln!("progress {done} {total}");
}

/// The soft open-files limit of process `pid` (any measured server: ours
/// or a peer), from `/proc/<pid>/limits`.
pub fn open_files_limit(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The measured server's binary: `WORKBENCH_SERVER_BIN` if set, else the
/// `datastore-server` beside this driver (the workbench builds, copies and
/// runs a variant's two binaries together, so the server is the driver's
/// build).
pub fn server_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("WORKBENCH_SERVER_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let bin = exe.with_file_name("datastore-server");
    if !bin.exists() {
        bail!("no datastore-server beside {} (build both binaries, or set WORKBENCH_SERVER_BIN)", exe.display());
    }
    Ok(bin)
}

/// The measured server: [`server_bin`]'s `serve`, in a child process.
pub struct ServerChild {
    child: Option<Child>,
    pub addr: SocketAddr,
}

impl ServerChild {
    /// Starts `serve --listen 127.0.0.1:0 --data DATA [--trace T] EXTRA…`
    /// and reads the bound address from its first line.
    pub fn spawn(data: &Path, trace: Option<&Path>, extra: &[&str]) -> Result<ServerChild> {
        ServerChild::spawn_bin(&server_bin()?, data, trace, extra)
    }

    pub fn spawn_bin(bin: &Path, data: &Path, trace: Option<&Path>, extra: &[&str]) -> Result<ServerChild> {
        ServerChild::spawn_env(bin, data, trace, extra, &[])
    }

    /// [`ServerChild::spawn_bin`] with `env` set in the server's environment
    /// (the sampling build's interval, as production sets it).
    pub fn spawn_env(
        bin: &Path,
        data: &Path,
        trace: Option<&Path>,
        extra: &[&str],
        env: &[(&str, String)],
    ) -> Result<ServerChild> {
        let mut cmd = Command::new(bin);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"]).arg(data).args(extra);
        if let Some(t) = trace {
            cmd.arg("--trace").arg(t);
        }
        let mut child =
            cmd.stdout(Stdio::piped()).spawn().with_context(|| format!("starting {} serve", bin.display()))?;
        let out = child.stdout.take().context("server stdout")?;
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .with_context(|| format!("{} serve printed {line:?}, not its address", bin.display()))?
            .parse()?;
        Ok(ServerChild { child: Some(child), addr })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The server's exit status, if it has exited (a crash, in a measurement).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// The server's VmRSS and VmHWM now.
    pub fn rss(&self) -> Option<probe::rss::Rss> {
        probe::rss::read_pid(self.pid())
    }

    /// The server's soft open-files limit (it raises its own to the hard limit).
    pub fn open_files_limit(&self) -> Option<u64> {
        open_files_limit(self.pid())
    }

    /// The server's own view of its memory (`stats`).
    pub fn stats(&self, c: &mut Client) -> Result<records::server::Stats> {
        let p = c.stats()?;
        let text = c.wait_text(p)?;
        c.finish(p)?;
        serde_json::from_str(&text).with_context(|| format!("the server's stats: {text}"))
    }

    /// SIGKILL, then waits: a crash at an arbitrary moment (nothing is flushed).
    pub fn kill(mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// SIGTERM, then waits: a dhat build writes its trace on the way out.
    pub fn stop(mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        // SAFETY: kill only signals the child this value started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait()?;
        if !status.success() {
            bail!("the server exited with {status}");
        }
        Ok(())
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A fresh connection that has made one `ping` (answered and released).
pub fn ping_once(addr: SocketAddr) -> Result<Client> {
    let mut c = Client::connect(addr)?;
    let p = c.ping()?;
    c.wait(p)?;
    c.finish(p)?;
    c.flush()?;
    Ok(c)
}

/// The median of `v` (sorted in place); `NaN` when empty.
pub fn median(v: &mut [f64]) -> f64 {
    percentile(v, 50.0)
}

/// The nearest-rank percentile of `v` (sorted in place); `NaN` when empty.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&mut v, 50.0), 50.0);
        assert_eq!(percentile(&mut v, 99.0), 99.0);
        assert_eq!(percentile(&mut v, 100.0), 100.0);
        assert_eq!(median(&mut [3.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }
}
