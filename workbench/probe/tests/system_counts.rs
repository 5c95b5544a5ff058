//! The system build reports RSS and nothing it cannot know.
#![cfg(not(any(feature = "dhat", feature = "jemalloc", feature = "jemalloc-plain")))]

#[test]
fn system_variant_reports_rss_only() {
    let probe = probe::Probe::start(None);
    assert_eq!(probe.variant(), probe::Variant::System);
    let s = probe.snapshot();
    assert_eq!(s.counters, probe::Counters::default());
    assert!(s.live_bytes.is_none() && s.jemalloc.is_none());
    assert!(s.rss_bytes.unwrap() > 0);
}
