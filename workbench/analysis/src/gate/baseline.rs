//! The gate's committed files, as types: `experiments/gate/baseline.txt`
//! (each cell's exact counts, the reason and the machine of the last bless)
//! and `experiments/gate/sites.txt` (each cell's allocation sites that
//! allocate often, which explain a changed count).
//!
//! Both are text with one value per line, sorted, so that `git log -p` of
//! them is the project's allocation history: a changed count is one line,
//! next to the reason given for it. A value is `N`, or `LO..HI` when it
//! varied between the bless's runs (the determinism map).

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// An exact value, or the range a varying one was seen in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub lo: u64,
    pub hi: u64,
}

impl Range {
    pub fn exact(v: u64) -> Range {
        Range { lo: v, hi: v }
    }

    /// The smallest range holding every value of `values` (`None` if empty).
    pub fn of(values: impl IntoIterator<Item = u64>) -> Option<Range> {
        values.into_iter().fold(None, |r, v| Some(r.map_or(Range::exact(v), |r: Range| r.with(v))))
    }

    pub fn with(self, v: u64) -> Range {
        Range { lo: self.lo.min(v), hi: self.hi.max(v) }
    }

    pub fn union(self, o: Range) -> Range {
        self.with(o.lo).with(o.hi)
    }

    pub fn is_exact(self) -> bool {
        self.lo == self.hi
    }

    /// What the gate accepts: an exact value only; a varying one between
    /// half its low end and twice its high end. No range a few runs see
    /// holds a varying count's spread on another machine under load: the
    /// bless's eight runs saw the server's filtered-count bytes at
    /// 617,451..628,515, and a cold CI run then read 642,907 (and its range
    /// widened by its width, 606,387..639,579, failed it). So a varying
    /// count is only bounded against gross change here, and its cell's
    /// sites that did not vary are gated exactly, one by one ([`super::verdict`]).
    pub fn accepts(self, v: u64) -> bool {
        if self.is_exact() {
            return v == self.lo;
        }
        (self.lo / 2..=self.hi.saturating_mul(2)).contains(&v)
    }

    fn parse(s: &str) -> Option<Range> {
        match s.split_once("..") {
            Some((lo, hi)) => {
                let r = Range { lo: lo.parse().ok()?, hi: hi.parse().ok()? };
                (r.lo < r.hi).then_some(r)
            }
            None => s.parse().ok().map(Range::exact),
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_exact() {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}..{}", self.lo, self.hi)
        }
    }
}

/// A gate cell: a gated dataset and one point of its axes (`zap-p0`; a
/// server experiment's cell is `server`, its workloads prefix the metrics).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellId {
    pub dataset: String,
    pub unit: String,
}

impl fmt::Display for CellId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.dataset, self.unit)
    }
}

/// One allocation site of a cell in `sites.txt`.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteRange {
    /// The thread it ran on (`client`, `server`, `other`, `?`).
    pub side: String,
    pub blocks: Range,
    pub bytes: Range,
    /// Its normalised stack, shortened to where the subject meets the
    /// library that allocates (matching uses the id, a hash of the whole stack).
    pub label: String,
}

/// Who blessed the baseline, why, and on what.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    pub reason: String,
    pub revision: String,
    pub date: String,
    pub machine: String,
    pub runs: String,
}

/// Both files, read or about to be written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Baseline {
    pub header: Header,
    pub counts: BTreeMap<CellId, BTreeMap<String, Range>>,
    pub sites: BTreeMap<CellId, BTreeMap<String, SiteRange>>,
}

/// Where the gate's files live under the repository root.
pub fn dir(root: &Path) -> PathBuf {
    root.join("experiments/gate")
}

const COUNTS_FILE: &str = "baseline.txt";
const SITES_FILE: &str = "sites.txt";

const COUNTS_PREAMBLE: &str = "\
# The allocation gate's baseline: each gate cell's exact allocation counts
# (dhat build, the measured operations only; `[gate]` in experiments/*.toml).
# `workbench gate` fails on any count that differs from its line; `workbench
# bless --reason \"…\"` rewrites this file and sites.txt. LO..HI: the count
# varied between the bless's runs (`workbench gate --map` says where); the gate
# only bounds it against gross change (half LO to twice HI), and gates the
# cell's sites that did not vary exactly, one by one.
";

const SITES_PREAMBLE: &str = "\
# The allocation sites of each gate cell that allocate often (whole process,
# dhat build): side, blocks, bytes, id (a hash of the normalised stack), and
# where the subject meets the library that allocates. `workbench gate` prints
# the sites whose counts moved beside a changed count.
";

impl Baseline {
    pub fn load(root: &Path) -> Result<Baseline> {
        let d = dir(root);
        let counts_path = d.join(COUNTS_FILE);
        let text = std::fs::read_to_string(&counts_path).with_context(|| {
            format!("reading {}: no baseline yet? `workbench bless --reason \"…\"` writes it", counts_path.display())
        })?;
        let mut b = Baseline::default();
        for (n, line) in text.lines().enumerate() {
            let bad = |what: &str| anyhow::anyhow!("{}:{}: {what}: {line:?}", counts_path.display(), n + 1);
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if let Some((k, v)) = line.split_once(": ") {
                let v = v.to_string();
                match k {
                    "reason" => b.header.reason = v,
                    "revision" => b.header.revision = v,
                    "date" => b.header.date = v,
                    "machine" => b.header.machine = v,
                    "runs" => b.header.runs = v,
                    _ => return Err(bad("unknown header")),
                }
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let [dataset, unit, metric, value] = f[..] else { return Err(bad("expected `dataset cell metric value`")) };
            let r = Range::parse(value).ok_or_else(|| bad("value is neither N nor LO..HI with LO < HI"))?;
            let id = CellId { dataset: dataset.into(), unit: unit.into() };
            b.counts.entry(id).or_default().insert(metric.into(), r);
        }
        let sites_path = d.join(SITES_FILE);
        let text = std::fs::read_to_string(&sites_path).with_context(|| format!("reading {}", sites_path.display()))?;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let bad = |what: &str| anyhow::anyhow!("{}:{}: {what}: {line:?}", sites_path.display(), n + 1);
            let mut f = line.splitn(7, char::is_whitespace);
            let mut next = || f.next().ok_or_else(|| bad("expected `dataset cell side blocks bytes id label`"));
            let id = CellId { dataset: next()?.into(), unit: next()?.into() };
            let side = next()?.to_string();
            let blocks = Range::parse(next()?).ok_or_else(|| bad("blocks"))?;
            let bytes = Range::parse(next()?).ok_or_else(|| bad("bytes"))?;
            let site = next()?.to_string();
            let label = next()?.trim().to_string();
            b.sites.entry(id).or_default().insert(site, SiteRange { side, blocks, bytes, label });
        }
        if b.header.reason.is_empty() {
            bail!("{}: no `reason:` line; bless again with --reason", counts_path.display());
        }
        Ok(b)
    }

    /// Writes both files (sorted, columns aligned).
    pub fn write(&self, root: &Path) -> Result<Vec<PathBuf>> {
        let d = dir(root);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        let h = &self.header;
        let mut s = String::from(COUNTS_PREAMBLE);
        s += &format!(
            "reason: {}\nrevision: {}\ndate: {}\nmachine: {}\nruns: {}\n\n",
            h.reason.replace('\n', " "),
            h.revision,
            h.date,
            h.machine,
            h.runs
        );
        let rows: Vec<[String; 4]> = self
            .counts
            .iter()
            .flat_map(|(id, m)| m.iter().map(|(k, r)| [id.dataset.clone(), id.unit.clone(), k.clone(), r.to_string()]))
            .collect();
        let w: Vec<usize> = (0..3).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
        for r in &rows {
            s += &format!("{:w0$}  {:w1$}  {:w2$}  {}\n", r[0], r[1], r[2], r[3], w0 = w[0], w1 = w[1], w2 = w[2]);
        }
        let mut t = String::from(SITES_PREAMBLE);
        for (id, sites) in &self.sites {
            // Largest first within a cell, so a reader sees what matters.
            let mut v: Vec<(&String, &SiteRange)> = sites.iter().collect();
            v.sort_by(|a, b| b.1.bytes.hi.cmp(&a.1.bytes.hi).then_with(|| a.0.cmp(b.0)));
            for (site, x) in v {
                t += &format!("{} {} {} {} {} {} {}\n", id.dataset, id.unit, x.side, x.blocks, x.bytes, site, x.label);
            }
        }
        let (cp, sp) = (d.join(COUNTS_FILE), d.join(SITES_FILE));
        std::fs::write(&cp, s).with_context(|| format!("writing {}", cp.display()))?;
        std::fs::write(&sp, t).with_context(|| format!("writing {}", sp.display()))?;
        Ok(vec![cp, sp])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wb-gate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn both_files_round_trip() {
        let dir = scratch("round-trip");
        let id = CellId { dataset: "transport-alloc".into(), unit: "quic-p0".into() };
        let mut b = Baseline {
            header: Header {
                reason: "first".into(),
                revision: "abc".into(),
                date: "2026-12-04".into(),
                machine: "x, 2 cores".into(),
                runs: "2 quiet".into(),
            },
            ..Baseline::default()
        };
        b.counts.entry(id.clone()).or_default().insert("allocs".into(), Range { lo: 4045, hi: 4060 });
        b.counts.entry(id.clone()).or_default().insert("bytes".into(), Range::exact(9));
        b.sites.entry(id).or_default().insert(
            "00ff".into(),
            SiteRange {
                side: "client".into(),
                blocks: Range::exact(220),
                bytes: Range { lo: 1, hi: 2 },
                label: "<a as b>::c ← d".into(),
            },
        );
        b.write(&dir).unwrap();
        assert_eq!(Baseline::load(&dir).unwrap(), b);
        let text = std::fs::read_to_string(dir.join("experiments/gate/baseline.txt")).unwrap();
        assert!(text.contains("transport-alloc  quic-p0  allocs  4045..4060\n"), "{text}");
    }

    #[test]
    fn a_bad_line_names_its_file_and_number() {
        let dir = scratch("bad-line");
        let d = dir.join("experiments/gate");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("baseline.txt"), "reason: r\n\nalloc-profile zap-p0 encode.allocs 5..5\n").unwrap();
        std::fs::write(d.join("sites.txt"), "").unwrap();
        let e = Baseline::load(&dir).unwrap_err().to_string();
        assert!(e.contains("baseline.txt:3: value is neither N nor LO..HI"), "{e}");
    }
}
