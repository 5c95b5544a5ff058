//! One unit of work for a subject process.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What one subject process runs: one experiment, one codec, one size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// Experiment name, as registered in [`crate::experiments`].
    pub experiment: String,
    /// Codec name, as registered in [`crate::codecs`].
    pub codec: String,
    /// Bytes of optional payload carried by each vote (0 = none).
    pub payload: usize,
    /// Measured messages (or round trips).
    pub messages: u64,
    /// Unmeasured messages first, so buffers reach their steady size.
    pub warmup: u64,
    /// Take a heap sample every this many messages (heap-growth).
    pub sample_every: u64,
    /// Seed of the vote values.
    pub seed: u64,
    /// Where the dhat build writes its trace (ignored by other builds).
    pub trace: Option<PathBuf>,
    /// The experiment's own settings from the spec's `params` (e.g. the
    /// open-loop request rate), passed as is.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, serde_json::Value>,
}
