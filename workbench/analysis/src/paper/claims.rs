//! The claims audit (`workbench claims`): each quantitative claim of the two
//! source papers against our counterpart, and the internal consistency of
//! their tables.
//!
//! `paper/claims.toml` is the only file in the repository that holds the
//! papers' numbers. Each `[[claim]]` names its source (file, table or
//! section, row), the paper's value and unit, and how ours is computed: an
//! experiment, filters on its records, a column and a statistic, optionally
//! rescaled to the paper's message count. The verdict is *reproduced* when
//! ours is within the claim's tolerance, *not reproduced* otherwise, *not
//! comparable* when the claim says why (Go's collector has no Rust
//! counterpart), and *not yet measured* when no dataset exists.
//!
//! Each `[[check]]` tests a relation between columns of a source table, row
//! by row, from the numbers as printed: a column that is another divided by
//! a constant was derived, not measured.
//!
//! # Layout
//! - [`Claims`], [`Claim`], [`Ours`], [`Check`]: the TOML.
//! - [`audit`]: verdicts and check results.
//! - [`Audit::to_markdown`], [`Audit::to_latex`]: `paper/generated/claims.{md,tex}`.

use crate::data::dataset::{self, Run};
use crate::report::tables::{self, tex_escape};
use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    #[serde(rename = "claim", default)]
    pub claims: Vec<Claim>,
    #[serde(rename = "check", default)]
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub id: String,
    /// `zap` or `datastore`.
    pub paper: String,
    /// File, table or section, row and column.
    pub source: String,
    /// What is claimed, in words.
    pub claim: String,
    pub value: f64,
    pub unit: String,
    /// How ours is computed; absent when `not_comparable` says why.
    pub ours: Option<Ours>,
    /// Why no counterpart can be measured.
    pub not_comparable: Option<String>,
    /// Accepted difference: absolute (`abs`) and/or relative (`rel`, a fraction).
    #[serde(default)]
    pub tolerance: Tolerance,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub abs: Option<f64>,
    pub rel: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ours {
    pub experiment: String,
    /// String columns that must equal these values.
    #[serde(default)]
    pub text: BTreeMap<String, String>,
    /// Integer columns that must equal these values.
    #[serde(default)]
    pub num: BTreeMap<String, u64>,
    pub column: String,
    /// mean | median | max | min
    pub stat: String,
    /// Multiply by this many messages over the `messages` column (a total
    /// after N messages from a run of fewer; said in the output).
    pub per_messages: Option<f64>,
    /// Sum these columns' statistics instead of one (e.g. encode + decode).
    #[serde(default)]
    pub plus: Vec<Ours>,
    /// Subtract these (a change between two builds, say).
    #[serde(default)]
    pub minus: Vec<Ours>,
    /// Divide by this one's value, after `plus` and `minus`: a ratio between
    /// two selections (one build's RSS over another's), or the share of a
    /// change that one part of it explains (a mechanism).
    pub over: Option<Box<Ours>>,
    /// Divide by this to reach the claim's unit (e.g. 1048576 for MiB).
    pub divide: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub id: String,
    pub paper: String,
    pub source: String,
    /// The relation in words, e.g. "GC/M msgs = B/op / 80 MB".
    pub statement: String,
    /// `ratio`: y / x is one constant for every row (reported), or equals
    /// `factor` when given; `difference`: the same for y − x.
    pub relation: String,
    pub factor: Option<f64>,
    /// Relative deviation accepted per row (rounding in print).
    pub tolerance: f64,
    /// Per row: label, x, y.
    pub rows: Vec<(String, f64, f64)>,
}

/// A claim's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Reproduced,
    NotReproduced,
    NotComparable(String),
    NotYetMeasured(String),
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotComparable(_) => "not comparable",
            Verdict::NotYetMeasured(_) => "not yet measured",
        }
    }
}

#[derive(Debug)]
pub struct ClaimResult {
    /// The claim as `claims.toml` states it.
    pub spec: Claim,
    pub ours: Option<f64>,
    /// Which dataset (and scale) ours came from, and any rescaling.
    pub basis: String,
    pub verdict: Verdict,
    /// Said beside the verdict when ours comes from a dataset that is not
    /// fresh ([`crate::run::fingerprint::shown`]).
    pub stale: Option<String>,
}

impl ClaimResult {
    /// The verdict's label, with the staleness of its data.
    pub fn verdict_label(&self) -> String {
        match &self.stale {
            Some(s) => format!("{} ({s})", self.verdict.label()),
            None => self.verdict.label().to_string(),
        }
    }
}

impl ClaimResult {
    /// The columns of [`ClaimResult::row`].
    pub const HEADER: &'static [&'static str] =
        &["paper", "claim", "source", "paper value", "ours", "ratio", "verdict"];

    /// The claim as one row of the audit (Markdown's and the report site's).
    pub fn row(&self) -> [String; 7] {
        let (ours, ratio) = self.ours_and_ratio("—");
        let why = match &self.verdict {
            Verdict::NotComparable(r) | Verdict::NotYetMeasured(r) => format!(": {r}"),
            _ if !self.basis.is_empty() => format!(" ({})", self.basis),
            _ => String::new(),
        };
        [
            self.spec.paper.clone(),
            self.spec.claim.clone(),
            self.spec.source.clone(),
            format!("{} {}", num(self.spec.value), self.spec.unit),
            ours,
            ratio,
            format!("{}{why}", self.verdict_label()),
        ]
    }

    /// Ours with its unit, and ours ÷ the paper's value; `none` where absent.
    fn ours_and_ratio(&self, none: &str) -> (String, String) {
        let ours = self.ours.map_or(none.into(), |v| format!("{} {}", num(v), self.spec.unit));
        let ratio = match self.ours {
            Some(v) if self.spec.value != 0.0 => format!("{:.2}×", v / self.spec.value),
            _ => none.into(),
        };
        (ours, ratio)
    }
}

#[derive(Debug)]
pub struct CheckResult {
    /// The check as `claims.toml` states it.
    pub spec: Check,
    /// The constant found (first row's y / x), or the one the check names.
    pub constant: f64,
    /// Rows that do not fit, with their own y / x.
    pub misfits: Vec<(String, f64)>,
    pub holds: bool,
}

pub struct Audit {
    pub claims: Vec<ClaimResult>,
    pub checks: Vec<CheckResult>,
}

pub fn load(path: &Path) -> Result<Claims> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Computes every verdict and check against the datasets under `data`.
/// A verdict on a dataset that is not fresh against the tree at `root` says so.
pub fn audit(claims: &Claims, root: &Path, data: &Path) -> Result<Audit> {
    let mut runs: BTreeMap<String, Option<Run>> = BTreeMap::new();
    let mut stale_of: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut out = Vec::new();
    for c in &claims.claims {
        let (ours, basis, verdict) = match (&c.ours, &c.not_comparable) {
            (_, Some(why)) => (None, String::new(), Verdict::NotComparable(why.clone())),
            (None, None) => (None, String::new(), Verdict::NotComparable("no counterpart defined".into())),
            (Some(o), None) => match evaluate(o, data, &mut runs).with_context(|| format!("claim {}", c.id))? {
                None => (
                    None,
                    String::new(),
                    Verdict::NotYetMeasured(format!("no {} dataset with matching records", o.experiment)),
                ),
                Some((v, basis)) => {
                    let diff = (v - c.value).abs();
                    let ok_abs = c.tolerance.abs.is_some_and(|a| diff <= a);
                    let ok_rel = c.tolerance.rel.is_some_and(|r| diff <= r * c.value.abs());
                    let verdict =
                        if ok_abs || ok_rel || diff == 0.0 { Verdict::Reproduced } else { Verdict::NotReproduced };
                    (Some(v), basis, verdict)
                }
            },
        };
        let stale = match (&c.ours, ours) {
            (Some(o), Some(_)) => match stale_of.get(&o.experiment) {
                Some(s) => s.clone(),
                None => {
                    let run = runs.get(&o.experiment).and_then(|r| r.as_ref()).expect("evaluated above");
                    let shown = crate::run::fingerprint::shown(root, &run.manifest)?;
                    let rev: String = run.manifest.git_revision.chars().take(7).collect();
                    let s = (!shown.is_fresh()).then(|| format!("on stale data, measured at {rev}"));
                    stale_of.insert(o.experiment.clone(), s.clone());
                    s
                }
            },
            _ => None,
        };
        out.push(ClaimResult { spec: c.clone(), ours, basis, verdict, stale });
    }
    let checks = claims.checks.iter().map(check).collect();
    Ok(Audit { claims: out, checks })
}

fn check(c: &Check) -> CheckResult {
    let ratios: Vec<(String, f64)> =
        c.rows.iter().map(|(l, x, y)| (l.clone(), if c.relation == "difference" { y - x } else { y / x })).collect();
    let constant = c.factor.unwrap_or_else(|| ratios.first().map_or(f64::NAN, |r| r.1));
    let misfits: Vec<(String, f64)> =
        ratios.iter().filter(|(_, r)| ((r - constant) / constant).abs() > c.tolerance).cloned().collect();
    CheckResult {
        spec: c.clone(),
        constant,
        holds: misfits.is_empty() && (c.relation == "ratio" || c.relation == "difference"),
        misfits,
    }
}

/// Ours for one claim, and what it was computed from; `None` without a dataset.
fn evaluate(o: &Ours, data: &Path, runs: &mut BTreeMap<String, Option<Run>>) -> Result<Option<(f64, String)>> {
    if !runs.contains_key(&o.experiment) {
        let dir = dataset::best_run(data, &o.experiment)?.map(|(_, d)| d);
        runs.insert(o.experiment.clone(), dir.map(|d| dataset::load_run(&d)).transpose()?);
    }
    let Some(run) = runs.get(&o.experiment).and_then(|r| r.as_ref()) else { return Ok(None) };
    let text: Vec<(&str, &str)> = o.text.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let num: Vec<(&str, u64)> = o.num.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    // A filter naming no column is a typo in claims.toml; one matching no
    // row is a run at another scale (10M rows asked, a quick run on disk).
    for col in text.iter().map(|t| t.0).chain(num.iter().map(|n| n.0)) {
        if run.records.column(col).is_err() {
            anyhow::bail!("{} has no column `{col}` (a filter of the claim)", run.dir.display());
        }
    }
    let rows = tables::select(&run.records, &text, &num)?;
    if rows.height() == 0 {
        return Ok(None);
    }
    let stat = |col: &str| -> Result<Option<f64>> {
        Ok(match o.stat.as_str() {
            "mean" => tables::mean_stats(&rows, col)?.map(|s| s.0),
            "median" => tables::stats(&rows, col)?.map(|s| s.0),
            "max" => tables::stats(&rows, col)?.map(|s| s.2),
            "min" => tables::stats(&rows, col)?.map(|s| s.1),
            other => anyhow::bail!("stat {other:?}: use mean, median, max or min"),
        })
    };
    let Some(mut v) = stat(&o.column)? else {
        anyhow::bail!("column {} has no values in {}", o.column, run.dir.display())
    };
    let mut basis = format!(
        "{} ({}, {})",
        o.experiment,
        run.manifest.scale,
        &run.manifest.git_revision[..7.min(run.manifest.git_revision.len())]
    );
    for p in &o.plus {
        let Some((w, _)) = evaluate(p, data, runs)? else { return Ok(None) };
        v += w;
    }
    for m in &o.minus {
        let Some((w, _)) = evaluate(m, data, runs)? else { return Ok(None) };
        v -= w;
    }
    if let Some(over) = &o.over {
        let Some((w, _)) = evaluate(over, data, runs)? else { return Ok(None) };
        if w == 0.0 {
            anyhow::bail!("{}: the claim divides by a value of 0 (`over`)", over.experiment);
        }
        v /= w;
    }
    if let Some(n) = o.per_messages {
        let messages =
            tables::stats(&rows, "messages")?.map(|s| s.2).context("per_messages needs a `messages` column")?;
        if messages != n {
            basis += &format!(
                ", scaled from {} to {} messages",
                crate::fmt::thousands(messages as u64),
                crate::fmt::thousands(n as u64)
            );
        }
        v *= n / messages;
    }
    if let Some(d) = o.divide {
        v /= d;
    }
    Ok(Some((v, basis)))
}

fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        crate::fmt::thousands(v.round() as u64)
    } else {
        crate::fmt::sig3(v)
    }
}

impl Audit {
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for c in &self.claims {
            *m.entry(c.verdict.label()).or_default() += 1;
        }
        m
    }

    pub fn to_markdown(&self) -> String {
        let mut s =
            String::from("<!-- Generated by `workbench claims` from paper/claims.toml and data/; do not edit. -->\n\n");
        s += &format!("## Claims\n\n| {} |\n|---|---|---|---:|---:|---:|---|\n", ClaimResult::HEADER.join(" | "));
        for c in &self.claims {
            s += &format!("| {} |\n", c.row().join(" | "));
        }
        s += "\n## Internal consistency of the source tables\n\n| paper | relation | source | constant | holds | rows that do not fit |\n|---|---|---|---:|---|---|\n";
        for k in &self.checks {
            let misfits =
                k.misfits.iter().map(|(l, r)| format!("{l} ({})", crate::fmt::sig3(*r))).collect::<Vec<_>>().join(", ");
            s += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                k.spec.paper,
                k.spec.statement,
                k.spec.source,
                crate::fmt::sig3(k.constant),
                if k.holds { "yes" } else { "no" },
                if misfits.is_empty() { "—".into() } else { misfits }
            );
        }
        s
    }

    pub fn to_latex(&self) -> String {
        let mut s = String::from("% Generated by `workbench claims` from paper/claims.toml and data/; do not edit.\n");
        s += &longtable_head(
            "@{}>{\\raggedright\\arraybackslash}p{0.30\\textwidth}rrr>{\\raggedright\\arraybackslash}p{0.22\\textwidth}@{}",
            "Claims of the source papers against this workbench's measurements. Paper values are quoted from the source; ours are computed from the named dataset.",
            "tab:claims",
            &["Claim", "Paper", "Ours", "Ratio", "Verdict"],
        );
        for c in &self.claims {
            let (ours, ratio) = c.ours_and_ratio("---");
            let why = match &c.verdict {
                Verdict::NotComparable(r) | Verdict::NotYetMeasured(r) => format!(": {r}"),
                _ => String::new(),
            };
            s += &format!(
                "{} & {} & {} & {} & {}{} \\\\\n",
                tex_escape(&format!("({}) {}", c.spec.paper, c.spec.claim)),
                tex_escape(&format!("{} {}", num(c.spec.value), c.spec.unit)),
                tex_escape(&ours),
                tex_escape(&ratio),
                tex_escape(&c.verdict_label()),
                tex_escape(&why)
            );
        }
        s += "\\bottomrule\n\\end{longtable}\n\n";
        s += &longtable_head(
            "@{}>{\\raggedright\\arraybackslash}p{0.45\\textwidth}r>{\\raggedright\\arraybackslash}p{0.35\\textwidth}@{}",
            "Internal consistency of the source papers' tables, computed row by row from the printed numbers.",
            "tab:consistency",
            &["Relation", "Constant", "Holds"],
        );
        for k in &self.checks {
            let holds = if k.holds {
                "yes".to_string()
            } else {
                format!(
                    "no: {}",
                    k.misfits
                        .iter()
                        .map(|(l, r)| format!("{l} ({})", crate::fmt::sig3(*r)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            s += &format!(
                "{} & {} & {} \\\\\n",
                tex_escape(&format!("({}) {}", k.spec.paper, k.spec.statement)),
                tex_escape(&crate::fmt::sig3(k.constant)),
                tex_escape(&holds)
            );
        }
        s += "\\bottomrule\n\\end{longtable}\n";
        s
    }
}

/// Writes `paper/generated/claims.{md,tex}`; the audit and the paths.
pub fn write(root: &Path, data: &Path) -> Result<(Audit, Vec<std::path::PathBuf>)> {
    let claims = load(&root.join("paper/claims.toml"))?;
    let a = audit(&claims, root, data)?;
    let dir = root.join("paper/generated");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in [("claims.md", a.to_markdown()), ("claims.tex", a.to_latex())] {
        let p = dir.join(name);
        dataset::write_atomic(&p, text.as_bytes())?;
        written.push(p);
    }
    Ok((a, written))
}

/// A longtable's opening: the caption and label on its first page only
/// (`\\endfirsthead`), a "(continued)" caption without a label on the pages
/// after (`\\endhead`), so that the label is defined once.
pub(crate) fn longtable_head(columns: &str, caption: &str, label: &str, heads: &[&str]) -> String {
    let row = heads.iter().map(|h| format!("\\textbf{{{h}}}")).collect::<Vec<_>>().join(" & ");
    let head = format!("\\toprule\n{row} \\\\\n\\midrule\n");
    format!(
        "\\begin{{longtable}}{{{columns}}}\n\\caption{{{caption}}}\\label{{{label}}}\\\\\n{head}\\endfirsthead\n\\caption[]{{(continued)}}\\\\\n{head}\\endhead\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A longtable's head repeats on every page: its label must sit in the
    /// first page's head only (LaTeX warned "multiply defined" when it did not).
    #[test]
    fn a_longtable_label_is_defined_once() {
        let t = longtable_head("ll", "A caption", "tab:x", &["A", "B"]);
        assert_eq!(t.matches("\\label{tab:x}").count(), 1);
        let (first, rest) = t.split_once("\\endfirsthead").expect("a first-page head");
        assert!(first.contains("\\label{tab:x}") && rest.contains("\\endhead") && !rest.contains("\\label"));
        assert_eq!(t.matches("\\textbf{B}").count(), 2, "the column heads on every page");
    }

    #[test]
    fn a_derived_column_is_found_and_a_misfit_named() {
        let c = Check {
            id: "x".into(),
            paper: "p".into(),
            source: "s".into(),
            statement: "y = x / 80".into(),
            relation: "ratio".into(),
            factor: None,
            tolerance: 0.01,
            rows: vec![("a".into(), 64.0, 0.8), ("b".into(), 576.0, 7.2), ("c".into(), 100.0, 5.0)],
        };
        let r = check(&c);
        assert!((r.constant - 0.0125).abs() < 1e-12);
        assert!(!r.holds);
        assert_eq!(r.misfits.len(), 1);
        assert_eq!(r.misfits[0].0, "c");
    }

    #[test]
    fn the_committed_claims_file_parses() {
        let root = crate::default_root();
        let c = load(&root.join("paper/claims.toml")).unwrap();
        assert!(c.claims.len() >= 10 && !c.checks.is_empty());
        for claim in &c.claims {
            assert!(
                claim.ours.is_some() ^ claim.not_comparable.is_some(),
                "{}: ours or not_comparable, exactly one",
                claim.id
            );
        }
    }
}
