use super::*;
use std::path::Path;

fn trace(sites: &str) -> Trace {
    let text = format!(
        r#"{{"dhatFileVersion":2,"mode":"rust-heap","verb":"Allocated","bklt":true,"bkacc":false,"tu":"µs","Mtu":"s",
        "tuth":10,"cmd":"x","pid":1,"tg":1,"te":2,"pps":[{sites}],
        "ftbl":["[root]","0x1: alloc::vec::Vec<T>::with_capacity (v.rs:1:1)","0x2: zap::read (lib.rs:9:1)",
                "0x3: subjects::codecs::zap::decode (zap.rs:3:1)","0x4: subjects::codecs::zap::encode (zap.rs:7:1)"]}}"#
    );
    Trace::parse(Path::new("t.json"), &text).unwrap()
}

#[test]
fn frames_match_by_stack_and_show_before_and_after() {
    let site = |bytes: u64, blocks: u64, fs: &str| {
        format!(r#"{{"tb":{bytes},"tbk":{blocks},"tl":1,"mb":1,"mbk":1,"gb":0,"gbk":0,"eb":0,"ebk":0,"fs":[{fs}]}}"#)
    };
    let a = trace(&site(100, 10, "1,4"));
    let b = trace(&[site(100, 10, "1,4"), site(64, 4, "1,2,3")].join(","));
    let t = tree(&a, &b);
    assert_eq!((t.a, t.b), ((100, 10), (164, 14)));
    let decode = t.children.iter().find(|c| c.name.ends_with("decode")).expect("the new caller");
    assert_eq!((decode.a, decode.b), ((0, 0), (64, 4)));
    let encode = t.children.iter().find(|c| c.name.ends_with("encode")).unwrap();
    assert!(!encode.changed());
    let svg = svg(&t, "A against B");
    assert!(svg.contains("subjects::codecs::zap::decode\nbytes: 0 → 64 (+64)\nblocks: 0 → 4 (+4)"), "{svg}");
    // The new frame is full red, the unchanged one grey.
    assert!(svg.contains("fill=\"#ff3c3c\"") && svg.contains("fill=\"#dddddd\""), "{svg}");
}
