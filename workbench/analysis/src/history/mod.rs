//! Runs across commits. `workbench history SPEC --commits A..B` runs a
//! spec at every commit of a range, as `asv run A..B` does, keeping one
//! dataset per commit; the report plots every metric of every cell against
//! the commits and flags a change: any change of an exact count, a timing's
//! only when Mann–Whitney U calls it significant ([`crate::inspect::compare`]).
//! `workbench bisect` ([`bisect`]) finds the first commit where an exact
//! count changed.
//!
//! Each commit is checked out in one git worktree (`target/history/worktree`)
//! and its target binaries built there by this workbench's runner, with the
//! spec as it is now, so every commit runs the same cells. The worktree
//! has its own build directory (see [`Measure::at`]): its first build
//! compiles the dependencies, later commits only the workspace's own
//! crates. The binaries are stamped with the commit and checked.
//!
//! ```text
//! data/history/<commit>/<dataset>/<scale>-<time>/      the spec's run at that commit
//! data/history/<commit>/<dataset>/failed-<scale>.txt   why it has none (a build or a cell failed)
//! data/history/bisect/<commit>/<dataset>/<scale>-<time>/  a bisection's one-cell run
//! data/history/<dataset>-<scale>.json                   the commits of its history, oldest first
//! ```
//!
//! # Layout
//! - this file: git, the worktree, measuring one commit, the history
//!   command and its index.
//! - [`bisect`]: the search, the value of one cell's metric, the command.
//! - [`aging`]: what each commit of a range ages, judged by the sources
//!   and by the code that ran (`workbench aging A..B`).

pub mod aging;
pub mod bisect;

use crate::data::dataset;
use crate::run::runner::{self, Planned};
use crate::spec::{Scale, Spec};
use anyhow::{bail, Context, Result};
use indicatif::MultiProgress;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One commit: full hash, subject line, committer time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    pub hash: String,
    pub subject: String,
    /// Committer time, Unix seconds (orders the history).
    pub time: u64,
}

impl Commit {
    pub fn short(&self) -> &str {
        &self.hash[..self.hash.len().min(9)]
    }
}

/// A spec's history at one scale: the commits it was run at, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Index {
    pub dataset: String,
    pub scale: Scale,
    pub commits: Vec<Commit>,
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git").current_dir(root).args(args).output().context("running git")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commits of `range` (`A..B`, or one commit), oldest first.
pub fn commits(root: &Path, range: &str) -> Result<Vec<Commit>> {
    let args: Vec<&str> = if range.contains("..") {
        vec!["log", "--reverse", "--format=%H%x09%ct%x09%s", range]
    } else {
        vec!["log", "-1", "--format=%H%x09%ct%x09%s", range]
    };
    let text = git(root, &args).with_context(|| format!("listing the commits of {range:?}"))?;
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let (hash, time, subject) = (f.next(), f.next(), f.next());
            Ok(Commit {
                hash: hash.context("git log: no hash")?.to_string(),
                time: time.context("git log: no time")?.parse().context("git log: commit time")?,
                subject: subject.unwrap_or_default().to_string(),
            })
        })
        .collect()
}

/// `n` of `commits`, evenly spaced, the last always among them.
pub fn sample(commits: &[Commit], n: usize) -> Vec<Commit> {
    if n == 0 || commits.len() <= n {
        return commits.to_vec();
    }
    let last = commits.len() - 1;
    let mut idx: Vec<usize> = (0..n).map(|i| last - (n - 1 - i) * last / (n - 1).max(1)).collect();
    idx.dedup();
    idx.into_iter().map(|i| commits[i].clone()).collect()
}

/// The worktree the commits are checked out in.
pub fn worktree(root: &Path) -> PathBuf {
    root.join("target/history/worktree")
}

/// Checks `commit` out in the worktree (created on first use); untracked
/// files are removed, ignored ones (its `target/`) kept.
pub fn checkout(root: &Path, commit: &str) -> Result<PathBuf> {
    let wt = worktree(root);
    if !wt.join(".git").exists() {
        let _ = git(root, &["worktree", "prune"]);
        std::fs::create_dir_all(wt.parent().unwrap_or(root))?;
        let path = wt.display().to_string();
        git(root, &["worktree", "add", "--detach", "--force", &path, commit])?;
    } else {
        git(&wt, &["checkout", "--quiet", "--detach", "--force", commit])?;
        git(&wt, &["clean", "-fdq"])?;
    }
    Ok(wt)
}

/// Where a commit's runs live.
pub fn commit_data(data: &Path, commit: &str) -> PathBuf {
    data.join("history").join(commit)
}

fn index_path(data: &Path, dataset: &str, scale: Scale) -> PathBuf {
    data.join("history").join(format!("{dataset}-{scale}.json"))
}

/// Every history index under `data`.
pub fn indexes(data: &Path) -> Result<Vec<Index>> {
    let dir = data.join("history");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for p in paths {
        let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        out.push(serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?);
    }
    Ok(out)
}

/// Adds commits to a spec's history index, ordered by commit time.
fn record(data: &Path, dataset: &str, scale: Scale, add: &[Commit]) -> Result<()> {
    let path = index_path(data, dataset, scale);
    let mut index: Index = match std::fs::read_to_string(&path) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("parsing {}", path.display()))?,
        Err(_) => Index { dataset: dataset.into(), scale, commits: Vec::new() },
    };
    for c in add {
        if !index.commits.iter().any(|x| x.hash == c.hash) {
            index.commits.push(c.clone());
        }
    }
    index.commits.sort_by_key(|c| c.time);
    dataset::write_atomic(&path, serde_json::to_string_pretty(&index)?.as_bytes())
}

/// Why a commit has no run, if it failed.
pub fn failure(data: &Path, commit: &str, dataset: &str, scale: Scale) -> Option<String> {
    std::fs::read_to_string(commit_data(data, commit).join(dataset).join(format!("failed-{scale}.txt"))).ok()
}

/// What runs a spec at a commit.
pub struct Measure<'a> {
    pub root: &'a Path,
    pub spec_path: &'a Path,
    pub spec: &'a Spec,
    pub scale: Scale,
    pub multi: &'a MultiProgress,
}

impl Measure<'_> {
    /// Runs the spec's cells that `keep` accepts at `commit`, into
    /// `data_dir`; the run's directory.
    pub fn at(&self, commit: &str, data_dir: &Path, keep: &dyn Fn(&Planned) -> bool) -> Result<PathBuf> {
        let wt = checkout(self.root, commit)?;
        // NOTE: the worktree builds in a directory of its own, never the main
        // tree's. Cargo hashes a path package relative to its workspace root,
        // so the worktree's crates and the main tree's are the same units:
        // sharing the build directory once left the probe's revision stamp of
        // a bisected commit in the main build, and the next test run's
        // binaries named that commit (the runner's revision check refused
        // them). The first commit compiles the dependencies once (minutes);
        // the next ones only their own crates.
        std::env::set_var("CARGO_BUILD_BUILD_DIR", wt.join("target"));
        let opts = runner::Options {
            root: wt,
            data: data_dir.to_path_buf(),
            scale: self.scale,
            fresh: false,
            allow_dirty: false,
            command_line: std::env::args().collect(),
            pair_counting: false,
            records: crate::data::dataset::parquet_sink,
        };
        let mut bins = runner::Binaries::default();
        let out = runner::run_spec_where(&opts, self.spec_path, self.spec, &mut bins, self.multi, keep)?;
        Ok(out.dir)
    }
}

/// What `workbench history` did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub measured: Vec<Commit>,
    pub reused: Vec<Commit>,
    pub failed: Vec<(Commit, String)>,
}

/// Runs the spec at each of `commits` that has no run yet at this scale
/// (an interrupted history resumes); a commit whose build or cells fail is
/// recorded as failed and the history goes on.
pub fn run(m: &Measure<'_>, data: &Path, commits: &[Commit], say: &dyn Fn(String)) -> Result<Outcome> {
    let dataset = m.spec.dataset();
    let mut out = Outcome::default();
    for (i, c) in commits.iter().enumerate() {
        let dir = commit_data(data, &c.hash);
        let head = format!("[{}/{}] {} {}", i + 1, commits.len(), c.short(), c.subject);
        if dataset::latest_run(&dir, dataset, m.scale)?.is_some() {
            say(format!("{head}: measured before"));
            out.reused.push(c.clone());
            record(data, dataset, m.scale, std::slice::from_ref(c))?;
            continue;
        }
        let started = std::time::Instant::now();
        let failed = dir.join(dataset).join(format!("failed-{}.txt", m.scale));
        match m.at(&c.hash, &dir, &|_| true) {
            Ok(_) => {
                let _ = std::fs::remove_file(&failed);
                say(format!("{head}: measured in {:.0} s", started.elapsed().as_secs_f64()));
                out.measured.push(c.clone());
            }
            Err(e) => {
                let why = format!("{e:#}");
                std::fs::create_dir_all(failed.parent().unwrap_or(&dir))?;
                std::fs::write(&failed, &why).with_context(|| format!("writing {}", failed.display()))?;
                say(format!("{head}: FAILED ({})", why.lines().next().unwrap_or("")));
                out.failed.push((c.clone(), why));
            }
        }
        // Written after every commit: an interrupted history keeps what it measured.
        record(data, dataset, m.scale, std::slice::from_ref(c))?;
    }
    Ok(out)
}

/// The run of `index`'s dataset at each of its commits (`None`: failed or
/// not measured), oldest first.
pub fn runs_of(data: &Path, index: &Index) -> Result<Vec<(Commit, Option<PathBuf>)>> {
    index
        .commits
        .iter()
        .map(|c| Ok((c.clone(), dataset::latest_run(&commit_data(data, &c.hash), &index.dataset, index.scale)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(i: usize) -> Commit {
        Commit { hash: format!("{i:040}"), subject: format!("c{i}"), time: i as u64 }
    }

    #[test]
    fn a_sample_is_even_and_keeps_the_last() {
        let all: Vec<Commit> = (0..10).map(c).collect();
        let s: Vec<u64> = sample(&all, 4).iter().map(|c| c.time).collect();
        assert_eq!(s, vec![0, 3, 6, 9]);
        assert_eq!(sample(&all, 0).len(), 10);
        assert_eq!(sample(&all, 20).len(), 10);
        assert_eq!(sample(&all, 1).iter().map(|c| c.time).collect::<Vec<_>>(), vec![9]);
    }

    #[test]
    fn the_commits_of_a_range_are_oldest_first() {
        let root = crate::default_root();
        // Three on the first-parent line, more where a merge brings its side's.
        let Ok(all) = commits(&root, "HEAD~3..HEAD") else { return }; // a shallow clone
        let n: usize = git(&root, &["rev-list", "--count", "HEAD~3..HEAD"]).unwrap().trim().parse().unwrap();
        assert!(n >= 3);
        assert_eq!(all.len(), n);
        assert!(all.windows(2).all(|w| w[0].time <= w[1].time));
        assert_eq!(all.last().unwrap().hash, git(&root, &["rev-parse", "HEAD"]).unwrap());
    }
}
