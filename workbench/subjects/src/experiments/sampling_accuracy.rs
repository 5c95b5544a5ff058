//! sampling-accuracy: alloc-profile's workload (and, as
//! sampling-accuracy-transports, transport-alloc's round trips) profiled
//! exactly and by jemalloc's sampler, so that the CLI can hold each sampled
//! profile against the exact one site by site.
//!
//! - The dhat build runs the workload in this process; its trace (written
//!   when the probe drops) is the exact profile.
//! - The sampling build (`jemalloc-prof`) runs it once per interval of the
//!   spec's `params.intervals`, each in a child process of its own (this
//!   binary, an alloc-profile cell), with the interval set as production
//!   sets it ([`sampling_conf`]: `lg_prof_sample:N`, and a dump at each
//!   new peak, for what is live there). A process per interval,
//!   because each profile must cover what the exact one covers (a fresh
//!   process's first-time allocations included), and because a new process
//!   is a new seed (jemalloc seeds its sampler from the thread's address).
//!   Each child writes `<cell>-lg<N>.sampled.json` beside the cell's trace.
//!   A child is the same cell (so that its stacks are the exact profile's,
//!   driver frames included, and its sites match); what tells it from its
//!   parent is the interval in its environment ([`is_profiled_process`]).

use super::Ctx;
use anyhow::{anyhow, bail, Context, Result};
use records::subject::{SamplingAccuracy, SamplingParams};
use std::path::Path;
use std::time::Instant;

use probe::profile::{sampled_path, sampling_conf, MALLOC_CONF};

/// Whether this process is a profile's own (the exact build, or a child of
/// the sampling build given its interval), not the sampling build's parent.
pub fn is_profiled_process() -> bool {
    probe::VARIANT != probe::Variant::JemallocProf || std::env::var_os(MALLOC_CONF).is_some()
}

/// Runs the cell: in a profiled process, `workload` (alloc-profile's for a
/// codec, transport-alloc's round trips for a stack) and its totals; in
/// the sampling build's parent, a child per interval.
pub fn run(ctx: Ctx<'_>, workload: impl FnOnce() -> Result<()>) -> Result<()> {
    let started = Instant::now();
    let params: SamplingParams = ctx.cell.params()?;
    if !is_profiled_process() {
        return sampled(ctx, &params);
    }
    workload()?;
    let s = ctx.probe.snapshot();
    let r = SamplingAccuracy {
        lg_sample: None,
        allocs: s.counters.allocs.map(|a| a as f64),
        bytes: s.counters.bytes_allocated.map(|b| b as f64),
        live_bytes: s.live_bytes.map(|b| b as f64),
        stacks: None,
        trace: ctx.cell.trace.as_deref().map(file_name).transpose()?,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    records::line(ctx.out, &r)?;
    Ok(())
}

fn file_name(p: &Path) -> Result<String> {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| anyhow!("{}: no file name", p.display()))
}

fn sampled(ctx: Ctx<'_>, params: &SamplingParams) -> Result<()> {
    let Some(trace) = ctx.cell.trace.as_deref() else {
        bail!("sampling-accuracy: the sampling build writes its profiles beside the cell's `trace`, which is unset");
    };
    let exe = std::env::current_exe().context("finding this binary to run the sampled profiles")?;
    let n = params.intervals.len() as u64;
    // PERF (the quick suite's wall time): the children run as many at a
    // time as there are cores. A profile's counts do not depend on what runs
    // beside it; `elapsed_s` does, and no table reads it as a timing.
    let at_once = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut done = 0u64;
    for chunk in params.intervals.chunks(at_once) {
        let mut running = Vec::with_capacity(chunk.len());
        for &lg in chunk {
            let path = sampled_path(trace, lg);
            let mut child = ctx.cell.clone();
            child.trace = Some(path.clone());
            let spawned = std::process::Command::new(&exe)
                .arg("--cell")
                .arg(serde_json::to_string(&child)?)
                .env(MALLOC_CONF, sampling_conf(lg, &path)?)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .with_context(|| format!("running {}", exe.display()))?;
            running.push((lg, path, Instant::now(), spawned));
        }
        for (lg, path, t0, spawned) in running {
            let out = spawned.wait_with_output().with_context(|| format!("waiting for {}", exe.display()))?;
            let elapsed_s = t0.elapsed().as_secs_f64();
            if !out.status.success() {
                bail!(
                    "the profile sampled at 2^{lg} bytes ({}) failed ({}): {}",
                    path.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .filter(|l| !l.starts_with("progress "))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
            records::line(ctx.out, &probe::profile::sampled_record(&path, lg, elapsed_s)?)?;
            done += 1;
            super::progress(done, n);
        }
    }
    Ok(())
}
