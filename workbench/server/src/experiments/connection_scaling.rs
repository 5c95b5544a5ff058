//! Server memory against idle connections: each connection sends the same
//! trivial query ([`TRIVIAL`], on a one-row table both servers hold), reads
//! the answer and stays open; at each step the server reports its RSS, live
//! heap and (jemalloc build) `stats.allocated/active/resident`.
//!
//! Beside it, in the system build's cell, when `clickhouse` names a
//! binary: Debian's `clickhouse-server` on the same steps, over HTTP
//! keep-alive ([`clickhouse`]), the same query on every connection.
//!
//! Params: `steps` (connection counts, ascending), `settle_ms` (pause before
//! each sample, so the last replies and frees have happened), `clickhouse`
//! (path of `clickhouse-server`).

use super::{open_files_limit, ping_once, progress, Cell, Experiment, Records, ServerChild};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const EXPERIMENT: Experiment = Experiment { name: "connection-scaling", run };

/// The query every connection sends once, on both servers: one row of a
/// one-row table (our SQL needs a FROM, so `SELECT 1` would not be the same
/// work on both sides).
pub const TRIVIAL: &str = "SELECT x FROM one";

/// A fresh connection that has sent [`TRIVIAL`] and read its one row.
fn trivial_once(addr: SocketAddr) -> Result<crate::client::Client> {
    let mut c = crate::client::Client::connect(addr)?;
    let rows = c.execute(TRIVIAL)?;
    if rows.rows != [vec![datastore::Value::U(1)]] {
        bail!("{TRIVIAL} answered {:?}", rows.rows);
    }
    Ok(c)
}

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
    ctl.execute("CREATE TABLE one (x UInt64) ORDER BY (x)")?;
    let p = ctl.insert(
        "one",
        &[("x".to_string(), datastore::ColumnType::UInt64)],
        &datastore::Batch { columns: vec![datastore::ColumnData::U64(vec![1])] },
    )?;
    ctl.wait(p)?;
    ctl.finish(p)?;
    trivial_once(server.addr)?;
    let mut held = Vec::with_capacity(max);
    for (i, &n) in steps.iter().enumerate() {
        while held.len() + 1 < n {
            held.push(trivial_once(server.addr).with_context(|| format!("opening connection {}", held.len() + 2))?);
        }
        std::thread::sleep(settle);
        let s = server.stats(&mut ctl)?;
        out.emit(json!({
            "server": "ours",
            "query": TRIVIAL,
            "connections": n,
            "server_connections": s["connections"],
            "rss_bytes": s["rss_bytes"],
            "peak_rss_bytes": s["peak_rss_bytes"],
            "live_heap_bytes": s["live_heap_bytes"],
            "jemalloc_allocated": s["jemalloc_allocated"],
            "jemalloc_active": s["jemalloc_active"],
            "jemalloc_resident": s["jemalloc_resident"],
            "server_threads": threads(server.pid()),
            "server_open_files_limit": server_fds,
            "driver_open_files_limit": fds,
        }))?;
        progress(i + 1, steps.len());
    }
    drop(held);
    drop(ctl);
    server.stop()?;
    // One build measures the peer (its figures do not depend on ours).
    let peer: Option<PathBuf> = cell.param("clickhouse", None)?;
    match peer {
        Some(bin) if probe::VARIANT == probe::Variant::System => clickhouse(cell, &bin, &steps, settle, fds, out),
        _ => Ok(()),
    }
}

/// The official column: Debian's `clickhouse-server` (old: 18.16), started
/// on loopback with a generated config (`max_connections` above the last
/// step, HTTP keep-alive for an hour), driven over HTTP keep-alive: each
/// connection sends [`TRIVIAL`] once (table `one` made first, in memory),
/// reads the answer and stays open. Its
/// RSS and thread count at each step; a step it cannot reach is recorded
/// with the error, and the steps stop there.
fn clickhouse(
    cell: &Cell,
    bin: &Path,
    steps: &[usize],
    settle: Duration,
    driver_fds: u64,
    out: &mut Records,
) -> Result<()> {
    if !bin.exists() {
        eprintln!("note: clickhouse-server not measured: {} does not exist", bin.display());
        return out.emit(json!({"server": "clickhouse", "kind": "peer", "available": false,
            "reason": format!("{} does not exist (scripts/setup.sh installs it with WB_PEERS=1)", bin.display())}));
    }
    let dir = cell.work_dir.join("clickhouse");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (http, tcp) = (free_port()?, free_port()?);
    let max = steps.last().copied().unwrap_or(0) + 64;
    let d = dir.display();
    let config = format!(
        r#"<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/server.err.log</errorlog><console>0</console></logger>
    <http_port>{http}</http_port>
    <tcp_port>{tcp}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <max_connections>{max}</max_connections>
    <keep_alive_timeout>3600</keep_alive_timeout>
    <path>{d}/data/</path>
    <tmp_path>{d}/tmp/</tmp_path>
    <user_files_path>{d}/user_files/</user_files_path>
    <format_schema_path>{d}/format_schemas/</format_schema_path>
    <users_config>{d}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709120</mark_cache_size>
</yandex>
"#
    );
    let users = r#"<?xml version="1.0"?>
<yandex>
    <profiles><default></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default></default></quotas>
</yandex>
"#;
    std::fs::write(dir.join("config.xml"), config)?;
    std::fs::write(dir.join("users.xml"), users)?;
    // NOTE: the child inherits this process's raised open-files limit.
    let mut child = Command::new(bin)
        .arg(format!("--config-file={d}/config.xml"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let result = (|| -> Result<()> {
        let addr: SocketAddr = format!("127.0.0.1:{http}").parse()?;
        let t0 = Instant::now();
        let version = loop {
            match http_get(addr, "SELECT%20version()") {
                Ok((s, body)) => break (s, body),
                Err(_) if t0.elapsed() < Duration::from_secs(30) => std::thread::sleep(Duration::from_millis(200)),
                Err(e) => return Err(e.context(format!("clickhouse-server did not answer on {addr} within 30 s"))),
            }
        };
        let (_, version) = version;
        let server_fds = open_files_limit(child.id());
        out.emit(json!({"server": "clickhouse", "kind": "peer", "available": true,
            "version": version.trim(), "server_open_files_limit": server_fds, "query": TRIVIAL}))?;
        http_post(addr, "CREATE TABLE one (x UInt64) ENGINE = Memory")?;
        http_post(addr, "INSERT INTO one VALUES (1)")?;
        let trivial = TRIVIAL.replace(' ', "%20");
        let (_, one) = http_get(addr, &trivial)?;
        if one.trim() != "1" {
            bail!("clickhouse-server answered {TRIVIAL} with {one:?}");
        }
        let mut held = Vec::with_capacity(max);
        for (i, &n) in steps.iter().enumerate() {
            let mut failed = None;
            while held.len() < n {
                match http_get(addr, &trivial) {
                    Ok((s, _)) => held.push(s),
                    Err(e) => {
                        failed = Some(format!("{e:#}"));
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                out.emit(json!({"server": "clickhouse", "connections": n, "reached": held.len(), "error": e}))?;
                break;
            }
            std::thread::sleep(settle);
            let Some(rss) = probe::rss::read_pid(child.id()) else {
                bail!("clickhouse-server exited at {n} connections")
            };
            out.emit(json!({
                "server": "clickhouse",
                "connections": n,
                "rss_bytes": rss.rss,
                "peak_rss_bytes": rss.peak,
                "server_threads": threads(child.id()),
                "server_open_files_limit": server_fds,
                "driver_open_files_limit": driver_fds,
            }))?;
            progress(i + 1, steps.len());
        }
        Ok(())
    })();
    // SAFETY: kill only signals the child this function started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    result
}

/// A free loopback port (bound, then released for the server to take).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One statement POSTed on a connection of its own, read to the end.
fn http_post(addr: SocketAddr, sql: &str) -> Result<()> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{sql}", sql.len())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).context("reading the answer")?;
    if !answer.starts_with("HTTP/1.1 200") {
        bail!("clickhouse-server answered {sql:?} with {}", answer.lines().next().unwrap_or(""));
    }
    Ok(())
}

/// One HTTP/1.1 keep-alive GET of `query` on a new connection: the open
/// connection and the answer's body (chunked, as ClickHouse sends it).
fn http_get(addr: SocketAddr, query: &str) -> Result<(TcpStream, String)> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET /?query={query} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let body_at = loop {
        let n = s.read(&mut chunk).context("reading the answer")?;
        if n == 0 {
            bail!("the server closed the connection before answering");
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            if buf.ends_with(b"0\r\n\r\n") && buf.len() > at + 4 {
                break at + 4;
            }
        }
    };
    let head = String::from_utf8_lossy(&buf[..body_at]).to_string();
    if !head.starts_with("HTTP/1.1 200") {
        bail!("answered {}", head.lines().next().unwrap_or(""));
    }
    // The chunked body: size line, data, …, 0.
    let mut body = String::new();
    let mut rest = &buf[body_at..];
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < eol + 2 + size {
            break;
        }
        body.push_str(&String::from_utf8_lossy(&rest[eol + 2..eol + 2 + size]));
        rest = &rest[(eol + 4 + size).min(rest.len())..];
    }
    Ok((s, body))
}

fn proc_status_field(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| l.strip_prefix(field)?.trim().parse().ok())
}

fn threads(pid: u32) -> Option<u64> {
    proc_status_field(pid, "Threads:")
}
