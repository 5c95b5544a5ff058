//! What a run records about the machine, the build and the command.

use serde::{Deserialize, Serialize};

/// Written as `manifest.json` beside every dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub experiment: String,
    pub run_id: String,
    pub scale: crate::spec::Scale,
    pub git_revision: String,
    pub git_dirty: bool,
    pub rustc: String,
    /// Cargo profile the subjects were built with.
    pub profile: String,
    /// Cargo features per variant, e.g. `{"dhat": ["dhat"], "system": []}`.
    pub features: std::collections::BTreeMap<String, Vec<String>>,
    /// Allocator of each variant.
    pub allocators: std::collections::BTreeMap<String, String>,
    /// How each variant was built (profile overrides, PGO, BOLT).
    #[serde(default)]
    pub builds: std::collections::BTreeMap<String, String>,
    /// The instruction set each variant was compiled for (absent in
    /// datasets from before the reference build: [`Manifest::target_cpu`]).
    #[serde(default)]
    pub target_cpus: std::collections::BTreeMap<String, String>,
    /// Why the reference build could not be used on this machine (a CPU
    /// without its features), if it could not; every caption says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_fallback: Option<String>,
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
    /// `/proc/loadavg` (1, 5, 15 min) before the first cell and after the last.
    #[serde(default)]
    pub load_before: Option<[f64; 3]>,
    #[serde(default)]
    pub load_after: Option<[f64; 3]>,
    /// Other processes that used more than 10 % of a core during the run.
    #[serde(default)]
    pub busy_processes: Vec<BusyProcess>,
    /// With `--allow-dirty` on a dirty tree: the file in the dataset holding
    /// `git diff HEAD`, the code the revision does not say.
    #[serde(default)]
    pub dirty_diff: Option<String>,
    /// Each cell's wall time in seconds, as the runner saw it (runs since
    /// 2026-12-03; `workbench run --plan` projects a suite's time from them).
    #[serde(default)]
    pub cell_seconds: std::collections::BTreeMap<String, f64>,
    /// Where each cell ran, for cells run as Slurm tasks; empty when every
    /// cell ran on the machine described above.
    #[serde(default)]
    pub nodes: std::collections::BTreeMap<String, Node>,
    /// Exactly what was measured, input by input
    /// ([`crate::run::fingerprint`]); none in datasets measured before it
    /// was kept, which `workbench status` counts as stale.
    #[serde(default)]
    pub fingerprint: Option<Fingerprint>,
    /// Each variant's binaries and their identities
    /// ([`crate::run::identity`]): variant → binary → identity. Empty in
    /// datasets measured before identities were kept, which age by their
    /// sources alone.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub binaries: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    /// Commits after the measured one at which this dataset was found to
    /// hold (its binaries built again, identical), oldest first; the
    /// fingerprint is then the newest certification's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certified: Vec<Certification>,
    /// Cells carried over from an earlier run, not measured in this one
    /// (`run --stale` on a count-only dataset whose other builds did not
    /// change): cell → the revision it was measured at.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub carried: std::collections::BTreeMap<String, String>,
}

/// One re-certification of a dataset without measuring it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certification {
    pub git_revision: String,
    /// UTC, ISO 8601.
    pub date: String,
    /// Why the measurement still holds (e.g. every binary identical).
    pub why: String,
    /// The inputs that had changed since the previous fingerprint.
    #[serde(default)]
    pub changed: Vec<String>,
}

impl Manifest {
    /// The revision the fingerprint was taken at: the newest
    /// certification's, else the measured one.
    pub fn judged_at(&self) -> &str {
        self.certified.last().map_or(&self.git_revision, |c| &c.git_revision)
    }

    /// The measured revision in `len` hex digits, and the newest
    /// certification's beside it: `abc1234 (certified at def5678)`.
    pub fn revisions(&self, len: usize) -> String {
        let short = |r: &str| r.chars().take(len).collect::<String>();
        match self.certified.last() {
            Some(c) => format!("{} (certified at {})", short(&self.git_revision), short(&c.git_revision)),
            None => short(&self.git_revision),
        }
    }

    /// The instruction set `variant` was compiled for in this run. Runs from
    /// before the reference build (x86-64-v3) did not record it: their
    /// `x86-64-v3` variant was built for it, every other for the baseline.
    pub fn target_cpu(&self, variant: &str) -> &str {
        match self.target_cpus.get(variant) {
            Some(cpu) => cpu,
            None if variant == "x86-64-v3" => "x86-64-v3",
            None => crate::spec::variants::BASELINE.label,
        }
    }
}

/// What a dataset was measured from: each input's hash, and one over all
/// (made and compared by [`crate::run::fingerprint`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub hash: String,
    pub inputs: std::collections::BTreeMap<String, String>,
}

/// The machine one cell ran on (a Slurm task's node, or this machine for a
/// run resumed here after starting elsewhere).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub hostname: String,
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    /// `/proc/loadavg` when the cell started.
    pub load: Option<[f64; 3]>,
}

impl Node {
    /// This machine, now.
    pub fn this() -> Node {
        Node { hostname: hostname(), cpu_model: cpu_model(), cores: cores(), kernel: kernel(), load: load_average() }
    }
    /// The same machine: host and CPU model (load and kernel may change).
    pub fn same_machine(&self, other: &Node) -> bool {
        self.hostname == other.hostname && self.cpu_model == other.cpu_model
    }
}

/// A process that used more than `run::provenance::BUSY_SHARE` of one core
/// during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BusyProcess {
    pub pid: u32,
    pub name: String,
    /// Share of one core over the run, percent.
    pub cpu_percent: f64,
}

pub use crate::data::host::*;

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::iso_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::iso_date(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(super::compact_date(951_782_400 + 3661), "20000229T010101Z");
    }
}
