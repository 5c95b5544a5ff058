//! The dhat build's cost per call: concurrent calls on two threads are each
//! charged exactly what they allocated; a block one call allocated and
//! another thread freed under another call is charged to the first; and the
//! calls with call 0 (outside any call) sum to dhat's totals exactly.
//! (Its own file: dhat allows one profiler per process.)
#![cfg(feature = "dhat")]

use probe::calls::{self, CallCost};
use std::hint::black_box;
use std::sync::{mpsc, Barrier};

fn of(costs: &[CallCost], call: u64) -> CallCost {
    costs.iter().copied().find(|c| c.call == call).unwrap_or_else(|| panic!("no call {call} in {costs:?}"))
}

#[test]
fn concurrent_calls_are_charged_exactly_and_frees_go_to_the_allocating_call() {
    let probe = probe::Probe::start(None);
    let t0 = probe.counters();
    calls::record(true);
    // Barriers, not a blocking receive: std's channel caches a waiter in a
    // thread-local the first time a thread blocks, an allocation of its own.
    let (start, sent) = (Barrier::new(2), Barrier::new(2));
    let (send, recv) = mpsc::sync_channel::<Vec<u8>>(1);
    std::thread::scope(|s| {
        let (start, sent) = (&start, &sent);
        s.spawn(move || {
            let _call = calls::tag(1);
            start.wait();
            let kept: Vec<Vec<u8>> = (0..3).map(|_| black_box(Vec::with_capacity(100))).collect();
            // Handed to the other thread, which frees it working for call 2.
            send.send(black_box(Vec::with_capacity(64))).unwrap();
            sent.wait();
            calls::describe(1, 7, 250);
            calls::finish(1);
            drop(kept);
        });
        s.spawn(move || {
            let _call = calls::tag(2);
            start.wait();
            for _ in 0..5 {
                drop(black_box(Vec::<u8>::with_capacity(10)));
            }
            sent.wait();
            let theirs = recv.try_recv().unwrap();
            drop(theirs);
            calls::describe(2, 8, 0);
            calls::finish(2);
        });
    });
    let t1 = probe.counters();
    let costs = calls::drain();

    let one = of(&costs, 1);
    // Three of 100 B and the 64 B handed over, plus the vector of three.
    assert_eq!((one.counts.allocs, one.counts.bytes), (5, 3 * 100 + 64 + 3 * 24), "{one:?}");
    assert_eq!((one.counts.frees, one.counts.bytes_freed), (5, 3 * 100 + 64 + 3 * 24), "{one:?}");
    assert_eq!((one.counts.live_bytes, one.kind, one.counts.estimate_bytes), (0, 7, 250));
    assert_eq!(one.counts.peak_bytes, 3 * 100 + 64 + 3 * 24);
    assert!(one.counts.held_bytes >= 3 * 100, "held at finish: {one:?}");
    let two = of(&costs, 2);
    // Its own five blocks of 10 B, one at a time; the freed 64 B is not its.
    assert_eq!(
        (two.counts.allocs, two.counts.bytes, two.counts.frees, two.counts.bytes_freed),
        (5, 50, 5, 50),
        "{two:?}"
    );
    assert_eq!((two.counts.peak_bytes, two.counts.held_bytes, two.kind), (10, 0, 8));

    // Everything dhat counted is some call's, or call 0's (thread start-up).
    let total = t1.since(&t0);
    assert_eq!(costs.iter().map(|c| c.counts.allocs).sum::<u64>(), total.allocs.unwrap(), "{costs:?}");
    assert_eq!(costs.iter().map(|c| c.counts.bytes).sum::<u64>(), total.bytes_allocated.unwrap(), "{costs:?}");
    assert!(costs.iter().any(|c| c.call == 0 && c.counts.allocs > 0), "spawning threads allocates outside a call");

    // Recording off, nothing more is charged.
    calls::record(false);
    let _call = calls::tag(1);
    black_box(Vec::<u8>::with_capacity(1000));
    assert_eq!(of(&calls::drain(), 1).counts.allocs, 5);
}
