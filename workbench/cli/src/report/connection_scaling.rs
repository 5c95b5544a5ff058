//! connection-scaling: server memory against idle connections (each sent
//! one trivial query and stays open). Table: per server and build, per step, RSS,
//! its growth from the first step, per connection, the live heap where
//! the build knows it, and the server's threads. Beside ours, Debian's
//! clickhouse-server when the run measured it, over HTTP and over its
//! native TCP protocol. Figure: RSS against
//! connections (log x; log y when ClickHouse is in it).

use super::{distinct_u64, median, values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use probe::registry;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<records::server::connection_scaling::Record>(registry::CONNECTION_SCALING, table, Some(figure));

/// The (server, build) pairs of the run, in the spec's build order.
fn series(run: &Run) -> Result<Vec<(String, String)>> {
    let servers = {
        let c = run.records.column("server")?;
        let mut v: Vec<String> = c.str()?.iter().flatten().map(str::to_string).collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    let mut out = Vec::new();
    for s in servers {
        for v in run.manifest.spec.variants_at(run.manifest.scale) {
            out.push((s.clone(), v.clone()));
        }
    }
    Ok(out)
}

fn server_name(server: &str, variant: &str) -> String {
    match server {
        "ours" => format!("datastore-server ({variant})"),
        "clickhouse" => "clickhouse-server (Debian; HTTP keep-alive)".into(),
        "clickhouse-native" => "clickhouse-server (Debian; native TCP)".into(),
        other => other.to_string(),
    }
}

/// The first text value of `col` among the clickhouse records of `kind`-less
/// steps or its peer record (`None` when absent).
fn clickhouse_text(run: &Run, filters: &[(&str, &str)], col: &str) -> Option<String> {
    let df = crate::report::tables::select(&run.records, filters, &[]).ok()?;
    let text = df.column(col).ok()?.str().ok()?.iter().flatten().next().map(str::to_string);
    text
}

/// What the caption says of the peer: its version and limits, where it
/// stopped, or why it did not run.
fn peer_note(run: &Run) -> String {
    let peer = [("server", "clickhouse"), ("kind", "peer")];
    if crate::report::tables::select(&run.records, &peer, &[]).map_or(true, |d| d.height() == 0) {
        return String::new();
    }
    if let Some(reason) = clickhouse_text(run, &peer, "reason") {
        return format!(" clickhouse-server was not measured: {reason}.");
    }
    let version = clickhouse_text(run, &peer, "version").unwrap_or_else(|| "?".into());
    // NOTE: the date is not in the package's metadata: the upstream changelog it
    // ships ends at 18.14.18 (2018-12-04), and 18.16 followed that month.
    let released = if version.starts_with("18.16") { ", released in December 2018" } else { "" };
    let query = clickhouse_text(run, &peer, "query").unwrap_or_else(|| "SELECT 1".into());
    let limit = values(run, &peer, &[], "server_open_files_limit").ok().and_then(|v| v.first().copied());
    let mut note = format!(
        " clickhouse-server {version} (Debian's package{released}; the throughput peer is a current release) ran \
         with a generated config on loopback (max_connections above the last step, keep-alive 3600 s, \
         open-files limit {}), each connection one HTTP keep-alive GET of {query}, read and held{}; measured in \
         the system build's cell.",
        limit.map_or_else(|| "?".into(), |l| fmt::thousands(l as u64)),
        match has_native(run) {
            true =>
                ", and on a fresh server the same over its native TCP protocol (hello, query, answer read to \
                     its end)",
            false => "; its native TCP protocol was not measured",
        }
    );
    for (server, how) in [("clickhouse", "Over HTTP it"), ("clickhouse-native", "Over TCP it")] {
        if let Some(err) = clickhouse_text(run, &[("server", server)], "error") {
            let at = values(run, &[("server", server)], &[], "reached")
                .ok()
                .and_then(|v| v.iter().copied().reduce(f64::max))
                .map_or_else(|| "?".into(), |r| fmt::thousands(r as u64));
            note += &format!(" {how} stopped at {at} connections: {err}.");
        }
    }
    note
}

/// Whether the run measured ClickHouse over its native protocol too.
fn has_native(run: &Run) -> bool {
    crate::report::tables::select(&run.records, &[("server", "clickhouse-native")], &[]).is_ok_and(|d| d.height() > 0)
}

/// Median over repetitions of `col` at `n` connections.
fn at(run: &Run, server: &str, variant: &str, n: u64, col: &str) -> Result<Option<f64>> {
    Ok(median(&values(run, &[("server", server), ("variant", variant)], &[("connections", n)], col)?))
}

fn table(run: &Run) -> Result<Table> {
    let steps = distinct_u64(run, "connections")?;
    let mut rows = Vec::new();
    for (server, variant) in series(run)? {
        let first = steps.first().copied().unwrap_or(0);
        let rss0 = at(run, &server, &variant, first, "rss_bytes")?;
        let live0 = at(run, &server, &variant, first, "live_heap_bytes")?;
        for &n in &steps {
            let Some(rss) = at(run, &server, &variant, n, "rss_bytes")? else { continue };
            let live = at(run, &server, &variant, n, "live_heap_bytes")?;
            let dn = n.saturating_sub(first) as f64;
            let per = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if dn > 0.0 => fmt::bytes((a - b) / dn),
                _ => dash(),
            };
            rows.push(row![
                server_name(&server, &variant),
                fmt::thousands(n),
                fmt::bytes(rss),
                rss0.map_or_else(dash, |r| fmt::bytes(rss - r)),
                per(Some(rss), rss0),
                live.map_or_else(dash, fmt::bytes),
                per(live, live0),
                at(run, &server, &variant, n, "server_threads")?.map_or_else(dash, fmt::count),
            ]);
        }
    }
    let reps = run.manifest.spec.scale(run.manifest.scale).repetitions;
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Server memory against idle connections: each connection {} and stays open; the load \
             driver is a separate process. RSS from /proc; live heap from the allocator (dhat: exact live bytes; \
             jemalloc: stats.allocated; the system build has none). Medians of {reps} run(s); per-connection \
             columns are the growth from the first step divided by the connections added.{}",
            match clickhouse_text(run, &[("server", "ours")], "query") {
                Some(q) => format!("sent {q} once (a one-row table; the same query on both servers) and read the row"),
                None => "made one ping".into(),
            },
            peer_note(run)
        ),
        header: vec![
            "Server (build)",
            "Connections",
            "RSS",
            "RSS growth",
            "RSS / connection",
            "Live heap",
            "Live / connection",
            "Threads",
        ],
        rows,
        source: source_of(run),
    })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let steps = distinct_u64(run, "connections")?;
    let mut lines = Vec::new();
    for (server, variant) in series(run)? {
        let mut points = Vec::new();
        for &n in &steps {
            if let Some(rss) = at(run, &server, &variant, n, "rss_bytes")? {
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
    };
    write_both(dir, REPORT.name, &lines, &chart)
}
