//! Figures drawn with plotters from the newest runs, as SVG and PNG.
//!
//! Text in PNGs uses DejaVu Sans embedded in the binary (the `dejavu`
//! crate), so figures render the same on a machine without system fonts.

use crate::dataset::{self, Run};
use crate::tables::{display_name, select};
use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| anyhow!("the embedded DejaVu Sans font did not load"));
    });
    result
}

/// One line: legend label and (x, y) points.
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Cumulative bytes allocated against messages, one line per codec (and payload),
/// from the dhat build's samples of repetition 0.
pub fn heap_growth_lines(run: &Run) -> Result<Vec<Line>> {
    let spec = &run.manifest.spec;
    let mut lines = Vec::new();
    for codec in &spec.codecs {
        for &payload in &spec.payloads {
            let df = select(
                &run.records,
                &[("codec", codec), ("variant", "dhat"), ("kind", "sample")],
                &[("payload", payload as u64), ("rep", 0)],
            )?;
            if df.height() == 0 {
                continue;
            }
            let x = df.column("messages")?.cast(&polars::prelude::DataType::Float64)?;
            let y = df.column("cum_bytes")?.cast(&polars::prelude::DataType::Float64)?;
            let points: Vec<(f64, f64)> =
                x.f64()?.iter().zip(y.f64()?.iter()).filter_map(|(a, b)| Some((a?, b?))).collect();
            let mut label = display_name(codec);
            if spec.payloads.len() > 1 {
                label += &format!(" ({})", crate::fmt::bytes(payload as f64));
            }
            lines.push(Line { label, points });
        }
    }
    Ok(lines)
}

/// Floor of the log axis: zero is drawn here and labelled "0 B".
const FLOOR: f64 = 1.0;

fn draw_heap_growth<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    lines: &[Line],
    title: &str,
    scale: f64,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e:?}");
    area.fill(&WHITE).map_err(err)?;
    let xmax = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).fold(1.0, f64::max);
    let ymax = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(FLOOR * 10.0, f64::max) * 2.0;
    let px = |v: f64| (v * scale) as u32;
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", px(20.0)))
        .margin(px(12.0))
        .margin_right(px(30.0))
        .x_label_area_size(px(45.0))
        .y_label_area_size(px(80.0))
        .build_cartesian_2d(0f64..xmax, (FLOOR..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("round trips")
        .y_desc("cumulative bytes allocated (log)")
        .label_style(("sans-serif", px(13.0)))
        .axis_desc_style(("sans-serif", px(14.0)))
        .x_label_formatter(&|v| crate::fmt::count(v.round()))
        .y_label_formatter(&|v| {
            if *v <= FLOOR {
                "0 B".into()
            } else {
                crate::fmt::si_bytes(*v)
            }
        })
        .draw()
        .map_err(err)?;
    for (i, line) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let all_zero = line.points.iter().all(|p| p.1 <= 0.0);
        let label =
            if all_zero { format!("{}: 0 B (drawn on the axis floor)", line.label) } else { line.label.clone() };
        chart
            .draw_series(LineSeries::new(
                line.points.iter().map(|&(x, y)| (x, y.max(FLOOR))),
                color.stroke_width(px(2.0)),
            ))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", px(13.0)))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(())
}

/// Regenerates every figure from the newest runs at `scale`; the files written.
pub fn write_all(root: &Path, data: &Path, scale: &str) -> Result<Vec<PathBuf>> {
    register_font()?;
    let dir = root.join("figures");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    if let Some(run_dir) = dataset::latest_run(data, "heap-growth", scale)? {
        let run = dataset::load_run(&run_dir)?;
        let lines = heap_growth_lines(&run)?;
        let n = run.manifest.spec.scale(&run.manifest.scale).map_or(0, |s| s.messages);
        let title =
            format!("Heap growth over {} round trips (dhat build, {})", crate::fmt::thousands(n), run.manifest.run_id);
        let svg = dir.join("heap-growth.svg");
        draw_heap_growth(SVGBackend::new(&svg, (900, 560)).into_drawing_area(), &lines, &title, 1.0)?;
        let png = dir.join("heap-growth.png");
        draw_heap_growth(BitMapBackend::new(&png, (1800, 1120)).into_drawing_area(), &lines, &title, 2.0)?;
        written.extend([svg, png]);
    }
    Ok(written)
}
