//! The text of `trace top` and `trace diff`.

use super::diff::Delta;
use super::site::{merge, By};
use super::{Side, Trace};

/// `trace top`'s text: a header, then one block per site.
pub fn render_top(t: &Trace, by: By, side: Option<Side>, limit: usize) -> String {
    use units::thousands;
    let sites = t.top(by, side);
    let (bytes, blocks) = (t.total_bytes(), t.total_blocks());
    let mut s = format!("{}\n", t.path.display());
    let ops = match t.operations {
        Some(n) => format!(", {} operations (messages + warm-up; setup counts too)", thousands(n)),
        None => String::new(),
    };
    s += &format!(
        "{} B in {} blocks at {} sites ({} after merging equal stacks){ops}\n",
        thousands(bytes),
        thousands(blocks),
        t.sites.len(),
        merge(&t.sites).len()
    );
    if let Some(sm) = t.sampling {
        s += &format!(
            "sampled by jemalloc every {} on average (2^{}): bytes and blocks are estimates; no peak or lifetimes\n",
            units::bytes(sm.interval as f64),
            sm.lg_sample
        );
    }
    if let Some(side) = side {
        let (b, k) = sites.iter().fold((0, 0), |(b, k), x| (b + x.bytes, k + x.blocks));
        s += &format!("{} side: {} B in {} blocks\n", side.name(), thousands(b), thousands(k));
    }
    for (i, x) in sites.iter().take(limit).enumerate() {
        let per_op = t
            .operations
            .map(|n| format!("  {:.1} B/op  {:.3} blocks/op", x.bytes as f64 / n as f64, x.blocks as f64 / n as f64));
        // A sampled profile knows what is live at its end, and at the peak
        // only where it dumped at its high-water mark (an estimate, at the
        // pages' peak, not the bytes').
        let when = match t.sampling {
            Some(s) if s.has_peak() => {
                format!("live at exit {} B  at the high-water dump ≈ {} B", thousands(x.at_exit), thousands(x.at_peak))
            }
            Some(_) => format!("live at exit {} B", thousands(x.at_exit)),
            None => format!(
                "at peak {} B  avg life {}",
                thousands(x.at_peak),
                life(x.lifetime_us as f64 / x.blocks.max(1) as f64)
            ),
        };
        s += &format!(
            "\n#{:<3} {} B ({:.1}%)  {} blocks  avg {} B  {when}  [{}]{}\n",
            i + 1,
            thousands(x.bytes),
            100.0 * x.bytes as f64 / bytes.max(1) as f64,
            thousands(x.blocks),
            thousands(x.bytes / x.blocks.max(1)),
            x.side.map_or("?", Side::name),
            per_op.unwrap_or_default()
        );
        if let Some(v) = &x.via {
            s += &format!("      via {v}\n");
        }
        let meeting = x.meeting();
        for (j, f) in meeting.iter().enumerate() {
            let mark = if f.is_own() && j + 1 == meeting.len() { "  ← subject code" } else { "" };
            s += &format!("      {}{mark}\n", f.display());
        }
        if meeting.len() < x.stack.len() {
            s += &format!("      … {} caller frames (trace tree shows them)\n", x.stack.len() - meeting.len());
        }
    }
    if sites.len() > limit {
        s += &format!("\n… {} more sites (--limit)\n", sites.len() - limit);
    }
    s
}

/// `trace diff`'s text.
pub fn render_diff(a: &Trace, b: &Trace, deltas: &[Delta], limit: usize) -> String {
    use units::thousands;
    let mut s = format!("A: {}\nB: {}\n", a.path.display(), b.path.display());
    let d = |x: u64, y: u64| y as i128 - x as i128;
    s += &format!(
        "total: {:+} B, {:+} blocks ({} → {} B)\n",
        d(a.total_bytes(), b.total_bytes()),
        d(a.total_blocks(), b.total_blocks()),
        thousands(a.total_bytes()),
        thousands(b.total_bytes())
    );
    if deltas.is_empty() {
        s += "no site changed\n";
    }
    for x in deltas.iter().take(limit) {
        s += &format!(
            "\n{:+} B, {:+} blocks  (A {} B / {} blocks, B {} B / {} blocks)  [{}]\n",
            x.bytes(),
            x.blocks(),
            thousands(x.a.0),
            thousands(x.a.1),
            thousands(x.b.0),
            thousands(x.b.1),
            x.site.side.map_or("?", Side::name)
        );
        for f in x.site.meeting() {
            s += &format!("      {}\n", f.display());
        }
    }
    if deltas.len() > limit {
        s += &format!("\n… {} more changed sites (--limit)\n", deltas.len() - limit);
    }
    s
}

/// A lifetime in µs as a person reads it (µs, ms or s).
pub fn life(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}
