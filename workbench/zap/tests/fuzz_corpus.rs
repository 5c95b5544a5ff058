//! Runs the fuzz target's body over the committed seed corpus (and every
//! truncation and single-byte flip of each seed), so CI exercises it without
//! a fuzzer. A crash found by `cargo fuzz` belongs in `fuzz/seeds/` afterwards.

use std::path::Path;

#[test]
fn seed_corpus_runs_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        seeds += 1;
        zap::fuzzing::exercise(&data);
        for cut in 0..data.len() {
            zap::fuzzing::exercise(&data[..cut]);
        }
        let mut flipped = data.clone();
        for i in 0..data.len() {
            for x in [0x01, 0x80, 0xff] {
                flipped[i] ^= x;
                zap::fuzzing::exercise(&flipped);
                flipped[i] ^= x;
            }
        }
    }
    assert!(seeds >= 10, "expected the committed seeds in {}, found {seeds}", dir.display());
}

#[test]
fn golden_seed_reads_fields() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let vote = std::fs::read(dir.join("vote-payload")).unwrap();
    let v = zap::read::<zap::Vote>(&vote).unwrap();
    assert_eq!((v.round(), v.vote_type(), v.payload().unwrap().len()), (42, 1, 64));
    assert!(zap::fuzzing::exercise(&vote) > 64);
}
