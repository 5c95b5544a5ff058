//! The parsed-statement cache behind `Db::select`: a repeated text is
//! parsed and planned once and bound anew each time, a bound plan answers
//! as a fresh one does (errors included), errors are never kept, and the
//! cache stays within its bounds.

use datastore::sql::ParseCache;
use datastore::{sql, Db, Limits, Value};

fn chain_db(tag: &str) -> Db {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("datastore-parse-cache-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute("CREATE TABLE chain (k UInt64) ORDER BY (k)").unwrap();
    let batch = datastore::Batch { columns: vec![datastore::ColumnData::U64((0..100).collect())] };
    db.table("chain").unwrap().insert(&batch).unwrap();
    db
}

fn limits() -> Limits {
    Limits { deadline: None, deadline_ms: 0, max_rows: Some(1000), threads: 1, memory: None }
}

#[test]
fn a_repeated_statement_is_bound_anew_each_time() {
    let db = chain_db("bind");
    let step = "SELECT min(k) FROM chain WHERE k > $prev";
    let mut v = 0;
    for _ in 0..10 {
        let (r, _) = db.select(step, &[("$prev", Value::U(v))], &limits()).unwrap();
        let Value::U(next) = r.rows[0][0] else { panic!("{:?}", r.rows) };
        assert_eq!(next, v + 1, "a cached tree must not keep the first binding");
        v = next;
    }
    // The same text with a value of the wrong type is still refused.
    assert!(db.select(step, &[("$prev", Value::S("x".into()))], &limits()).is_err());
}

/// A prepared scalar aggregate keeps its partial state for the next call
/// (`exec::agg::Spare`): every call, including one whose WHERE passes no
/// row, answers as the same query written with its literal does, which
/// gets a statement (and a partial) of its own.
#[test]
fn a_kept_partial_starts_every_call_afresh() {
    let db = chain_db("spare");
    let aggs = "count(), sum(k), min(k), max(k), avg(k)";
    let step = format!("SELECT {aggs} FROM chain WHERE k > $prev");
    for v in [10u64, 90, 200, 0, 10, 99, 50] {
        let (kept, _) = db.select(&step, &[("$prev", Value::U(v))], &limits()).unwrap();
        let (fresh, _) = db.select(&format!("SELECT {aggs} FROM chain WHERE k > {v}"), &[], &limits()).unwrap();
        assert_eq!(kept.rows, fresh.rows, "$prev = {v}");
    }
    // And a GROUP BY of the same statement twice (not kept: it is not scalar).
    let by = "SELECT k, count() FROM chain WHERE k > $prev GROUP BY k ORDER BY k LIMIT 3";
    let (a, _) = db.select(by, &[("$prev", Value::U(5))], &limits()).unwrap();
    let (b, _) = db.select(by, &[("$prev", Value::U(5))], &limits()).unwrap();
    assert_eq!((a.rows.len(), &a.rows), (3, &b.rows));
}

/// A bound statement rebound again and again, each result's rows given
/// back for the next to answer into (`BoundSelect::recycle`), answers as
/// the literal query does: the key-extremes path that reuses the rows, a
/// call passing no row (NULL), and a scan that does not reuse them.
#[test]
fn a_rebound_statement_answers_into_recycled_rows_as_a_fresh_one_does() {
    let db = chain_db("recycle");
    for items in ["min(k), max(k)", "max(k)", "count(), min(k)"] {
        let step = format!("SELECT {items} FROM chain WHERE k > $prev");
        let mut b = db.bind(&step, &[("$prev", Value::U(0))]).unwrap();
        for v in [3u64, 98, 99, 500, 0, 42] {
            b = b.rebind(&[("$prev", Value::U(v))]).unwrap();
            let (r, _) = b.run(&limits()).unwrap();
            let (fresh, _) = db.select(&format!("SELECT {items} FROM chain WHERE k > {v}"), &[], &limits()).unwrap();
            assert_eq!(r, fresh, "{step}, $prev = {v}");
            b.recycle(r.rows);
        }
    }
}

/// Table `chain` with its one column `k` of type `ty`.
fn chain_schema(ty: datastore::ColumnType) -> std::sync::Arc<datastore::storage::part::Schema> {
    std::sync::Arc::new(datastore::storage::part::Schema {
        table: "chain".into(),
        columns: vec![datastore::storage::part::ColumnDef {
            name: "k".into(),
            ty,
            codec: datastore::storage::codec::Codec::Lz4,
        }],
        order_by: vec![0],
    })
}

fn schema_of(_: &str) -> datastore::Result<std::sync::Arc<datastore::storage::part::Schema>> {
    Ok(chain_schema(datastore::ColumnType::UInt64))
}

#[test]
fn texts_are_kept_once_errors_never_and_the_cache_stays_bounded() {
    let c = ParseCache::new();
    for _ in 0..3 {
        c.parse_with("SELECT count() FROM chain", &schema_of, &[]).unwrap();
    }
    assert_eq!(c.len(), 1);
    assert!(c.parse_with("SELEC count() FROM chain", &schema_of, &[]).is_err());
    assert_eq!(c.len(), 1, "a text that does not parse is not kept");
    // A text that parses but does not plan (unknown column) is refused every time.
    for _ in 0..2 {
        assert!(c.parse_with("SELECT nope FROM chain", &schema_of, &[]).is_err());
    }
    let long = format!("SELECT count() FROM chain WHERE k IN ({})", vec!["1"; ParseCache::MAX_TEXT].join(", "));
    let before = c.len();
    c.parse_with(&long, &schema_of, &[]).unwrap();
    assert_eq!(c.len(), before, "a text over MAX_TEXT is parsed, not kept");
    for i in 0..ParseCache::ENTRIES + 10 {
        let q = format!("SELECT count() FROM chain WHERE k > {i}");
        let planned = c.parse_with(&q, &schema_of, &[]).unwrap();
        assert!(matches!(planned, sql::Statement::Select(_)));
        assert!(c.len() <= ParseCache::ENTRIES);
    }
}

/// Every parameter binding of a cached plan against the same text planned
/// afresh (`Db::execute` with the value written into the SQL, which the
/// cache never sees): the same rows, or an error both ways.
#[test]
fn a_bound_plan_answers_as_a_fresh_plan_does() {
    let db = chain_db("fresh");
    db.execute("CREATE TABLE mixed (k UInt64, i Int64, f Float64, s String) ORDER BY (k)").unwrap();
    let batch = datastore::Batch {
        columns: vec![
            datastore::ColumnData::U64((0..100).collect()),
            datastore::ColumnData::I64((0..100).map(|x| x - 50).collect()),
            datastore::ColumnData::F64((0..100).map(|x| x as f64 / 10.0).collect()),
            datastore::ColumnData::Str((0..100).map(|x| format!("s{x:02}")).collect()),
        ],
    };
    db.table("mixed").unwrap().insert(&batch).unwrap();
    // (text with $a and $b, the same text with each placeholder's SQL literal)
    let texts = [
        "SELECT count() FROM mixed WHERE k > $a AND i < $b",
        "SELECT min(k), max(f) FROM mixed WHERE k BETWEEN $a AND $b",
        "SELECT count() FROM mixed WHERE i IN (1, $a, 3, $b) OR k = 7",
        "SELECT sum(k) FROM mixed WHERE NOT (f >= $a) AND s != $b",
        "SELECT k FROM mixed WHERE $a < k AND k < $b ORDER BY k DESC LIMIT 3",
    ];
    let values = [
        (Value::U(10), "10"),
        (Value::U(60), "60"),
        (Value::I(-5), "-5"),
        (Value::I(20), "20"),
        (Value::F(2.5), "2.5"),
        (Value::S("s40".into()), "'s40'"),
        (Value::Null, "NULL"),
    ];
    let mut compared = 0;
    for text in texts {
        for (a, a_sql) in &values {
            for (b, b_sql) in &values {
                let bound = db.select(text, &[("$a", a.clone()), ("$b", b.clone())], &limits());
                let literal = text.replace("$a", a_sql).replace("$b", b_sql);
                let fresh = db.query(&literal);
                match (&bound, &fresh) {
                    (Ok((r, _)), Ok(f)) => assert_eq!(r, f, "{text} with {a:?}, {b:?}"),
                    (Err(_), Err(_)) => {}
                    _ => panic!("{text} with {a:?}, {b:?}: bound {:?}, fresh {:?}", bound.map(|r| r.0), fresh),
                }
                compared += bound.is_ok() as usize;
            }
        }
    }
    assert!(compared > 50, "most bindings run: {compared}");
}

/// A table made anew under the same name has a new schema object: plans
/// made against the old one are not used.
#[test]
fn a_plan_is_not_used_for_another_schema() {
    let c = ParseCache::new();
    let schema = schema_of("chain").unwrap();
    let same = |_: &str| Ok(schema.clone());
    let step = "SELECT min(k) FROM chain WHERE k > $prev";
    c.parse_with(step, &same, &[("$prev", Value::U(1))]).unwrap();
    let other = chain_schema(datastore::ColumnType::String);
    let changed = |_: &str| Ok(other.clone());
    let e = c.parse_with(step, &changed, &[("$prev", Value::U(1))]).expect_err("k is a string now");
    assert!(e.to_string().contains("is a string"), "{e}");
    assert!(c.parse_with(step, &same, &[("$prev", Value::U(1))]).is_ok());
}
