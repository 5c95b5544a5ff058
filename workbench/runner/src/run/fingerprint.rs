//! A fingerprint of exactly what a dataset measured, and whether the code
//! would still measure the same: the evidence's `git status`.
//!
//! Inputs, each with its hash, in the manifest ([`Fingerprint`]):
//! - `src:<path>`: every workspace source file the measured binaries (and
//!   the server's driver) were compiled from, as cargo lists them in the
//!   dep-info file beside each binary it builds (no hand-kept list);
//! - `file:Cargo.lock`, judged by what the measured binaries can link of it
//!   ([`crate::run::lock`]: a change to the analysis side's packages does
//!   not age a dataset), and `file:<path>` for every file a cell executes
//!   that the spec names (a peer's script, a peer's binary such as
//!   `/usr/sbin/clickhouse-server`); a peer run in `.venv` also brings
//!   `file:scripts/requirements-peers.txt`, the pins it was installed from;
//! - `features`: the features cargo resolves over the workspace for every
//!   package the measured binaries link ([`crate::run::lock::resolved_features`]);
//! - `rustc`: the compiler's version;
//! - `variant:<name>`: the variant's definition (features, allocator,
//!   profile settings, PGO/BOLT steps);
//! - `spec`: the spec as parsed and run at the run's scale (the other
//!   scale's settings left out: a quick parameter does not age a full run).
//!
//! A file's hash is its git blob id (`git hash-object`), so that the first
//! commit that changed it can be found; a fact's is the text itself. The
//! fingerprint's own hash is the blob id of its listing.
//!
//! A dataset is *fresh* when every input hashes now as it did; *sources*
//! when only inputs that reach its binaries changed and their identities
//! are on record ([`crate::run::identity`]: `run --stale` builds and
//! compares); *stale* when the spec or a peer changed, or its binaries'
//! identities were not kept; *unknown*, naming the input and why, when an
//! input cannot be computed here (never counted as a change) or the
//! manifest has no fingerprint.

use crate::run::lock;
use crate::spec::{variants, Scale, Spec};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use crate::data::manifest::Fingerprint;

/// Where a file that does not exist stands in the inputs.
const MISSING: &str = "missing";

/// The lock file's input ([`lock::closure`] judges a change to it).
const LOCK: &str = "file:Cargo.lock";

/// The resolved features' input ([`lock::resolved_features`]).
const FEATURES: &str = "features";

/// The build files every measured binary is built by: the lock file (its
/// change judged by what the binaries link, [`lock::links_same`]), the
/// workspace manifest (profiles) and cargo's configuration (the reference
/// build's flags).
pub const BUILD_FILES: [&str; 3] = ["Cargo.lock", "Cargo.toml", ".cargo/config.toml"];

/// What a run of one spec depends on, as files in the tree: computed once
/// per run ([`Inputs::of`]) and read by the dirty refusal
/// ([`crate::run::provenance::check_clean`]), the staging key
/// ([`crate::run::runner::staging_dir`]), the stored diff and the
/// fingerprint ([`compute`]), so that "may this tree be measured" and "is
/// this dataset fresh" are one question. The fingerprint adds what only a
/// build knows (the sources cargo lists per binary), the features, the
/// compiler and the variants' definitions; a run adds each binary's
/// identity ([`crate::run::identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// The measured crates' directories, relative to the root ([`measured_crates`]).
    pub crates: Vec<String>,
    /// The spec file, relative to the root (none: a spec outside the tree).
    pub spec: Option<String>,
    /// The files the cells execute that the spec names ([`peer_files`]):
    /// relative to the root, or absolute for a peer outside it.
    pub peers: BTreeSet<String>,
}

impl Inputs {
    /// The inputs of a run of `spec` (from `spec_path`) at `scale` in the tree at `root`.
    pub fn of(root: &Path, spec_path: &Path, spec: &Spec, scale: Scale) -> Result<Inputs> {
        let root_abs = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let spec_abs = spec_path.canonicalize().unwrap_or_else(|_| spec_path.to_path_buf());
        Ok(Inputs {
            crates: measured_crates(root)?,
            spec: spec_abs.strip_prefix(&root_abs).ok().map(|r| r.to_string_lossy().into_owned()),
            peers: peer_files(root, spec, scale),
        })
    }

    /// The files and folders in the tree whose content decides what the
    /// run measures: the measured crates, the build files, the spec and
    /// the peers in the tree. Generated outputs (figures, `paper/`, the
    /// site, other datasets) are not among them: they never make a
    /// measurement unreproducible.
    pub fn paths(&self) -> Vec<String> {
        let mut paths = self.crates.clone();
        paths.extend(BUILD_FILES.map(String::from));
        paths.extend(self.spec.clone());
        paths.extend(self.peers.iter().filter(|p| !p.starts_with('/')).cloned());
        paths
    }
}

/// The workspace packages whose code the measured binaries are compiled
/// from: the targets' packages (the subject's, the server's) and every
/// workspace crate they depend on (not through dev-dependencies), as
/// directories relative to `root`, from `cargo metadata` (no hand-kept list).
pub fn measured_crates(root: &Path) -> Result<Vec<String>> {
    let meta = lock::cargo_metadata(root, &["--no-deps"])?;
    let packages = meta["packages"].as_array().context("cargo metadata: no packages")?;
    let dir_of = |p: &serde_json::Value| -> Option<PathBuf> {
        Path::new(p["manifest_path"].as_str()?).parent().map(Path::to_path_buf)
    };
    let by_dir: BTreeMap<PathBuf, &serde_json::Value> = packages.iter().filter_map(|p| Some((dir_of(p)?, p))).collect();
    let mut todo: Vec<PathBuf> =
        packages.iter().filter(|p| lock::roots().iter().any(|r| p["name"] == *r)).filter_map(dir_of).collect();
    let mut seen = BTreeSet::new();
    while let Some(dir) = todo.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Some(p) = by_dir.get(&dir) else { continue };
        for d in p["dependencies"].as_array().into_iter().flatten() {
            if d["kind"] == "dev" {
                continue;
            }
            if let Some(path) = d["path"].as_str() {
                todo.push(PathBuf::from(path));
            }
        }
    }
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    Ok(seen.iter().filter_map(|d| Some(d.strip_prefix(&root).ok()?.to_string_lossy().into_owned())).collect())
}

/// The workspace sources (relative to `root`) cargo lists in the dep-info
/// files beside `bins` ([`dep_info`]): the crates' own files, not the
/// registry's (the lock file pins those), not generated files under
/// `target/`, not `.git/` (a revision stamp's trigger).
pub fn sources(root: &Path, bins: &[PathBuf]) -> Sources {
    let mut out = Sources::default();
    for bin in bins {
        let d = dep_info(bin);
        let Ok(text) = std::fs::read_to_string(&d) else {
            out.without_dep_info.insert(bin.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
            continue;
        };
        for path in dep_info_paths(&text) {
            let p = PathBuf::from(&path);
            let Ok(rel) = p.strip_prefix(root) else { continue };
            let rel = rel.to_string_lossy().into_owned();
            if rel.starts_with(".git/") || rel.starts_with("target/") {
                continue;
            }
            out.files.insert(rel);
        }
    }
    out
}

/// What the measured binaries were compiled from ([`sources`]).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub files: BTreeSet<String>,
    /// Binaries cargo wrote no dep-info for (a post-linked one): their
    /// sources are not known, and the fingerprint says so.
    pub without_dep_info: BTreeSet<String>,
}

impl Sources {
    pub fn extend(&mut self, other: Sources) {
        self.files.extend(other.files);
        self.without_dep_info.extend(other.without_dep_info);
    }
}

/// Cargo's dep-info file for `bin`: beside it, `.d` for the extension.
pub fn dep_info(bin: &Path) -> PathBuf {
    let name = bin.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    bin.with_file_name(format!("{name}.d"))
}

/// The prerequisites of a Makefile-style dep-info file (`target: a b\ c`),
/// its first rule only; `\ ` is a space in a name.
fn dep_info_paths(text: &str) -> Vec<String> {
    let Some(line) = text.lines().next() else { return Vec::new() };
    let Some((_, deps)) = line.split_once(": ") else { return Vec::new() };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            ' ' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Git blob ids of `paths` (relative to `root`, or absolute), in order;
/// [`MISSING`] for a file that does not exist.
pub fn blob_ids(root: &Path, paths: &[String]) -> Result<Vec<String>> {
    let (exist, absent): (Vec<&String>, Vec<&String>) = paths.iter().partition(|p| root.join(p).is_file());
    let mut ids: BTreeMap<&String, String> = absent.into_iter().map(|p| (p, MISSING.to_string())).collect();
    if !exist.is_empty() {
        let mut child = Command::new("git")
            .current_dir(root)
            .args(["hash-object", "--no-filters", "--stdin-paths"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("running git hash-object")?;
        let mut stdin = child.stdin.take().expect("piped");
        let list: String = exist.iter().map(|p| format!("{p}\n")).collect();
        let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
        let out = child.wait_with_output().context("running git hash-object")?;
        writer.join().expect("writer").context("writing to git hash-object")?;
        if !out.status.success() {
            bail!("git hash-object failed in {}", root.display());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() != exist.len() {
            bail!("git hash-object gave {} ids for {} files", lines.len(), exist.len());
        }
        ids.extend(exist.into_iter().zip(lines).map(|(p, id)| (p, id.to_string())));
    }
    Ok(paths.iter().map(|p| ids[p].clone()).collect())
}

/// [`blob_ids`] as of commit `rev`: a tracked file's blob in its tree, any
/// other file's (a peer outside the repository) as it is now.
fn blob_ids_at(root: &Path, rev: &str, paths: &[String]) -> Result<Vec<String>> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["ls-tree", "-r", "--full-tree", rev])
        .output()
        .context("running git ls-tree")?;
    if !out.status.success() {
        bail!("git ls-tree {rev} failed in {}", root.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // `<mode> blob <id>\t<path>`
    let tree: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            Some((path, meta.split(' ').nth(2)?))
        })
        .collect();
    let others: Vec<String> = paths.iter().filter(|p| !tree.contains_key(p.as_str())).cloned().collect();
    let mut other_ids = blob_ids(root, &others)?.into_iter();
    Ok(paths
        .iter()
        .map(|p| match tree.get(p.as_str()) {
            Some(id) => id.to_string(),
            None => other_ids.next().expect("one id a path"),
        })
        .collect())
}

/// The git blob id of `text`.
fn text_id(root: &Path, text: &str) -> Result<String> {
    let mut child = Command::new("git")
        .current_dir(root)
        .args(["hash-object", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("running git hash-object")?;
    child.stdin.take().expect("piped").write_all(text.as_bytes())?;
    let out = child.wait_with_output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The files a cell executes that the spec names in its params at `scale`:
/// strings that are paths of existing files, relative to `root` or
/// absolute; a `.venv` interpreter stands for the pins it was installed from.
pub fn peer_files(root: &Path, spec: &Spec, scale: Scale) -> BTreeSet<String> {
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(t) => t.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for v in spec.scale(scale).params.values() {
        strings(v, &mut found);
    }
    let mut out = BTreeSet::new();
    for s in found {
        if s.starts_with(".venv/") {
            out.insert("scripts/requirements-peers.txt".to_string());
        } else if !s.is_empty() && root.join(&s).is_file() {
            out.insert(s);
        }
    }
    out
}

/// The fingerprint of a run of `spec` (its `variants`, its [`Inputs`])
/// whose binaries were compiled from `sources`.
/// With `at` (the clean revision the run measured), a file's hash is its
/// blob in that commit's tree, whatever the working tree holds by the time
/// the run ends; without (a dirty run), the working tree's.
pub fn compute(
    root: &Path,
    inputs: &Inputs,
    sources: &Sources,
    spec: &Spec,
    scale: Scale,
    rustc: &str,
    at: Option<&str>,
) -> Result<Fingerprint> {
    let mut files: Vec<(String, String)> = sources.files.iter().map(|s| (format!("src:{s}"), s.clone())).collect();
    files.extend(BUILD_FILES.iter().map(|f| (format!("file:{f}"), f.to_string())));
    files.extend(inputs.peers.iter().map(|p| (format!("file:{p}"), p.clone())));
    let paths: Vec<String> = files.iter().map(|(_, p)| p.clone()).collect();
    let ids = match at {
        Some(rev) => blob_ids_at(root, rev, &paths)?,
        None => blob_ids(root, &paths)?,
    };
    let mut inputs: BTreeMap<String, String> = files.into_iter().map(|(k, _)| k).zip(ids).collect();
    inputs.insert("rustc".into(), rustc.to_string());
    inputs.insert(FEATURES.into(), features_id(root));
    for v in spec.variants_at(scale) {
        inputs.insert(format!("variant:{v}"), variant_definition(v));
    }
    inputs.insert("spec".into(), spec_id(root, spec, scale)?);
    for b in &sources.without_dep_info {
        inputs.insert(format!("dep-info:{b}"), MISSING.into());
    }
    seal(root, inputs)
}

/// The `features` input: the blob id of [`lock::resolved_features`], or
/// why it could not be had.
fn features_id(root: &Path) -> String {
    match lock::resolved_features(root).and_then(|t| text_id(root, &t)) {
        Ok(id) => id,
        Err(e) => format!("unknown ({e:#})"),
    }
}

/// [`features_id`] once per root in this process, for the readers that
/// judge many datasets against one tree (`status`, a render): `cargo
/// metadata` takes a second. A run computes its own afresh ([`compute`]).
fn features_id_now(root: &Path) -> String {
    use std::sync::{Mutex, PoisonError};
    static SEEN: Mutex<BTreeMap<PathBuf, String>> = Mutex::new(BTreeMap::new());
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    seen.entry(root.to_path_buf()).or_insert_with(|| features_id(root)).clone()
}

/// The blob id of the spec as run at `scale`: without the other scale's settings.
fn spec_id(root: &Path, spec: &Spec, scale: Scale) -> Result<String> {
    let mut v = serde_json::to_value(spec)?;
    let other = if scale == Scale::Quick { Scale::Full } else { Scale::Quick };
    // The gate's table is not run at a scale either.
    if let Some(m) = v.as_object_mut() {
        m.remove(other.name());
        m.remove("gate");
    }
    text_id(root, &serde_json::to_string(&v)?)
}

/// A variant's definition as the runner builds it.
fn variant_definition(v: &str) -> String {
    format!("{} [features: {}]", variants::describe(v), variants::features(v).join(","))
}

fn seal(root: &Path, inputs: BTreeMap<String, String>) -> Result<Fingerprint> {
    let listing: String = inputs.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    Ok(Fingerprint { hash: text_id(root, &listing)?, inputs })
}

/// The same inputs as `old` (a run at `scale`), hashed as they are now
/// (the spec as `spec` parses now, the compiler `rustc`).
pub fn now(root: &Path, old: &Fingerprint, spec: &Spec, scale: Scale, rustc: &str) -> Result<Fingerprint> {
    let files: Vec<(&String, String)> = old
        .inputs
        .keys()
        .filter_map(|k| k.strip_prefix("src:").or_else(|| k.strip_prefix("file:")).map(|p| (k, p.to_string())))
        .collect();
    let ids = blob_ids(root, &files.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>())?;
    let mut inputs: BTreeMap<String, String> = files.into_iter().map(|(k, _)| k.clone()).zip(ids).collect();
    for k in old.inputs.keys() {
        if k == "rustc" {
            inputs.insert(k.clone(), rustc.to_string());
        } else if let Some(v) = k.strip_prefix("variant:") {
            inputs.insert(k.clone(), variant_definition(v));
        } else if k == "spec" {
            inputs.insert(k.clone(), spec_id(root, spec, scale)?);
        } else if k.starts_with("dep-info:") {
            inputs.insert(k.clone(), old.inputs[k].clone());
        } else if k == FEATURES {
            inputs.insert(k.clone(), features_id_now(root));
        }
    }
    // A lock that changed outside what the measured binaries link.
    if let (Some(then), Some(now)) = (old.inputs.get(LOCK), inputs.get(LOCK)) {
        if then != now && lock::links_same(root, then) {
            inputs.insert(LOCK.into(), then.clone());
        }
    }
    // A peer the spec names now that it did not then.
    for p in peer_files(root, spec, scale) {
        if let std::collections::btree_map::Entry::Vacant(e) = inputs.entry(format!("file:{p}")) {
            e.insert(blob_ids(root, std::slice::from_ref(&p))?.remove(0));
        }
    }
    seal(root, inputs)
}

/// The inputs whose hash differs between `then` and `now` (or that only one has).
pub fn changed(then: &Fingerprint, now: &Fingerprint) -> Vec<String> {
    let keys: BTreeSet<&String> = then.inputs.keys().chain(now.inputs.keys()).collect();
    keys.into_iter().filter(|k| then.inputs.get(*k) != now.inputs.get(*k)).cloned().collect()
}

/// The first commit after `rev` that changed file input `key`
/// (`src:…`/`file:…`), or "uncommitted" when no commit did.
pub fn first_change(root: &Path, rev: &str, key: &str) -> String {
    let Some(path) = key.strip_prefix("src:").or_else(|| key.strip_prefix("file:")) else {
        return "not a file".into();
    };
    let out = Command::new("git")
        .current_dir(root)
        .args(["log", "--reverse", "--format=%h", &format!("{rev}..HEAD"), "--", path])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            String::from_utf8_lossy(&o.stdout).lines().next().map_or_else(|| "uncommitted".to_string(), str::to_string)
        }
        _ => "unknown (revision not in this repository)".into(),
    }
}

/// Whether a dataset's numbers are what the code would measure now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// Every input hashes now as it did.
    Fresh,
    /// Only inputs that reach the measured binaries changed (sources, the
    /// lock file, features, the compiler, a variant's definition), and the
    /// dataset has its binaries' identities on record: `run --stale` builds
    /// them and compares, re-certifying the dataset when every binary is
    /// identical. Each input with the first commit that changed it.
    Sources(Vec<(String, String)>),
    /// Inputs that changed, each with the first commit after the run that
    /// changed it ("uncommitted" for a change not yet committed).
    Stale(Vec<(String, String)>),
    /// Why it cannot be told: the input that cannot be computed here and
    /// why, or no fingerprint. Never counted as a change; a reader is shown
    /// it as not fresh.
    Unknown(String),
}

impl Freshness {
    pub fn is_fresh(&self) -> bool {
        *self == Freshness::Fresh
    }

    /// One word: fresh, sources, stale or unknown.
    pub fn word(&self) -> &'static str {
        match self {
            Freshness::Fresh => "fresh",
            Freshness::Sources(_) => "sources",
            Freshness::Stale(_) => "stale",
            Freshness::Unknown(_) => "unknown",
        }
    }

    /// Why, in a line (empty when fresh).
    pub fn why(&self) -> String {
        let listed = |changed: &[(String, String)]| {
            let shown: Vec<String> = changed.iter().take(4).map(|(k, c)| format!("{k} ({c})")).collect();
            let more = changed.len().saturating_sub(4);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            format!("{} changed: {}{more}", plural(changed.len(), "input"), shown.join(", "))
        };
        match self {
            Freshness::Fresh => String::new(),
            Freshness::Unknown(why) => why.clone(),
            Freshness::Stale(changed) => listed(changed),
            Freshness::Sources(changed) => {
                format!("{}; `run --stale` compares its binaries' identities", listed(changed))
            }
        }
    }
}

/// Whether a change to input `key` can reach only the measured binaries
/// (so that comparing their identities settles it), as opposed to what a
/// cell is asked to do (the spec) or a peer it runs.
pub fn reaches_binaries_only(key: &str) -> bool {
    key.starts_with("src:")
        || key.starts_with("variant:")
        || [FEATURES, "rustc"].contains(&key)
        || key.strip_prefix("file:").is_some_and(|f| BUILD_FILES.contains(&f))
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// An input of `now` that cannot be computed here, and why: the resolved
/// features when `cargo metadata` fails, a peer's file outside the tree
/// that this machine lacks.
fn uncomputable(then: &Fingerprint, now: &Fingerprint) -> Option<String> {
    for (k, v) in &now.inputs {
        let was = then.inputs.get(k);
        if k == FEATURES && v.starts_with("unknown") && was.is_some_and(|w| !w.starts_with("unknown")) {
            return Some(format!("features cannot be computed here: {v}"));
        }
        if let Some(p) = k.strip_prefix("file:") {
            if Path::new(p).is_absolute() && v == MISSING && was.is_some_and(|w| w != MISSING) {
                return Some(format!("{p} is not on this machine, so it cannot be compared"));
            }
        }
    }
    None
}

/// The freshness of the run whose manifest is `m`, measured from the spec
/// at `spec_path` (`spec` as it parses now) in the tree at `root`.
pub fn freshness(
    root: &Path,
    m: &crate::data::manifest::Manifest,
    spec_path: &Path,
    spec: &Spec,
    rustc: &str,
) -> Result<Freshness> {
    let Some(then) = &m.fingerprint else {
        return Ok(Freshness::Unknown("no fingerprint (measured before fingerprints were kept)".into()));
    };
    if let Some(k) = then.inputs.keys().find(|k| k.starts_with("dep-info:")) {
        return Ok(Freshness::Unknown(format!("sources not recorded ({k})")));
    }
    let now = now(root, then, spec, m.scale, rustc)?;
    if let Some(why) = uncomputable(then, &now) {
        return Ok(Freshness::Unknown(why));
    }
    let since = m.judged_at();
    let spec_rel = spec_path.strip_prefix(root).unwrap_or(spec_path).to_string_lossy().into_owned();
    let changed: Vec<(String, String)> = changed(then, &now)
        .into_iter()
        .map(|k| {
            let first = match k.as_str() {
                "spec" => first_change(root, since, &format!("file:{spec_rel}")),
                "rustc" => format!("now {rustc}"),
                k if k.starts_with("variant:") => "the variant's definition".into(),
                k => first_change(root, since, k),
            };
            (k, first)
        })
        .collect();
    Ok(if changed.is_empty() {
        Freshness::Fresh
    } else if !m.binaries.is_empty() && changed.iter().all(|(k, _)| reaches_binaries_only(k)) {
        Freshness::Sources(changed)
    } else {
        Freshness::Stale(changed)
    })
}

/// What a reader is told about a dataset beside its numbers (a table's
/// caption, a figure's title, a claim's verdict, the report site, the
/// paper's provenance table): its freshness judged from the repository
/// alone, i.e. the sources, the lock file, the spec, the scripts and the
/// variants' definitions as this tree holds them. The machine's own inputs
/// (rustc, a peer's binary outside the tree) are left to `workbench
/// status`: the committed tables must read the same on every machine that
/// checks them out, and the test command regenerates them on another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    Fresh,
    /// The inputs that changed, of how many the dataset was measured from.
    Stale {
        changed: Vec<String>,
        of: usize,
    },
    /// No fingerprint, or the spec it ran is gone: stale to a reader.
    Unknown(String),
}

impl Shown {
    pub fn is_fresh(&self) -> bool {
        *self == Shown::Fresh
    }

    /// One word: fresh, stale or unknown.
    pub fn word(&self) -> &'static str {
        match self {
            Shown::Fresh => "fresh",
            Shown::Stale { .. } => "stale",
            Shown::Unknown(_) => "unknown",
        }
    }

    /// Why, in a clause (empty when fresh).
    pub fn why(&self) -> String {
        match self {
            Shown::Fresh => String::new(),
            Shown::Unknown(why) => why.clone(),
            Shown::Stale { changed, of } => {
                let first = changed.first().map_or(String::new(), |k| format!(", {k} among them"));
                format!("{} of the {of} inputs it was measured from changed since{first}", changed.len())
            }
        }
    }

    /// The sentence that goes with its numbers; `None` when fresh.
    pub fn note(&self, m: &crate::data::manifest::Manifest) -> Option<String> {
        let rev = m.revisions(7);
        match self {
            Shown::Fresh => None,
            _ => Some(format!(
                "STALE: measured at {rev}, and {}; the code would not necessarily measure the same now \
                 (`workbench status` names each input and the commit that changed it).",
                self.why()
            )),
        }
    }
}

/// [`Shown`] of the run whose manifest is `m`.
pub fn shown(root: &Path, m: &crate::data::manifest::Manifest) -> Result<Shown> {
    let Some(then) = &m.fingerprint else {
        return Ok(Shown::Unknown("no fingerprint was kept then".into()));
    };
    if then.inputs.keys().any(|k| k.starts_with("dep-info:")) {
        return Ok(Shown::Unknown("its sources were not recorded".into()));
    }
    let spec_path = root.join(&m.spec_path);
    let Ok(spec) = Spec::load(&spec_path) else {
        return Ok(Shown::Unknown(format!("its spec {} no longer loads", m.spec_path)));
    };
    // The machine's inputs are not judged here (see [`Shown`]).
    let machine = |k: &str| k == "rustc" || k.strip_prefix("file:").is_some_and(|p| Path::new(p).is_absolute());
    let mut then = then.clone();
    then.inputs.retain(|k, _| !machine(k));
    let now = now(root, &then, &spec, m.scale, "")?;
    if let Some(why) = uncomputable(&then, &now) {
        return Ok(Shown::Unknown(why));
    }
    let changed: Vec<String> = changed(&then, &now).into_iter().filter(|k| !machine(k)).collect();
    Ok(if changed.is_empty() { Shown::Fresh } else { Shown::Stale { changed, of: then.inputs.len() } })
}

/// One dataset at one scale, as `workbench status` shows it.
pub struct Entry {
    pub dataset: String,
    pub scale: Scale,
    /// Its newest run (none: never run at this scale).
    pub run: Option<PathBuf>,
    /// Whether readers are shown this run (the paper, its macros, the claims).
    pub cited: bool,
    pub freshness: Option<Freshness>,
}

impl Entry {
    /// Stale or unknown: what `run --stale` runs, and `status --check` refuses when cited.
    pub fn needs_run(&self) -> bool {
        !self.freshness.as_ref().is_some_and(Freshness::is_fresh)
    }
}

/// The freshness of every spec's newest run at each of `scales`.
pub fn survey(root: &Path, data: &Path, scales: &[Scale]) -> Result<Vec<Entry>> {
    use crate::data::dataset;
    let rustc = crate::data::manifest::rustc_version(root);
    let mut out = Vec::new();
    for (path, spec) in crate::spec::load_dir(&root.join("experiments"))? {
        let best = dataset::best_run(data, spec.dataset())?;
        for &scale in scales {
            let run = dataset::latest_run(data, spec.dataset(), scale)?;
            let freshness = match &run {
                Some(dir) => Some(
                    freshness(root, &dataset::load_run_manifest(dir)?, &path, &spec, &rustc)
                        .with_context(|| format!("checking {}", dir.display()))?,
                ),
                None => None,
            };
            let cited = best.as_ref().is_some_and(|(_, d)| Some(d) == run.as_ref());
            out.push(Entry { dataset: spec.dataset().to_string(), scale, run, cited, freshness });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dep_info_names_with_spaces_and_many_deps() {
        let text = "/r/target/release/x: /r/a.rs /r/dir\\ with\\ space/b.rs /r/.git/HEAD\n\n/r/a.rs:\n";
        assert_eq!(dep_info_paths(text), ["/r/a.rs", "/r/dir with space/b.rs", "/r/.git/HEAD"]);
        assert!(dep_info_paths("").is_empty());
    }

    #[test]
    fn changed_inputs_are_listed_both_ways() {
        let then = Fingerprint {
            hash: "h".into(),
            inputs: [("a", "1"), ("b", "2")].map(|(k, v)| (k.to_string(), v.to_string())).into(),
        };
        let now = Fingerprint {
            hash: "g".into(),
            inputs: [("a", "1"), ("b", "3"), ("c", "4")].map(|(k, v)| (k.to_string(), v.to_string())).into(),
        };
        assert_eq!(changed(&then, &now), ["b", "c"]);
        assert!(changed(&then, &then).is_empty());
    }
}
