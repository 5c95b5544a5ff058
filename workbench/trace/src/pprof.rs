//! A trace as pprof's `profile.proto`, gzipped (`workbench trace export
//! --format pprof`), so that `go tool pprof` (`-diff_base` between two
//! commits), speedscope and Perfetto open what dhat's viewer alone opened.
//!
//! One sample per allocation site, its stack the site's normalised stack
//! (allocator plumbing and thread start-up folded away, as in every other
//! view, so two commits' profiles match by function), with the innermost
//! allocator frame kept as the leaf. Four values per sample: allocations
//! (`alloc_objects`/count) and bytes (`alloc_space`/bytes) over the run, and
//! blocks and bytes live when the whole heap peaked (`peak_objects`,
//! `peak_space`); a sampled profile, which cannot know the peak, has what is
//! live at its end instead (`inuse_objects`, `inuse_space`, pprof's heap
//! names, shown first) and its mean sampling interval as the profile's
//! `period` (`space`/bytes). Every sample carries the cell's labels:
//! experiment, codec, payload (bytes), variant and commit, and its side.
//!
//! [`read`] takes such a file back into a [`Trace`], so that `trace top` and
//! `trace diff` read a profile the server answered (its `heap_profile`
//! call) as they read a trace file.
//!
//! Names: pprof treats a function whose `name` equals its `system_name` as
//! not yet demangled and, because a Rust name looks like C++ to it, deletes
//! everything between angle brackets, so `<serde_json::de::Deserializer<R>
//! as serde::de::Deserializer>::deserialize_str` read `::deserialize_str`.
//! Each function's `name` is therefore a path pprof leaves alone
//! ([`short_name`]: the implementing type, or the trait when the type is a
//! bare parameter, then the method, generics dropped), and `system_name`
//! the full demangled name, for `-symbolize=none` and `-raw`.
//!
//! The message types are written here from pprof's published schema
//! (`proto/profile.proto` of google/pprof): nine of its messages' fields,
//! encoded by prost.

use super::{Frame, Sampling, Side, Trace, TraceError};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// The sample types of an exact trace, in value order.
pub const SAMPLE_TYPES: [(&str, &str); 4] =
    [("alloc_objects", "count"), ("alloc_space", "bytes"), ("peak_objects", "count"), ("peak_space", "bytes")];
/// The sample types of a sampled profile, in value order: live at its end
/// where an exact trace has live at the peak.
pub const SAMPLED_TYPES: [(&str, &str); 4] =
    [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")];
/// The comment that carries the command line that made the profile.
const CMD: &str = "cmd: ";

/// The labels every sample carries (`payload` as a number of bytes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Labels {
    pub experiment: Option<String>,
    pub codec: Option<String>,
    pub payload: Option<u64>,
    pub variant: Option<String>,
    pub commit: Option<String>,
}

impl Labels {
    /// What the trace's own command line says (its cell), and `commit`: the
    /// revision of the dataset it belongs to, which its manifest says (the
    /// caller reads it: the manifest is the workbench's type, not a trace's).
    pub fn of(t: &Trace, commit: Option<String>) -> Labels {
        let cell = super::cell_of(&t.cmd);
        let field = |k: &str| cell.as_ref().and_then(|c| c.get(k)).cloned();
        Labels {
            experiment: field("experiment").and_then(|v| v.as_str().map(String::from)),
            codec: field("codec").and_then(|v| v.as_str().map(String::from)).filter(|c| !c.is_empty()),
            payload: field("payload").and_then(|v| v.as_u64()),
            // The dhat build writes traces, the sampling build profiles.
            variant: Some(if t.sampling.is_some() { "jemalloc-prof" } else { "dhat" }.into()),
            commit,
        }
    }
}

struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        // pprof requires string 0 to be "".
        Strings { table: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// A demangled Rust name as a plain path that pprof's name simplification
/// keeps: `<A as B>::f` becomes `A::f` (or `B::f` when `A` is a bare type
/// parameter or a primitive, `T`, `[T]`, `&str`), and every generic argument
/// list is dropped: `alloc::vec::Vec<T,A>::with_capacity` becomes
/// `alloc::vec::Vec::with_capacity`. Never empty, never starting with `::`.
pub fn short_name(full: &str) -> String {
    let mut out = String::new();
    let mut rest = full.trim();
    if rest.starts_with('<') {
        if let Some(close) = matching(rest, 0) {
            let inner = &rest[1..close];
            let (ty, tr) = match split_top(inner, " as ") {
                Some((ty, tr)) => (ty, Some(tr)),
                None => (inner, None),
            };
            let ty = short_name(ty.trim_start_matches('&').trim_start_matches("mut ").trim_start_matches("dyn "));
            out = match tr {
                Some(tr) if !ty.contains("::") => short_name(tr),
                _ => ty,
            };
            rest = rest[close + 1..].trim_start_matches("::");
            if !rest.is_empty() {
                out.push_str("::");
            }
        }
    }
    // An inherent impl's segment (`alloc::slice::<impl [T]>::to_vec`, or
    // `…::<impl serde::de::Deserialize for alloc::string::String>::…`):
    // the type it is for, when that is a path, replaces what came before.
    while let Some(at) = rest.find("::<impl ") {
        let Some(close) = matching(rest, at + 2) else { break };
        let inner = &rest[at + 3 + "impl ".len()..close];
        let ty = short_name(split_top(inner, " for ").map_or(inner, |(_, ty)| ty));
        let after = &rest[close + 1..];
        if ty.contains("::") {
            out.clear();
            out.push_str(&ty);
        } else {
            out.push_str(&strip_generics(&rest[..at]));
        }
        rest = after;
    }
    out.push_str(&strip_generics(rest));
    let out = out.trim_start_matches(':').trim();
    if out.is_empty() {
        full.to_string()
    } else {
        out.to_string()
    }
}

/// `s` without its generic argument lists.
fn strip_generics(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            // The `>` of an arrow (`Fn() -> T`) closes nothing.
            '>' if prev != '-' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        prev = c;
    }
    out
}

/// The index of the `>` that closes the `<` at `open` (arrows skipped).
fn matching(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut prev = ' ';
    for (i, c) in s.char_indices().skip_while(|&(i, _)| i < open) {
        match c {
            '<' => depth += 1,
            '>' if prev != '-' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        prev = c;
    }
    None
}

/// `s` split at the first `sep` outside any angle brackets.
fn split_top<'a>(s: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0usize;
    let mut prev = ' ';
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if prev != '-' => depth = depth.saturating_sub(1),
            _ if depth == 0 && s[i..].starts_with(sep) => return Some((&s[..i], &s[i + sep.len()..])),
            _ => {}
        }
        prev = c;
    }
    None
}

/// The profile of `t`.
pub fn profile(t: &Trace, labels: &Labels) -> Profile {
    let mut strings = Strings::new();
    let types = if t.sampling.is_some() { SAMPLED_TYPES } else { SAMPLE_TYPES };
    let sample_type =
        types.iter().map(|(ty, unit)| ValueType { r#type: strings.id(ty), unit: strings.id(unit) }).collect();
    let mut label = Vec::new();
    for (k, v) in [
        ("experiment", &labels.experiment),
        ("codec", &labels.codec),
        ("variant", &labels.variant),
        ("commit", &labels.commit),
    ] {
        if let Some(v) = v {
            label.push(Label { key: strings.id(k), str: strings.id(v), num: 0, num_unit: 0 });
        }
    }
    if let Some(p) = labels.payload {
        label.push(Label { key: strings.id("payload"), str: 0, num: p as i64, num_unit: strings.id("bytes") });
    }
    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<(String, String), u64> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut location_ids: HashMap<(u64, i64), u64> = HashMap::new();
    let mut location = |name: &str, place: &str, strings: &mut Strings| -> u64 {
        let (file, line) = super::frame::file_line(place);
        let line = line.unwrap_or(0) as i64;
        let key = (name.to_string(), file.to_string());
        let fid = *function_ids.entry(key).or_insert_with(|| {
            let id = functions.len() as u64 + 1;
            let short = strings.id(&short_name(name));
            let full = strings.id(name);
            functions.push(Function { id, name: short, system_name: full, filename: strings.id(file) });
            id
        });
        *location_ids.entry((fid, line)).or_insert_with(|| {
            let id = locations.len() as u64 + 1;
            locations.push(Location { id, line: vec![Line { function_id: fid, line }] });
            id
        })
    };
    let mut sample = Vec::with_capacity(t.sites.len());
    for s in &t.sites {
        // Leaf first: the allocator entry the site went through, then its stack.
        let mut ids: Vec<u64> = Vec::with_capacity(s.stack.len() + 1);
        if let Some(via) = &s.via {
            ids.push(location(via, "", &mut strings));
        }
        for f in &s.stack {
            ids.push(location(&f.function, &f.location, &mut strings));
        }
        let (live_blocks, live) = match t.sampling {
            Some(_) => (s.at_exit_blocks, s.at_exit),
            None => (s.at_peak_blocks, s.at_peak),
        };
        let mut label = label.clone();
        if let Some(side) = s.side {
            label.push(Label { key: strings.id("side"), str: strings.id(side.name()), num: 0, num_unit: 0 });
        }
        sample.push(Sample {
            location_id: ids,
            value: vec![s.blocks as i64, s.bytes as i64, live_blocks as i64, live as i64],
            label,
        });
    }
    let kind = match t.sampling {
        Some(sm) => format!("jemalloc profile sampled every {} B on average (estimates)", sm.interval),
        None => "dhat trace".to_string(),
    };
    let comment = vec![strings.id(&format!("{kind} {}", t.path.display())), strings.id(&format!("{CMD}{}", t.cmd))];
    let period_type = t.sampling.map(|_| ValueType { r#type: strings.id("space"), unit: strings.id("bytes") });
    Profile {
        sample_type,
        sample,
        location: locations,
        function: functions,
        duration_nanos: (t.end_us * 1000) as i64,
        period_type,
        period: t.sampling.map_or(0, |s| s.interval as i64),
        comment,
        // What `go tool pprof` shows first: all bytes allocated of a trace
        // (a run's), the live heap of a sampled profile (a server's now).
        default_sample_type: strings.id(if t.sampling.is_some() { "inuse_space" } else { "alloc_space" }),
        string_table: strings.table,
    }
}

/// `t`'s profile, gzipped: the bytes of a `.pb.gz` file.
pub fn encode(t: &Trace, labels: &Labels) -> Vec<u8> {
    let bytes = prost::Message::encode_to_vec(&profile(t, labels));
    let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::default());
    gz.write_all(&bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// Writes `t`'s profile, gzipped, to `out`.
pub fn write(t: &Trace, commit: Option<String>, out: &Path) -> Result<()> {
    std::fs::write(out, encode(t, &Labels::of(t, commit))).with_context(|| format!("writing {}", out.display()))
}

/// Whether `path` names a pprof file (`.pb.gz`, `.pb`).
pub fn is_pprof(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.ends_with(".pb.gz") || name.ends_with(".pb")
}

/// Reads a pprof file this module wrote (or any heap profile with its
/// sample types) back into a [`Trace`]: each sample a site whose stack is
/// its locations' functions, leaf first.
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    parse(path, &super::read_bytes(path)?)
}

/// [`read`] of bytes already read (gunzipped).
pub fn parse(path: &Path, raw: &[u8]) -> Result<Trace, TraceError> {
    let bad = |message: String| TraceError::Pprof { path: path.to_path_buf(), message };
    let p = <Profile as prost::Message>::decode(raw).map_err(|e| bad(e.to_string()))?;
    let s = |i: i64| p.string_table.get(i as usize).map(String::as_str).unwrap_or("");
    let index = |name: &str| p.sample_type.iter().position(|v| s(v.r#type) == name);
    let (Some(objects), Some(space)) = (index("alloc_objects"), index("alloc_space")) else {
        let types: Vec<&str> = p.sample_type.iter().map(|v| s(v.r#type)).collect();
        return Err(bad(format!("no alloc_objects and alloc_space among its sample types {types:?}")));
    };
    let functions: HashMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let mut frames: HashMap<u64, Vec<Frame>> = HashMap::new();
    for l in &p.location {
        // Innermost (inlined) first, as the frame table lists them.
        let mut fs = Vec::with_capacity(l.line.len());
        for line in &l.line {
            let f = functions.get(&line.function_id).ok_or_else(|| {
                bad(format!("location {} names function {}, which is not in it", l.id, line.function_id))
            })?;
            let name = match s(f.system_name) {
                "" => s(f.name),
                full => full,
            };
            let text = match s(f.filename) {
                "" => format!("0x0: {name}"),
                file => format!("0x0: {name} ({file}:{}:0)", line.line),
            };
            fs.push(Frame::parse(&text));
        }
        frames.insert(l.id, fs);
    }
    let value = |x: &Sample, i: Option<usize>| i.and_then(|i| x.value.get(i)).map_or(0, |&v| v.max(0) as u64);
    let mut sites = Vec::with_capacity(p.sample.len());
    for (n, x) in p.sample.iter().enumerate() {
        let mut stack: Vec<&Frame> = Vec::new();
        for id in &x.location_id {
            let fs =
                frames.get(id).ok_or_else(|| bad(format!("sample {n} names location {id}, which is not in it")))?;
            stack.extend(fs);
        }
        if stack.is_empty() {
            return Err(bad(format!("sample {n} has no stack")));
        }
        let raw = super::RawSite {
            tb: value(x, Some(space)),
            tbk: value(x, Some(objects)),
            tl: 0,
            gb: value(x, index("peak_space")),
            gbk: value(x, index("peak_objects")),
            eb: value(x, index("inuse_space")),
            ebk: value(x, index("inuse_objects")),
            fs: Vec::new(),
        };
        let mut site = super::site::normalise(&raw, &stack);
        if let Some(side) = x.label.iter().find(|l| s(l.key) == "side").and_then(|l| Side::parse(s(l.str))) {
            site.side = Some(side);
        }
        sites.push(site);
    }
    let sampling = p.period_type.as_ref().filter(|v| s(v.r#type) == "space").map(|_| Sampling {
        lg_sample: (p.period.max(1) as u64).ilog2(),
        interval: p.period.max(1) as u64,
        peak_dumps: None,
    });
    let cmd = p.comment.iter().find_map(|&c| s(c).strip_prefix(CMD)).unwrap_or("").to_string();
    Ok(Trace {
        path: path.to_path_buf(),
        operations: super::operations_of(&cmd),
        cmd,
        end_us: (p.duration_nanos / 1000).max(0) as u64,
        peak_us: None,
        sites,
        sampling,
    })
}

#[cfg(test)]
mod tests;
