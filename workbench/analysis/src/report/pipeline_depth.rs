//! pipeline-depth: dependent chains through the delay proxy, pipelined
//! against request-response. Table: per added round-trip delay and depth,
//! the median time of each mode, the speedup, the ideal speedup for the
//! server's measured cost per step, and the flights each took.
//! Figure: chain time against depth (log–log), one line per mode × delay.

use super::{median, ratio_range, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{col, dash, row, source_of, Table, TableCell};
use anyhow::Result;
use records::server::pipeline_depth::{Chain, Record};
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::PipelineDepth, table, Some(figure));

/// The two ways a chain is sent, as the table and legend name them.
const MODES: [(Mode, &str); 2] = [(Mode::Pipelined, "pipelined"), (Mode::RequestResponse, "request-response")];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pipelined,
    RequestResponse,
}

/// A run's chains and ratios.
struct Data {
    chains: Vec<(Mode, Chain)>,
    /// `(rtt_us, depth, speedup)` of each repetition.
    ratios: Vec<(u64, u64, f64)>,
    /// Every delay and depth measured, ascending.
    rtts: Vec<u64>,
    depths: Vec<u64>,
}

impl Data {
    fn of(run: &Run) -> Result<Data> {
        let mut d = Data { chains: Vec::new(), ratios: Vec::new(), rtts: Vec::new(), depths: Vec::new() };
        for r in run.each::<Record>() {
            match r?.record {
                Record::Pipelined(c) => d.chains.push((Mode::Pipelined, c)),
                Record::RequestResponse(c) => d.chains.push((Mode::RequestResponse, c)),
                Record::Ratio(x) => d.ratios.push((x.rtt_us, x.depth, x.speedup)),
            }
        }
        d.rtts = d.chains.iter().map(|c| c.1.rtt_us).chain(d.ratios.iter().map(|r| r.0)).collect();
        d.depths = d.chains.iter().map(|c| c.1.depth).chain(d.ratios.iter().map(|r| r.1)).collect();
        for v in [&mut d.rtts, &mut d.depths] {
            v.sort_unstable();
            v.dedup();
        }
        Ok(d)
    }

    /// A field of the chains of one mode at one delay and depth.
    fn chains(&self, mode: Mode, rtt: u64, depth: u64, f: fn(&Chain) -> f64) -> Vec<f64> {
        self.chains
            .iter()
            .filter(|(m, c)| *m == mode && c.rtt_us == rtt && c.depth == depth)
            .map(|(_, c)| f(c))
            .collect()
    }

    fn speedups(&self, rtt: u64, depth: u64) -> Vec<f64> {
        self.ratios.iter().filter(|r| r.0 == rtt && r.1 == depth).map(|r| r.2).collect()
    }
}

fn rtt_label(us: u64) -> String {
    if us == 0 {
        "no added delay".into()
    } else {
        format!("{} ms RTT added", fmt::sig3(us as f64 / 1e3))
    }
}

fn table(run: &Run) -> Result<Table> {
    let mut rows = Vec::new();
    let data = Data::of(run)?;
    for &rtt in &data.rtts {
        let depths = &data.depths;
        let ideal = Ideal::of(&data, rtt, depths);
        for &depth in depths {
            let p = median(&data.chains(Mode::Pipelined, rtt, depth, |c| c.ms));
            let r = median(&data.chains(Mode::RequestResponse, rtt, depth, |c| c.ms));
            let speedups = data.speedups(rtt, depth);
            let speedup = median(&speedups);
            let flights = |mode| -> Result<String> {
                Ok(median(&data.chains(mode, rtt, depth, |c| c.flights as f64)).map_or_else(dash, fmt::count))
            };
            let mut row = row![
                p.map_or_else(dash, fmt::sig3),
                r.map_or_else(dash, fmt::sig3),
                ratio_range(&speedups),
                ideal.map_or_else(dash, |i| format!("{}×", fmt::sig3(i.speedup(depth)))),
                match (speedup, ideal) {
                    (Some(s), Some(i)) => format!("{} %", fmt::sig3(100.0 * s / i.speedup(depth))),
                    _ => dash(),
                },
                format!("{} / {}", flights(Mode::Pipelined)?, flights(Mode::RequestResponse)?),
            ];
            // Found by the added delay in µs and the depth.
            row.splice(0..0, [TableCell::keyed(rtt_label(rtt), rtt), TableCell::keyed(depth.to_string(), depth)]);
            rows.push(row);
        }
    }
    let runs = run.manifest.spec.scale(run.manifest.scale).params.get("runs").cloned();
    Ok(Table {
        name: REPORT.name,
        caption: format!(
            "Dependent chains (each call takes the previous answer as its argument), pipelined and \
             request-response, through a delay proxy: medians of {} interleaved runs per cell in each of {} \
             repetition(s), the speedup and what pipelining could give at most.",
            runs.map_or_else(|| "the".into(), |r| r.to_string()),
            run.manifest.spec.scale(run.manifest.scale).repetitions,
        ),
        method: format!(
            "The proxy holds every byte for half the added round-trip time each way; the server runs in its own \
             process, a fresh one each repetition. Pipelined runs first in even runs, request-response first in odd \
             ones. The speedup is request-response ÷ pipelined of one \
             repetition, shown as the median and range over the repetitions; flights \
             are client→server bursts the proxy saw. Ideal: the most pipelining can give when one step costs the \
             server s and one call costs R request-response, d·R ÷ (R + (d − 1)·s), with R the median \
             request-response time at depth 1 and s the slope of the pipelined time over depth, both from this \
             run at this delay{}; \"of ideal\" is the measured speedup ÷ that.",
            steps_text(&data)
        ),
        header: vec![
            col::DELAY,
            col::DEPTH,
            "Pipelined (ms)",
            "Request-response (ms)",
            col::SPEEDUP,
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
    fn of(data: &Data, rtt: u64, depths: &[u64]) -> Option<Ideal> {
        let at = |mode: Mode, d: u64| median(&data.chains(mode, rtt, d, |c| c.ms));
        let (Some(&lo), Some(&hi)) = (depths.first(), depths.last()) else { return None };
        if hi <= lo {
            return None;
        }
        match (at(Mode::RequestResponse, lo), at(Mode::Pipelined, lo), at(Mode::Pipelined, hi)) {
            (Some(r), Some(p_lo), Some(p_hi)) => {
                Some(Ideal { r_ms: r / lo as f64, s_ms: ((p_hi - p_lo) / (hi - lo) as f64).max(0.0) })
            }
            _ => None,
        }
    }

    fn speedup(self, depth: u64) -> f64 {
        let d = depth as f64;
        d * self.r_ms / (self.r_ms + (d - 1.0) * self.s_ms)
    }
}

/// "(s = … µs a step at no added delay, … at …)" for the caption.
fn steps_text(data: &Data) -> String {
    let depths = &data.depths;
    let mut parts = Vec::new();
    for &rtt in &data.rtts {
        if let Some(i) = Ideal::of(data, rtt, depths) {
            parts.push(format!("s = {} µs, R = {} ms {}", fmt::sig3(i.s_ms * 1e3), fmt::sig3(i.r_ms), rtt_label(rtt)));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let mut lines = Vec::new();
    let data = Data::of(run)?;
    for &rtt in &data.rtts {
        for (m, mode) in MODES {
            let mut points = Vec::new();
            for &depth in &data.depths {
                if let Some(m) = median(&data.chains(m, rtt, depth, |c| c.ms)) {
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
        x_marks: &[],
    };
    write_both(dir, REPORT.name, &lines, &chart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, server};
    use records::server::pipeline_depth::Ratio;

    #[test]
    fn speedup_and_ideal_from_the_runs_own_times() {
        let chain = |depth, ms| Chain { depth, rtt_us: 0, run: 0, ms, flights: depth };
        let s = || server("system", 0);
        let rows = vec![
            (s(), Record::Pipelined(chain(1, 1.0))),
            (s(), Record::RequestResponse(chain(1, 1.0))),
            (s(), Record::Pipelined(chain(4, 1.3))),
            (s(), Record::RequestResponse(chain(4, 4.0))),
            (s(), Record::Ratio(Ratio { depth: 4, rtt_us: 0, runs: 1, speedup: 4.0 / 1.3 })),
        ];
        let t = table(&run("pipeline-depth", None, &rows)).unwrap();
        let key = [rtt_label(0), "4".to_string()];
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        assert_eq!(cell(&t, &key, "Pipelined (ms)"), fmt::sig3(1.3));
        assert_eq!(cell(&t, &key, "Speedup"), format!("{:.2}×", 4.0 / 1.3));
        // R = 1 ms, s = 0.1 ms a step: 4 ÷ (1 + 3 × 0.1).
        assert_eq!(cell(&t, &key, "Ideal"), format!("{}×", fmt::sig3(4.0 / 1.3)));
        assert_eq!(cell(&t, &key, "Flights (pipelined / req-resp)"), "4 / 4");
    }
}
