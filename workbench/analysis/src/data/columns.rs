//! Every dataset's columns as a typed Python module (`notebooks/columns.py`),
//! generated from the record types' JSON Schema
//! ([`registry::Experiment::record_schema`]): a notebook names a column as
//! `columns.AllocProfile.allocs` (a `pl.col`), never as a string, and
//! `wb.records` checks and casts a dataset's columns by the same module. A
//! field renamed in `records` is renamed in the module the next time
//! `workbench columns` (or `render`) writes it; the test below fails while
//! the committed module differs from what the types generate.
//!
//! The dataset's columns are the record's fields flattened (every kind of
//! an internally tagged record, the tag included) and the cell's
//! ([`records::CellFields`]); a field is a scalar, as the Parquet writer
//! ([`super::dataset::FrameBuilder`]) stores it.

use anyhow::{anyhow, bail, Result};
use registry::Experiment;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where the module goes, from the repository's root.
pub const MODULE: &str = "notebooks/columns.py";

/// A column's polars type, as the Parquet writer stores the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    UInt64,
    Int64,
    Float64,
    String,
    Boolean,
}

impl Dtype {
    fn polars(self) -> &'static str {
        match self {
            Dtype::UInt64 => "pl.UInt64",
            Dtype::Int64 => "pl.Int64",
            Dtype::Float64 => "pl.Float64",
            Dtype::String => "pl.String",
            Dtype::Boolean => "pl.Boolean",
        }
    }
}

/// One column: its type, the strings it can hold (an enum's names), the
/// record kinds that carry it (empty: every kind), its serde default, and
/// the field's doc comment.
#[derive(Debug, Clone)]
struct Field {
    dtype: Dtype,
    values: Vec<String>,
    kinds: Vec<String>,
    default: Option<Value>,
    doc: Option<String>,
}

/// The columns of one experiment's dataset, in name order.
struct Columns {
    experiment: Experiment,
    rust_type: &'static str,
    doc: Option<String>,
    /// The tag that tells the record's kinds apart (`kind`, `mode`), if any.
    tag: Option<String>,
    kinds: Vec<String>,
    fields: BTreeMap<String, Field>,
}

/// Walks a schema: the properties of every branch (`$ref`, `allOf`,
/// `oneOf`, `anyOf`), each branch of a tagged union under its tag's value.
struct Walk<'a> {
    defs: &'a Map<String, Value>,
    what: String,
}

impl<'a> Walk<'a> {
    fn resolve(&self, v: &'a Value) -> Result<&'a Value> {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.strip_prefix("#/$defs/").ok_or_else(|| anyhow!("{}: reference {r}", self.what))?;
                self.defs.get(name).ok_or_else(|| anyhow!("{}: no definition {name}", self.what))
            }
            None => Ok(v),
        }
    }

    /// Collects the fields of `v` into `c`, those of a branch tagged `kind`
    /// marked with it.
    fn object(&self, v: &'a Value, kind: Option<&str>, c: &mut Columns) -> Result<()> {
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (name, p) in props {
                let p = self.resolve(p)?;
                let (dtype, values) = self.scalar(name, p)?;
                let field = Field {
                    dtype,
                    values,
                    kinds: kind.map(|k| vec![k.to_string()]).unwrap_or_default(),
                    default: p.get("default").cloned(),
                    doc: p.get("description").and_then(Value::as_str).map(str::to_string),
                };
                merge(c, name, field).map_err(|e| anyhow!("{}: {e}", self.what))?;
            }
        }
        if v.get("$ref").is_some() {
            self.object(self.resolve(v)?, kind, c)?;
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            for branch in v.get(key).and_then(Value::as_array).into_iter().flatten() {
                let tagged = tag_of(branch);
                let kind = match (&tagged, kind) {
                    (Some((tag, value)), None) => {
                        match &c.tag {
                            Some(t) if t != tag => bail!("{}: two tags, {t} and {tag}", self.what),
                            _ => c.tag = Some(tag.clone()),
                        }
                        if !c.kinds.contains(value) {
                            c.kinds.push(value.clone());
                        }
                        Some(value.as_str())
                    }
                    _ => kind,
                };
                self.object(branch, kind, c)?;
            }
        }
        Ok(())
    }

    /// The column type of a property, and the strings it can hold.
    fn scalar(&self, name: &str, p: &'a Value) -> Result<(Dtype, Vec<String>)> {
        let p = self.resolve(p)?;
        // An enum of names (unit variants), or an `Option` of one.
        for key in ["oneOf", "anyOf"] {
            if let Some(branches) = p.get(key).and_then(Value::as_array) {
                let mut values = Vec::new();
                let mut inner = None;
                for b in branches {
                    let b = self.resolve(b)?;
                    if b.get("type").and_then(Value::as_str) == Some("null") {
                        continue;
                    }
                    // Documented names come one a branch (`const`), the
                    // others together (`enum`).
                    if let Some(s) = b.get("const").and_then(Value::as_str) {
                        values.push(s.to_string());
                    } else if let Some(names) = b.get("enum").and_then(Value::as_array) {
                        values.extend(names.iter().filter_map(Value::as_str).map(str::to_string));
                    } else {
                        inner = Some(self.scalar(name, b)?);
                    }
                }
                return match (inner, values.is_empty()) {
                    (Some(t), true) => Ok(t),
                    (None, false) => Ok((Dtype::String, values)),
                    _ => bail!("{}: field `{name}` is neither a scalar nor an enum of names", self.what),
                };
            }
        }
        if let Some(values) = p.get("enum").and_then(Value::as_array) {
            return Ok((Dtype::String, values.iter().filter_map(Value::as_str).map(str::to_string).collect()));
        }
        let ty = match p.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
            _ => bail!("{}: field `{name}` has no type", self.what),
        };
        let format = p.get("format").and_then(Value::as_str).unwrap_or("");
        let dtype = match ty {
            "integer" if format.starts_with("uint") => Dtype::UInt64,
            "integer" => Dtype::Int64,
            "number" => Dtype::Float64,
            "string" => Dtype::String,
            "boolean" => Dtype::Boolean,
            other => bail!("{}: field `{name}` is {other}, not a scalar a Parquet column holds", self.what),
        };
        let values = p.get("const").and_then(Value::as_str).map(|s| vec![s.to_string()]).unwrap_or_default();
        Ok((dtype, values))
    }
}

/// The tag of a tagged union's branch: its one string property with a
/// `const` value.
fn tag_of(branch: &Value) -> Option<(String, String)> {
    let props = branch.get("properties")?.as_object()?;
    props.iter().find_map(|(k, v)| Some((k.clone(), v.get("const")?.as_str()?.to_string())))
}

fn merge(c: &mut Columns, name: &str, f: Field) -> Result<()> {
    match c.fields.get_mut(name) {
        None => {
            c.fields.insert(name.to_string(), f);
        }
        Some(old) => {
            if old.dtype != f.dtype {
                bail!("field `{name}` is {:?} in one kind and {:?} in another", old.dtype, f.dtype);
            }
            for v in f.values {
                if !old.values.contains(&v) {
                    old.values.push(v);
                }
            }
            // Carried by every kind once any branch carries it untagged.
            if old.kinds.is_empty() || f.kinds.is_empty() {
                old.kinds.clear();
            } else {
                for k in f.kinds {
                    if !old.kinds.contains(&k) {
                        old.kinds.push(k);
                    }
                }
            }
            old.default = old.default.take().or(f.default);
            old.doc = old.doc.take().or(f.doc);
        }
    }
    Ok(())
}

fn columns_of(e: Experiment) -> Result<Columns> {
    let s = e.record_schema();
    let mut c = Columns {
        experiment: e,
        rust_type: s.rust_type,
        doc: s.record.get("description").and_then(Value::as_str).map(str::to_string),
        tag: None,
        kinds: Vec::new(),
        fields: BTreeMap::new(),
    };
    let empty = Map::new();
    for (schema, what) in [(&s.cell, "records::CellFields"), (&s.record, s.rust_type)] {
        let v = schema.as_value();
        let defs = v.get("$defs").and_then(Value::as_object).unwrap_or(&empty);
        Walk { defs, what: what.to_string() }.object(v, None, &mut c)?;
    }
    // A field every kind carries is not marked with them all.
    for f in c.fields.values_mut() {
        if f.kinds.len() == c.kinds.len() {
            f.kinds.clear();
        }
    }
    if let Some(tag) = &c.tag {
        if let Some(f) = c.fields.get_mut(tag) {
            f.kinds.clear();
        }
    }
    Ok(c)
}

/// Python's keywords, which no attribute may be named.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

fn attribute(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// A Python string literal (JSON's escapes are Python's).
fn py_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn py_value(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

fn docstring(s: &str, indent: &str) -> String {
    let body = s.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"");
    let lines: Vec<&str> = body.lines().collect();
    if lines.len() <= 1 {
        format!("{indent}\"\"\"{body}\"\"\"\n")
    } else {
        let mut out = format!("{indent}\"\"\"{}\n", lines[0]);
        for l in &lines[1..] {
            if l.is_empty() {
                out.push('\n');
            } else {
                let _ = writeln!(out, "{indent}{l}");
            }
        }
        let _ = writeln!(out, "{indent}\"\"\"");
        out
    }
}

fn class(c: &Columns) -> String {
    let name = format!("{:?}", c.experiment);
    let mut out = format!("class {name}:\n");
    let mut doc = format!("{}: `{}`", c.experiment.name(), c.rust_type);
    if c.experiment.runs() != c.experiment {
        let _ = write!(doc, ", as {} writes it", c.experiment.runs().name());
    }
    if let Some(d) = &c.doc {
        let _ = write!(doc, ".\n\n{d}");
    }
    out.push_str(&docstring(&doc, "    "));
    let _ = writeln!(out, "\n    EXPERIMENT = {}", py_str(c.experiment.name()));
    let _ = writeln!(out, "    TAG = {}", c.tag.as_deref().map_or("None".to_string(), py_str));
    let dict = |out: &mut String, name: &str, entries: Vec<(String, String)>| {
        if entries.is_empty() {
            let _ = writeln!(out, "    {name} = {{}}");
        } else {
            let _ = writeln!(out, "    {name} = {{");
            for (k, v) in entries {
                let _ = writeln!(out, "        {}: {v},", py_str(&k));
            }
            out.push_str("    }\n");
        }
    };
    let tuple = |items: &[String]| -> String {
        let items: Vec<String> = items.iter().map(|v| py_str(v)).collect();
        if items.len() == 1 {
            format!("({},)", items[0])
        } else {
            format!("({})", items.join(", "))
        }
    };
    let fields = || c.fields.iter().map(|(n, f)| (n.clone(), f));
    dict(&mut out, "SCHEMA", fields().map(|(n, f)| (n, f.dtype.polars().to_string())).collect());
    dict(
        &mut out,
        "VALUES",
        fields().filter(|(_, f)| !f.values.is_empty()).map(|(n, f)| (n, tuple(&f.values))).collect(),
    );
    dict(&mut out, "KINDS", fields().filter(|(_, f)| !f.kinds.is_empty()).map(|(n, f)| (n, tuple(&f.kinds))).collect());
    dict(
        &mut out,
        "DEFAULTS",
        fields().filter_map(|(n, f)| f.default.as_ref().filter(|d| !d.is_null()).map(|d| (n, py_value(d)))).collect(),
    );
    for (n, f) in &c.fields {
        let _ = writeln!(out, "\n    {} = pl.col({})", attribute(n), py_str(n));
        let mut doc = f.doc.clone().unwrap_or_default();
        if !f.kinds.is_empty() {
            let by = c.tag.as_deref().unwrap_or("kind");
            let sep = if doc.is_empty() { "" } else { " " };
            let _ = write!(doc, "{sep}(Only where {by} is {}.)", f.kinds.join(", "));
        }
        if !doc.is_empty() {
            out.push_str(&docstring(&doc, "    "));
        }
    }
    out
}

/// The module's text.
pub fn python() -> Result<String> {
    let mut out = String::from(
        "# Generated by `workbench columns` (and `workbench render`) from the record types\n\
         # (crates `records` and `registry`): do not edit. workbench/analysis/src/data/columns.rs\n\
         \"\"\"Every dataset's columns, typed: one class per experiment.\n\
         \n\
         A class's attributes are `pl.col` expressions named as the record type's\n\
         fields (the cell's `variant`, `rep`, `codec`, `payload` among them);\n\
         `SCHEMA` is each column's polars type, `VALUES` the names an enum column\n\
         holds, `KINDS` which record kinds carry a column (by `TAG`), and\n\
         `DEFAULTS` the value a record left out stands for. `wb.records` checks a\n\
         dataset against its class and casts it to `SCHEMA`.\n\
         \"\"\"\n\
         from __future__ import annotations\n\
         \n\
         import polars as pl\n",
    );
    let mut names = Vec::new();
    for &e in Experiment::ALL {
        let c = columns_of(e)?;
        out.push_str("\n\n");
        out.push_str(&class(&c));
        names.push((e.name(), format!("{e:?}")));
    }
    out.push_str("\n\nBY_EXPERIMENT = {\n");
    for (n, class) in names {
        let _ = writeln!(out, "    {}: {class},", py_str(n));
    }
    out.push_str("}\n");
    Ok(out)
}

/// Writes the module under `root`; returns its path.
pub fn write(root: &Path) -> Result<PathBuf> {
    let path = root.join(MODULE);
    super::dataset::write_atomic(&path, python()?.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_module_is_what_the_record_types_generate() {
        let root = crate::default_root();
        let committed = std::fs::read_to_string(root.join(MODULE)).unwrap_or_default();
        let generated = python().unwrap();
        assert!(
            committed == generated,
            "{MODULE} differs from what the record types generate: run `workbench columns` and commit it"
        );
    }

    #[test]
    fn every_kind_and_field_is_a_column() {
        let c = columns_of(Experiment::Throughput).unwrap();
        assert_eq!(c.tag.as_deref(), Some("kind"));
        for k in ["query", "rss", "anatomy", "peer", "floor"] {
            assert!(c.kinds.iter().any(|x| x == k), "{k} in {:?}", c.kinds);
        }
        // The cell's fields, a field of one kind, and the tag's values.
        assert_eq!(c.fields["variant"].dtype, Dtype::String);
        assert_eq!(c.fields["rep"].dtype, Dtype::UInt64);
        assert_eq!(c.fields["text_size_bytes"].kinds, vec!["anatomy".to_string()]);
        assert_eq!(c.fields["p50_ms"].dtype, Dtype::Float64);
        assert!(c.fields["kind"].values.contains(&"anatomy".to_string()));
        assert!(c.fields["kind"].kinds.is_empty());
        // An enum of names is a string column holding them.
        let a = columns_of(Experiment::AllocProfile).unwrap();
        assert_eq!(a.fields["phase"].values, ["encode", "decode", "roundtrip"]);
        assert!(a.tag.is_none());
        // A serde default is what a missing value stands for.
        let rt = columns_of(Experiment::TransportAlloc).unwrap();
        assert_eq!(rt.fields["repeat"].default, Some(Value::from(1)));
    }

    #[test]
    fn every_experiment_has_a_class() {
        let text = python().unwrap();
        for e in Experiment::ALL {
            assert!(text.contains(&format!("\nclass {e:?}:\n")), "{e}");
            assert!(text.contains(&format!("    EXPERIMENT = \"{}\"\n", e.name())), "{e}");
        }
        assert!(!text.contains("pl.col(\"from\")\n") || text.contains("from_ = "), "keywords are renamed");
    }
}
