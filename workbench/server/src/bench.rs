//! The benchmarks behind `connbench` and `chainbench`: figures printed, not
//! asserted (the workbench's experiments turn them into datasets).

use crate::spawn_server;
use anyhow::{bail, Context, Result};
use server::chain;
use server::client::Client;
use std::path::Path;
use std::time::{Duration, Instant};

/// Opens `n` connections, each making one `ping` (answered and finished).
pub fn hold(server: &str, n: usize) -> Result<Vec<Client>> {
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        held.push(ping_once(server).with_context(|| format!("connection {} of {n}", i + 1))?);
        if (i + 1) % 1000 == 0 {
            eprintln!("progress {} {n}", i + 1);
        }
    }
    Ok(held)
}

fn ping_once(server: &str) -> Result<Client> {
    let mut c = Client::connect(server)?;
    let p = c.ping()?;
    c.wait(p)?;
    c.finish(p)?;
    c.flush()?;
    Ok(c)
}

fn server_stats(c: &mut Client) -> Result<serde_json::Value> {
    let p = c.stats()?;
    let text = c.wait_text(p)?;
    c.finish(p)?;
    Ok(serde_json::from_str(&text)?)
}

fn mib(b: f64) -> String {
    format!("{:.2} MiB", b / (1u64 << 20) as f64)
}

pub fn connections(data: &Path, steps: &[usize], server_bin: Option<&Path>) -> Result<()> {
    let fds = server::limits::raise_fd_limit();
    let max = steps.iter().copied().max().unwrap_or(0);
    if (fds as usize) < max + 64 {
        bail!("this process may open {fds} files; {max} connections need {} (raise `ulimit -n`)", max + 64);
    }
    let bin = match server_bin {
        Some(b) => b.to_path_buf(),
        None => std::env::current_exe()?,
    };
    std::fs::create_dir_all(data)?;
    let max_conn = (max + 16).to_string();
    let (mut child, addr) = spawn_server(&bin, data, &["--max-connections", &max_conn])?;
    let measured = measure_connections(&addr.to_string(), steps);
    // SAFETY: kill sends a signal to the child we started; no memory is touched.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait()?;
    let rows = measured?;
    let (n0, _, rss0, live0, variant) = rows.first().cloned().context("no --steps")?;
    println!(
        "connection scaling: server `{}` ({variant} build), one ping per connection then idle, one sample per step",
        bin.display()
    );
    println!(
        "{:>12} {:>12} {:>14} {:>16} {:>14} {:>16}",
        "connections", "server conns", "RSS", "RSS - RSS(first)", "RSS/conn", "live heap/conn"
    );
    for (n, open, rss, live, _) in &rows {
        let dn = (*n as f64 - n0 as f64).max(1.0);
        let per_live = match (live, live0) {
            (Some(l), Some(l0)) => format!("{:.0} B", (l - l0) / dn),
            _ => "-".into(),
        };
        println!(
            "{n:>12} {open:>12} {:>14} {:>16} {:>12.0} B {per_live:>16}",
            mib(*rss),
            mib(rss - rss0),
            (rss - rss0) / dn
        );
    }
    if let Some((n, _, rss, _, _)) = rows.last() {
        println!(
            "RSS({n}) - RSS({n0}) = {} (target <= 10 MB = 9.54 MiB); server exited with {status}",
            mib(rss - rss0)
        );
    }
    Ok(())
}

type Step = (usize, u64, f64, Option<f64>, String);

/// Holds `steps` connections in turn and samples the server at each.
fn measure_connections(addr: &str, steps: &[usize]) -> Result<Vec<Step>> {
    let mut ctl = ping_once(addr)?;
    let mut held: Vec<Client> = Vec::new();
    let mut rows = Vec::new();
    for &n in steps {
        while held.len() < n {
            held.push(ping_once(addr).with_context(|| format!("connection {}", held.len() + 1))?);
        }
        // Let the server's last replies and frees settle before sampling.
        std::thread::sleep(Duration::from_millis(300));
        let s = server_stats(&mut ctl)?;
        let rss = s["rss_bytes"].as_u64().unwrap_or(0) as f64;
        let live = s["live_heap_bytes"].as_u64().map(|v| v as f64);
        eprintln!("{n} connections: server RSS {}", mib(rss));
        rows.push((
            n,
            s["connections"].as_u64().unwrap_or(0),
            rss,
            live,
            s["variant"].as_str().unwrap_or("?").to_string(),
        ));
    }
    Ok(rows)
}

/// One chain of `depth` through the proxy: its time (ms) and the flights it took.
fn timed(
    c: &mut Client,
    proxy: &server::proxy::RunningProxy,
    depth: usize,
    run: fn(&mut Client, usize) -> Result<u64, server::client::ClientError>,
    what: &str,
) -> Result<(f64, u64)> {
    let f0 = proxy.stats.flights();
    let t0 = Instant::now();
    let v = run(c, depth)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    if v != depth as u64 {
        bail!("{what} chain of {depth} ended at {v}");
    }
    Ok((ms, proxy.stats.flights() - f0))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn chains(data: &Path, depths: &[usize], delays_ms: &[f64], runs: usize) -> Result<()> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let bin = std::env::current_exe()?;
    std::fs::create_dir_all(data)?;
    let (mut child, addr) = spawn_server(&bin, data, &[])?;
    let mut direct = Client::connect(addr)?;
    chain::ensure_table(&mut direct)?;
    println!(
        "dependent chains through the delay proxy; server in its own process; {runs} runs per cell, interleaved; ms"
    );
    println!(
        "{:>9} {:>6} {:>16} {:>16} {:>10} {:>18}",
        "delay/way", "depth", "pipelined p50", "req-resp p50", "speedup", "flights (pipe/rr)"
    );
    for &d in delays_ms {
        let proxy = server::proxy::start("127.0.0.1:0", addr, Duration::from_secs_f64(d / 1e3))?;
        let mut c = Client::connect(proxy.addr)?;
        for &depth in depths {
            let (mut tp, mut tr) = (Vec::new(), Vec::new());
            let (mut fp, mut fr) = (0, 0);
            // NOTE: no flush before a measurement: the previous chain's queued
            // finishes leave with this chain's calls, in the same flight.
            for _ in 0..runs {
                let (ms, f) = timed(&mut c, &proxy, depth, chain::pipelined, "pipelined")?;
                (fp, tp) = (f, [tp, vec![ms]].concat());
                let (ms, f) = timed(&mut c, &proxy, depth, chain::request_response, "request-response")?;
                (fr, tr) = (f, [tr, vec![ms]].concat());
            }
            let (p, r) = (median(&mut tp), median(&mut tr));
            println!("{d:>9} {depth:>6} {p:>16.3} {r:>16.3} {:>9.1}x {:>18}", r / p, format!("{fp}/{fr}"));
        }
    }
    // SAFETY: as in `connections`.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait()?;
    Ok(())
}
