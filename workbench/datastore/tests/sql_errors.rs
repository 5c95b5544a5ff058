//! Unsupported or wrong SQL is an error naming the construct, the column or
//! the table, and the position; never a panic.

use datastore::{Db, Error};
use server::workload;

fn db(tag: &str) -> Db {
    // NOTE: fixed directories under cargo's per-target scratch space, each
    // replaced by the next run (the tests return Db handles, not paths to clean).
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("datastore-sql-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute(workload::CREATE).unwrap();
    db.table("t").unwrap().insert(&workload::batch(1, 0, 100)).unwrap();
    db
}

#[test]
fn errors_name_what_and_where() {
    let db = db("errors");
    let err = |sql: &str| match db.execute(sql) {
        Ok(_) => panic!("{sql}: accepted"),
        Err(e) => e,
    };
    let cases = [
        ("SELECT nope FROM t", "no column `nope`", Some((1, 8))),
        ("SELECT id FROM t\nWHERE bogus > 1", "no column `bogus`", Some((2, 7))),
        ("SELECT id FROM t JOIN t AS u ON t.id = u.id", "joins", Some((1, 1))),
        ("SELECT category, count() FROM t GROUP BY category HAVING count() > 1", "HAVING", Some((1, 1))),
        ("SELECT id, count() FROM t", "must appear in GROUP BY", None),
        ("SELECT count() FROM t WHERE category = 5", "is a string", Some((1, 40))),
        ("SELECT count() FROM t WHERE value > 'x'", "is numeric", Some((1, 37))),
        ("SELECT count(id) FROM t", "count(column)", Some((1, 8))),
        ("SELECT quantile(1.5)(value) FROM t", "quantile level", None),
        ("SELECT sum(category) FROM t", "needs a numeric column", None),
        ("SELECT median(value) FROM t", "function median", Some((1, 8))),
        ("SELECT id FROM t WHERE id LIKE '1%'", "predicate", None),
        ("SELECT id FROM t ORDER BY id LIMIT 5 OFFSET 2", "OFFSET", None),
        ("SELECT id FROM t UNION ALL SELECT id FROM t", "set operation", None),
        ("SELECT count() FROM missing", "does not exist", None),
        ("DELETE FROM t WHERE id = 1", "unsupported: statement", None),
        ("SELEC id FROM t", "SQL", None),
    ];
    for (sql, needle, pos) in cases {
        let e = err(sql);
        let text = e.to_string();
        assert!(text.contains(needle), "{sql}: {text}");
        if let Some((line, col)) = pos {
            match e {
                Error::Sql { line: l, col: c, .. } => assert_eq!((l, c), (line, col), "{sql}: {text}"),
                other => panic!("{sql}: expected a positioned error, got {other}"),
            }
        }
    }
}

#[test]
fn bad_inserts_name_the_column() {
    let db = db("inserts");
    let t = db.table("t").unwrap();
    let mut b = workload::batch(1, 0, 10);
    b.columns[1] = datastore::ColumnData::U64(vec![u32::MAX as u64 + 1; 10]);
    let e = t.insert(&b).unwrap_err().to_string();
    assert!(e.contains("user_id") && e.contains("does not fit UInt32"), "{e}");
    let mut b = workload::batch(1, 0, 10);
    b.columns.pop();
    assert!(t.insert(&b).unwrap_err().to_string().contains("4 columns"));
}
