//! The differential allocation flame graph of two traces: one tree of
//! callers (thread entries at the top, the allocator's entry at the
//! bottom), frames matched by normalised stack, as [`super::diff`] matches
//! sites. A frame's width is its bytes in A and B together, so a frame
//! that only one trace has is still drawn; its colour is the change in
//! bytes (red more, blue fewer, purple when only the number of blocks
//! changed, grey neither); its title holds the exact before → after of
//! both, which the report site shows beside the pointer.
//!
//! An SVG string, inline in a page (`rect.delta`, which the site's script
//! hooks as it hooks a figure's points) or written beside `bisect`'s output.

use super::Trace;
use std::fmt::Write;
use units::xml_escape as esc;

/// Bytes and blocks of a frame in A and in B.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiffNode {
    pub name: String,
    pub a: (u64, u64),
    pub b: (u64, u64),
    pub children: Vec<DiffNode>,
}

impl DiffNode {
    fn weight(&self) -> u64 {
        self.a.0 + self.b.0
    }

    pub fn changed(&self) -> bool {
        self.a != self.b
    }

    fn add(&mut self, path: &[String], side_b: bool, bytes: u64, blocks: u64) {
        let v = if side_b { &mut self.b } else { &mut self.a };
        v.0 += bytes;
        v.1 += blocks;
        let Some((first, rest)) = path.split_first() else { return };
        let i = match self.children.iter().position(|c| &c.name == first) {
            Some(i) => i,
            None => {
                self.children.push(DiffNode { name: first.clone(), ..DiffNode::default() });
                self.children.len() - 1
            }
        };
        self.children[i].add(rest, side_b, bytes, blocks);
    }

    fn sort(&mut self) {
        self.children.sort_by(|x, y| y.weight().cmp(&x.weight()).then_with(|| x.name.cmp(&y.name)));
        for c in &mut self.children {
            c.sort();
        }
    }

    fn depth(&self) -> usize {
        1 + self.children.iter().map(DiffNode::depth).max().unwrap_or(0)
    }
}

/// The tree of `a` against `b`: caller first, the thread's side as the top
/// frame when the traces have more than one, the allocator entry last.
pub fn tree(a: &Trace, b: &Trace) -> DiffNode {
    let sides: std::collections::BTreeSet<_> = a.sites.iter().chain(&b.sites).map(|s| s.side).collect();
    let mut root = DiffNode { name: "all".into(), ..DiffNode::default() };
    for (t, is_b) in [(a, false), (b, true)] {
        for s in &t.sites {
            let mut path: Vec<String> = Vec::with_capacity(s.stack.len() + 2);
            if sides.len() > 1 {
                path.push(format!("[{}]", s.side.map_or("?", |x| x.name())));
            }
            path.extend(s.stack.iter().rev().map(|f| f.function.clone()));
            if let Some(v) = &s.via {
                path.push(v.clone());
            }
            root.add(&path, is_b, s.bytes, s.blocks);
        }
    }
    root.sort();
    root
}

const WIDTH: f64 = 1180.0;
const ROW: f64 = 16.0;
/// Frames narrower than this many pixels are not drawn (their bytes stay
/// in their parent's width and title).
const MIN_PX: f64 = 0.3;

fn colour(n: &DiffNode) -> String {
    let (a, b) = (n.a.0 as f64, n.b.0 as f64);
    if a == b {
        return if n.a.1 == n.b.1 { "#dddddd".into() } else { "#c9a6e0".into() };
    }
    // Intensity by the relative change of bytes; a new or a gone frame is full.
    let r = ((b - a) / a.max(b)).abs().min(1.0);
    let fade = (235.0 - 175.0 * r.sqrt()) as u8;
    if b > a {
        format!("#ff{fade:02x}{fade:02x}")
    } else {
        format!("#{fade:02x}{fade:02x}ff")
    }
}

fn title(n: &DiffNode) -> String {
    let d = |x: u64, y: u64| y as i128 - x as i128;
    format!(
        "{}\nbytes: {} → {} ({:+})\nblocks: {} → {} ({:+})",
        n.name,
        units::thousands(n.a.0),
        units::thousands(n.b.0),
        d(n.a.0, n.b.0),
        units::thousands(n.a.1),
        units::thousands(n.b.1),
        d(n.a.1, n.b.1)
    )
}

/// The graph as an SVG element; `label` names A and B in its heading.
pub fn svg(root: &DiffNode, label: &str) -> String {
    let depth = root.depth().min(64);
    let height = ROW * (depth as f64 + 2.0);
    let mut s = format!(
        "<svg class=\"diff-flame\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" \
         viewBox=\"0 0 {w} {height}\" font-family=\"monospace\" font-size=\"11\">\n\
         <text x=\"4\" y=\"12\">{}</text>\n",
        esc(label),
        w = WIDTH + 20.0
    );
    draw(&mut s, root, 10.0, ROW + 4.0, WIDTH, 0, depth);
    s + "</svg>\n"
}

fn draw(s: &mut String, n: &DiffNode, x: f64, y: f64, w: f64, level: usize, max: usize) {
    if w < MIN_PX || level >= max {
        return;
    }
    let short = super::tree::short(&n.name);
    let _ = write!(
        s,
        "<g><rect class=\"delta\" x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h}\" fill=\"{}\" \
         stroke=\"#fff\" stroke-width=\"0.5\"><title>{}</title></rect>",
        colour(n),
        esc(&title(n)),
        h = ROW - 1.0
    );
    let chars = ((w - 6.0) / 6.7).floor().max(0.0) as usize;
    if chars >= 3 {
        let text: String = if short.chars().count() > chars {
            short.chars().take(chars.saturating_sub(1)).chain(std::iter::once('…')).collect()
        } else {
            short
        };
        let _ =
            write!(s, "<text x=\"{:.2}\" y=\"{:.1}\" pointer-events=\"none\">{}</text>", x + 3.0, y + 11.5, esc(&text));
    }
    s.push_str("</g>\n");
    let mut cx = x;
    for c in &n.children {
        let cw = w * c.weight() as f64 / n.weight().max(1) as f64;
        draw(s, c, cx, y + ROW, cw, level + 1, max);
        cx += cw;
    }
}

/// A legend for the page around the graph.
pub const LEGEND: &str = "Width: a frame's bytes in A and B together. Colour: red, more bytes in B; blue, fewer; \
                          purple, the same bytes in another number of blocks; grey, unchanged. Hover a frame for \
                          its exact bytes and blocks before → after.";

#[cfg(test)]
mod tests;
