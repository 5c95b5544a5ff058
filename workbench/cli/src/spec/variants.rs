//! The build variants a spec may name, defined once: an allocator feature,
//! cargo profile overrides, and whether the build is profile-guided (PGO)
//! and post-link optimised (BOLT). How each is built is [`crate::run::build`].

/// The cargo profile every variant starts from.
pub const PROFILE: &str = "release";

/// One way of building a target.
pub struct Build {
    pub name: &'static str,
    /// Cargo features that select the allocator.
    pub features: &'static [&'static str],
    pub allocator: &'static str,
    /// Cargo profile settings, as `CARGO_PROFILE_RELEASE_*` variables.
    pub profile_env: &'static [(&'static str, &'static str)],
    /// Profile-guided: instrumented build, training run, merge, rebuild.
    pub pgo: bool,
    /// BOLT after linking, trained on the same workload.
    pub bolt: bool,
}

const FAT_LTO: &[(&str, &str)] = &[("CARGO_PROFILE_RELEASE_LTO", "fat"), ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")];
const GLIBC: &str = "system (glibc malloc)";

/// Every variant a spec may name.
/// NOTE: the dhat build's traces need function paths in the debug info (with
/// line tables only, an inlined frame resolves to its bare name, `new`), which
/// the release profile itself gives every variant (`debug = "limited"`, the
/// workspace's Cargo.toml), so dhat needs no profile setting of its own.
pub const VARIANTS: &[Build] = &[
    Build {
        name: "dhat",
        features: &["dhat"],
        allocator: "dhat 0.3 (counting wrapper over the system allocator; debug = limited, 40 frames per site)",
        profile_env: &[],
        pgo: false,
        bolt: false,
    },
    Build {
        name: "jemalloc",
        features: &["jemalloc"],
        allocator: "tikv-jemallocator 0.7 (jemalloc 5, stats enabled)",
        profile_env: &[],
        pgo: false,
        bolt: false,
    },
    Build {
        name: "jemalloc-plain",
        features: &["jemalloc-plain"],
        allocator: "tikv-jemallocator 0.7 (jemalloc 5, stats compiled out)",
        profile_env: &[],
        pgo: false,
        bolt: false,
    },
    Build {
        name: "events",
        features: &["events"],
        allocator:
            "probe::events (every allocation and free by site and operation index, over glibc malloc; 48 frames)",
        profile_env: &[],
        pgo: false,
        bolt: false,
    },
    Build { name: "system", features: &[], allocator: GLIBC, profile_env: &[], pgo: false, bolt: false },
    // The build stages: release is opt-level 3 without cross-crate LTO, 16 codegen units.
    Build { name: "o3", features: &[], allocator: GLIBC, profile_env: &[], pgo: false, bolt: false },
    Build {
        name: "thinlto",
        features: &[],
        allocator: GLIBC,
        profile_env: &[("CARGO_PROFILE_RELEASE_LTO", "thin")],
        pgo: false,
        bolt: false,
    },
    Build { name: "fatlto", features: &[], allocator: GLIBC, profile_env: FAT_LTO, pgo: false, bolt: false },
    Build { name: "pgo", features: &[], allocator: GLIBC, profile_env: FAT_LTO, pgo: true, bolt: false },
    Build { name: "pgo-bolt", features: &[], allocator: GLIBC, profile_env: FAT_LTO, pgo: true, bolt: true },
];

impl Build {
    /// Whether the variant compiles with the workspace's own profile, and so
    /// reuses what the workspace build compiled (cargo's build directory):
    /// any profile setting (LTO, codegen units) or a profile-guided build
    /// changes every crate's flags, and so compiles the whole tree again.
    pub fn shares_workspace_build(&self) -> bool {
        !self.pgo && self.profile_env.is_empty()
    }
}

/// The variant named `name`.
pub fn get(name: &str) -> Option<&'static Build> {
    VARIANTS.iter().find(|v| v.name == name)
}

/// Every variant's name (for spec validation).
pub fn names() -> Vec<&'static str> {
    VARIANTS.iter().map(|v| v.name).collect()
}

/// Cargo features that select a variant.
pub fn features(variant: &str) -> &'static [&'static str] {
    get(variant).map_or(&[], |v| v.features)
}

/// Whether a variant counts allocations (dhat, or jemalloc with its
/// statistics), which costs time: `instrumentation-cost` measured jemalloc's
/// statistics at up to ≈ 1.1× on allocation-heavy cells, dhat at up to 100×.
pub fn counts_allocations(variant: &str) -> bool {
    features(variant).iter().any(|f| *f == "dhat" || *f == "jemalloc" || *f == "events")
}

/// The allocator a variant links.
pub fn allocator(variant: &str) -> &'static str {
    get(variant).map_or(GLIBC, |v| v.allocator)
}

/// How a variant is built, in words, for the manifest.
pub fn describe(variant: &str) -> String {
    let Some(v) = get(variant) else { return "unknown".into() };
    let mut parts: Vec<String> = vec![format!("profile {PROFILE} (debug = limited)")];
    parts.extend(
        v.profile_env.iter().map(|(k, val)| format!("{}={val}", k.trim_start_matches("CARGO_PROFILE_RELEASE_"))),
    );
    if !v.features.is_empty() {
        parts.push(format!("features {}", v.features.join(",")));
    }
    if v.pgo || !v.profile_env.is_empty() {
        parts.push("the measured binary alone (the server's load driver: o3's)".into());
    }
    if v.pgo {
        parts.push("PGO (trained on the throughput workload, llvm-profdata merge)".into());
    }
    if v.bolt {
        parts.push("BOLT (llvm-bolt, instrumentation-trained on the same workload)".into());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_unique_and_stages_build_up() {
        let names = names();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
        let bolt = get("pgo-bolt").unwrap();
        assert!(bolt.pgo && bolt.bolt && bolt.profile_env == get("fatlto").unwrap().profile_env);
        assert!(describe("pgo-bolt").contains("LTO=fat") && describe("pgo-bolt").contains("BOLT"));
        assert_eq!(features("dhat"), ["dhat"]);
    }
}
