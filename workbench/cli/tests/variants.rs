//! Every build the quick suite runs that shares the workspace's compiled
//! crates, built the way the runner builds it: the binary must say it is the
//! variant the manifest will name (its allocator) and carry this checkout's
//! revision. Building them here is also what lets the main job, run after
//! the tests, go straight to measuring.
//!
//! PERF (test time): the quick builds with a profile of their own (ThinLTO)
//! are not compiled here. Their profile changes every crate's flags, so a
//! real build compiles the server's whole dependency tree again: 178 s of a
//! cold test command on 2 cores, ≈ 340 s of CPU (2026-12-03), a sixth of
//! the run. What differs from the builds here is cargo's profile settings;
//! what the runner decides (the target directory, the profile variables,
//! the measured binary alone, the `o3` driver beside it) is tested for every
//! such variant against a stand-in for cargo (`tests/profile_variants.rs`).
//! The main job compiles them for real (build-stages), and its runner
//! refuses a binary built from another revision before every cell. So a
//! compiler or cargo failure peculiar to LTO shows in the main job, not here.

mod common;

use analysis::spec::{self, Target};
use analysis::{data::host, spec::variants};
use std::collections::BTreeSet;
use std::process::Command;

/// What `<binary> --variant` prints for a build variant: its allocator
/// feature, or `system` for the builds that only change the profile.
fn allocator_name(variant: &str) -> &'static str {
    variants::features(variant).first().copied().unwrap_or("system")
}

fn shares_workspace_build(variant: &str) -> bool {
    variants::get(variant).unwrap_or_else(|| panic!("unknown variant {variant}")).shares_workspace_build()
}

fn ask(bin: &std::path::Path, _target: Target, what: &str) -> String {
    // Every measured binary takes the same flags (probe::cell::Invocation).
    let arg = format!("--{what}");
    let out = Command::new(bin).arg(&arg).output().unwrap_or_else(|e| panic!("{} {arg}: {e}", bin.display()));
    assert!(out.status.success(), "{} {arg}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn every_quick_variant_builds_as_named() {
    let out = std::env::temp_dir().join(format!("wb-variants-{}", std::process::id()));
    let (opts, multi, mut bins) = common::setup(&out, "variants");
    let mut wanted = BTreeSet::new();
    for (_, s) in spec::load_dir(&opts.root.join("experiments")).unwrap() {
        for v in s.variants_at(analysis::spec::Scale::Quick) {
            wanted.insert((s.target, v.clone()));
        }
    }
    assert!(wanted.len() >= 4, "the quick suite names more builds than {wanted:?}");
    let own_profile: Vec<_> = wanted.iter().filter(|(_, v)| !shares_workspace_build(v)).cloned().collect();
    for (target, variant) in &own_profile {
        let v = variants::get(variant).unwrap();
        assert!(
            !v.pgo && *target == Target::DatastoreServer,
            "{variant}: a quick build with a profile of its own is tested by its plan (tests/profile_variants.rs), \
             which covers the server's profile overrides without PGO only"
        );
    }
    wanted.retain(|(_, v)| shares_workspace_build(v));
    let (rev, _) = host::git_state(&opts.root);
    for (target, variant) in &wanted {
        let bin = bins.get(&opts.root, *target, variant, &multi).unwrap();
        assert_eq!(ask(&bin, *target, "variant"), allocator_name(variant), "{target:?} {variant}");
        assert_eq!(ask(&bin, *target, "revision"), rev, "{target:?} {variant}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The release profile builds the analysis stack unoptimised (the
/// workspace's Cargo.toml, for build time); no crate a measured binary
/// links may be among those, whatever allocator feature it is built with.
#[test]
fn measured_binaries_link_no_unoptimised_crate() {
    let root = analysis::default_root();
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
