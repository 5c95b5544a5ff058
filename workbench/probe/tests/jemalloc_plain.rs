//! jemalloc with its statistics compiled out: the allocator is jemalloc, and
//! the probe says so, but reports RSS only, like the system build.
#![cfg(feature = "jemalloc-plain")]

#[test]
fn jemalloc_plain_reports_rss_only() {
    let probe = probe::Probe::start(None);
    assert_eq!(probe.variant(), probe::Variant::JemallocPlain);
    let v: Vec<u8> = std::hint::black_box(vec![1; 1 << 20]);
    let s = probe.snapshot();
    assert_eq!(s.counters, probe::Counters::default(), "no counters without statistics");
    assert!(s.jemalloc.is_none() && s.live_bytes.is_none());
    assert!(s.rss_bytes.is_some_and(|r| r > v.len() as u64 / 2), "RSS is read from /proc");
}
