//! sampling-accuracy-server: the server's query mix profiled exactly and by
//! jemalloc's sampler, so that the CLI can hold each sampled profile against
//! the exact one site by site, as it does for the codecs and stacks.
//!
//! - The dhat build: a fresh server (this build's) serves the mix, `rounds`
//!   rounds of the workload's three queries from one client, every answer
//!   compared with the first; its trace, written as it stops, is the exact
//!   profile of the whole process (start-up, loading, serving, shutdown).
//! - The sampling build (`jemalloc-prof`): the same, once per interval of
//!   `params.intervals`, each server a process of its own (a new process is
//!   a new seed) given its interval as production gives it, and a dump at
//!   each new peak ([`probe::profile::sampling_conf`]); each writes
//!   `<cell>-lg<N>.sampled.json` beside the cell's trace as it stops.
//!
//! Records: [`records::subject::SamplingAccuracy`], the codecs' own, one per
//! profile. Params: [`records::server::sampling_accuracy::Params`].

use super::{progress, Cell, Records, ServerChild};
use crate::client::{Client, Rows};
use crate::workload::{self, QUERIES};
use anyhow::{bail, Context, Result};
use probe::profile::{sampled_path, sampling_conf, MALLOC_CONF};
use records::server::sampling_accuracy::Params;
use records::subject::SamplingAccuracy;
use std::path::Path;
use std::time::Instant;

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    if p.rounds == 0 || p.intervals.is_empty() {
        bail!("{}: params.rounds must be at least 1 and params.intervals name one interval or more", cell.experiment);
    }
    let Some(trace) = cell.trace.as_deref() else {
        bail!(
            "{}: the {} build writes no profile (run it in dhat or jemalloc-prof)",
            cell.experiment,
            probe::VARIANT.name()
        );
    };
    let data = super::work_dir(cell)?.join("db");
    let db = datastore::Db::open(&data)?;
    workload::load(&db, p.rows, cell.seed, p.rows.clamp(1, 1_000_000), true, |_, _| {})
        .with_context(|| format!("loading {} rows into {}", p.rows, data.display()))?;
    drop(db);
    let bin = super::server_bin()?;
    match probe::VARIANT {
        probe::Variant::Dhat => {
            let t0 = Instant::now();
            serve_mix(&bin, &data, trace, &[], p.rounds)?;
            let t = probe::profile::totals(trace)?;
            out.emit(&SamplingAccuracy {
                lg_sample: None,
                allocs: Some(t.allocs),
                bytes: Some(t.bytes),
                live_bytes: Some(t.live_bytes),
                stacks: None,
                trace: trace.file_name().map(|n| n.to_string_lossy().into_owned()),
                elapsed_s: t0.elapsed().as_secs_f64(),
            })?;
            progress(1, 1);
        }
        probe::Variant::JemallocProf => {
            for (i, &lg) in p.intervals.iter().enumerate() {
                let path = sampled_path(trace, lg);
                let t0 = Instant::now();
                serve_mix(&bin, &data, &path, &[(MALLOC_CONF, sampling_conf(lg, &path)?)], p.rounds)?;
                out.emit(&probe::profile::sampled_record(&path, lg, t0.elapsed().as_secs_f64())?)?;
                progress(i + 1, p.intervals.len());
            }
        }
        other => {
            bail!("{}: the {} build writes no profile (run it in dhat or jemalloc-prof)", cell.experiment, other.name())
        }
    }
    Ok(())
}

/// A fresh server writing its profile to `trace`, `rounds` rounds of the
/// workload's queries from one client (each answer compared with the
/// first of its query), then stopped: its profile is written as it exits.
fn serve_mix(bin: &Path, data: &Path, trace: &Path, env: &[(&str, String)], rounds: u64) -> Result<()> {
    let server = ServerChild::spawn_env(bin, data, Some(trace), &[], env)?;
    let mut client = Client::connect(server.addr)?;
    let mut first: Vec<Option<Rows>> = vec![None; QUERIES.len()];
    for _ in 0..rounds {
        for ((name, sql), want) in QUERIES.iter().zip(first.iter_mut()) {
            let got = client.execute(sql)?;
            match want {
                Some(w) if *w != got => bail!("{name}: an answer differs from the first one"),
                Some(_) => {}
                None => *want = Some(got),
            }
        }
    }
    drop(client);
    server.stop()?;
    if !trace.exists() {
        bail!("the server wrote no profile at {}", trace.display());
    }
    Ok(())
}
