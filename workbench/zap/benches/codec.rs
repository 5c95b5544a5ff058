//! Encode, decode-and-read-every-field, and a memcpy of the same number of
//! bytes (the physical floor), per payload size.
//!
//! Run: `cargo bench -p zap --bench codec`

use divan::{black_box, Bencher};
use zap::{Builder, Vote};

fn main() {
    divan::main();
}

const SIZES: &[usize] = &[0, 64, 1024, 65536];

fn build<'b>(b: &'b mut Builder, payload: &[u8], i: u64) -> &'b [u8] {
    let mut v = b.root::<Vote>();
    v.round(i);
    v.block_hash(&[1; 32]);
    v.voter_id(&[2; 32]);
    v.signature(&[3; 64]);
    v.timestamp(1_735_689_600 + i);
    v.vote_type(1);
    v.payload(payload);
    v.finish().expect("vec builder")
}

#[divan::bench(args = SIZES)]
fn encode(bencher: Bencher, size: usize) {
    let payload = vec![0xab; size];
    let mut b = Builder::new();
    build(&mut b, &payload, 0);
    let bytes = (16 + Vote::SIZE + size) as u64;
    bencher.counter(divan::counter::BytesCount::new(bytes)).bench_local(|| build(&mut b, black_box(&payload), 7).len());
}

#[divan::bench(args = SIZES)]
fn decode_all_fields(bencher: Bencher, size: usize) {
    let payload = vec![0xab; size];
    let mut b = Builder::new();
    let msg = build(&mut b, &payload, 0).to_vec();
    bencher.counter(divan::counter::BytesCount::new(msg.len())).bench_local(|| {
        let r = zap::read::<Vote>(black_box(&msg)).expect("valid");
        let p = r.payload().expect("valid");
        r.round()
            ^ r.timestamp()
            ^ u64::from(r.vote_type())
            ^ u64::from(r.block_hash()[31] ^ r.voter_id()[31] ^ r.signature()[63])
            ^ p.len() as u64
    });
}

/// The floor: copying the encoded message's bytes once.
#[divan::bench(args = SIZES)]
fn memcpy(bencher: Bencher, size: usize) {
    let n = 16 + Vote::SIZE + size;
    let src = vec![0xabu8; n];
    let mut dst = vec![0u8; n];
    bencher.counter(divan::counter::BytesCount::new(n)).bench_local(|| {
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
    });
}
