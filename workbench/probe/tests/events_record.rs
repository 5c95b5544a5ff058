//! The events build records a known pattern by site and operation exactly,
//! and stores a steady loop as one run.
#![cfg(feature = "events")]

use std::hint::black_box;

// Boxed: each kept value must be an allocation of its own.
#[allow(clippy::vec_box)]
#[inline(never)]
fn keeps(v: &mut Vec<Box<[u8; 100]>>) {
    v.push(black_box(Box::new([0u8; 100])));
}

#[inline(never)]
fn churns() {
    black_box(vec![0u8; 16]);
}

#[test]
fn a_known_pattern_by_site_and_operation() {
    let path = std::env::temp_dir().join(format!("probe-events-{}.events.json", std::process::id()));
    let mut kept = Vec::with_capacity(64);
    {
        let probe = probe::Probe::start(Some(&path));
        assert_eq!(probe.variant(), probe::Variant::Events);
        let before = probe.counters();
        for i in 0..50 {
            probe::operation(i);
            churns();
            if i >= 20 {
                keeps(&mut kept);
            }
        }
        probe::operations_done();
        let d = probe.counters().since(&before);
        // Each operation churns 16 bytes; 30 of them keep 100 more.
        assert_eq!(d.allocs, Some(50 + 30));
        assert_eq!(d.bytes_allocated, Some(50 * 16 + 30 * 100));
        assert_eq!(d.bytes_freed, Some(50 * 16));
    }
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let f: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Operations 0–19 churn only, 20–49 also keep: two runs of identical operations.
    let runs: Vec<[u64; 3]> = serde_json::from_value(f["runs"].clone()).unwrap();
    assert_eq!(runs.iter().map(|r| (r[0], r[1])).collect::<Vec<_>>(), [(0, 20), (20, 30)], "{runs:?}");
    let patterns: Vec<Vec<[u64; 5]>> = serde_json::from_value(f["patterns"].clone()).unwrap();
    let steady = &patterns[runs[1][2] as usize];
    let (allocs, bytes, frees, freed) =
        steady.iter().fold((0, 0, 0, 0), |a, d| (a.0 + d[1], a.1 + d[2], a.2 + d[3], a.3 + d[4]));
    assert_eq!((allocs, bytes, frees, freed), (2, 116, 1, 16));
    // The churned buffer is freed within its operation: the heap rose 16
    // bytes above the operation's start and back.
    let highs: Vec<u64> = serde_json::from_value(f["highs"].clone()).unwrap();
    assert_eq!(highs[runs[0][2] as usize], 16, "{highs:?}");
    assert!(highs[runs[1][2] as usize] >= 100, "{highs:?}");
    assert_eq!(f["eventsFileVersion"], 2);
    // The frames name the functions that allocated.
    let ftbl = f["ftbl"].as_array().unwrap();
    assert!(ftbl.iter().any(|s| s.as_str().unwrap().contains("events_record::keeps")), "{ftbl:?}");
    drop(kept);
}
