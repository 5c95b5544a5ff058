//! SQL text → a checked plan: the syntax tree of one statement, then the
//! engine's [`Select`] (or a table's [`Schema`]) with every name resolved,
//! every literal converted to its column's type, and where the `$name`
//! placeholders stood ([`Slot`]).

use super::{limits, Params, SchemaOf, Select};
use crate::error::{Error, Result};
use crate::exec::query::{Agg, CmpOp, Item, Pred};
use crate::storage::codec::Codec;
use crate::storage::part::{ColumnDef, Schema};
use crate::types::{ColumnType, Value};
use sqlparser::ast::{self, Expr, Spanned};
use sqlparser::dialect::ClickHouseDialect;
use sqlparser::parser::Parser;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

pub(super) fn at(what: impl Into<String>, node: &impl Spanned) -> Error {
    let s = node.span().start;
    Error::Sql { what: what.into(), line: s.line, col: s.column }
}

pub(super) fn unsupported(what: &str, node: &impl Spanned) -> Error {
    at(format!("unsupported: {what}"), node)
}

/// The syntax tree of exactly one statement, once the text is within
/// [`limits`].
pub(super) fn parse_one(sql: &str) -> Result<ast::Statement> {
    let dialect = ClickHouseDialect {};
    let tokens = limits::check(&dialect, sql)?;
    let mut parser =
        Parser::new(&dialect).with_recursion_limit(limits::PARSER_RECURSION).with_tokens_with_locations(tokens);
    let mut stmts = parser.parse_statements().map_err(|e| match e {
        sqlparser::parser::ParserError::RecursionLimitExceeded => limits::too_deep(),
        e => Error::Parse(e.to_string()),
    })?;
    if stmts.len() != 1 {
        return Err(Error::Parse(format!("expected one statement, got {}", stmts.len())));
    }
    Ok(stmts.remove(0))
}

/// Where a placeholder stands in a planned SELECT: the `ordinal`-th literal
/// of its WHERE, in the order the planner reads them ([`Pred::literals_mut`]),
/// compared with column `col`.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub(super) ordinal: usize,
    pub(super) col: usize,
    pub(super) expr: Expr,
}

pub(super) fn column_type(t: &ast::DataType, node: &impl Spanned) -> Result<ColumnType> {
    use ast::DataType as D;
    Ok(match t {
        D::UInt8 => ColumnType::UInt8,
        D::UInt16 => ColumnType::UInt16,
        D::UInt32 => ColumnType::UInt32,
        D::UInt64 => ColumnType::UInt64,
        D::Int8(None) => ColumnType::Int8,
        D::Int16 => ColumnType::Int16,
        D::Int32 => ColumnType::Int32,
        D::Int64 => ColumnType::Int64,
        D::Float64 => ColumnType::Float64,
        D::Datetime(None) => ColumnType::DateTime,
        D::String(None) => ColumnType::String,
        D::LowCardinality(inner) if matches!(**inner, D::String(None)) => ColumnType::LowCardinalityString,
        other => return Err(unsupported(&format!("column type {other}"), node)),
    })
}

/// A table name as written, unquoted (`"t"` is `t`); one part only. Whether
/// it is an identifier is checked where it meets the file system
/// ([`crate::storage::name`]), so a quoted `"a/../b"` is refused there.
pub(super) fn table_name(n: &ast::ObjectName) -> Result<String> {
    match n.0.as_slice() {
        [ast::ObjectNamePart::Identifier(id)] => Ok(id.value.clone()),
        _ => Err(unsupported("a qualified table name (database.table)", n)),
    }
}

pub(super) fn create(c: &ast::CreateTable) -> Result<Schema> {
    let name = table_name(&c.name)?;
    let mut columns: Vec<ColumnDef> = Vec::new();
    for def in &c.columns {
        if !def.options.is_empty() {
            return Err(unsupported("column options", def));
        }
        columns.push(ColumnDef {
            name: def.name.value.clone(),
            ty: column_type(&def.data_type, def)?,
            codec: Codec::Lz4,
        });
    }
    let keys: Vec<Expr> = match &c.order_by {
        Some(ast::OneOrManyWithParens::One(e)) => vec![e.clone()],
        Some(ast::OneOrManyWithParens::Many(v)) => v.clone(),
        None => return Err(Error::Table { table: name, what: "CREATE TABLE needs ORDER BY (…)".into() }),
    };
    let mut order_by = Vec::new();
    for k in &keys {
        let col = match k {
            Expr::Identifier(id) => columns.iter().position(|c| c.name.eq_ignore_ascii_case(&id.value)),
            _ => return Err(unsupported("ORDER BY key other than a column", k)),
        };
        order_by.push(col.ok_or_else(|| at(format!("ORDER BY names unknown column `{k}`"), k))?);
    }
    // Delta before LZ4 for timestamps and integer key columns: sorted, so
    // their differences are small.
    for (i, c) in columns.iter_mut().enumerate() {
        let int_key = order_by.contains(&i) && (c.ty.is_unsigned() || c.ty.is_signed());
        if c.ty == ColumnType::DateTime || int_key {
            c.codec = Codec::DeltaLz4;
        }
    }
    Ok(Schema { table: name, columns, order_by })
}

pub(super) struct Ctx<'a> {
    schema: &'a Schema,
    params: Params<'a>,
    /// Literals read so far, and where placeholders stood among them
    /// (recorded while planning, not while binding a kept plan).
    literals: Cell<usize>,
    slots: Option<RefCell<Vec<Slot>>>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(schema: &'a Schema, params: Params<'a>) -> Ctx<'a> {
        Ctx { schema, params, literals: Cell::new(0), slots: Some(RefCell::new(Vec::new())) }
    }

    pub(super) fn binding(schema: &'a Schema, params: Params<'a>) -> Ctx<'a> {
        Ctx { schema, params, literals: Cell::new(0), slots: None }
    }

    fn column(&self, e: &Expr) -> Result<usize> {
        let name = match e {
            Expr::Identifier(id) => &id.value,
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => &parts[1].value,
            _ => return Err(unsupported(&format!("expression `{e}` (expected a column)"), e)),
        };
        self.schema.column(name).ok_or_else(|| at(format!("table `{}` has no column `{name}`", self.schema.table), e))
    }

    /// A literal compared with column `col`, as a value of the column's kind.
    pub(super) fn literal(&self, e: &Expr, col: usize) -> Result<Value> {
        let ty = self.schema.columns[col].ty;
        let ordinal = self.literals.replace(self.literals.get() + 1);
        let (text, neg, is_str) = match e {
            Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => (n.clone(), false, false),
                ast::Value::SingleQuotedString(s) => (s.clone(), false, true),
                ast::Value::Placeholder(name) => {
                    if let Some(slots) = &self.slots {
                        slots.borrow_mut().push(Slot { ordinal, col, expr: e.clone() });
                    }
                    // PERF: an integer bound to a numeric column is the value
                    // its text form would parse back to, without the text.
                    let numeric = !matches!(ty, ColumnType::String | ColumnType::LowCardinalityString);
                    match self.params.iter().find(|(n, _)| *n == name).map(|(_, v)| v) {
                        Some(Value::U(u)) if numeric => return Ok(Value::U(*u)),
                        Some(Value::I(i)) if numeric && *i < 0 => return Ok(Value::I(*i)),
                        Some(Value::I(i)) if numeric => return Ok(Value::U(*i as u64)),
                        _ => self.bound(name, e)?,
                    }
                }
                _ => return Err(unsupported(&format!("literal {e}"), e)),
            },
            Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => match &**expr {
                Expr::Value(v) => match &v.value {
                    ast::Value::Number(n, _) => (n.clone(), true, false),
                    _ => return Err(unsupported(&format!("literal {e}"), e)),
                },
                _ => return Err(unsupported(&format!("literal {e}"), e)),
            },
            _ => return Err(unsupported(&format!("`{e}` where a literal is expected"), e)),
        };
        let col_name = &self.schema.columns[col].name;
        match (ty, is_str) {
            (ColumnType::String | ColumnType::LowCardinalityString, true) => Ok(Value::S(text)),
            (ColumnType::String | ColumnType::LowCardinalityString, false) => {
                Err(at(format!("column `{col_name}` is a string; compare it with a quoted string"), e))
            }
            (ColumnType::DateTime, true) => parse_datetime(&text)
                .map(Value::U)
                .ok_or_else(|| at(format!("`{text}` is not a date-time 'YYYY-MM-DD hh:mm:ss'"), e)),
            (_, true) => Err(at(format!("column `{col_name}` is numeric; compare it with a number"), e)),
            (_, false) => {
                let bad = || at(format!("`{text}` is not a number"), e);
                if text.contains(['.', 'e', 'E']) {
                    let f: f64 = text.parse().map_err(|_| bad())?;
                    Ok(Value::F(if neg { -f } else { f }))
                } else if neg {
                    let i: i64 = format!("-{text}").parse().map_err(|_| bad())?;
                    Ok(Value::I(i))
                } else {
                    Ok(Value::U(text.parse().map_err(|_| bad())?))
                }
            }
        }
    }

    /// A bound parameter in the literal's text form, so it is checked
    /// against the column exactly as a typed literal would be.
    fn bound(&self, name: &str, e: &Expr) -> Result<(String, bool, bool)> {
        let v = self.params.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
        match v {
            None => Err(at(format!("no value is bound to `{name}`"), e)),
            Some(Value::Null) => Err(at(format!("`{name}` is bound to NULL, which compares with nothing"), e)),
            Some(Value::U(u)) => Ok((u.to_string(), false, false)),
            Some(Value::I(i)) => Ok((i.unsigned_abs().to_string(), *i < 0, false)),
            // `{:?}` keeps a '.' or an exponent, so the text reads back as a float.
            Some(Value::F(f)) => Ok((format!("{:?}", f.abs()), f.is_sign_negative(), false)),
            Some(Value::S(s)) => Ok((s.clone(), false, true)),
        }
    }

    fn pred(&self, e: &Expr) -> Result<Pred> {
        use ast::BinaryOperator as B;
        match e {
            Expr::Nested(inner) => self.pred(inner),
            Expr::BinaryOp { left, op: B::And, right } => {
                Ok(Pred::And(Box::new(self.pred(left)?), Box::new(self.pred(right)?)))
            }
            Expr::BinaryOp { left, op: B::Or, right } => {
                Ok(Pred::Or(Box::new(self.pred(left)?), Box::new(self.pred(right)?)))
            }
            Expr::UnaryOp { op: ast::UnaryOperator::Not, expr } => Ok(Pred::Not(Box::new(self.pred(expr)?))),
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    B::Eq => CmpOp::Eq,
                    B::NotEq => CmpOp::Ne,
                    B::Lt => CmpOp::Lt,
                    B::LtEq => CmpOp::Le,
                    B::Gt => CmpOp::Gt,
                    B::GtEq => CmpOp::Ge,
                    other => return Err(unsupported(&format!("operator {other}"), e)),
                };
                let left_is_col = matches!(**left, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
                if left_is_col {
                    let col = self.column(left)?;
                    Ok(Pred::Cmp { col, op, lit: self.literal(right, col)? })
                } else {
                    let col = self.column(right)?;
                    Ok(Pred::Cmp { col, op: op.flip(), lit: self.literal(left, col)? })
                }
            }
            Expr::In { expr, target: ast::InTarget::List(list), negated, global: false } => {
                limits::in_list(list.len())?;
                let col = self.column(expr)?;
                let list = list.iter().map(|l| self.literal(l, col)).collect::<Result<_>>()?;
                Ok(Pred::In { col, list, negated: *negated })
            }
            Expr::Between { expr, negated, low, high } => {
                let col = self.column(expr)?;
                let p = Pred::And(
                    Box::new(Pred::Cmp { col, op: CmpOp::Ge, lit: self.literal(low, col)? }),
                    Box::new(Pred::Cmp { col, op: CmpOp::Le, lit: self.literal(high, col)? }),
                );
                Ok(if *negated { Pred::Not(Box::new(p)) } else { p })
            }
            other => Err(unsupported(&format!("predicate `{other}`"), other)),
        }
    }

    fn agg(&self, f: &ast::Function) -> Result<Agg> {
        let name = f.name.to_string().to_ascii_lowercase();
        let args: Vec<&Expr> = match &f.args {
            ast::FunctionArguments::None => Vec::new(),
            ast::FunctionArguments::List(l) => {
                if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
                    return Err(unsupported("DISTINCT or clauses inside a function call", f));
                }
                let mut v = Vec::new();
                for a in &l.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => v.push(e),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) if name == "count" => {}
                        other => return Err(unsupported(&format!("argument `{other}`"), f)),
                    }
                }
                v
            }
            ast::FunctionArguments::Subquery(_) => return Err(unsupported("subquery", f)),
        };
        let params: Vec<&Expr> = match &f.parameters {
            ast::FunctionArguments::None => Vec::new(),
            ast::FunctionArguments::List(l) => l
                .args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                    other => Err(unsupported(&format!("parameter `{other}`"), f)),
                })
                .collect::<Result<_>>()?,
            ast::FunctionArguments::Subquery(_) => return Err(unsupported("subquery", f)),
        };
        if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
            return Err(unsupported("FILTER, OVER or WITHIN GROUP", f));
        }
        let one = |what: &str| -> Result<usize> {
            match args.as_slice() {
                [e] => self.column(e),
                _ => Err(at(format!("{what} takes one column"), f)),
            }
        };
        let level = |e: &Expr| -> Result<f64> {
            let p = match e {
                Expr::Value(v) => match &v.value {
                    ast::Value::Number(n, _) => n.parse::<f64>().ok(),
                    _ => None,
                },
                _ => None,
            };
            p.filter(|p| (0.0..=1.0).contains(p)).ok_or_else(|| at("quantile level must be a number in [0, 1]", e))
        };
        let numeric = |c: usize| -> Result<usize> {
            let t = self.schema.columns[c].ty;
            if matches!(t, ColumnType::String | ColumnType::LowCardinalityString) {
                return Err(at(
                    format!("{name} needs a numeric column, `{}` is {}", self.schema.columns[c].name, t.name()),
                    f,
                ));
            }
            Ok(c)
        };
        Ok(match name.as_str() {
            "count" if args.is_empty() && params.is_empty() => Agg::Count,
            "count" => return Err(unsupported("count(column); use count()", f)),
            "sum" => Agg::Sum(numeric(one("sum")?)?),
            "avg" => Agg::Avg(numeric(one("avg")?)?),
            "min" => Agg::Min(one("min")?),
            "max" => Agg::Max(one("max")?),
            "uniqexact" => Agg::UniqExact(one("uniqExact")?),
            "quantile" | "quantileexact" => match (params.as_slice(), args.as_slice()) {
                ([p], [x]) => Agg::Quantile(level(p)?, numeric(self.column(x)?)?),
                ([], [x, p]) => Agg::Quantile(level(p)?, numeric(self.column(x)?)?),
                ([], [x]) => Agg::Quantile(0.5, numeric(self.column(x)?)?),
                _ => return Err(at("quantile is quantile(p)(x) or quantile(x, p)", f)),
            },
            other => return Err(unsupported(&format!("function {other}"), f)),
        })
    }
}

pub(super) fn select(
    q: &ast::Query,
    schema_of: SchemaOf<'_>,
    params: Params<'_>,
) -> Result<(Select, Arc<Schema>, Vec<Slot>)> {
    if q.with.is_some() || q.fetch.is_some() || !q.locks.is_empty() || q.settings.is_some() || q.format_clause.is_some()
    {
        return Err(unsupported("WITH, FETCH, SETTINGS or FORMAT", q));
    }
    let s = match &*q.body {
        ast::SetExpr::Select(s) => s,
        other => return Err(unsupported("set operation or nested query", other)),
    };
    if s.distinct.is_some() || s.having.is_some() || s.top.is_some() || s.prewhere.is_some() || s.qualify.is_some() {
        return Err(unsupported("DISTINCT, HAVING, TOP, PREWHERE or QUALIFY", &**s));
    }
    let table = match s.from.as_slice() {
        [t] if t.joins.is_empty() => match &t.relation {
            ast::TableFactor::Table { name, .. } => table_name(name)?,
            other => return Err(unsupported("FROM other than a table name", other)),
        },
        [] => return Err(at("SELECT needs FROM <table>", &**s)),
        _ => return Err(unsupported("joins or several tables", &**s)),
    };
    let schema = schema_of(&table)?;
    let ctx = Ctx::new(&schema, params);

    let mut group_by = Vec::new();
    match &s.group_by {
        ast::GroupByExpr::Expressions(exprs, mods) => {
            if !mods.is_empty() {
                return Err(unsupported("GROUP BY modifiers", &**s));
            }
            for e in exprs {
                group_by.push(ctx.column(e)?);
            }
        }
        ast::GroupByExpr::All(_) => return Err(unsupported("GROUP BY ALL", &**s)),
    }

    let mut items = Vec::new();
    let mut names = Vec::new();
    // The text of each item's expression, to match ORDER BY expressions.
    let mut texts = Vec::new();
    for it in &s.projection {
        let (e, alias) = match it {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            ast::SelectItem::Wildcard(_) => {
                for (i, c) in schema.columns.iter().enumerate() {
                    items.push(Item::Column(i));
                    names.push(c.name.clone());
                    texts.push(c.name.clone());
                }
                continue;
            }
            other => return Err(unsupported(&format!("select item `{other}`"), other)),
        };
        let item = match e {
            Expr::Function(f) => Item::Agg(ctx.agg(f)?),
            _ => Item::Column(ctx.column(e)?),
        };
        items.push(item);
        texts.push(e.to_string());
        names.push(alias.unwrap_or_else(|| e.to_string()));
    }
    let aggregate = !group_by.is_empty() || items.iter().any(|i| matches!(i, Item::Agg(_)));
    if aggregate {
        for (i, it) in items.iter().enumerate() {
            if let Item::Column(c) = it {
                if !group_by.contains(c) {
                    return Err(Error::Sql {
                        what: format!("column `{}` must appear in GROUP BY or inside an aggregate", names[i]),
                        line: s.span().start.line,
                        col: s.span().start.column,
                    });
                }
            }
        }
    }
    let filter = s.selection.as_ref().map(|w| ctx.pred(w)).transpose()?;

    let mut order_by = Vec::new();
    let mut hidden = 0;
    if let Some(ob) = &q.order_by {
        if ob.interpolate.is_some() {
            return Err(unsupported("INTERPOLATE", q));
        }
        let exprs = match &ob.kind {
            ast::OrderByKind::Expressions(v) => v,
            ast::OrderByKind::All(_) => return Err(unsupported("ORDER BY ALL", q)),
        };
        for o in exprs {
            if o.with_fill.is_some() || o.options.nulls_first.is_some() {
                return Err(unsupported("WITH FILL or NULLS FIRST/LAST", &o.expr));
            }
            let desc = match &o.options.sort {
                None | Some(ast::OrderBySort::Asc) => false,
                Some(ast::OrderBySort::Desc) => true,
                Some(_) => return Err(unsupported("ORDER BY … USING", &o.expr)),
            };
            let text = o.expr.to_string();
            let found = (0..items.len() - hidden).find(|&i| names[i].eq_ignore_ascii_case(&text) || texts[i] == text);
            let idx = match found {
                Some(i) => i,
                None if !aggregate => {
                    // Sorting a plain SELECT by a column it does not show.
                    items.push(Item::Column(ctx.column(&o.expr)?));
                    names.push(text.clone());
                    texts.push(text);
                    hidden += 1;
                    items.len() - 1
                }
                None => return Err(at(format!("ORDER BY `{text}` is not a column of the result"), &o.expr)),
            };
            order_by.push((idx, desc));
        }
    }
    let limit = match &q.limit_clause {
        None => None,
        Some(ast::LimitClause::LimitOffset { limit, offset: None, limit_by }) if limit_by.is_empty() => match limit {
            None => None,
            Some(Expr::Value(v)) => match &v.value {
                ast::Value::Number(n, _) => Some(n.parse::<u64>().map_err(|_| at("LIMIT must be a whole number", v))?),
                _ => return Err(at("LIMIT must be a whole number", v)),
            },
            Some(other) => return Err(at("LIMIT must be a whole number", other)),
        },
        Some(other) => return Err(unsupported("OFFSET or LIMIT BY", other)),
    };
    let slots = ctx.slots.map(RefCell::into_inner).unwrap_or_default();
    let mut filter = filter;
    // With placeholders the literals keep their written order (a slot is an
    // ordinal); the bound copy is sorted instead (`Prepared::bind`).
    if let (Some(f), true) = (&mut filter, slots.is_empty()) {
        f.sort_in_lists();
    }
    Ok((Select { table, items, names, hidden, filter, group_by, aggregate, order_by, limit }, schema, slots))
}

/// Seconds since the epoch of 'YYYY-MM-DD hh:mm:ss' (UTC), or of 'YYYY-MM-DD'.
pub fn parse_datetime(s: &str) -> Option<u64> {
    let (date, time) = s.split_once(' ').unwrap_or((s, "00:00:00"));
    let d: Vec<i64> = date.split('-').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let t: Vec<i64> = time.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let ([y, m, day], [hh, mm, ss]) = (d.as_slice(), t.as_slice()) else { return None };
    if !(1..=12).contains(m) || !(1..=31).contains(day) || *hh > 23 || *mm > 59 || *ss > 59 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if *m <= 2 { y - 1 } else { *y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    u64::try_from(days * 86400 + hh * 3600 + mm * 60 + ss).ok()
}
