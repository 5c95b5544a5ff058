//! A trace as a speedscope file (`workbench trace export --format
//! speedscope`): two sampled profiles over one frame table, bytes and
//! allocations, one sample per allocation site weighted by its total. The
//! stacks are the sites' normalised stacks (both ends folded, as in every
//! other view), root first as the format wants, with the allocator entry the
//! site went through as the leaf. Written from speedscope's published file
//! format (`src/lib/file-format-spec.ts` of jlfwong/speedscope).

use super::Trace;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// The `$schema` every speedscope file names.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Debug, Serialize, Deserialize)]
pub struct File {
    #[serde(rename = "$schema")]
    pub schema: String,
    pub shared: Shared,
    pub profiles: Vec<Profile>,
    pub name: String,
    #[serde(rename = "activeProfileIndex")]
    pub active_profile_index: usize,
    pub exporter: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Shared {
    pub frames: Vec<Frame>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Frame {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u64>,
}

/// A `sampled` profile: `samples[i]` a stack (indices into the frames, root
/// first) of weight `weights[i]`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Profile {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    /// `bytes`, or `none` for a count.
    pub unit: String,
    #[serde(rename = "startValue")]
    pub start_value: u64,
    #[serde(rename = "endValue")]
    pub end_value: u64,
    pub samples: Vec<Vec<usize>>,
    pub weights: Vec<u64>,
}

/// The speedscope file of `t`, named `name`.
pub fn file(t: &Trace, name: &str) -> File {
    let mut frames: Vec<Frame> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut frame = |function: &str, place: &str| -> usize {
        *index.entry((function.to_string(), place.to_string())).or_insert_with(|| {
            let (file, line) = super::frame::file_line(place);
            let file = (!file.is_empty()).then(|| file.to_string());
            frames.push(Frame { name: function.to_string(), file, line });
            frames.len() - 1
        })
    };
    let mut samples = Vec::with_capacity(t.sites.len());
    for s in &t.sites {
        // Root first: the stack's caller-most frame, down to the allocator entry.
        let mut stack: Vec<usize> = s.stack.iter().rev().map(|f| frame(&f.function, &f.location)).collect();
        if let Some(via) = &s.via {
            stack.push(frame(via, ""));
        }
        samples.push(stack);
    }
    let profile = |name: &str, unit: &str, weights: Vec<u64>| Profile {
        kind: "sampled".into(),
        name: name.into(),
        unit: unit.into(),
        start_value: 0,
        end_value: weights.iter().sum(),
        samples: samples.clone(),
        weights,
    };
    let profiles = vec![
        profile("bytes allocated", "bytes", t.sites.iter().map(|s| s.bytes).collect()),
        profile("allocations", "none", t.sites.iter().map(|s| s.blocks).collect()),
        profile("bytes live at the heap's peak", "bytes", t.sites.iter().map(|s| s.at_peak).collect()),
    ];
    File {
        schema: SCHEMA.into(),
        shared: Shared { frames },
        profiles,
        name: name.into(),
        active_profile_index: 0,
        exporter: format!("workbench {}", env!("CARGO_PKG_VERSION")),
    }
}

/// Writes `t`'s speedscope file to `out`.
pub fn write(t: &Trace, out: &Path) -> Result<()> {
    let name = t.path.file_name().map_or_else(|| t.cmd.clone(), |n| n.to_string_lossy().into_owned());
    let json = serde_json::to_vec(&file(t, &name))?;
    std::fs::write(out, json).with_context(|| format!("writing {}", out.display()))
}

#[cfg(test)]
mod tests;
