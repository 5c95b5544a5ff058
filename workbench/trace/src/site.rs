//! Allocation sites: a raw stack normalised (the allocator's frames folded
//! away at the top, the thread start-up's at the bottom), sites merged
//! under one normalised stack, and the rankings of `trace top`.

use super::frame::{Frame, Side};
use super::RawSite;
use std::collections::BTreeMap;

/// One allocation site, or several merged under one normalised stack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Site {
    pub bytes: u64,
    pub blocks: u64,
    /// Sum of the blocks' lifetimes, µs (a block alive at exit counts to exit).
    pub lifetime_us: u64,
    /// Bytes of this site live at the moment the whole heap peaked.
    pub at_peak: u64,
    /// Blocks of this site live then.
    pub at_peak_blocks: u64,
    /// Bytes of this site still live at exit.
    pub at_exit: u64,
    /// Blocks of this site still live at exit.
    pub at_exit_blocks: u64,
    /// The innermost folded allocator frame (`alloc::vec::Vec<T>::with_capacity`).
    pub via: Option<String>,
    /// Caller-most last: the frames left after folding both ends.
    pub stack: Vec<Frame>,
    pub side: Option<Side>,
    /// Raw sites merged into this one.
    pub merged: usize,
}

impl Site {
    /// The normalised stack: function names, innermost first.
    pub fn key(&self) -> String {
        self.stack.iter().map(|f| f.function.as_str()).collect::<Vec<_>>().join(" ← ")
    }

    /// Where the subject's code calls the library that allocates: the frames
    /// from the innermost kept frame down to the first of this workspace's.
    pub fn meeting(&self) -> &[Frame] {
        match self.stack.iter().position(Frame::is_own) {
            Some(i) => &self.stack[..=i],
            None => &self.stack[..self.stack.len().min(6)],
        }
    }

    /// A short name: where the subject meets the library that allocates
    /// (`first ← … ← last` of [`Site::meeting`], generics dropped), else the
    /// allocator entry it went through.
    pub fn label(&self) -> String {
        let meeting: Vec<String> = self.meeting().iter().map(|f| super::tree::short(&f.function)).collect();
        match meeting.as_slice() {
            [] => self.via.as_deref().map_or("[allocator]".to_string(), super::tree::short),
            [one] => one.clone(),
            [first, .., last] => format!("{first} ← … ← {last}"),
        }
    }

    fn add(&mut self, o: &Site) {
        self.bytes += o.bytes;
        self.blocks += o.blocks;
        self.lifetime_us += o.lifetime_us;
        self.at_peak += o.at_peak;
        self.at_peak_blocks += o.at_peak_blocks;
        self.at_exit += o.at_exit;
        self.at_exit_blocks += o.at_exit_blocks;
        self.merged += o.merged;
    }
}

/// Ranking for [`Trace::top`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Bytes,
    Blocks,
    /// Bytes live at the global heap peak.
    Peak,
    /// Average lifetime of a block.
    Lifetime,
    /// Bytes live at the end: at exit, or when a running server was asked
    /// (a sampled profile's live heap, which has no peak).
    Live,
}

impl By {
    pub fn parse(s: &str) -> Option<By> {
        match s {
            "bytes" => Some(By::Bytes),
            "blocks" => Some(By::Blocks),
            "peak" => Some(By::Peak),
            "lifetime" => Some(By::Lifetime),
            "live" => Some(By::Live),
            _ => None,
        }
    }

    pub(super) fn value(self, s: &Site) -> f64 {
        match self {
            By::Bytes => s.bytes as f64,
            By::Blocks => s.blocks as f64,
            By::Peak => s.at_peak as f64,
            By::Lifetime => s.lifetime_us as f64 / s.blocks.max(1) as f64,
            By::Live => s.at_exit as f64,
        }
    }
}

pub(super) fn normalise(raw: &RawSite, stack: &[&Frame]) -> Site {
    let top = stack.iter().take_while(|f| f.is_plumbing()).count();
    // Keep the allocator frames when nothing else is left (an allocation
    // made by the runtime itself), so the site still has a name.
    let top = if top == stack.len() { 0 } else { top };
    let bottom = stack[top..].iter().rev().take_while(|f| f.is_startup()).count();
    let kept = &stack[top..stack.len() - bottom];
    let kept = if kept.is_empty() { &stack[top..] } else { kept };
    Site {
        bytes: raw.tb,
        blocks: raw.tbk,
        lifetime_us: raw.tl,
        at_peak: raw.gb,
        at_peak_blocks: raw.gbk,
        at_exit: raw.eb,
        at_exit_blocks: raw.ebk,
        via: top.checked_sub(1).map(|i| stack[i].function.clone()),
        stack: kept.iter().map(|f| (*f).clone()).collect(),
        side: Some(Side::of(stack)),
        merged: 1,
    }
}

pub(super) fn merge(sites: &[Site]) -> Vec<Site> {
    let mut by_key: BTreeMap<(String, Option<Side>), Site> = BTreeMap::new();
    for s in sites {
        match by_key.get_mut(&(s.key(), s.side)) {
            Some(m) => m.add(s),
            None => {
                by_key.insert((s.key(), s.side), s.clone());
            }
        }
    }
    by_key.into_values().collect()
}
