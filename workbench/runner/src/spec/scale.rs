//! The two scales every spec has, as a type: the quick suite (small, the
//! default) and the full one (the paper's figures when it exists).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How much of an experiment runs: its spec's `[quick]` or `[full]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    Quick,
    Full,
}

impl Scale {
    /// Both, smallest first.
    pub const ALL: [Scale; 2] = [Scale::Quick, Scale::Full];
    /// Which a reader shows: the largest scale with a dataset wins.
    pub const PREFERRED: [Scale; 2] = [Scale::Full, Scale::Quick];

    /// The name in specs, run ids (`<scale>-<date>`) and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Quick => "quick",
            Scale::Full => "full",
        }
    }

    /// Where the outputs of this scale live under `root/base`: the quick
    /// suite's at the top (`figures/`), the others in a folder (`figures/full/`).
    pub fn dir(self, root: &Path, base: &str) -> PathBuf {
        match self {
            Scale::Quick => root.join(base),
            other => root.join(base).join(other.name()),
        }
    }
}

impl std::fmt::Display for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scale {
    type Err = String;

    fn from_str(s: &str) -> Result<Scale, String> {
        Scale::ALL.into_iter().find(|x| x.name() == s).ok_or_else(|| format!("unknown scale {s:?}; use quick or full"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Scale::ALL {
            assert_eq!(s.name().parse::<Scale>().unwrap(), s);
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert!("huge".parse::<Scale>().unwrap_err().contains("huge"));
        assert_eq!(Scale::Full.dir(Path::new("/r"), "figures"), Path::new("/r/figures/full"));
        assert_eq!(Scale::Quick.dir(Path::new("/r"), "figures"), Path::new("/r/figures"));
    }
}
