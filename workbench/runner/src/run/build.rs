//! Building a target binary (`subject`, `datastore-server`) once per build
//! variant. A variant is an allocator feature, cargo profile overrides,
//! and optionally profile-guided optimisation (an instrumented build, a
//! training run, `llvm-profdata merge`, a rebuild) and a post-link step
//! (BOLT, trained with its own instrumentation on the same workload).
//!
//! Every variant resolves features over the whole workspace (`--workspace
//! --bin … --features <package>/<feature>`), as the workspace's own build
//! does, so a dependency compiles the same way for every variant and for
//! the tests; only the crates whose features differ (probe, the subject or
//! server crate, jemalloc's sys crate) compile per variant.
//!
//! Variants with the plain release profile (`o3`, `system`, the allocator
//! variants, dhat included) share the workspace's build directory (`target/release/deps`,
//! cargo's `build.build-dir`): their dependencies are the ones the
//! workspace build (the tests, the main job) already compiled. Only their
//! final binaries go elsewhere (`target/variants/release`), so a variant
//! never replaces the `target/release/<binary>` the tests run. Profile
//! settings (debug info, LTO) change every crate's flags, so those variants
//! get a target directory each, and a profile-guided one its own. Cargo
//! writes every variant's binary to the same path of its directory, so each
//! build runs under a lock on its directory and leaves its binaries at
//! `<dir>/bin/<variant>/<binary>`, which no other build touches.
//!
//! A variant with a profile of its own builds only the binary it is about
//! ([`Target::measured`]): the server's load driver beside it is the plain
//! release build's (`o3`), so every build stage of the server is driven by
//! the same client, and the driver is not linked again with LTO (in a cold
//! test command, ThinLTO of both binaries took 266 s).
//!
//! Measured on a cold 2-core machine (2026-12-03): before sharing, the
//! quick suite's plain variants compiled the subject's and the server's
//! dependency trees again (≈ 760 s of CPU) beside the workspace build.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::run::fingerprint;
use crate::spec::variants::{get, Build, PROFILE, VARIANTS};
use registry::Target;

/// The target directory's name for a plain (not profile-guided) variant:
/// `release` for the plain profile, otherwise the first variant with the
/// same profile settings, whatever their allocator features.
fn build_dir(v: &Build) -> &'static str {
    if v.shares_workspace_build() {
        return PROFILE;
    }
    VARIANTS
        .iter()
        .find(|w| !w.pgo && w.profile_env == v.profile_env && w.codegen == v.codegen)
        .map_or(v.name, |w| w.name)
}

/// Where the workspace build keeps what it compiled: cargo's build
/// directory as configured in the environment, else its target directory,
/// else `target/`.
pub fn workspace_build_dir(root: &Path) -> PathBuf {
    ["CARGO_BUILD_BUILD_DIR", "CARGO_TARGET_DIR"]
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .map_or_else(|| root.join("target"), |d| root.join(d))
}

/// Builds a plain variant in its shared directory and copies the binary
/// out to `<dir>/bin/<variant>/` before another build may replace them.
/// NOTE: the lock covers cargo and the copy, since cargo's own lock is
/// released before we read the binary it wrote; the copy is renamed into
/// place, so a process still running the previous file keeps its inode.
fn build_shared(
    root: &Path,
    dir: &Path,
    target: Target,
    v: &Build,
    log_file: &mut std::fs::File,
    log: &Path,
) -> Result<PathBuf> {
    let target_dir = dir.join(build_dir(v));
    let bin_dir = target_dir.join("bin");
    std::fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    let lock_path = target_dir.join(".variant.lock");
    let lock = std::fs::File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    lock.lock().with_context(|| format!("locking {}", lock_path.display()))?;
    let built = cargo_build(root, &target_dir, target, v, "", log_file, log)?;
    if !builds_every_binary(v, "") {
        drive_with_plain(root, dir, target, &built, log_file, log)?;
    }
    copy_binaries(&built, &bin_dir.join(v.name), target)
}

/// Whether a build of `v` (with `rustflags`) makes all of the target's
/// binaries, or only the measured one: a build that shares the workspace's
/// compiled crates makes the driver at no cost, any other would compile and
/// link it again with the variant's profile.
fn builds_every_binary(v: &Build, rustflags: &str) -> bool {
    v.shares_workspace_build() && rustflags.is_empty()
}

/// Puts the plain release build's (`o3`) other binaries (the server's load
/// driver) beside `cell_bin`, a variant's own build of the measured binary.
fn drive_with_plain(
    root: &Path,
    dir: &Path,
    target: Target,
    cell_bin: &Path,
    log_file: &mut std::fs::File,
    log: &Path,
) -> Result<()> {
    let others: Vec<&str> = target.binaries().iter().copied().filter(|b| *b != target.measured()).collect();
    if others.is_empty() {
        return Ok(());
    }
    let plain = get("o3").context("variant o3 is not registered")?;
    let plain_bin = build_shared(root, dir, target, plain, log_file, log)?;
    for b in others {
        copy_whole(&plain_bin.with_file_name(b), &cell_bin.with_file_name(b))?;
    }
    Ok(())
}

/// Copies `from` to `to` through a temporary name and a rename, so a reader
/// sees a whole file or the old one, and a process still running the old
/// file keeps its inode.
/// Cargo's dep-info file beside a binary goes with it, so that a run can
/// read which sources the copy was compiled from
/// ([`crate::run::fingerprint::sources`]).
fn copy_whole(from: &Path, to: &Path) -> Result<()> {
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = to.with_file_name(format!(".{name}.{}", std::process::id()));
    std::fs::copy(from, &tmp).with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
    std::fs::rename(&tmp, to).with_context(|| format!("renaming {} to {}", tmp.display(), to.display()))?;
    let (dep_from, dep_to) = (fingerprint::dep_info(from), fingerprint::dep_info(to));
    if dep_from.is_file() {
        std::fs::copy(&dep_from, &dep_to)
            .with_context(|| format!("copying {} to {}", dep_from.display(), dep_to.display()))?;
    } else {
        // A post-linked binary has none: no stale one may stand for it.
        let _ = std::fs::remove_file(&dep_to);
    }
    Ok(())
}

/// Copies `target`'s binaries from beside `cell_bin` into `to` (each through
/// a temporary name and a rename, so a reader sees a whole file or the old
/// one); returns the copy of the cell's binary.
pub fn copy_binaries(cell_bin: &Path, to: &Path, target: Target) -> Result<PathBuf> {
    if to.is_file() {
        // A binary of the layout before the driver and server were split.
        std::fs::remove_file(to).with_context(|| format!("removing {}", to.display()))?;
    }
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for b in target.binaries() {
        copy_whole(&cell_bin.with_file_name(b), &to.join(b))?;
    }
    Ok(to.join(target.package_and_bin().1))
}

/// Builds `target` for `variant` and returns the binary's path. Cargo's
/// and the tools' output goes to `log`, named in the error if a step fails.
pub fn build(root: &Path, dir: &Path, target: Target, variant: &str, log: &Path) -> Result<PathBuf> {
    let v = get(variant).with_context(|| format!("unknown variant {variant:?}"))?;
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let mut log_file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    if !v.pgo {
        return build_shared(root, dir, target, v, &mut log_file, log);
    }
    if target != Target::DatastoreServer {
        bail!("variant {variant}: profile-guided builds train on the datastore server's workload only");
    }
    // 1. An instrumented build, run on the training workload.
    let profiles = dir.join(format!("{variant}-profiles"));
    let _ = std::fs::remove_dir_all(&profiles);
    std::fs::create_dir_all(&profiles).with_context(|| format!("creating {}", profiles.display()))?;
    let gen_flags = format!("-Cprofile-generate={}", profiles.display());
    let gen = cargo_build(root, &dir.join(format!("{variant}-gen")), target, v, &gen_flags, &mut log_file, log)?;
    drive_with_plain(root, dir, target, &gen, &mut log_file, log)?;
    train(&gen, &dir.join(format!("{variant}-train")), &mut log_file, log)?;
    // 2. The profiles merged, the target rebuilt with them.
    let profdata = dir.join(format!("{variant}.profdata"));
    let raw: Vec<PathBuf> = std::fs::read_dir(&profiles)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "profraw"))
        .collect();
    if raw.is_empty() {
        bail!("variant {variant}: the training run wrote no .profraw into {}", profiles.display());
    }
    run_tool(Command::new(llvm_profdata()?).arg("merge").arg("-o").arg(&profdata).args(&raw), &mut log_file, log)?;
    let mut use_flags = format!("-Cprofile-use={}", profdata.display());
    if v.bolt {
        // BOLT rewrites code only where the linker kept relocations.
        use_flags.push_str(" -Clink-arg=-Wl,--emit-relocs");
    }
    let bin = cargo_build(root, &dir.join(variant), target, v, &use_flags, &mut log_file, log)?;
    drive_with_plain(root, dir, target, &bin, &mut log_file, log)?;
    if !v.bolt {
        return Ok(bin);
    }
    // 3. BOLT on the measured server (the driver beside it stays as built):
    // instrument, train, optimise with the profile.
    let server = bin.with_file_name("datastore-server");
    let bolt = bolt_tool("llvm-bolt")?;
    let fdata_dir = dir.join(format!("{variant}-fdata"));
    let _ = std::fs::remove_dir_all(&fdata_dir);
    std::fs::create_dir_all(&fdata_dir)?;
    let inst_dir = dir.join(format!("{variant}.instrumented"));
    let inst_load = copy_binaries(&bin, &inst_dir, target)?;
    let inst = inst_dir.join("datastore-server");
    run_tool(
        Command::new(&bolt)
            .arg(&server)
            .arg("-instrument")
            .arg(format!("--instrumentation-file={}", fdata_dir.join("prof.fdata").display()))
            .arg("--instrumentation-file-append-pid")
            .arg("-o")
            .arg(&inst),
        &mut log_file,
        log,
    )?;
    train(&inst_load, &dir.join(format!("{variant}-bolt-train")), &mut log_file, log)?;
    let fdata: Vec<PathBuf> = std::fs::read_dir(&fdata_dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    if fdata.is_empty() {
        bail!("variant {variant}: the BOLT training run wrote no profile into {}", fdata_dir.display());
    }
    let merged = dir.join(format!("{variant}.fdata"));
    let out = Command::new(bolt_tool("merge-fdata")?).args(&fdata).output().context("running merge-fdata")?;
    if !out.status.success() {
        bail!("merge-fdata failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    std::fs::write(&merged, &out.stdout)?;
    let bolted_dir = dir.join(format!("{variant}.bolt"));
    let bolted_load = copy_binaries(&bin, &bolted_dir, target)?;
    let bolted = bolted_dir.join("datastore-server");
    run_tool(
        Command::new(&bolt)
            .arg(&server)
            .arg("-o")
            .arg(&bolted)
            .arg(format!("-data={}", merged.display()))
            .args(["-reorder-blocks=ext-tsp", "-reorder-functions=hfsort", "-split-functions", "-split-all-cold"])
            .args(["-dyno-stats"]),
        &mut log_file,
        log,
    )?;
    Ok(bolted_load)
}

/// Whether `key` is one of the variables cargo sets for the package it runs
/// (binary, test or build script), as opposed to the user's settings.
fn leaked_by_cargo(key: &str) -> bool {
    ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_"].iter().any(|p| key.starts_with(p))
        || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&key)
}

fn cargo_build(
    root: &Path,
    target_dir: &Path,
    target: Target,
    v: &Build,
    rustflags: &str,
    log_file: &mut std::fs::File,
    log: &Path,
) -> Result<PathBuf> {
    let (package, name) = target.package_and_bin();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // NOTE: `--workspace`, not `-p <package>`: cargo unifies features over
    // the packages selected, and over one package it gave tokio, clap and
    // their dependants other features than the workspace build, which then
    // compiled them all again for the variants.
    cmd.current_dir(root).args(["build", "--profile", PROFILE, "--workspace"]);
    let own: &[&str] = if builds_every_binary(v, rustflags) { target.binaries() } else { &[target.measured()] };
    for b in own {
        cmd.args(["--bin", b]);
    }
    cmd.arg("--target-dir").arg(target_dir);
    if builds_every_binary(v, rustflags) {
        cmd.env("CARGO_BUILD_BUILD_DIR", workspace_build_dir(root));
    }
    // The variables cargo sets for a running package (a test binary of this
    // crate, say) would leak into the build: a build script that reruns when
    // one of them changes (ring's watches CARGO_MANIFEST_DIR and
    // CARGO_PKG_NAME) then rebuilt half the tree whenever the tests and the
    // CLI took turns in one target directory.
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(leaked_by_cargo) {
            cmd.env_remove(&key);
        }
    }
    cmd.envs(v.profile_env.iter().copied());
    // Always the variant's instruction set (the reference build, or the
    // baseline where this CPU lacks it), for its Rust and its C, whatever
    // the caller's environment: these flags are what the manifest says the
    // binary was built with.
    let rustflags =
        [v.codegen_here().rustflags, rustflags].iter().filter(|f| !f.is_empty()).copied().collect::<Vec<_>>();
    cmd.env_remove("CARGO_ENCODED_RUSTFLAGS").env("RUSTFLAGS", rustflags.join(" "));
    cmd.env("CFLAGS", v.codegen_here().cflags);
    if !v.features.is_empty() {
        let features: Vec<String> = v.features.iter().map(|f| format!("{package}/{f}")).collect();
        cmd.arg("--features").arg(features.join(","));
    }
    let status = cmd
        .stdout(Stdio::null())
        .stderr(log_file.try_clone()?)
        .status()
        .with_context(|| format!("running cargo to build {name} ({})", v.name))?;
    if !status.success() {
        bail!("building {name} ({}) failed ({status}); see {}", v.name, log.display());
    }
    for b in own {
        let p = target_dir.join(PROFILE).join(b);
        if !p.exists() {
            bail!("cargo succeeded but {} is missing", p.display());
        }
    }
    Ok(target_dir.join(PROFILE).join(name))
}

/// The training workload of profile-guided builds: a short run of the
/// server's throughput experiment (the three queries at one and two
/// clients on 300,000 rows), the server instrumented under the release
/// build's driver.
fn train(bin: &Path, work: &Path, log_file: &mut std::fs::File, log: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(work);
    let cell = serde_json::json!({
        "experiment": registry::Experiment::Throughput.runs(),
        "params": {"rows": 300_000, "batch": 100_000, "concurrency": [1, 2], "seconds": 0.5},
        "seed": 7,
        "work_dir": work,
    });
    let r = run_tool(Command::new(bin).arg("--cell").arg(cell.to_string()), log_file, log);
    let _ = std::fs::remove_dir_all(work);
    r
}

/// Runs one step of a build, its output appended to the log; a failure
/// names the program and quotes the last line it printed (the tool's error).
fn run_tool(cmd: &mut Command, log_file: &mut std::fs::File, log: &Path) -> Result<()> {
    use std::io::Write;
    writeln!(log_file, "$ {cmd:?}")?;
    let program = Path::new(cmd.get_program()).file_name().map_or_else(String::new, |n| n.to_string_lossy().into());
    let out = cmd.output().with_context(|| format!("running {program}"))?;
    log_file.write_all(&out.stdout)?;
    log_file.write_all(&out.stderr)?;
    if !out.status.success() {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim().to_string();
        bail!("{program} failed ({}): {last} (full output in {})", out.status, log.display());
    }
    Ok(())
}

/// A BOLT tool, by its path under LLVM's prefix.
/// NOTE: not the `/usr/bin/llvm-bolt-16` symlink: llvm-bolt finds its
/// instrumentation runtime relative to the path it was started as
/// (`<dir>/../lib/libbolt_rt_instr.a`), which for the symlink is `/usr/lib`.
fn bolt_tool(name: &str) -> Result<PathBuf> {
    let p = Path::new("/usr/lib/llvm-16/bin").join(name);
    if !p.exists() {
        bail!(
            "{} is missing (Debian's bolt-16 and libbolt-16-dev; scripts/setup.sh installs them with WB_PEERS=1)",
            p.display()
        );
    }
    Ok(p)
}

/// llvm-profdata from the toolchain's llvm-tools component (rustup), which
/// matches rustc's LLVM and so reads the profiles it writes.
fn llvm_profdata() -> Result<PathBuf> {
    let out = Command::new("rustc").args(["--print", "sysroot"]).output().context("running rustc --print sysroot")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let out = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let host = text.lines().find_map(|l| l.strip_prefix("host: ")).unwrap_or("x86_64-unknown-linux-gnu").trim();
    let p = sysroot.join("lib/rustlib").join(host).join("bin/llvm-profdata");
    if !p.exists() {
        let st = Command::new("rustup").args(["component", "add", "llvm-tools"]).status();
        if !st.is_ok_and(|s| s.success()) || !p.exists() {
            bail!("{} is missing and `rustup component add llvm-tools` did not provide it", p.display());
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cargos_per_package_variables_are_dropped() {
        for k in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO_CRATE_NAME", "CARGO_TARGET_TMPDIR", "OUT_DIR"] {
            assert!(leaked_by_cargo(k), "{k}");
        }
        for k in ["CARGO_HOME", "CARGO_TARGET_DIR", "CARGO_PROFILE_RELEASE_LTO", "RUSTFLAGS", "PATH"] {
            assert!(!leaked_by_cargo(k), "{k}");
        }
    }

    #[test]
    fn identical_builds_share_a_directory() {
        for plain in ["o3", "system", "jemalloc", "jemalloc-plain", "dhat"] {
            assert_eq!(build_dir(get(plain).unwrap()), "release", "{plain}");
            assert!(get(plain).unwrap().shares_workspace_build(), "{plain}");
        }
        for own in ["thinlto", "fatlto", "pgo", "pgo-bolt"] {
            assert!(!get(own).unwrap().shares_workspace_build(), "{own}");
        }
        assert_eq!(build_dir(get("fatlto").unwrap()), "fatlto");
        assert_eq!(build_dir(get("thinlto").unwrap()), "thinlto");
        assert_eq!(build_dir(get("dhat").unwrap()), "release");
    }
}
