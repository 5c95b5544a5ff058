//! Code generated at build time from the schemas beside these modules
//! (`vote.fbs`, `vote.capnp`, `vote.proto`); see `build.rs`.
#![allow(
    clippy::all,
    clippy::pedantic,
    unused_imports,
    dead_code,
    mismatched_lifetime_syntaxes,
    unsafe_op_in_unsafe_fn
)]

/// flatc output.
pub mod fbs {
    include!(concat!(env!("OUT_DIR"), "/vote_generated.rs"));
}

/// flatc output for the fixed-array schema (the fastest idiom's row).
pub mod fbs_fixed {
    include!(concat!(env!("OUT_DIR"), "/vote_fixed_generated.rs"));
}

/// capnp output.
pub mod vote_capnp {
    include!(concat!(env!("OUT_DIR"), "/vote_capnp.rs"));
}

/// prost output with `bytes::Bytes` fields.
pub mod pb_bytes {
    include!(concat!(env!("OUT_DIR"), "/pb_bytes/bench.rs"));
}

/// prost output.
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/bench.rs"));
}
