//! The statement cache: recently run statements by their text.

use super::bind::{self, Bound, BoundStatement, Planned, Prepared};
use super::{parse, Params, SchemaOf, Statement};
use crate::error::Result;
use sqlparser::ast;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Recently run statements by their text: the syntax tree, and for a
/// SELECT its plan, so that a statement sent again (a client's prepared
/// query, every step of a pipelined chain, whose text is the same with
/// `$prev` bound anew) is neither parsed nor planned again, only bound
/// (`Prepared::bind`). Parsing once took the chain's one-granule step in
/// the engine from 10.0 to 4.7 µs; planning once (with binding's integer
/// shortcut in `Ctx::literal`) took it from 12.7k to 10.3k instructions
/// (callgrind, `examples/chain_step`). A plan
/// is kept for the schema it was made against and made again when the
/// table's schema object changes. Bounded in entries and text length; when
/// full it starts over, so a stream of distinct texts costs a parse each,
/// as without it.
pub struct ParseCache {
    trees: Mutex<HashMap<String, Cached, foldhash::fast::RandomState>>,
}

#[derive(Clone)]
struct Cached {
    tree: Arc<ast::Statement>,
    plan: Option<Arc<Prepared>>,
}

impl ParseCache {
    /// Most statements held.
    pub const ENTRIES: usize = 128;
    /// Longer texts are parsed every time (a large `IN (…)` list is rarely repeated).
    pub const MAX_TEXT: usize = 1024;

    pub fn new() -> ParseCache {
        ParseCache { trees: Mutex::new(HashMap::default()) }
    }

    /// Parses `sql` (or takes its tree and plan from the cache) and binds it to `params`.
    pub fn parse_with(&self, sql: &str, schema_of: SchemaOf<'_>, params: Params<'_>) -> Result<Statement> {
        Ok(match self.bind(sql, schema_of, params)? {
            BoundStatement::Select(b) => Statement::Select(b.into_select()),
            BoundStatement::Create(s) => Statement::Create(s),
        })
    }

    /// [`ParseCache::parse_with`], a SELECT left as its prepared plan and bound WHERE.
    pub fn bind(&self, sql: &str, schema_of: SchemaOf<'_>, params: Params<'_>) -> Result<BoundStatement> {
        // PERF: a hit takes the plan alone (one reference count, not two).
        let kept = sql.len() <= Self::MAX_TEXT;
        if let Some(p) = kept.then(|| self.trees.lock().ok()?.get(sql)?.plan.clone()).flatten() {
            if schema_of(&p.select.table).is_ok_and(|s| Arc::ptr_eq(&s, &p.schema)) {
                return Ok(BoundStatement::Select(Bound::new(p, params)?));
            }
        }
        let hit = kept.then(|| Some(self.trees.lock().ok()?.get(sql)?.tree.clone())).flatten();
        let tree = match hit {
            Some(tree) => tree,
            None => Arc::new(parse::parse_one(sql)?),
        };
        let (stmt, plan) = match bind::plan(&tree, schema_of, params)? {
            Planned::Select(p) => (BoundStatement::Select(Bound::kept(p.clone())), Some(p)),
            Planned::Create(s) => (BoundStatement::Create(s), None),
        };
        if sql.len() <= Self::MAX_TEXT {
            if let Ok(mut trees) = self.trees.lock() {
                if trees.len() >= Self::ENTRIES && !trees.contains_key(sql) {
                    trees.clear();
                }
                trees.insert(sql.to_string(), Cached { tree, plan });
            }
        }
        Ok(stmt)
    }

    /// Statements held now.
    pub fn len(&self) -> usize {
        self.trees.lock().map_or(0, |t| t.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for ParseCache {
    fn default() -> Self {
        ParseCache::new()
    }
}
