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
    /// Code generation flags (`RUSTFLAGS`) for every crate, and the CPU
    /// features they need: the variant runs only where the CPU has them all.
    pub codegen: Codegen,
}

/// Flags that change the machine code of every crate.
#[derive(Debug, PartialEq, Eq)]
pub struct Codegen {
    /// The instruction set, as tables name it.
    pub label: &'static str,
    pub rustflags: &'static str,
    /// The same instruction set for the C that `cc` compiles (jemalloc,
    /// ring): `cc` passes `-march` on from `target-cpu` for the baseline
    /// alone, so without this the reference build's C was the baseline's.
    pub cflags: &'static str,
    /// CPU features (as `is_x86_feature_detected!` names them) the code may use.
    pub needs: &'static [&'static str],
}

/// The reference build of every measured binary, ours and the peers' (they
/// link into the same binaries): x86-64-v3 (AVX2, BMI2, FMA: x86 CPUs since
/// 2013-15, the baseline of current server distributions). The floor ZAP
/// is held against, glibc's memcpy, picks AVX2 or AVX-512 at run time, so a
/// baseline build would hold our code to SSE2 against a floor that is not.
/// NOTE: `.cargo/config.toml` gives the workspace build the same flags (a
/// test holds them equal), so the plain variants reuse what it compiled.
pub const REFERENCE: Codegen = Codegen {
    label: "x86-64-v3",
    rustflags: "-C target-cpu=x86-64-v3",
    cflags: "-march=x86-64-v3",
    needs: &["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"],
};

/// The instruction set of the target's own baseline (x86-64: SSE2): a
/// labelled row where instruction sets matter (codec-speed), and what every
/// build falls back to on a CPU without the reference build's features.
pub const BASELINE: Codegen =
    Codegen { label: "x86-64", rustflags: "-C target-cpu=x86-64", cflags: "-march=x86-64", needs: &[] };

impl Codegen {
    /// What this codegen is on this machine: itself, or [`BASELINE`] when
    /// the CPU lacks a feature it needs (the reference build's fallback).
    pub fn here(&self) -> &Codegen {
        if self.needs.iter().all(|f| cpu_has(f)) {
            self
        } else {
            &BASELINE
        }
    }
}

/// Why the reference build is not what this machine builds, if it is not:
/// the manifest and every caption say so.
pub fn reference_fallback() -> Option<String> {
    let missing: Vec<&str> = REFERENCE.needs.iter().copied().filter(|f| !cpu_has(f)).collect();
    (!missing.is_empty()).then(|| {
        format!(
            "this CPU lacks {} of the reference build ({}): every build here falls back to {}",
            missing.join(", "),
            REFERENCE.label,
            BASELINE.label
        )
    })
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
        codegen: REFERENCE,
    },
    Build {
        name: "jemalloc",
        features: &["jemalloc"],
        allocator: "tikv-jemallocator 0.7 (jemalloc 5, stats enabled)",
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "jemalloc-plain",
        features: &["jemalloc-plain"],
        allocator: "tikv-jemallocator 0.7 (jemalloc 5, stats compiled out)",
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "events",
        features: &["events"],
        allocator:
            "probe::events (every allocation and free by site and operation index, over glibc malloc; 48 frames)",
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "jemalloc-prof",
        features: &["jemalloc-prof"],
        allocator:
            "tikv-jemallocator 0.7 (jemalloc 5.3, heap profiling: prof, prof_accum; interval from _RJEM_MALLOC_CONF)",
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "system",
        features: &[],
        allocator: GLIBC,
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    // The build stages: release is opt-level 3 without cross-crate LTO, 16 codegen units.
    Build {
        name: "o3",
        features: &[],
        allocator: GLIBC,
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "thinlto",
        features: &[],
        allocator: GLIBC,
        profile_env: &[("CARGO_PROFILE_RELEASE_LTO", "thin")],
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "fatlto",
        features: &[],
        allocator: GLIBC,
        profile_env: FAT_LTO,
        pgo: false,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "pgo",
        features: &[],
        allocator: GLIBC,
        profile_env: FAT_LTO,
        pgo: true,
        bolt: false,
        codegen: REFERENCE,
    },
    Build {
        name: "pgo-bolt",
        features: &[],
        allocator: GLIBC,
        profile_env: FAT_LTO,
        pgo: true,
        bolt: true,
        codegen: REFERENCE,
    },
    // The release build for the target's baseline instruction set (SSE2),
    // every crate: the labelled row beside the reference build where
    // instruction sets matter (codec-speed).
    Build {
        name: "x86-64",
        features: &[],
        allocator: GLIBC,
        profile_env: &[],
        pgo: false,
        bolt: false,
        codegen: BASELINE,
    },
];

impl Build {
    /// Whether the variant compiles with the workspace's own profile, and so
    /// reuses what the workspace build compiled (cargo's build directory):
    /// any profile setting (LTO, codegen units) or a profile-guided build
    /// changes every crate's flags, and so compiles the whole tree again.
    pub fn shares_workspace_build(&self) -> bool {
        !self.pgo && self.profile_env.is_empty() && self.codegen.here() == REFERENCE.here()
    }

    /// The instruction set this variant is built for on this machine (the
    /// reference build falls back to the baseline where the CPU lacks it).
    pub fn codegen_here(&self) -> &Codegen {
        self.codegen.here()
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_has(feature: &str) -> bool {
    match feature {
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "bmi1" => std::arch::is_x86_feature_detected!("bmi1"),
        "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
        "f16c" => std::arch::is_x86_feature_detected!("f16c"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "lzcnt" => std::arch::is_x86_feature_detected!("lzcnt"),
        "movbe" => std::arch::is_x86_feature_detected!("movbe"),
        "xsave" => std::arch::is_x86_feature_detected!("xsave"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_has(_feature: &str) -> bool {
    false
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

/// What a binary of `variant` answers to `--variant` (`probe::Variant::name`):
/// its allocator feature, or `system` for the builds that change only the
/// profile or the instruction set.
pub fn probe_variant(variant: &str) -> &'static str {
    features(variant).first().copied().unwrap_or("system")
}

/// Whether a variant counts allocations (dhat, jemalloc with its statistics
/// or its sampling profiler), which costs time: `instrumentation-cost`
/// measured jemalloc's statistics at up to ≈ 1.1× on allocation-heavy cells,
/// dhat at up to 100×.
pub fn counts_allocations(variant: &str) -> bool {
    features(variant).iter().any(|f| ["dhat", "jemalloc", "events", "jemalloc-prof"].contains(f))
}

/// Whether a variant's counts are exact and repeat exactly (dhat, events):
/// the builds whose counts a comparison or the gate reads.
pub fn counts_exactly(variant: &str) -> bool {
    features(variant).iter().any(|f| *f == "dhat" || *f == "events")
}

/// The instruction set a variant's code is generated for on this machine.
pub fn target_cpu(variant: &str) -> &'static str {
    get(variant).map_or(REFERENCE.here().label, |v| v.codegen_here().label)
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
    parts.push(format!("RUSTFLAGS={}", v.codegen_here().rustflags));
    parts.push(format!("CFLAGS={}", v.codegen_here().cflags));
    if v.codegen_here() != &v.codegen {
        parts.push(format!("{} unavailable on this CPU", v.codegen.label));
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

    #[test]
    fn every_build_but_the_baseline_row_is_the_reference_build() {
        for v in VARIANTS {
            assert_eq!(v.codegen == BASELINE, v.name == "x86-64", "{}", v.name);
        }
        // A feature the check does not know reads as missing: the build falls back, it does not crash.
        assert!(!cpu_has("no-such-feature"));
        let baseline = get("x86-64").unwrap();
        assert!(
            describe("x86-64").contains("target-cpu=x86-64") && describe("x86-64").contains("CFLAGS=-march=x86-64")
        );
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            assert!(reference_fallback().is_none());
            assert_eq!(target_cpu("system"), "x86-64-v3");
            assert!(get("system").unwrap().shares_workspace_build() && !baseline.shares_workspace_build());
            assert!(describe("system").contains("target-cpu=x86-64-v3"));
            assert!(describe("system").contains("CFLAGS=-march=x86-64-v3"));
        }
        assert_eq!(target_cpu("x86-64"), "x86-64");
    }

    #[test]
    fn the_workspace_build_is_the_reference_build() {
        let config = std::fs::read_to_string(crate::default_root().join(".cargo/config.toml")).unwrap();
        let flags: toml::Value = toml::from_str(&config).unwrap();
        let rustflags: Vec<&str> =
            flags["build"]["rustflags"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(rustflags.join(" "), REFERENCE.rustflags, ".cargo/config.toml and variants::REFERENCE differ");
        assert_eq!(flags["env"]["CFLAGS"].as_str(), Some(REFERENCE.cflags), ".cargo/config.toml's [env] CFLAGS");
    }
}
