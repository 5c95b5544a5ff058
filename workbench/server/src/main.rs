//! `datastore-server`: serve a data directory over ZAP, and nothing else.
//! It is the measured binary: its size and memory are the server's own. The
//! load drivers, the client, the delay proxy and the experiments' cells are
//! `datastore-load` (`src/bin/datastore-load.rs`). It answers the
//! workbench's `--variant` and `--revision` ([`probe::cell::Invocation`]).

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use server::limits::{self, Config};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "datastore-server", about = "The datastore over ZAP")]
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
        /// Bytes of working memory one query may hold (413 beyond).
        #[arg(long, default_value_t = Config::default().max_query_memory)]
        max_query_memory: usize,
        /// Bytes every query's working memory and every answer hold together (503 beyond).
        #[arg(long, default_value_t = Config::default().max_server_memory)]
        max_server_memory: usize,
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
        /// dhat build: record every call's exact allocation cost and write
        /// them here at shutdown (JSON lines; the request-cost experiment).
        #[arg(long)]
        call_costs: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match probe::cell::Invocation::parse(&args) {
        Some(Ok(probe::cell::Invocation::Cell(cell))) => {
            bail!("cell {}: cells run in datastore-load, which starts this server as its child", cell.experiment)
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
            max_query_memory,
            max_server_memory,
            answer_budget,
            conn_answer_budget,
            write_timeout_ms,
            idle_spin_us,
            trace,
            call_costs,
        } => {
            let _probe = probe::Probe::start(Some(&trace));
            if call_costs.is_some() {
                if probe::VARIANT != probe::Variant::Dhat {
                    bail!(
                        "--call-costs: only the dhat build counts every call (this is the {} build)",
                        probe::VARIANT.name()
                    );
                }
                server::costs::start();
            }
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
                max_query_memory,
                max_server_memory,
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
                server::shutdown::signal(),
            )?;
            eprintln!("shut down: {summary}");
            if let Some(path) = &call_costs {
                let n = server::costs::write(path).with_context(|| format!("--call-costs {}", path.display()))?;
                eprintln!("call costs: {n} calls in {}", path.display());
            }
            if probe::VARIANT == probe::Variant::Dhat {
                eprintln!("dhat trace: {}", trace.display());
            }
        }
    }
    Ok(())
}
