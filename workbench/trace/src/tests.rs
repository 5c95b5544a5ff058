use super::*;

/// The newest quick alloc-profile run's trace in `data/` whose name starts
/// with `prefix` (run ids sort by time): what the export tests read, the
/// committed run on a clean clone, the main job's own after one.
pub(crate) fn committed_trace(prefix: &str) -> PathBuf {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/alloc-profile");
    let mut runs: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("quick-")))
        .collect();
    runs.sort();
    let dir = runs.pop().expect("a committed alloc-profile run");
    traces_in(&dir)
        .unwrap()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .unwrap_or_else(|| panic!("a {prefix} trace in {}", dir.display()))
}

/// Whether a frame is the JSON codec's code: in the `stacks` crate, or in
/// `subjects`, where the codecs lived when the older committed quick runs
/// were traced (the export tests read whichever run is newest, a main job's
/// own included).
pub(crate) fn is_json_codec_frame(name: &str) -> bool {
    ["stacks::codecs::json", "subjects::codecs::json"].iter().any(|p| name.starts_with(p))
}

#[test]
fn a_trace_without_frames_is_refused() {
    let text = r#"{"dhatFileVersion":2,"mode":"rust-heap","verb":"Allocated","bklt":true,"bkacc":false,"tu":"µs","Mtu":"s","tuth":10,"cmd":"x","pid":1,"tg":1,"te":2,
        "pps":[{"tb":10,"tbk":1,"tl":1,"mb":10,"mbk":1,"gb":0,"gbk":0,"eb":0,"ebk":0,"fs":[]},
               {"tb":30,"tbk":1,"tl":1,"mb":10,"mbk":1,"gb":0,"gbk":0,"eb":0,"ebk":0,"fs":[1]}],
        "ftbl":["[root]","0x1: start_thread (x.c:1:1)"]}"#;
    let e = Trace::parse(Path::new("t.json"), text).unwrap_err();
    assert!(matches!(e, TraceError::NoFrames { empty: 1, sites: 2, .. }), "{e}");
    let repeated = text.replace(r#""fs":[]"#, r#""fs":[1]"#);
    let e = Trace::parse(Path::new("t.json"), &repeated).unwrap_err();
    assert!(matches!(e, TraceError::Repeated { first: 0, second: 1, .. }), "{e}");
    let v1 = text.replace(r#""dhatFileVersion":2"#, r#""dhatFileVersion":1"#);
    assert!(matches!(Trace::parse(Path::new("t.json"), &v1).unwrap_err(), TraceError::Version { found: 1, .. }));
    let no_pps = text.replace(r#""pps""#, r#""ppz""#);
    let e = Trace::parse(Path::new("t.json"), &no_pps).unwrap_err();
    assert!(e.to_string().contains("pps"), "{e}");
}

#[test]
fn a_gzipped_trace_is_read_by_either_name() {
    let text = r#"{"dhatFileVersion":2,"mode":"rust-heap","cmd":"x","te":2,
        "pps":[{"tb":30,"tbk":1,"fs":[1]}],"ftbl":["[root]","0x1: zap::f (zap/src/a.rs:1:1)"]}"#;
    let dir = std::env::temp_dir().join(format!("trace-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("t.sampled.json.gz");
    let mut e = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, text.as_bytes()).unwrap();
    e.finish().unwrap();
    for p in [gz.clone(), dir.join("t.sampled.json")] {
        let t = Trace::load(&p).unwrap();
        assert_eq!((t.total_bytes(), t.path.clone()), (30, gz.clone()));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_sampled_profile_says_so_and_shows_no_peak() {
    let text = r#"{"dhatFileVersion":2,"mode":"rust-heap","cmd":"x","te":2,"sampling":{"lg_sample":12,"interval":4096},
        "pps":[{"tb":30,"tbk":1,"eb":30,"fs":[1]}],"ftbl":["[root]","0x1: zap::f (zap/src/a.rs:1:1)"]}"#;
    let t = Trace::parse(Path::new("t.sampled.json"), text).unwrap();
    assert_eq!(t.sampling, Some(Sampling { lg_sample: 12, interval: 4096, peak_dumps: None }));
    let out = render_top(&t, By::Bytes, None, 5);
    assert!(out.contains("sampled by jemalloc") && out.contains("live at exit 30 B"), "{out}");
    assert!(!out.contains("at peak"), "{out}");
    let exact =
        Trace::parse(Path::new("t.dhat.json"), &text.replace(r#""sampling":{"lg_sample":12,"interval":4096},"#, ""))
            .unwrap();
    assert!(exact.sampling.is_none() && render_top(&exact, By::Bytes, None, 5).contains("at peak"));
}

#[test]
fn a_stem_drops_the_ending_of_either_kind() {
    assert_eq!(stem("zap-p0-dhat-r0.dhat.json"), "zap-p0-dhat-r0");
    assert_eq!(stem("zap-p0-jemalloc-prof-r0-lg12.sampled.json.gz"), "zap-p0-jemalloc-prof-r0-lg12");
    assert_eq!(stem("other.json"), "other.json");
}

#[test]
fn operations_come_from_the_cell() {
    assert_eq!(operations_of(r#"/x/subject --cell {"messages":1000,"warmup":16,"seed":1}"#), Some(1016));
    assert_eq!(operations_of("/x/other"), None);
}
