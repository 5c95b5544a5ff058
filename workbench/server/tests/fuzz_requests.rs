//! The request path under fuzzing, for a bounded time (`FUZZ_SECONDS`,
//! default 20): the committed seeds (`fuzz/seeds/`), the built-in ones,
//! then structure-aware mutations of them from a fixed seed
//! (`FUZZ_SEED`, default 1). Every input gets known statuses or a close,
//! never a 500, a hang or a crash; the server answers a ping every 100
//! inputs and at the end holds no answer bytes once every connection closed.
//! A failing input is written to `target/fuzz-failures/` for `fuzz/seeds/`.

use server::fuzzing::{self, Rng, Target};
use std::time::{Duration, Instant};

fn env<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn the_request_path_survives_mutated_flights() {
    let secs: u64 = env("FUZZ_SECONDS", 20);
    let mut rng = Rng(env("FUZZ_SEED", 1u64).max(1));
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut t = Target::start(&scratch.join("fuzz-requests")).expect("the fuzzing server starts");
    let seeds_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let mut corpus: Vec<(String, Vec<u8>)> = fuzzing::seeds().into_iter().map(|(n, b)| (n.to_string(), b)).collect();
    for e in std::fs::read_dir(&seeds_dir).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default() {
        corpus.push((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()));
    }
    let fail = |name: &str, input: &[u8], why: fuzzing::Failure| -> ! {
        let dir = scratch.join("fuzz-failures");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.bin"));
        std::fs::write(&path, input).unwrap();
        panic!("input {name} ({} bytes, saved to {}): {why:?}", input.len(), path.display());
    };
    for (name, input) in &corpus {
        if let Err(why) = t.exercise(input) {
            fail(name, input, why);
        }
    }
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_secs(secs) {
        let base = &corpus[rng.below(corpus.len())].1;
        let mut input = fuzzing::mutate(&mut rng, base);
        for _ in 0..rng.below(3) {
            input = fuzzing::mutate(&mut rng, &input);
        }
        n += 1;
        if let Err(why) = t.exercise(&input) {
            fail(&format!("mutant-{n}"), &input, why);
        }
        if n.is_multiple_of(100) {
            if let Err(why) = t.alive() {
                fail(&format!("mutant-{n}-after"), &input, why);
            }
        }
    }
    t.alive().expect("alive at the end");
    // Every connection closed: nothing held but this stats call's answer.
    std::thread::sleep(Duration::from_millis(100));
    let held = t.held().expect("stats");
    assert!(held < 4096, "answer bytes still held with every connection closed: {held}");
    eprintln!(
        "fuzz: {} inputs ({} mutants) in {:.1} s; statuses {:?}",
        t.inputs,
        n,
        t0.elapsed().as_secs_f64(),
        t.statuses
    );
    assert!(t.statuses.len() >= 4, "the inputs reached several outcomes: {:?}", t.statuses);
}

/// Writes the built-in seeds to `fuzz/seeds/` (the libFuzzer target's
/// starting corpus): `cargo test --release -p server --test fuzz_requests -- --ignored`.
#[test]
#[ignore]
fn write_the_seed_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in fuzzing::seeds() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
