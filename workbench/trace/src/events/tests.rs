use super::*;

/// Two sites: a buffer allocated and freed every operation, and one
/// that keeps 100 bytes an operation from operation 10 on (a leak).
fn file(dir: &Path) -> PathBuf {
    let text = r#"{"eventsFileVersion":2,"highs":[16,116],"beforeHigh":64,"afterHigh":3064,"cmd":"subject --cell {\"messages\":40,\"seed\":1}",
        "ftbl":["0x1: alloc::vec::Vec<T>::with_capacity (v.rs:1:1)","0x2: subjects::codecs::zap::decode (zap.rs:3:1)",
                "0x3: subjects::experiments::heap_growth::run_loop (h.rs:9:1)"],
        "sites":[[0,2],[0,1,2]],
        "before":[[0,1,64,0,0]],
        "after":[[0,0,0,1,64]],
        "patterns":[[[0,1,16,1,16]],[[0,1,16,1,16],[1,1,100,0,0]]],
        "runs":[[0,10,0],[10,30,1]]}"#;
    let p = dir.join("t.events.json");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn live_memory_at_any_operation_and_a_leak_flagged() {
    let dir = std::env::temp_dir().join(format!("wb-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = Events::load(&file(&dir)).unwrap();
    assert_eq!((e.operations(), e.runs()), (40, 2));
    assert_eq!(e.totals(), (1 + 10 + 30 * 2, 64 + 10 * 16 + 30 * 116));
    let total = |n: Option<u64>| e.live_at(n).iter().map(|x| x.2).sum::<i64>();
    assert_eq!(total(None), 64);
    assert_eq!(total(Some(9)), 64, "the per-operation buffer is freed within each operation");
    assert_eq!(total(Some(10)), 164);
    assert_eq!(total(Some(39)), 64 + 30 * 100);
    assert_eq!(total(Some(u64::MAX)), 30 * 100, "the setup block is freed after the loop");
    let t = e.timeline(&[], 10);
    assert_eq!(t.ops, [9, 19, 29, 39]);
    assert_eq!(t.total.iter().map(|x| x.0).collect::<Vec<_>>(), [64, 1064, 2064, 3064]);
    assert_eq!(e.peak(), Some((39, 3064)));
    // Within each operation the 16-byte buffer stands on the level: the
    // highest point is during the last operation, 16 B above its end.
    assert_eq!(t.high, [64 + 16, 1064 + 16, 2064 + 16, 3064 + 16]);
    assert_eq!(e.high(), (Some(39), 3064 + 16));
    let g = e.growth(4);
    let leak = g.iter().find(|x| x.leak).expect("the growing site is flagged");
    assert!(leak.key.contains("subjects::codecs::zap::decode"), "{}", leak.key);
    assert!((leak.slope - 100.0).abs() < 15.0, "{}", leak.slope);
    assert_eq!(g.iter().filter(|x| x.leak).count(), 1, "the per-operation buffer is flat");
    let text = render_growth(&e, 4);
    assert!(text.contains("1 flagged as leaks"), "{text}");
    assert_eq!(verdict(&e, 4), format!("LEAK: {:+.2} B per operation (1 site(s))", leak.slope));
    // Against a run without the leak, at the same operation: the leaking
    // site's live bytes are the whole difference.
    let fixed = dir.join("fixed.events.json");
    let text = std::fs::read_to_string(file(&dir)).unwrap().replace("[1,1,100,0,0]", "[1,1,100,1,100]");
    std::fs::write(&fixed, text).unwrap();
    let f = Events::load(&fixed).unwrap();
    assert_eq!(verdict(&f, 4), format!("flat at {}", units::bytes(64.0)));
    let (a, b) = (e.live_trace(At::Op(20)), f.live_trace(At::Op(20)));
    let d = super::super::diff(&a, &b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].bytes(), d[0].blocks()), (-1100, -11));
    std::fs::remove_dir_all(&dir).unwrap();
}
