//! Crash consistency at every step of an insert, a merge and an open
//! (`datastore::storage::failpoint`): a child process (this test binary
//! again) writes batches from two threads while a third merges, and
//! aborts at the point named — no destructor, no flush, as SIGKILL. The
//! parent then reopens the table and must find every batch the child saw
//! acknowledged exactly once, every batch whole or absent, and no id twice.
//! Then a merge that would span an insert in flight, and a full disk.

use datastore::storage::failpoint::{self, Action, Gate, Point};
use datastore::{Batch, ColumnData, Db, Value};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

const CREATE: &str = "CREATE TABLE d (id UInt64, v UInt32) ORDER BY id";
/// Rows a batch: a merge of four batches passes a granule, so the
/// mid-merge point is reached.
const BATCH: u64 = 2_500;
const BATCHES_PER_WRITER: u64 = 24;
/// What `std::process::abort` ends a process with (Linux).
const SIGABRT: i32 = 6;

fn batch(first: u64) -> Batch {
    let ids: Vec<u64> = (first..first + BATCH).rev().collect();
    let v = ids.iter().map(|i| i % 1000).collect();
    Batch { columns: vec![ColumnData::U64(ids), ColumnData::U64(v)] }
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("datastore-crash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The child's workload, run when `CRASH_CHILD_DIR` is set (by
/// [`kill_at`]); otherwise this test has nothing to do.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("CRASH_CHILD_DIR") else { return };
    let dir = PathBuf::from(dir);
    let point = Point::from_name(&std::env::var("CRASH_CHILD_POINT").unwrap()).expect("a point's name");
    let skip: u64 = std::env::var("CRASH_CHILD_SKIP").unwrap().parse().unwrap();
    let first: u64 = std::env::var("CRASH_CHILD_FIRST_ID").unwrap().parse().unwrap();
    let data = dir.join("data");
    failpoint::arm(point, &data.join("d"), skip, Action::Abort);
    let db = Db::open(&data).unwrap();
    if db.table_names().unwrap().is_empty() {
        db.execute(CREATE).unwrap();
    }
    let t = db.table("d").unwrap();
    let acks = Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join("acked")).unwrap(),
    ));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, acks) = (t.clone(), acks.clone());
            s.spawn(move || {
                for k in 0..BATCHES_PER_WRITER {
                    let id = first + (w * BATCHES_PER_WRITER + k) * BATCH;
                    t.insert(&batch(id)).unwrap();
                    // One write a line, after the insert returned: what a client saw answered.
                    acks.lock().unwrap().write_all(format!("{id}\n").as_bytes()).unwrap();
                }
            });
        }
        let (t, done2) = (t.clone(), done.clone());
        s.spawn(move || {
            while !done2.load(std::sync::atomic::Ordering::Relaxed) {
                if t.merge_once(2).unwrap().is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        });
        // The writers end; then every merge left to do.
        while Arc::strong_count(&acks) > 1 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    t.optimize().unwrap();
}

/// Runs the child until it aborts at `point` (after `skip` hits).
fn kill_at(dir: &Path, point: Point, skip: u64, first_id: u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads", "1"])
        .env("CRASH_CHILD_DIR", dir)
        .env("CRASH_CHILD_POINT", point.name())
        .env("CRASH_CHILD_SKIP", skip.to_string())
        .env("CRASH_CHILD_FIRST_ID", first_id.to_string())
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(SIGABRT),
        "the child was to abort at {} (skip {skip}), it ended {:?}:\n{}",
        point.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reopens the table and checks it against the acknowledgements: every
/// acknowledged batch once, every batch whole, no id twice. The ids seen.
fn check(dir: &Path, what: &str) -> usize {
    let acked: Vec<u64> =
        std::fs::read_to_string(dir.join("acked")).unwrap_or_default().lines().map(|l| l.parse().unwrap()).collect();
    let db = Db::open(&dir.join("data")).unwrap();
    let rows = db.query("SELECT id FROM d").unwrap().rows;
    let mut per_batch: HashMap<u64, u64> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for r in &rows {
        let Value::U(id) = r[0] else { panic!("{what}: id {:?}", r[0]) };
        assert!(seen.insert(id), "{what}: id {id} twice after the reopen");
        *per_batch.entry(id - id % BATCH).or_default() += 1;
    }
    for (first, n) in &per_batch {
        assert_eq!(*n, BATCH, "{what}: the batch from {first} is present in part ({n} rows)");
    }
    for id in &acked {
        assert!(per_batch.contains_key(id), "{what}: the acknowledged batch from {id} is lost ({} acked)", acked.len());
    }
    let leftovers: Vec<String> = std::fs::read_dir(dir.join("data/d"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tmp_"))
        .collect();
    assert!(leftovers.is_empty(), "{what}: the open left {leftovers:?}");
    seen.len()
}

#[test]
fn a_kill_at_any_step_loses_no_acknowledged_batch() {
    // (point, hits let pass): past the first few inserts and merges, so
    // that there are parts and merge results on disk when it falls.
    let plan: Vec<(Point, u64)> = Point::ALL
        .into_iter()
        .filter(|p| *p != Point::OpenMidRemove)
        .map(|p| match p {
            Point::InsertBlockTaken | Point::InsertPartWritten | Point::InsertRenamed | Point::InsertVisible => (p, 7),
            Point::WriteBlock => (p, 40),
            Point::MergeMidway => (p, 0),
            _ => (p, 2),
        })
        .collect();
    for (point, skip) in plan {
        let dir = scratch(point.name());
        // Twice on one directory: the second run starts from the first's recovery.
        for round in 0..2u64 {
            kill_at(&dir, point, skip, round * 1_000_000);
            check(&dir, &format!("{} round {round}", point.name()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    // A kill in the middle of an open's clean-up: a merge's inputs left
    // on disk beside its result, then an open killed after one removal.
    let dir = scratch("open");
    kill_at(&dir, Point::MergeRenamed, 2, 0);
    kill_at(&dir, Point::OpenMidRemove, 0, 1_000_000);
    let ids = check(&dir, "open-mid-remove");
    assert!(ids > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The race the issue found: an insert takes block 3 and is slow to write
/// its part; a merge of the visible parts 1, 2, 4, 5 would cover block 3,
/// and the next open would delete the insert's part as that merge's input.
#[test]
fn a_merge_never_spans_an_insert_in_flight() {
    let dir = scratch("in-flight");
    let data = dir.join("data");
    let db = Db::open(&data).unwrap();
    db.execute(CREATE).unwrap();
    let t = db.table("d").unwrap();
    t.insert(&batch(0)).unwrap();
    t.insert(&batch(BATCH)).unwrap();
    let gate = Gate::default();
    failpoint::arm(Point::InsertBlockTaken, &data.join("d"), 0, Action::Hold(gate.clone()));
    let slow = {
        let t = t.clone();
        std::thread::spawn(move || t.insert(&batch(2 * BATCH)).unwrap())
    };
    gate.reached();
    failpoint::disarm(&data.join("d"));
    t.insert(&batch(3 * BATCH)).unwrap();
    t.insert(&batch(4 * BATCH)).unwrap();
    while t.merge_once(2).unwrap().is_some() {}
    for p in t.snapshot().iter() {
        assert!(
            !(p.meta.min_block <= 3 && 3 <= p.meta.max_block),
            "{} spans block 3, in flight when it was merged",
            p.meta.name
        );
    }
    gate.open();
    slow.join().unwrap();
    t.optimize().unwrap();
    drop((t, db));
    std::fs::write(dir.join("acked"), (0..5).map(|b| format!("{}\n", b * BATCH)).collect::<String>()).unwrap();
    assert_eq!(check(&dir, "in flight"), 5 * BATCH as usize);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An old merge result covering a part it never read (as the race left
/// one): the open keeps that part, since no source of the result holds it.
#[test]
fn an_open_keeps_a_part_no_merge_read() {
    let dir = scratch("unread");
    let data = dir.join("data");
    {
        let db = Db::open(&data).unwrap();
        db.execute(CREATE).unwrap();
        let t = db.table("d").unwrap();
        for b in 0..3 {
            t.insert(&batch(b * BATCH)).unwrap();
        }
        // Merge blocks 1 and 3 by hand, as the race did: block 2 stays out.
        let snap = t.snapshot();
        let (a, c) = (snap[0].clone(), snap[2].clone());
        let tmp = scratch("unread-merge");
        let db2 = Db::open(&tmp).unwrap();
        db2.execute(CREATE).unwrap();
        let t2 = db2.table("d").unwrap();
        t2.insert(&batch(0)).unwrap();
        t2.insert(&batch(2 * BATCH)).unwrap();
        t2.optimize().unwrap();
        let merged = t2.snapshot()[0].clone();
        assert_eq!(merged.meta.sources.len(), 2);
        // Name it as the merge of blocks 1..3 of `d`, with its sources renamed to match.
        let mut meta = merged.meta.clone();
        meta.sources = vec![a.meta.name.clone(), c.meta.name.clone()];
        meta.name = "all_1_3_1".into();
        meta.min_block = 1;
        meta.max_block = 3;
        let dest = data.join("d").join("all_1_3_1");
        std::fs::create_dir_all(&dest).unwrap();
        for e in std::fs::read_dir(&merged.dir).unwrap().flatten() {
            std::fs::copy(e.path(), dest.join(e.file_name())).unwrap();
        }
        std::fs::write(dest.join("part.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
        std::fs::remove_dir_all(&a.dir).unwrap();
        std::fs::remove_dir_all(&c.dir).unwrap();
        let _ = std::fs::remove_dir_all(&tmp);
    }
    std::fs::write(dir.join("acked"), (0..3).map(|b| format!("{}\n", b * BATCH)).collect::<String>()).unwrap();
    assert_eq!(check(&dir, "unread part"), 3 * BATCH as usize);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full disk: the insert fails naming the cause and the file, no part
/// (whole or partial) is visible or left behind, the batches before it
/// are kept, and the table takes inserts again once there is room.
#[test]
fn a_full_disk_fails_the_insert_and_loses_nothing() {
    let dir = scratch("full");
    let data = dir.join("data");
    let table_dir = data.join("d");
    let db = Db::open(&data).unwrap();
    db.execute(CREATE).unwrap();
    let t = db.table("d").unwrap();
    for b in 0..3 {
        t.insert(&batch(b * BATCH)).unwrap();
    }
    // The second block write of the next part fails, as ENOSPC would.
    failpoint::arm(Point::WriteBlock, &table_dir, 1, Action::Fail(std::io::ErrorKind::StorageFull));
    let err = t.insert(&batch(3 * BATCH)).unwrap_err();
    match &err {
        datastore::Error::Io { path, source } => {
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{err}");
            assert!(path.starts_with(&table_dir), "the error names the file: {err}");
        }
        e => panic!("a full disk is an I/O error, not {e}"),
    }
    assert_eq!(t.snapshot().len(), 3, "no part of the failed insert is visible");
    // A merge on the full disk fails too, and leaves the parts as they were.
    assert!(t.merge_once(2).is_err());
    assert_eq!(t.snapshot().len(), 3);
    let names: Vec<String> = std::fs::read_dir(&table_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("tmp_")), "a failed write leaves nothing behind: {names:?}");
    failpoint::disarm(&table_dir);
    t.insert(&batch(4 * BATCH)).unwrap();
    drop((t, db));
    std::fs::write(dir.join("acked"), [0, 1, 2, 4].map(|b| format!("{}\n", b * BATCH)).concat()).unwrap();
    assert_eq!(check(&dir, "full disk"), 4 * BATCH as usize);
    let _ = std::fs::remove_dir_all(&dir);
}
