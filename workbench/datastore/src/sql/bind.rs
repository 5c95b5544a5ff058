//! A SELECT planned once and bound anew for each call: only the literals
//! that stood for placeholders depend on the parameters.

use super::parse::{self, Ctx, Slot};
use super::{Params, SchemaOf, Select, Statement};
use crate::error::Result;
use crate::exec::query::Pred;
use crate::exec::Shape;
use crate::storage::part::Schema;
use crate::types::Value;
use sqlparser::ast;
use std::sync::Arc;

/// A planned statement; a SELECT with where its placeholders stood, so
/// that [`ParseCache`] can keep it for binding anew.
pub(super) enum Planned {
    Select(Arc<Prepared>),
    Create(Schema),
}

impl Planned {
    pub(super) fn into_statement(self) -> Statement {
        match self {
            Planned::Select(p) => Statement::Select(Arc::try_unwrap(p).map_or_else(|p| p.select.clone(), |p| p.select)),
            Planned::Create(s) => Statement::Create(s),
        }
    }
}

/// The plan of a parsed statement, `$name` placeholders bound to `params`.
pub(super) fn plan(stmt: &ast::Statement, schema_of: SchemaOf<'_>, params: Params<'_>) -> Result<Planned> {
    match stmt {
        ast::Statement::Query(q) => {
            let (select, schema, slots) = parse::select(q, schema_of, params)?;
            let shape = Shape::new(&schema, &select);
            Ok(Planned::Select(Arc::new(Prepared { schema, select, slots, shape })))
        }
        ast::Statement::CreateTable(c) => Ok(Planned::Create(parse::create(c)?)),
        other => Err(parse::unsupported("statement (only SELECT and CREATE TABLE)", other)),
    }
}

/// A SELECT planned once, bound anew for each call: only the literals that
/// stood for placeholders depend on the parameters, and they are converted
/// and checked by the same code as at planning ([`Ctx::literal`]), so a
/// bound plan equals a fresh one, errors included.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) schema: Arc<Schema>,
    pub(super) select: Select,
    pub(super) slots: Vec<Slot>,
    pub(super) shape: Shape,
}

impl Prepared {
    /// The WHERE with the placeholders' values in their slots.
    pub(super) fn bind(&self, params: Params<'_>) -> Result<Filter> {
        let (Some(filter), false) = (&self.select.filter, self.slots.is_empty()) else {
            return Ok(Filter::Kept);
        };
        let mut f = filter.clone();
        let ctx = Ctx::binding(&self.schema, params);
        // PERF: one placeholder (a chain's `$prev`) binds with no vector of values.
        let first = ctx.literal(&self.slots[0].expr, self.slots[0].col)?;
        let rest: Vec<Value> = match &self.slots[1..] {
            [] => Vec::new(),
            more => more.iter().map(|s| ctx.literal(&s.expr, s.col)).collect::<Result<_>>()?,
        };
        let (mut values, mut slots) = (std::iter::once(first).chain(rest), self.slots.iter().peekable());
        let mut ordinal = 0;
        f.literals_mut(&mut |lit| {
            if slots.next_if(|s| s.ordinal == ordinal).is_some() {
                *lit = values.next().expect("a value per slot");
            }
            ordinal += 1;
        });
        f.sort_in_lists();
        Ok(Filter::Bound(f))
    }
}

/// A bound statement's WHERE: the prepared one (no placeholders) or a copy
/// with the parameters' values.
#[derive(Debug)]
pub(super) enum Filter {
    Kept,
    Bound(Pred),
}

/// A SELECT bound to its parameters, ready for [`crate::exec::Plan::prepared`]:
/// the prepared statement (shared with [`ParseCache`]) and its bound WHERE.
#[derive(Debug)]
pub struct Bound {
    prepared: Arc<Prepared>,
    filter: Filter,
}

impl Bound {
    /// `prepared` bound to `params`.
    pub(super) fn new(prepared: Arc<Prepared>, params: Params<'_>) -> Result<Bound> {
        Ok(Bound { filter: prepared.bind(params)?, prepared })
    }

    /// `prepared` as planned (its parameters are those it was planned with).
    pub(super) fn kept(prepared: Arc<Prepared>) -> Bound {
        Bound { prepared, filter: Filter::Kept }
    }

    /// The statement as planned (its `filter` holds the planning-time literals).
    pub fn select(&self) -> &Select {
        &self.prepared.select
    }

    /// The WHERE with this call's values.
    pub fn filter(&self) -> Option<&Pred> {
        match &self.filter {
            Filter::Kept => self.prepared.select.filter.as_ref(),
            Filter::Bound(p) => Some(p),
        }
    }

    pub fn shape(&self) -> &Shape {
        &self.prepared.shape
    }

    /// The same statement bound to other parameters.
    pub fn rebind(&self, params: Params<'_>) -> Result<Bound> {
        Ok(Bound { prepared: self.prepared.clone(), filter: self.prepared.bind(params)? })
    }

    /// The bound statement as a plain [`Select`].
    pub fn into_select(self) -> Select {
        let mut s = self.prepared.select.clone();
        if let Filter::Bound(p) = self.filter {
            s.filter = Some(p);
        }
        s
    }
}

/// A statement from [`ParseCache::bind`].
pub enum BoundStatement {
    Create(Schema),
    Select(Bound),
}
