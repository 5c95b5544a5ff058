//! What each experiment's newest run took to measure, per scale, from its
//! own manifest: `paper/generated/timings.md`, the one place the README
//! sends a reader for measured timings (so no document types a duration).

use crate::data::dataset;
use crate::fmt;
use crate::spec::Scale;
use anyhow::Result;
use registry::Experiment;
use std::path::{Path, PathBuf};

/// The file, relative to the repository's root.
pub const FILE: &str = "paper/generated/timings.md";

/// The table: per experiment and scale, the newest run's cells, their
/// summed wall time, the machine and the revision, as its manifest says.
pub fn markdown(data: &Path) -> Result<String> {
    let mut s = String::from(
        "# Measured timings\n\nWritten by `workbench render` from each dataset's manifest (the newest run of each \
         experiment at each scale): cell time is the sum of its cells' wall times, as the runner measured them. \
         Plan a suite from these with `workbench run --plan`.\n",
    );
    for scale in Scale::ALL {
        s.push_str(&format!(
            "\n## {scale}\n\n| experiment | cells | cell time | machine | date | revision |\n|---|---:|---:|---|---|---|\n"
        ));
        let mut total = 0.0;
        for &e in Experiment::ALL {
            let Some(dir) = dataset::latest_run(data, e.name(), scale)? else { continue };
            let m = dataset::load_run_manifest(&dir)?;
            let secs: f64 = m.cell_seconds.values().sum();
            total += secs;
            let time = if m.cell_seconds.is_empty() { "not recorded".to_string() } else { duration(secs) };
            s.push_str(&format!(
                "| {e} | {} | {time} | {} ({} cores) | {} | {} |\n",
                fmt::thousands(m.cells.len() as u64),
                m.cpu_model,
                m.cores,
                m.date.get(..10).unwrap_or(&m.date),
                m.git_revision.get(..10).unwrap_or(&m.git_revision),
            ));
        }
        s.push_str(&format!("| **all** | | **{}** | | | |\n", duration(total)));
    }
    Ok(s)
}

/// `1 h 06 min`, `12 min 05 s`, `42 s`.
fn duration(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

/// Writes [`FILE`] under `root`; its path.
pub fn write(root: &Path, data: &Path) -> Result<PathBuf> {
    let path = root.join(FILE);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    dataset::write_atomic(&path, markdown(data)?.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(725.0), "12 min 05 s");
        assert_eq!(duration(3960.0), "1 h 06 min");
    }

    #[test]
    fn the_committed_datasets_give_a_row_each() {
        let root = crate::default_root();
        let md = markdown(&root.join("data")).unwrap();
        assert!(md.contains("## quick") && md.contains("## full") && md.contains("| alloc-profile |"), "{md}");
    }
}
