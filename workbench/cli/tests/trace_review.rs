//! `workbench trace` against a tiny subject that allocates known sizes at
//! known call sites under dhat: the review must find exactly those sites,
//! sizes and counts, and a diff must show exactly one injected allocation.
//!
//! NOTE: built without libtest's harness (Cargo.toml: `harness = false`), as
//! one `main`: the profiler records every thread of the process, and the
//! harness's own thread allocates while tests run.

// The one-test protocol, shared with zap's allocation gates.
#[path = "../../zap/tests/one_test/mod.rs"]
mod one_test;

use analysis::inspect::trace::{self, By, Trace};
use std::hint::black_box;
use std::path::{Path, PathBuf};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[inline(never)]
fn small_site() -> Box<[u8]> {
    black_box(vec![1u8; 48]).into_boxed_slice()
}

#[inline(never)]
fn large_site() -> Vec<u8> {
    black_box(vec![0u8; 4096])
}

#[inline(never)]
fn injected_site() -> Box<[u8]> {
    black_box(vec![2u8; 100]).into_boxed_slice()
}

/// Runs the known workload under a profiler writing `path`.
fn record(path: &Path, inject: bool) {
    let mut keep: Vec<Box<[u8]>> = Vec::with_capacity(8);
    {
        let _p = dhat::Profiler::builder().file_name(path).trim_backtraces(Some(40)).build();
        for _ in 0..5 {
            keep.push(small_site());
        }
        for _ in 0..3 {
            drop(large_site());
        }
        if inject {
            keep.push(injected_site());
        }
    }
    drop(black_box(keep));
}

fn site_of<'a>(sites: &'a [trace::Site], function: &str) -> Vec<&'a trace::Site> {
    sites.iter().filter(|s| s.stack.iter().any(|f| f.function.ends_with(function))).collect()
}

fn main() {
    one_test::run(
        "review_finds_the_known_sites_and_the_injected_one",
        review_finds_the_known_sites_and_the_injected_one,
    );
}

fn review_finds_the_known_sites_and_the_injected_one() {
    let dir: PathBuf = std::env::temp_dir().join(format!("wb-trace-review-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.dhat.json"), dir.join("b.dhat.json"));
    record(&a, false);
    record(&b, true);
    let again = dir.join("a2.dhat.json");
    record(&again, false);

    let ta = Trace::load(&a).unwrap();
    let top = ta.top(By::Bytes, None);
    let small = site_of(&top, "small_site");
    let large = site_of(&top, "large_site");
    assert_eq!(small.len(), 1, "one site for small_site: {top:#?}");
    assert_eq!(large.len(), 1, "one site for large_site: {top:#?}");
    assert_eq!((small[0].bytes, small[0].blocks), (5 * 48, 5));
    assert_eq!((large[0].bytes, large[0].blocks), (3 * 4096, 3));
    assert!(site_of(&top, "injected_site").is_empty());
    // Ranked: the large site has the most bytes, the small one the most blocks.
    assert!(top[0].stack.iter().any(|f| f.function.ends_with("large_site")), "{:#?}", top[0]);
    let by_blocks = ta.top(By::Blocks, None);
    assert!(by_blocks[0].stack.iter().any(|f| f.function.ends_with("small_site")), "{:#?}", by_blocks[0]);
    // The allocator plumbing is folded away: the kept stack starts at the
    // test's own function, and what it called into is kept as "via".
    assert!(large[0].stack[0].function.ends_with("large_site"), "{:#?}", large[0].stack);
    assert!(large[0].via.is_some());
    // At exit the small blocks were still held (`keep` outlives the profiler); the large were freed.
    assert_eq!(small[0].at_exit, 5 * 48);
    assert_eq!(large[0].at_exit, 0);

    // The same workload twice: identical counts, an empty diff.
    let t2 = Trace::load(&again).unwrap();
    assert!(trace::diff(&ta, &t2).is_empty(), "{:#?}", trace::diff(&ta, &t2));

    // One injected allocation: exactly one changed site, +100 B, +1 block.
    let tb = Trace::load(&b).unwrap();
    let d = trace::diff(&ta, &tb);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!((d[0].bytes(), d[0].blocks()), (100, 1));
    assert!(d[0].key.contains("injected_site"), "{}", d[0].key);

    // The tree by caller holds every byte; the flame graph is written.
    let tree = ta.tree();
    assert_eq!(tree.bytes, ta.total_bytes());
    let svg = dir.join("a.flame.svg");
    trace::write_flamegraph(&ta, &svg).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("large_site"), "flame graph names the site");

    let rendered = trace::render_top(&ta, By::Bytes, None, 10);
    assert!(rendered.contains("12,288 B"), "{rendered}");
    std::fs::remove_dir_all(&dir).unwrap();
}
