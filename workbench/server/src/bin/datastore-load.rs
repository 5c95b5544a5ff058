//! `datastore-load`: everything that drives or inspects a datastore server
//! from outside it, kept out of the measured binary (`datastore-server`):
//! the cells of the server's experiments (`--cell '<json>'`, run by the
//! workbench with the flags every measured binary takes,
//! [`probe::cell::Invocation`]), which start the `datastore-server` beside
//! this binary as their child; a client; a delay proxy; a connection
//! holder; and the engine alone (the datastore-queries experiment's
//! measured process).

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use server::client::Client;
use server::experiments;
use server::limits;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "datastore-load", about = "Drives a datastore server: client, proxy, load, experiment cells")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one SQL statement against a server.
    Client {
        server: String,
        sql: String,
        #[arg(long, default_value = "table", value_parser = ["table", "csv", "json"])]
        format: String,
    },
    /// Forward connections with a fixed one-way delay each way; prints the
    /// client→server flight count at exit (and every `--report-s` seconds).
    Proxy {
        #[arg(long)]
        listen: String,
        #[arg(long)]
        upstream: SocketAddr,
        /// One-way delay in milliseconds (fractions allowed): RTT grows by twice this.
        #[arg(long, default_value_t = 0.25)]
        delay_ms: f64,
        #[arg(long, default_value_t = 0)]
        report_s: u64,
    },
    /// Fetch a server's sampled heap profile (its sampling build, variant
    /// jemalloc-prof) into a gzipped pprof file, for `workbench trace top`,
    /// `trace export` or `go tool pprof`.
    HeapProfile {
        server: String,
        /// Where the profile is written.
        #[arg(long, default_value = "datastore-server.heap.pb.gz")]
        out: PathBuf,
    },
    /// Load driver: open N connections, ping once on each, hold them until stdin closes.
    Hold {
        server: String,
        #[arg(long)]
        connections: usize,
    },
    /// The engine alone (the datastore-queries experiment's measured
    /// process): time the workload's queries on an opened table.
    #[command(hide = true)]
    Engine {
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Most threads a query may use (0: every core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match probe::cell::Invocation::parse(&args) {
        Some(Ok(probe::cell::Invocation::Cell(cell))) => {
            let mut out = experiments::Records::new(Box::new(std::io::stdout()));
            return experiments::run(&cell, &mut out).with_context(|| format!("cell {}", cell.experiment));
        }
        Some(Ok(asked)) => {
            println!("{}", asked.build_fact().unwrap_or_default());
            return Ok(());
        }
        Some(Err(e)) => return Err(e).context("parsing --cell JSON"),
        None => {}
    }
    match Cli::parse().cmd {
        Cmd::Client { server, sql, format } => {
            let mut c = Client::connect(server.as_str())?;
            let r = c.execute(&sql)?;
            print_rows(&r.names, &r.types, &r.rows, &format)?;
        }
        Cmd::HeapProfile { server, out } => {
            let mut c = Client::connect(server.as_str())?;
            let p = c.heap_profile()?;
            c.flush()?;
            let bytes = c.wait_bytes(p).with_context(|| format!("heap_profile of {server}"))?;
            std::fs::write(&out, &bytes).with_context(|| format!("writing {}", out.display()))?;
            println!(
                "{}: {} bytes (gzipped pprof; `workbench trace top {}`)",
                out.display(),
                bytes.len(),
                out.display()
            );
        }
        Cmd::Proxy { listen, upstream, delay_ms, report_s } => proxy(&listen, upstream, delay_ms, report_s)?,
        Cmd::Hold { server, connections } => {
            limits::raise_fd_limit();
            let addr: SocketAddr = server.parse().with_context(|| format!("server address {server:?}"))?;
            let held = (0..connections)
                .map(|i| experiments::ping_once(addr).with_context(|| format!("connection {} of {connections}", i + 1)))
                .collect::<Result<Vec<_>>>()?;
            println!("held {}", held.len());
            std::io::stdout().flush()?;
            // Hold until whoever started us closes our stdin.
            for _ in std::io::stdin().lock().lines() {}
        }
        Cmd::Engine { data, runs, threads } => experiments::datastore_queries::engine(&data, runs, threads)?,
    }
    Ok(())
}

fn proxy(listen: &str, upstream: SocketAddr, delay_ms: f64, report_s: u64) -> Result<()> {
    if !(delay_ms >= 0.0 && delay_ms.is_finite()) {
        bail!("--delay-ms must be a non-negative number, got {delay_ms}");
    }
    let delay = Duration::from_secs_f64(delay_ms / 1e3);
    let p = server::proxy::start(listen, upstream, delay).with_context(|| format!("--listen {listen}"))?;
    println!("proxy listening on {} -> {upstream}, {delay_ms} ms each way", p.addr);
    std::io::stdout().flush()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let stats = p.stats.clone();
    rt.block_on(async {
        tokio::select! {
            _ = server::shutdown::signal() => {}
            _ = async {
                loop {
                    tokio::time::sleep(Duration::from_secs(report_s.max(1))).await;
                    if report_s > 0 {
                        eprintln!("flights {}", stats.flights());
                    }
                }
            } => {}
        }
    });
    use std::sync::atomic::Ordering::SeqCst;
    println!(
        "proxy: {} connection(s), {} client->server flight(s), {} B up, {} B down",
        p.stats.connections.load(SeqCst),
        p.stats.flights(),
        p.stats.bytes_up.load(SeqCst),
        p.stats.bytes_down.load(SeqCst)
    );
    Ok(())
}

fn print_rows(
    names: &[String],
    types: &[datastore::ColumnType],
    rows: &[Vec<datastore::Value>],
    format: &str,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    // Text formats print DateTimes as ClickHouse does; JSON keeps epoch seconds.
    let text = |i: usize, v: &datastore::Value| types.get(i).map_or_else(|| v.to_string(), |t| v.display_as(*t));
    match format {
        "json" => {
            let rows: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    let m = names.iter().zip(r).map(|(n, v)| (n.clone(), serde_json::json!(v.to_string()))).collect();
                    serde_json::Value::Object(m)
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        }
        "csv" => {
            writeln!(out, "{}", names.join(","))?;
            for r in rows {
                writeln!(out, "{}", r.iter().enumerate().map(|(i, v)| text(i, v)).collect::<Vec<_>>().join(","))?;
            }
        }
        _ => {
            writeln!(out, "{}", names.join("\t"))?;
            for r in rows {
                writeln!(out, "{}", r.iter().enumerate().map(|(i, v)| text(i, v)).collect::<Vec<_>>().join("\t"))?;
            }
        }
    }
    Ok(())
}
