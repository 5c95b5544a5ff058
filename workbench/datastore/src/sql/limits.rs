//! How large and how deep a statement may be, checked on its tokens before
//! a syntax tree exists.
//!
//! NOTE: why before the tree. `sqlparser` builds a chain of binary
//! operators (`a + a + …`, `x = 1 AND x = 1 AND …`) in a loop, as a
//! left-deep tree, but everything that walks the tree afterwards recurses:
//! its `Drop`, `Spanned::span`, `Display`, this crate's planner and the
//! predicate's evaluation. A 4,000-term sum (12 KB of SQL) overflowed a
//! 2 MiB worker stack and aborted a server; refusing the tree once built
//! would still overflow while dropping it. So the text is measured first,
//! on the tokenizer's output (a flat list), and refused with
//! [`Error::SqlLimit`] naming the constant at fault.
//!
//! With these bounds the depth of any tree the planner sees is at most
//! `MAX_OPERATORS + 2 · MAX_NESTING` plus a few levels of statement: every
//! level of a tree is an operator token, a bracket, or a prefix keyword.
//! The server sizes its worker stacks for that (`server::pool::WORKER_STACK`)
//! and its tests run every construct at the limit on a quarter of it.

use crate::error::{Error, Result};
use sqlparser::dialect::Dialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

/// MAX_SQL_BYTES = 256 KiB: room for an IN list of [`MAX_IN_LIST`] 20-digit
/// numbers; the tokens of a text this long take about 20 MB while it is
/// parsed, where a 16 MiB frame of `a,a,a,…` would take over 600 MB.
pub const MAX_SQL_BYTES: usize = 256 << 10;

/// MAX_OPERATORS = 1,000 operators and keywords in one statement: the
/// workloads' longest query has under 30. Every one may add a level to
/// the tree (a chain of `+` or `AND` is as deep as it is long).
pub const MAX_OPERATORS: usize = 1_000;

/// MAX_NESTING = 32 levels of brackets, calls and prefix operators (`NOT`,
/// unary `-`, `CASE` …) around any token: these recurse in the parser itself.
pub const MAX_NESTING: usize = 32;

/// PARSER_RECURSION = 2 · MAX_NESTING + 16: the parser's own recursion
/// counter, a second guard behind [`MAX_NESTING`] (a bracket or a prefix
/// operator costs the parser at most two levels; the tests check that a
/// statement at [`MAX_NESTING`] never reaches it).
pub const PARSER_RECURSION: usize = 2 * MAX_NESTING + 16;

/// MAX_IN_LIST = 10,000 values in one `IN (…)`: a list is probed by
/// binary search, so its cost is per row, not per row and value; the
/// bound keeps the planned list small (a value is 32 bytes).
pub const MAX_IN_LIST: usize = 10_000;

fn over(what: String, max: usize, limit: &'static str) -> Error {
    Error::SqlLimit { what, max, limit }
}

/// The error for a statement the parser's own recursion counter stopped.
pub(crate) fn too_deep() -> Error {
    over("nesting deeper than the parser's recursion counter".into(), PARSER_RECURSION, "PARSER_RECURSION")
}

/// Refuses an `IN` list longer than [`MAX_IN_LIST`].
pub(crate) fn in_list(len: usize) -> Result<()> {
    match len > MAX_IN_LIST {
        true => Err(over(format!("an IN list of {len} values"), MAX_IN_LIST, "MAX_IN_LIST")),
        false => Ok(()),
    }
}

/// The tokens of `sql`, once its length, operator count and nesting are
/// within the limits above.
pub(crate) fn check(dialect: &dyn Dialect, sql: &str) -> Result<Vec<TokenWithSpan>> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(over(format!("a statement of {} bytes", sql.len()), MAX_SQL_BYTES, "MAX_SQL_BYTES"));
    }
    let tokens = Tokenizer::new(dialect, sql).tokenize_with_location().map_err(|e| Error::Parse(e.to_string()))?;
    let m = measure(&tokens);
    if m.operators > MAX_OPERATORS {
        return Err(over(format!("a statement of {} operators", m.operators), MAX_OPERATORS, "MAX_OPERATORS"));
    }
    if m.nesting > MAX_NESTING {
        return Err(over(format!("nesting {} levels deep", m.nesting), MAX_NESTING, "MAX_NESTING"));
    }
    Ok(tokens)
}

/// STACK = 8 MiB: the stack a thread that plans and runs statements needs at
/// these limits, with room to spare: a statement at each limit (a chain of
/// [`MAX_OPERATORS`], [`MAX_NESTING`] brackets or prefix operators) runs on
/// a quarter of it in the tests (`tests/sql_limits.rs`); the 2 MiB of a
/// default thread overflowed at a 4,000-term chain before the limits.
pub const STACK: usize = 8 << 20;

/// The measure of `sql` as [`check`] takes it (for tests and clients that
/// want to stay within the limits).
pub fn measure_sql(sql: &str) -> Result<Measure> {
    let tokens = Tokenizer::new(&sqlparser::dialect::ClickHouseDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| Error::Parse(e.to_string()))?;
    Ok(measure(&tokens))
}

/// What [`measure`] counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    pub operators: usize,
    pub nesting: usize,
}

/// Counts operators and the deepest nesting, in one pass.
///
/// - An operator is any token that is not an operand (an identifier, a
///   number, a string, a placeholder) or punctuation (brackets, `,`, `;`).
///   Keywords count: `AND`, `IS`, `BETWEEN` are operators, and counting
///   `SELECT` or `FROM` as well only makes the bound conservative.
/// - Nesting is the open brackets, plus the run of prefix operators (an
///   operator where an operand is due: `NOT NOT x`, `- - x`, `CASE WHEN`)
///   before each bracket and before the token; an operand ends a run. The
///   parser recurses once or twice for each, where binary operators are
///   a loop (and are bounded by the count). A `-` or `+` right before a
///   number is the number's sign, not an operator.
pub fn measure(tokens: &[TokenWithSpan]) -> Measure {
    let mut m = Measure::default();
    // (depth of the enclosing levels, prefix run of this level) per open bracket.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let (mut base, mut run) = (0usize, 0usize);
    // Whether an operand is due: at the start, after an operator, a `,` or an opening bracket.
    let mut operand_due = true;
    // Whether the token before was a keyword other than NOT.
    let mut after_keyword = false;
    let mut significant = tokens.iter().map(|t| &t.token).filter(|t| !matches!(t, Token::Whitespace(_))).peekable();
    while let Some(t) = significant.next() {
        let keyword = match t {
            Token::Word(w) if w.quote_style.is_none() => w.keyword,
            _ => Keyword::NoKeyword,
        };
        let was_after_keyword = std::mem::replace(&mut after_keyword, false);
        match t {
            Token::LParen | Token::LBracket | Token::LBrace => {
                open.push((base, run));
                base += run + 1;
                run = 0;
                m.nesting = m.nesting.max(base);
                operand_due = true;
            }
            Token::RParen | Token::RBracket | Token::RBrace => {
                // A closed bracket is an operand: it ends the run around it.
                (base, _) = open.pop().unwrap_or((0, 0));
                run = 0;
                operand_due = false;
            }
            Token::Comma | Token::SemiColon => {
                run = 0;
                operand_due = true;
            }
            Token::EOF => {}
            // NOT after an operator or a keyword (`WHERE NOT`, `IS NOT`) is a prefix.
            _ if keyword == Keyword::NOT => {
                m.operators += 1;
                if operand_due || was_after_keyword {
                    run += 1;
                    m.nesting = m.nesting.max(base + run);
                }
                operand_due = true;
            }
            // Any other keyword may be a name (`id`, `count`, `t` are keywords
            // to the tokenizer): counted as an operator, but for nesting it
            // stands where an operand would.
            _ if keyword != Keyword::NoKeyword => {
                m.operators += 1;
                run = 0;
                operand_due = false;
                after_keyword = true;
            }
            t if is_operand(t) => {
                run = 0;
                operand_due = false;
            }
            Token::Minus | Token::Plus if operand_due && matches!(significant.peek(), Some(Token::Number(..))) => {}
            _ => {
                m.operators += 1;
                if operand_due {
                    run += 1;
                    m.nesting = m.nesting.max(base + run);
                }
                operand_due = true;
            }
        }
    }
    m
}

fn is_operand(t: &Token) -> bool {
    match t {
        Token::Word(w) => w.quote_style.is_some() || w.keyword == Keyword::NoKeyword,
        Token::Number(..) | Token::Placeholder(_) | Token::Char(_) => true,
        Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::QuoteDelimitedStringLiteral(_)
        | Token::NationalQuoteDelimitedStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::ClickHouseDialect;

    fn m(sql: &str) -> Measure {
        measure(&Tokenizer::new(&ClickHouseDialect {}, sql).tokenize_with_location().unwrap())
    }

    #[test]
    fn chains_count_every_operator_and_brackets_nest() {
        // SELECT, FROM, WHERE, =, AND, =: six operators, nothing nested.
        assert_eq!(m("SELECT x1 FROM tbl WHERE x1 = 1 AND y1 = 2"), Measure { operators: 6, nesting: 0 });
        assert_eq!(m("SELECT x1+x1+x1 FROM tbl").operators, 4);
        // A keyword used as a name is an operator for the count, an operand for nesting.
        assert_eq!(m("SELECT id+id FROM t"), Measure { operators: 5, nesting: 0 });
        // Signed numbers are literals, not operators, and do not nest.
        assert_eq!(m("SELECT x1 FROM tbl WHERE x1 IN (-1, -2, +3)"), Measure { operators: 4, nesting: 1 });
        // Brackets and the prefix operators inside them nest.
        assert_eq!(m("SELECT ((x1))").nesting, 2);
        assert_eq!(m("SELECT x1 WHERE NOT NOT NOT x1").nesting, 3);
        assert_eq!(m("SELECT x1 WHERE x1 = - - - x1").nesting, 3);
        assert_eq!(m("SELECT f1(NOT (NOT x1), NOT y1)").nesting, 4);
        // `IS NOT NULL` and `NOT IN` nest no deeper than one.
        assert_eq!(m("SELECT x1 WHERE x1 IS NOT NULL AND y1 NOT IN (1) AND z1 IS NOT NULL").nesting, 1);
        // A string holding brackets or operators is one operand.
        assert_eq!(m("SELECT '((((+ AND -'"), Measure { operators: 1, nesting: 0 });
    }
}
