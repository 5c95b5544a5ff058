//! The determinism map: which gate counts repeat exactly and which vary
//! between runs, by how much, and at which sites (the why: a timer that
//! fires or not, a flow-control window, a buffer that grows at a moment
//! that depends on scheduling). Read from the committed baseline, so the
//! terminal (`workbench gate --map`), the paper's threats section and the
//! report site print the same map.

use super::baseline::{Baseline, CellId, Range, SiteRange};

/// Sites named per varying cell.
const SITES_NAMED: usize = 3;

/// A cell with at least one varying count.
#[derive(Debug, Clone, PartialEq)]
pub struct Varying {
    pub id: CellId,
    /// The counts that varied, with their ranges.
    pub counts: Vec<(String, Range)>,
    /// The sites whose blocks varied most, widest range first.
    pub sites: Vec<SiteRange>,
}

/// The whole map.
#[derive(Debug, Clone, PartialEq)]
pub struct Map {
    pub cells: usize,
    pub counts: usize,
    pub exact_cells: usize,
    pub exact_counts: usize,
    pub varying: Vec<Varying>,
    /// Who blessed it, when, on what.
    pub revision: String,
    pub date: String,
    pub machine: String,
    pub runs: String,
}

/// The map of `b`.
pub fn of(b: &Baseline) -> Map {
    let mut varying = Vec::new();
    let mut exact_counts = 0;
    for (id, m) in &b.counts {
        let counts: Vec<(String, Range)> =
            m.iter().filter(|(_, r)| !r.is_exact()).map(|(k, r)| (k.clone(), *r)).collect();
        exact_counts += m.len() - counts.len();
        if counts.is_empty() {
            continue;
        }
        let mut sites: Vec<SiteRange> =
            b.sites.get(id).into_iter().flat_map(|s| s.values()).filter(|s| !s.blocks.is_exact()).cloned().collect();
        sites.sort_by(|x, y| (y.blocks.hi - y.blocks.lo).cmp(&(x.blocks.hi - x.blocks.lo)).then(x.label.cmp(&y.label)));
        sites.truncate(SITES_NAMED);
        varying.push(Varying { id: id.clone(), counts, sites });
    }
    Map {
        cells: b.counts.len(),
        counts: b.counts.values().map(|m| m.len()).sum(),
        exact_cells: b.counts.len() - varying.len(),
        exact_counts,
        varying,
        revision: b.header.revision.clone(),
        date: b.header.date.clone(),
        machine: b.header.machine.clone(),
        runs: b.header.runs.clone(),
    }
}

impl Map {
    /// One line: how much of the suite is exact.
    pub fn summary(&self) -> String {
        format!(
            "{} of {} gate cells exact in every count ({} of {} counts); {} varying",
            self.exact_cells,
            self.cells,
            self.exact_counts,
            self.counts,
            self.varying.len()
        )
    }

    /// `workbench gate --map`.
    pub fn render(&self) -> String {
        let mut s = format!(
            "{}\nblessed at {} on {} ({}); runs: {}\n",
            self.summary(),
            &self.revision[..self.revision.len().min(7)],
            self.date,
            self.machine,
            self.runs
        );
        for v in &self.varying {
            s += &format!("\n{} varies:\n", v.id);
            for (k, r) in &v.counts {
                s += &format!("  {k:<20} {r}  (±{})\n", percent(*r));
            }
            for x in &v.sites {
                s += &format!("    [{}] blocks {}  {}\n", x.side, x.blocks, x.label);
            }
        }
        s
    }
}

/// Half a range's width against its middle, as the paper prints it.
pub fn percent(r: Range) -> String {
    let mid = (r.lo + r.hi) as f64 / 2.0;
    let half = (r.hi - r.lo) as f64 / 2.0;
    let p = 100.0 * half / mid.max(1.0);
    if p < 0.01 {
        "<0.01%".into()
    } else {
        format!("{}%", crate::fmt::sig3(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::baseline::Header;

    #[test]
    fn only_cells_with_a_range_vary() {
        let mut b =
            Baseline { header: Header { revision: "abcdef0123".into(), ..Header::default() }, ..Baseline::default() };
        let exact = CellId { dataset: "alloc-profile".into(), unit: "zap-p0".into() };
        let quic = CellId { dataset: "transport-alloc".into(), unit: "quic-p0".into() };
        b.counts.entry(exact).or_default().insert("encode.allocs".into(), Range::exact(0));
        b.counts.entry(quic.clone()).or_default().insert("allocs".into(), Range { lo: 4045, hi: 4060 });
        b.counts.entry(quic.clone()).or_default().insert("bytes".into(), Range::exact(7));
        b.sites.entry(quic).or_default().insert(
            "1".into(),
            SiteRange {
                side: "client".into(),
                blocks: Range { lo: 40, hi: 48 },
                bytes: Range::exact(1),
                label: "quinn::timer".into(),
            },
        );
        let m = of(&b);
        assert_eq!((m.cells, m.exact_cells, m.counts, m.exact_counts), (2, 1, 3, 2));
        let text = m.render();
        assert!(
            text.contains("transport-alloc quic-p0 varies:\n  allocs               4045..4060  (±0.185%)"),
            "{text}"
        );
        assert!(text.contains("[client] blocks 40..48  quinn::timer"), "{text}");
    }
}
