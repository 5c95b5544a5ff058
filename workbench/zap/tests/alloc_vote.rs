//! Allocation gate: building, parsing and reading every field of 1,000 Votes
//! after warm-up performs exactly 0 heap allocations. (dhat testing mode:
//! one test per file.)

mod one_test;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

use zap::{Builder, Vote};

fn build_and_read(b: &mut Builder, i: u64, payload: &[u8]) -> u64 {
    let mut v = b.root::<Vote>();
    v.round(i);
    v.block_hash(&[i as u8; 32]);
    v.voter_id(&[7; 32]);
    v.signature(&[9; 64]);
    v.timestamp(1_700_000_000 + i);
    v.vote_type((i % 3) as u8);
    v.payload(payload);
    let bytes = v.finish().unwrap();
    let r = zap::read::<Vote>(bytes).unwrap();
    assert_eq!(r.round(), i);
    assert_eq!(r.block_hash()[0], i as u8);
    assert_eq!(r.voter_id()[31], 7);
    assert_eq!(r.signature()[63], 9);
    assert_eq!(r.timestamp(), 1_700_000_000 + i);
    assert_eq!(r.vote_type(), (i % 3) as u8);
    assert_eq!(r.payload().unwrap(), payload);
    r.round()
}

fn thousand_votes_allocate_nothing_after_warm_up() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let payload = vec![0xabu8; 1024];
    let mut b = Builder::new();
    build_and_read(&mut b, 0, &payload); // warm-up: the buffer grows once

    let before = dhat::HeapStats::get();
    let mut sum = 0;
    for i in 1..=1000 {
        sum += build_and_read(&mut b, i, &payload);
    }
    let after = dhat::HeapStats::get();
    assert_eq!(sum, 500_500);
    dhat::assert_eq!(after.total_blocks - before.total_blocks, 0);
    dhat::assert_eq!(after.total_bytes - before.total_bytes, 0);

    // The gate can fail: a message copied to a Vec is counted.
    let before = dhat::HeapStats::get();
    let copy = b.finish().unwrap().to_vec();
    let after = dhat::HeapStats::get();
    dhat::assert_eq!(after.total_blocks - before.total_blocks, 1);
    dhat::assert_eq!(after.total_bytes - before.total_bytes, copy.len() as u64);
}

// NOTE: no libtest harness (Cargo.toml: `harness = false`): dhat counts every
// thread of the process, and the harness's main thread, waiting on the test
// thread, sometimes allocates mid-test (4 blocks once, on a loaded machine).
fn main() {
    one_test::run("thousand_votes_allocate_nothing_after_warm_up", thousand_votes_allocate_nothing_after_warm_up);
}
