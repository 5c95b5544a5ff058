//! growth-laws: each codec's cost per message as a law of its payload,
//! fitted over alloc-profile's payload sweep (exact counts, dhat build).
//!
//! - Allocations a message are a step function of the payload (a field
//!   allocates once it is not empty), so they are stated as steps, exactly:
//!   "9 at 0 B; 12 from 64 B to 64 KiB".
//! - Bytes a message are fitted as `a + b × payload` by least squares on the
//!   relative error (the sweep spans four orders of magnitude, so an
//!   unweighted fit would be the 64 KiB point's alone), and the largest
//!   relative error of the fit over the sweep is shown beside it.
//! - [`site_laws`]: the same law for every allocation site, from the cell
//!   traces at each payload (per operation of the cell: its encode, decode
//!   and round trip), for the report site.
//!
//! Whether the live heap stays flat is a question of many messages, not of
//! the payload: the heap-growth table answers it from the events build's
//! timelines ([`::trace::events::Events::growth`]).
//!
//! # Layout
//! - [`Law`], [`fit`], [`Steps`]: the two forms of a law.
//! - [`REPORT`]: the table (one line a codec, the paper's one-liners).
//! - [`site_laws`], [`SiteLaw`]: per site, from the traces.

use super::Report;
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::tables::{row, source_of, Table};
use ::trace::{self, Trace};
use anyhow::Result;
use records::subject::{AllocProfile, Phase};
use registry::{self, display_name};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const REPORT: Report =
    Report { name: "growth-laws", ..Report::of::<AllocProfile>(registry::Experiment::AllocProfile, laws, None) };

/// `y = a + b × x`, with the largest relative error over the points fitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Law {
    pub a: f64,
    pub b: f64,
    /// max |y − (a + b·x)| / max(|y|, 1) over the points.
    pub max_err: f64,
}

/// Least squares on the relative error (weights 1 / max(|y|, 1)²); one
/// point, or points at one x, give a flat law through their mean.
pub fn fit(points: &[(f64, f64)]) -> Option<Law> {
    if points.is_empty() {
        return None;
    }
    let w = |y: f64| 1.0 / y.abs().max(1.0).powi(2);
    let (mut s, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in points {
        let k = w(y);
        s += k;
        sx += k * x;
        sy += k * y;
        sxx += k * x * x;
        sxy += k * x * y;
    }
    let denom = s * sxx - sx * sx;
    let (a, b) = if denom.abs() > f64::EPSILON * s * sxx.max(1.0) {
        let b = (s * sxy - sx * sy) / denom;
        ((sy - b * sx) / s, b)
    } else {
        (sy / s, 0.0)
    };
    let max_err = points.iter().map(|&(x, y)| (y - (a + b * x)).abs() / y.abs().max(1.0)).fold(0.0, f64::max);
    Some(Law { a, b, max_err })
}

impl Law {
    /// `519 + 3.98 × payload` (bytes), `0` when both are nil.
    pub fn text(&self) -> String {
        let a = fmt::thousands(self.a.round().max(0.0) as u64);
        if self.b.abs() < 0.005 {
            return a;
        }
        let b = if self.b.abs() >= 10.0 { format!("{:.1}", self.b) } else { format!("{:.2}", self.b) };
        format!("{a} + {b} × payload")
    }
}

/// Allocations a message as steps over the payloads: `(count, first, last)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps(pub Vec<(f64, u64, u64)>);

impl Steps {
    /// Consecutive payloads with the same count (to 0.05) make one step.
    pub fn of(points: &[(u64, f64)]) -> Steps {
        let mut out: Vec<(f64, u64, u64)> = Vec::new();
        for &(p, n) in points {
            match out.last_mut() {
                Some(last) if (last.0 - n).abs() < 0.05 => last.2 = p,
                _ => out.push((n, p, p)),
            }
        }
        Steps(out)
    }

    pub fn text(&self) -> String {
        let n = |v: f64| fmt::count(v);
        match self.0.as_slice() {
            [] => "–".into(),
            [(v, _, _)] => n(*v),
            steps => steps
                .iter()
                .map(|&(v, a, b)| {
                    let (a, b) = (fmt::bytes(a as f64), fmt::bytes(b as f64));
                    if a == b {
                        format!("{} at {a}", n(v))
                    } else {
                        format!("{} from {a} to {b}", n(v))
                    }
                })
                .collect::<Vec<_>>()
                .join("; "),
        }
    }
}

/// One codec's law: encode + decode of one message, from the dhat build.
pub struct CodecLaw {
    pub codec: String,
    pub allocs: Steps,
    pub bytes: Law,
}

impl CodecLaw {
    /// The paper's one line: "JSON-RPC: 8 allocations a message at 0 B, …;
    /// bytes = 519 + 3.98 × payload".
    pub fn sentence(&self) -> String {
        format!(
            "{}: {} allocation(s) a message; bytes = {}",
            display_name(&self.codec),
            self.allocs.text(),
            self.bytes.text()
        )
    }
}

/// Every codec's law from a run's records (means over its messages).
pub fn codec_laws(run: &Run) -> Result<Vec<CodecLaw>> {
    let spec = &run.manifest.spec;
    // Per (codec, payload): allocations and bytes summed over encode and
    // decode, and messages seen in each phase.
    let mut sums: HashMap<(&str, u64), [f64; 4]> = HashMap::new();
    for r in run.each::<AllocProfile>() {
        let r = r?;
        if r.cell.variant != "dhat" || !matches!(r.record.phase, Phase::Encode | Phase::Decode) {
            continue;
        }
        let (Some(a), Some(b)) = (r.record.allocs, r.record.bytes) else { continue };
        let e = sums.entry((r.cell.codec.unwrap_or(""), r.cell.payload())).or_default();
        let i = if r.record.phase == Phase::Encode { 2 } else { 3 };
        e[0] += a as f64;
        e[1] += b as f64;
        e[i] += 1.0;
    }
    let mut out = Vec::new();
    for codec in &spec.codecs {
        let mut allocs = Vec::new();
        let mut bytes = Vec::new();
        for &p in &spec.payloads {
            let Some(s) = sums.get(&(codec.as_str(), p as u64)) else { continue };
            // Means per phase, added: a message is encoded once and decoded once.
            let messages = s[2].max(s[3]).max(1.0);
            allocs.push((p as u64, s[0] / messages));
            bytes.push((p as f64, s[1] / messages));
        }
        let Some(law) = fit(&bytes) else { continue };
        out.push(CodecLaw { codec: codec.clone(), allocs: Steps::of(&allocs), bytes: law });
    }
    Ok(out)
}

/// The table: one line a codec.
pub fn laws(run: &Run) -> Result<Table> {
    let spec = &run.manifest.spec;
    let mut rows = Vec::new();
    for l in codec_laws(run)? {
        rows.push(row![
            display_name(&l.codec),
            l.allocs.text(),
            l.bytes.text(),
            format!("{:.1} %", 100.0 * l.bytes.max_err),
        ]);
    }
    let payloads: Vec<String> = spec.payloads.iter().map(|&p| fmt::bytes(p as f64)).collect();
    Ok(Table {
        name: "growth-laws",
        caption: format!(
            "Each codec's cost of one message (encoded once, decoded once) as a law of its payload, from the \
             dhat build's exact counts at payloads {}.",
            payloads.join(", "),
        ),
        method: format!(
            "Allocations are steps (a field allocates once it is not \
             empty), stated exactly; bytes are fitted as a + b × payload by least squares on the relative error, \
             and the fit's largest relative error over the sweep is shown. Per-site laws are on the report site \
             (the alloc-profile dataset's page). Built with the {} profile.",
            run.manifest.profile
        ),
        header: vec!["Protocol", "Allocations a message", "Bytes a message", "Fit error (max)"],
        rows,
        source: source_of(run),
    })
}

/// One site's law: blocks and bytes per operation of the cell.
#[derive(Debug, Clone)]
pub struct SiteLaw {
    pub site: trace::Site,
    pub blocks: Law,
    pub bytes: Law,
}

/// A site at one payload: (payload, blocks per operation, bytes per operation).
type PerOp = (f64, f64, f64);

/// Per codec of the run, every site that allocates at least once in ten
/// operations at some payload, with its law over the payloads its dhat
/// traces (repetition 0) cover; largest per-byte cost first.
pub fn site_laws(run_dir: &Path, codecs: &[String], payloads: &[usize]) -> Result<Vec<(String, Vec<SiteLaw>)>> {
    let mut out = Vec::new();
    let traces = crate::data::traces::unpacked(run_dir)?;
    for codec in codecs {
        // Per site key: a site to name it, and its points.
        let mut points: BTreeMap<String, (trace::Site, Vec<PerOp>)> = BTreeMap::new();
        let mut covered = Vec::new();
        for &p in payloads {
            let cell = registry::CellId::subject(codec, p as u64, "dhat", 0);
            let path = traces.join(cell.trace_file("dhat.json"));
            if !path.is_file() {
                continue;
            }
            let t = Trace::load(&path)?;
            let Some(ops) = t.operations.filter(|&n| n > 0) else { continue };
            covered.push(p);
            for s in t.top(trace::By::Bytes, None) {
                let e = points.entry(s.key()).or_insert_with(|| (s.clone(), Vec::new()));
                e.1.push((p as f64, s.blocks as f64 / ops as f64, s.bytes as f64 / ops as f64));
            }
        }
        if covered.len() < 2 {
            continue;
        }
        let mut laws = Vec::new();
        for (_, (site, pts)) in points {
            if pts.iter().all(|x| x.1 < 0.1) {
                continue;
            }
            // A site absent at a payload allocated nothing there.
            let at = |f: fn(&PerOp) -> f64| -> Vec<(f64, f64)> {
                covered.iter().map(|&p| (p as f64, pts.iter().find(|x| x.0 == p as f64).map_or(0.0, f))).collect()
            };
            let (Some(blocks), Some(bytes)) = (fit(&at(|x| x.1)), fit(&at(|x| x.2))) else { continue };
            laws.push(SiteLaw { site, blocks, bytes });
        }
        laws.sort_by(|a, b| b.bytes.b.total_cmp(&a.bytes.b).then_with(|| b.bytes.a.total_cmp(&a.bytes.a)));
        out.push((codec.clone(), laws));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{cell, run, subject};

    #[test]
    fn a_linear_cost_is_found_exactly_and_a_bent_one_shows_its_error() {
        let pts: Vec<(f64, f64)> = [0.0, 64.0, 1024.0, 65536.0].iter().map(|&x| (x, 519.0 + 4.0 * x)).collect();
        let l = fit(&pts).unwrap();
        assert!((l.a - 519.0).abs() < 1e-6 && (l.b - 4.0).abs() < 1e-9 && l.max_err < 1e-9, "{l:?}");
        assert_eq!(l.text(), "519 + 4.00 × payload");
        // A cost that doubles its buffer: not a line, and the error says so.
        let bent = [(0.0, 64.0), (64.0, 128.0), (1024.0, 2048.0), (65536.0, 65536.0)];
        assert!(fit(&bent).unwrap().max_err > 0.2);
        assert_eq!(fit(&[(0.0, 0.0), (64.0, 0.0)]).unwrap().text(), "0");
        assert_eq!(fit(&[(64.0, 10.0)]).unwrap(), Law { a: 10.0, b: 0.0, max_err: 0.0 });
    }

    #[test]
    fn allocations_are_steps_and_the_table_has_one_line_a_codec() {
        let s = Steps::of(&[(0, 9.0), (64, 12.0), (1024, 12.0), (65536, 12.0)]);
        assert_eq!(s.0, vec![(9.0, 0, 0), (12.0, 64, 65536)]);
        assert_eq!(s.text(), format!("{} at 0 B; {} from 64 B to 64.0 KiB", fmt::count(9.0), fmt::count(12.0)));
        let rec = |phase, allocs, bytes| AllocProfile {
            msg: 0,
            phase,
            wire_bytes: 9,
            allocs: Some(allocs),
            bytes: Some(bytes),
            bytes_freed: None,
        };
        let mut rows = Vec::new();
        for p in [0u64, 64, 1024] {
            rows.push((subject("json-rpc", p, "dhat", 0), rec(Phase::Encode, 3, 200 + p)));
            rows.push((subject("json-rpc", p, "dhat", 0), rec(Phase::Decode, 5, 319 + p)));
            // The round trip is not a message's cost: it encodes and decodes again.
            rows.push((subject("json-rpc", p, "dhat", 0), rec(Phase::Roundtrip, 99, 9999)));
        }
        let mut r = run("alloc-profile", None, &rows);
        r.manifest.spec.codecs = vec!["json-rpc".into()];
        r.manifest.spec.payloads = vec![0, 64, 1024];
        let t = laws(&r).unwrap();
        let name = display_name("json-rpc");
        assert_eq!(t.rows.len(), 1);
        assert_eq!(cell(&t, &[&name], "Allocations a message"), fmt::count(8.0));
        assert_eq!(cell(&t, &[&name], "Bytes a message"), "519 + 2.00 × payload");
        let laws = codec_laws(&r).unwrap();
        assert_eq!(
            laws[0].sentence(),
            format!("{name}: {} allocation(s) a message; bytes = 519 + 2.00 × payload", fmt::count(8.0))
        );
    }
}
