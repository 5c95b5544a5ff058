//! Small runs made from typed records, for the reports' unit tests: a
//! record set in, a table out.

use crate::data::dataset::Run;
use crate::data::manifest::Manifest;
use crate::report::tables::Table;
use records::CellFields;
use serde::Serialize;

/// A quick-scale run of `experiment` under its committed spec, with `params`
/// (JSON) as its quick params when given, holding `rows`.
pub fn run<R: Serialize>(experiment: &str, params: Option<serde_json::Value>, rows: &[(CellFields, R)]) -> Run {
    let path = crate::default_root().join("experiments").join(format!("{experiment}.toml"));
    let mut spec = serde_json::to_value(crate::spec::Spec::load(&path).unwrap()).unwrap();
    if let Some(p) = params {
        spec["quick"]["params"] = p;
    }
    let manifest: Manifest = serde_json::from_value(serde_json::json!({
        "experiment": experiment, "run_id": "quick-fixture", "scale": "quick", "git_revision": "0123456789abcdef",
        "git_dirty": false, "rustc": "r", "profile": "release", "features": {}, "allocators": {}, "cpu_model": "c",
        "cores": 2, "kernel": "k", "date": "d", "command_line": [], "spec_path": "s", "spec": spec,
        "cells": [], "cells_resumed": 0, "records": rows.len()
    }))
    .unwrap();
    let records: Vec<_> = rows
        .iter()
        .map(|(cell, r)| {
            let mut m = serde_json::to_value(r).unwrap().as_object().unwrap().clone();
            m.extend(serde_json::to_value(cell).unwrap().as_object().unwrap().clone());
            m
        })
        .collect();
    Run::new(std::path::PathBuf::from(experiment), manifest, crate::data::dataset::frame_from_fields(&records).unwrap())
}

/// A server cell's fields.
pub fn server(variant: &str, rep: u64) -> CellFields {
    CellFields { variant: variant.into(), rep, codec: None, payload: None }
}

/// A codec (or transport) cell's fields.
pub fn subject(codec: &str, payload: u64, variant: &str, rep: u64) -> CellFields {
    CellFields { variant: variant.into(), rep, codec: Some(codec.into()), payload: Some(payload) }
}

/// The text of the cell in the row whose first `key.len()` cells read `key`,
/// under the column headed `column`.
pub fn cell(t: &Table, key: &[&str], column: &str) -> String {
    let col =
        t.header.iter().position(|h| *h == column).unwrap_or_else(|| panic!("no column {column:?} in {:?}", t.header));
    let row = t.rows.iter().find(|r| r.iter().zip(key).all(|(c, k)| c.text == *k)).unwrap_or_else(|| {
        panic!("no row {key:?} in {}: {:?}", t.name, t.rows.iter().map(|r| &r[0].text).collect::<Vec<_>>())
    });
    row[col].text.clone()
}
