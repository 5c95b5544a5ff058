//! Tables computed with polars from the newest run of each experiment,
//! written as LaTeX fragments (`paper/generated/*.tex`) and Markdown.
//! Nothing in them is typed by hand; rerunning on the same data gives the
//! same bytes.
//!
//! This module holds what every report shares: [`Table`] and its
//! rendering, row selection and summaries, cell formats. Each experiment's
//! own table is in its file under [`crate::report`], which also walks them
//! all ([`crate::report::compute_tables`], [`crate::report::write_tables`]).

use crate::data::dataset::Run;
use crate::fmt;
use anyhow::{Context, Result};
use polars::prelude::{BooleanChunked, ChunkCompareEq, ChunkFull, DataFrame, DataType, Series};

/// A computed table, rendered to LaTeX and Markdown for readers and to
/// JSON for programs (the notebooks read cells from it, never from the
/// rendered text).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Table {
    pub name: &'static str,
    /// What the table shows, in a sentence or two, then where its numbers
    /// come from (appended by [`crate::report::analyse`]). Plain text:
    /// `to_latex` escapes it, `to_markdown` shows it as is.
    pub caption: String,
    /// How it was measured: the paragraph the paper's section gives once
    /// (`\wbmethod{<name>}`, [`Table::method_latex`]) rather than in the
    /// caption; under the caption in Markdown and on the site, where a
    /// table is read alone. Plain text.
    pub method: String,
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<TableCell>>,
    pub source: String,
}

/// One cell of a table: its headline and, when it summarises several runs,
/// their range, rendered `headline [min, max]`. The paper's macros read
/// the headline from here ([`TableCell::text`]); nothing parses a rendered cell.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableCell {
    pub text: String,
    pub range: Option<(String, String)>,
    /// What a row is found by, in the cells that name it: the codec's or
    /// stack's registered name, the payload in bytes, the instruction set
    /// (the paper's macros read these, never the rendered label).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl TableCell {
    /// A headline with the range of the values it summarises.
    pub fn ranged(text: String, lo: String, hi: String) -> TableCell {
        TableCell { text, range: Some((lo, hi)), key: None }
    }

    /// `median [min, max]` of `values`, each shown by `show`: the median
    /// alone for one value, a dash for none.
    pub fn spread(values: &[f64], show: impl Fn(f64) -> String) -> TableCell {
        match stats_of(values) {
            Some((mid, lo, hi)) if values.len() > 1 => TableCell::ranged(show(mid), show(lo), show(hi)),
            Some((mid, _, _)) => TableCell::from(show(mid)),
            None => TableCell::from(dash()),
        }
    }

    /// A cell that names its row: shown as `text`, found by `key`.
    pub fn keyed(text: impl Into<String>, key: impl ToString) -> TableCell {
        TableCell { text: text.into(), range: None, key: Some(key.to_string()) }
    }
}

/// Column headers that the paper's macros read, defined once for the
/// tables that show them and the macros that name them.
pub mod col {
    pub const ALLOCS_ENC: &str = "Allocs (enc)";
    pub const ALLOCS_DEC: &str = "Allocs (dec)";
    pub const B_OP: &str = "B/op";
    pub const ALLOCS_RT: &str = "Allocs/RT";
    pub const B_RT: &str = "B/RT";
    pub const MESSAGES: &str = "Messages";
    pub const TOTAL_ALLOCATED: &str = "Total allocated";
    pub const STEADY: &str = "Steady alloc/M msgs";
    pub const PEAK_HEAP: &str = "Peak heap";
    pub const P50: &str = "p50";
    pub const P95: &str = "p95";
    pub const TIMES_FLOOR: &str = "× floor";
    pub const ABOVE_FLOOR: &str = "above floor (µs)";
    pub const ENCODE_NS: &str = "Encode ns/op";
    pub const DECODE_NS: &str = "Decode ns/op";
    pub const ENC_VS_ZAP: &str = "Enc vs ZAP";
    pub const DEC_VS_ZAP: &str = "Dec vs ZAP";
    pub const ENC_VS_MEMCPY: &str = "Enc vs memcpy";
    pub const DEC_VS_MEMCPY: &str = "Dec vs memcpy";
    pub const OURS_VS_CLICKHOUSE: &str = "Ours ÷ ClickHouse";
    pub const RSS_PER_CONNECTION: &str = "RSS / connection";
    /// build-stages-anatomy: the binary's text pages resident after the mix, and the resident set.
    pub const TEXT_PAGES: &str = "Text pages resident";
    pub const TEXT_SHARE: &str = "Of the text";
    pub const RSS: &str = "RSS";
    pub const SPEEDUP: &str = "Speedup";
    pub const DEPTH: &str = "Depth";
    pub const DELAY: &str = "Delay";
    pub const INTERVAL: &str = "Interval";
    pub const SAMPLING_ERROR: &str = "Sampling error";
    pub const FOUND_SMALL: &str = "Found < 64 KiB";
    pub const FOUND_MID: &str = "Found 64 KiB–1 MiB";
    pub const FOUND_LARGE: &str = "Found ≥ 1 MiB";
    pub const TOP_TEN: &str = "Top 10";
    pub const LARGEST_MISSED: &str = "Largest missed";
    pub const MODEL_FOUND: &str = "Model: found from";
    pub const ERROR_VS_DHAT: &str = "Error vs dhat";
    /// Sampling error of what is live at the peak (the last high-water dump).
    pub const PEAK_ERROR: &str = "At peak";
    /// The same against dhat's live bytes at its own (byte) peak.
    pub const PEAK_VS_DHAT: &str = "At peak vs dhat";
    pub const SAMPLING_VS_JEMALLOC: &str = "Sampling ÷ jemalloc";
    pub const A_A_JEMALLOC: &str = "A/A: jemalloc ÷ jemalloc";
    pub const CALL_PEAK: &str = "Peak";
    pub const CALL_BYTES: &str = "Bytes";
    pub const HELD_AFTER: &str = "Held after";
    pub const ANON_PER_CONNECTION: &str = "Anonymous / connection";
    pub const STACKS_PER_CONNECTION: &str = "Stacks / connection";
    pub const CHARGE_VS_PEAK: &str = "Tracker ÷ peak";
}

impl From<String> for TableCell {
    fn from(text: String) -> TableCell {
        TableCell { text, range: None, key: None }
    }
}

impl From<&str> for TableCell {
    fn from(text: &str) -> TableCell {
        TableCell::from(text.to_string())
    }
}

impl std::fmt::Display for TableCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.range {
            None => f.write_str(&self.text),
            Some((lo, hi)) => write!(f, "{} [{lo}, {hi}]", self.text),
        }
    }
}

/// A table row from cells, strings or both: `row![name, TableCell::ranged(…)]`.
macro_rules! row {
    ($($cell:expr),* $(,)?) => {
        vec![$($crate::report::tables::TableCell::from($cell)),*]
    };
}
pub(crate) use row;

/// Said in the caption of every table with a row marked `*`.
pub const IDIOMS: &str = "Rows marked * are the peer's documented fastest idiom: FlatBuffers with the byte fields as \
     fixed arrays in a struct; Cap'n Proto with a reused scratch-space builder and the no-allocation reader; prost \
     with bytes::Bytes fields decoded from a Bytes buffer (beside it, prost with one message reused both ways, \
     clear + merge); serde_json deserializing into borrowed \
     &str fields and writing hex through collect_str. Unmarked rows are written as the crates' users commonly write them.";

pub use registry::display_name;

fn eq_str(df: &DataFrame, col: &str, v: &str) -> Result<BooleanChunked> {
    Ok(df.column(col).with_context(|| format!("column `{col}`"))?.str()?.equal(v))
}

fn eq_u64(df: &DataFrame, col: &str, v: u64) -> Result<BooleanChunked> {
    let c = df.column(col).with_context(|| format!("column `{col}`"))?.cast(&DataType::UInt64)?;
    Ok(c.u64()?.equal(v))
}

/// Rows where every `(column, value)` matches; string columns by text, others as u64.
pub fn select(df: &DataFrame, text: &[(&str, &str)], nums: &[(&str, u64)]) -> Result<DataFrame> {
    let mut mask = BooleanChunked::full("m".into(), true, df.height());
    for (c, v) in text {
        mask = &mask & &eq_str(df, c, v)?;
    }
    for (c, v) in nums {
        mask = &mask & &eq_u64(df, c, *v)?;
    }
    Ok(df.filter(&mask)?)
}

/// Median, min and max of a column (nulls ignored); `None` when empty or absent.
pub fn stats(df: &DataFrame, col: &str) -> Result<Option<(f64, f64, f64)>> {
    summary(df, col, |s| s.median())
}

/// `(center, min, max)` of a column, `center` being the median or the mean.
pub(crate) fn summary(
    df: &DataFrame,
    col: &str,
    center: fn(&Series) -> Option<f64>,
) -> Result<Option<(f64, f64, f64)>> {
    let Ok(c) = df.column(col) else {
        return Ok(None);
    };
    let s = c.as_materialized_series().cast(&DataType::Float64)?;
    Ok(match (center(&s), s.min::<f64>()?, s.max::<f64>()?) {
        (Some(mid), Some(min), Some(max)) => Some((mid, min, max)),
        _ => None,
    })
}

/// `(mean, min, max)` of a column. Allocation tables headline the mean: the
/// records are every operation of a contiguous window, so the mean is the
/// true cost per operation, where a median hides periodic allocations (one
/// every 20 operations is 0.05 per operation, and a median of 0).
pub fn mean_stats(df: &DataFrame, col: &str) -> Result<Option<(f64, f64, f64)>> {
    if df.column(records::columns::REPEAT).is_err() {
        return summary(df, col, |s| s.mean());
    }
    // Records that stand for several identical ones weigh as many.
    let Some((_, min, max)) = summary(df, col, |s| s.mean())? else { return Ok(None) };
    let v = df.column(col)?.as_materialized_series().cast(&DataType::Float64)?;
    let (mut sum, mut n) = (0.0, 0.0);
    for (x, k) in v.f64()?.iter().zip(repeats(df)?) {
        if let Some(x) = x {
            sum += x * k as f64;
            n += k as f64;
        }
    }
    Ok((n > 0.0).then(|| (sum / n, min, max)))
}

/// How many identical records each row stands for
/// ([`records::subject::RoundTrip::repeat`]): its `repeat`, 1 where a frame
/// has none. Every sum and mean over such rows weighs by it.
pub fn repeats(df: &DataFrame) -> Result<Vec<u64>> {
    Ok(match df.column(records::columns::REPEAT) {
        Ok(c) => c.cast(&DataType::UInt64)?.u64()?.iter().map(|r| r.unwrap_or(1)).collect(),
        Err(_) => vec![1; df.height()],
    })
}

/// Growth per million messages between the first sample after the start
/// and the last sample (`(messages, value)` in order): the steady-state
/// rate, warm-up excluded.
pub fn steady_rate(samples: impl IntoIterator<Item = (u64, Option<u64>)>) -> Option<f64> {
    let pts: Vec<(f64, f64)> =
        samples.into_iter().filter_map(|(m, v)| Some((m as f64, v? as f64))).filter(|p| p.0 > 0.0).collect();
    match (pts.first(), pts.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) / (b.0 - a.0) * 1e6),
        _ => None,
    }
}

pub(crate) fn dash() -> String {
    "–".into()
}

pub(crate) fn dist(s: Option<(f64, f64, f64)>) -> TableCell {
    match s {
        Some((med, min, max)) if min == max => fmt::count(med).into(),
        Some((med, min, max)) => TableCell::ranged(fmt::count(med), fmt::count(min), fmt::count(max)),
        None => dash().into(),
    }
}

pub(crate) fn opt_bytes(v: Option<f64>) -> String {
    v.map_or_else(dash, fmt::bytes)
}

pub(crate) fn opt_count(v: Option<f64>) -> String {
    v.map_or_else(dash, fmt::count)
}

pub(crate) fn source_of(run: &Run) -> String {
    let m = &run.manifest;
    let rev = m.revisions(10);
    let state = if m.git_dirty { "dirty tree: see its dirty.diff" } else { "clean tree" };
    // The instruction set of every build, and why it is not the reference
    // build where this machine could not run it.
    let mut cpus: Vec<&str> = m.spec.variants_at(m.scale).iter().map(|v| m.target_cpu(v)).collect();
    cpus.dedup();
    let fallback = m.reference_fallback.as_ref().map_or_else(String::new, |why| format!("; {why}"));
    format!("data/{}/{} (revision {rev}, {state}; built for {}{fallback})", m.experiment, m.run_id, cpus.join(", "))
}

/// A caption's message count at a scale: `1,000`, or `1,000 (128 for 64 KiB
/// payloads)` when the scale's `payload_budget` thins some payloads' cells
/// ([`crate::spec::Settings::messages_for`]).
pub(crate) fn messages(s: &crate::spec::Settings, payloads: &[usize]) -> String {
    let thinned: Vec<String> = payloads
        .iter()
        .filter(|&&p| s.messages_for(p) < s.messages)
        .map(|&p| format!("{} for {} payloads", fmt::thousands(s.messages_for(p)), fmt::bytes(p as f64)))
        .collect();
    if thinned.is_empty() {
        fmt::thousands(s.messages)
    } else {
        format!("{} ({})", fmt::thousands(s.messages), thinned.join(", "))
    }
}

/// `(median, min, max)` of `v`; `None` when empty. The median is polars'
/// (linear interpolation between the middle two), so that a table computed
/// from typed records reads as it did from the frame.
pub fn stats_of(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let (lo, hi) = (*s.first()?, *s.last()?);
    let n = s.len();
    let mid = if n % 2 == 1 {
        s[n / 2]
    } else {
        let (a, b) = (s[n / 2 - 1], s[n / 2]);
        a + (b - a) * 0.5
    };
    Some((mid, lo, hi))
}

/// `(mean, min, max)` of `v` (see [`mean_stats`]); `None` when empty.
pub fn mean_stats_of(v: &[f64]) -> Option<(f64, f64, f64)> {
    let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    (!v.is_empty()).then(|| (v.iter().sum::<f64>() / v.len() as f64, lo, hi))
}

/// The mean of `v`; `None` when empty.
pub fn mean_of(v: &[f64]) -> Option<f64> {
    mean_stats_of(v).map(|s| s.0)
}

/// Count, sum, min and max of values pushed one at a time: a column's
/// summary without keeping the column (millions of rows).
#[derive(Debug, Clone, Copy, Default)]
pub struct Acc {
    n: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Acc {
    pub fn push(&mut self, v: Option<u64>) {
        self.push_n(v, 1);
    }

    /// `v`, `n` times (a record that stands for `n` identical ones:
    /// [`records::subject::RoundTrip::repeat`]).
    pub fn push_n(&mut self, v: Option<u64>, n: u64) {
        let Some(v) = v else { return };
        if n == 0 {
            return;
        }
        let v = v as f64;
        if self.n == 0 {
            (self.min, self.max) = (v, v);
        }
        self.n += n;
        self.sum += v * n as f64;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// `(mean, min, max)`; `None` when nothing was pushed.
    pub fn mean_stats(&self) -> Option<(f64, f64, f64)> {
        (self.n > 0).then(|| (self.sum / self.n as f64, self.min, self.max))
    }

    pub fn mean(&self) -> Option<f64> {
        self.mean_stats().map(|s| s.0)
    }
}

/// The values `f` gives for `rows` (those it has), as floats.
pub fn field<T>(rows: &[T], f: impl Fn(&T) -> Option<u64>) -> Vec<f64> {
    rows.iter().filter_map(|r| f(r).map(|x| x as f64)).collect()
}

/// Values of a float column, in row order (nulls dropped).
pub fn floats(df: &DataFrame, col: &str) -> Result<Vec<f64>> {
    let c = df.column(col).with_context(|| format!("column `{col}`"))?.cast(&DataType::Float64)?;
    Ok(c.f64()?.iter().flatten().collect())
}

/// Median of element-wise ratios `a[i] / b[i]` (rows paired by round and repetition).
pub(crate) fn median_ratio(a: &[f64], b: &[f64]) -> Result<Option<f64>> {
    let ratios: Vec<f64> = a.iter().zip(b).filter(|(_, d)| **d > 0.0).map(|(n, d)| n / d).collect();
    if ratios.is_empty() || a.len() != b.len() {
        return Ok(None);
    }
    Ok(stats_of(&ratios).map(|s| s.0))
}

pub(crate) fn ratio(v: Option<f64>) -> String {
    v.map_or_else(dash, |r| format!("{}×", fmt::sig3(r)))
}

pub fn tex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '–' => out.push_str("--"),
            '×' => out.push_str("$\\times$"),
            'µ' => out.push_str("$\\mu$"),
            '^' => out.push_str("\\^{}"),
            _ => out.push(c),
        }
    }
    out
}

impl Table {
    /// The table as JSON: name, caption, header, rows of `{text, range}` cells, source.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a table serialises") + "\n"
    }

    pub fn to_latex(&self) -> String {
        let mut s = format!("% Generated by `workbench tables` from {}; do not edit.\n", self.source);
        s += "\\begin{table}[htbp]\n\\centering\n\\small\n";
        s += &format!("\\caption{{{}}}\n\\label{{tab:{}}}\n", tex_escape(&self.caption), self.name);
        // NOTE: shrink a table wider than the text to fit (graphicx), never widen one.
        s += "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n";
        s += &format!("\\begin{{tabular}}{{l{}}}\n\\toprule\n", "r".repeat(self.header.len() - 1));
        s += &self.header.iter().map(|h| format!("\\textbf{{{}}}", tex_escape(h))).collect::<Vec<_>>().join(" & ");
        s += " \\\\\n\\midrule\n";
        for row in &self.rows {
            s += &row.iter().map(|c| tex_escape(&c.to_string())).collect::<Vec<_>>().join(" & ");
            s += " \\\\\n";
        }
        s += "\\bottomrule\n\\end{tabular}}\n\\end{table}\n";
        s
    }

    /// The method paragraph as a LaTeX fragment (`paper/generated/[full/]<name>.method.tex`),
    /// which a section inputs with `\wbmethod{<name>}`.
    pub fn method_latex(&self) -> String {
        format!("% Generated by `workbench tables` from {}; do not edit.\n{}\n", self.source, tex_escape(&self.method))
    }

    pub fn to_markdown(&self) -> String {
        let mut s = format!("<!-- Generated by `workbench tables` from {}; do not edit. -->\n\n", self.source);
        s += &format!("**{}**\n\n", self.caption);
        if !self.method.is_empty() {
            s += &format!("{}\n\n", self.method);
        }
        s += &format!("| {} |\n", self.header.join(" | "));
        s += &format!(
            "|{}\n",
            self.header.iter().enumerate().map(|(i, _)| if i == 0 { "---|" } else { "---:|" }).collect::<String>()
        );
        for row in &self.rows {
            s += &format!("| {} |\n", row.iter().map(TableCell::to_string).collect::<Vec<_>>().join(" | "));
        }
        s
    }

    /// An HTML table for the report site: the caption, a header a script may
    /// sort by (`sortable`), each cell's headline with its range in a
    /// `<small>`. Every cell also carries the number it starts with
    /// (`data-sort`), so a column of `1,234 B` sorts as numbers.
    pub fn to_html(&self) -> String {
        use crate::report::figures::xml_escape as esc;
        let mut s = format!(
            "<table class=\"sortable\" id=\"table-{}\">\n<caption>{}</caption>\n<thead><tr>",
            self.name,
            esc(&self.caption)
        );
        for h in &self.header {
            s += &format!("<th scope=\"col\">{}</th>", esc(h));
        }
        s += "</tr></thead>\n<tbody>\n";
        for row in &self.rows {
            s += "<tr>";
            for (i, c) in row.iter().enumerate() {
                let tag = if i == 0 { "th scope=\"row\"" } else { "td" };
                let sort = leading_number(&c.text).map(|v| format!(" data-sort=\"{v}\"")).unwrap_or_default();
                let range = c.range.as_ref().map(|(lo, hi)| format!(" <small>[{}, {}]</small>", esc(lo), esc(hi)));
                s += &format!("<{tag}{sort}>{}{}</{}>", esc(&c.text), range.unwrap_or_default(), &tag[..2]);
            }
            s += "</tr>\n";
        }
        s += "</tbody>\n</table>\n";
        if !self.method.is_empty() {
            s += &format!("<p class=\"method\">{}</p>\n", esc(&self.method));
        }
        s += &format!("<p class=\"source\">From <code>{}</code>.</p>\n", esc(&self.source));
        s
    }
}

/// The number a cell's text starts with, thousands separators dropped
/// (`1,234.5 B` → 1234.5, `−3%` → −3); `None` for text.
pub fn leading_number(text: &str) -> Option<f64> {
    let t = text.trim_start().replace('\u{2212}', "-");
    let mut num = String::new();
    for (i, ch) in t.chars().enumerate() {
        match ch {
            '0'..='9' | '.' => num.push(ch),
            '-' | '+' if i == 0 => num.push(ch),
            ',' if !num.is_empty() => {}
            _ => break,
        }
    }
    num.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caption is plain text: LaTeX gets each special character escaped
    /// once (a tool's error naming `WB_PEERS` once stopped the PDF, escaped
    /// twice), Markdown gets it as written.
    #[test]
    fn a_caption_is_escaped_once() {
        let t = Table {
            name: "t",
            caption: "bolt is missing; setup installs it with WB_PEERS=1 (100% of 2×)".into(),
            method: "timed & counted".into(),
            header: vec!["a"],
            rows: vec![vec!["1".into()]],
            source: "data/t/x".into(),
        };
        let tex = t.to_latex();
        assert!(tex.contains("with WB\\_PEERS=1 (100\\% of 2$\\times$)"), "{tex}");
        assert!(!tex.contains("\\\\_"), "{tex}");
        assert!(t.to_markdown().contains("with WB_PEERS=1 (100% of 2×)"));
        // The method is the section's paragraph in the paper, never the caption's.
        assert!(!tex.contains("timed") && t.method_latex().contains("timed \\& counted"), "{}", t.method_latex());
        assert!(t.to_markdown().contains("\n\ntimed & counted\n\n"));
        let html = t.to_html();
        assert!(html.contains("<p class=\"method\">timed &amp; counted</p>"), "{html}");
        assert!(
            html.contains("<caption>bolt is missing; setup installs it with WB_PEERS=1 (100% of 2×)</caption>"),
            "{html}"
        );
    }

    #[test]
    fn html_cells_sort_by_their_leading_number() {
        assert_eq!(leading_number("1,234.5 B"), Some(1234.5));
        assert_eq!(leading_number("\u{2212}3%"), Some(-3.0));
        assert_eq!(leading_number("2.00× (1.9–2.1×)"), Some(2.0));
        assert_eq!(leading_number("ZAP"), None);
        let t = Table {
            name: "t",
            caption: "c <b>".into(),
            method: String::new(),
            header: vec!["codec", "bytes"],
            rows: vec![vec!["ZAP".into(), TableCell::ranged("1,024".into(), "1,000".into(), "1,100".into())]],
            source: "data/t/x".into(),
        };
        let html = t.to_html();
        assert!(html.contains("<caption>c &lt;b&gt;</caption>"), "{html}");
        assert!(
            html.contains("<th scope=\"row\">ZAP</th><td data-sort=\"1024\">1,024 <small>[1,000, 1,100]</small></td>"),
            "{html}"
        );
    }
}
