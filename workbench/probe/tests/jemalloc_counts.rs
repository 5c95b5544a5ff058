//! The jemalloc build counts this thread's bytes (usable sizes) and reads stats.
#![cfg(feature = "jemalloc")]

use std::hint::black_box;

#[test]
fn known_pattern_gives_exact_usable_bytes() {
    let probe = probe::Probe::start(None);
    assert_eq!(probe.variant(), probe::Variant::Jemalloc);
    let before = probe.counters();
    // 4096 and 64 are jemalloc size classes: usable size equals the request.
    // black_box: in the release profile LLVM may otherwise elide unused allocations.
    let a: Vec<u8> = black_box(Vec::with_capacity(4096));
    let b: Vec<u8> = black_box(Vec::with_capacity(64));
    let mid = probe.counters();
    drop((a, b));
    let after = probe.counters();
    assert_eq!(mid.since(&before).bytes_allocated, Some(4096 + 64));
    assert_eq!(after.since(&mid).bytes_freed, Some(4096 + 64));
    assert_eq!(mid.allocs, None, "jemalloc build does not count calls");

    // 100 bytes land in the 112-byte class: the usable size is what is counted.
    let before = probe.counters();
    let c: Vec<u8> = black_box(Vec::with_capacity(100));
    let d = probe.counters().since(&before);
    drop(c);
    assert_eq!(d.bytes_allocated, Some(112));

    let s = probe.snapshot();
    let je = s.jemalloc.expect("stats feature on");
    assert!(je.allocated > 0 && je.resident >= je.active && je.mapped > 0);
    assert_eq!(s.live_bytes, Some(je.allocated));
}
