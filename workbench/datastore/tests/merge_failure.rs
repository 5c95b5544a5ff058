//! A merge that fails (here: an input part's column file is damaged) leaves
//! the table as it was: the same parts, in memory and on disk, and after a
//! reopen no trace of the half-written result.

use datastore::Db;
use server::workload;

#[test]
fn failed_merge_keeps_the_old_parts() {
    let dir = std::env::temp_dir().join(format!("datastore-merge-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir).unwrap();
    db.execute(workload::CREATE).unwrap();
    let t = db.table("t").unwrap();
    for b in 0..3u64 {
        t.insert(&workload::batch(5, b * 20_000, (b + 1) * 20_000)).unwrap();
    }
    let before: Vec<String> = t.snapshot().iter().map(|p| p.meta.name.clone()).collect();
    // Damage the last granule's block of one column in the last part.
    let victim = dir.join("t").join(&before[2]).join("value.bin");
    let len = std::fs::metadata(&victim).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&victim).unwrap();
    f.set_len(len - 10).unwrap();
    drop(f);

    let err = t.merge_once(2).unwrap_err().to_string();
    assert!(err.contains("value.bin"), "the error names the damaged file: {err}");
    let after: Vec<String> = t.snapshot().iter().map(|p| p.meta.name.clone()).collect();
    assert_eq!(before, after);
    for name in &before {
        assert!(dir.join("t").join(name).join("part.json").exists(), "{name} was touched");
    }
    drop(db);
    let db = Db::open(&dir).unwrap();
    let reopened: Vec<String> = db.table("t").unwrap().snapshot().iter().map(|p| p.meta.name.clone()).collect();
    assert_eq!(before, reopened);
    let tmp = std::fs::read_dir(dir.join("t"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("tmp_"))
        .count();
    assert_eq!(tmp, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
