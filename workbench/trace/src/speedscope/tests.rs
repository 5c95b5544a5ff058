use super::*;

/// A committed trace, exported and read back: the frame indices hold,
/// every profile's weights sum to the trace's totals, stacks root first.
#[test]
fn an_exported_trace_reads_back_with_the_same_totals() {
    let t = Trace::load(&crate::tests::committed_trace("json-rpc-p64-dhat")).unwrap();
    let out = std::env::temp_dir().join(format!("wb-speedscope-{}.json", std::process::id()));
    write(&t, &out).unwrap();
    let back: File = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert_eq!(back.schema, SCHEMA);
    assert_eq!(back.profiles.len(), 3);
    assert_eq!(back.profiles[0].end_value, t.total_bytes());
    assert_eq!(back.profiles[1].end_value, t.total_blocks());
    for p in &back.profiles {
        assert_eq!(p.samples.len(), p.weights.len());
        assert!(p.samples.iter().flatten().all(|&i| i < back.shared.frames.len()));
    }
    // Root first: a stack that reaches the subject's code ends in the allocator's entry.
    let subject = back.profiles[0]
        .samples
        .iter()
        .find(|s| s.iter().any(|&i| crate::tests::is_json_codec_frame(&back.shared.frames[i].name)))
        .expect("a stack through the subject");
    let leaf = &back.shared.frames[*subject.last().unwrap()].name;
    assert!(
        !leaf.starts_with("subjects::") && !leaf.starts_with("stacks::"),
        "the leaf is the allocator entry, not {leaf}"
    );
}
