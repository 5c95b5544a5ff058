//! What makes a measurement reproducible and trustworthy, checked before and
//! recorded after a run: the tree is committed (or its diff is stored), only
//! one measurement runs on the machine at a time, and the load and the busy
//! processes around the run are written into the manifest.

use anyhow::{bail, Context, Result};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::run::fingerprint::Inputs;

pub use crate::data::manifest::BusyProcess;

/// BUSY_SHARE = 10 %: a process above it competed with the measurement for
/// one of the 2 cores noticeably enough to show in timings.
pub const BUSY_SHARE: f64 = 10.0;

pub use crate::data::host::load_average;

/// CPU ticks (user + system) and name of every process now.
pub fn cpu_ticks() -> BTreeMap<u32, (u64, String)> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let Some((name, ticks)) = probe::rss::parse_stat(&stat) else { continue };
        out.insert(pid, (ticks, name));
    }
    out
}

/// Processes that used more than [`BUSY_SHARE`] of a core between two
/// samples `secs` apart (this process and its children excluded by pid).
pub fn busy_between(
    before: &BTreeMap<u32, (u64, String)>,
    after: &BTreeMap<u32, (u64, String)>,
    secs: f64,
    exclude: &[u32],
) -> Vec<BusyProcess> {
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut busy: Vec<BusyProcess> = after
        .iter()
        .filter(|(pid, _)| !exclude.contains(pid))
        .filter_map(|(pid, (t1, name))| {
            let t0 = before.get(pid).map_or(0, |(t, _)| *t);
            let pct = (t1.saturating_sub(t0)) as f64 / hz / secs.max(1e-3) * 100.0;
            (pct > BUSY_SHARE).then(|| BusyProcess { pid: *pid, name: name.clone(), cpu_percent: pct })
        })
        .collect();
    busy.sort_by(|a, b| b.cpu_percent.total_cmp(&a.cpu_percent));
    busy
}

/// The files among `paths` that differ from HEAD: modified, staged, deleted,
/// or new and untracked (a new source file in a measured crate is code the
/// commit does not hold).
pub fn changed_among(root: &Path, paths: &[String]) -> Vec<String> {
    let mut args = vec!["status", "--porcelain", "--untracked-files=all", "--no-renames", "--"];
    args.extend(paths.iter().map(String::as_str));
    let out = std::process::Command::new("git").args(&args).current_dir(root).output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.get(3..))
        .map(|f| f.trim_matches('"').to_string())
        .collect()
}

/// `git diff HEAD` of `files` (tracked): what a dirty tree measured.
pub fn diff_of(root: &Path, files: &[String]) -> Result<String> {
    let out = std::process::Command::new("git")
        .args(["diff", "HEAD", "--binary", "--"])
        .args(files)
        .current_dir(root)
        .output()
        .with_context(|| format!("running git diff in {}", root.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Refuses a run of the spec at `spec_path` when a file it measures differs
/// from HEAD (naming each), unless allowed; the changed files (none: clean).
/// Every other change in the tree (a figure, the paper, a dataset) neither
/// blocks a run nor marks its dataset dirty.
pub fn check_clean(root: &Path, allow_dirty: bool, spec_path: &Path, inputs: &Inputs) -> Result<Vec<String>> {
    let changed = changed_among(root, &inputs.paths());
    if !changed.is_empty() && !allow_dirty {
        bail!(
            "{}: what it measures has uncommitted changes ({}): a dataset from it reproduces from no commit. \
             Commit first, or pass --allow-dirty (the diff is then stored in the dataset as dirty.diff)",
            spec_path.display(),
            changed.join(", ")
        );
    }
    Ok(changed)
}

/// Held while a measurement runs: one per machine.
pub struct MeasureLock {
    _file: std::fs::File,
    path: PathBuf,
}

/// LOCK = the machine-wide lock of measurements, in the system temp dir so
/// that every checkout on the machine shares it.
pub fn lock_path() -> PathBuf {
    std::env::temp_dir().join("workbench-measurement.lock")
}

impl MeasureLock {
    /// Takes the machine's lock, or fails naming who holds it.
    pub fn acquire(what: &str) -> Result<MeasureLock> {
        Self::acquire_at(lock_path(), what)
    }

    /// Takes the lock at `path` (tests use their own).
    pub fn acquire_at(path: PathBuf, what: &str) -> Result<MeasureLock> {
        use std::io::{Read, Seek, Write};
        use std::os::fd::AsRawFd;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor we own; released when the file closes.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            bail!(
                "another measurement is running on this machine ({}); two at once would show in both. \
                 Wait for it, or remove {} if its process is gone",
                holder.trim(),
                path.display()
            );
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(
            file,
            "pid {}, {what}, since {}",
            std::process::id(),
            crate::data::host::iso_date(crate::data::host::now_secs())
        )?;
        Ok(MeasureLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The workbench that builds and runs the measured binaries must itself be
/// built from the commit the tree is at: a stale CLI builds variants with
/// stale steps (seen: an old BOLT invocation, its failure recorded in a
/// dataset stamped with the new revision).
pub fn check_self(root: &Path) -> anyhow::Result<()> {
    let (rev, _) = crate::data::host::git_state(root);
    if probe::GIT_REVISION != rev {
        anyhow::bail!(
            "this workbench was built from revision {}, but the tree is at {rev}; rebuild it first \
             (cargo build --release --workspace, as scripts/quick.sh does)",
            probe::GIT_REVISION
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Scale, Spec};

    #[test]
    fn what_a_run_measures_is_its_crates_lock_flags_spec_and_peers_not_the_outputs() {
        let root = crate::default_root();
        let crates = crate::run::fingerprint::measured_crates(&root).unwrap();
        for c in [
            "workbench/zap",
            "workbench/probe",
            "workbench/records",
            "workbench/registry",
            "workbench/stacks",
            "workbench/subjects",
        ] {
            assert!(crates.contains(&c.to_string()), "{c} missing from {crates:?}");
        }
        for c in ["workbench/datastore", "workbench/server"] {
            assert!(crates.contains(&c.to_string()), "{c} missing from {crates:?}");
        }
        for c in ["workbench/cli", "workbench/runner", "workbench/analysis", "workbench/site"] {
            assert!(!crates.contains(&c.to_string()), "{c} is no measured crate: {crates:?}");
        }
        let path = root.join("experiments/throughput.toml");
        let spec = Spec::load(&path).unwrap();
        let paths = Inputs::of(&root, &path, &spec, Scale::Quick).unwrap().paths();
        for p in ["Cargo.lock", ".cargo/config.toml", "experiments/throughput.toml", "scripts/chdb_engine.py"] {
            assert!(paths.contains(&p.to_string()), "{p} missing from {paths:?}");
        }
        for p in [
            "figures",
            "paper",
            "data",
            "notebooks",
            "README.md",
            "workbench/cli",
            "workbench/analysis",
            "workbench/site",
        ] {
            assert!(!paths.iter().any(|x| x.starts_with(p)), "{p} is an output, not a measured input: {paths:?}");
        }
    }

    #[test]
    fn only_a_change_to_a_measured_file_makes_a_run_dirty() {
        // A scratch repository: one measured file, one output.
        let dir = std::env::temp_dir().join(format!("wb-dirty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join("figures")).unwrap();
        let git = |args: &[&str]| {
            let st = std::process::Command::new("git").args(args).current_dir(&dir).output().unwrap();
            assert!(st.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&st.stderr));
        };
        std::fs::write(dir.join("src/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.join("figures/a.svg"), "<svg/>\n").unwrap();
        git(&["init", "-q"]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "add", "."]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"]);
        let measured = vec!["src".to_string()];
        std::fs::write(dir.join("figures/a.svg"), "<svg>new</svg>\n").unwrap();
        assert!(changed_among(&dir, &measured).is_empty(), "a regenerated figure is no measured change");
        std::fs::write(dir.join("src/lib.rs"), "fn b() {}\n").unwrap();
        std::fs::write(dir.join("src/new.rs"), "\n").unwrap();
        assert_eq!(changed_among(&dir, &measured), ["src/lib.rs", "src/new.rs"]);
        let diff = diff_of(&dir, &changed_among(&dir, &measured)).unwrap();
        assert!(diff.contains("fn b()") && !diff.contains("svg"), "{diff}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_second_lock_is_refused_while_the_first_is_held() {
        let path = std::env::temp_dir().join(format!("wb-lock-test-{}", std::process::id()));
        let a = MeasureLock::acquire_at(path.clone(), "test one").unwrap();
        let e = MeasureLock::acquire_at(path.clone(), "test two").err().unwrap().to_string();
        assert!(e.contains("another measurement is running") && e.contains("test one"), "{e}");
        drop(a);
        MeasureLock::acquire_at(path.clone(), "test three").unwrap();
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn busy_processes_are_those_above_the_share() {
        let before = BTreeMap::from([(1, (100, "idle".to_string())), (2, (100, "cc1".to_string()))]);
        let after = BTreeMap::from([(1, (101, "idle".to_string())), (2, (300, "cc1".to_string()))]);
        // SAFETY: as above.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let busy = busy_between(&before, &after, 200.0 / hz, &[]);
        assert_eq!(busy.len(), 1);
        assert_eq!((busy[0].pid, busy[0].name.as_str()), (2, "cc1"));
        assert!((busy[0].cpu_percent - 100.0).abs() < 1e-9);
    }
}
