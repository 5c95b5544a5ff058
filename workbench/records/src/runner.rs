//! Records the runner writes in place of a cell's own.

use serde::{Deserialize, Serialize};

/// A build variant that could not be built (a profile-guided or post-linked
/// stage whose tool this machine lacks): the dataset says so, with the
/// tool's error, instead of leaving the stage out silently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BuildFailed {
    pub error: String,
}

/// `kind` of a [`BuildFailed`] record.
pub const BUILD_FAILED: &str = "build-failed";
