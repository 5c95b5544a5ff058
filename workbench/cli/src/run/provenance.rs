//! What makes a measurement reproducible and trustworthy, checked before and
//! recorded after a run: the tree is committed (or its diff is stored), only
//! one measurement runs on the machine at a time, and the load and the busy
//! processes around the run are written into the manifest.

use anyhow::{bail, Context, Result};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// `git diff HEAD` of the tracked files: what a dirty tree measured.
pub fn diff(root: &Path) -> Result<String> {
    let out = std::process::Command::new("git")
        .args(["diff", "HEAD", "--binary"])
        .current_dir(root)
        .output()
        .with_context(|| format!("running git diff in {}", root.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Refuses a measurement on a dirty tree unless allowed.
pub fn check_clean(root: &Path, allow_dirty: bool) -> Result<bool> {
    let (_, dirty) = crate::data::host::git_state(root);
    if dirty && !allow_dirty {
        bail!(
            "the working tree at {} has uncommitted changes: a dataset from it reproduces from no commit. \
             Commit first, or pass --allow-dirty (the diff is then stored in the dataset as dirty.diff)",
            root.display()
        );
    }
    Ok(dirty)
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
