//! The sparse index at work on a part of many granules: a predicate on the
//! first key column reads only its granules, one on the second key column
//! (inside a single first-key value) only a sliver of those, and the
//! answers still match a brute-force count over the generated rows.

use datastore::{ColumnData, Db, Output, Value};
use server::workload;

#[test]
fn key_predicates_read_few_granules_and_stay_exact() {
    let dir = std::env::temp_dir().join(format!("datastore-pruning-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute(workload::CREATE).unwrap();
    let rows = 400_000;
    let batch = workload::batch(9, 0, rows);
    db.table("t").unwrap().insert(&batch).unwrap();

    let (ColumnData::U64(ts), ColumnData::Str(cat)) = (&batch.columns[2], &batch.columns[4]) else { panic!() };
    let (lo, hi) = (workload::EPOCH - workload::WINDOW + 10 * 86_400, workload::EPOCH - workload::WINDOW + 12 * 86_400);
    let brute = |f: &dyn Fn(usize) -> bool| (0..rows as usize).filter(|&i| f(i)).count() as u64;
    let run = |sql: &str| {
        let Output::Rows(r, s) = db.execute(sql).unwrap() else { panic!() };
        (r.rows[0][0].clone(), s)
    };

    let (n, all) = run("SELECT count() FROM t");
    assert_eq!(n, Value::U(rows));
    assert_eq!(all.granules_read, all.granules_total);
    assert_eq!(all.granules_total, (rows as usize).div_ceil(8192));

    let (n, s) = run("SELECT count() FROM t WHERE category = 'iot'");
    assert_eq!(n, Value::U(brute(&|i| cat[i] == "iot")));
    // A quarter of the rows, plus at most a boundary granule on each side.
    assert!(s.granules_read <= all.granules_total / 4 + 2, "{s:?}");

    let (n, s) = run(&format!("SELECT count() FROM t WHERE category = 'iot' AND ts >= {lo} AND ts < {hi}"));
    assert_eq!(n, Value::U(brute(&|i| cat[i] == "iot" && ts[i] >= lo && ts[i] < hi)));
    // Two days of thirty inside one category (~0.8 of its ~12 granules, so
    // at most 2), plus the two granules that straddle the category's edges,
    // where the index cannot bound ts.
    assert!(s.granules_read <= 4, "{s:?}");

    // Past every timestamp: only the two granules straddling the category's
    // edges are read; past every key: nothing.
    let (n, s) = run(&format!("SELECT count() FROM t WHERE category = 'api' AND ts > {}", workload::EPOCH + 1));
    assert_eq!((n, s.granules_read), (Value::U(0), 2));
    let (n, s) = run("SELECT count() FROM t WHERE category >= 'x'");
    assert_eq!((n, s.granules_read), (Value::U(0), 0));
    let _ = std::fs::remove_dir_all(&dir);
}
