//! pipeline-depth: dependent chains through the delay proxy, pipelined
//! against request-response. Table: per added round-trip delay and depth,
//! the median time of each mode, the speedup, the ideal speedup for the
//! server's measured cost per step, and the flights each took.
//! Figure: chain time against depth (log–log), one line per mode × delay.

use super::{distinct_u64, median, ratio_range, values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{dash, row, source_of, Table};
use anyhow::Result;
use probe::registry;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<records::server::pipeline_depth::Record>(registry::PIPELINE_DEPTH, table, Some(figure));

const MODES: [&str; 2] = ["pipelined", "request-response"];

fn rtt_label(us: u64) -> String {
    if us == 0 {
        "no added delay".into()
    } else {
        format!("{} ms RTT added", fmt::sig3(us as f64 / 1e3))
    }
}

fn table(run: &Run) -> Result<Table> {
    let mut rows = Vec::new();
    let ms = |mode: &str, rtt: u64, depth: u64, col: &str| -> Result<Vec<f64>> {
        values(run, &[("mode", mode)], &[("rtt_us", rtt), ("depth", depth)], col)
    };
    for rtt in distinct_u64(run, "rtt_us")? {
        let depths = distinct_u64(run, "depth")?;
        let ideal = Ideal::of(run, rtt, &depths)?;
        for &depth in &depths {
            let p = median(&ms("pipelined", rtt, depth, "ms")?);
            let r = median(&ms("request-response", rtt, depth, "ms")?);
            let speedups = ms("ratio", rtt, depth, "speedup")?;
            let speedup = median(&speedups);
            let flights = |mode| -> Result<String> {
                Ok(median(&ms(mode, rtt, depth, "flights")?).map_or_else(dash, fmt::count))
            };
            rows.push(row![
                rtt_label(rtt),
                depth.to_string(),
                p.map_or_else(dash, fmt::sig3),
                r.map_or_else(dash, fmt::sig3),
                ratio_range(&speedups),
                ideal.map_or_else(dash, |i| format!("{}×", fmt::sig3(i.speedup(depth)))),
                match (speedup, ideal) {
                    (Some(s), Some(i)) => format!("{} %", fmt::sig3(100.0 * s / i.speedup(depth))),
                    _ => dash(),
                },
                format!("{} / {}", flights("pipelined")?, flights("request-response")?),
            ]);
        }
    }
    let runs = run.manifest.spec.scale(run.manifest.scale).params.get("runs").cloned();
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Dependent chains (each call takes the previous answer as its argument) through a delay proxy that \
             holds every byte for half the added round-trip time each way; server in its own process. Medians of \
             {} interleaved runs per cell (pipelined first in even runs, request-response first in odd ones) in \
             each of {} repetition(s), a fresh server each; the speedup is request-response ÷ pipelined of one \
             repetition, shown as the median and range over the repetitions; flights \
             are client→server bursts the proxy saw. Ideal: the most pipelining can give when one step costs the \
             server s and one call costs R request-response, d·R ÷ (R + (d − 1)·s), with R the median \
             request-response time at depth 1 and s the slope of the pipelined time over depth, both from this \
             run at this delay{}; \"of ideal\" is the measured speedup ÷ that.",
            runs.map_or_else(|| "the".into(), |r| r.to_string()),
            run.manifest.spec.scale(run.manifest.scale).repetitions,
            steps_text(run)?
        ),
        header: vec![
            "Delay",
            "Depth",
            "Pipelined (ms)",
            "Request-response (ms)",
            "Speedup",
            "Ideal",
            "of ideal",
            "Flights (pipelined / req-resp)",
        ],
        rows,
        source: source_of(run),
    })
}

/// The best speedup a chain can get from pipelining at one delay, from
/// this run: R = one request-response call, s = the server's cost per step.
#[derive(Clone, Copy)]
struct Ideal {
    r_ms: f64,
    s_ms: f64,
}

impl Ideal {
    fn of(run: &Run, rtt: u64, depths: &[u64]) -> Result<Option<Ideal>> {
        let at = |mode: &str, d: u64| -> Result<Option<f64>> {
            Ok(median(&values(run, &[("mode", mode)], &[("rtt_us", rtt), ("depth", d)], "ms")?))
        };
        let (Some(&lo), Some(&hi)) = (depths.first(), depths.last()) else { return Ok(None) };
        if hi <= lo {
            return Ok(None);
        }
        Ok(match (at("request-response", lo)?, at("pipelined", lo)?, at("pipelined", hi)?) {
            (Some(r), Some(p_lo), Some(p_hi)) => {
                Some(Ideal { r_ms: r / lo as f64, s_ms: ((p_hi - p_lo) / (hi - lo) as f64).max(0.0) })
            }
            _ => None,
        })
    }

    fn speedup(self, depth: u64) -> f64 {
        let d = depth as f64;
        d * self.r_ms / (self.r_ms + (d - 1.0) * self.s_ms)
    }
}

/// "(s = … µs a step at no added delay, … at …)" for the caption.
fn steps_text(run: &Run) -> Result<String> {
    let depths = distinct_u64(run, "depth")?;
    let mut parts = Vec::new();
    for rtt in distinct_u64(run, "rtt_us")? {
        if let Some(i) = Ideal::of(run, rtt, &depths)? {
            parts.push(format!("s = {} µs, R = {} ms {}", fmt::sig3(i.s_ms * 1e3), fmt::sig3(i.r_ms), rtt_label(rtt)));
        }
    }
    Ok(if parts.is_empty() { String::new() } else { format!(" ({})", parts.join("; ")) })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let mut lines = Vec::new();
    for rtt in distinct_u64(run, "rtt_us")? {
        for mode in MODES {
            let mut points = Vec::new();
            for depth in distinct_u64(run, "depth")? {
                if let Some(m) = median(&values(run, &[("mode", mode)], &[("rtt_us", rtt), ("depth", depth)], "ms")?) {
                    points.push((depth as f64, m));
                }
            }
            lines.push(Line { label: format!("{mode}, {}", rtt_label(rtt)), points });
        }
    }
    let (_, xmax, ymin, ymax) = extent(&lines);
    let ymin = ymin.max(1e-3);
    let chart = Chart {
        title: format!("Dependent chain time against depth ({})", run.manifest.run_id),
        x_desc: "chain depth (log)",
        y_desc: "median chain time, ms (log)",
        x_log: true,
        x_range: (0.8, xmax * 1.25),
        y_log_floor: true,
        y_range: (ymin * 0.8, ymax * 1.5),
        x_fmt: &|v| fmt::count(v.round()),
        y_fmt: &|v| fmt::sig3(*v),
    };
    write_both(dir, REPORT.name, &lines, &chart)
}
