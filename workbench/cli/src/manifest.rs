//! What a run records about the machine, the build and the command.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// Written as `manifest.json` beside every dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub experiment: String,
    pub run_id: String,
    pub scale: String,
    pub git_revision: String,
    pub git_dirty: bool,
    pub rustc: String,
    /// Cargo profile the subjects were built with.
    pub profile: String,
    /// Cargo features per variant, e.g. `{"dhat": ["dhat"], "system": []}`.
    pub features: std::collections::BTreeMap<String, Vec<String>>,
    /// Allocator of each variant.
    pub allocators: std::collections::BTreeMap<String, String>,
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    /// UTC, ISO 8601.
    pub date: String,
    pub command_line: Vec<String>,
    /// The spec file and its contents as parsed.
    pub spec_path: String,
    pub spec: crate::spec::Spec,
    /// Cells in run order, and how many came from an interrupted earlier attempt.
    pub cells: Vec<String>,
    pub cells_resumed: usize,
    pub records: usize,
}

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

pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds since the epoch as `(YYYY, MM, DD, hh, mm, ss)` in UTC.
pub fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `2026-11-30T04:15:00Z`.
pub fn iso_date(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `20261130T041500Z`, used in run ids.
pub fn compact_date(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::iso_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::iso_date(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(super::compact_date(951_782_400 + 3661), "20000229T010101Z");
    }
}
