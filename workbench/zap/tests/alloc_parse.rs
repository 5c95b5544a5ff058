//! Allocation gate: parsing and every accessor, on valid and corrupted input
//! alike, allocate nothing (the seed corpus and every byte flip of it).

mod one_test;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn reading_any_bytes_allocates_nothing() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let mut inputs = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        for i in 0..data.len() {
            let mut d = data.clone();
            d[i] ^= 0x80;
            inputs.push(d);
        }
        inputs.push(data);
    }
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get();
    let mut fields = 0;
    for d in &inputs {
        fields += zap::fuzzing::read_all(d);
    }
    let after = dhat::HeapStats::get();
    assert!(fields > 0 && inputs.len() > 1000);
    dhat::assert_eq!(after.total_blocks - before.total_blocks, 0);
}

// NOTE: no libtest harness (Cargo.toml: `harness = false`): dhat counts every
// thread of the process, and the harness's main thread, waiting on the test
// thread, sometimes allocates mid-test (4 blocks once, on a loaded machine).
fn main() {
    one_test::run("reading_any_bytes_allocates_nothing", reading_any_bytes_allocates_nothing);
}
