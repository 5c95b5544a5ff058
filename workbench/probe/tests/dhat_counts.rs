//! The dhat build counts a known allocation pattern exactly.
#![cfg(feature = "dhat")]

use std::hint::black_box;

#[test]
fn known_pattern_gives_exact_counts() {
    let probe = probe::Probe::start(None);
    assert_eq!(probe.variant(), probe::Variant::Dhat);
    let before = probe.counters();
    // black_box: in the release profile LLVM may otherwise elide unused allocations.
    let a: Vec<u8> = black_box(Vec::with_capacity(100));
    let b: Box<[u64; 4]> = black_box(Box::new([1, 2, 3, 4]));
    let c = black_box(String::from("twelve bytes"));
    let after = probe.counters();
    let d = after.since(&before);
    assert_eq!(d.allocs, Some(3));
    assert_eq!(d.bytes_allocated, Some(100 + 32 + 12));
    let live = probe.snapshot();
    drop((a, b, c));
    let after_free = probe.snapshot();
    assert_eq!(live.live_bytes.unwrap() - after_free.live_bytes.unwrap(), 144);
    assert!(after_free.peak_live_bytes >= live.live_bytes);
    assert!(after_free.rss_bytes.is_some());
}
