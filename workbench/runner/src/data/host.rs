//! Facts about the host and the build a measurement records: git state,
//! rustc, CPU, cores, kernel, dates (UTC).

use std::path::Path;
use std::process::Command;

fn run(cmd: &str, args: &[&str], dir: &Path) -> Option<String> {
    let out = Command::new(cmd).args(args).current_dir(dir).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `(revision, dirty)`; `("unknown", false)` outside a git checkout.
pub fn git_state(root: &Path) -> (String, bool) {
    let rev = run("git", &["rev-parse", "HEAD"], root).unwrap_or_else(|| "unknown".into());
    let dirty = run("git", &["status", "--porcelain", "--untracked-files=no"], root).is_some_and(|s| !s.is_empty());
    (rev, dirty)
}

/// The id of the git object at `path` in HEAD (a tree's id changes exactly
/// when something under it does); the HEAD revision plus the dirty flag
/// when the path has uncommitted changes; `"unknown"` outside a checkout.
pub fn git_object(root: &Path, path: &str) -> String {
    let id = run("git", &["rev-parse", &format!("HEAD:{path}")], root).unwrap_or_else(|| "unknown".into());
    let dirty =
        run("git", &["status", "--porcelain", "--untracked-files=no", "--", path], root).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{id}+dirty")
    } else {
        id
    }
}

pub fn rustc_version(root: &Path) -> String {
    run("rustc", &["--version"], root).unwrap_or_else(|| "unknown".into())
}

pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `/proc/loadavg`'s three averages.
pub fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The machine's host name (`/proc/sys/kernel/hostname`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `2026-11-30T04:15:00Z`.
pub fn iso_date(secs: u64) -> String {
    utc(secs).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `secs` since the Unix epoch as a UTC date (the epoch itself where chrono cannot hold it).
fn utc(secs: u64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(i64::try_from(secs).unwrap_or(0), 0).unwrap_or_default()
}

/// `20261130T041500Z`, used in run ids.
pub fn compact_date(secs: u64) -> String {
    utc(secs).format("%Y%m%dT%H%M%SZ").to_string()
}
