//! Comparisons on an integer first sort key: the engine finds each
//! granule's passing run by binary search, takes min/max of the key from
//! the run's ends, and (for scans of a few granules) reads decoded
//! granules from the cache. Checked against a brute-force scan of the
//! inserted rows, over several parts, duplicate keys, runs that start and
//! end inside granules, and every query run twice (the second from the
//! cache where the scan is small).

use datastore::{Batch, ColumnData, Db, Value};

const PARTS: u64 = 3;
const ROWS: u64 = 20_000;

/// (k, v) of every row inserted, widened so both tables compare alike.
type Pairs = Vec<(i128, i128)>;

fn db(tag: &str) -> (Db, Pairs, Pairs) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("datastore-key-runs-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute("CREATE TABLE ku (k UInt64, v Int64) ORDER BY (k)").unwrap();
    db.execute("CREATE TABLE ki (k Int64, v UInt64) ORDER BY (k)").unwrap();
    let (mut ku, mut ki) = (Vec::new(), Vec::new());
    for p in 0..PARTS {
        // Keys repeat (about two rows a key), and every part spans the range.
        let keys: Vec<u64> = (0..ROWS).map(|i| (i * 7919 + p * 13) % 30_000).collect();
        let vals: Vec<i64> = (0..ROWS).map(|i| i as i64 - 10_000 + p as i64).collect();
        ku.extend(keys.iter().zip(&vals).map(|(&k, &v)| (k as i128, v as i128)));
        let batch = Batch { columns: vec![ColumnData::U64(keys.clone()), ColumnData::I64(vals.clone())] };
        db.table("ku").unwrap().insert(&batch).unwrap();
        let ikeys: Vec<i64> = keys.iter().map(|&k| k as i64 - 15_000).collect();
        let ivals: Vec<u64> = vals.iter().map(|&v| (v + 20_000) as u64).collect();
        ki.extend(ikeys.iter().zip(&ivals).map(|(&k, &v)| (k as i128, v as i128)));
        let batch = Batch { columns: vec![ColumnData::I64(ikeys), ColumnData::U64(ivals)] };
        db.table("ki").unwrap().insert(&batch).unwrap();
    }
    (db, ku, ki)
}

fn int(v: &Value) -> Option<i128> {
    match v {
        Value::U(x) => Some(*x as i128),
        Value::I(x) => Some(*x as i128),
        Value::Null => None,
        other => panic!("not an integer: {other:?}"),
    }
}

/// (SQL condition on k, the same as a Rust test on k)
type Case = (String, Box<dyn Fn(i128) -> bool>);

fn cases(lo: i128, hi: i128) -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    let mid = (lo + hi) / 2;
    for x in [lo - 5, lo, lo + 1, mid, mid + 1, hi - 40, hi - 1, hi, hi + 5] {
        out.push((format!("k > {x}"), Box::new(move |k| k > x)));
        out.push((format!("k >= {x}"), Box::new(move |k| k >= x)));
        out.push((format!("k < {x}"), Box::new(move |k| k < x)));
        out.push((format!("k <= {x}"), Box::new(move |k| k <= x)));
        out.push((format!("k = {x}"), Box::new(move |k| k == x)));
        out.push((format!("{x} < k"), Box::new(move |k| x < k)));
        // A narrow range: a granule or two of each part (the cached path).
        out.push((format!("k BETWEEN {x} AND {}", x + 30), Box::new(move |k| k >= x && k <= x + 30)));
        out.push((format!("k > {x} AND k < {}", x + 3), Box::new(move |k| k > x && k < x + 3)));
    }
    out
}

fn check(db: &Db, table: &str, rows: &[(i128, i128)], lo: i128, hi: i128) -> usize {
    let mut checked = 0;
    for (cond, f) in cases(lo, hi) {
        let sql = format!("SELECT count(), min(k), max(k), sum(v), min(v), max(v) FROM {table} WHERE {cond}");
        let pass: Vec<&(i128, i128)> = rows.iter().filter(|(k, _)| f(*k)).collect();
        let want = [
            Some(pass.len() as i128),
            pass.iter().map(|r| r.0).min(),
            pass.iter().map(|r| r.0).max(),
            Some(pass.iter().map(|r| r.1).sum()),
            pass.iter().map(|r| r.1).min(),
            pass.iter().map(|r| r.1).max(),
        ];
        for run in 0..2 {
            let r = db.query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let got: Vec<Option<i128>> = r.rows[0].iter().map(int).collect();
            // An empty selection's sum is 0 as an integer, or NULL.
            let got_sum = got[3].or(Some(0));
            assert_eq!((got[0], got[1], got[2], got_sum, got[4], got[5]), want.into(), "{sql} (run {run})");
        }
        // min/max of the key alone: answered from the ends of the key range
        // (`Plan::key_extremes`), not by the scan above.
        for (items, idx) in [
            ("min(k), max(k)", &[1, 2][..]),
            ("max(k)", &[2]),
            ("min(k)", &[1]),
            ("max(k), min(k), max(k)", &[2, 1, 2]),
        ] {
            let sql = format!("SELECT {items} FROM {table} WHERE {cond}");
            let r = db.query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let got: Vec<Option<i128>> = r.rows[0].iter().map(int).collect();
            let want: Vec<Option<i128>> = idx.iter().map(|&i| want[i]).collect();
            assert_eq!(got, want, "{sql}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn key_comparisons_match_a_brute_force_scan() {
    let (db, ku, ki) = db("all");
    assert_eq!(db.table("ku").unwrap().snapshot().len() as u64, PARTS, "one part per insert (no merger here)");
    let n = check(&db, "ku", &ku, 0, 29_999) + check(&db, "ki", &ki, -15_000, 14_999);
    assert_eq!(n, 2 * 9 * 8);
    for (table, rows) in [("ku", &ku), ("ki", &ki)] {
        let r = db.query(&format!("SELECT min(k), max(k) FROM {table}")).unwrap();
        let want = [rows.iter().map(|r| r.0).min(), rows.iter().map(|r| r.0).max()];
        assert_eq!(r.rows[0].iter().map(int).collect::<Vec<_>>(), want, "{table}, no WHERE");
    }
    // The narrow ranges were small scans: their granules are in the cache now.
    assert!(datastore::storage::cache::global().stats().entries > 0);
}

/// min/max of the key read a granule from each end of the key range, a
/// part at a time; the same range with `count()` beside them scans it all.
/// A filter the key's order does not answer (`!=`) goes to the scan.
#[test]
fn key_extremes_read_the_ends_of_the_range() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("datastore-key-extremes");
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute("CREATE TABLE e (k UInt64) ORDER BY (k)").unwrap();
    let keys: Vec<u64> = (0..100_000).map(|i| i * 2).collect();
    db.table("e").unwrap().insert(&Batch { columns: vec![ColumnData::U64(keys)] }).unwrap();
    let limits = datastore::Limits::default();
    let run = |sql: &str| db.select(sql, &[], &limits).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let (r, fast) = run("SELECT min(k), max(k) FROM e WHERE k > 1000 AND k < 190000");
    assert_eq!(r.rows, vec![vec![Value::U(1002), Value::U(189_998)]]);
    let (r, scan) = run("SELECT min(k), max(k), count() FROM e WHERE k > 1000 AND k < 190000");
    assert_eq!(r.rows, vec![vec![Value::U(1002), Value::U(189_998), Value::U(94_499)]]);
    assert_eq!(fast.granules_read, 2, "one granule from each end");
    assert!(scan.granules_read >= 12, "the scan reads the range: {}", scan.granules_read);
    let (r, other) = run("SELECT min(k), max(k) FROM e WHERE k != 0");
    assert_eq!(r.rows, vec![vec![Value::U(2), Value::U(199_998)]]);
    assert_eq!(other.granules_read, 13, "scanned");
}
