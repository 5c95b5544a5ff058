//! The build variants with a profile of their own (LTO, codegen units), as
//! the runner plans them: the measured binary alone, in a target directory
//! of the profile's own, with the profile's variables set; the `o3` build's
//! driver beside it, from the shared release build. Run against a stand-in
//! for cargo that records each call and writes, as each "binary", the call
//! that made it.
//!
//! NOTE: the real builds are the main job's (build-stages); compiling them
//! here costs ≈ 340 s of CPU each (why: `tests/variants.rs`). This file is
//! its own test binary because it points `CARGO`, which the runner reads,
//! at the stand-in for the whole process.

use analysis::run::build;
use analysis::spec::variants::{self, PROFILE};
use analysis::spec::Target;
use std::collections::BTreeMap;
use std::path::Path;

/// The stand-in: appends one line per call to `$FAKE_CARGO_LOG` (target
/// directory, binaries, build directory, the profile variables) and writes
/// each binary as a text file naming its target directory.
const FAKE_CARGO: &str = r#"#!/bin/sh
td=""; bins=""
while [ $# -gt 0 ]; do
    case "$1" in
        --target-dir) td="$2"; shift ;;
        --bin) bins="$bins,$2"; shift ;;
    esac
    shift
done
profile=$(env | grep '^CARGO_PROFILE_RELEASE_' | sort | tr '\n' ',')
echo "$td|${bins#,}|${CARGO_BUILD_BUILD_DIR:-}|$profile" >> "$FAKE_CARGO_LOG"
mkdir -p "$td/release"
for b in $(echo "${bins#,}" | tr ',' ' '); do echo "$td" > "$td/release/$b"; done
"#;

struct Call {
    target_dir: String,
    bins: Vec<String>,
    build_dir: String,
    profile: BTreeMap<String, String>,
}

fn calls(log: &Path) -> Vec<Call> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '|').collect();
            assert_eq!(f.len(), 4, "stand-in log line {l:?}");
            Call {
                target_dir: f[0].into(),
                bins: f[1].split(',').filter(|b| !b.is_empty()).map(str::to_string).collect(),
                build_dir: f[2].into(),
                profile: f[3]
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }
        })
        .collect()
}

#[test]
fn profile_variants_build_the_measured_binary_alone_and_drive_it_with_o3() {
    let root = analysis::default_root();
    let scratch = std::env::temp_dir().join(format!("wb-profile-variants-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let fake = scratch.join("cargo");
    std::fs::write(&fake, FAKE_CARGO).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = scratch.join("calls.log");
    // The runner runs `$CARGO` (set by cargo for a test, and by cargo for the CLI).
    std::env::set_var("CARGO", &fake);
    std::env::set_var("FAKE_CARGO_LOG", &log);
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO_PROFILE_RELEASE_") || k == "CARGO_BUILD_BUILD_DIR" {
            std::env::remove_var(k);
        }
    }
    let workspace_build = build::workspace_build_dir(&root);
    let target = Target::DatastoreServer;
    let own: Vec<_> = variants::VARIANTS.iter().filter(|v| !v.shares_workspace_build() && !v.pgo).collect();
    assert!(own.iter().any(|v| v.name == "thinlto"), "no profile variant without PGO registered");
    for v in own {
        let _ = std::fs::remove_file(&log);
        let dir = scratch.join(v.name).join("variants");
        let cell_bin = build::build(&root, &dir, target, v.name, &scratch.join(format!("{}.log", v.name)))
            .unwrap_or_else(|e| panic!("{}: {e:#}", v.name));
        let calls = calls(&log);
        assert_eq!(calls.len(), 2, "{}: one build of its own, one of the driver", v.name);
        let (mine, plain) = (&calls[0], &calls[1]);
        let own_dir = dir.join(v.name);
        // Its own target directory, no shared build directory, its profile
        // variables exactly, the measured binary alone.
        assert_eq!(Path::new(&mine.target_dir), own_dir, "{}", v.name);
        assert_eq!(mine.build_dir, "", "{}: a profile of its own shares no build directory", v.name);
        let want: BTreeMap<String, String> =
            v.profile_env.iter().map(|(k, val)| (k.to_string(), val.to_string())).collect();
        assert_eq!(mine.profile, want, "{}", v.name);
        assert_eq!(mine.bins, [target.measured()], "{}", v.name);
        // The driver: the plain release build, every binary, in the
        // workspace's build directory, no profile variable.
        assert_eq!(Path::new(&plain.target_dir), dir.join(PROFILE), "{}", v.name);
        assert_eq!(Path::new(&plain.build_dir), workspace_build.as_path(), "{}", v.name);
        assert!(plain.profile.is_empty(), "{}: {:?}", v.name, plain.profile);
        assert_eq!(plain.bins, target.binaries(), "{}", v.name);
        // What the runner returns: the cell's binary, the driver, from the
        // plain build; the measured server beside it, from its own.
        let bin_dir = own_dir.join("bin").join(v.name);
        assert_eq!(cell_bin, bin_dir.join(target.package_and_bin().1), "{}", v.name);
        for b in target.binaries() {
            let made_by = std::fs::read_to_string(bin_dir.join(b)).unwrap();
            let want = if *b == target.measured() { &own_dir } else { &dir.join(PROFILE) };
            assert_eq!(Path::new(made_by.trim()), want, "{}: {b}", v.name);
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
