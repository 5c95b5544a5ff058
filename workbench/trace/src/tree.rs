//! The allocation tree by caller and folded stacks, for `trace tree` and
//! the flame graph.

use super::Trace;
use std::collections::BTreeMap;
use std::path::Path;

impl Trace {
    /// Folded stacks, caller first (`a;b;c bytes`), as flame graph tools read them.
    pub fn folded(&self) -> Vec<String> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for s in &self.sites {
            let mut names: Vec<String> = s.stack.iter().rev().map(|f| short(&f.function)).collect();
            if let Some(v) = &s.via {
                names.push(short(v));
            }
            if names.is_empty() {
                names.push("[allocator]".into());
            }
            *out.entry(names.join(";")).or_default() += s.bytes;
        }
        out.into_iter().map(|(k, v)| format!("{k} {v}")).collect()
    }

    /// The allocation tree by caller: each node a function reached from the
    /// thread entries, with the bytes and blocks allocated beneath it.
    pub fn tree(&self) -> Node {
        let mut root = Node { name: "all".into(), ..Node::default() };
        for s in &self.sites {
            root.bytes += s.bytes;
            root.blocks += s.blocks;
            let mut node = &mut root;
            for f in s.stack.iter().rev() {
                let name = f.display();
                let at = match node.children.iter().position(|c| c.name == name) {
                    Some(i) => i,
                    None => {
                        node.children.push(Node { name, ..Node::default() });
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[at];
                node.bytes += s.bytes;
                node.blocks += s.blocks;
            }
        }
        root.sort();
        root
    }
}

/// A node of [`Trace::tree`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    pub name: String,
    pub bytes: u64,
    pub blocks: u64,
    pub children: Vec<Node>,
}

impl Node {
    fn sort(&mut self) {
        self.children.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
        for c in &mut self.children {
            c.sort();
        }
    }

    /// Indented lines, skipping nodes under `min_share` of the root's bytes;
    /// `max_depth` counts branch points, not frames.
    pub fn render(&self, min_share: f64, max_depth: usize) -> Vec<String> {
        let mut out = Vec::new();
        let total = self.bytes.max(1) as f64;
        self.render_into(&mut out, 0, total, min_share, max_depth);
        out
    }

    fn render_into(&self, out: &mut Vec<String>, depth: usize, total: f64, min_share: f64, max_depth: usize) {
        out.push(format!(
            "{:>6.1}%  {:>14} B  {:>10} blocks  {}{}",
            100.0 * self.bytes as f64 / total,
            units::thousands(self.bytes),
            units::thousands(self.blocks),
            "  ".repeat(depth),
            self.name
        ));
        if depth >= max_depth {
            return;
        }
        // A chain of single callers holding every byte of its parent stays
        // at the parent's depth: only branches indent and count.
        if let [only] = self.children.as_slice() {
            if only.bytes == self.bytes {
                return only.render_into(out, depth, total, min_share, max_depth);
            }
        }
        let mut hidden = (0u64, 0usize);
        for c in &self.children {
            if (c.bytes as f64) / total < min_share {
                hidden.0 += c.bytes;
                hidden.1 += 1;
            } else {
                c.render_into(out, depth + 1, total, min_share, max_depth);
            }
        }
        if hidden.1 > 0 {
            out.push(format!(
                "{:>6.1}%  {:>14} B  {:>10}         {}… {} smaller callers",
                100.0 * hidden.0 as f64 / total,
                units::thousands(hidden.0),
                "",
                "  ".repeat(depth + 1),
                hidden.1
            ));
        }
    }
}

/// Writes a flame graph of the trace's bytes by caller (inferno) to `out`.
pub fn write_flamegraph(trace: &Trace, out: &Path) -> anyhow::Result<()> {
    write_flamegraph_of(trace, out, "bytes allocated")
}

/// [`write_flamegraph`] with another measure in its title (`bytes live at …`).
pub fn write_flamegraph_of(trace: &Trace, out: &Path, what: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let lines = trace.folded();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!("{what}: {}", trace.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    opts.count_name = "bytes".into();
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), std::io::BufWriter::new(file))
        .with_context(|| format!("writing the flame graph {}", out.display()))?;
    Ok(())
}

/// A function name without generic arguments, for flame graph labels.
pub(crate) fn short(function: &str) -> String {
    let mut out = String::with_capacity(function.len());
    let mut depth = 0usize;
    for c in function.chars() {
        match c {
            '<' if !out.is_empty() && !out.ends_with("::") => depth += 1,
            '>' if depth > 0 => depth -= 1,
            ';' => out.push(':'),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
