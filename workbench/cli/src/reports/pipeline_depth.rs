//! pipeline-depth: dependent chains through the delay proxy, pipelined
//! against request-response. Table: per added round-trip delay and depth,
//! the median time of each mode, the speedup and the flights each took.
//! Figure: chain time against depth (log–log), one line per mode × delay.

use super::{distinct_u64, median, values, Report};
use crate::dataset::Run;
use crate::figures::{extent, write_both, Chart, Line};
use crate::fmt;
use crate::tables::{dash, source_of, Table};
use anyhow::Result;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report { name: "pipeline-depth", dataset: "pipeline-depth", table, figure: Some(figure) };

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
        for depth in distinct_u64(run, "depth")? {
            let p = median(&ms("pipelined", rtt, depth, "ms")?);
            let r = median(&ms("request-response", rtt, depth, "ms")?);
            let speedup = median(&ms("ratio", rtt, depth, "speedup")?);
            let flights = |mode| -> Result<String> {
                Ok(median(&ms(mode, rtt, depth, "flights")?).map_or_else(dash, fmt::count))
            };
            rows.push(vec![
                rtt_label(rtt),
                depth.to_string(),
                p.map_or_else(dash, fmt::sig3),
                r.map_or_else(dash, fmt::sig3),
                speedup.map_or_else(dash, |s| format!("{}×", fmt::sig3(s))),
                format!("{} / {}", flights("pipelined")?, flights("request-response")?),
            ]);
        }
    }
    let runs = run.manifest.spec.scale(&run.manifest.scale).and_then(|s| s.params.get("runs").cloned());
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Dependent chains (each call takes the previous answer as its argument) through a delay proxy that \
             holds every byte for half the added round-trip time each way; server in its own process. Medians of \
             {} interleaved runs per cell; the speedup is request-response ÷ pipelined of the same run; flights \
             are client→server bursts the proxy saw.",
            runs.map_or_else(|| "the".into(), |r| r.to_string())
        ),
        header: vec![
            "Delay",
            "Depth",
            "Pipelined (ms)",
            "Request-response (ms)",
            "Speedup",
            "Flights (pipelined / req-resp)",
        ],
        rows,
        source: source_of(run),
    })
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
