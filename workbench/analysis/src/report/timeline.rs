//! A heap timeline's chart (`workbench trace timeline --svg`, the report
//! site's timeline pages, the paper's server figure): drawn here, where the
//! figures are, from an events file read by [`::trace::events`].

use crate::report::figures::{self, Chart, Line};
use ::trace::events::{At, Events};
use std::path::Path;

/// Sites drawn by name in the timeline chart; the rest are one line.
const CHARTED: usize = 5;
/// Points a timeline chart draws at most (exact at each).
const POINTS: u64 = 1000;

/// Live bytes over operations: the whole heap, the [`CHARTED`] sites live
/// at the peak, and the rest, as an SVG with each point's exact value on hover.
pub fn write_timeline(e: &Events, out: &Path) -> anyhow::Result<()> {
    let (peak, _) = e.resolve(At::Peak);
    let (top, labels): (Vec<String>, Vec<String>) = e
        .live_at(peak)
        .into_iter()
        .take(CHARTED)
        .map(|x| (x.0, format!("[{}] {}", x.1.side.map_or("?", |s| s.name()), x.1.label())))
        .unzip();
    let t = e.timeline(&top, (e.operations() / POINTS).max(1));
    let x = |i: usize| t.ops[i] as f64 + 1.0;
    let mut lines = vec![
        Line {
            label: "whole heap, highest within operations".into(),
            points: t.high.iter().enumerate().map(|(i, v)| (x(i), *v as f64)).collect(),
        },
        Line {
            label: "whole heap".into(),
            points: t.total.iter().enumerate().map(|(i, v)| (x(i), v.0 as f64)).collect(),
        },
    ];
    let named: Vec<f64> = (0..t.ops.len()).map(|i| t.sites.iter().map(|(_, v)| v[i] as f64).sum()).collect();
    for ((_, v), label) in t.sites.iter().zip(&labels) {
        let label: String = label.chars().take(48).collect();
        lines.push(Line { label, points: v.iter().enumerate().map(|(i, &b)| (x(i), b as f64)).collect() });
    }
    lines.push(Line {
        label: "every other site".into(),
        points: t.total.iter().enumerate().map(|(i, v)| (x(i), v.0 as f64 - named[i])).collect(),
    });
    figures::register_font()?;
    let (_, x1, _, y1) = figures::extent(&lines);
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = out.file_name().map(|n| n.to_string_lossy().trim_end_matches(".svg").to_string()).unwrap_or_default();
    let chart = Chart {
        title: format!(
            "Live heap by site over operations: {}",
            e.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
        ),
        x_desc: "operation",
        y_desc: "live bytes",
        x_log: false,
        x_range: (0.0, x1),
        y_log_floor: false,
        y_range: (0.0, y1 * 1.05),
        x_fmt: &|v| crate::fmt::thousands(*v as u64),
        y_fmt: &|v| crate::fmt::bytes(*v),
        x_marks: &[],
    };
    figures::write_svg(dir, &name, &lines, &chart)?;
    Ok(())
}
