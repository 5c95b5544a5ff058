//! Typed errors; each names the table, column, file or SQL position at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: corrupt: {what}")]
    Corrupt { path: PathBuf, what: String },
    #[error("table `{table}`: {what}")]
    Table { table: String, what: String },
    #[error("table `{table}`, column `{column}`: {what}")]
    Column { table: String, column: String, what: String },
    #[error("SQL: {what} (at line {line}, column {col})")]
    Sql { what: String, line: u64, col: u64 },
    #[error("SQL: {0}")]
    Parse(String),
    #[error("query exceeded its time limit of {ms} ms")]
    Deadline { ms: u64 },
    #[error("result exceeds the limit of {max} rows")]
    ResultTooLarge { max: usize },
    /// A table or column name that is not an identifier ([`crate::storage::name`]).
    #[error("{kind} name \"{name}\" {why}")]
    Name { kind: &'static str, name: String, why: String },
    /// SQL larger or deeper than the parser admits ([`crate::sql::limits`]):
    /// `limit` names the constant, `max` its value.
    #[error("SQL: {what} exceeds the limit of {max} (datastore::sql::limits::{limit})")]
    SqlLimit { what: String, max: usize, limit: &'static str },
    /// A query's working memory would pass its own budget or the server's
    /// total ([`crate::exec::memory`]): `wanted` is what the budget would hold.
    #[error("query stopped: its working memory would bring the {} memory budget to {wanted} bytes, past its limit of {limit} bytes", scope.name())]
    MemoryLimit { scope: MemoryScope, limit: usize, wanted: usize },
}

/// Whose memory budget a query passed: its own, or the server's total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryScope {
    Query,
    Server,
}

impl MemoryScope {
    pub fn name(self) -> &'static str {
        match self {
            MemoryScope::Query => "query",
            MemoryScope::Server => "server",
        }
    }
}

impl Error {
    /// Whether the error is the caller's (bad SQL, names, limits) rather
    /// than the storage's: a server answers these with a 4xx and their
    /// text, and the others with a 5xx that names no path.
    pub fn is_user_error(&self) -> bool {
        !matches!(self, Error::Io { .. } | Error::Corrupt { .. })
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Attaches the path to an I/O error.
pub(crate) trait IoPath<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoPath<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::Io { path: path.to_path_buf(), source })
    }
}

pub(crate) fn corrupt(path: &std::path::Path, what: impl Into<String>) -> Error {
    Error::Corrupt { path: path.to_path_buf(), what: what.into() }
}
