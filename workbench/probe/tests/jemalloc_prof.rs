//! The sampling build against sites of known sizes: each estimate within the
//! statistical bound of jemalloc's sampling model, window after window (a
//! window continues the thread's random stream: a new draw of the sample).
#![cfg(feature = "jemalloc-prof")]

use std::hint::black_box;

const KIB_N: u64 = 1_000_000;
const MIB_N: u64 = 10;
const SMALL_N: u64 = 10_000_000;
/// Every tenth small allocation is still live when the profile is dumped.
const SMALL_KEPT: u64 = SMALL_N / 10;

#[inline(never)]
fn kib_site(n: u64) {
    for _ in 0..n {
        black_box(Vec::<u8>::with_capacity(1024));
    }
}

#[inline(never)]
fn mib_site(keep: &mut Vec<Vec<u8>>) {
    for _ in 0..MIB_N {
        keep.push(black_box(Vec::<u8>::with_capacity(1 << 20)));
    }
}

// Boxed: each kept value must be an allocation of its own.
#[allow(clippy::vec_box)]
#[inline(never)]
fn small_site(keep: &mut Vec<Box<[u8; 24]>>) {
    for i in 0..SMALL_N {
        let b = black_box(Box::new([i as u8; 24]));
        if i % 10 == 0 {
            keep.push(b);
        }
    }
}

/// Sums of a site's estimates in a sampled trace: (total bytes, total
/// allocations, live bytes), over every stack through `function`.
fn site(trace: &serde_json::Value, function: &str) -> (f64, f64, f64) {
    let ftbl: Vec<&str> = trace["ftbl"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let mut out = (0.0, 0.0, 0.0);
    for pp in trace["pps"].as_array().unwrap() {
        let through =
            pp["fs"].as_array().unwrap().iter().any(|f| ftbl[f.as_u64().unwrap() as usize].contains(function));
        if through {
            out.0 += pp["tb"].as_f64().unwrap();
            out.1 += pp["tbk"].as_f64().unwrap();
            out.2 += pp["eb"].as_f64().unwrap();
        }
    }
    out
}

/// Standard deviation of the estimated bytes of `n` allocations of usable
/// size `s` at mean interval `r`: each is sampled with p = 1 - e^(-s/r) and
/// then stands for s/p bytes.
fn sd(n: u64, s: u64, r: u64) -> f64 {
    let p = 1.0 - (-(s as f64) / r as f64).exp();
    (n as f64 * p * (1.0 - p)).sqrt() * s as f64 / p
}

/// The mean estimates (bytes, allocations) of `n` allocations of usable size
/// `s` at mean interval `r`, as jemalloc keeps them: each sampled allocation
/// adds `round(s / p)` bytes and `round(8 / p)` eighths of an allocation
/// (`prof_unbias_map_init`: integers, the count in eighths), so the count is
/// off by up to 1/16 of an allocation per sample: -0.46 % for 1 KiB at
/// 2^12, 24 % of a standard deviation per million allocations, which an
/// unrounded model once let past five.
fn expected(n: u64, s: u64, r: u64) -> (f64, f64) {
    let p = 1.0 - (-(s as f64) / r as f64).exp();
    let sampled = n as f64 * p;
    (sampled * (s as f64 / p).round(), sampled * (8.0 / p).round() / 8.0)
}

fn window(lg: u32, path: &std::path::Path, kib_n: u64, big: bool) -> serde_json::Value {
    probe::sampled::reset(lg).unwrap();
    let mut mib = Vec::with_capacity(MIB_N as usize);
    let mut small = Vec::with_capacity(SMALL_KEPT as usize);
    {
        let probe = probe::Probe::start(Some(path));
        assert_eq!(probe.variant(), probe::Variant::JemallocProf);
        kib_site(kib_n);
        if big {
            mib_site(&mut mib);
            small_site(&mut small);
        }
    }
    drop((mib, small));
    let text = std::fs::read_to_string(path).unwrap();
    assert!(!path.with_extension("heap").exists(), "the raw dump is removed");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn sampled_estimates_fall_within_the_bound_of_the_sampling_model() {
    let path = std::env::temp_dir().join(format!("probe-sampled-{}.dhat.json", std::process::id()));

    // Every allocation sampled: the estimate is the count.
    let t = window(0, &path, 1000, false);
    assert_eq!(t["sampling"]["interval"], 1);
    assert!(t["sampling"]["peak_dumps"].is_null(), "no high-water dumps unless asked for");
    assert_eq!(site(&t, "kib_site"), (1000.0 * 1024.0, 1000.0, 0.0));

    for lg in [12u32, 19] {
        let r = 1u64 << lg;
        // (name, allocations, usable size, bytes live at the dump)
        let sites = [
            ("kib_site", KIB_N, 1024u64, 0u64),
            ("mib_site", MIB_N, 1 << 20, MIB_N),
            // 24 bytes asked are jemalloc's 32-byte class: a sampled profile
            // counts what jemalloc holds.
            ("small_site", SMALL_N, 32, SMALL_KEPT),
        ];
        let windows = 4;
        let mut sums = [0.0f64; 3];
        for _ in 0..windows {
            let t = window(lg, &path, KIB_N, true);
            assert_eq!(t["sampling"]["lg_sample"], lg);
            for (i, &(name, n, s, live)) in sites.iter().enumerate() {
                let (total, allocs, live_bytes) = site(&t, name);
                let ((truth, allocs_truth), bound) = (expected(n, s, r), 5.0 * sd(n, s, r) + 1.0);
                assert!(
                    (total - truth).abs() <= bound,
                    "lg {lg} {name}: {total} bytes estimated, {truth} expected ({} true), ±{bound}",
                    n * s
                );
                let allocs_bound = bound / s as f64 + 1.0;
                assert!(
                    (allocs - allocs_truth).abs() <= allocs_bound,
                    "lg {lg} {name}: {allocs} allocations estimated, {allocs_truth} expected ({n} true), ±{allocs_bound}"
                );
                let (live_truth, live_bound) = (expected(live, s, r).0, 5.0 * sd(live, s, r) + 1.0);
                assert!(
                    (live_bytes - live_truth).abs() <= live_bound,
                    "lg {lg} {name}: {live_bytes} live bytes estimated, {live_truth} true, ±{live_bound}"
                );
                sums[i] += total;
            }
        }
        // Unbiased: the mean of the windows within 4 of its standard errors.
        for (i, &(name, n, s, _)) in sites.iter().enumerate() {
            let mean = sums[i] / windows as f64;
            let bound = 4.0 * sd(n, s, r) / (windows as f64).sqrt() + 1.0;
            let truth = expected(n, s, r).0;
            assert!((mean - truth).abs() <= bound, "lg {lg} {name}: mean {mean}, {truth} expected, ±{bound}");
        }
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_dump_is_read_and_unbiased_as_jeprof_does() {
    let text = "heap_v2/524288\n  t*: 3: 3072 [5: 5120]\n  t0: 3: 3072 [5: 5120]\n\
                    @ 0x10 0x20 0x30\n  t*: 2: 2048 [4: 4096]\n  t0: 2: 2048 [4: 4096]\n\
                    @ 0x11 0x21\n  t*: 0: 0 [0: 0]\n\
                    @ 0x12\n  t*: 1: 1024 [1: 1024]\n\nMAPPED_LIBRARIES:\n5555-6666 r-xp 0 00:00 0 /x\n";
    let p = probe::sampled::Profile::parse(std::path::Path::new("x.heap"), text).unwrap();
    assert_eq!(p.interval, 524288);
    assert_eq!(p.stacks.len(), 2, "the empty stack is dropped");
    assert_eq!(p.stacks[0].0, vec![0x10, 0x20, 0x30]);
    assert_eq!(
        p.stacks[0].1,
        probe::sampled::Counts { live_objs: 2, live_bytes: 2048, total_objs: 4, total_bytes: 4096 }
    );
    let e = p.stacks[0].1.estimate(p.interval);
    let scale = 1.0 / (1.0 - (-1024.0f64 / 524288.0).exp());
    assert!((e.total_bytes - 4096.0 * scale).abs() < 1e-6 && (e.live_objs - 2.0 * scale).abs() < 1e-9);
    assert!(scale > 512.0 && scale < 513.0, "about R / s for s ≪ R: {scale}");
    assert_eq!(probe::sampled::unbias(7, 700, 1), (7.0, 700.0), "every allocation sampled");
    let bad = probe::sampled::Profile::parse(std::path::Path::new("x.heap"), "heap_v2/1\n@ 0x1\n t*: 1: x [0: 0]\n")
        .unwrap_err();
    assert!(bad.to_string().starts_with("x.heap:3:"), "{bad}");
    assert!(probe::sampled::Profile::parse(std::path::Path::new("y.heap"), "heap/1\n")
        .unwrap_err()
        .to_string()
        .contains("y.heap:1"));
}

/// Held live together long enough for the peak watcher to see them, then
/// freed: the site's bytes at the peak.
#[inline(never)]
fn peak_site() {
    let held: Vec<Vec<u8>> = (0..PEAK_N).map(|_| black_box(vec![1u8; PEAK_BLOCK])).collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    black_box(&held);
}

const PEAK_N: usize = 64;
const PEAK_BLOCK: usize = 64 << 10;
const PEAK_CHILD: &str = "PROBE_TEST_PEAK_CHILD";

/// A process asked for dumps at its peaks (as the sampling study's children
/// are: `prof_gdump` and `prof_prefix` in jemalloc's options, read at its
/// start, hence a child process) writes each site's live bytes at the last
/// of them as dhat's `gb`, and leaves no dump behind.
#[test]
fn the_last_high_water_dump_gives_what_was_live_at_the_peak() {
    if let Some(dir) = std::env::var_os(PEAK_CHILD) {
        let path = std::path::Path::new(&dir).join("cell.sampled.json");
        let probe = probe::Probe::start(Some(&path));
        peak_site();
        black_box(Vec::<u8>::with_capacity(100));
        drop(probe);
        return;
    }
    let dir = std::env::temp_dir().join(format!("probe-peak-{}", std::process::id()));
    let path = dir.join("cell.sampled.json");
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_last_high_water_dump_gives_what_was_live_at_the_peak", "--nocapture"])
        .env(PEAK_CHILD, &dir)
        .env(
            "_RJEM_MALLOC_CONF",
            format!("lg_prof_sample:0,prof_gdump:true,prof_prefix:{}", dir.join("cell.peak").display()),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    std::fs::remove_dir_all(&dir).ok();
    assert!(t["sampling"]["peak_dumps"].as_u64().is_some_and(|n| n > 0), "{}", t["sampling"]);
    assert_eq!(left.len(), 1, "only the profile is left: {left:?}");
    let ftbl: Vec<&str> = t["ftbl"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let (mut at_peak, mut live, mut blocks) = (0, 0, 0);
    for pp in t["pps"].as_array().unwrap() {
        if pp["fs"].as_array().unwrap().iter().any(|f| ftbl[f.as_u64().unwrap() as usize].contains("peak_site")) {
            at_peak += pp["gb"].as_u64().unwrap();
            blocks += pp["gbk"].as_u64().unwrap();
            live += pp["eb"].as_u64().unwrap();
        }
    }
    // Every allocation sampled: what was held at the peak, every block and
    // the holder's buffer, and nothing live at the end.
    let holder = PEAK_N * std::mem::size_of::<Vec<u8>>();
    assert_eq!((at_peak, blocks, live), ((PEAK_N * PEAK_BLOCK + holder) as u64, PEAK_N as u64 + 1, 0));
}
