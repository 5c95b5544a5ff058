//! connection-scaling: server memory against idle connections (each sent
//! one trivial query and stays open). Table: per server and build, per step, RSS,
//! its growth from the first step, per connection, the live heap where
//! the build knows it, and the server's threads. Beside ours, Debian's
//! clickhouse-server when the run measured it, over HTTP and over its
//! native TCP protocol. Figure: RSS against
//! connections (log x; log y when ClickHouse is in it).

use super::{median, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{col, dash, row, source_of, Table, TableCell};
use anyhow::Result;
use records::server::connection_scaling::{Failed, Peer, Record};
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::ConnectionScaling, table, Some(figure));

/// One server's memory at one step, whichever server measured it.
struct Step {
    server: String,
    variant: String,
    connections: u64,
    rss: Option<u64>,
    live: Option<u64>,
    threads: Option<u64>,
    /// Anonymous memory outside thread stacks (the brk heap and the rest).
    anon: Option<u64>,
    stacks: Option<u64>,
}

/// A run's records, by what they are.
struct Parts {
    steps: Vec<Step>,
    peers: Vec<Peer>,
    failed: Vec<Failed>,
    /// Every server named, sorted.
    servers: Vec<String>,
    /// Every step's connections (those a server could not reach too), ascending.
    connections: Vec<u64>,
    /// The query our server was sent (`None`: a ping, in older runs).
    our_query: Option<String>,
}

fn parts(run: &Run) -> Result<Parts> {
    let mut p = Parts {
        steps: Vec::new(),
        peers: Vec::new(),
        failed: Vec::new(),
        servers: Vec::new(),
        connections: Vec::new(),
        our_query: None,
    };
    for r in run.rows::<Record>()? {
        let variant = r.cell.variant.to_string();
        match r.record {
            Record::Peer(peer) => {
                p.servers.push(peer.server.clone());
                p.peers.push(peer);
            }
            Record::Failed(f) => {
                p.servers.push(f.server.clone());
                p.connections.push(f.connections);
                p.failed.push(f);
            }
            Record::Ours(o) => {
                p.our_query = p.our_query.or(o.query);
                p.servers.push(o.server.clone());
                p.connections.push(o.connections);
                p.steps.push(Step {
                    server: o.server,
                    variant,
                    connections: o.connections,
                    rss: o.rss_bytes,
                    live: o.live_heap_bytes,
                    threads: o.server_threads,
                    anon: o.anatomy.heap_bytes.zip(o.anatomy.anon_bytes).map(|(h, a)| h + a),
                    stacks: o.anatomy.stack_bytes,
                });
            }
            Record::Theirs(t) => {
                p.servers.push(t.server.clone());
                p.connections.push(t.connections);
                p.steps.push(Step {
                    server: t.server,
                    variant,
                    connections: t.connections,
                    rss: Some(t.rss_bytes),
                    live: None,
                    threads: t.server_threads,
                    anon: t.anatomy.heap_bytes.zip(t.anatomy.anon_bytes).map(|(h, a)| h + a),
                    stacks: t.anatomy.stack_bytes,
                });
            }
        }
    }
    p.servers.sort();
    p.servers.dedup();
    p.connections.sort_unstable();
    p.connections.dedup();
    Ok(p)
}

/// The (server, build) pairs of the run, in the spec's build order.
fn series(run: &Run, p: &Parts) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in &p.servers {
        for v in run.manifest.spec.variants_at(run.manifest.scale) {
            out.push((s.clone(), v.clone()));
        }
    }
    out
}

fn server_name(server: &str, variant: &str) -> String {
    match server {
        "ours" => format!("datastore-server ({variant})"),
        "clickhouse" => "clickhouse-server (Debian; HTTP keep-alive)".into(),
        "clickhouse-native" => "clickhouse-server (Debian; native TCP)".into(),
        other => other.to_string(),
    }
}

/// What the caption says of the peer: its version and limits, where it
/// stopped, or why it did not run.
fn peer_note(p: &Parts) -> String {
    let peers: Vec<&Peer> = p.peers.iter().filter(|x| x.server == "clickhouse").collect();
    if peers.is_empty() {
        return String::new();
    }
    let first = |f: fn(&Peer) -> Option<&String>| peers.iter().find_map(|x| f(x)).cloned();
    if let Some(reason) = first(|x| x.reason.as_ref()) {
        return format!(" clickhouse-server was not measured: {reason}.");
    }
    let version = first(|x| x.version.as_ref()).unwrap_or_else(|| "?".into());
    // NOTE: the date is not in the package's metadata: the upstream changelog it
    // ships ends at 18.14.18 (2018-12-04), and 18.16 followed that month.
    let released = if version.starts_with("18.16") { ", released in December 2018" } else { "" };
    let query = first(|x| x.query.as_ref()).unwrap_or_else(|| "SELECT 1".into());
    let limit = peers.iter().find_map(|x| x.server_open_files_limit);
    let native = p.servers.iter().any(|s| s == "clickhouse-native");
    let mut note = format!(
        " clickhouse-server {version} (Debian's package{released}; the throughput peer is a current release) ran \
         with a generated config on loopback (max_connections above the last step, keep-alive 3600 s, \
         open-files limit {}), each connection one HTTP keep-alive GET of {query}, read and held{}; measured in \
         the system build's cell.",
        limit.map_or_else(|| "?".into(), fmt::thousands),
        match native {
            true =>
                ", and on a fresh server the same over its native TCP protocol (hello, query, answer read to \
                     its end)",
            false => "; its native TCP protocol was not measured",
        }
    );
    for (server, how) in [("clickhouse", "Over HTTP it"), ("clickhouse-native", "Over TCP it")] {
        let failed: Vec<&Failed> = p.failed.iter().filter(|f| f.server == server).collect();
        if let Some(f) = failed.first() {
            let at = failed.iter().map(|f| f.reached).max().map_or_else(|| "?".into(), fmt::thousands);
            note += &format!(" {how} stopped at {at} connections: {}.", f.error);
        }
    }
    note
}

/// Median over repetitions of a step's value at `n` connections.
fn at(p: &Parts, server: &str, variant: &str, n: u64, f: fn(&Step) -> Option<u64>) -> Option<f64> {
    let v: Vec<f64> = p
        .steps
        .iter()
        .filter(|s| s.server == server && s.variant == variant && s.connections == n)
        .filter_map(|s| f(s).map(|x| x as f64))
        .collect();
    median(&v)
}

fn table(run: &Run) -> Result<Table> {
    let p = parts(run)?;
    let steps = &p.connections;
    let mut rows = Vec::new();
    for (server, variant) in series(run, &p) {
        let first = steps.first().copied().unwrap_or(0);
        let rss0 = at(&p, &server, &variant, first, |s| s.rss);
        let live0 = at(&p, &server, &variant, first, |s| s.live);
        let anon0 = at(&p, &server, &variant, first, |s| s.anon);
        let stacks0 = at(&p, &server, &variant, first, |s| s.stacks);
        for &n in steps {
            let Some(rss) = at(&p, &server, &variant, n, |s| s.rss) else { continue };
            let live = at(&p, &server, &variant, n, |s| s.live);
            let dn = n.saturating_sub(first) as f64;
            let per = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if dn > 0.0 => fmt::bytes((a - b) / dn),
                _ => dash(),
            };
            let mut row = row![
                fmt::bytes(rss),
                rss0.map_or_else(dash, |r| fmt::bytes(rss - r)),
                per(Some(rss), rss0),
                live.map_or_else(dash, fmt::bytes),
                per(live, live0),
                per(at(&p, &server, &variant, n, |s| s.anon), anon0),
                per(at(&p, &server, &variant, n, |s| s.stacks), stacks0),
                at(&p, &server, &variant, n, |s| s.threads).map_or_else(dash, fmt::count),
            ];
            // Found by the server and build as recorded (`ours/system`) and the count.
            let named = [
                TableCell::keyed(server_name(&server, &variant), format!("{server}/{variant}")),
                TableCell::keyed(fmt::thousands(n), n),
            ];
            row.splice(0..0, named);
            rows.push(row);
        }
    }
    let reps = run.manifest.spec.scale(run.manifest.scale).repetitions;
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Server memory against idle connections, each of which {} and stays open: RSS, live heap and their \
             growth per connection; medians of {reps} run(s).",
            match &p.our_query {
                Some(q) => format!("sent {q} once (a one-row table; the same query on both servers) and read the row"),
                None => "made one ping".into(),
            },
        ),
        method: format!(
            "The load driver is a separate process. RSS from /proc; live heap from the allocator (dhat: exact live \
             bytes; jemalloc: stats.allocated; the system build has none). Per-connection columns are the growth \
             from the first step divided by the connections added; anonymous (heap and other anonymous mappings) \
             and stacks split that growth by kind of mapping (/proc/<pid>/smaps).{}",
            peer_note(&p)
        ),
        header: vec![
            "Server (build)",
            "Connections",
            "RSS",
            "RSS growth",
            col::RSS_PER_CONNECTION,
            "Live heap",
            "Live / connection",
            col::ANON_PER_CONNECTION,
            col::STACKS_PER_CONNECTION,
            "Threads",
        ],
        rows,
        source: source_of(run),
    })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let p = parts(run)?;
    let steps = &p.connections;
    let mut lines = Vec::new();
    for (server, variant) in series(run, &p) {
        let mut points = Vec::new();
        for &n in steps {
            if let Some(rss) = at(&p, &server, &variant, n, |s| s.rss) {
                points.push((n as f64, rss));
            }
        }
        if !points.is_empty() {
            lines.push(Line { label: server_name(&server, &variant), points });
        }
    }
    let xmax = steps.last().copied().unwrap_or(10) as f64;
    let xmin = steps.first().copied().unwrap_or(1).max(1) as f64;
    let (_, _, ymin, ymax) = extent(&lines);
    // ClickHouse's thread per connection puts it orders of magnitude above
    // ours: a log axis keeps both readable.
    let log = lines.iter().any(|l| l.label.starts_with("clickhouse"));
    let chart = Chart {
        title: format!("Server RSS against idle connections ({})", run.manifest.run_id),
        x_desc: "open connections (log)",
        y_desc: if log { "server RSS (log)" } else { "server RSS" },
        x_log: true,
        x_range: (xmin * 0.8, xmax * 1.25),
        y_log_floor: log,
        y_range: if log { (ymin * 0.5, ymax * 2.0) } else { (0.0, ymax * 1.15) },
        x_fmt: &|v| fmt::count(v.round()),
        y_fmt: &|v| fmt::si_bytes(*v),
        x_marks: &[],
    };
    write_both(dir, REPORT.name, &lines, &chart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};
    use records::server::connection_scaling::{Ours, StepAnatomy, Theirs};

    fn ours(n: u64, rss: u64) -> Record {
        Record::Ours(Ours {
            server: "ours".into(),
            query: Some("SELECT x FROM one".into()),
            connections: n,
            server_connections: n,
            rss_bytes: Some(rss),
            peak_rss_bytes: Some(rss),
            live_heap_bytes: None,
            jemalloc_allocated: None,
            jemalloc_active: None,
            jemalloc_resident: None,
            server_threads: Some(3),
            server_open_files_limit: None,
            driver_open_files_limit: None,
            // Half the resident set anonymous, thread stacks fixed.
            anatomy: StepAnatomy {
                heap_bytes: Some(rss / 4),
                anon_bytes: Some(rss / 4),
                stack_bytes: Some(100_000),
                file_bytes: Some(rss / 2 - 100_000),
            },
        })
    }

    #[test]
    fn growth_per_connection_from_the_first_step() {
        let theirs = Theirs {
            server: "clickhouse".into(),
            connections: 10,
            rss_bytes: 1 << 30,
            peak_rss_bytes: 1 << 30,
            server_threads: Some(40),
            server_open_files_limit: None,
            driver_open_files_limit: None,
            anatomy: StepAnatomy::default(),
        };
        let rows = vec![
            (server("system", 0), ours(10, 1_000_000)),
            (server("system", 0), ours(110, 1_100_000)),
            (server("system", 0), Record::Theirs(theirs)),
        ];
        let t = table(&run("connection-scaling", None, &rows)).unwrap();
        let ours_row = ["datastore-server (system)", "110"];
        assert_eq!(cell(&t, &ours_row, "RSS growth"), fmt::bytes(100_000.0));
        assert_eq!(cell(&t, &ours_row, "RSS / connection"), fmt::bytes(1000.0));
        assert_eq!(cell(&t, &ours_row, "Anonymous / connection"), fmt::bytes(500.0));
        assert_eq!(cell(&t, &ours_row, "Stacks / connection"), fmt::bytes(0.0));
        assert_eq!(cell(&t, &["clickhouse-server (Debian; HTTP keep-alive)", "10"], "Threads"), "40");
        assert!(t.caption.contains("sent SELECT x FROM one once"), "{}", t.caption);
    }
}
