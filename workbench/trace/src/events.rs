//! The events build's file (`<cell>.events.json`, [`probe::events`]): the
//! heap site by site over the **operation index**, read back exactly.
//!
//! - [`Events::live_at`]: what every site holds after operation *n* (the
//!   flame graph of live memory at any point, `workbench trace live`);
//! - [`Events::timeline`]: live bytes and blocks after every operation, in
//!   all and for chosen sites (`workbench trace timeline`);
//! - [`Events::growth`]: each site's live bytes after warm-up as flat or
//!   growing, with the slope per operation and the evidence (a site that
//!   keeps growing is flagged as a leak).
//!
//! Sites are normalised as a dhat trace's are ([`super::site`]), so a site
//! here and in the dhat trace of the same cell have the same name.

use super::frame::Frame;
use super::site::{normalise, Site};
use super::{RawSite, TraceError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    events_file_version: u64,
    cmd: String,
    ftbl: Vec<String>,
    sites: Vec<Vec<usize>>,
    before: Vec<[u64; 5]>,
    after: Vec<[u64; 5]>,
    patterns: Vec<Vec<[u64; 5]>>,
    highs: Vec<u64>,
    before_high: i64,
    after_high: i64,
    runs: Vec<[u64; 3]>,
}

/// One site's change: allocations, bytes, frees, bytes freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delta {
    pub allocs: u64,
    pub bytes: u64,
    pub frees: u64,
    pub freed: u64,
}

impl Delta {
    fn live(&self) -> (i64, i64) {
        (self.bytes as i64 - self.freed as i64, self.allocs as i64 - self.frees as i64)
    }
}

/// A loaded events file.
#[derive(Debug, Clone)]
pub struct Events {
    pub path: PathBuf,
    pub cmd: String,
    /// Per raw site: its normalised form (totals unset).
    pub sites: Vec<Site>,
    before: Vec<(usize, Delta)>,
    after: Vec<(usize, Delta)>,
    patterns: Vec<Vec<(usize, Delta)>>,
    /// Per pattern: the most the heap rose within its operation above its
    /// level at the operation's start.
    highs: Vec<u64>,
    /// The heap's highest point before the first operation and after the last.
    before_high: i64,
    after_high: i64,
    /// `(first operation, count, pattern)`, in operation order.
    runs: Vec<(u64, u64, usize)>,
}

/// Live bytes and blocks, in all and per chosen site, after each operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// The operations the points are after.
    pub ops: Vec<u64>,
    /// Live bytes and blocks of the whole heap after each of `ops`.
    pub total: Vec<(i64, i64)>,
    /// Per chosen site key: live bytes after each of `ops`.
    pub sites: Vec<(String, Vec<i64>)>,
    /// The whole heap's highest point since the point before (within
    /// operations too: a transient freed before the operation ended).
    pub high: Vec<i64>,
}

/// What one site's live bytes do after warm-up.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    pub key: String,
    pub site: Site,
    /// Live bytes at the end of warm-up and after the last operation.
    pub from: i64,
    pub to: i64,
    /// Least-squares slope of live bytes per operation after warm-up.
    pub slope: f64,
    /// Operations after warm-up at which its live bytes reached a new high.
    pub new_highs: u64,
    pub leak: bool,
}

fn deltas(v: &[[u64; 5]]) -> Vec<(usize, Delta)> {
    v.iter().map(|d| (d[0] as usize, Delta { allocs: d[1], bytes: d[2], frees: d[3], freed: d[4] })).collect()
}

/// The events files of a dataset (`traces/*.events.json[.gz]`), sorted.
pub fn files_in(run_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let dir = run_dir.join("traces");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".events.json") || n.ends_with(".events.json.gz")
        })
        .collect();
    out.sort();
    Ok(out)
}

impl Events {
    pub fn load(path: &Path) -> Result<Events, TraceError> {
        let p = || path.to_path_buf();
        let text = super::read_text(path)?;
        let f: File = serde_json::from_str(&text).map_err(|source| TraceError::Json { path: p(), source })?;
        if f.events_file_version != 2 {
            return Err(TraceError::Version { path: p(), found: f.events_file_version });
        }
        let frames: Vec<Frame> = f.ftbl.iter().map(|s| Frame::parse(s)).collect();
        let mut sites = Vec::with_capacity(f.sites.len());
        for (i, fs) in f.sites.iter().enumerate() {
            // Unresolved frames below the thread's entry (`0x0: ???`) say nothing.
            let mut fs = fs.clone();
            while fs.len() > 1 && fs.last().is_some_and(|&j| frames.get(j).is_some_and(|f| f.function == "???")) {
                fs.pop();
            }
            let stack: Vec<&Frame> = fs
                .iter()
                .map(|&j| {
                    frames.get(j).ok_or(TraceError::FrameIndex { path: p(), site: i, frame: j, frames: frames.len() })
                })
                .collect::<Result<_, _>>()?;
            if stack.is_empty() {
                return Err(TraceError::NoFrames { path: p(), empty: 1, sites: f.sites.len(), share: 0.0 });
            }
            let raw = RawSite { tb: 0, tbk: 0, tl: 0, gb: 0, gbk: 0, eb: 0, ebk: 0, fs };
            sites.push(normalise(&raw, &stack));
        }
        let check = |v: &[(usize, Delta)]| v.iter().all(|(s, _)| *s < sites.len());
        let (before, after) = (deltas(&f.before), deltas(&f.after));
        let patterns: Vec<Vec<(usize, Delta)>> = f.patterns.iter().map(|p| deltas(p)).collect();
        let runs: Vec<(u64, u64, usize)> = f.runs.iter().map(|r| (r[0], r[1], r[2] as usize)).collect();
        if !(check(&before) && check(&after) && patterns.iter().all(|p| check(p)))
            || runs.iter().any(|r| r.2 >= patterns.len())
            || f.highs.len() != patterns.len()
        {
            return Err(TraceError::FrameIndex { path: p(), site: sites.len(), frame: 0, frames: frames.len() });
        }
        Ok(Events {
            path: p(),
            cmd: f.cmd,
            sites,
            before,
            after,
            patterns,
            highs: f.highs,
            before_high: f.before_high,
            after_high: f.after_high,
            runs,
        })
    }

    /// Operations recorded (the last run's end).
    pub fn operations(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.0 + r.1)
    }

    /// Allocations and bytes allocated over the whole recording (before,
    /// every operation, after): what heaptrack calls allocation calls.
    pub fn totals(&self) -> (u64, u64) {
        let sum = |v: &[(usize, Delta)], times: u64| {
            v.iter().fold((0, 0), |a: (u64, u64), (_, d)| (a.0 + d.allocs * times, a.1 + d.bytes * times))
        };
        let mut t = sum(&self.before, 1);
        for (_, count, p) in &self.runs {
            let x = sum(&self.patterns[*p], *count);
            t = (t.0 + x.0, t.1 + x.1);
        }
        let x = sum(&self.after, 1);
        (t.0 + x.0, t.1 + x.1)
    }

    /// Runs of identical operations: how well the file compressed.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The normalised key of raw site `i` (its side included).
    fn key(&self, i: usize) -> String {
        let s = &self.sites[i];
        format!("[{}] {}", s.side.map_or("?", |x| x.name()), s.key())
    }

    /// Per site key: live bytes and blocks after operation `n` (`None`:
    /// before the first; past the last: after everything), with a
    /// representative site for its frames. Largest first.
    pub fn live_at(&self, n: Option<u64>) -> Vec<(String, Site, i64, i64)> {
        let mut live: BTreeMap<usize, (i64, i64)> = BTreeMap::new();
        let mut add = |v: &[(usize, Delta)], times: u64| {
            for (s, d) in v {
                let (b, k) = d.live();
                let e = live.entry(*s).or_default();
                e.0 += b * times as i64;
                e.1 += k * times as i64;
            }
        };
        add(&self.before, 1);
        if let Some(n) = n {
            for &(first, count, p) in &self.runs {
                if first > n {
                    break;
                }
                add(&self.patterns[p], count.min((n - first).saturating_add(1)));
            }
            if n >= self.operations() {
                add(&self.after, 1);
            }
        }
        let mut by_key: BTreeMap<String, (Site, i64, i64)> = BTreeMap::new();
        for (s, (b, k)) in live {
            let e = by_key.entry(self.key(s)).or_insert_with(|| (self.sites[s].clone(), 0, 0));
            e.1 += b;
            e.2 += k;
        }
        let mut out: Vec<(String, Site, i64, i64)> =
            by_key.into_iter().filter(|(_, v)| v.1 != 0 || v.2 != 0).map(|(k, (s, b, n))| (k, s, b, n)).collect();
        out.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Live bytes and blocks after every `every`-th operation (and the
    /// last), in all and for the site keys in `keys`: exact at each point.
    pub fn timeline(&self, keys: &[String], every: u64) -> Timeline {
        let every = every.max(1);
        let n = self.operations();
        let index: Vec<Option<usize>> =
            (0..self.sites.len()).map(|s| keys.iter().position(|k| *k == self.key(s))).collect();
        let mut now = (0i64, 0i64);
        let mut site_now: Vec<i64> = vec![0; keys.len()];
        for (s, d) in &self.before {
            now = (now.0 + d.live().0, now.1 + d.live().1);
            if let Some(i) = index[*s] {
                site_now[i] += d.live().0;
            }
        }
        let mut t = Timeline {
            ops: Vec::new(),
            total: Vec::new(),
            sites: keys.iter().map(|k| (k.clone(), Vec::new())).collect(),
            high: Vec::new(),
        };
        let mut high = self.before_high.max(now.0);
        for &(first, count, p) in &self.runs {
            let pat = &self.patterns[p];
            let above = self.highs[p] as i64;
            let (db, dk) = pat.iter().fold((0, 0), |a, (_, d)| (a.0 + d.live().0, a.1 + d.live().1));
            let mut site_d = vec![0i64; keys.len()];
            for (s, d) in pat {
                if let Some(i) = index[*s] {
                    site_d[i] += d.live().0;
                }
            }
            for op in first..first + count {
                high = high.max(now.0 + above);
                now = (now.0 + db, now.1 + dk);
                for (v, d) in site_now.iter_mut().zip(&site_d) {
                    *v += d;
                }
                if (op + 1) % every == 0 || op + 1 == n {
                    t.ops.push(op);
                    t.total.push(now);
                    t.high.push(high.max(now.0));
                    high = now.0;
                    for (series, v) in t.sites.iter_mut().zip(&site_now) {
                        series.1.push(*v);
                    }
                }
            }
        }
        t
    }

    /// The timeline as CSV: one row per point (after every `every`-th
    /// operation), the whole heap's live bytes, blocks and highest bytes
    /// within the operations since the point before, then the live bytes of
    /// each site in `keys`, headed by its label (`[side] label`).
    pub fn timeline_csv(&self, keys: &[String], every: u64) -> String {
        let t = self.timeline(keys, every);
        let labels = keys.iter().map(|k| {
            (0..self.sites.len()).find(|&s| self.key(s) == *k).map_or_else(
                || k.clone(),
                |s| format!("[{}] {}", self.sites[s].side.map_or("?", |x| x.name()), self.sites[s].label()),
            )
        });
        let mut out = units::csv_row(
            ["operation", "live_bytes", "live_blocks", "highest_bytes"].map(String::from).into_iter().chain(labels),
        );
        for (i, op) in t.ops.iter().enumerate() {
            let (bytes, blocks) = t.total[i];
            let fixed = [op + 1, bytes as u64, blocks as u64, t.high[i] as u64].map(|v| v.to_string());
            out += &units::csv_row(fixed.into_iter().chain(t.sites.iter().map(|(_, v)| v[i].to_string())));
        }
        out
    }

    /// [`Events::growth`] as CSV: one row per site, its side, label and
    /// stack, live bytes at the end of warm-up and at the end, the slope in
    /// bytes per operation, how many new highs, and whether it leaks.
    pub fn growth_csv(&self, warmup: u64) -> String {
        let mut out = units::csv_row([
            "side",
            "site",
            "stack",
            "warmup_ops",
            "from_bytes",
            "to_bytes",
            "bytes_per_op",
            "new_highs",
            "leak",
        ]);
        for g in self.growth(warmup) {
            out += &units::csv_row([
                g.site.side.map_or("?", |x| x.name()).to_string(),
                g.site.label(),
                g.key.clone(),
                warmup.to_string(),
                g.from.to_string(),
                g.to.to_string(),
                format!("{}", g.slope),
                g.new_highs.to_string(),
                g.leak.to_string(),
            ]);
        }
        out
    }

    /// The operation after which the whole heap was largest, and its bytes.
    pub fn peak(&self) -> Option<(u64, i64)> {
        let t = self.timeline(&[], 1);
        t.ops.iter().zip(&t.total).max_by_key(|(op, v)| (v.0, std::cmp::Reverse(**op))).map(|(op, v)| (*op, v.0))
    }

    /// The heap's highest point of the whole run, within operations too
    /// (what dhat and heaptrack call the peak): its bytes, and the operation
    /// during which it was reached (`None`: before the first or after the last).
    pub fn high(&self) -> (Option<u64>, i64) {
        let t = self.timeline(&[], 1);
        let mut best = (None, self.before_high);
        for (op, h) in t.ops.iter().zip(&t.high) {
            if *h > best.1 {
                best = (Some(*op), *h);
            }
        }
        if self.after_high > best.1 {
            best = (None, self.after_high);
        }
        best
    }

    /// Every site's live bytes from the end of warm-up (`warmup` operations)
    /// to the end: flat, or growing (a leak when it keeps reaching new highs
    /// into the last quarter of the operations). One pass, nothing stored
    /// per operation (a million operations of thirty sites).
    pub fn growth(&self, warmup: u64) -> Vec<Growth> {
        let mut keys: Vec<String> = (0..self.sites.len()).map(|s| self.key(s)).collect();
        keys.sort();
        keys.dedup();
        let index: Vec<usize> =
            (0..self.sites.len()).map(|s| keys.binary_search(&self.key(s)).expect("every key is listed")).collect();
        let n = self.operations();
        let w = warmup.min(n.saturating_sub(2));
        #[derive(Clone, Default)]
        struct Acc {
            now: i64,
            from: i64,
            high: i64,
            new_highs: u64,
            last_high: u64,
            sx: f64,
            sy: f64,
            sxy: f64,
            sxx: f64,
        }
        let mut acc = vec![Acc::default(); keys.len()];
        for (s, d) in &self.before {
            acc[index[*s]].now += d.live().0;
        }
        if w == 0 {
            for a in &mut acc {
                (a.from, a.high) = (a.now, a.now);
            }
        }
        for &(first, count, p) in &self.runs {
            let mut d = vec![0i64; keys.len()];
            for (s, x) in &self.patterns[p] {
                d[index[*s]] += x.live().0;
            }
            for op in first..first + count {
                // After operation `op`, `t` operations are done; points
                // count from the end of warm-up (t = w), which is `from`.
                let t = op + 1;
                for (k, a) in acc.iter_mut().enumerate() {
                    a.now += d[k];
                    if t < w {
                        continue;
                    }
                    if t == w {
                        a.from = a.now;
                        a.high = a.now;
                        continue;
                    }
                    let x = (t - w) as f64;
                    let y = a.now as f64;
                    a.sx += x;
                    a.sy += y;
                    a.sxy += x * y;
                    a.sxx += x * x;
                    if a.now > a.high {
                        a.high = a.now;
                        a.new_highs += 1;
                        a.last_high = t - w;
                    }
                }
            }
        }
        let m = n.saturating_sub(w) as f64;
        let mut out = Vec::new();
        for (k, a) in acc.into_iter().enumerate() {
            if m < 2.0 {
                break;
            }
            let denom = m * a.sxx - a.sx * a.sx;
            let slope = if denom.abs() > 0.0 { (m * a.sxy - a.sx * a.sy) / denom } else { 0.0 };
            let leak = slope > 0.0 && a.new_highs >= 3 && a.last_high as f64 >= m * 0.75;
            let site =
                (0..self.sites.len()).find(|&s| index[s] == k).map(|s| self.sites[s].clone()).unwrap_or_default();
            out.push(Growth {
                key: keys[k].clone(),
                site,
                from: a.from,
                to: a.now,
                slope,
                new_highs: a.new_highs,
                leak,
            });
        }
        out.sort_by(|a, b| b.slope.total_cmp(&a.slope).then_with(|| a.key.cmp(&b.key)));
        out
    }
}

/// The whole heap after warm-up, in one phrase for a table: `flat at
/// 1.2 KiB`, `+3.1 KiB, not rising at the end`, or `LEAK: +2.0 B per
/// operation (1 site)`, from [`Events::growth`].
pub fn verdict(e: &Events, warmup: u64) -> String {
    let g = e.growth(warmup);
    let (from, to) = g.iter().fold((0i64, 0i64), |a, x| (a.0 + x.from, a.1 + x.to));
    let leaks: Vec<&Growth> = g.iter().filter(|x| x.leak).collect();
    if !leaks.is_empty() {
        let slope: f64 = leaks.iter().map(|x| x.slope).sum();
        return format!("LEAK: {slope:+.2} B per operation ({} site(s))", leaks.len());
    }
    if to > from {
        format!("{} more at the end, not rising", units::bytes((to - from) as f64))
    } else {
        format!("flat at {}", units::bytes(to.max(0) as f64))
    }
}

/// Which operation `trace live --at` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// After operation n.
    Op(u64),
    /// After the operation at which the whole heap peaked.
    Peak,
    /// After everything (the loop's end and what followed it).
    End,
}

impl At {
    pub fn parse(s: &str) -> Option<At> {
        match s {
            "peak" => Some(At::Peak),
            "end" => Some(At::End),
            n => n.replace(['_', ','], "").parse().ok().map(At::Op),
        }
    }
}

impl Events {
    /// The operation `at` stands for (`None`: before any), and how to say it.
    pub fn resolve(&self, at: At) -> (Option<u64>, String) {
        match at {
            At::Op(n) => (Some(n), format!("after operation {}", units::thousands(n))),
            At::Peak => match self.peak() {
                Some((op, _)) => (Some(op), format!("at the peak, after operation {}", units::thousands(op))),
                None => (None, "at the peak (no operations: before any)".into()),
            },
            At::End => (Some(u64::MAX), "at the end".into()),
        }
    }

    /// What is live at `at` as a [`super::Trace`] whose sites' totals are
    /// the live bytes and blocks, for the flame graph and `trace top`'s text.
    pub fn live_trace(&self, at: At) -> super::Trace {
        let (n, _) = self.resolve(at);
        let sites = self
            .live_at(n)
            .into_iter()
            .filter(|x| x.2 > 0)
            .map(|(_, mut s, b, k)| {
                (s.bytes, s.blocks) = (b as u64, k.max(0) as u64);
                s
            })
            .collect();
        super::Trace {
            path: self.path.clone(),
            cmd: self.cmd.clone(),
            end_us: 0,
            peak_us: None,
            sites,
            operations: Some(self.operations()),
            sampling: None,
        }
    }
}

/// `trace live`'s text: the sites live at `at`, largest first.
pub fn render_live(e: &Events, at: At, limit: usize) -> String {
    use units::thousands;
    let (n, said) = e.resolve(at);
    let live = e.live_at(n);
    let (bytes, blocks) = live.iter().fold((0i64, 0i64), |a, x| (a.0 + x.2, a.1 + x.3));
    let mut s = format!(
        "{}\n{} operations in {} runs of identical operations; {} sites\nlive {said}: {} B in {} blocks\n",
        e.path.display(),
        thousands(e.operations()),
        e.runs(),
        e.sites.len(),
        thousands(bytes.max(0) as u64),
        thousands(blocks.max(0) as u64)
    );
    for (i, (_, site, b, k)) in live.iter().take(limit).enumerate() {
        s += &format!("\n#{:<3} {:>12} B in {:>7} blocks  [{}]\n", i + 1, b, k, site.side.map_or("?", |x| x.name()));
        if let Some(v) = &site.via {
            s += &format!("      via {v}\n");
        }
        for f in site.meeting() {
            s += &format!("      {}\n", f.display());
        }
    }
    if live.len() > limit {
        s += &format!("\n… {} more sites (--limit)\n", live.len() - limit);
    }
    s
}

/// `trace timeline`'s text: the heap's peak and end, and each site that
/// grows after warm-up, with its slope and evidence; leaks flagged.
pub fn render_growth(e: &Events, warmup: u64) -> String {
    use units::thousands;
    let (allocs, bytes) = e.totals();
    let mut s = format!(
        "{}\n{} operations in {} runs of identical operations; {} allocations, {} B allocated in all\n",
        e.path.display(),
        thousands(e.operations()),
        e.runs(),
        thousands(allocs),
        thousands(bytes)
    );
    if let Some((op, b)) = e.peak() {
        s += &format!("peak between operations: {} B after operation {}\n", thousands(b.max(0) as u64), thousands(op));
    }
    let (op, b) = e.high();
    s += &format!(
        "highest point: {} B {} (within an operation counts: the peak dhat and heaptrack report)\n",
        thousands(b.max(0) as u64),
        op.map_or("outside the operations".to_string(), |o| format!("during operation {}", thousands(o)))
    );
    let g = e.growth(warmup);
    let growing: Vec<&Growth> = g.iter().filter(|x| x.to > x.from && x.new_highs > 0).collect();
    s += &format!(
        "after warm-up ({} operations): {} of {} sites hold more at the end than at warm-up's end; {} flagged as leaks\n",
        thousands(warmup),
        growing.len(),
        g.len(),
        g.iter().filter(|x| x.leak).count()
    );
    for x in growing.iter().take(10) {
        s += &format!(
            "\n{} {} → {} B live ({:+.3} B per operation; {} new highs){}\n",
            if x.leak { "LEAK" } else { "grows" },
            x.from,
            x.to,
            x.slope,
            x.new_highs,
            if x.leak { ", still rising in the last quarter" } else { "" }
        );
        for f in x.site.meeting() {
            s += &format!("      {}\n", f.display());
        }
    }
    s
}

#[cfg(test)]
mod tests;
