//! What the tree keeps of `data/`: per experiment and scale, the newest run
//! and every run a tracked file outside `data/` cites by its id (a table,
//! the paper's provenance, a claim, the gate, a history index). Older runs
//! leave the tree ([`prune`]) and are listed in [`LEDGER`] with the last
//! commit that held them, from which [`restore`] brings one back.
//!
//! NOTE: a run is cited by its id (`full-20261207T090407Z`), which is
//! unique within an experiment and, in practice, across them; a citation
//! keeps every run of that id.

use crate::data::dataset;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The list of pruned runs, under `data/`: `<experiment>/<run>`, the last
/// commit that held it, and when it was pruned, tab-separated.
pub const LEDGER: &str = "PRUNED.tsv";

/// One run the tree no longer keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// `<experiment>/<run id>`.
    pub run: String,
    pub bytes: u64,
}

/// Run ids a tracked file outside `data/` names (`git grep`).
pub fn cited(root: &Path) -> Result<BTreeSet<String>> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["grep", "-ohE", r"(full|quick)-[0-9]{8}T[0-9]{6}Z", "--", ".", ":!data"])
        .output()
        .context("running git grep for cited runs")?;
    // Exit 1: no match.
    if !out.status.success() && out.status.code() != Some(1) {
        bail!("git grep failed in {}: {}", root.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect())
}

/// The runs under `data` the tree need not keep, oldest first: neither the
/// newest of their experiment and scale nor `cited`.
pub fn candidates(data: &Path, cited: &BTreeSet<String>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(data) else { return Ok(out) };
    let mut exps: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    exps.sort();
    for exp in exps {
        let name = exp.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for scale in crate::spec::Scale::PREFERRED {
            let mut runs = dataset::runs(data, &name, scale)?;
            runs.pop();
            out.extend(
                runs.into_iter()
                    .filter(|r| !r.file_name().is_some_and(|n| cited.contains(n.to_string_lossy().as_ref()))),
            );
        }
    }
    // Oldest first, whatever the scale: `<scale>-<UTC time>`.
    out.sort_by_key(|p| {
        let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        n.split_once('-').map(|(_, t)| t.to_string()).unwrap_or(n)
    });
    Ok(out)
}

/// Removes the [`candidates`] from the tree, oldest first, as many as fit
/// in `limit` bytes (a session's submission is bounded: a run too large for
/// what is left is passed over for the smaller ones after it), and lists each
/// in [`LEDGER`] with HEAD, the last commit that held it. Nothing is
/// removed with `dry_run`.
pub fn prune(root: &Path, data: &Path, limit: Option<u64>, dry_run: bool) -> Result<Vec<Pruned>> {
    let cited = cited(root)?;
    let (head, _) = crate::data::host::git_state(root);
    let date = crate::data::host::iso_date(crate::data::host::now_secs());
    let mut done = Vec::new();
    let mut total = 0;
    let mut ledger = String::new();
    for run in candidates(data, &cited)? {
        let bytes = dir_bytes(&run)?;
        if limit.is_some_and(|l| total + bytes > l) {
            continue;
        }
        total += bytes;
        let rel = run.strip_prefix(data).unwrap_or(&run).to_string_lossy().into_owned();
        if !dry_run {
            std::fs::remove_dir_all(&run).with_context(|| format!("removing {}", run.display()))?;
            ledger += &format!("{rel}\t{head}\t{date}\n");
        }
        done.push(Pruned { run: rel, bytes });
    }
    if !ledger.is_empty() {
        use std::io::Write;
        let path = data.join(LEDGER);
        let new = !path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if new {
            f.write_all(b"run\tlast commit holding it\tpruned\n")?;
        }
        f.write_all(ledger.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(done)
}

/// The commit [`LEDGER`] names for `run` (`<experiment>/<run id>`).
pub fn last_commit(data: &Path, run: &str) -> Result<Option<String>> {
    let path = data.join(LEDGER);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(None) };
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .find(|(r, _)| *r == run)
        .map(|(_, rest)| rest.split('\t').next().unwrap_or_default().to_string()))
}

/// Brings pruned `run` (`<experiment>/<run id>`) back under `data` from the
/// last commit that held it; the directory written.
pub fn restore(root: &Path, data: &Path, run: &str) -> Result<PathBuf> {
    let Some(commit) = last_commit(data, run)? else {
        bail!("{run}: not in {} (pruned runs are listed there)", data.join(LEDGER).display());
    };
    let rel = data.strip_prefix(root).unwrap_or(data).join(run);
    let to = data.join(run);
    if to.exists() {
        bail!("{}: already in the tree", to.display());
    }
    let archive = Command::new("git")
        .current_dir(root)
        .args(["archive", "--format=tar", &commit, "--"])
        .arg(&rel)
        .output()
        .with_context(|| format!("running git archive {commit}"))?;
    if !archive.status.success() {
        bail!("git archive {commit} {}: {}", rel.display(), String::from_utf8_lossy(&archive.stderr).trim());
    }
    let mut tar = Command::new("tar")
        .current_dir(root)
        .args(["-x", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("running tar")?;
    {
        use std::io::Write;
        tar.stdin.take().expect("piped").write_all(&archive.stdout).context("writing to tar")?;
    }
    if !tar.wait().context("waiting for tar")?.success() {
        bail!("tar could not unpack {} from {commit}", rel.display());
    }
    Ok(to)
}

/// The bytes of the files under `dir` that git holds: traces unpacked
/// beside their archive are not ([`crate::data::traces`]).
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        if crate::data::traces::unpacked_beside_archive(dir, &e.path()) {
            continue;
        }
        let t = e.file_type()?;
        n += if t.is_dir() { dir_bytes(&e.path())? } else { e.metadata()?.len() };
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_run_of_each_scale_and_every_cited_run_stay() {
        let data = std::env::temp_dir().join(format!("prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data);
        let runs =
            ["full-20261201T000000Z", "full-20261202T000000Z", "full-20261203T000000Z", "quick-20261201T000000Z"];
        for r in runs {
            let d = data.join("heap-growth").join(r);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("manifest.json"), "{}").unwrap();
        }
        let cited: BTreeSet<String> = ["full-20261201T000000Z".to_string()].into();
        let names: Vec<String> = candidates(&data, &cited)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["full-20261202T000000Z"]);
        assert_eq!(candidates(&data, &BTreeSet::new()).unwrap().len(), 2);
        std::fs::remove_dir_all(&data).ok();
    }
}
