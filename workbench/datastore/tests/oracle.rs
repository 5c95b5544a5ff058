//! The engine against an independent oracle: polars computing the same
//! queries from the Parquet export of the same generated rows.

#![allow(deprecated)] // polars' eager group-by aggregations: fine for an oracle

use datastore::{Db, Value};
use polars::prelude::*;
use server::workload;
use std::sync::OnceLock;

const ROWS: u64 = 50_000;
const SEED: u64 = 3;

struct Fixture {
    db: Db,
    df: DataFrame,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        // NOTE: a directory per process under cargo's per-target scratch
        // space (cargo-nextest runs each test in a process of its own, beside
        // others): a static fixture has no teardown, so each process first
        // removes those of processes that are gone.
        let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name
                .strip_prefix("datastore-oracle-")
                .is_some_and(|pid| !std::path::Path::new("/proc").join(pid).exists())
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let dir = tmp.join(format!("datastore-oracle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = Db::open(&dir).unwrap();
        db.execute(workload::CREATE).unwrap();
        let t = db.table("t").unwrap();
        // Parts of several levels: three inserts merged into one, then two more.
        for (from, to) in [(0, 12_000), (12_000, 24_000), (24_000, 36_000)] {
            t.insert(&workload::batch(SEED, from, to)).unwrap();
        }
        t.optimize().unwrap();
        t.insert(&workload::batch(SEED, 36_000, 48_000)).unwrap();
        t.insert(&workload::batch(SEED, 48_000, ROWS)).unwrap();
        assert_eq!(t.snapshot().len(), 3);
        let pq = dir.join("t.parquet");
        workload::write_parquet(&pq, SEED, ROWS, 7_000).unwrap();
        let df = ParquetReader::new(std::fs::File::open(&pq).unwrap()).finish().unwrap();
        assert_eq!(df.height() as u64, ROWS);
        Fixture { db, df }
    })
}

fn rows(sql: &str) -> Vec<Vec<Value>> {
    fixture().db.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).rows
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v:?} is not a number"))
}

fn col<'a>(df: &'a DataFrame, name: &str) -> &'a Column {
    df.column(name).unwrap()
}

fn f64s(df: &DataFrame, name: &str) -> Vec<f64> {
    col(df, name).cast(&DataType::Float64).unwrap().f64().unwrap().into_no_null_iter().collect()
}

fn u64s(df: &DataFrame, name: &str) -> Vec<u64> {
    col(df, name).cast(&DataType::UInt64).unwrap().u64().unwrap().into_no_null_iter().collect()
}

fn strs(df: &DataFrame, name: &str) -> Vec<String> {
    col(df, name).str().unwrap().iter().map(|s| s.expect("no nulls").to_string()).collect()
}

fn value(df: &DataFrame) -> &ChunkedArray<Float64Type> {
    col(df, "value").f64().unwrap()
}

fn category(df: &DataFrame) -> &StringChunked {
    col(df, "category").str().unwrap()
}

/// `ts` in whole seconds, as the engine stores it (the export writes UTC milliseconds).
fn ts(df: &DataFrame) -> Int64Chunked {
    col(df, "ts").cast(&DataType::Int64).unwrap().i64().unwrap() / 1000
}

fn user(df: &DataFrame) -> &UInt32Chunked {
    col(df, "user_id").u32().unwrap()
}

fn id(df: &DataFrame) -> &UInt64Chunked {
    col(df, "id").u64().unwrap()
}

/// ClickHouse's quantileExact: rank ⌊p·n⌋ of the sorted values.
fn quantile_exact(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((p * v.len() as f64).floor() as usize).min(v.len() - 1)]
}

/// The export's `ts` reads back as a UTC time, not as an integer, and
/// names the same second the engine stores.
#[test]
fn the_export_writes_ts_as_a_utc_timestamp() {
    let df = &fixture().df;
    // Polars without its time-zone database names UTC by its offset.
    let utc = |tz: &TimeZone| ["UTC", "+00:00"].contains(&tz.as_str());
    assert!(
        matches!(col(df, "ts").dtype(), DataType::Datetime(TimeUnit::Milliseconds, Some(tz)) if utc(tz)),
        "ts must be Parquet's TIMESTAMP(MILLIS, adjusted to UTC), not {:?}",
        col(df, "ts").dtype()
    );
    let first = rows("SELECT ts FROM t WHERE id = 0");
    let stored = match first[0][0] {
        Value::U(s) => s as i64,
        ref v => panic!("ts is {v:?}"),
    };
    let exported = ts(&df.filter(&id(df).equal(0)).unwrap()).get(0).unwrap();
    assert_eq!(exported, stored);
    // The generator's window ends at its epoch: every time is in the past of 2026.
    assert!((1_600_000_000..1_800_000_000).contains(&stored), "{stored}");
}

#[test]
fn paper_query_1_group_by_category() {
    let df = &fixture().df;
    let mut got = rows(
        "SELECT category, count(), avg(value), sum(value), max(value), quantile(0.9)(value), min(ts), \
         uniqExact(user_id) FROM t GROUP BY category",
    );
    got.sort_by(|a, b| a[0].cmp(&b[0]));
    let mut cats =
        strs(&df.unique_stable(Some(&["category".into()]), UniqueKeepStrategy::First, None).unwrap(), "category");
    cats.sort();
    assert_eq!(got.len(), cats.len());
    for (row, cat) in got.iter().zip(&cats) {
        let sub = df.filter(&category(df).equal(cat.as_str())).unwrap();
        let v = value(&sub);
        assert_eq!(row[0], Value::S(cat.clone()));
        assert_eq!(num(&row[1]), sub.height() as f64);
        assert!(close(num(&row[2]), v.mean().unwrap()), "avg {cat}");
        assert!(close(num(&row[3]), v.sum().unwrap()), "sum {cat}");
        assert_eq!(num(&row[4]), v.max().unwrap());
        assert_eq!(num(&row[5]), quantile_exact(f64s(&sub, "value"), 0.9));
        assert_eq!(num(&row[6]), ts(&sub).min().unwrap() as f64);
        assert_eq!(num(&row[7]), col(&sub, "user_id").n_unique().unwrap() as f64);
    }
}

#[test]
fn paper_query_2_top_users_by_sum() {
    let df = &fixture().df;
    let got = rows("SELECT user_id, sum(value) AS s FROM t GROUP BY user_id ORDER BY s DESC LIMIT 20");
    let sums = df.group_by(["user_id"]).unwrap().select(["value"]).sum().unwrap();
    let (users, totals) = (u64s(&sums, "user_id"), f64s(&sums, sums.get_column_names()[1].as_str()));
    let mut want: Vec<(u64, f64)> = users.into_iter().zip(totals).collect();
    want.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!(got.len(), 20);
    for (row, (u, s)) in got.iter().zip(&want) {
        assert_eq!(row[0], Value::U(*u));
        assert!(close(num(&row[1]), *s));
    }
}

#[test]
fn paper_query_3_filtered_count() {
    let df = &fixture().df;
    let got = rows("SELECT count() FROM t WHERE value > 0.5 AND category = 'api'");
    let mask = value(df).gt(0.5) & category(df).equal("api");
    assert_eq!(got, vec![vec![Value::U(df.filter(&mask).unwrap().height() as u64)]]);
}

#[test]
fn every_predicate_form_matches_and_prunes_as_expected() {
    let f = fixture();
    let df = &f.df;
    let t0 = workload::EPOCH - workload::WINDOW;
    let day = 86_400i64;
    type Mask = Box<dyn Fn(&DataFrame) -> BooleanChunked>;
    let cases: Vec<(String, Mask)> = vec![
        ("category IN ('ads', 'web')".into(), Box::new(|d| category(d).equal("ads") | category(d).equal("web"))),
        ("category NOT IN ('ads')".into(), Box::new(|d| category(d).not_equal("ads"))),
        ("NOT (category = 'api')".into(), Box::new(|d| !category(d).equal("api"))),
        ("user_id < 500 OR value >= 1000".into(), Box::new(|d| user(d).lt(500u32) | value(d).gt_eq(1000.0))),
        (
            format!("category = 'iot' AND ts BETWEEN {} AND {}", t0 as i64 + 3 * day, t0 as i64 + 5 * day),
            Box::new(move |d| {
                category(d).equal("iot") & ts(d).gt_eq(t0 as i64 + 3 * day) & ts(d).lt_eq(t0 as i64 + 5 * day)
            }),
        ),
        (format!("ts >= {}", t0 as i64 + 20 * day), Box::new(move |d| ts(d).gt_eq(t0 as i64 + 20 * day))),
        ("ts < '2025-12-10 00:00:00'".into(), Box::new(|d| ts(d).lt(1_765_324_800i64))),
        ("id >= 0".into(), Box::new(|d| id(d).gt_eq(0u64))),
        ("category = 'nope'".into(), Box::new(|d| category(d).equal("nope"))),
        ("category = 'zzz'".into(), Box::new(|d| category(d).equal("zzz"))),
        ("value > 5000".into(), Box::new(|d| value(d).gt(5000.0))),
        ("category != 'web' AND id < 1000".into(), Box::new(|d| category(d).not_equal("web") & id(d).lt(1000u64))),
        ("'api' = category AND 10 > user_id".into(), Box::new(|d| category(d).equal("api") & user(d).lt(10u32))),
        ("value <= 0.25 OR value = 1073.0".into(), Box::new(|d| value(d).lt_eq(0.25) | value(d).equal(1073.0))),
        ("category > 'b' AND category <= 'iot'".into(), Box::new(|d| category(d).gt("b") & category(d).lt_eq("iot"))),
    ];
    for (cond, mask) in cases {
        let sql = format!("SELECT count(), sum(value), min(id), max(user_id) FROM t WHERE {cond}");
        let datastore::Output::Rows(r, stats) = f.db.execute(&sql).unwrap() else { panic!() };
        let sub = df.filter(&mask(df)).unwrap();
        let row = &r.rows[0];
        assert_eq!(num(&row[0]), sub.height() as f64, "{cond}: count");
        assert!(close(num(&row[1]), value(&sub).sum().unwrap_or(0.0)), "{cond}: sum");
        if sub.height() == 0 {
            assert_eq!((&row[2], &row[3]), (&Value::Null, &Value::Null), "{cond}: min/max of nothing");
        } else {
            assert_eq!(num(&row[2]), id(&sub).min().unwrap() as f64, "{cond}: min");
            assert_eq!(num(&row[3]), user(&sub).max().unwrap() as f64, "{cond}: max");
        }
        match cond.as_str() {
            // 'nope' sorts between 'iot' and 'web', so the granule spanning
            // that boundary may hold it; 'zzz' is past every granule.
            "category = 'zzz'" => assert_eq!(stats.granules_read, 0, "prunes everything"),
            "id >= 0" => assert_eq!(stats.granules_read, stats.granules_total, "prunes nothing"),
            c if c.starts_with("category = 'iot' AND ts") => {
                assert!(stats.granules_read < stats.granules_total, "{cond}: {stats:?}")
            }
            _ => {}
        }
    }
}

#[test]
fn plain_select_sorted_and_top_k() {
    let df = &fixture().df;
    let got = rows("SELECT id, value FROM t WHERE user_id < 30 ORDER BY id");
    let sub = df.filter(&user(df).lt(30u32)).unwrap();
    let mut want: Vec<(u64, f64)> = u64s(&sub, "id").into_iter().zip(f64s(&sub, "value")).collect();
    want.sort_by_key(|w| w.0);
    assert!(!want.is_empty());
    assert_eq!(got, want.iter().map(|(i, v)| vec![Value::U(*i), Value::F(*v)]).collect::<Vec<_>>());

    // Sorted by a column it does not show; ties in value broken by arrival, so
    // compare the values only.
    let got = rows("SELECT id FROM t ORDER BY value DESC LIMIT 7");
    let mut vals = f64s(df, "value");
    vals.sort_by(|a, b| b.total_cmp(a));
    let ids = u64s(df, "id");
    let by_id: std::collections::HashMap<u64, f64> = ids.into_iter().zip(f64s(df, "value")).collect();
    let got_vals: Vec<f64> = got.iter().map(|r| by_id[&(num(&r[0]) as u64)]).collect();
    assert_eq!(got_vals, vals[..7].to_vec());

    assert!(rows("SELECT id FROM t LIMIT 0").is_empty());
    assert_eq!(rows("SELECT * FROM t WHERE id = 12345").len(), 1);
    assert_eq!(rows("SELECT id FROM t WHERE category = 'ads' LIMIT 5").len(), 5);
}

#[test]
fn group_by_two_columns_with_order_and_limit() {
    let df = &fixture().df;
    let got = rows(
        "SELECT category, user_id, count() AS c FROM t WHERE user_id < 50 \
         GROUP BY category, user_id ORDER BY c DESC, user_id ASC, category ASC LIMIT 10",
    );
    let sub = df.filter(&user(df).lt(50u32)).unwrap();
    let counts = sub.group_by(["category", "user_id"]).unwrap().select(["id"]).count().unwrap();
    let mut want: Vec<(String, u64, u64)> = strs(&counts, "category")
        .into_iter()
        .zip(u64s(&counts, "user_id"))
        .zip(u64s(&counts, counts.get_column_names()[2].as_str()))
        .map(|((c, u), n)| (c, u, n))
        .collect();
    want.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)).then(a.0.cmp(&b.0)));
    want.truncate(10);
    let want: Vec<Vec<Value>> = want.into_iter().map(|(c, u, n)| vec![Value::S(c), Value::U(u), Value::U(n)]).collect();
    assert_eq!(got, want);
}

#[test]
fn empty_inputs_give_sql_answers() {
    assert!(rows("SELECT category, count() FROM t WHERE value > 5000 GROUP BY category").is_empty());
    assert_eq!(
        rows("SELECT count(), avg(value), min(value), uniqExact(category) FROM t WHERE category = 'nope'"),
        vec![vec![Value::U(0), Value::Null, Value::Null, Value::U(0)]]
    );
}

/// Quantiles over more values than a group keeps (the radix passes), with
/// and without a filter and groups, exactly as a sort picks them.
#[test]
fn spilled_quantiles_stay_exact() {
    let f = fixture();
    let df = &f.df;
    for p in [0.0, 0.25, 0.5, 0.9, 0.999, 1.0] {
        let sql = format!("SELECT quantile({p})(value), quantile({p})(user_id), count() FROM t");
        let datastore::Output::Rows(r, stats) = f.db.execute(&sql).unwrap() else { panic!() };
        assert!(stats.passes >= 2, "{ROWS} values in one group take a second pass: {stats:?}");
        assert_eq!(num(&r.rows[0][0]), quantile_exact(f64s(df, "value"), p), "p {p}");
        assert_eq!(num(&r.rows[0][1]), quantile_exact(f64s(df, "user_id"), p), "p {p} of an integer column");
    }
    // Grouped by a string key over several partitions, filtered.
    let mut got = rows("SELECT category, quantile(0.5)(value) FROM t WHERE user_id >= 1000 GROUP BY category");
    got.sort_by(|a, b| a[0].cmp(&b[0]));
    for row in got {
        let Value::S(cat) = &row[0] else { panic!("{row:?}") };
        let sub = df.filter(&(category(df).equal(cat.as_str()) & user(df).gt_eq(1000u32))).unwrap();
        assert_eq!(num(&row[1]), quantile_exact(f64s(&sub, "value"), 0.5), "{cat}");
    }
}

/// The partitioning does not depend on the threads granted: one thread
/// and every core give the same answers, float sums bit for bit.
#[test]
fn answers_do_not_depend_on_threads() {
    let f = fixture();
    for (_, sql) in workload::QUERIES {
        let run = |threads| {
            let limits = datastore::Limits { threads, ..Default::default() };
            f.db.select(sql, &[], &limits).unwrap()
        };
        let (one, s1) = run(1);
        let (all, _) = run(0);
        assert_eq!(s1.threads, 1);
        assert_eq!(format!("{:?}", one.rows), format!("{:?}", all.rows), "{sql}");
    }
}
