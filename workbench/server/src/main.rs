//! `datastore-server`: serve a data directory over ZAP; a client, a delay
//! proxy, and the cells of the server's experiments (run by the workbench
//! with the flags every measured binary takes, [`probe::cell::Invocation`]:
//! `--cell '<json>'`, `--variant`, `--revision`).

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use server::client::Client;
use server::experiments;
use server::limits::{self, Config};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "datastore-server", about = "The datastore over ZAP: serve, client, proxy, benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve a data directory; prints `listening on ADDR` once bound.
    Serve {
        #[arg(long)]
        data: PathBuf,
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:9440")]
        listen: String,
        #[arg(long, default_value_t = Config::default().max_connections)]
        max_connections: usize,
        /// Query and insert threads (default: one per core).
        #[arg(long, default_value_t = Config::default().workers)]
        workers: usize,
        /// Threads one query may scan on (0: every core; idle cores only).
        #[arg(long, default_value_t = 0)]
        query_threads: usize,
        #[arg(long, default_value_t = 30_000)]
        query_timeout_ms: u64,
        #[arg(long, default_value_t = 10_000)]
        stall_timeout_ms: u64,
        #[arg(long, default_value_t = Config::default().max_result_rows)]
        max_result_rows: usize,
        #[arg(long, default_value_t = Config::default().max_frame)]
        max_frame: usize,
        /// Bytes of answers the server holds and queues, over every connection (503 beyond).
        #[arg(long, default_value_t = Config::default().answer_budget)]
        answer_budget: usize,
        /// Bytes of answers one connection holds and queues (429 beyond).
        #[arg(long, default_value_t = Config::default().conn_answer_budget)]
        conn_answer_budget: usize,
        /// A peer that leaves its answers unread this long is closed.
        #[arg(long, default_value_t = 10_000)]
        write_timeout_ms: u64,
        /// How long the I/O thread polls for the answer to a lone call before
        /// it sleeps (0: never; see the server README's wake-up section).
        #[arg(long, default_value_t = server::limits::IDLE_SPIN.as_micros() as u64)]
        idle_spin_us: u64,
        /// dhat build: where the trace is written at shutdown.
        #[arg(long, default_value = "datastore-server.dhat.json")]
        trace: PathBuf,
    },
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
        Cmd::Serve {
            data,
            listen,
            max_connections,
            workers,
            query_threads,
            query_timeout_ms,
            stall_timeout_ms,
            max_result_rows,
            max_frame,
            answer_budget,
            conn_answer_budget,
            write_timeout_ms,
            idle_spin_us,
            trace,
        } => {
            let _probe = probe::Probe::start(Some(&trace));
            if probe::VARIANT == probe::Variant::System && std::env::var_os("SERVER_GLIBC_FASTBINS").is_none() {
                // NOTE: glibc's fastbins never coalesce; the few small, short-lived
                // blocks of each connection's first call then strand between the
                // long-lived tasks of later connections (≈ 370 B a connection at
                // 10,000, measured). Off, freed blocks merge and are reused.
                // SAFETY: mallopt only sets an allocator tunable, before any thread starts.
                unsafe { libc::mallopt(libc::M_MXFAST, 0) };
            }
            let fds = limits::raise_fd_limit();
            if (fds as usize) < max_connections + 64 {
                eprintln!("note: open-files limit {fds} is below --max-connections {max_connections} + 64");
            }
            let cfg = Config {
                max_connections,
                max_frame,
                max_result_rows,
                query_timeout: Duration::from_millis(query_timeout_ms),
                stall_timeout: Duration::from_millis(stall_timeout_ms),
                workers,
                query_threads,
                queue: 64 * workers.max(1),
                answer_budget,
                conn_answer_budget,
                write_timeout: Duration::from_millis(write_timeout_ms),
                idle_spin: Duration::from_micros(idle_spin_us),
                ..Config::default()
            };
            let summary = server::serve(
                &data,
                &listen,
                cfg,
                |addr| {
                    println!("listening on {addr}");
                    let _ = std::io::stdout().flush();
                },
                stop_signal(),
            )?;
            eprintln!("shut down: {summary}");
            if probe::VARIANT == probe::Variant::Dhat {
                eprintln!("dhat trace: {}", trace.display());
            }
        }
        Cmd::Client { server, sql, format } => {
            let mut c = Client::connect(server.as_str())?;
            let r = c.execute(&sql)?;
            print_rows(&r.names, &r.types, &r.rows, &format)?;
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

/// Resolves on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
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
            _ = stop_signal() => {}
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
