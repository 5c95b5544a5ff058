//! Every build the quick suite runs, built the way the runner builds it: the
//! binary must say it is the variant the manifest will name (its allocator)
//! and carry this checkout's revision. Building them here is also what lets
//! the main job, run after the tests, go straight to measuring.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use workbench::spec::{self, Target};
use workbench::{data::host, spec::variants};

/// What `<binary> --variant` prints for a build variant: its allocator
/// feature, or `system` for the builds that only change the profile.
fn allocator_name(variant: &str) -> &'static str {
    variants::features(variant).first().copied().unwrap_or("system")
}

fn ask(bin: &std::path::Path, _target: Target, what: &str) -> String {
    // Every measured binary takes the same flags (probe::cell::Invocation).
    let arg = format!("--{what}");
    let out = Command::new(bin).arg(&arg).output().unwrap_or_else(|e| panic!("{} {arg}: {e}", bin.display()));
    assert!(out.status.success(), "{} {arg}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Builds every (target, variant) pair the quick suite names whose variant
/// does (`shared`) or does not share the workspace's build, and checks what
/// each binary says it is.
fn quick_variants_build_as_named(shared: bool, label: &str) {
    let out = std::env::temp_dir().join(format!("wb-{label}-{}", std::process::id()));
    let (opts, multi, mut bins) = common::setup(&out, label);
    let mut wanted = BTreeSet::new();
    for (_, s) in spec::load_dir(&opts.root.join("experiments")).unwrap() {
        for v in s.variants_at(workbench::spec::Scale::Quick) {
            if variants::get(v).unwrap().shares_workspace_build() == shared {
                wanted.insert((s.target, v.clone()));
            }
        }
    }
    let (rev, _) = host::git_state(&opts.root);
    for (target, variant) in &wanted {
        let bin = bins.get(&opts.root, *target, variant, &multi).unwrap();
        assert_eq!(ask(&bin, *target, "variant"), allocator_name(variant), "{target:?} {variant}");
        assert_eq!(ask(&bin, *target, "revision"), rev, "{target:?} {variant}");
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(!wanted.is_empty(), "the quick suite names no build that {label}");
}

// PERF (test time): two tests, so that nextest builds the two kinds side by
// side from the start. The plain variants share the workspace's build
// directory, so cargo builds them one at a time, each mostly on one core
// (jemalloc's configure script, one large crate); a variant with a profile
// of its own (ThinLTO) compiles its whole tree in its own directory and
// fills the other core. One after the other they were 527 s of a cold run
// (2026-12-03), the ThinLTO build last.

/// The allocator variants and the plain release build: the subject's and
/// the server's own crates recompiled with the allocator's feature.
#[test]
fn every_quick_variant_sharing_the_workspace_build_builds_as_named() {
    quick_variants_build_as_named(true, "variants-shared");
}

/// The variants with a profile of their own (ThinLTO at quick scale), each
/// with the plain build's load driver beside it.
#[test]
fn every_quick_variant_with_its_own_profile_builds_as_named() {
    quick_variants_build_as_named(false, "variants-own-profile");
}

/// The release profile builds the analysis stack unoptimised (the
/// workspace's Cargo.toml, for build time); no crate a measured binary
/// links may be among those, whatever allocator feature it is built with.
#[test]
fn measured_binaries_link_no_unoptimised_crate() {
    let root = workbench::default_root();
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml")).unwrap().parse().unwrap();
    let overrides =
        manifest["profile"]["release"].get("package").and_then(|p| p.as_table()).cloned().unwrap_or_default();
    let lowered: BTreeSet<&str> = overrides
        .iter()
        .filter(|(_, o)| o.get("opt-level").and_then(|l| l.as_integer()).is_some_and(|l| l < 3))
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(!lowered.is_empty(), "no lowered crate found in {}", root.join("Cargo.toml").display());
    let mut measured = BTreeSet::new();
    for target in [Target::Subject, Target::DatastoreServer] {
        let out = Command::new(env!("CARGO"))
            .current_dir(&root)
            .args(["tree", "-e", "normal", "--prefix", "none", "--all-features", "-p", target.package()])
            .output()
            .unwrap();
        assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        measured.extend(text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string));
    }
    assert!(measured.contains("tokio") && measured.contains("sqlparser"), "{measured:?}");
    let both: Vec<&&str> = lowered.iter().filter(|c| measured.contains(**c)).collect();
    assert!(both.is_empty(), "measured binaries link crates the release profile leaves unoptimised: {both:?}");
}
