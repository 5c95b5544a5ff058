//! What the I/O thread's low-latency wake-up (`--idle-spin-us`, see
//! [`crate::limits::IDLE_SPIN`]) buys and what it costs: a server per
//! setting (`spins_us`, e.g. 100 µs and 0 = off) on the same data, the
//! settings alternating round by round (the first setting first in even
//! rounds, last in odd ones).
//!
//! Each round, for each setting, three phases:
//! - `quiet`: `background` connections each ping every `ping_every_ms`
//!   (staggered), nothing else running: ping latencies.
//! - `chains`: the same pings while one client runs pipelined chains of
//!   `depth` back to back: ping latencies (does a chain's wake-up hold the
//!   other connections back?) and chain times (what the wake-up buys).
//! - `cpu`: `clients` connections each sending one query a second (the
//!   workload's filtered count on a `rows`-row table), for `cpu_seconds`:
//!   the server's CPU time (user + system, from `/proc/<pid>/stat`) per
//!   second of wall time, what an idle server pays for polling.
//!
//! Records: [`records::server::io_wakeup`]. Every chain ends at its depth
//! and every query's answer equals the first, or the cell fails.

use super::{percentile, progress, Cell, Records, ServerChild};
use crate::chain;
use crate::client::Client;
use crate::workload;
use anyhow::{bail, Context, Result};
use records::server::io_wakeup::{Chains, Cpu, Pings, Record};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

struct Params {
    background: usize,
    ping_every: Duration,
    depth: usize,
    seconds: f64,
    clients: usize,
    cpu_seconds: f64,
}

pub fn run(cell: &Cell, params: &records::server::io_wakeup::Params, out: &mut Records) -> Result<()> {
    let spins: Vec<u64> =
        params.spins_us.clone().unwrap_or_else(|| vec![crate::limits::IDLE_SPIN.as_micros() as u64, 0]);
    let (rounds, rows) = (params.rounds, params.rows);
    let p = Params {
        background: params.background,
        ping_every: Duration::from_millis(params.ping_every_ms),
        depth: params.depth,
        seconds: params.seconds,
        clients: params.clients,
        cpu_seconds: params.cpu_seconds,
    };
    if spins.is_empty() || rounds == 0 || p.depth == 0 || !(p.seconds > 0.0 && p.cpu_seconds > 0.0) {
        bail!(
            "{}: params.spins_us needs a setting, params.rounds and params.depth ≥ 1, the seconds > 0",
            cell.experiment
        );
    }
    let fds = crate::limits::raise_fd_limit();
    if (fds as usize) < p.clients + p.background + 64 {
        bail!("the load driver may open {fds} files; params.clients + params.background need more");
    }
    let data = super::work_dir(cell)?.join("db");
    let db = datastore::Db::open(&data)?;
    workload::load(&db, rows, cell.seed, rows.max(1), true, |_, _| {})
        .with_context(|| format!("loading {rows} rows into {}", data.display()))?;
    drop(db);
    // The chain table through the first server, before the others open the directory.
    let mut servers: Vec<(u64, ServerChild)> = Vec::new();
    for (i, &spin) in spins.iter().enumerate() {
        let trace = if i == 0 { cell.trace.as_deref() } else { None };
        let s = ServerChild::spawn(&data, trace, &["--idle-spin-us", &spin.to_string()])?;
        if i == 0 {
            chain::ensure_table(&mut Client::connect(s.addr)?)?;
        }
        servers.push((spin, s));
    }
    let query = workload::QUERIES[2].1;
    let expected = Client::connect(servers[0].1.addr)?.execute(query)?;

    let total = rounds * servers.len();
    let mut done = 0;
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..servers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (spin, server) = &servers[i];
            let spin = *spin;
            let quiet = pings_while(server.addr, &p, false)?;
            emit_pings(out, spin, round, "quiet", quiet.0)?;
            let (pings, mut chains) = pings_while(server.addr, &p, true)?;
            emit_pings(out, spin, round, "chains", pings)?;
            out.emit(&Record::Chains(Chains {
                spin_us: spin,
                round: round as u64,
                depth: p.depth as u64,
                chains: chains.len() as u64,
                median_us: Some(percentile(&mut chains, 50.0)),
                p99_us: Some(percentile(&mut chains, 99.0)),
            }))?;
            let (queries, seconds, cpu_s) = cpu_at_rate(server, &p, query, &expected)?;
            out.emit(&Record::Cpu(Cpu {
                spin_us: spin,
                round: round as u64,
                clients: p.clients as u64,
                queries: queries as u64,
                seconds,
                cpu_s,
                cpu_per_s: cpu_s / seconds,
            }))?;
            done += 1;
            progress(done, total);
        }
    }
    for (_, s) in servers {
        s.stop()?;
    }
    Ok(())
}

fn emit_pings(out: &mut Records, spin: u64, round: usize, phase: &str, mut us: Vec<f64>) -> Result<()> {
    out.emit(&Record::Pings(Pings {
        spin_us: spin,
        round: round as u64,
        phase: phase.to_string(),
        pings: us.len() as u64,
        p50_us: Some(percentile(&mut us, 50.0)),
        p99_us: Some(percentile(&mut us, 99.0)),
        max_us: us.iter().copied().fold(0.0, f64::max),
    }))
}

/// `background` connections ping on a schedule for `seconds` (and, with
/// `chains`, one more client runs pipelined chains meanwhile): every ping's
/// latency (µs) and every chain's time (µs).
fn pings_while(addr: SocketAddr, p: &Params, chains: bool) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut conns: Vec<Client> =
        (0..p.background).map(|_| super::ping_once(addr)).collect::<Result<_>>().context("background connections")?;
    let mut chain_client = Client::connect(addr)?;
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(p.seconds);
    std::thread::scope(|s| -> Result<(Vec<f64>, Vec<f64>)> {
        let n = conns.len().max(1) as u32;
        let pingers: Vec<_> = conns
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                // Staggered: connection i's first ping is i/n of a period in.
                let mut next = start + p.ping_every * i as u32 / n;
                s.spawn(move || -> Result<Vec<f64>> {
                    let mut lat = Vec::new();
                    while next < deadline {
                        std::thread::sleep(next.saturating_duration_since(Instant::now()));
                        let t = Instant::now();
                        let q = c.ping()?;
                        c.wait(q)?;
                        lat.push(t.elapsed().as_secs_f64() * 1e6);
                        c.finish(q)?;
                        next += p.ping_every;
                    }
                    Ok(lat)
                })
            })
            .collect();
        let chainer = chains.then(|| {
            let (c, stop) = (&mut chain_client, &stop);
            s.spawn(move || -> Result<Vec<f64>> {
                let mut times = Vec::new();
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let t = Instant::now();
                    let v = chain::pipelined(c, p.depth)?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                    if v != p.depth as u64 {
                        bail!("a pipelined chain of depth {} ended at {v}", p.depth);
                    }
                }
                Ok(times)
            })
        });
        let mut pings = Vec::new();
        let mut failed = None;
        for h in pingers {
            match h.join().map_err(|_| anyhow::anyhow!("a pinging thread panicked"))? {
                Ok(l) => pings.extend(l),
                Err(e) => failed = Some(e),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let times = match chainer {
            Some(h) => h.join().map_err(|_| anyhow::anyhow!("the chain thread panicked"))??,
            None => Vec::new(),
        };
        match failed {
            Some(e) => Err(e.context("a background ping failed")),
            None => Ok((pings, times)),
        }
    })
}

/// `clients` connections each send `query` once a second, spread evenly,
/// for `cpu_seconds`: queries answered, the wall time, and the server's
/// CPU seconds (user + system) over it.
fn cpu_at_rate(
    server: &ServerChild,
    p: &Params,
    query: &str,
    expected: &crate::client::Rows,
) -> Result<(usize, f64, f64)> {
    const THREADS: usize = 8;
    let mut conns: Vec<Client> =
        (0..p.clients).map(|_| super::ping_once(server.addr)).collect::<Result<_>>().context("query clients")?;
    let period = Duration::from_secs(1);
    let cpu0 = cpu_seconds(server.pid())?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(p.cpu_seconds);
    let per = conns.len().div_ceil(THREADS).max(1);
    let answered = std::thread::scope(|s| -> Result<usize> {
        let handles: Vec<_> = conns
            .chunks_mut(per)
            .enumerate()
            .map(|(t, chunk)| {
                s.spawn(move || -> Result<usize> {
                    // This thread's connections take turns, one every period / len,
                    // offset by the thread so that the whole load is spread evenly.
                    let step = period / chunk.len().max(1) as u32;
                    let mut next = start + step * t as u32 / THREADS as u32;
                    let mut n = 0;
                    'outer: loop {
                        for c in chunk.iter_mut() {
                            if next >= deadline {
                                break 'outer;
                            }
                            std::thread::sleep(next.saturating_duration_since(Instant::now()));
                            let got = c.execute(query)?;
                            if &got != expected {
                                bail!("answer differs from the first: {:?} vs {:?}", got.rows, expected.rows);
                            }
                            n += 1;
                            next += step;
                        }
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut n = 0;
        for h in handles {
            n += h.join().map_err(|_| anyhow::anyhow!("a query thread panicked"))??;
        }
        Ok(n)
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(server.pid())? - cpu0;
    Ok((answered, seconds, cpu))
}

/// A process's CPU time so far (user + system), seconds.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let ticks = probe::rss::cpu_ticks(pid).with_context(|| format!("reading /proc/{pid}/stat"))?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(ticks as f64 / hz)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_of_this_process_grows() {
        let pid = std::process::id();
        let a = super::cpu_seconds(pid).unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        let b = super::cpu_seconds(pid).unwrap();
        assert!(b > a, "{a} → {b}");
    }
}
