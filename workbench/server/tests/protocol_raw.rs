//! Raw bytes against a server on 127.0.0.1:0: every method, every bad input,
//! each answered with its status (or a close), the server serving on.

mod common;

use common::{frame, text, Raw, TempDir};
use datastore::Value;
use server::limits::Config;
use server::protocol::{self, ColumnsView};
use std::time::Duration;

fn start(tag: &str, cfg: Config) -> (TempDir, server::Running) {
    let dir = TempDir::new(tag);
    let s = server::start(&dir.0, "127.0.0.1:0", cfg).unwrap();
    let mut c = server::client::Client::connect(s.addr).unwrap();
    c.execute("CREATE TABLE kv (k UInt64, name String) ORDER BY (k)").unwrap();
    let batch = datastore::Batch {
        columns: vec![
            datastore::ColumnData::U64((0..20_000).collect()),
            datastore::ColumnData::Str((0..20_000).map(|i| format!("n{i}")).collect()),
        ],
    };
    let schema =
        [("k".to_string(), datastore::ColumnType::UInt64), ("name".to_string(), datastore::ColumnType::String)];
    let p = c.insert("kv", &schema, &batch).unwrap();
    c.wait(p).unwrap();
    (dir, s)
}

fn rows(body: &[u8]) -> Vec<Vec<Value>> {
    ColumnsView::parse(body).unwrap().to_rows().unwrap()
}

#[test]
fn methods_answer_with_their_results() {
    let (_d, s) = start("methods", Config::default());
    let mut r = Raw::connect(s.addr);
    let (st, p, body) = r.call(protocol::PING, 1, 0, b"");
    assert_eq!((st, p), (200, 1));
    assert_eq!(ColumnsView::parse(&body).unwrap().len(), 0, "ping answers an empty Columns");
    let (st, _, body) = r.call(protocol::QUERY, 2, 0, b"SELECT count(), max(k) FROM kv WHERE k >= 100");
    assert_eq!(st, 200, "{}", text(&body));
    assert_eq!(rows(&body), vec![vec![Value::U(19_900), Value::U(19_999)]]);
    let (st, _, body) = r.call(protocol::QUERY, 3, 0, b"SELECT name FROM kv WHERE k = 7");
    assert_eq!((st, rows(&body)), (200, vec![vec![Value::S("n7".into())]]));
    // $prev: the first value of promise 2's result (19,900).
    let (st, _, body) = r.call(protocol::QUERY, 4, 2, b"SELECT name FROM kv WHERE k = $prev");
    assert_eq!((st, rows(&body)), (200, vec![vec![Value::S("n19900".into())]]), "{}", text(&body));
    let (st, _, body) = r.call(protocol::STATS, 5, 0, b"");
    let stats: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(st, 200);
    assert!(stats["rss_bytes"].as_u64().unwrap() > 0 && stats["connections"].as_u64().unwrap() >= 1);
    s.stop().expect("the server stops cleanly");
}

/// A call finished in the same flight as it, before its answer, still runs
/// (its dependent binds `$prev` to it) and is answered, without rows when
/// its first value is an integer the run keeps; a string first value keeps
/// its rows (a dependent binds from them). Unfinished calls keep theirs.
#[test]
fn a_call_finished_in_its_flight_is_answered_without_rows() {
    let (_d, s) = start("released", Config::default());
    let mut r = Raw::connect(s.addr);
    let mut flight = frame(protocol::QUERY, 1, 0, b"SELECT count() FROM kv WHERE k >= 100");
    flight.extend(frame(protocol::QUERY, 2, 1, b"SELECT name FROM kv WHERE k = $prev"));
    flight.extend(frame(protocol::QUERY, 3, 0, b"SELECT name FROM kv WHERE k = 7"));
    flight.extend(frame(protocol::QUERY, 4, 3, b"SELECT count() FROM kv WHERE name = $prev"));
    flight.extend(frame(protocol::QUERY, 5, 0, b"SELECT count() FROM kv WHERE k < 10"));
    flight.extend(frame(zap::rpc::FINISH, 0, 1, &3u32.to_le_bytes()));
    r.send(&flight);
    let got: Vec<_> = (0..5).map(|_| r.recv().expect("an answer a call")).collect();
    assert_eq!((got[0].0, got[0].1, got[0].2.len()), (200, 1, 0), "released, an integer: no rows");
    assert_eq!((got[1].0, got[1].1, rows(&got[1].2)), (200, 2, vec![vec![Value::S("n19900".into())]]));
    assert_eq!(
        (got[2].0, got[2].1, rows(&got[2].2)),
        (200, 3, vec![vec![Value::S("n7".into())]]),
        "a string first value"
    );
    assert_eq!((got[3].1, rows(&got[3].2)), (4, vec![vec![Value::U(1)]]));
    assert_eq!((got[4].1, rows(&got[4].2)), (5, vec![vec![Value::U(10)]]), "not finished: its rows");
    // Released: a call naming one of them is refused; the unfinished ones are held.
    assert_eq!(r.call(protocol::QUERY, 6, 1, b"SELECT count() FROM kv WHERE k = $prev").0, protocol::GONE);
    assert_eq!(r.call(protocol::QUERY, 7, 4, b"SELECT count() FROM kv WHERE k = $prev").0, 200);
    s.stop().expect("the server stops cleanly");
}

#[test]
fn bad_calls_get_their_status_and_the_connection_serves_on() {
    let cfg = Config { max_promises: 9, ..Config::default() };
    let (_d, s) = start("bad", cfg);
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, b"SELECT nope FROM kv");
    assert_eq!(st, protocol::UNPROCESSABLE, "{}", text(&body));
    assert!(text(&body).contains("no column `nope`"), "{}", text(&body));
    assert_eq!(r.call(protocol::QUERY, 2, 0, b"DROP TABLE kv").0, protocol::UNPROCESSABLE);
    let (st, _, body) = r.call(77, 3, 0, b"");
    assert_eq!((st, text(&body)), (protocol::NOT_FOUND, "unknown method 77".into()));
    assert_eq!(r.call(protocol::QUERY, 4, 0, &[0xff, 0xfe]).0, protocol::BAD_REQUEST, "SQL not UTF-8");
    // Dependent calls: unknown target, failed target, reused promise id, promise 0.
    assert_eq!(r.call(protocol::QUERY, 5, 99, b"SELECT 1 FROM kv").0, protocol::GONE);
    let (st, _, body) = r.call(protocol::QUERY, 6, 1, b"SELECT count() FROM kv WHERE k = $prev");
    assert_eq!(st, protocol::FAILED_DEPENDENCY, "{}", text(&body));
    assert_eq!(
        r.call(protocol::QUERY, 7, 6, b"SELECT count() FROM kv").0,
        protocol::FAILED_DEPENDENCY,
        "failure propagates"
    );
    assert_eq!(r.call(protocol::PING, 6, 0, b"").0, protocol::BAD_REQUEST, "promise 6 is in use");
    assert_eq!(r.call(protocol::PING, 0, 0, b"").0, protocol::BAD_REQUEST, "promise 0 is reserved");
    // An empty target result cannot bind $prev.
    assert_eq!(r.call(protocol::QUERY, 8, 0, b"SELECT k FROM kv WHERE k > 1000000").0, 200);
    let (st, _, body) = r.call(protocol::QUERY, 9, 8, b"SELECT count() FROM kv WHERE k = $prev");
    assert_eq!(st, protocol::UNPROCESSABLE);
    assert!(text(&body).contains("no value to bind"), "{}", text(&body));
    // Every call so far was stored (errors too), except the two refused ids:
    // promises 1-9 fill the table of 9, so the next is refused with 429.
    assert_eq!(r.call(protocol::PING, 10, 0, b"").0, protocol::TOO_MANY);
    r.send(&frame(zap::rpc::FINISH, 0, 1, b""));
    assert_eq!(r.call(protocol::PING, 11, 0, b"").0, 200, "a finish made room");
    // A malformed envelope: 400 on promise 0, frame boundary intact, connection lives.
    let mut junk = 5u32.to_le_bytes().to_vec();
    junk.extend_from_slice(b"hello");
    r.send(&junk);
    let (st, p, body) = r.recv().unwrap();
    assert_eq!((st, p), (protocol::BAD_REQUEST, 0), "{}", text(&body));
    r.send(&frame(zap::rpc::FINISH, 0, 11, b""));
    assert_eq!(r.call(protocol::PING, 12, 0, b"").0, 200);
    // A finish of a run (payload: a count) releases promises 2..=9 at once,
    // leaving 12: eight more calls fit, the ninth is refused.
    r.send(&frame(zap::rpc::FINISH, 0, 2, &8u32.to_le_bytes()));
    for p in 13..21 {
        assert_eq!(r.call(protocol::PING, p, 0, b"").0, 200, "promise {p}");
    }
    assert_eq!(r.call(protocol::PING, 21, 0, b"").0, protocol::TOO_MANY);
    s.stop().expect("the server stops cleanly");
}

#[test]
fn limits_answer_408_413_and_inserts_are_checked() {
    let cfg = Config { max_result_rows: 100, query_timeout: Duration::ZERO, ..Config::default() };
    let (_d, s) = start("limits", cfg);
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, b"SELECT count() FROM kv");
    assert_eq!(st, protocol::TIMEOUT, "{}", text(&body));
    assert_eq!(text(&body), "query exceeded its time limit of 0 ms");
    s.stop().expect("the server stops cleanly");

    let cfg = Config { max_result_rows: 100, ..Config::default() };
    let (_d, s) = start("limits2", cfg);
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, b"SELECT k FROM kv");
    assert_eq!((st, text(&body)), (protocol::TOO_LARGE, "result exceeds the limit of 100 rows".into()));
    assert_eq!(r.call(protocol::QUERY, 2, 0, b"SELECT k FROM kv LIMIT 100").0, 200);
    // Inserts: a batch with a column of the wrong type, a missing column, garbage.
    let mut c = server::client::Client::connect(s.addr).unwrap();
    let wrong = datastore::Batch {
        columns: vec![datastore::ColumnData::I64(vec![1]), datastore::ColumnData::Str(vec!["x".into()])],
    };
    let schema = [("k".to_string(), datastore::ColumnType::Int64), ("name".to_string(), datastore::ColumnType::String)];
    let p = c.insert("kv", &schema, &wrong).unwrap();
    let e = c.wait(p).err().unwrap().to_string();
    assert_eq!(
        e,
        "status 422 (bad SQL or batch): insert into `kv`: column `k`: is Int64 in the batch, UInt64 in the table"
    );
    let (st, _, body) = r.call(protocol::INSERT, 3, 0, b"not a batch");
    assert_eq!(st, protocol::UNPROCESSABLE, "{}", text(&body));
    s.stop().expect("the server stops cleanly");
}

/// A full disk (injected: `datastore::storage::failpoint`): the insert is
/// 507 naming the cause and no path, nothing of it is visible, what was
/// acknowledged before stays, and inserts are taken again once there is room.
#[test]
fn a_full_disk_answers_507_and_keeps_what_was_acknowledged() {
    use datastore::storage::failpoint::{self, Action, Point};
    let (d, s) = start("full-disk", Config::default());
    let mut c = server::client::Client::connect(s.addr).unwrap();
    let schema =
        [("k".to_string(), datastore::ColumnType::UInt64), ("name".to_string(), datastore::ColumnType::String)];
    let batch = |from: u64| datastore::Batch {
        columns: vec![
            datastore::ColumnData::U64((from..from + 100).collect()),
            datastore::ColumnData::Str((from..from + 100).map(|i| format!("n{i}")).collect()),
        ],
    };
    failpoint::arm(Point::WriteBlock, &d.0.join("kv"), 0, Action::Fail(std::io::ErrorKind::StorageFull));
    let p = c.insert("kv", &schema, &batch(20_000)).unwrap();
    let e = c.wait(p).err().unwrap().to_string();
    assert!(e.starts_with("status 507 (disk full): not stored: no space left"), "{e}");
    assert!(!e.contains(&d.0.display().to_string()), "no server path in the answer: {e}");
    failpoint::disarm(&d.0.join("kv"));
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, b"SELECT count() FROM kv");
    assert_eq!((st, rows(&body)), (200, vec![vec![Value::U(20_000)]]), "the failed batch is not visible");
    let p = c.insert("kv", &schema, &batch(30_000)).unwrap();
    c.wait(p).unwrap();
    let (_, _, body) = r.call(protocol::QUERY, 2, 0, b"SELECT count() FROM kv");
    assert_eq!(rows(&body), vec![vec![Value::U(20_100)]]);
    s.stop().expect("the server stops cleanly");
}

/// Memory budgets: a GROUP BY of 20,000 groups past the query's budget is
/// 413 naming `--max-query-memory`; past the server's total (which the
/// answers count against too) 503 naming `--max-server-memory`; a small
/// query beside it is answered; a GROUP BY whose groups pass the result-row
/// limit but whose answer does not is answered.
#[test]
fn memory_budgets_answer_413_and_503_and_others_are_served() {
    let group_by = b"SELECT k, count() FROM kv GROUP BY k ORDER BY k DESC LIMIT 3";
    let cfg = Config { max_query_memory: 64 << 10, max_result_rows: 100, ..Config::default() };
    let (_d, s) = start("query-memory", cfg);
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, group_by);
    assert_eq!(st, protocol::TOO_LARGE, "{}", text(&body));
    assert!(
        text(&body).ends_with("past the query memory limit of 65536 bytes (--max-query-memory)"),
        "{}",
        text(&body)
    );
    let (st, _, body) = r.call(protocol::QUERY, 2, 0, b"SELECT count() FROM kv");
    assert_eq!((st, rows(&body)), (200, vec![vec![Value::U(20_000)]]));
    s.stop().expect("the server stops cleanly");

    let cfg = Config { max_server_memory: 300 << 10, max_result_rows: 100, ..Config::default() };
    let (_d, s) = start("server-memory", cfg);
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, group_by);
    assert_eq!(st, protocol::UNAVAILABLE, "{}", text(&body));
    assert!(text(&body).contains("memory budget of 307200 bytes (--max-server-memory)"), "{}", text(&body));
    let (st, _, body) = r.call(protocol::QUERY, 2, 0, b"SELECT count() FROM kv");
    assert_eq!(st, 200, "others are served: {}", text(&body));
    assert_eq!(rows(&body), vec![vec![Value::U(20_000)]]);
    s.stop().expect("the server stops cleanly");

    let (_d, s) = start("group-rows", Config { max_result_rows: 100, ..Config::default() });
    let mut r = Raw::connect(s.addr);
    let (st, _, body) = r.call(protocol::QUERY, 1, 0, group_by);
    assert_eq!(st, 200, "20,000 groups inside, 3 rows out: {}", text(&body));
    let want: Vec<Vec<Value>> = (0..3).map(|i| vec![Value::U(19_999 - i), Value::U(1)]).collect();
    assert_eq!(rows(&body), want);
    s.stop().expect("the server stops cleanly");
}

#[test]
fn oversized_truncated_and_stalled_frames_close_only_their_connection() {
    let cfg = Config { max_frame: 1 << 20, stall_timeout: Duration::from_millis(300), ..Config::default() };
    let (_d, s) = start("frames", cfg);
    // Oversized: a 413 on promise 0, then the close.
    let mut big = Raw::connect(s.addr);
    big.send(&(1u32 << 30).to_le_bytes());
    let (st, p, body) = big.recv().unwrap();
    assert_eq!((st, p), (protocol::TOO_LARGE, 0));
    assert!(text(&body).contains("exceeds the maximum of 1048576"), "{}", text(&body));
    assert!(big.closed());
    // Truncated: half a frame, then the peer leaves.
    let mut half = Raw::connect(s.addr);
    let f = frame(protocol::PING, 1, 0, b"");
    half.send(&f[..f.len() / 2]);
    drop(half);
    // Stalled: half a frame, then silence: closed after the stall timeout with 408.
    let mut stall = Raw::connect(s.addr);
    stall.send(&f[..f.len() / 2]);
    let (st, p, _) = stall.recv().unwrap();
    assert_eq!((st, p), (protocol::TIMEOUT, 0));
    assert!(stall.closed());
    // Everyone else is served.
    let mut ok = Raw::connect(s.addr);
    assert_eq!(ok.call(protocol::PING, 1, 0, b"").0, 200);
    let summary = s.stop().expect("the server stops cleanly");
    assert_eq!((summary.closed_bad_frame, summary.closed_stalled), (1, 1), "{summary}");
}

#[test]
fn connections_over_the_limit_get_a_refusal_frame() {
    let cfg = Config { max_connections: 2, ..Config::default() };
    let d = TempDir::new("maxconn");
    let s = server::start(&d.0, "127.0.0.1:0", cfg).unwrap();
    let mut a = Raw::connect(s.addr);
    let mut b = Raw::connect(s.addr);
    assert_eq!(a.call(protocol::PING, 1, 0, b"").0, 200);
    assert_eq!(b.call(protocol::PING, 1, 0, b"").0, 200);
    let mut c = Raw::connect(s.addr);
    let (st, p, body) = c.recv().unwrap();
    assert_eq!((st, p), (protocol::UNAVAILABLE, 0));
    assert_eq!(text(&body), "server at its limit of 2 connections; try later");
    assert!(c.closed());
    drop(a);
    // A slot frees once the server sees the close.
    let t0 = std::time::Instant::now();
    loop {
        let mut d = Raw::connect(s.addr);
        d.send(&frame(protocol::PING, 1, 0, b""));
        if d.recv().map(|r| r.0) == Some(200) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "the closed connection's slot never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.stop().expect("the server stops cleanly").refused >= 1);
}
