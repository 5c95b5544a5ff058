//! What of the lock file a measured binary can link, and the features cargo
//! resolves for it.
//!
//! `Cargo.lock` pins every package of the workspace, the analysis side's
//! (polars, plotters) as much as the measured side's. A dataset's
//! `file:Cargo.lock` input is its blob id; judged as a whole, a new crate
//! of the CLI (or a bumped plotting crate) would age every dataset although
//! no measured binary links a byte of it. So a changed lock is compared by
//! its [`closure`]: the packages reachable from the targets' packages
//! through the lock's dependency lists (dev-dependencies included, which
//! over-approximates), each with its version, source, checksum and
//! dependencies. Equal closures: the measured binaries link the same code.
//!
//! What the lock cannot say: cargo unifies features over the whole
//! workspace (the variants build with `--workspace`, [`crate::run::build`]),
//! so a crate outside the closure can switch on a feature of one inside it.
//! That is the `features` input ([`resolved_features`]): every closure
//! package's features as cargo resolves them for the workspace. Runs from
//! before it was kept are judged by the closure alone.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use crate::spec::Target;

/// The packages whose closure a measured binary links: the targets'.
pub fn roots() -> Vec<&'static str> {
    [Target::Subject, Target::DatastoreServer].map(Target::package).to_vec()
}

/// One `[[package]]` of a lock file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Package {
    name: String,
    version: String,
    source: String,
    checksum: String,
    dependencies: Vec<String>,
}

impl Package {
    /// Whether `dep` (a lock's `"name"`, `"name version"` or
    /// `"name version (source)"`) names this package.
    fn is(&self, dep: &str) -> bool {
        let mut parts = dep.splitn(3, ' ');
        let name = parts.next().unwrap_or_default();
        let version = parts.next();
        let source = parts.next().map(|s| s.trim_start_matches('(').trim_end_matches(')'));
        name == self.name && version.is_none_or(|v| v == self.version) && source.is_none_or(|s| s == self.source)
    }
}

fn packages(lock: &str) -> Result<Vec<Package>> {
    let table: toml::Table = toml::from_str(lock).context("parsing a lock file")?;
    let Some(list) = table.get("package").and_then(toml::Value::as_array) else {
        bail!("a lock file without [[package]] entries");
    };
    let text = |t: &toml::Table, k: &str| t.get(k).and_then(toml::Value::as_str).unwrap_or_default().to_string();
    list.iter()
        .map(|p| {
            let t = p.as_table().context("a [[package]] that is not a table")?;
            let mut dependencies: Vec<String> = t
                .get("dependencies")
                .and_then(toml::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect();
            dependencies.sort();
            Ok(Package {
                name: text(t, "name"),
                version: text(t, "version"),
                source: text(t, "source"),
                checksum: text(t, "checksum"),
                dependencies,
            })
        })
        .collect()
}

/// The packages of `lock` (a `Cargo.lock`'s text) reachable from `roots`
/// (package names), one line each: name, version, source, checksum and
/// dependencies. A root the lock does not hold is a line of its own, so
/// that a lock losing it differs.
pub fn closure(lock: &str, roots: &[&str]) -> Result<BTreeSet<String>> {
    let all = packages(lock)?;
    let mut seen: BTreeSet<usize> = BTreeSet::new();
    let mut out = BTreeSet::new();
    let mut todo: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
    while let Some(dep) = todo.pop() {
        let found: Vec<usize> = (0..all.len()).filter(|&i| all[i].is(&dep)).collect();
        if found.is_empty() {
            out.insert(format!("{dep} (not in the lock)"));
        }
        for i in found {
            if seen.insert(i) {
                let p = &all[i];
                out.insert(format!(
                    "{} {} {} {} [{}]",
                    p.name,
                    p.version,
                    p.source,
                    p.checksum,
                    p.dependencies.join(", ")
                ));
                todo.extend(p.dependencies.iter().cloned());
            }
        }
    }
    Ok(out)
}

/// Whether the lock whose blob id is `then` (a dataset's `file:Cargo.lock`)
/// gives the measured packages the same closure as `root`'s lock now. A
/// blob this repository does not hold cannot be judged: false.
pub fn links_same(root: &Path, then: &str) -> bool {
    let Ok(out) = Command::new("git").current_dir(root).args(["cat-file", "blob", then]).output() else {
        return false;
    };
    if !out.status.success() {
        return false;
    }
    let Ok(now) = std::fs::read_to_string(root.join("Cargo.lock")) else { return false };
    let roots = roots();
    match (closure(&String::from_utf8_lossy(&out.stdout), &roots), closure(&now, &roots)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Every package of the measured closure with the features cargo resolves
/// for it over the whole workspace, one `name version: f1,f2` line each
/// (`cargo metadata`, offline, for the host's platform: the packages of
/// other platforms are never downloaded, and metadata of all would need them).
pub fn resolved_features(root: &Path) -> Result<String> {
    let host = host_triple()?;
    let meta = cargo_metadata(root, &["--locked", "--filter-platform", &host])?;
    features_of_closure(&meta, &roots())
}

/// `cargo metadata --format-version 1 --offline` in `root` with `args`, parsed.
pub fn cargo_metadata(root: &Path, args: &[&str]) -> Result<serde_json::Value> {
    let out = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(args)
        .current_dir(root)
        .output()
        .with_context(|| format!("running cargo metadata in {}", root.display()))?;
    if !out.status.success() {
        bail!("cargo metadata in {} failed: {}", root.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")
}

/// The platform rustc compiles for by default (`rustc -vV`'s `host:`).
fn host_triple() -> Result<String> {
    let out = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .context("rustc -vV names no host")
}

/// [`resolved_features`] from `cargo metadata`'s output.
fn features_of_closure(meta: &serde_json::Value, roots: &[&str]) -> Result<String> {
    let packages = meta["packages"].as_array().context("cargo metadata: no packages")?;
    let name_version: BTreeMap<&str, (&str, &str)> = packages
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, (p["name"].as_str()?, p["version"].as_str()?))))
        .collect();
    let nodes = meta["resolve"]["nodes"].as_array().context("cargo metadata: no resolve")?;
    let by_id: BTreeMap<&str, &serde_json::Value> = nodes.iter().filter_map(|n| Some((n["id"].as_str()?, n))).collect();
    let mut todo: Vec<&str> =
        name_version.iter().filter(|(_, (name, _))| roots.contains(name)).map(|(id, _)| *id).collect();
    let mut lines = BTreeSet::new();
    let mut seen = BTreeSet::new();
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        let Some(node) = by_id.get(id) else { continue };
        let mut features: Vec<&str> =
            node["features"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).collect();
        features.sort_unstable();
        let (name, version) = name_version.get(id).copied().unwrap_or((id, ""));
        lines.insert(format!("{name} {version}: {}", features.join(",")));
        todo.extend(node["dependencies"].as_array().into_iter().flatten().filter_map(|d| d.as_str()));
    }
    if lines.is_empty() {
        bail!("cargo metadata: none of the packages {} in the workspace", roots.join(", "));
    }
    Ok(lines.into_iter().map(|l| l + "\n").collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"
version = 4

[[package]]
name = "server"
version = "0.1.0"
dependencies = [
 "tokio",
 "itoa 1.0.0",
]

[[package]]
name = "tokio"
version = "1.40.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "aa"

[[package]]
name = "itoa"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "bb"

[[package]]
name = "itoa"
version = "0.4.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "cc"

[[package]]
name = "workbench"
version = "0.1.0"
dependencies = [
 "itoa 0.4.0",
 "polars",
]

[[package]]
name = "polars"
version = "0.55.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "dd"
"#;

    #[test]
    fn the_closure_holds_what_the_root_links_and_nothing_of_the_analysis_side() {
        let c = closure(LOCK, &["server"]).unwrap();
        let names: Vec<&str> = c.iter().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(names, ["itoa", "server", "tokio"]);
        assert!(c.iter().any(|l| l.starts_with("itoa 1.0.0")), "{c:?}");
    }

    #[test]
    fn a_change_outside_the_closure_leaves_it_equal_and_one_inside_does_not() {
        let base = closure(LOCK, &["server"]).unwrap();
        let analysis = LOCK
            .replace("checksum = \"dd\"", "checksum = \"ee\"")
            .replace(" \"polars\",\n", " \"polars\",\n \"plotters\",\n");
        assert_eq!(closure(&analysis, &["server"]).unwrap(), base);
        let measured = LOCK.replace("checksum = \"aa\"", "checksum = \"a2\"");
        assert_ne!(closure(&measured, &["server"]).unwrap(), base);
        let new_dep = LOCK.replace(" \"tokio\",\n \"itoa 1.0.0\",", " \"tokio\",\n \"itoa 1.0.0\",\n \"polars\",");
        assert_ne!(closure(&new_dep, &["server"]).unwrap(), base);
    }

    #[test]
    fn a_root_missing_from_the_lock_is_a_difference() {
        let c = closure(LOCK, &["subjects"]).unwrap();
        assert_eq!(c.into_iter().collect::<Vec<_>>(), ["subjects (not in the lock)"]);
    }

    #[test]
    fn a_dataset_s_lock_is_read_back_from_git_and_judged_by_its_closure() {
        let dir = std::env::temp_dir().join(format!("wb-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git").current_dir(&dir).args(args).output().unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q"]);
        // Both targets' packages, as the real lock holds them.
        let lock = LOCK.replace(
            "[[package]]\nname = \"tokio\"",
            "[[package]]\nname = \"subjects\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"tokio\"",
        );
        std::fs::write(dir.join("Cargo.lock"), &lock).unwrap();
        git(&["add", "Cargo.lock"]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock"]);
        let then = git(&["rev-parse", "HEAD:Cargo.lock"]);
        assert!(links_same(&dir, &then));
        std::fs::write(dir.join("Cargo.lock"), lock.replace("checksum = \"dd\"", "checksum = \"ee\"")).unwrap();
        assert!(links_same(&dir, &then), "polars is the analysis side's");
        std::fs::write(dir.join("Cargo.lock"), lock.replace("checksum = \"aa\"", "checksum = \"a2\"")).unwrap();
        assert!(!links_same(&dir, &then), "tokio is the server's");
        assert!(!links_same(&dir, "0000000000000000000000000000000000000000"), "a blob git does not hold");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn features_follow_the_resolve_from_the_roots_only() {
        let meta = serde_json::json!({
            "packages": [
                {"id": "s", "name": "server", "version": "0.1.0"},
                {"id": "t", "name": "tokio", "version": "1.40.0"},
                {"id": "p", "name": "polars", "version": "0.55.0"},
            ],
            "resolve": {"nodes": [
                {"id": "s", "features": [], "dependencies": ["t"]},
                {"id": "t", "features": ["rt", "net"], "dependencies": []},
                {"id": "p", "features": ["parquet"], "dependencies": ["t"]},
            ]}
        });
        assert_eq!(features_of_closure(&meta, &["server"]).unwrap(), "server 0.1.0: \ntokio 1.40.0: net,rt\n");
        assert!(features_of_closure(&meta, &["subjects"]).is_err());
    }
}
