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
//! `peak_space`). Every sample carries the cell's labels: experiment, codec,
//! payload (bytes), variant and commit.
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

use super::Trace;
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

/// The sample types, in value order.
pub const SAMPLE_TYPES: [(&str, &str); 4] =
    [("alloc_objects", "count"), ("alloc_space", "bytes"), ("peak_objects", "count"), ("peak_space", "bytes")];

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
            // Only the dhat build writes traces.
            variant: Some("dhat".into()),
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
    let sample_type =
        SAMPLE_TYPES.iter().map(|(ty, unit)| ValueType { r#type: strings.id(ty), unit: strings.id(unit) }).collect();
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
        sample.push(Sample {
            location_id: ids,
            value: vec![s.blocks as i64, s.bytes as i64, s.at_peak_blocks as i64, s.at_peak as i64],
            label: label.clone(),
        });
    }
    let kind = match t.sampling {
        Some(sm) => format!("jemalloc profile sampled every {} B on average (estimates)", sm.interval),
        None => "dhat trace".to_string(),
    };
    let comment = vec![strings.id(&format!("{kind} {} ({})", t.path.display(), t.cmd))];
    Profile {
        sample_type,
        sample,
        location: locations,
        function: functions,
        duration_nanos: (t.end_us * 1000) as i64,
        comment,
        // alloc_space: what `go tool pprof` shows first.
        default_sample_type: strings.id("alloc_space"),
        string_table: strings.table,
    }
}

/// Writes `t`'s profile, gzipped, to `out`.
pub fn write(t: &Trace, commit: Option<String>, out: &Path) -> Result<()> {
    let bytes = prost::Message::encode_to_vec(&profile(t, &Labels::of(t, commit)));
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut gz = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::default());
    gz.write_all(&bytes).with_context(|| format!("writing {}", out.display()))?;
    gz.finish().and_then(|mut w| w.flush()).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::io::Read;

    #[test]
    fn short_names_keep_type_and_method() {
        for (full, short) in [
            (
                "<serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_str",
                "serde_json::de::Deserializer::deserialize_str",
            ),
            ("<T as alloc::borrow::ToOwned>::to_owned", "alloc::borrow::ToOwned::to_owned"),
            ("<[T] as alloc::slice::hack::ConvertVec>::to_vec", "alloc::slice::hack::ConvertVec::to_vec"),
            ("<&str as alloc::string::ToString>::to_string", "alloc::string::ToString::to_string"),
            ("alloc::vec::Vec<T,A>::with_capacity", "alloc::vec::Vec::with_capacity"),
            ("<alloc::vec::Vec<T,A> as core::clone::Clone>::clone", "alloc::vec::Vec::clone"),
            ("core::ptr::drop_in_place<alloc::boxed::Box<dyn core::ops::Fn() -> u8>>", "core::ptr::drop_in_place"),
            ("<<A as B>::Out as core::fmt::Debug>::fmt", "B::Out::fmt"),
            ("subjects::codecs::json::encode::{{closure}}", "subjects::codecs::json::encode::{{closure}}"),
            ("<alloc::string::String>::push_str", "alloc::string::String::push_str"),
            ("malloc", "malloc"),
            ("alloc::slice::<impl [T]>::to_vec", "alloc::slice::to_vec"),
            (
                "serde::de::impls::<impl serde::de::Deserialize for alloc::string::String>::deserialize",
                "alloc::string::String::deserialize",
            ),
        ] {
            assert_eq!(short_name(full), short, "{full}");
        }
    }

    /// A committed trace, exported and decoded back: totals, labels, stacks.
    #[test]
    fn an_exported_trace_decodes_to_the_same_totals() {
        let t = Trace::load(&super::super::committed_trace("json-rpc-p64-dhat")).unwrap();
        let out = std::env::temp_dir().join(format!("wb-pprof-{}.pb.gz", std::process::id()));
        write(&t, Some("0123456789012345678901234567890123456789".into()), &out).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap()).read_to_end(&mut raw).unwrap();
        std::fs::remove_file(&out).unwrap();
        let p = Profile::decode(raw.as_slice()).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        let types: Vec<(&str, &str)> = p.sample_type.iter().map(|v| (s(v.r#type), s(v.unit))).collect();
        assert_eq!(types, SAMPLE_TYPES);
        let total = |i: usize| p.sample.iter().map(|x| x.value[i] as u64).sum::<u64>();
        assert_eq!(total(0), t.total_blocks());
        assert_eq!(total(1), t.total_bytes());
        assert_eq!(total(3), t.sites.iter().map(|x| x.at_peak).sum::<u64>());
        assert_eq!(p.sample.len(), t.sites.len());
        let labels: HashMap<&str, &str> =
            p.sample[0].label.iter().filter(|l| l.str != 0).map(|l| (s(l.key), s(l.str))).collect();
        assert_eq!(labels["experiment"], "alloc-profile");
        assert_eq!(labels["codec"], "json-rpc");
        assert_eq!(labels["variant"], "dhat");
        assert_eq!(labels["commit"].len(), 40, "{labels:?}");
        let payload = p.sample[0].label.iter().find(|l| s(l.key) == "payload").unwrap();
        assert_eq!((payload.num, s(payload.num_unit)), (64, "bytes"));
        // Every location names a function, and some stack reaches the subject's code.
        let ids: std::collections::HashSet<u64> = p.location.iter().map(|l| l.id).collect();
        assert!(p.sample.iter().all(|x| !x.location_id.is_empty() && x.location_id.iter().all(|i| ids.contains(i))));
        assert!(p.function.iter().any(|f| s(f.name).starts_with("subjects::codecs::json")), "no subject frame");
        // Names pprof keeps as they are (see the module's note).
        for f in &p.function {
            assert!(!s(f.name).starts_with("::") && !s(f.name).contains('<'), "{} for {}", s(f.name), s(f.system_name));
        }
    }
}
