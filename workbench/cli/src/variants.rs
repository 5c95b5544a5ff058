//! Building a target binary (`subject`, `datastore-server`) once per
//! allocator variant.
//!
//! Each variant gets its own target directory (`target/variants/<name>`, or
//! under the directory a test names) so that switching features never
//! rebuilds another variant's artifacts.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::spec::Target;

/// The cargo profile subjects are built with.
pub const PROFILE: &str = "release";

/// Cargo features that select a variant.
pub fn features(variant: &str) -> &'static [&'static str] {
    match variant {
        "dhat" => &["dhat"],
        "jemalloc" => &["jemalloc"],
        "jemalloc-plain" => &["jemalloc-plain"],
        _ => &[],
    }
}

/// The allocator a variant links.
pub fn allocator(variant: &str) -> &'static str {
    match variant {
        "dhat" => "dhat 0.3 (counting wrapper over the system allocator; debug = limited, 40 frames per site)",
        "jemalloc" => "tikv-jemallocator 0.7 (jemalloc 5, stats enabled)",
        "jemalloc-plain" => "tikv-jemallocator 0.7 (jemalloc 5, stats compiled out)",
        _ => "system (glibc malloc)",
    }
}

/// Cargo profile settings a variant overrides, as `CARGO_PROFILE_*` variables.
/// NOTE: the dhat build carries full debug info because with line tables
/// only, an inlined frame resolves to its bare name (`new`, `alloc`) and a
/// trace cannot say which crate or type a site belongs to.
pub fn profile_env(variant: &str) -> &'static [(&'static str, &'static str)] {
    match variant {
        "dhat" => &[("CARGO_PROFILE_RELEASE_DEBUG", "limited")],
        _ => &[],
    }
}

/// Builds `target` for `variant` and returns the binary's path. Both
/// targets of a variant share one target directory (their common crates
/// build once). Cargo's output goes to `log`, named in the error if the
/// build fails.
pub fn build(root: &Path, dir: &Path, target: Target, variant: &str, log: &Path) -> Result<PathBuf> {
    let (package, name) = target.package_and_bin();
    let target_dir = dir.join(variant);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--profile", PROFILE, "-p", package, "--bin", name, "--target-dir"])
        .arg(&target_dir);
    cmd.envs(profile_env(variant).iter().copied());
    let feats = features(variant);
    if !feats.is_empty() {
        cmd.arg("--features").arg(feats.join(","));
    }
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let log_file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let status = cmd
        .stdout(Stdio::null())
        .stderr(log_file)
        .status()
        .with_context(|| format!("running cargo to build {name} ({variant})"))?;
    if !status.success() {
        bail!("building {name} ({variant}) failed ({status}); see {}", log.display());
    }
    let bin = target_dir.join(PROFILE).join(name);
    if !bin.exists() {
        bail!("cargo succeeded but {} is missing", bin.display());
    }
    Ok(bin)
}
