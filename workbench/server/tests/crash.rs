//! kill -9 of the server during inserts (merges running): every batch the
//! server acknowledged is present after a restart, exactly once; no batch is
//! present in part. And SIGTERM: in-flight work finishes, exit status 0.

mod common;

use common::TempDir;
use datastore::{Db, Value};
use server::client::Client;
use server::workload;
use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

const BATCH: u64 = 2000;

fn spawn(dir: &std::path::Path) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_datastore-server"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
    (child, addr)
}

/// Inserts batches from `from` on until `n` are acknowledged, with the next
/// one in flight, then kills the server. The last acknowledged batch.
fn insert_and_kill(dir: &std::path::Path, from: u64, n: u64) -> u64 {
    let (mut child, addr) = spawn(dir);
    let mut c = Client::connect(addr).unwrap();
    if from == 0 {
        c.execute(workload::CREATE).unwrap();
    }
    let cols: Vec<(String, datastore::ColumnType)> =
        Db::open(dir).unwrap().table("t").unwrap().schema.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
    let mut acked = None;
    for b in from..from + n {
        let p = c.insert("t", &cols, &workload::batch(b, b * BATCH, (b + 1) * BATCH)).unwrap();
        c.wait(p).unwrap();
        c.finish(p).unwrap();
        acked = Some(b);
    }
    // One more in flight as the server dies.
    let b = from + n;
    c.insert("t", &cols, &workload::batch(b, b * BATCH, (b + 1) * BATCH)).unwrap();
    c.flush().unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    acked.unwrap()
}

#[test]
fn sigkill_of_the_server_loses_no_acknowledged_batch() {
    let d = TempDir::new("crash");
    let mut next = 0;
    for n in [3, 11, 6] {
        let acked = insert_and_kill(&d.0, next, n);
        let db = Db::open(&d.0).unwrap();
        let r = db.query("SELECT count(), uniqExact(id) FROM t").unwrap().rows;
        assert_eq!(r[0][0], r[0][1], "an id is present twice");
        let Value::U(count) = r[0][0] else { panic!("{r:?}") };
        assert!(count >= (acked + 1) * BATCH, "lost acknowledged rows: {count} < {}", (acked + 1) * BATCH);
        assert!(count <= (acked + 2) * BATCH, "rows from nowhere: {count}");
        assert_eq!(count % BATCH, 0, "a batch is present in part");
        next = count / BATCH;
    }
}

#[test]
fn sigterm_finishes_in_flight_calls_and_exits_zero() {
    let d = TempDir::new("term");
    let (child, addr) = spawn(&d.0);
    let mut c = Client::connect(addr).unwrap();
    c.execute("CREATE TABLE kv (k UInt64) ORDER BY (k)").unwrap();
    let p = c.ping().unwrap();
    c.flush().unwrap();
    // SAFETY: signals the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(c.wait(p).unwrap().len(), 0, "the call in flight was answered");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit status {}", out.status);
    assert!(Client::connect(addr).is_err(), "still accepting after SIGTERM");
}

/// The fault-soak experiment's kill workload, small: SIGKILLs amid two
/// writers, a reader and background merges; it counts every batch at the
/// end, and must find no acknowledged row lost, none twice, none in part.
#[test]
fn the_kill_soak_loses_no_acknowledged_row() {
    let d = TempDir::new("kill-soak");
    let cell = serde_json::json!({
        "experiment": "fault-soak", "seed": 7, "work_dir": d.0,
        "params": {"rows": 1000, "connections": 1, "flight": 2, "clients": 1, "seconds": 0.2, "sample_ms": 50,
                   "kills": 6, "kill_writers": 2},
    });
    let out = Command::new(env!("CARGO_BIN_EXE_datastore-load"))
        .args(["--cell", &cell.to_string()])
        .env("WORKBENCH_SERVER_BIN", env!("CARGO_BIN_EXE_datastore-server"))
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "the cell failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kills: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["kind"] == "kills")
        .expect("a kills record");
    assert_eq!(kills["kills"], 6, "{kills}");
    assert!(kills["rows_acked"].as_u64().unwrap() > 0, "{kills}");
    assert_eq!(
        (&kills["rows_lost"], &kills["duplicates"], &kills["partial_batches"]),
        (&0.into(), &0.into(), &0.into())
    );
    assert!(kills["rows_present"].as_u64() >= kills["rows_acked"].as_u64(), "{kills}");
}
