//! Crash safety: a child process inserting numbered batches (with merges
//! running in the background) is killed with SIGKILL at several points.
//! After each restart every batch whose insert had returned is present
//! exactly once, no batch is present in part, and no temporary part is
//! visible; the table keeps accepting inserts.

use datastore::{Db, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BATCH: u64 = 2000;

/// Runs the insert loop until `n` more batches are confirmed, then kills it.
/// Returns the highest confirmed batch number.
fn run_and_kill(dir: &std::path::Path, n: usize) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_datastore"))
        .args(["insert-loop", "--batch", &BATCH.to_string(), "--data"])
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn datastore");
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut last = None;
    for line in out.lines().take(n) {
        let line = line.unwrap();
        last = Some(line.strip_prefix("inserted ").unwrap().parse::<u64>().unwrap());
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    last.expect("the child confirmed no insert")
}

fn check(dir: &std::path::Path, confirmed: u64) -> u64 {
    let db = Db::open(dir).unwrap();
    let r = db.query("SELECT count(), uniqExact(id), max(id) FROM t").unwrap().rows;
    let (count, uniq) = (r[0][0].clone(), r[0][1].clone());
    assert_eq!(count, uniq, "an id is present twice");
    let Value::U(count) = count else { panic!("{count:?}") };
    // Every confirmed batch, maybe one more whose confirmation the kill cut off;
    // never part of a batch.
    assert!(count >= (confirmed + 1) * BATCH, "lost rows: {count} < {}", (confirmed + 1) * BATCH);
    assert!(count <= (confirmed + 2) * BATCH, "rows from nowhere: {count}");
    assert_eq!(count % BATCH, 0, "a batch is present in part");
    let per_batch = db.query(&format!("SELECT count() FROM t WHERE id < {}", (confirmed + 1) * BATCH)).unwrap().rows;
    assert_eq!(per_batch[0][0], Value::U((confirmed + 1) * BATCH));
    let leftovers: Vec<String> = std::fs::read_dir(dir.join("t"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tmp_"))
        .collect();
    assert!(leftovers.is_empty(), "temporary parts visible after open: {leftovers:?}");
    count / BATCH
}

#[test]
fn sigkill_during_inserts_and_merges_loses_nothing_confirmed() {
    let dir = std::env::temp_dir().join(format!("datastore-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut batches = 0;
    // Different kill points: early, mid-merge-heavy, after many parts.
    for n in [3, 17, 40, 9] {
        let confirmed = run_and_kill(&dir, n);
        assert!(confirmed + 1 >= batches + n as u64, "the loop resumed at the wrong batch");
        batches = check(&dir, confirmed);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
