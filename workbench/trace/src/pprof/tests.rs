use super::*;
use prost::Message;
use std::io::Read;

#[test]
fn short_names_keep_type_and_method() {
    for (full, short) in [
        (
            "<serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_str",
            "serde_json::de::Deserializer::deserialize_str",
        ),
        ("<T as alloc::borrow::ToOwned>::to_owned", "alloc::borrow::ToOwned::to_owned"),
        ("<[T] as alloc::slice::hack::ConvertVec>::to_vec", "alloc::slice::hack::ConvertVec::to_vec"),
        ("<&str as alloc::string::ToString>::to_string", "alloc::string::ToString::to_string"),
        ("alloc::vec::Vec<T,A>::with_capacity", "alloc::vec::Vec::with_capacity"),
        ("<alloc::vec::Vec<T,A> as core::clone::Clone>::clone", "alloc::vec::Vec::clone"),
        ("core::ptr::drop_in_place<alloc::boxed::Box<dyn core::ops::Fn() -> u8>>", "core::ptr::drop_in_place"),
        ("<<A as B>::Out as core::fmt::Debug>::fmt", "B::Out::fmt"),
        ("subjects::codecs::json::encode::{{closure}}", "subjects::codecs::json::encode::{{closure}}"),
        ("<alloc::string::String>::push_str", "alloc::string::String::push_str"),
        ("malloc", "malloc"),
        ("alloc::slice::<impl [T]>::to_vec", "alloc::slice::to_vec"),
        (
            "serde::de::impls::<impl serde::de::Deserialize for alloc::string::String>::deserialize",
            "alloc::string::String::deserialize",
        ),
    ] {
        assert_eq!(short_name(full), short, "{full}");
    }
}

/// A committed trace, exported and decoded back: totals, labels, stacks.
#[test]
fn an_exported_trace_decodes_to_the_same_totals() {
    let t = Trace::load(&crate::tests::committed_trace("json-rpc-p64-dhat")).unwrap();
    let out = std::env::temp_dir().join(format!("wb-pprof-{}.pb.gz", std::process::id()));
    write(&t, Some("0123456789012345678901234567890123456789".into()), &out).unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap()).read_to_end(&mut raw).unwrap();
    std::fs::remove_file(&out).unwrap();
    let p = Profile::decode(raw.as_slice()).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(s(0), "");
    let types: Vec<(&str, &str)> = p.sample_type.iter().map(|v| (s(v.r#type), s(v.unit))).collect();
    assert_eq!(types, SAMPLE_TYPES);
    let total = |i: usize| p.sample.iter().map(|x| x.value[i] as u64).sum::<u64>();
    assert_eq!(total(0), t.total_blocks());
    assert_eq!(total(1), t.total_bytes());
    assert_eq!(total(3), t.sites.iter().map(|x| x.at_peak).sum::<u64>());
    assert_eq!(p.sample.len(), t.sites.len());
    let labels: HashMap<&str, &str> =
        p.sample[0].label.iter().filter(|l| l.str != 0).map(|l| (s(l.key), s(l.str))).collect();
    assert_eq!(labels["experiment"], "alloc-profile");
    assert_eq!(labels["codec"], "json-rpc");
    assert_eq!(labels["variant"], "dhat");
    assert_eq!(labels["commit"].len(), 40, "{labels:?}");
    let payload = p.sample[0].label.iter().find(|l| s(l.key) == "payload").unwrap();
    assert_eq!((payload.num, s(payload.num_unit)), (64, "bytes"));
    // Every location names a function, and some stack reaches the subject's code.
    let ids: std::collections::HashSet<u64> = p.location.iter().map(|l| l.id).collect();
    assert!(p.sample.iter().all(|x| !x.location_id.is_empty() && x.location_id.iter().all(|i| ids.contains(i))));
    assert!(p.function.iter().any(|f| crate::tests::is_json_codec_frame(s(f.name))), "no subject frame");
    // Names pprof keeps as they are (see the module's note).
    for f in &p.function {
        assert!(!s(f.name).starts_with("::") && !s(f.name).contains('<'), "{} for {}", s(f.name), s(f.system_name));
    }
}

/// A trace exported and read back ranks the same sites with the same
/// counts; a sampled one keeps its interval and what was live at its end.
#[test]
fn an_exported_profile_reads_back_as_the_trace_it_was() {
    let t = Trace::load(&crate::tests::committed_trace("json-rpc-p64-dhat")).unwrap();
    let out = std::env::temp_dir().join(format!("wb-pprof-back-{}.pb.gz", std::process::id()));
    write(&t, None, &out).unwrap();
    let back = Trace::load(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    let rank = |t: &Trace| -> Vec<(String, u64, u64, u64, Option<Side>)> {
        t.top(crate::By::Bytes, None).into_iter().map(|s| (s.key(), s.bytes, s.blocks, s.at_peak, s.side)).collect()
    };
    assert_eq!(rank(&back), rank(&t));
    assert_eq!((back.cmd.as_str(), back.operations, back.sampling), (t.cmd.as_str(), t.operations, None));

    let text = r#"{"dhatFileVersion":2,"mode":"rust-heap","cmd":"datastore-server serve","te":2000,
        "sampling":{"lg_sample":19,"interval":524288},
        "pps":[{"tb":900,"tbk":3,"eb":600,"ebk":2,"fs":[1,2]}],
        "ftbl":["[root]","0x1: alloc::vec::Vec<T>::with_capacity (alloc/src/vec/mod.rs:1:1)",
                "0x2: server::handler::Handler::run (server/src/handler.rs:7:3)"]}"#;
    let sampled = Trace::parse(Path::new("s.sampled.json"), text).unwrap();
    let bytes = encode(&sampled, &Labels::of(&sampled, None));
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice()).read_to_end(&mut raw).unwrap();
    let p = Profile::decode(raw.as_slice()).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!((s(p.default_sample_type), p.period), ("inuse_space", 524288));
    let back = parse(Path::new("s.pb"), &raw).unwrap();
    assert_eq!(back.sampling, Some(Sampling { lg_sample: 19, interval: 524288, peak_dumps: None }));
    let site = &back.sites[0];
    assert_eq!((site.bytes, site.blocks, site.at_exit, site.at_exit_blocks), (900, 3, 600, 2));
    assert_eq!(site.key(), "server::handler::Handler::run");
    assert_eq!(site.via.as_deref(), Some("alloc::vec::Vec<T>::with_capacity"));
    assert_eq!(back.end_us, 2000);
}

#[test]
fn a_file_that_is_not_a_profile_is_refused_naming_it() {
    let e = parse(Path::new("x.pb"), b"\xff\xff not protobuf").unwrap_err();
    assert!(matches!(e, TraceError::Pprof { .. }) && e.to_string().contains("x.pb"), "{e}");
    let empty = prost::Message::encode_to_vec(&Profile::default());
    let e = parse(Path::new("y.pb"), &empty).unwrap_err();
    assert!(e.to_string().contains("alloc_space"), "{e}");
}
