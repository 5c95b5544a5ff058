//! Stamps the git revision into the crate (`probe::GIT_REVISION`).

use std::process::Command;

/// Stamps the git revision into the crate (`WORKBENCH_GIT_REVISION`), so a
/// run can check that the subject it spawns was built from the commit its
/// manifest names. Rebuilt when HEAD moves (a commit, a checkout).
fn stamp_revision() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=WORKBENCH_GIT_REVISION={rev}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
        // NOTE: only if it exists: cargo counts a missing watched file as
        // changed, and every build of every variant recompiled the probe and
        // the subjects for it.
        if std::path::Path::new(&format!("{dir}/packed-refs")).exists() {
            println!("cargo:rerun-if-changed={dir}/packed-refs");
        }
    }
}

fn main() {
    stamp_revision();
}
