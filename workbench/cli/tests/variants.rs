//! Every build the quick suite runs selects features its package has, and
//! a build with a profile of its own is one its plan test covers.
//!
//! PERF (test time): the builds themselves are not compiled here. This test
//! built every quick variant of the subject and the server (twelve builds,
//! each compiling the probe and the measured crate again): 217-284 s of
//! every cold test command, its critical path. The runner checks every
//! binary it builds (`--variant` against the variant's allocator, and
//! `--revision` before every cell), so the builds the end-to-end tests make
//! (the subject's dhat, jemalloc and events builds, the server's system and
//! jemalloc builds) are checked there, the probe's tests compile every
//! allocator feature, and the main job checks every other build before it
//! runs a cell. What differs for the builds with a profile of their own
//! (ThinLTO) is cargo's profile settings; what the runner decides is tested
//! against a stand-in for cargo (`tests/profile_variants.rs`).

use analysis::spec::{self, variants, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each package's cargo features, from `cargo metadata` (nothing compiles).
fn package_features() -> BTreeMap<String, BTreeSet<String>> {
    let root = analysis::default_root();
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let features = p["features"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default();
            (p["name"].as_str().unwrap().to_string(), features)
        })
        .collect()
}

#[test]
fn every_quick_variant_selects_features_its_package_has() {
    let root = analysis::default_root();
    let mut wanted = BTreeSet::new();
    for (_, s) in spec::load_dir(&root.join("experiments")).unwrap() {
        for v in s.variants_at(analysis::spec::Scale::Quick) {
            wanted.insert((s.target, v.clone()));
        }
    }
    assert!(wanted.len() >= 4, "the quick suite names more builds than {wanted:?}");
    let features = package_features();
    for (target, variant) in &wanted {
        let v = variants::get(variant).unwrap_or_else(|| panic!("unknown variant {variant}"));
        if !v.shares_workspace_build() {
            assert!(
                !v.pgo && *target == Target::DatastoreServer,
                "{variant}: a quick build with a profile of its own is tested by its plan \
                 (tests/profile_variants.rs), which covers the server's profile overrides without PGO only"
            );
        }
        let package = target.package();
        let has = features.get(package).unwrap_or_else(|| panic!("{package}: not a workspace package"));
        for f in v.features {
            assert!(has.contains(*f), "{variant}: {package} has no feature `{f}` (it has {has:?})");
        }
        let allocator = variants::probe_variant(variant);
        assert!(
            allocator == "system" || has.contains(allocator),
            "{variant}: its binary would say `{allocator}`, which {package} does not build"
        );
    }
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
