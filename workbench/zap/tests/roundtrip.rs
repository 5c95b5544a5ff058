//! Property tests: random field values survive a build/read round trip,
//! and arbitrary bytes never make a reader panic.

use proptest::prelude::*;
use zap::{Builder, Bytes, List, Ptr, Text, Vote};

zap::zap_struct! {
    struct Inner / InnerReader / InnerBuilder {
        flag: bool,
        small: i16,
        name: Text,
    }
}

zap::zap_struct! {
    struct Mixed / MixedReader / MixedBuilder {
        a: u8,
        b: i64,
        c: f32,
        d: u16,
        e: f64,
        tag: [u8; 3],
        words: List<u32>,
        floats: List<f64>,
        blob: Bytes,
        inner: Ptr<Inner>,
        label: Text,
    }
}

#[test]
fn mixed_layout_follows_the_alignment_rules() {
    assert_eq!((Mixed::a, Mixed::b, Mixed::c, Mixed::d, Mixed::e), (0, 8, 16, 20, 24));
    assert_eq!((Mixed::tag, Mixed::words, Mixed::floats, Mixed::blob), (32, 36, 44, 52));
    assert_eq!((Mixed::inner, Mixed::label, Mixed::SIZE), (60, 64, 72));
    assert_eq!((Inner::flag, Inner::small, Inner::name, Inner::SIZE), (0, 2, 4, 16));
}

proptest! {
    #[test]
    fn vote_round_trips(round: u64, ts: u64, kind: u8, hash: [u8; 32], voter: [u8; 32],
                        sig in proptest::collection::vec(any::<u8>(), 64),
                        payload in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let sig: [u8; 64] = sig.try_into().unwrap();
        let mut b = Builder::new();
        let mut v = b.root::<Vote>();
        v.round(round);
        v.block_hash(&hash);
        v.voter_id(&voter);
        v.signature(&sig);
        v.timestamp(ts);
        v.vote_type(kind);
        v.payload(&payload);
        let bytes = v.finish().unwrap();
        prop_assert_eq!(bytes.len(), 16 + Vote::SIZE + payload.len());
        let r = zap::read::<Vote>(bytes).unwrap();
        prop_assert_eq!(r.round(), round);
        prop_assert_eq!(r.timestamp(), ts);
        prop_assert_eq!(r.vote_type(), kind);
        prop_assert_eq!(r.block_hash(), &hash);
        prop_assert_eq!(r.voter_id(), &voter);
        prop_assert_eq!(r.signature(), &sig);
        prop_assert_eq!(r.payload().unwrap(), &payload[..]);
    }

    #[test]
    fn mixed_round_trips(a: u8, bv: i64, c: f32, d: u16, e: f64, tag: [u8; 3],
                         words in proptest::collection::vec(any::<u32>(), 0..50),
                         floats in proptest::collection::vec(any::<f64>(), 0..50),
                         blob in proptest::collection::vec(any::<u8>(), 0..100),
                         flag: bool, small: i16, name in ".{0,20}", label in ".{0,20}", with_inner: bool) {
        let mut b = Builder::new();
        let mut m = b.root::<Mixed>();
        m.a(a); m.b(bv); m.c(c); m.d(d); m.e(e); m.tag(&tag);
        m.words(&words); m.floats(&floats); m.blob(&blob);
        if with_inner {
            let mut i = m.inner(());
            i.flag(flag); i.small(small); i.name(&name);
        }
        m.label(&label);
        let bytes = m.finish().unwrap().to_vec();
        let r = zap::read::<Mixed>(&bytes).unwrap();
        prop_assert_eq!((r.a(), r.b(), r.d(), r.tag()), (a, bv, d, &tag));
        prop_assert_eq!(r.c().to_bits(), c.to_bits());
        prop_assert_eq!(r.e().to_bits(), e.to_bits());
        prop_assert_eq!(r.words().unwrap().iter().collect::<Vec<_>>(), words);
        let got: Vec<u64> = r.floats().unwrap().iter().map(f64::to_bits).collect();
        prop_assert_eq!(got, floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        prop_assert_eq!(r.blob().unwrap(), &blob[..]);
        prop_assert_eq!(r.label().unwrap(), label.as_str());
        match r.inner().unwrap() {
            Some(i) => {
                prop_assert!(with_inner);
                prop_assert_eq!((i.flag(), i.small(), i.name().unwrap()), (flag, small, name.as_str()));
            }
            None => prop_assert!(!with_inner),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        zap::fuzzing::exercise(&data);
    }

    #[test]
    fn corrupted_votes_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..64),
                                   flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut b = Builder::new();
        let mut v = b.root::<Vote>();
        v.round(1);
        v.payload(&payload);
        let mut bytes = v.finish().unwrap().to_vec();
        let n = bytes.len();
        for (i, x) in flips { bytes[i % n] ^= x; }
        zap::fuzzing::exercise(&bytes);
    }
}

/// Which of `Mixed`'s fields one message sets, and with what.
#[derive(Debug, Clone)]
struct Partial {
    a: Option<u8>,
    b: Option<i64>,
    tag: Option<[u8; 3]>,
    words: Option<Vec<u32>>,
    blob: Option<Vec<u8>>,
    inner: Option<(bool, String)>,
    label: Option<String>,
}

fn partial() -> impl Strategy<Value = Partial> {
    (
        proptest::option::of(any::<u8>()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(any::<[u8; 3]>()),
        proptest::option::of(proptest::collection::vec(any::<u32>(), 0..8)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..80)),
        proptest::option::of((any::<bool>(), ".{0,8}")),
        proptest::option::of(".{0,12}"),
    )
        .prop_map(|(a, b, tag, words, blob, inner, label)| Partial { a, b, tag, words, blob, inner, label })
}

fn build<S: zap::Storage>(b: &mut Builder<S>, p: &Partial) -> Vec<u8> {
    let mut m = b.root::<Mixed>();
    if let Some(a) = p.a {
        m.a(a);
    }
    if let Some(x) = p.b {
        m.b(x);
    }
    if let Some(tag) = &p.tag {
        m.tag(tag);
    }
    if let Some(words) = &p.words {
        m.words(words);
    }
    if let Some(blob) = &p.blob {
        m.blob(blob);
    }
    if let Some((flag, name)) = &p.inner {
        let mut i = m.inner(());
        i.flag(*flag);
        i.name(name);
    }
    if let Some(label) = &p.label {
        m.label(label);
    }
    m.finish().unwrap().to_vec()
}

proptest! {
    // A builder reused for message after message (which skips zeroing the
    // root's fixed section when the previous message covers it) writes, for
    // each, the bytes a fresh builder writes: whatever the previous message
    // set, a field left unset reads as its default and the padding is zero.
    #[test]
    fn a_reused_builder_writes_what_a_fresh_one_does(msgs in proptest::collection::vec(partial(), 1..12)) {
        let mut reused = Builder::new();
        let mut slice = vec![0xa5u8; 4096];
        let mut over = Builder::over(&mut slice);
        for p in &msgs {
            let fresh = build(&mut Builder::new(), p);
            prop_assert_eq!(&build(&mut reused, p), &fresh, "{:?}", p);
            prop_assert_eq!(&build(&mut over, p), &fresh, "{:?}", p);
            let r = zap::read::<Mixed>(&fresh).unwrap();
            prop_assert_eq!(r.a(), p.a.unwrap_or(0));
            prop_assert_eq!(r.words().unwrap().len(), p.words.as_ref().map_or(0, Vec::len));
            prop_assert_eq!(r.inner().unwrap().is_some(), p.inner.is_some());
        }
    }
}

#[test]
fn a_root_dropped_unfinished_is_an_error_not_stale_bytes() {
    let mut b = Builder::new();
    let mut v = b.root::<Vote>();
    v.round(7);
    v.timestamp(9);
    v.finish().unwrap();
    {
        // Set, then left without its finish (dropped at the end of the block).
        let mut v = b.root::<Vote>();
        v.round(8);
    }
    assert_eq!(b.finish().unwrap_err(), zap::Error::RootUnfinished { schema: "Vote" });
    // The next root starts over.
    let mut v = b.root::<Vote>();
    v.round(8);
    let r = zap::read::<Vote>(v.finish().unwrap()).unwrap();
    assert_eq!((r.round(), r.timestamp()), (8, 0));
}
