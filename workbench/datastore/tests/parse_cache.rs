//! The parsed-statement cache behind `Db::select`: a repeated text is
//! parsed once and bound anew each time, errors are never kept, and the
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
    Limits { deadline: None, deadline_ms: 0, max_rows: Some(1000), threads: 1 }
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

fn schema_of(_: &str) -> datastore::Result<datastore::part::Schema> {
    Ok(datastore::part::Schema {
        table: "chain".into(),
        columns: vec![datastore::part::ColumnDef {
            name: "k".into(),
            ty: datastore::ColumnType::UInt64,
            codec: datastore::codec::Codec::Lz4,
        }],
        order_by: vec![0],
    })
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
