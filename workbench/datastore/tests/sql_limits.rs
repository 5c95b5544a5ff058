//! Every construct that deepens a syntax tree, at its limit and one past
//! it: at the limit the statement plans and runs (or fails as any other
//! unsupported SQL does) on a quarter of the stack a server gives a worker;
//! one past it, it is refused with the limit's name and nothing is built.
//! Before the limits, a 4,000-term `+` chain overflowed a worker's stack and
//! aborted the whole server.

use datastore::sql::limits::{self, measure_sql, MAX_IN_LIST, MAX_NESTING, MAX_OPERATORS, MAX_SQL_BYTES, STACK};
use datastore::{Db, Error, Value};
use server::workload;

fn db(tag: &str) -> Db {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("datastore-limits-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute(workload::CREATE).unwrap();
    // Two parts, so the filter runs over more than one.
    db.table("t").unwrap().insert(&workload::batch(1, 0, 20_000)).unwrap();
    db.table("t").unwrap().insert(&workload::batch(1, 20_000, 40_000)).unwrap();
    db
}

/// Runs `f` on a thread with a quarter of a worker's stack: a statement at
/// the limits must fit with a margin of four.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(STACK / 4).spawn(f).unwrap().join().expect("no panic")
}

fn count(db: &Db, sql: &str) -> Result<u64, Error> {
    let r = db.query(sql)?;
    match r.rows.first().and_then(|row| row.first()) {
        Some(Value::U(n)) => Ok(*n),
        other => panic!("{}: count() gave {other:?}", &sql[..60.min(sql.len())]),
    }
}

fn is_limit(e: &Error, name: &str) -> bool {
    matches!(e, Error::SqlLimit { limit, .. } if *limit == name) && e.to_string().contains(name)
}

/// `head` + `first` + `term` × n + `tail` with exactly `target` operators;
/// `first_plus_one` (the same meaning, one operator more) stands for
/// `first` when the step does not divide what is left.
fn with_operators(head: &str, first: &str, first_plus_one: &str, term: &str, tail: &str, target: usize) -> String {
    let base = measure_sql(&format!("{head}{first}{tail}")).unwrap().operators;
    assert_eq!(measure_sql(&format!("{head}{first_plus_one}{tail}")).unwrap().operators, base + 1);
    let step = measure_sql(&format!("{head}{first}{term}{tail}")).unwrap().operators - base;
    let left = target - base;
    let first = if left.is_multiple_of(step) { first } else { first_plus_one };
    let sql = format!("{head}{first}{}{tail}", term.repeat(left / step));
    assert_eq!(measure_sql(&sql).unwrap().operators, target, "the statement was built to the count");
    sql
}

#[test]
fn operator_chains_run_at_the_limit_and_are_refused_past_it() {
    let db = std::sync::Arc::new(db("chains"));
    let one = count(&db, "SELECT count() FROM t WHERE id = 1").unwrap();
    let two = count(&db, "SELECT count() FROM t WHERE id = 1 OR id = 2").unwrap();
    let head = "SELECT count() FROM t WHERE ";
    let cases = [
        // (construct, statement at the limit, its count if it runs)
        ("AND", with_operators(head, "id = 1", "id BETWEEN 1 AND 1", " AND id = 1", "", MAX_OPERATORS), Some(one)),
        ("OR", with_operators(head, "id = 1", "id BETWEEN 1 AND 1", " OR id = 2", "", MAX_OPERATORS), Some(two)),
        // Arithmetic is not in the engine's subset: refused by the planner,
        // whose error message prints the whole (deep) expression.
        ("+", with_operators("SELECT ", "id", "-id", " + id", " FROM t", MAX_OPERATORS), None),
        ("+ in WHERE", with_operators(head, "id = 1", "-id = 1", " + 1", "", MAX_OPERATORS), None),
    ];
    for (what, sql, want) in cases {
        let (d, s) = (db.clone(), sql.clone());
        match (on_small_stack(move || count(&d, &s)), want) {
            (Ok(n), Some(w)) => assert_eq!(n, w, "{what} at the limit"),
            (Err(e), None) => assert!(!matches!(e, Error::SqlLimit { .. }), "{what} at the limit: {e}"),
            (got, _) => panic!("{what} at the limit: {got:?}"),
        }
        // One more operator: refused before any tree is built.
        let over = sql.replacen("SELECT ", "SELECT -", 1);
        let over = if measure_sql(&over).unwrap().operators == MAX_OPERATORS + 1 { over } else { format!("{sql} + 1") };
        assert_eq!(measure_sql(&over).unwrap().operators, MAX_OPERATORS + 1);
        let d = db.clone();
        let e = on_small_stack(move || count(&d, &over)).expect_err(what);
        assert!(is_limit(&e, "MAX_OPERATORS"), "{what} past the limit: {e}");
    }
}

#[test]
fn nesting_runs_at_the_limit_and_is_refused_past_it() {
    let db = std::sync::Arc::new(db("nesting"));
    let one = count(&db, "SELECT count() FROM t WHERE id = 1").unwrap();
    let all = count(&db, "SELECT count() FROM t").unwrap();
    // Keywords used as names (`count`, `t`) count as prefix operators too
    // (the measure is conservative), so each statement's depth is found by
    // its measure, not assumed.
    let nested = |n: usize| -> Vec<(&str, String, Option<u64>)> {
        vec![
            ("brackets", format!("SELECT count() FROM t WHERE {}id = 1{}", "(".repeat(n), ")".repeat(n)), Some(one)),
            ("NOT", format!("SELECT count() FROM t WHERE {}id = 1", "NOT ".repeat(n)), Some([one, all - one][n % 2])),
            // Not in the subset (no functions in WHERE, no arithmetic): planned and refused.
            ("calls", format!("SELECT count() FROM t WHERE id = {}1{}", "f(".repeat(n), ")".repeat(n)), None),
            ("unary minus", format!("SELECT count() FROM t WHERE id = {}x", "- ".repeat(n)), None),
        ]
    };
    for construct in 0..nested(0).len() {
        let depth = |n: usize| measure_sql(&nested(n)[construct].1).unwrap().nesting;
        let n = (0..=MAX_NESTING).find(|&n| depth(n) == MAX_NESTING).expect("a statement at the limit");
        assert_eq!(depth(n + 1), MAX_NESTING + 1, "each level adds one");
        let ((what, sql, want), over) = (nested(n).swap_remove(construct), nested(n + 1).swap_remove(construct).1);
        let (d, s) = (db.clone(), sql.clone());
        match (on_small_stack(move || count(&d, &s)), want) {
            (Ok(n), Some(w)) => assert_eq!(n, w, "{what} at the limit"),
            (Err(e), None) => {
                assert!(!matches!(e, Error::SqlLimit { .. }), "{what} at the limit reached the parser's counter: {e}")
            }
            (got, _) => panic!("{what} at the limit: {got:?}"),
        }
        let d = db.clone();
        let e = on_small_stack(move || count(&d, &over)).expect_err(what);
        assert!(is_limit(&e, "MAX_NESTING"), "{what} past the limit: {e}");
    }
    // Far past it (the 10,000 brackets a hostile client sent): the same refusal.
    let deep = format!("SELECT count() FROM t WHERE {}id = 1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(is_limit(&db.query(&deep).unwrap_err(), "MAX_NESTING"));
}

#[test]
fn in_lists_run_at_the_limit_and_are_refused_past_it() {
    let db = db("in");
    let list = |n: usize| (0..n as u64).map(|i| (i * 7).to_string()).collect::<Vec<_>>().join(", ");
    // Every 7th id below 70,000: 40,000 rows hold ids 0..40,000, so ⌈40,000 / 7⌉ hit.
    let sql = format!("SELECT count() FROM t WHERE id IN ({})", list(MAX_IN_LIST));
    assert_eq!(count(&db, &sql).unwrap(), 40_000_u64.div_ceil(7));
    let not_in = format!("SELECT count() FROM t WHERE id NOT IN ({})", list(MAX_IN_LIST));
    assert_eq!(count(&db, &not_in).unwrap(), 40_000 - 40_000_u64.div_ceil(7));
    // Written out of order, and with strings: the same answer as sorted.
    let shuffled = "SELECT count() FROM t WHERE id IN (35, 7, 0, 28, 14, 21, 49, 42, 63, 56)";
    assert_eq!(count(&db, shuffled).unwrap(), 10);
    let e = count(&db, &format!("SELECT count() FROM t WHERE id IN ({})", list(MAX_IN_LIST + 1))).unwrap_err();
    assert!(is_limit(&e, "MAX_IN_LIST"), "{e}");
}

#[test]
fn a_statement_longer_than_the_limit_is_refused_unread() {
    let db = db("bytes");
    let pad = MAX_SQL_BYTES - "SELECT count() FROM t".len();
    let at = format!("SELECT count() FROM t{}", " ".repeat(pad));
    assert!(count(&db, &at).is_ok());
    let e = count(&db, &format!("{at} ")).unwrap_err();
    assert!(is_limit(&e, "MAX_SQL_BYTES"), "{e}");
    // The parser's own counter stands behind MAX_NESTING with room.
    const { assert!(limits::PARSER_RECURSION >= 2 * MAX_NESTING) };
}
