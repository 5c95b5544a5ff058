//! Figures drawn with plotters from the newest runs, as SVG and PNG.
//!
//! Text in PNGs uses DejaVu Sans embedded in the binary (the `dejavu`
//! crate), so figures render the same on a machine without system fonts.

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::Once;

// Okabe–Ito's eight colour-blind-safe colours plus a brown, a purple, an olive
// and a wine, so every transport stack (the raw-TCP floor among them) and
// every codec gets its own; the test below fails when a registry outgrows it.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
    RGBColor(140, 86, 45),
    RGBColor(117, 112, 179),
    RGBColor(153, 153, 51),
    RGBColor(136, 34, 85),
];

pub fn register_font() -> Result<()> {
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

/// The extent of `lines`: `(x_min, x_max, y_min, y_max)`; the maxima are
/// at least 1 and the minima `INFINITY` when there is no point, so callers
/// clamp the minima to their axis floor.
pub fn extent(lines: &[Line]) -> (f64, f64, f64, f64) {
    lines.iter().flat_map(|l| l.points.iter()).fold((f64::INFINITY, 1.0, f64::INFINITY, 1.0), |(x0, x1, y0, y1), p| {
        (x0.min(p.0), x1.max(p.0), y0.min(p.1), y1.max(p.1))
    })
}

/// Floor of the heap figure's log axis: zero is drawn here and labelled "0 B".
pub(crate) const FLOOR: f64 = 1.0;

/// What differs between the line charts: axes, their scales and labels.
pub struct Chart<'a> {
    pub title: String,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub x_log: bool,
    pub x_range: (f64, f64),
    /// Log scale from `y_range.0`, values below drawn on that floor (heap
    /// charts start it at `FLOOR` and label it 0).
    pub y_log_floor: bool,
    pub y_range: (f64, f64),
    pub x_fmt: &'a dyn Fn(&f64) -> String,
    pub y_fmt: &'a dyn Fn(&f64) -> String,
    /// Names written at the top of the plot above these x values (the
    /// query each column of points belongs to); empty for most charts.
    pub x_marks: &'a [(f64, String)],
}

/// A drawn point where it landed in the backend's pixels, with the exact
/// values it stands for: the SVG keeps it as a hover target.
struct Hit {
    x: i32,
    y: i32,
    text: String,
}

fn draw_lines<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    lines: &[Line],
    c: &Chart<'_>,
    scale: f64,
) -> Result<Vec<Hit>>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e:?}");
    area.fill(&WHITE).map_err(err)?;
    let px = |v: f64| (v * scale) as u32;
    // The legend in a column of its own, right of the plot: inside the plot
    // it covered the lines' right ends, where the largest sizes, clients or
    // depths are (issue 31). Sized to the longest label, at ≈ 7.5 px a
    // character of the 13 px font.
    let longest = lines.iter().map(|l| l.label.chars().count()).max().unwrap_or(0) as f64;
    let legend_w = px((40.0 + 7.5 * longest).clamp(100.0, 360.0));
    let (plot, legend) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(legend_w));
    let mut builder = ChartBuilder::on(&plot);
    let title = marked_title(&c.title);
    builder
        .caption(&title, ("sans-serif", px(20.0)))
        .margin(px(12.0))
        .margin_right(px(16.0))
        .x_label_area_size(px(45.0))
        .y_label_area_size(px(80.0));
    let (x0, x1) = c.x_range;
    let (y0, y1) = c.y_range;
    let mut hits = Vec::new();
    // NOTE: plotters types a chart by its coordinate kinds, so each axis combination is its own arm.
    macro_rules! body {
        ($chart:expr, $map:expr) => {{
            let mut chart = $chart.map_err(err)?;
            chart
                .configure_mesh()
                // NOTE: a log axis over 2 decades gets crowded labels at plotters' default count.
                .x_labels(if c.x_log { 5 } else { 10 })
                .x_desc(c.x_desc)
                .y_desc(c.y_desc)
                .label_style(("sans-serif", px(13.0)))
                .axis_desc_style(("sans-serif", px(14.0)))
                .x_label_formatter(c.x_fmt)
                .y_label_formatter(c.y_fmt)
                .draw()
                .map_err(err)?;
            // Each mark's name near the top, above the points it names.
            let top = if c.y_log_floor { y1 / 1.4 } else { y1 * 0.97 };
            let mark_style = ("sans-serif", px(13.0)).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
            for (x, label) in c.x_marks {
                chart
                    .draw_series(std::iter::once(Text::new(label.clone(), $map(&(*x, top)), mark_style.clone())))
                    .map_err(err)?;
            }
            for (i, line) in lines.iter().enumerate() {
                let color = PALETTE[i % PALETTE.len()];
                chart
                    .draw_series(LineSeries::new(line.points.iter().map($map), color.stroke_width(px(2.0))))
                    .map_err(err)?;
                // The exact values, not the axis's rounding: a reader checks a
                // point against the table (and the report's browser test does).
                for p in &line.points {
                    let (x, y) = chart.backend_coord(&$map(p));
                    let text = format!("{}: {} = {}, {} = {}", line.label, c.x_desc, p.0, c.y_desc, p.1);
                    hits.push(Hit { x, y, text });
                }
            }
        }};
    }
    match (c.x_log, c.y_log_floor) {
        (false, true) => {
            body!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale()), |&(x, y): &(f64, f64)| (x, y.max(y0)))
        }
        (true, false) => body!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1), |&p: &(f64, f64)| p),
        (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1), |&p: &(f64, f64)| p),
        (true, true) => {
            body!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale()), |&(x, y): &(f64, f64)| (
                x,
                y.max(y0)
            ))
        }
    }
    // One row per line, from the top of the plot (below the caption).
    let (row, top) = (px(20.0) as i32, px(48.0) as i32);
    for (i, line) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let y = top + i as i32 * row;
        legend.draw(&PathElement::new(vec![(0, y), (px(22.0) as i32, y)], color.stroke_width(px(2.0)))).map_err(err)?;
        let style = ("sans-serif", px(13.0)).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        legend.draw(&Text::new(line.label.clone(), (px(28.0) as i32, y), style)).map_err(err)?;
    }
    Ok(hits)
}

/// An SVG drawn in memory with one invisible circle per point added,
/// titled with its exact values: a browser shows the title on hover (no
/// script needed), and the report's script shows it beside the pointer.
/// The file is written once, whole.
fn svg_with_hovers(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<Vec<Hit>>,
) -> Result<()> {
    let mut text = String::new();
    let hits = {
        let area = SVGBackend::with_string(&mut text, size).into_drawing_area();
        let hits = draw(area.clone())?;
        // NOTE: presented once, from the root: each split half presenting
        // itself wrote the document's closing tag twice.
        area.present().map_err(|e| anyhow!("drawing {}: {e:?}", path.display()))?;
        hits
    };
    let Some(end) = text.rfind("</svg>") else { bail!("{} has no closing </svg>", path.display()) };
    let mut out = String::with_capacity(text.len() + hits.len() * 120);
    out.push_str(&text[..end]);
    out.push_str("<g class=\"points\">\n");
    for h in hits {
        out.push_str(&format!(
            "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"#000\" fill-opacity=\"0\"><title>{}</title></circle>\n",
            h.x,
            h.y,
            xml_escape(&h.text)
        ));
    }
    out.push_str("</g>\n");
    out.push_str(&text[end..]);
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

use crate::fmt::si_bytes;
pub use crate::fmt::xml_escape;

thread_local! {
    /// What every chart drawn inside [`marked`] adds to its title.
    static MARK: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// `title`, followed by the mark of the [`marked`] call it is drawn in.
fn marked_title(title: &str) -> String {
    MARK.with(|m| match &*m.borrow() {
        Some(mark) => format!("{title} — {mark}"),
        None => title.to_string(),
    })
}

/// Runs `draw` with every chart's title followed by `mark` (a stale
/// dataset's figures say so in their titles, whatever report draws them).
pub(crate) fn marked<R>(mark: Option<&str>, draw: impl FnOnce() -> R) -> R {
    MARK.with(|m| *m.borrow_mut() = mark.map(String::from));
    let out = draw();
    MARK.with(|m| *m.borrow_mut() = None);
    out
}

/// Draws `name.svg` (1100×560: the plot and the legend's column) and
/// `name.png` (twice the size) in `dir`.
pub(crate) fn write_both(dir: &Path, name: &str, lines: &[Line], chart: &Chart<'_>) -> Result<Vec<PathBuf>> {
    let svg = write_svg(dir, name, lines, chart)?;
    let png = dir.join(format!("{name}.png"));
    {
        let area = BitMapBackend::new(&png, (2200, 1120)).into_drawing_area();
        draw_lines(area.clone(), lines, chart, 2.0)?;
        area.present().map_err(|e| anyhow!("drawing {}: {e:?}", png.display()))?;
    }
    Ok(vec![svg, png, dir.join(format!("{name}.csv"))])
}

/// Draws `name.svg` alone (1100×560), with its hover targets: for pages
/// that show it and nothing that prints it (the report's histories). Its
/// points go to `name.csv` beside it ([`write_csv`]).
pub fn write_svg(dir: &Path, name: &str, lines: &[Line], chart: &Chart<'_>) -> Result<PathBuf> {
    let svg = dir.join(format!("{name}.svg"));
    svg_with_hovers(&svg, (1100, 560), |area| draw_lines(area, lines, chart, 1.0))?;
    write_csv(dir, name, &[(lines, chart)])?;
    Ok(svg)
}

/// Writes the points a figure draws to `name.csv` beside it, one row a
/// point, exact (not the axis's rounding): its line, then x and y, the
/// header naming the axes (`line,payload bytes,allocations`). A figure of
/// two panels leads each row with its panel's title and heads x and y
/// plainly. So what a figure shows opens in any spreadsheet or data frame,
/// as memray's CSV does.
pub(crate) fn write_csv(dir: &Path, name: &str, panels: &[(&[Line], &Chart<'_>)]) -> Result<PathBuf> {
    let path = dir.join(format!("{name}.csv"));
    let mut out = match panels {
        [(_, c)] => units::csv_row(["line", c.x_desc, c.y_desc]),
        _ => units::csv_row(["panel", "line", "x", "y"]),
    };
    for (lines, c) in panels {
        for l in lines.iter() {
            for p in &l.points {
                let (x, y) = (p.0.to_string(), p.1.to_string());
                out += &match panels.len() {
                    1 => units::csv_row([l.label.as_str(), &x, &y]),
                    _ => units::csv_row([c.title.as_str(), &l.label, &x, &y]),
                };
            }
        }
    }
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// One bar of a stacked bar chart: its label and its parts' values, in the
/// order stacked (from the axis outwards).
pub struct Stack {
    pub label: String,
    pub parts: Vec<(String, f64)>,
}

fn draw_stacked<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    bars: &[Stack],
    title: &str,
    x_desc: &str,
    scale: f64,
) -> Result<Vec<Hit>>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e:?}");
    area.fill(&WHITE).map_err(err)?;
    let px = |v: f64| (v * scale) as u32;
    let top = bars.iter().map(|b| b.parts.iter().map(|p| p.1).sum::<f64>()).fold(1.0, f64::max);
    let title = marked_title(title);
    let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
    let y_fmt = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i).map_or(String::new(), |l| l.to_string()),
        _ => String::new(),
    };
    // The legend in a column of its own, as the line charts have it.
    let (plot, legend) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(px(190.0)));
    // n segments for n bars (an integer range is inclusive); one bar still
    // gets a range that is not empty.
    let last = bars.len().saturating_sub(1).max(1);
    let mut chart = ChartBuilder::on(&plot)
        .caption(&title, ("sans-serif", px(20.0)))
        .margin(px(12.0))
        .margin_right(px(24.0))
        .x_label_area_size(px(45.0))
        .y_label_area_size(px(130.0))
        .build_cartesian_2d(0f64..top * 1.05, (0..last).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(x_desc)
        .label_style(("sans-serif", px(13.0)))
        .axis_desc_style(("sans-serif", px(14.0)))
        .x_label_formatter(&|v| si_bytes(*v))
        .y_label_formatter(&y_fmt)
        .y_labels(bars.len())
        .draw()
        .map_err(err)?;
    let parts: Vec<&str> = bars.first().map_or(Vec::new(), |b| b.parts.iter().map(|p| p.0.as_str()).collect());
    let mut hits = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let mut rects = Vec::new();
        for (i, b) in bars.iter().enumerate() {
            let from: f64 = b.parts.iter().take(k).map(|p| p.1).sum();
            let v = b.parts.get(k).map_or(0.0, |p| p.1);
            let y1 = if i >= last { SegmentValue::Last } else { SegmentValue::Exact(i + 1) };
            let y0 = SegmentValue::Exact(i);
            rects.push(Rectangle::new([(from, y0), (from + v, y1)], color.filled()));
            let (x, y) = chart.backend_coord(&(from + v / 2.0, SegmentValue::CenterOf(i)));
            hits.push(Hit { x, y, text: format!("{}: {part} = {} B", b.label, v) });
        }
        chart.draw_series(rects).map_err(err)?;
        let (row, top) = (px(20.0) as i32, px(48.0) as i32);
        let y = top + k as i32 * row;
        let half = px(6.0) as i32;
        legend.draw(&Rectangle::new([(0, y - half), (px(14.0) as i32, y + half)], color.filled())).map_err(err)?;
        let style = ("sans-serif", px(13.0)).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        legend.draw(&Text::new(part.to_string(), (px(22.0) as i32, y), style)).map_err(err)?;
    }
    Ok(hits)
}

/// Draws `name.svg` (1100×560, each part's exact value a hover target) and
/// `name.png` (twice the size): one horizontal bar a stack, its parts
/// stacked in the palette's colours; the values go to `name.csv` beside
/// them (bar, part, value).
pub(crate) fn write_stacked(dir: &Path, name: &str, title: &str, x_desc: &str, bars: &[Stack]) -> Result<Vec<PathBuf>> {
    register_font()?;
    let svg = dir.join(format!("{name}.svg"));
    svg_with_hovers(&svg, (1100, 560), |area| draw_stacked(area, bars, title, x_desc, 1.0))?;
    let png = dir.join(format!("{name}.png"));
    {
        let area = BitMapBackend::new(&png, (2200, 1120)).into_drawing_area();
        draw_stacked(area.clone(), bars, title, x_desc, 2.0)?;
        area.present().map_err(|e| anyhow!("drawing {}: {e:?}", png.display()))?;
    }
    let csv = dir.join(format!("{name}.csv"));
    let mut out = units::csv_row(["bar", "part", x_desc]);
    for b in bars {
        for (part, v) in &b.parts {
            out += &units::csv_row([b.label.as_str(), part, &v.to_string()]);
        }
    }
    std::fs::write(&csv, out).with_context(|| format!("writing {}", csv.display()))?;
    Ok(vec![svg, png, csv])
}

/// Draws two charts side by side into `name.svg` (1800×560) and `name.png`.
pub(crate) fn write_pair(
    dir: &Path,
    name: &str,
    left: (&[Line], &Chart<'_>),
    right: (&[Line], &Chart<'_>),
) -> Result<Vec<PathBuf>> {
    let svg = dir.join(format!("{name}.svg"));
    svg_with_hovers(&svg, (1800, 560), |root| {
        let (l, r) = root.split_horizontally(900);
        let mut hits = draw_lines(l, left.0, left.1, 1.0)?;
        hits.extend(draw_lines(r, right.0, right.1, 1.0)?);
        Ok(hits)
    })?;
    let png = dir.join(format!("{name}.png"));
    {
        let root = BitMapBackend::new(&png, (3600, 1120)).into_drawing_area();
        let (l, r) = root.split_horizontally(1800);
        draw_lines(l, left.0, left.1, 2.0)?;
        draw_lines(r, right.0, right.1, 2.0)?;
        root.present().map_err(|e| anyhow!("drawing {}: {e:?}", png.display()))?;
    }
    let csv = write_csv(dir, name, &[left, right])?;
    Ok(vec![svg, png, csv])
}

#[cfg(test)]
mod tests {
    use super::PALETTE;

    #[test]
    fn every_registered_line_gets_its_own_colour() {
        // The eleventh transport once drew the floor and JSON-RPC in one blue.
        let most = registry::Transport::ALL.len().max(registry::Codec::ALL.len());
        assert!(most <= PALETTE.len(), "{most} lines share a figure but the palette has {} colours", PALETTE.len());
        for (i, a) in PALETTE.iter().enumerate() {
            assert!(!PALETTE[..i].contains(a), "colour {i} repeats");
        }
    }
}
