//! The side of a test runner's protocol a `harness = false` test binary
//! needs (shared by zap's allocation gates and the CLI's `trace_review`):
//! each such binary is one test, named after its function. cargo-nextest
//! lists a binary's tests with `--list --format terse` (and `--ignored`)
//! and runs one with `--exact NAME --nocapture`; `cargo test` passes none.

/// Runs `test` as the binary's only test, `name`, or lists it.
pub fn run(name: &str, test: fn()) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        // Ignored tests: none.
        if !args.iter().any(|a| a == "--ignored") {
            println!("{name}: test");
        }
        return;
    }
    // A name filter (nextest passes `--exact NAME`) that is not this test.
    if args.iter().any(|a| !a.starts_with('-') && a != name) {
        return;
    }
    test();
    println!("test {name} ... ok");
}
