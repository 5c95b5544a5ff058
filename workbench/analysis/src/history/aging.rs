//! What each commit of a range ages, judged two ways over the newest
//! datasets of a scale (`workbench aging A..B`):
//! - **by sources**, as staleness was judged before binaries had
//!   identities: a dataset ages whole when the commit changed a file its
//!   fingerprint lists (a source its binaries were compiled from, a build
//!   file, a peer's file) or its spec;
//! - **by the code that ran**, as `run --stale` judges now: the binaries of
//!   every build such a dataset ran are built at the commit and at its
//!   parent, and compared ([`certify::compare`], the runner's own verdict);
//!   a dataset whose binaries are all identical ages not at all, a
//!   count-only one only in the cells of the builds that changed, a timed
//!   one whole. A spec or a peer's file changed ages it whole either way.
//!
//! Each side's cost is the seconds its aged cells took when measured (the
//! manifest's `cell_seconds`, what `run --stale --plan` projects).
//! Builds happen in the history worktree ([`super::checkout`]); each
//! (commit, build) is built once.
//!
//! # Layout
//! - [`Dataset`], [`datasets`]: what a dataset's verdict needs from its manifest;
//! - [`judge`]: one commit's verdicts from its changed files and the
//!   identities at both ends (pure, tested apart from any build);
//! - [`run`]: the commits, the builds, a [`Row`] each; [`markdown`].

use super::Commit;
use crate::data::dataset;
use crate::run::certify::{self, Verdict};
use crate::run::runner::{self, Binaries};
use crate::spec::{Scale, Target};
use anyhow::{Context, Result};
use indicatif::MultiProgress;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Variant → binary → identity.
pub type Identities = BTreeMap<String, BTreeMap<String, String>>;

/// A dataset as a verdict reads it.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub name: String,
    pub target: Target,
    /// Timed or memory-sampling builds: measured again whole.
    pub machine_bound: bool,
    /// (cell, variant, seconds it took).
    pub cells: Vec<(String, String, f64)>,
    /// Files its fingerprint lists whose change reaches its binaries only
    /// (sources, build files).
    pub builds_from: BTreeSet<String>,
    /// Files whose change ages it whatever the binaries (its spec, peers' files).
    pub reads: BTreeSet<String>,
}

impl Dataset {
    fn variants(&self) -> BTreeSet<&str> {
        self.cells.iter().map(|(_, v, _)| v.as_str()).collect()
    }
}

/// The newest run of every spec at `scale` that has a fingerprint.
pub fn datasets(data: &Path, scale: Scale) -> Result<Vec<Dataset>> {
    let mut out = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(data)
        .with_context(|| format!("reading {}", data.display()))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let Some(dir) = dataset::latest_run(data, &name, scale)? else { continue };
        let m = dataset::load_run_manifest(&dir)?;
        let Some(fp) = &m.fingerprint else { continue };
        let cells = runner::plan(&m.spec, scale)?
            .into_iter()
            .map(|p| {
                let secs = m.cell_seconds.get(&p.id).copied().unwrap_or(0.0);
                (p.id, p.variant, secs)
            })
            .collect();
        let (mut builds_from, mut reads) = (BTreeSet::new(), BTreeSet::new());
        for key in fp.inputs.keys() {
            if let Some(f) = key.strip_prefix("src:") {
                builds_from.insert(f.to_string());
            } else if let Some(f) = key.strip_prefix("file:") {
                if crate::run::fingerprint::reaches_binaries_only(key) {
                    builds_from.insert(f.to_string());
                } else {
                    reads.insert(f.to_string());
                }
            }
        }
        reads.insert(m.spec_path.clone());
        out.push(Dataset {
            name: m.experiment.clone(),
            target: m.spec.target,
            machine_bound: runner::machine_bound(&m.spec, scale),
            cells,
            builds_from,
            reads,
        });
    }
    Ok(out)
}

/// What one side of the comparison ages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aged {
    pub datasets: Vec<String>,
    pub cells: usize,
    pub seconds: f64,
}

impl Aged {
    fn add(&mut self, d: &Dataset, cells: &[&(String, String, f64)]) {
        self.datasets.push(d.name.clone());
        self.cells += cells.len();
        self.seconds += cells.iter().map(|c| c.2).sum::<f64>();
    }
}

/// Whether `d` ages by its sources, and whether only through its binaries.
fn by_sources(d: &Dataset, changed: &BTreeSet<String>) -> (bool, bool) {
    let reads = changed.iter().any(|f| d.reads.contains(f));
    let builds = changed.iter().any(|f| d.builds_from.contains(f));
    (reads || builds, builds && !reads)
}

/// The datasets whose binaries a verdict by the code needs built: those
/// aged by their sources through their binaries alone.
pub fn to_build<'a>(all: &'a [Dataset], changed: &BTreeSet<String>) -> Vec<&'a Dataset> {
    all.iter().filter(|d| by_sources(d, changed) == (true, true)).collect()
}

/// One commit's two verdicts: `changed`, the files it changed; `parent`
/// and `child`, the identities of the builds of [`to_build`]'s datasets
/// at its parent and at it, by target.
pub fn judge(
    all: &[Dataset],
    changed: &BTreeSet<String>,
    parent: &BTreeMap<Target, Identities>,
    child: &BTreeMap<Target, Identities>,
) -> (Aged, Aged) {
    let (mut before, mut after) = (Aged::default(), Aged::default());
    let empty = Identities::new();
    for d in all {
        let (aged, binaries_only) = by_sources(d, changed);
        if !aged {
            continue;
        }
        let every: Vec<&(String, String, f64)> = d.cells.iter().collect();
        before.add(d, &every);
        if !binaries_only {
            after.add(d, &every);
            continue;
        }
        let pairs: Vec<(String, String)> = d.cells.iter().map(|(c, v, _)| (c.clone(), v.clone())).collect();
        let (then, now) = (parent.get(&d.target).unwrap_or(&empty), child.get(&d.target).unwrap_or(&empty));
        match certify::compare(&pairs, then, now) {
            Verdict::Identical { .. } => {}
            Verdict::Changed { cells, .. } if !d.machine_bound => {
                let some: Vec<&(String, String, f64)> = d.cells.iter().filter(|c| cells.contains(&c.0)).collect();
                after.add(d, &some);
            }
            _ => after.add(d, &every),
        }
    }
    (before, after)
}

/// One commit's line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    pub commit: Commit,
    pub files: usize,
    pub before: Aged,
    pub after: Aged,
    /// Builds compared (each at both ends).
    pub builds: usize,
}

/// The files `commit` changed, the lock file left out when what the
/// measured binaries can link of it is the same at both ends
/// ([`crate::run::lock::closure`], as a fingerprint judges it).
fn changed_files(root: &Path, commit: &str) -> Result<BTreeSet<String>> {
    use crate::run::lock;
    let parent = format!("{commit}^");
    let text = super::git(root, &["diff", "--name-only", &parent, commit])?;
    let mut files: BTreeSet<String> = text.lines().filter(|l| !l.is_empty()).map(String::from).collect();
    if files.contains("Cargo.lock") {
        let at = |rev: &str| super::git(root, &["show", &format!("{rev}:Cargo.lock")]);
        let (a, b) = (at(&parent)?, at(commit)?);
        if lock::closure(&a, &lock::roots())? == lock::closure(&b, &lock::roots())? {
            files.remove("Cargo.lock");
        }
    }
    Ok(files)
}

/// Those of `commits` that changed a file some dataset of `all` lists:
/// the others age none, either way.
pub fn touching(root: &Path, all: &[Dataset], commits: &[Commit]) -> Result<Vec<Commit>> {
    let listed: BTreeSet<&String> = all.iter().flat_map(|d| d.builds_from.iter().chain(&d.reads)).collect();
    let mut out = Vec::new();
    for c in commits {
        if changed_files(root, &c.hash)?.iter().any(|f| listed.contains(f)) {
            out.push(c.clone());
        }
    }
    Ok(out)
}

/// The identities of every build of `needed` at `commit` (a full hash),
/// built in the history worktree (memoised in `cache` by commit and build,
/// which is saved after each build).
fn identities_at(
    root: &Path,
    commit: &str,
    needed: &BTreeSet<(Target, String)>,
    cache: &mut Cache,
    multi: &MultiProgress,
) -> Result<BTreeMap<Target, Identities>> {
    let missing: Vec<&(Target, String)> =
        needed.iter().filter(|(t, v)| !cache.contains_key(&(commit.to_string(), *t, v.clone()))).collect();
    if !missing.is_empty() {
        let wt = super::checkout(root, commit)?;
        let mut bins = Binaries::default();
        for (t, v) in missing {
            bins.get(&wt, *t, v, multi).with_context(|| format!("building {v} at {commit}"))?;
            let ids = bins.identities(*t, v).context("a build without identities")?.clone();
            cache.insert((commit.to_string(), *t, v.clone()), ids);
            save_cache(root, cache)?;
        }
    }
    let mut out: BTreeMap<Target, Identities> = BTreeMap::new();
    for (t, v) in needed {
        let ids = cache[&(commit.to_string(), *t, v.clone())].clone();
        out.entry(*t).or_default().insert(v.clone(), ids);
    }
    Ok(out)
}

/// Where the identities built so far are kept, so that a run cut short
/// (a session's end) resumes without building them again.
fn cache_path(root: &Path) -> std::path::PathBuf {
    root.join("target/history/aging-identities.json")
}

/// (commit, target, variant) of a build.
type Build = (String, Target, String);
/// A build's binaries → identity, by build.
type Cache = BTreeMap<Build, BTreeMap<String, String>>;

fn load_cache(root: &Path) -> Cache {
    let Ok(text) = std::fs::read_to_string(cache_path(root)) else { return Cache::new() };
    let rows: Vec<(Build, BTreeMap<String, String>)> = serde_json::from_str(&text).unwrap_or_default();
    rows.into_iter().collect()
}

fn save_cache(root: &Path, cache: &Cache) -> Result<()> {
    let rows: Vec<(&Build, &BTreeMap<String, String>)> = cache.iter().collect();
    dataset::write_atomic(&cache_path(root), serde_json::to_string(&rows)?.as_bytes())
}

/// A [`Row`] for every commit of `commits` that ages a dataset by its
/// sources (the others age none either way and are left out); each row is
/// said as it is judged, and every build's identities kept on disk as they
/// come, so that a run cut short resumes where it stopped.
pub fn run(
    root: &Path,
    all: &[Dataset],
    commits: &[Commit],
    multi: &MultiProgress,
    say: &dyn Fn(String),
) -> Result<Vec<Row>> {
    let mut cache = load_cache(root);
    let mut rows = Vec::new();
    for c in commits {
        let changed = changed_files(root, &c.hash)?;
        let build = to_build(all, &changed);
        let needed: BTreeSet<(Target, String)> =
            build.iter().flat_map(|d| d.variants().into_iter().map(|v| (d.target, v.to_string()))).collect();
        say(format!("{} {}: {} files, {} builds to compare", c.short(), c.subject, changed.len(), needed.len()));
        let parent_rev = super::git(root, &["rev-parse", &format!("{}^", c.hash)])?;
        let parent = identities_at(root, &parent_rev, &needed, &mut cache, multi)?;
        let child = identities_at(root, &c.hash, &needed, &mut cache, multi)?;
        let (before, after) = judge(all, &changed, &parent, &child);
        if before.datasets.is_empty() {
            continue;
        }
        let row = Row { commit: c.clone(), files: changed.len(), before, after, builds: needed.len() };
        say(markdown(std::slice::from_ref(&row)).lines().last().unwrap_or_default().to_string());
        rows.push(row);
    }
    Ok(rows)
}

/// The rows as a Markdown table: per commit, datasets, cells and the
/// seconds of cells each judgement would measure again.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| commit | subject | files | by sources: datasets | cells | seconds | by the code that ran: datasets | cells | seconds | builds compared |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let subject: String = r.commit.subject.chars().take(60).collect();
        out += &format!(
            "| {} | {} | {} | {} | {} | {:.0} | {} | {} | {:.0} | {} |\n",
            r.commit.short(),
            subject.replace('|', "/"),
            r.files,
            r.before.datasets.len(),
            r.before.cells,
            r.before.seconds,
            r.after.datasets.len(),
            r.after.cells,
            r.after.seconds,
            r.builds
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(name: &str, target: Target, machine_bound: bool, variants: &[&str]) -> Dataset {
        Dataset {
            name: name.into(),
            target,
            machine_bound,
            cells: variants.iter().map(|v| (format!("{name}-{v}-r0"), v.to_string(), 10.0)).collect(),
            builds_from: ["workbench/zap/src/lib.rs".to_string(), "Cargo.lock".to_string()].into(),
            reads: [format!("experiments/{name}.toml")].into(),
        }
    }

    fn ids(pairs: &[(&str, &str)]) -> Identities {
        pairs.iter().map(|(v, id)| (v.to_string(), [("subject".to_string(), id.to_string())].into())).collect()
    }

    #[test]
    fn identical_binaries_age_nothing_a_changed_build_ages_its_cells_and_a_spec_ages_all() {
        let all = [
            dataset("counts", Target::Subject, false, &["dhat", "jemalloc"]),
            dataset("timed", Target::Subject, true, &["system", "dhat"]),
        ];
        let src: BTreeSet<String> = ["workbench/zap/src/lib.rs".to_string()].into();
        assert_eq!(to_build(&all, &src).len(), 2);
        let same = BTreeMap::from([(Target::Subject, ids(&[("dhat", "a"), ("jemalloc", "b"), ("system", "c")]))]);
        let (before, after) = judge(&all, &src, &same, &same);
        assert_eq!((before.datasets.len(), before.cells, before.seconds), (2, 4, 40.0));
        assert_eq!(after, Aged::default(), "a source edit that leaves every binary identical ages nothing");

        // The dhat build changed: the count-only dataset ages in its dhat
        // cell alone, the timed one whole.
        let other = BTreeMap::from([(Target::Subject, ids(&[("dhat", "A"), ("jemalloc", "b"), ("system", "c")]))]);
        let (_, after) = judge(&all, &src, &same, &other);
        assert_eq!(after.datasets, ["counts", "timed"]);
        assert_eq!((after.cells, after.seconds), (3, 30.0));

        // A spec ages its dataset whole, binaries or not; an unrelated file nothing.
        let spec: BTreeSet<String> = ["experiments/counts.toml".to_string()].into();
        assert!(to_build(&all, &spec).is_empty());
        let (before, after) = judge(&all, &spec, &same, &same);
        assert_eq!((before.cells, after.cells, after.datasets.clone()), (2, 2, vec!["counts".to_string()]));
        let none: BTreeSet<String> = ["README.md".to_string()].into();
        assert_eq!(judge(&all, &none, &same, &same), (Aged::default(), Aged::default()));
    }
}
