//! Every column type at the edges of its range, through insert, merge and
//! SQL: widths on disk, sign extension, Delta wrap-around, string ordering.

use datastore::{ColumnData as C, Db, Value as V};

/// k, u8, u16, u32, u64, i8, i16, i32, f, d, s, lc
type Row = (i64, u64, u64, u64, u64, i64, i64, i64, f64, u64, &'static str, &'static str);

#[test]
fn extremes_survive_storage_and_queries() {
    let dir = std::env::temp_dir().join(format!("datastore-edges-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute(
        "CREATE TABLE e (k Int64, u8 UInt8, u16 UInt16, u32 UInt32, u64 UInt64, i8 Int8, i16 Int16, i32 Int32, \
         f Float64, d DateTime, s String, lc LowCardinality(String)) ORDER BY (k, u8)",
    )
    .unwrap();
    let t = db.table("e").unwrap();
    let rows: Vec<Row> = vec![
        (i64::MIN, 0, 0, 0, 0, i8::MIN as i64, i16::MIN as i64, i32::MIN as i64, f64::MIN, 0, "", "a"),
        (-1, 255, 65535, u32::MAX as u64, u64::MAX, -1, -1, -1, -0.5, u32::MAX as u64, "ünïcode", "b"),
        (0, 1, 1, 1, 1, 0, 0, 0, 0.0, 1, "a,b", "a"),
        (
            i64::MAX,
            128,
            32768,
            1 << 31,
            1 << 63,
            i8::MAX as i64,
            i16::MAX as i64,
            i32::MAX as i64,
            f64::MAX,
            1 << 31,
            "zz",
            "c",
        ),
    ];
    // Two inserts (reversed order in the second) and a merge.
    for half in [&rows[..2], &rows[2..]] {
        let mut cols: Vec<C> = vec![
            C::I64(half.iter().map(|r| r.0).collect()),
            C::U64(half.iter().map(|r| r.1).collect()),
            C::U64(half.iter().map(|r| r.2).collect()),
            C::U64(half.iter().map(|r| r.3).collect()),
            C::U64(half.iter().map(|r| r.4).collect()),
            C::I64(half.iter().map(|r| r.5).collect()),
            C::I64(half.iter().map(|r| r.6).collect()),
            C::I64(half.iter().map(|r| r.7).collect()),
            C::F64(half.iter().map(|r| r.8).collect()),
            C::U64(half.iter().map(|r| r.9).collect()),
            C::Str(half.iter().map(|r| r.10.to_string()).collect()),
            C::Str(half.iter().map(|r| r.11.to_string()).collect()),
        ];
        for c in &mut cols {
            match c {
                C::I64(v) => v.reverse(),
                C::U64(v) => v.reverse(),
                C::F64(v) => v.reverse(),
                C::Str(v) => v.reverse(),
                _ => {}
            }
        }
        t.insert(&datastore::Batch { columns: cols }).unwrap();
    }
    t.optimize().unwrap();
    assert_eq!(t.snapshot().len(), 1);

    let all = db.query("SELECT * FROM e ORDER BY k").unwrap().rows;
    assert_eq!(all.len(), 4);
    for (got, want) in all.iter().zip(&rows) {
        let expect = vec![
            V::I(want.0),
            V::U(want.1),
            V::U(want.2),
            V::U(want.3),
            V::U(want.4),
            V::I(want.5),
            V::I(want.6),
            V::I(want.7),
            V::F(want.8),
            V::U(want.9),
            V::S(want.10.into()),
            V::S(want.11.into()),
        ];
        assert_eq!(got, &expect);
    }
    let q = |sql: &str| db.query(sql).unwrap().rows;
    assert_eq!(q("SELECT min(k), max(k) FROM e"), vec![vec![V::I(i64::MIN), V::I(i64::MAX)]]);
    assert_eq!(q("SELECT sum(u64) FROM e"), vec![vec![V::F((u64::MAX as f64) + 1.0 + (1u64 << 63) as f64)]]);
    assert_eq!(q("SELECT sum(i8) FROM e"), vec![vec![V::I(-128 - 1 + 127)]]);
    assert_eq!(q("SELECT count() FROM e WHERE k = -9223372036854775808"), vec![vec![V::U(1)]]);
    assert_eq!(q("SELECT count() FROM e WHERE u64 >= 9223372036854775808"), vec![vec![V::U(2)]]);
    assert_eq!(q("SELECT count() FROM e WHERE i32 < -1 OR d = 4294967295"), vec![vec![V::U(2)]]);
    assert_eq!(
        q("SELECT s FROM e WHERE s > 'a' ORDER BY s"),
        vec![vec![V::S("a,b".into())], vec![V::S("zz".into())], vec![V::S("ünïcode".into())]]
    );
    assert_eq!(
        q("SELECT lc, count() AS n FROM e GROUP BY lc ORDER BY lc"),
        vec![vec![V::S("a".into()), V::U(2)], vec![V::S("b".into()), V::U(1)], vec![V::S("c".into()), V::U(1)],]
    );
    assert_eq!(
        q("SELECT uniqExact(f), quantile(1)(f), quantile(0)(u8) FROM e"),
        vec![vec![V::U(4), V::F(f64::MAX), V::F(0.0)]]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
