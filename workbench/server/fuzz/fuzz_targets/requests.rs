//! The request path (frames → envelopes → SQL → planner → executor) of a
//! server on a small table, coverage-guided: `server::fuzzing::Target`.
#![no_main]

use std::sync::{Mutex, OnceLock};

static TARGET: OnceLock<Mutex<server::fuzzing::Target>> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let t = TARGET.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("server-fuzz-{}", std::process::id()));
        Mutex::new(server::fuzzing::Target::start(&dir).expect("the fuzzing server starts"))
    });
    let mut t = t.lock().unwrap();
    if let Err(why) = t.exercise(data) {
        panic!("{why:?}");
    }
});
