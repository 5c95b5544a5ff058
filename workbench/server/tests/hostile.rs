//! What a hostile or careless client sent a release build (issue 27), each
//! answered with a 4xx or a close while the server serves on: deep SQL that
//! aborted the process, names that escaped the data directory, answers
//! held or left unread until memory grew without bound, messages that
//! named the server's paths, one mistake answered with two statuses.

mod common;

use common::{frame, text, Raw, TempDir};
use server::limits::Config;
use server::protocol::{self, ColumnsWriter};
use std::time::{Duration, Instant};
use zap::Builder;

/// ROWS = 20,000: `SELECT *` of `wide` answers about 600 KB.
const ROWS: u64 = 20_000;

fn start(tag: &str, cfg: Config) -> (TempDir, server::Running) {
    let dir = TempDir::new(tag);
    let s = server::start(&dir.0.join("data"), "127.0.0.1:0", cfg).unwrap();
    let mut c = server::client::Client::connect(s.addr).unwrap();
    c.execute("CREATE TABLE wide (id UInt64, name String, v UInt64) ORDER BY (id)").unwrap();
    let batch = datastore::Batch {
        columns: vec![
            datastore::ColumnData::U64((0..ROWS).collect()),
            datastore::ColumnData::Str((0..ROWS).map(|i| format!("name-{i:012}")).collect()),
            datastore::ColumnData::U64((0..ROWS).map(|i| i * 3).collect()),
        ],
    };
    let schema = [
        ("id".to_string(), datastore::ColumnType::UInt64),
        ("name".to_string(), datastore::ColumnType::String),
        ("v".to_string(), datastore::ColumnType::UInt64),
    ];
    let p = c.insert("wide", &schema, &batch).unwrap();
    c.wait(p).unwrap();
    (dir, s)
}

fn stats(r: &mut Raw, promise: u32) -> serde_json::Value {
    let (st, _, body) = r.call(protocol::STATS, promise, 0, b"");
    assert_eq!(st, 200);
    serde_json::from_slice(&body).unwrap()
}

/// Still serving: a fresh connection gets a ping answered.
fn alive(addr: std::net::SocketAddr) {
    let mut r = Raw::connect(addr);
    assert_eq!(r.call(protocol::PING, 1, 0, b"").0, 200, "the server serves on");
}

/// The frame of an insert of one UInt64 column `a` into `table`, as any client may write it.
fn insert_into(table: &str) -> Vec<u8> {
    let (mut w, mut b) = (ColumnsWriter::default(), Builder::new());
    let batch = datastore::Batch { columns: vec![datastore::ColumnData::U64(vec![1, 2, 3])] };
    let schema = [("a".to_string(), datastore::ColumnType::UInt64)];
    protocol::encode_batch(&mut w, &mut b, table, &schema, &batch).unwrap().to_vec()
}

#[test]
fn deep_sql_is_refused_and_the_server_serves_on() {
    let (_d, s) = start("deep", Config::default());
    let mut r = Raw::connect(s.addr);
    // Each of these aborted the whole server before the limits (4,000 terms).
    let sum = format!("SELECT {} FROM wide", vec!["id"; 4_000].join("+"));
    let and = format!("SELECT count() FROM wide WHERE {}", vec!["id = 1"; 4_000].join(" AND "));
    let or = format!("SELECT count() FROM wide WHERE {}", vec!["id = 1"; 4_000].join(" OR "));
    let parens = format!("SELECT count() FROM wide WHERE {}id = 1{}", "(".repeat(10_000), ")".repeat(10_000));
    let nots = format!("SELECT count() FROM wide WHERE {}id = 1", "NOT ".repeat(10_000));
    let long_in = format!("SELECT count() FROM wide WHERE id IN ({})", vec!["1"; 20_000].join(","));
    for (i, (sql, limit)) in [
        (sum, "MAX_OPERATORS"),
        (and, "MAX_OPERATORS"),
        (or, "MAX_OPERATORS"),
        (parens, "MAX_NESTING"),
        (nots, "MAX_OPERATORS"),
        (long_in, "MAX_IN_LIST"),
    ]
    .iter()
    .enumerate()
    {
        let (st, _, body) = r.call(protocol::QUERY, i as u32 + 1, 0, sql.as_bytes());
        assert_eq!(st, 422, "{}", text(&body));
        assert!(text(&body).contains(limit), "names {limit}: {}", text(&body));
    }
    // The same SQL shapes within the limits are answered.
    let and = format!("SELECT count() FROM wide WHERE {}", vec!["id = 1"; 300].join(" AND "));
    let (st, _, body) = r.call(protocol::QUERY, 100, 0, and.as_bytes());
    assert_eq!(st, 200, "{}", text(&body));
    alive(s.addr);
    s.stop().expect("the server stops cleanly");
}

#[test]
fn names_are_identifiers_never_paths() {
    let (d, s) = start("names", Config::default());
    let mut r = Raw::connect(s.addr);
    let ten_kb = "x".repeat(10 << 10);
    let creates = [
        r#"CREATE TABLE "q/../../escape_probe" (a UInt64) ORDER BY a"#.to_string(),
        r#"CREATE TABLE ".." (a UInt64) ORDER BY a"#.to_string(),
        r#"CREATE TABLE "a\b" (a UInt64) ORDER BY a"#.to_string(),
        "CREATE TABLE \"a\0b\" (a UInt64) ORDER BY a".to_string(),
        r#"CREATE TABLE "" (a UInt64) ORDER BY a"#.to_string(),
        r#"CREATE TABLE "tablé" (a UInt64) ORDER BY a"#.to_string(),
        format!("CREATE TABLE {ten_kb} (a UInt64) ORDER BY a"),
        r#"CREATE TABLE d (a UInt64, a UInt64) ORDER BY a"#.to_string(),
        r#"CREATE TABLE d (a UInt64, A String) ORDER BY a"#.to_string(),
        r#"CREATE TABLE d ("../c" UInt64) ORDER BY "../c""#.to_string(),
    ];
    let mut p = 0;
    for sql in &creates {
        p += 1;
        let (st, _, body) = r.call(protocol::QUERY, p, 0, sql.as_bytes());
        assert_eq!(st, 422, "{sql:.60}: {}", text(&body));
        assert!(body.len() < 300, "the error quotes a short name: {}", text(&body));
    }
    // Inserts and queries naming such tables: 422, and no path in any answer.
    let data = d.0.join("data");
    for table in ["q/../../escape_probe", "a\0b", "..", "", "nope"] {
        p += 1;
        let (st, _, body) = r.call(protocol::INSERT, p, 0, &insert_into(table));
        assert_eq!(st, 422, "insert into {table:?}: {}", text(&body));
        assert!(!text(&body).contains(&*data.to_string_lossy()), "no server path: {}", text(&body));
    }
    p += 1;
    let (st, _, body) = r.call(protocol::QUERY, p, 0, b"SELECT count() FROM nope");
    assert_eq!(st, 422);
    assert!(!text(&body).contains(&*d.0.to_string_lossy()), "no server path: {}", text(&body));
    // Nothing was made outside (or inside) the data directory.
    let made: Vec<_> = std::fs::read_dir(&d.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(made, ["data"], "only the data directory under the scratch directory");
    let tables: Vec<_> = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(tables, ["wide"]);
    alive(s.addr);
    s.stop().expect("the server stops cleanly");
}

/// A method that takes no target answers 400 for having one, whatever the
/// target is: a query's answer, a ping's (empty) one, an unknown promise.
#[test]
fn a_target_where_none_is_taken_is_always_400() {
    let (_d, s) = start("target", Config::default());
    let mut r = Raw::connect(s.addr);
    assert_eq!(r.call(protocol::QUERY, 1, 0, b"SELECT count() FROM wide").0, 200);
    assert_eq!(r.call(protocol::PING, 2, 0, b"").0, 200);
    let batch = insert_into("wide");
    for (promise, target) in [(3, 1), (4, 2), (5, 99)] {
        for method in [protocol::INSERT, protocol::PING, protocol::STATS] {
            let promise = promise * 10 + method;
            let (st, _, body) = r.call(method, promise, target, &batch);
            assert_eq!(st, 400, "method {method} on target {target}: {}", text(&body));
            assert!(text(&body).contains("takes no target"));
        }
    }
    s.stop().expect("the server stops cleanly");
}

/// A flight of large queries never finished: answers past the connection's
/// budget are refused (429), past the server's (503); the bytes held never
/// pass the budget, and finishing gives them all back.
#[test]
fn held_answers_stay_within_the_budgets() {
    // Answers are 740 KB: two fit a connection's budget (twice each), and
    // the server's budget fills during the second connection's flight.
    let (conn_budget, server_budget) = (4 << 20, 4 << 20);
    let cfg = Config { conn_answer_budget: conn_budget, answer_budget: server_budget, ..Config::default() };
    let (_d, s) = start("budget", cfg);
    let mut conns: Vec<Raw> = (0..3).map(|_| Raw::connect(s.addr)).collect();
    let mut got: Vec<Vec<u32>> = Vec::new();
    let mut answer = 0;
    for c in conns.iter_mut() {
        let flight: Vec<u8> = (1..=20).flat_map(|p| frame(protocol::QUERY, p, 0, b"SELECT * FROM wide")).collect();
        c.send(&flight);
        let mut statuses = Vec::new();
        for _ in 1..=20 {
            let (st, _, body) = c.recv().unwrap();
            match st {
                200 => answer = body.len(),
                _ => assert!(text(&body).contains("budget"), "{st}: {}", text(&body)),
            }
            statuses.push(st);
        }
        got.push(statuses);
    }
    assert!(answer > 500_000, "a large answer: {answer} B");
    // The rule, replayed: an answer reserves twice its bytes (stored and
    // queued) against the connection's room, then the server's budget; the
    // queued half comes back once written, before the next connection's flight.
    let mut used = 0;
    let want: Vec<Vec<u32>> = (0..3)
        .map(|_| {
            let mut room = conn_budget;
            let statuses = (0..20)
                .map(|_| match 2 * answer {
                    need if need > room => 429,
                    need if used + need > server_budget => 503,
                    need => {
                        (room, used) = (room - need, used + need);
                        200
                    }
                })
                .collect::<Vec<_>>();
            used -= answer * statuses.iter().filter(|&&s| s == 200).count();
            statuses
        })
        .collect();
    assert_eq!(got, want, "statuses per connection (answers of {answer} B)");
    assert!(
        want.concat().contains(&429) && want.concat().contains(&503),
        "both budgets were reached: {want:?}, {answer} B"
    );
    let ok = want.concat().iter().filter(|&&s| s == 200).count();
    let held = stats(&mut conns[0], 100)["answer_bytes"].as_u64().unwrap() as usize;
    // The large answers stored, and the refusals' short messages (stored too).
    assert!(held >= ok * answer && held < ok * answer + 60 * 400, "{held} B held for {ok} answers of {answer} B");
    assert!(held <= server_budget, "within the server's budget: {held}");
    // Finishing everything gives every byte back.
    for c in conns.iter_mut() {
        c.send(&frame(zap::rpc::FINISH, 0, 1, &20u32.to_le_bytes()));
        // Answered after the finish before it: the finish has been done.
        assert_eq!(c.call(protocol::PING, 200, 0, b"").0, 200);
    }
    let free = stats(&mut conns[1], 101)["answer_bytes"].as_u64().unwrap();
    assert!(free < 2048, "only stats answers are held after finish: {free} B");
    // A new connection is served its large answer again.
    let mut r = Raw::connect(s.addr);
    assert_eq!(r.call(protocol::QUERY, 1, 0, b"SELECT * FROM wide").0, 200);
    s.stop().expect("the server stops cleanly");
}

/// A peer that sends large queries and never reads is closed after the
/// write timeout, its answers freed; everyone else is served meanwhile.
#[test]
fn a_peer_that_does_not_read_is_closed_and_its_answers_freed() {
    let cfg = Config { write_timeout: Duration::from_millis(500), ..Config::default() };
    let (_d, s) = start("unread", cfg);
    let mut hog = Raw::connect(s.addr);
    let flight: Vec<u8> = (1..=50).flat_map(|p| frame(protocol::QUERY, p, 0, b"SELECT * FROM wide")).collect();
    hog.send(&flight);
    let mut r = Raw::connect(s.addr);
    let t0 = Instant::now();
    loop {
        let st = stats(&mut r, 1 + t0.elapsed().as_millis() as u32);
        if st["closed_unread"].as_u64() == Some(1) {
            // What is left is this connection's stats answers, not one of the hog's 740 KB.
            assert!(st["answer_bytes"].as_u64().unwrap() < 100_000, "freed: {st}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "not closed: {st}");
        assert_eq!(r.call(protocol::PING, 1_000_000 + t0.elapsed().as_micros() as u32, 0, b"").0, 200);
        std::thread::sleep(Duration::from_millis(50));
    }
    // The hog reads what was sent before the close, then the end.
    let mut seen = 0;
    while hog.recv().is_some() {
        seen += 1;
    }
    assert!(seen < 50, "the server stopped answering the hog ({seen} of 50 answers)");
    alive(s.addr);
    s.stop().expect("the server stops cleanly");
}
