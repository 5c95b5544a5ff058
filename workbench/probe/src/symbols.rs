//! Frames resolved in the measured process, written as dhat writes them
//! (`0xADDR: function (file:line:col)`), so that one reader ([`trace`'s
//! frame parser]) folds and matches the sites of every build alike.
//!
//! [`trace`'s frame parser]: ../../trace/frame/index.html

use std::collections::HashMap;

/// Interned frames: the frame table (`ftbl`) and, per address, the entries
/// it resolved to (an inlined call is several frames at one address).
#[derive(Default)]
pub struct FrameTable {
    pub ftbl: Vec<String>,
    /// Per entry of `ftbl`, its file's whole path (empty when unknown).
    pub files: Vec<String>,
    of: HashMap<usize, Vec<usize>>,
    /// Keep a file's last three path components only, as dhat does: the
    /// crate's directory and file (`capnp-0.27.3/src/message.rs`) are what
    /// attribute a frame, and a sampled profile stays the size of dhat's.
    short_paths: bool,
}

/// The last three components of `path` (dhat's `trim_path`).
fn trimmed(path: &std::path::Path) -> &std::path::Path {
    let n = path.components().count();
    let mut c = path.components();
    if n > 3 {
        c.nth(n - 4);
    }
    c.as_path()
}

impl FrameTable {
    /// A table whose files keep dhat's last three path components.
    pub fn short() -> FrameTable {
        FrameTable { short_paths: true, ..FrameTable::default() }
    }

    /// The frame table entries of `ip`, resolving it the first time.
    /// `return_address`: `ip` is the instruction after a call (every frame
    /// of an unwound stack but the innermost), so the call itself is looked
    /// up at `ip - 1`, as dhat's resolver does; otherwise a call that ends a
    /// function or an inlined body names the code after it.
    pub fn frames(&mut self, ip: usize, return_address: bool) -> &[usize] {
        let FrameTable { ftbl, files, of, short_paths } = self;
        of.entry(ip).or_insert_with(|| {
            let lookup = if return_address { ip.saturating_sub(1) } else { ip };
            let mut names = Vec::new();
            backtrace::resolve(lookup as *mut std::ffi::c_void, |sym| {
                let name = sym.name().map_or_else(|| "???".to_string(), |n| format!("{n:#}"));
                let whole = sym.filename().map_or_else(String::new, |f| f.display().to_string());
                let file = match sym.filename() {
                    Some(f) if *short_paths => trimmed(f).display().to_string(),
                    _ => whole.clone(),
                };
                let place = match (sym.lineno(), sym.colno()) {
                    (Some(l), Some(c)) => format!(" ({file}:{l}:{c})"),
                    (Some(l), None) => format!(" ({file}:{l}:0)"),
                    _ if !file.is_empty() => format!(" ({file})"),
                    _ => String::new(),
                };
                names.push((format!("0x{ip:x}: {name}{place}"), whole));
            });
            if names.is_empty() {
                names.push((format!("0x{ip:x}: ???"), String::new()));
            }
            names
                .into_iter()
                .map(|(n, whole)| {
                    ftbl.push(n);
                    files.push(whole);
                    ftbl.len() - 1
                })
                .collect()
        })
    }
}
