use super::*;

#[test]
fn frames_parse_with_crate() {
    let f = Frame::parse(
        "0x55c0e09db376: <bytes::bytes_mut::BytesMut>::reserve_inner (bytes-1.12.2/src/bytes_mut.rs:683:23)",
    );
    assert_eq!(f.function, "<bytes::bytes_mut::BytesMut>::reserve_inner");
    assert_eq!(f.location, "bytes-1.12.2/src/bytes_mut.rs:683");
    assert_eq!(f.krate.as_deref(), Some("bytes"));
    let p = Frame::parse(
        "0x1: <u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem (src/vec/spec_from_elem.rs:51:5)",
    );
    assert_eq!(p.krate.as_deref(), Some("alloc"));
    let g = Frame::parse("0x1: new (src/hpack/header.rs:98:24)");
    assert_eq!(g.krate, None);
    let h = Frame::parse("0x1: capnp::message::Builder<A>::new (src/message.rs:98:24)");
    assert_eq!(h.display(), "capnp::message::Builder<A>::new (capnp: src/message.rs:98)");
    assert!(Frame::parse("0x2: start_thread (./nptl/pthread_create.c:442:8)").is_startup());
    assert!(Frame::parse("0x2: <alloc::alloc::Global as core::alloc::Allocator>::allocate (alloc/src/alloc.rs:1:1)")
        .is_plumbing());
    // Frames of traces written before crate paths (a bisection reads
    // old commits' traces): the crate comes from its directory.
    let old = Frame::parse("0x3: {closure#0}<dhat::Alloc> (probe/src/sides.rs:112:9)");
    assert_eq!(old.krate.as_deref(), Some("probe"));
    assert!(old.is_plumbing());
    assert!(Frame::parse("0x3: alloc (alloc/src/alloc.rs:95:9)").is_plumbing());
    assert_eq!(Frame::parse("0x3: decode (subjects/src/codecs/capnp.rs:80:9)").krate.as_deref(), Some("subjects"));
}
