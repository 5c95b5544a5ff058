//! The dhat build splits its exact counts by the side a thread is tagged with.
//! (Its own file: dhat allows one profiler per process.)
#![cfg(feature = "dhat")]

use std::hint::black_box;

#[test]
fn sides_split_the_total_by_thread_tag() {
    use probe::Side;
    let probe = probe::Probe::start(None);
    probe::set_side(Side::Client);
    let (t0, s0) = (probe.counters(), probe.sides().unwrap());
    let a: Vec<u8> = black_box(Vec::with_capacity(10));
    let mid = probe.sides().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            probe::set_side(Side::Server);
            black_box(Vec::<u8>::with_capacity(20));
            black_box(Vec::<u8>::with_capacity(30));
        });
    });
    let (t1, s1) = (probe.counters(), probe.sides().unwrap());
    drop(a);
    let c = mid.since(&s0);
    assert_eq!((c.calls(Side::Client), c.bytes(Side::Client)), (1, 10));
    let d = s1.since(&s0);
    assert_eq!((d.calls(Side::Server), d.bytes(Side::Server)), (2, 50));
    // Spawning the thread allocates on both threads; whatever lands there,
    // the three sides account for every allocation dhat saw.
    let total = t1.since(&t0);
    assert_eq!(d.calls.iter().sum::<u64>(), total.allocs.unwrap());
    assert_eq!(d.bytes.iter().sum::<u64>(), total.bytes_allocated.unwrap());
}
