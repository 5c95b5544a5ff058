//! SQL → plan. Parsed by `sqlparser` (ClickHouse dialect); this module
//! accepts the subset the engine runs and rejects everything else with the
//! construct and its position.
//!
//! Accepted: `CREATE TABLE t (col Type, …) ORDER BY (…)`; `SELECT` of
//! columns, `*` and the aggregates `count()`, `sum`, `avg`, `min`, `max`,
//! `quantile(p)(x)` (or `quantile(x, p)`), `uniqExact`, with aliases;
//! `FROM` one table; `WHERE` with `= != <> < <= > >=`, `AND`/`OR`/`NOT`,
//! `IN (…)`, `NOT IN`, `BETWEEN`; `GROUP BY` columns; `ORDER BY` output
//! columns (by alias or expression) `ASC|DESC`; `LIMIT n`.
//!
//! # Layout
//! Each file uses only those before it:
//! - `parse`: the text within [`limits`] → a syntax tree (sqlparser) → a
//!   checked [`Select`] or table [`Schema`], with where the `$name`
//!   placeholders stood.
//! - `bind`: a SELECT planned once and bound anew per call ([`Bound`]).
//! - `cache`: the statement cache by text ([`ParseCache`]).

mod bind;
mod cache;
pub mod limits;
mod parse;

pub use crate::exec::query::{Agg, CmpOp, Item, Pred, Select};
pub use bind::{Bound, BoundStatement};
pub use cache::ParseCache;
pub use parse::parse_datetime;

use crate::error::Result;
use crate::storage::part::Schema;
use crate::types::Value;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum Statement {
    Create(Schema),
    Select(Select),
}

/// Values bound to `$name` placeholders, which may stand wherever a literal
/// may (`WHERE user_id = $prev`); each is checked against its column's type
/// as the literal would be.
pub type Params<'a> = &'a [(&'a str, Value)];

/// Parses one statement. `schema_of` resolves a table name.
pub fn parse(sql: &str, schema_of: SchemaOf<'_>) -> Result<Statement> {
    parse_with(sql, schema_of, &[])
}

/// Parses one statement with `$name` placeholders bound to `params`.
pub fn parse_with(sql: &str, schema_of: SchemaOf<'_>, params: Params<'_>) -> Result<Statement> {
    bind::plan(&parse::parse_one(sql)?, schema_of, params).map(bind::Planned::into_statement)
}

/// A table's schema by name, as the table holds it: a table's plans are
/// kept only while the same schema object stands (a table created anew
/// under the name has another).
pub type SchemaOf<'a> = &'a dyn Fn(&str) -> Result<Arc<Schema>>;
