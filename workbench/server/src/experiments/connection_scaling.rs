//! Server memory against idle connections: each connection sends the same
//! trivial query ([`TRIVIAL`], on a one-row table both servers hold), reads
//! the answer and stays open; at each step the server reports its RSS, live
//! heap and (jemalloc build) `stats.allocated/active/resident`, and its
//! resident set is split by kind of mapping (heap, other anonymous, thread
//! stacks, files: [`probe::smaps`]), for both servers.
//!
//! Beside it, in the system build's cell, when `clickhouse` names a
//! binary: Debian's `clickhouse-server` on the same steps, over HTTP
//! keep-alive ([`clickhouse`]), the same query on every connection.
//!
//! Params: `steps` (connection counts, ascending), `settle_ms` (pause before
//! each sample, so the last replies and frees have happened), `clickhouse`
//! (path of `clickhouse-server`).

use super::{open_files_limit, ping_once, progress, Cell, Records, ServerChild};
use anyhow::{bail, Context, Result};
use records::server::connection_scaling::{Failed, Ours, Params, Peer, PeerKind, StepAnatomy, Theirs};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

pub fn run(cell: &Cell, params: &Params, out: &mut Records) -> Result<()> {
    let steps: Vec<usize> = params.steps.clone();
    let settle = Duration::from_millis(params.settle_ms);
    if steps.is_empty() || steps.windows(2).any(|w| w[0] >= w[1]) {
        bail!("{}: params.steps must be ascending and non-empty, got {steps:?}", cell.experiment);
    }
    let max = *steps.last().expect("non-empty");
    let fds = crate::limits::raise_fd_limit();
    if (fds as usize) < max + 64 {
        bail!("the load driver may open {fds} files; {max} connections need {} (params.steps)", max + 64);
    }
    let data = super::work_dir(cell)?.join("db");
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
        out.emit(&Ours {
            server: "ours".into(),
            query: Some(TRIVIAL.into()),
            connections: n as u64,
            server_connections: s.connections,
            rss_bytes: s.rss_bytes,
            peak_rss_bytes: s.peak_rss_bytes,
            live_heap_bytes: s.live_heap_bytes,
            jemalloc_allocated: s.jemalloc_allocated,
            jemalloc_active: s.jemalloc_active,
            jemalloc_resident: s.jemalloc_resident,
            server_threads: threads(server.pid()),
            server_open_files_limit: server_fds,
            driver_open_files_limit: Some(fds),
            anatomy: anatomy(server.pid()),
        })?;
        progress(i + 1, steps.len());
    }
    drop(held);
    drop(ctl);
    server.stop()?;
    // One build measures the peer (its figures do not depend on ours).
    let peer: Option<PathBuf> = params.clickhouse.clone();
    match peer {
        Some(bin) if probe::VARIANT == probe::Variant::System => {
            clickhouse(cell, &bin, &steps, settle, fds, Protocol::Http, out)?;
            clickhouse(cell, &bin, &steps, settle, fds, Protocol::Native, out)
        }
        _ => Ok(()),
    }
}

/// How the driver speaks to clickhouse-server: a fresh server for each.
#[derive(Clone, Copy, PartialEq)]
enum Protocol {
    /// HTTP/1.1 keep-alive, `GET /?query=…`.
    Http,
    /// Its own TCP protocol ([`native`]), what its client and drivers use.
    Native,
}

impl Protocol {
    /// The `server` field of its records.
    fn label(self) -> &'static str {
        match self {
            Protocol::Http => "clickhouse",
            Protocol::Native => "clickhouse-native",
        }
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
    proto: Protocol,
    out: &mut Records,
) -> Result<()> {
    let label = proto.label();
    if !bin.exists() {
        eprintln!("note: clickhouse-server not measured: {} does not exist", bin.display());
        return out.emit(&Peer {
            server: label.into(),
            kind: PeerKind::Peer,
            available: false,
            reason: Some(format!("{} does not exist (scripts/setup.sh installs it with WB_PEERS=1)", bin.display())),
            version: None,
            server_open_files_limit: None,
            query: None,
        });
    }
    let dir = super::work_dir(cell)?.join(label);
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
        out.emit(&Peer {
            server: label.into(),
            kind: PeerKind::Peer,
            available: true,
            reason: None,
            version: Some(version.trim().into()),
            server_open_files_limit: server_fds,
            query: Some(TRIVIAL.into()),
        })?;
        let native: SocketAddr = format!("127.0.0.1:{tcp}").parse()?;
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
                let one = match proto {
                    Protocol::Http => http_get(addr, &trivial),
                    Protocol::Native => native::query(native, TRIVIAL).and_then(|(s, v)| match v {
                        Some(1) => Ok((s, String::new())),
                        other => bail!("clickhouse-server answered {TRIVIAL} with {other:?} over TCP"),
                    }),
                };
                match one {
                    Ok((s, _)) => held.push(s),
                    Err(e) => {
                        failed = Some(format!("{e:#}"));
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                out.emit(&Failed {
                    server: label.into(),
                    connections: n as u64,
                    reached: held.len() as u64,
                    error: e,
                })?;
                break;
            }
            std::thread::sleep(settle);
            let Some(rss) = probe::rss::read_pid(child.id()) else {
                bail!("clickhouse-server exited at {n} connections")
            };
            out.emit(&Theirs {
                server: label.into(),
                connections: n as u64,
                rss_bytes: rss.rss,
                peak_rss_bytes: rss.peak,
                server_threads: threads(child.id()),
                server_open_files_limit: server_fds,
                driver_open_files_limit: Some(driver_fds),
                anatomy: anatomy(child.id()),
            })?;
            progress(i + 1, steps.len());
        }
        Ok(())
    })();
    // SAFETY: kill only signals the child this function started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    result
}

/// Where a server's resident set lies now, by kind of mapping: what grows
/// with connections is its heap, other anonymous memory or thread stacks.
fn anatomy(pid: u32) -> StepAnatomy {
    match probe::smaps::Anatomy::read(pid) {
        Some(a) => StepAnatomy {
            heap_bytes: Some(a.heap),
            anon_bytes: Some(a.anon),
            stack_bytes: Some(a.stacks),
            file_bytes: Some(a.text + a.binary_other + a.files),
        },
        None => StepAnatomy::default(),
    }
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

/// ClickHouse's native TCP protocol, the least of it: a hello, one query,
/// its answer read to the end of the stream, the connection kept.
///
/// NOTE: the client announces revision 51903 (block info, the external
/// table's name and total rows in progress; before client info, 54032, and
/// the server's time zone, 54058). The server speaks the lower of the two
/// revisions, so every packet has its oldest, shortest shape, and 18.16
/// and later releases still serve it.
mod native {
    use anyhow::{bail, Context, Result};
    use std::io::{BufReader, Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    const REVISION: u64 = 51_903;
    /// Client packets.
    const HELLO: u64 = 0;
    const QUERY: u64 = 1;
    const DATA: u64 = 2;
    /// Server packets.
    const S_HELLO: u64 = 0;
    const S_DATA: u64 = 1;
    const S_EXCEPTION: u64 = 2;
    const S_PROGRESS: u64 = 3;
    const S_END: u64 = 5;
    const S_PROFILE: u64 = 6;
    const S_TOTALS: u64 = 7;
    const S_EXTREMES: u64 = 8;
    /// `QueryProcessingStage::Complete`.
    const COMPLETE: u64 = 2;

    fn varint(b: &mut Vec<u8>, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                b.push(byte);
                return;
            }
            b.push(byte | 0x80);
        }
    }

    fn string(b: &mut Vec<u8>, s: &str) {
        varint(b, s.len() as u64);
        b.extend_from_slice(s.as_bytes());
    }

    /// An empty block: the end of the (absent) external tables.
    fn empty_block(b: &mut Vec<u8>) {
        varint(b, DATA);
        string(b, "");
        // Block info: field 1 is_overflows = 0, field 2 bucket_num = -1, end.
        varint(b, 1);
        b.push(0);
        varint(b, 2);
        b.extend_from_slice(&(-1i32).to_le_bytes());
        varint(b, 0);
        varint(b, 0); // columns
        varint(b, 0); // rows
    }

    struct In<R: Read>(R);

    impl<R: Read> In<R> {
        fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
            let mut b = [0u8; N];
            self.0.read_exact(&mut b).context("reading clickhouse-server's answer")?;
            Ok(b)
        }

        fn varint(&mut self) -> Result<u64> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let [b] = self.bytes::<1>()?;
                v |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    return Ok(v);
                }
            }
            bail!("a varint longer than 64 bits")
        }

        fn string(&mut self) -> Result<String> {
            let n = self.varint()?;
            if n > 1 << 20 {
                bail!("a string of {n} bytes in a trivial answer");
            }
            let mut s = vec![0u8; n as usize];
            self.0.read_exact(&mut s)?;
            Ok(String::from_utf8_lossy(&s).into_owned())
        }

        /// A block's rows: the first value of its first column if it is an unsigned integer.
        fn block(&mut self) -> Result<Option<u64>> {
            let _table = self.string()?;
            loop {
                match self.varint()? {
                    0 => break,
                    1 => drop(self.bytes::<1>()?),
                    2 => drop(self.bytes::<4>()?),
                    f => bail!("unknown block-info field {f}"),
                }
            }
            let (columns, rows) = (self.varint()?, self.varint()?);
            let mut first = None;
            for c in 0..columns {
                let (_name, ty) = (self.string()?, self.string()?);
                let width = match ty.as_str() {
                    "UInt8" => 1,
                    "UInt16" => 2,
                    "UInt32" => 4,
                    "UInt64" => 8,
                    other => bail!("column type {other} in a trivial answer"),
                };
                for r in 0..rows {
                    let mut b = [0u8; 8];
                    self.0.read_exact(&mut b[..width])?;
                    if c == 0 && r == 0 {
                        first = Some(u64::from_le_bytes(b));
                    }
                }
            }
            Ok(first)
        }

        fn exception(&mut self) -> Result<String> {
            let _code = i32::from_le_bytes(self.bytes::<4>()?);
            let (name, message, _stack) = (self.string()?, self.string()?, self.string()?);
            Ok(format!("{name}: {message}"))
        }
    }

    /// Connects, says hello, runs `sql` and reads its answer to the end:
    /// the open connection and the first value of the answer.
    pub fn query(addr: SocketAddr, sql: &str) -> Result<(TcpStream, Option<u64>)> {
        let s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut out = Vec::with_capacity(128);
        varint(&mut out, HELLO);
        string(&mut out, "workbench");
        varint(&mut out, 1);
        varint(&mut out, 0);
        varint(&mut out, REVISION);
        string(&mut out, "default");
        string(&mut out, "default");
        string(&mut out, "");
        (&s).write_all(&out)?;
        let mut r = In(BufReader::new(&s));
        match r.varint()? {
            S_HELLO => {
                let (_name, _major, _minor, _rev) = (r.string()?, r.varint()?, r.varint()?, r.varint()?);
            }
            S_EXCEPTION => bail!("clickhouse-server refused the hello: {}", r.exception()?),
            p => bail!("clickhouse-server answered the hello with packet {p}"),
        }
        out.clear();
        varint(&mut out, QUERY);
        string(&mut out, ""); // query id
        string(&mut out, ""); // settings: none (an empty name ends them)
        varint(&mut out, COMPLETE);
        varint(&mut out, 0); // no compression
        string(&mut out, sql);
        empty_block(&mut out);
        (&s).write_all(&out)?;
        let mut first = None;
        loop {
            match r.varint()? {
                S_DATA | S_TOTALS | S_EXTREMES => {
                    if let Some(v) = r.block()? {
                        first.get_or_insert(v);
                    }
                }
                S_PROGRESS => {
                    let _ = (r.varint()?, r.varint()?, r.varint()?);
                }
                S_PROFILE => {
                    let _ = (r.varint()?, r.varint()?, r.varint()?, r.bytes::<1>()?, r.varint()?, r.bytes::<1>()?);
                }
                S_EXCEPTION => bail!("clickhouse-server: {}", r.exception()?),
                S_END => break,
                p => bail!("unexpected packet {p} from clickhouse-server"),
            }
        }
        drop(r);
        Ok((s, first))
    }
}
