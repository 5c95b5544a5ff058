//! `parse` + every accessor of every schema + frame decoding, on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zap::fuzzing::exercise(data);
});
