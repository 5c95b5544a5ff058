//! A MergeTree-style columnar table engine with a SQL subset for
//! aggregation, top-k and filter: the datastore whose memory the workbench
//! studies.
//!
//! Tables are sets of immutable, sorted **parts** on disk (one per insert,
//! merged in the background); each column is stored as compressed blocks of
//! [`storage::part::GRANULE`] rows, found through mark files and a sparse primary
//! index of each granule's first key, held in memory. Queries read only the
//! granules the index cannot rule out, a granule at a time, so memory is
//! bounded by the columns read, the number of groups (an exact quantile:
//! at most 256 KiB a group) and the LIMIT. Aggregations run column at a time
//! over each granule's rows and in parallel over partitions of the scan, on
//! the cores the process's CPU budget ([`exec::cpu`]) leaves idle, with the
//! same answer whatever the threads granted.
//!
//! # Layout
//! Laid out like a database (ClickHouse's Storages / Parsers / Interpreters),
//! each floor using only those below it (`scripts/modgraph.py` checks):
//! - [`types`]: column types, values, in-memory column data.
//! - [`storage`]: parts ([`storage::part`]), their compressed column blocks
//!   ([`storage::codec`]), tables of parts with inserts, merges and crash
//!   recovery ([`storage::table`]), the decoded-granule cache ([`storage::cache`]), and
//!   names that are identifiers, never paths ([`storage::name`], checked once, before the file system).
//! - [`sql`]: SQL text → plan (sqlparser), with positioned errors and `$name`
//!   parameters; [`Db::select`] keeps recent syntax trees by text ([`sql::ParseCache`]).
//! - [`exec`]: the query a SELECT asks ([`exec::query`]), a [`exec::Plan`] and its operators (scan with granule pruning,
//!   columnar aggregation, radix quantile, top-k) under per-query [`Limits`]
//!   (deadline, rows, threads); [`Db::select`] is the engine API a server calls.
//! - [`Db`]: a data directory of tables, the entry point for SQL.
//!
//! The workload the paper runs on it (its generator and Parquet export)
//! and the engine's command line (`datastore load|query|parts`) live on
//! the workbench side, in the `server` crate (`server::workload`).

#![forbid(unsafe_code)]

pub mod error;
pub mod exec;
pub mod sql;
pub mod storage;
pub mod types;

pub use error::{Error, Result};
pub use exec::{Limits, QueryResult, Stats};
pub use storage::table::Table;
pub use types::{Batch, ColumnData, ColumnType, Value};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A data directory holding tables (one subdirectory each).
pub struct Db {
    dir: PathBuf,
    tables: Mutex<HashMap<String, Arc<Table>, foldhash::fast::RandomState>>,
    parsed: sql::ParseCache,
}

/// A SELECT planned and bound, with the table it runs on ([`Db::bind`]).
/// PERF: a server running the same text many times in a row (a pipelined
/// chain's steps) rebinds it, neither looking its text up in the cache nor
/// its table up in the directory again. A table is never replaced under
/// its name, so the one held is the one a lookup would find.
pub struct BoundSelect {
    table: Arc<Table>,
    bound: sql::Bound,
    /// A result's rows given back ([`BoundSelect::recycle`]) for the next run.
    spare: Vec<Vec<Value>>,
}

impl BoundSelect {
    /// Runs the statement on a snapshot of its table taken now.
    pub fn run(&mut self, limits: &exec::Limits) -> Result<(QueryResult, Stats)> {
        let b = &self.bound;
        exec::Plan::prepared(&self.table.schema, b.select(), b.shape(), b.filter()).execute_reusing(
            &self.table.snapshot(),
            limits,
            std::mem::take(&mut self.spare),
        )
    }

    /// The same statement with other parameters (and the rows given back).
    pub fn rebind(self, params: sql::Params<'_>) -> Result<BoundSelect> {
        Ok(BoundSelect { bound: self.bound.rebind(params)?, ..self })
    }

    /// Gives a result's rows back for the next run to answer into, if it
    /// is one row. PERF: a chain step's answer is one row of one value,
    /// two allocations made and freed a link (about 450 instructions with
    /// glibc's allocator, callgrind `chain_step flights`).
    pub fn recycle(&mut self, rows: Vec<Vec<Value>>) {
        if rows.len() == 1 {
            self.spare = rows;
        }
    }
}

/// What a statement produced.
pub enum Output {
    Created(String),
    Rows(QueryResult, Stats),
}

impl Db {
    /// Opens (creating if needed) a data directory.
    pub fn open(dir: &Path) -> Result<Db> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
        Ok(Db { dir: dir.to_path_buf(), tables: Mutex::new(HashMap::default()), parsed: sql::ParseCache::new() })
    }

    /// The open table `name`, opening it on first use.
    pub fn table(&self, name: &str) -> Result<Arc<Table>> {
        let mut tables = self.tables.lock().expect("tables lock");
        if let Some(t) = tables.get(name) {
            return Ok(t.clone());
        }
        let t = Arc::new(Table::open(&self.dir, name)?);
        tables.insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// Names of the tables in the directory.
    pub fn table_names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let rd = std::fs::read_dir(&self.dir).map_err(|source| Error::Io { path: self.dir.clone(), source })?;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // A directory put there by hand under another name is not a table.
            if storage::name::check(storage::name::Kind::Table, &name).is_ok() && e.path().join("table.json").exists() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Creates a table from a schema (the API behind `CREATE TABLE`).
    pub fn create(&self, schema: storage::part::Schema) -> Result<Arc<Table>> {
        let name = schema.table.clone();
        let t = Arc::new(Table::create(&self.dir, schema)?);
        self.tables.lock().expect("tables lock").insert(name, t.clone());
        Ok(t)
    }

    /// Runs one SQL statement.
    pub fn execute(&self, sql: &str) -> Result<Output> {
        let schema_of = |name: &str| -> Result<Arc<storage::part::Schema>> { Ok(self.table(name)?.schema.clone()) };
        match sql::parse(sql, &schema_of)? {
            sql::Statement::Create(schema) => {
                let name = schema.table.clone();
                self.create(schema)?;
                Ok(Output::Created(name))
            }
            sql::Statement::Select(q) => {
                let t = self.table(&q.table)?;
                let (r, s) = exec::run(&t, &q)?;
                Ok(Output::Rows(r, s))
            }
        }
    }

    /// Runs one SELECT with `$name` placeholders bound to `params`, under
    /// `limits`: the engine API a server calls.
    pub fn select(&self, sql: &str, params: sql::Params<'_>, limits: &exec::Limits) -> Result<(QueryResult, Stats)> {
        self.bind(sql, params)?.run(limits)
    }

    /// A SELECT bound to `params` and to its table, to run (and rebind)
    /// later: [`Db::select`] in two steps.
    pub fn bind(&self, sql: &str, params: sql::Params<'_>) -> Result<BoundSelect> {
        // The table the cache checks the plan's schema against is the one it runs on.
        let looked_up: std::cell::RefCell<Option<Arc<Table>>> = Default::default();
        let schema_of = |name: &str| -> Result<Arc<storage::part::Schema>> {
            let t = self.table(name)?;
            let schema = t.schema.clone();
            *looked_up.borrow_mut() = Some(t);
            Ok(schema)
        };
        match self.parsed.bind(sql, &schema_of, params)? {
            sql::BoundStatement::Select(bound) => {
                let table = match looked_up.take() {
                    Some(t) if t.schema.table == bound.select().table => t,
                    _ => self.table(&bound.select().table)?,
                };
                Ok(BoundSelect { table, bound, spare: Vec::new() })
            }
            sql::BoundStatement::Create(s) => {
                Err(Error::Table { table: s.table, what: "CREATE TABLE is not a query; use execute".into() })
            }
        }
    }

    /// Runs a SELECT and returns its rows.
    pub fn query(&self, sql: &str) -> Result<QueryResult> {
        match self.execute(sql)? {
            Output::Rows(r, _) => Ok(r),
            Output::Created(name) => Err(Error::Table { table: name, what: "a CREATE is not a query".into() }),
        }
    }
}
