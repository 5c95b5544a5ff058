//! Table and column names: identifiers, never paths.
//!
//! A table name becomes a directory under the data directory, so it is
//! checked here, once, before anything touches the file system
//! ([`crate::storage::table::Table::create`] and [`crate::storage::table::Table::open`] call
//! [`check`]; a schema's columns go through [`check_schema`]). The rule is
//! deliberately narrower than what a file system allows: `[A-Za-z_][A-Za-z0-9_]*`
//! of at most [`MAX_NAME_LEN`] bytes. No `.`, `/`, `\`, NUL or non-ASCII
//! byte can pass, so no name can climb out of the data directory, name a
//! file the engine keeps beside its tables, or differ from another only in
//! a way some file system folds.

use crate::error::{Error, Result};
use crate::storage::part::Schema;

/// MAX_NAME_LEN = 64 bytes: ClickHouse's identifiers are longer in theory,
/// but every table and column of the papers' workloads fits in 16, and a
/// bound keeps an error message that quotes the name short.
pub const MAX_NAME_LEN: usize = 64;

/// What a name names, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Table,
    Column,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Table => "table",
            Kind::Column => "column",
        }
    }
}

/// Ok when `name` is an identifier of at most [`MAX_NAME_LEN`] bytes.
pub fn check(kind: Kind, name: &str) -> Result<()> {
    let why = if name.is_empty() {
        Some("is empty".to_string())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!("is {} bytes long; the limit is {MAX_NAME_LEN}", name.len()))
    } else if name.as_bytes()[0].is_ascii_digit() {
        Some("starts with a digit".to_string())
    } else {
        name.bytes()
            .find(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .map(|b| format!("holds the byte 0x{b:02x}; a name is letters, digits and '_' (ASCII)"))
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::Name { kind: kind.as_str(), name: quoted(name), why }),
    }
}

/// Checks the table name, every column name, and that no two columns share
/// a name (compared as the planner resolves them: ASCII case folded).
pub fn check_schema(s: &Schema) -> Result<()> {
    check(Kind::Table, &s.table)?;
    if s.columns.is_empty() {
        return Err(Error::Table { table: s.table.clone(), what: "has no columns".into() });
    }
    for (i, c) in s.columns.iter().enumerate() {
        check(Kind::Column, &c.name)?;
        if s.columns[..i].iter().any(|d| d.name.eq_ignore_ascii_case(&c.name)) {
            return Err(Error::Column {
                table: s.table.clone(),
                column: c.name.clone(),
                what: "is declared twice".into(),
            });
        }
    }
    Ok(())
}

/// The name as an error quotes it: escaped, and cut after 32 characters so
/// a 10 KB name does not come back as a 10 KB error.
fn quoted(name: &str) -> String {
    let mut s: String = name.chars().take(32).flat_map(char::escape_debug).collect();
    if name.chars().nth(32).is_some() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_pass_and_paths_do_not() {
        for ok in ["t", "_", "events_2026", "T", "a1", &"x".repeat(MAX_NAME_LEN)] {
            assert!(check(Kind::Table, ok).is_ok(), "{ok:?} is an identifier");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        let ten_kb = "y".repeat(10 << 10);
        for bad in
            ["", "..", ".", "a/b", "q/../../escape", "a\\b", "a\0b", "é", "tablé", "1t", "a b", "a.b", &long, &ten_kb]
        {
            let e = check(Kind::Table, bad).expect_err(bad);
            let msg = e.to_string();
            assert!(msg.starts_with("table name"), "{msg}");
            assert!(msg.len() < 200, "the message stays short for a {}-byte name: {msg}", bad.len());
        }
    }
}
