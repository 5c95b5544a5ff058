//! Whether a dataset still holds after its sources changed, settled by
//! the code that ran: its binaries built again at this tree and their
//! identities ([`crate::run::identity`]) compared with the ones on record.
//!
//! - Every binary identical: the dataset is *certified* at this commit
//!   without measuring (its manifest gains a [`Certification`] and the
//!   fingerprint as of now); the source difference stays as the record of
//!   why it was looked at.
//! - Some changed: the cells whose build changed are named (a cell ran
//!   one variant's binaries), and the dataset is measured again.
//! - None on record (measured before identities were kept), but fresh:
//!   the binaries built now are the ones that ran (same inputs), so their
//!   identities are recorded and later changes can be judged by them. A
//!   profile-guided build is not reproducible (its training run's profile
//!   varies), so a dataset with one is left to its sources.

use crate::data::dataset;
use crate::data::manifest::{self, Certification, Manifest};
use crate::run::fingerprint;
use crate::run::runner::{self, Binaries, Options, Planned};
use crate::spec::{variants, Spec};
use anyhow::{Context, Result};
use indicatif::MultiProgress;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What building a dataset's binaries again found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every binary identical to the one that ran: `binaries` compared.
    Identical { binaries: usize },
    /// A fresh dataset without identities: `binaries` recorded now.
    Recorded { binaries: usize },
    /// The variants whose binaries changed, and the cells that ran them.
    Changed { variants: Vec<String>, cells: Vec<String> },
    /// Nothing to compare: why (the dataset is measured again whole).
    Unjudged(String),
}

impl Verdict {
    /// Whether the dataset holds at this commit without measuring.
    pub fn holds(&self) -> bool {
        matches!(self, Verdict::Identical { .. } | Verdict::Recorded { .. })
    }

    /// In a line, for `run --stale` and its plan.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Identical { binaries } => {
                format!("every binary identical ({binaries}): certified, nothing measured")
            }
            Verdict::Recorded { binaries } => format!("fresh; identities of its {binaries} binaries recorded"),
            Verdict::Changed { variants, cells } => format!(
                "the {} build changed: {} of its cells aged ({})",
                variants.join(", "),
                cells.len(),
                cells.iter().take(4).cloned().collect::<Vec<_>>().join(", ")
                    + if cells.len() > 4 { ", …" } else { "" }
            ),
            Verdict::Unjudged(why) => why.clone(),
        }
    }
}

/// Compares identities on record (`then`, variant → binary → identity)
/// with `now`'s over `cells`: the verdict for a dataset measured with
/// identities. A pure function, so that the comparison is tested apart
/// from any build.
/// `cells` are (cell, variant) pairs.
pub fn compare(
    cells: &[(String, String)],
    then: &BTreeMap<String, BTreeMap<String, String>>,
    now: &BTreeMap<String, BTreeMap<String, String>>,
) -> Verdict {
    let variants: BTreeSet<&String> = cells.iter().map(|(_, v)| v).collect();
    let mut changed = Vec::new();
    let mut binaries = 0;
    for v in variants {
        match (then.get(v), now.get(v)) {
            (Some(a), Some(b)) if a == b => binaries += a.len(),
            _ => changed.push(v.clone()),
        }
    }
    if changed.is_empty() {
        return Verdict::Identical { binaries };
    }
    let cells = cells.iter().filter(|(_, v)| changed.contains(v)).map(|(id, _)| id.clone()).collect();
    Verdict::Changed { variants: changed, cells }
}

/// Builds the binaries of the run in `dir` (manifest `m`, spec `spec` at
/// `spec_path`) as this tree makes them and judges the run by them.
pub fn judge(
    opts: &Options,
    spec: &Spec,
    m: &Manifest,
    bins: &mut Binaries,
    multi: &MultiProgress,
) -> Result<(Verdict, Vec<Planned>)> {
    let cells = runner::plan(spec, opts.scale)?;
    let pgo: Vec<&String> =
        spec.variants_at(opts.scale).iter().filter(|v| variants::get(v).is_some_and(|b| b.pgo)).collect();
    if m.binaries.is_empty() && !pgo.is_empty() {
        let names: Vec<&str> = pgo.iter().map(|s| s.as_str()).collect();
        let why =
            format!("no identities on record, and a profile-guided build ({}) is not reproducible", names.join(", "));
        return Ok((Verdict::Unjudged(why), cells));
    }
    let mut now = BTreeMap::new();
    for p in &cells {
        if now.contains_key(&p.variant) {
            continue;
        }
        bins.get(&opts.root, p.target, &p.variant, multi)?;
        let ids = bins.identities(p.target, &p.variant).context("a build without identities")?;
        now.insert(p.variant.clone(), ids.clone());
    }
    if m.binaries.is_empty() {
        return Ok((Verdict::Recorded { binaries: now.values().map(BTreeMap::len).sum() }, cells));
    }
    let pairs: Vec<(String, String)> = cells.iter().map(|p| (p.id.clone(), p.variant.clone())).collect();
    Ok((compare(&pairs, &m.binaries, &now), cells))
}

/// Writes the verdict into the run in `dir`: a certification at `rev`
/// with the fingerprint of this tree, and the identities when recorded.
pub fn certify(
    opts: &Options,
    spec: &Spec,
    dir: &Path,
    verdict: &Verdict,
    cells: &[Planned],
    bins: &Binaries,
) -> Result<()> {
    let mut m = dataset::load_run_manifest(dir)?;
    let built = bins.built_for(cells).context("certifying a dataset none of whose binaries were built")?;
    let rustc = manifest::rustc_version(&opts.root);
    let (rev, _) = manifest::git_state(&opts.root);
    let inputs = fingerprint::Inputs::of(&opts.root, &opts.root.join(&m.spec_path), spec, opts.scale)?;
    let fp = fingerprint::compute(&opts.root, &inputs, &built.sources, spec, opts.scale, &rustc, Some(&rev))
        .context("fingerprinting the dataset's inputs now")?;
    let changed = m.fingerprint.as_ref().map(|then| fingerprint::changed(then, &fp)).unwrap_or_default();
    let why = match verdict {
        Verdict::Identical { binaries } => format!("{binaries} binaries built again, every one identical"),
        Verdict::Recorded { binaries } => {
            m.binaries = built.identities.clone();
            format!("identities of its {binaries} binaries recorded, built from the inputs it was measured from")
        }
        _ => anyhow::bail!("{}: not certified ({})", dir.display(), verdict.describe()),
    };
    m.certified.push(Certification { git_revision: rev, date: manifest::iso_date(manifest::now_secs()), why, changed });
    m.fingerprint = Some(fp);
    dataset::write_atomic(&dir.join("manifest.json"), serde_json::to_string_pretty(&m)?.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(id: &str, variant: &str) -> (String, String) {
        (id.to_string(), variant.to_string())
    }

    fn ids(pairs: &[(&str, &str)]) -> BTreeMap<String, BTreeMap<String, String>> {
        pairs.iter().map(|(v, id)| (v.to_string(), [("subject".to_string(), id.to_string())].into())).collect()
    }

    #[test]
    fn identical_builds_certify_and_a_changed_build_ages_its_cells_alone() {
        let cells = [cell("a-dhat-r0", "dhat"), cell("a-events-r0", "events"), cell("b-dhat-r0", "dhat")];
        let then = ids(&[("dhat", "1"), ("events", "2")]);
        assert_eq!(compare(&cells, &then, &then), Verdict::Identical { binaries: 2 });
        let v = compare(&cells, &then, &ids(&[("dhat", "1"), ("events", "3")]));
        assert_eq!(v, Verdict::Changed { variants: vec!["events".into()], cells: vec!["a-events-r0".into()] });
        assert!(!v.holds());
        // A variant with no identity on record is a change, not a match.
        let v = compare(&cells, &ids(&[("dhat", "1")]), &then);
        assert!(matches!(v, Verdict::Changed { ref variants, .. } if variants == &["events"]));
    }
}
