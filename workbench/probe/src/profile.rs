//! A heap profile as a file, in every build: where a process sampling at
//! an interval writes its profile, how jemalloc is told the interval, and a
//! profile's totals. The sampled profiles (`probe::sampled`, the sampling
//! build) and dhat's exact traces share the dhat form, so one reader sums
//! either. The subjects' and the server's sampling-accuracy drivers both
//! read their profiles through here.

use std::path::{Path, PathBuf};

/// The environment variable jemalloc (built with tikv-jemalloc-sys's `_rjem_`
/// prefix) reads its options from: a sampling process gets its interval so,
/// as production sets it (`lg_prof_sample:N`).
pub const MALLOC_CONF: &str = "_RJEM_MALLOC_CONF";

/// The options ([`MALLOC_CONF`]) of a process sampling at 2^`lg` whose
/// profile goes to `path`: the interval as production sets it, and a dump at
/// each new peak (`prof_gdump`, production's way to a profile at the peak)
/// beside the profile under the prefix `<path>.peak`. `probe::sampled` turns
/// jemalloc's own peak dumps off (they deadlock) and takes its own in their
/// place, reads the last as each site's live bytes at the peak and removes
/// it. Not the profiler's default: profiler-cost, which times production's
/// settings, runs without it. The error names a path jemalloc's option
/// string cannot carry (a comma separates its options).
pub fn sampling_conf(lg: u32, path: &Path) -> std::io::Result<String> {
    let prefix = path.with_extension("peak");
    let prefix = prefix.to_str().filter(|p| !p.contains(',')).ok_or_else(|| {
        std::io::Error::other(format!(
            "{}: jemalloc's options cannot carry this path (a comma, or not UTF-8)",
            prefix.display()
        ))
    })?;
    Ok(format!("lg_prof_sample:{lg},prof_gdump:true,prof_prefix:{prefix}"))
}

/// Where the process sampling at 2^`lg` writes its profile: beside the
/// cell's own trace path, `<cell>-lg<N>.sampled.json`.
pub fn sampled_path(trace: &Path, lg: u32) -> PathBuf {
    let name = trace.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".sampled.json").unwrap_or(&name);
    trace.with_file_name(format!("{stem}-lg{lg}.sampled.json"))
}

/// A profile's totals over its sites.
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    /// Allocation calls (estimated where sampled).
    pub allocs: f64,
    /// Bytes allocated.
    pub bytes: f64,
    /// Bytes live at the end.
    pub live_bytes: f64,
    /// Stacks the profile holds.
    pub stacks: u64,
    /// The interval it was sampled at, as log2; none for an exact trace.
    pub lg_sample: Option<u32>,
}

/// Reads the profile at `path` (dhat's trace or a sampled one) and sums its
/// sites. The error names the file.
pub fn totals(path: &Path) -> std::io::Result<Totals> {
    let named = |e: &dyn std::fmt::Display| std::io::Error::other(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| named(&e))?;
    let profile: serde_json::Value = serde_json::from_str(&text).map_err(|e| named(&e))?;
    let pps = profile["pps"].as_array().map(Vec::as_slice).unwrap_or_default();
    let sum = |k: &str| pps.iter().filter_map(|p| p[k].as_f64()).sum::<f64>();
    Ok(Totals {
        allocs: sum("tbk"),
        bytes: sum("tb"),
        live_bytes: sum("eb"),
        stacks: pps.len() as u64,
        lg_sample: profile["sampling"]["lg_sample"].as_u64().and_then(|n| u32::try_from(n).ok()),
    })
}

/// The record of the profile a process sampled at 2^`lg` wrote at `path`:
/// its totals, its file's name, the process's wall time. A profile sampled
/// at another interval (jemalloc did not read [`MALLOC_CONF`]) is an error.
pub fn sampled_record(path: &Path, lg: u32, elapsed_s: f64) -> std::io::Result<records::subject::SamplingAccuracy> {
    let t = totals(path)?;
    if t.lg_sample != Some(lg) {
        return Err(std::io::Error::other(format!(
            "{}: sampled at 2^{:?}, not 2^{lg}: jemalloc did not read {MALLOC_CONF}",
            path.display(),
            t.lg_sample
        )));
    }
    Ok(records::subject::SamplingAccuracy {
        lg_sample: Some(lg),
        allocs: Some(t.allocs),
        bytes: Some(t.bytes),
        live_bytes: Some(t.live_bytes),
        stacks: Some(t.stacks),
        trace: path.file_name().map(|n| n.to_string_lossy().into_owned()),
        elapsed_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_is_summed_and_its_interval_read() {
        let path = std::env::temp_dir().join(format!("probe-profile-{}.sampled.json", std::process::id()));
        let text = r#"{"sampling": {"lg_sample": 12}, "pps": [{"tb": 100, "tbk": 2, "eb": 10}, {"tb": 50, "tbk": 1, "eb": 0}]}"#;
        std::fs::write(&path, text).unwrap();
        let t = totals(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!((t.allocs, t.bytes, t.live_bytes, t.stacks, t.lg_sample), (3.0, 150.0, 10.0, 2, Some(12)));
        assert!(totals(&path).unwrap_err().to_string().contains("probe-profile-"), "names the file");
        assert_eq!(
            sampling_conf(7, Path::new("/t/a-lg7.sampled.json")).unwrap(),
            "lg_prof_sample:7,prof_gdump:true,prof_prefix:/t/a-lg7.sampled.peak"
        );
        assert!(sampling_conf(7, Path::new("/t/a,b.json")).unwrap_err().to_string().contains("/t/a,b.peak"));
        assert_eq!(
            sampled_path(Path::new("/t/sampling-accuracy-server-jemalloc-prof-r1.sampled.json"), 19),
            Path::new("/t/sampling-accuracy-server-jemalloc-prof-r1-lg19.sampled.json")
        );
    }
}
