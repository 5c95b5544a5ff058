//! A run's traces as the tree keeps them: one archive, [`ARCHIVE`]
//! (`traces.tar.zst`), written when the run is published, and unpacked on
//! first read into the run's `traces/` directory, which git ignores, so that
//! every reader sees the files as the cells wrote them, in plain text (the
//! form DHAT's viewer loads; `tar --zstd -xf traces.tar.zst` gives the same).
//!
//! Why one archive and not a file each: a run's traces repeat one another
//! (the same frame tables, cell after cell), which a file compressed alone
//! cannot use. The 600 sampled profiles of a full sampling-accuracy-transports
//! run take 9.0 MiB as git stores them (gzip each), 1.6 MiB as one zstd
//! stream with a long window, and a run is a few files in git instead of
//! hundreds (heaptrack stores its traces zstd-compressed for the same
//! reason). What a cell gzipped as it finished (events files, sampled
//! profiles) goes into the archive decompressed, so that the stream compresses
//! across them; every reader takes a trace with or without `.gz`.
//!
//! The archive is the same bytes for the same traces: entries in name
//! order, no times, owners or modes from the disk.
//!
//! # Layout
//! - [`pack`]: a staged run's `traces/` → [`ARCHIVE`] (the directory
//!   removed); [`pack_all`]: the same for the runs measured before;
//! - [`unpacked`]: where a run's traces are read from: its `traces/`
//!   directory, unpacked from the archive first if it is not there yet;
//! - [`TracesError`]: which file, which entry, what is wrong.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A run's traces, archived.
pub const ARCHIVE: &str = "traces.tar.zst";
/// A run's traces as readers see them (unpacked; ignored by git).
pub const DIR: &str = "traces";

/// zstd's level. PERF: the 52 MiB of sampled profiles of one full
/// sampling-accuracy-transports run (one core, window 2^27) took 0.8 s at
/// level 9 (2.77 MB), 1.3 s at 12 (2.58 MB), 3.8 s at 15 (2.51 MB), 10.6 s
/// at 17 (1.89 MB), 48 s at 19 (1.70 MB); unpacking takes 0.1 s at any
/// level. 17 is where the size stops paying for the time.
pub const LEVEL: i32 = 17;
/// 2^27 bytes (128 MiB): a run's traces repeat across files further apart
/// than zstd's default window; 2^27 is the largest window a decoder accepts
/// without being told to (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`).
const WINDOW_LOG: u32 = 27;

#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{archive}: entry {entry:?} is not a plain file name under {DIR}/ (an archive this workbench did not write?)"
    )]
    Entry { archive: PathBuf, entry: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TracesError + '_ {
    move |source| TracesError::Io { path: path.to_path_buf(), source }
}

/// Packs `run`'s `traces/` into [`ARCHIVE`] and removes the directory; the
/// archive's path, or `None` when the run has no traces (an empty
/// directory is removed). A `.gz` file goes in decompressed, under its
/// name without `.gz`.
pub fn pack(run: &Path) -> Result<Option<PathBuf>, TracesError> {
    let dir = run.join(DIR);
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(io(&dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
        return Ok(None);
    }
    let out = run.join(ARCHIVE);
    let tmp = run.join(format!(".{ARCHIVE}.tmp"));
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut z = zstd::stream::Encoder::new(std::io::BufWriter::new(file), LEVEL).map_err(io(&tmp))?;
    z.long_distance_matching(true).map_err(io(&tmp))?;
    z.window_log(WINDOW_LOG).map_err(io(&tmp))?;
    let mut tar = tar::Builder::new(z);
    for path in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let (name, bytes) = match name.strip_suffix(".gz") {
            Some(plain) => {
                let mut bytes = Vec::new();
                let f = std::fs::File::open(path).map_err(io(path))?;
                flate2::read::GzDecoder::new(f).read_to_end(&mut bytes).map_err(io(path))?;
                (plain.to_string(), bytes)
            }
            None => (name, std::fs::read(path).map_err(io(path))?),
        };
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_data(&mut header, format!("{DIR}/{name}"), bytes.as_slice()).map_err(io(&tmp))?;
    }
    let z = tar.into_inner().map_err(io(&tmp))?;
    z.finish().map_err(io(&tmp))?.flush().map_err(io(&tmp))?;
    std::fs::rename(&tmp, &out).map_err(io(&out))?;
    std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
    Ok(Some(out))
}

/// Whether `entry` of the run directory `run` is its traces unpacked beside
/// their archive: files git ignores, which no size of what the tree holds counts.
pub fn unpacked_beside_archive(run: &Path, entry: &Path) -> bool {
    entry.file_name().is_some_and(|n| n == DIR) && run.join(ARCHIVE).is_file()
}

/// A run [`pack_all`] packed (or would): its directory and the bytes its
/// traces took on disk before.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub run: PathBuf,
    pub bytes: u64,
}

/// Packs the traces of every finished run under `data` (a directory with a
/// manifest, two floors down) that still has them as a directory and no
/// archive: runs measured before the archive. Newest first (the newest runs
/// are what a full suite is sized by), until `limit` bytes of files have
/// left the tree (a submission's diff is bounded); with `dry_run`, nothing
/// is written.
pub fn pack_all(data: &Path, limit: Option<u64>, dry_run: bool) -> Result<Vec<Packed>, TracesError> {
    let mut runs = Vec::new();
    for exp in std::fs::read_dir(data).map_err(io(data))?.flatten() {
        let Ok(entries) = std::fs::read_dir(exp.path()) else { continue };
        for run in entries.flatten().map(|e| e.path()) {
            if run.join("manifest.json").is_file() && run.join(DIR).is_dir() && !run.join(ARCHIVE).exists() {
                runs.push(run);
            }
        }
    }
    // Run ids end in their UTC time: newest first across experiments.
    runs.sort_by(|a, b| {
        let id = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().rsplit('-').next().unwrap_or("").to_string());
        id(b).cmp(&id(a)).then_with(|| a.cmp(b))
    });
    let mut out = Vec::new();
    let mut total = 0;
    for run in runs {
        let dir = run.join(DIR);
        let mut bytes = 0;
        for e in std::fs::read_dir(&dir).map_err(io(&dir))?.flatten() {
            bytes += e.metadata().map_err(io(&e.path()))?.len();
        }
        if limit.is_some_and(|l| total + bytes > l) {
            continue;
        }
        if !dry_run {
            pack(&run)?;
        }
        total += bytes;
        out.push(Packed { run, bytes });
    }
    Ok(out)
}

/// `run`'s traces directory, unpacked from [`ARCHIVE`] first if the
/// directory is not there (a run from before the archive, or one being
/// staged, has the directory itself). A run with neither gets the
/// directory's path, which does not exist: its readers say what is missing.
/// Readers at once (the report's jobs) each unpack into a directory of
/// their own and the first to rename it into place wins.
pub fn unpacked(run: &Path) -> Result<PathBuf, TracesError> {
    static UNIQUE: AtomicU64 = AtomicU64::new(0);
    let dir = run.join(DIR);
    let archive = run.join(ARCHIVE);
    if dir.is_dir() || !archive.is_file() {
        return Ok(dir);
    }
    let tmp = run.join(format!(".{DIR}-{}-{}", std::process::id(), UNIQUE.fetch_add(1, Ordering::Relaxed)));
    let result = unpack(&archive, &tmp).and_then(|()| match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(()),
        // Another reader put it there first.
        Err(_) if dir.is_dir() => Ok(()),
        Err(source) => Err(TracesError::Io { path: dir.clone(), source }),
    });
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).ok();
    }
    result.map(|()| dir)
}

/// Writes the archive's entries into `to` (created), refusing any entry that
/// is not a file directly under `traces/`.
fn unpack(archive: &Path, to: &Path) -> Result<(), TracesError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    let file = std::fs::File::open(archive).map_err(io(archive))?;
    let z = zstd::stream::Decoder::new(file).map_err(io(archive))?;
    let mut tar = tar::Archive::new(z);
    for entry in tar.entries().map_err(io(archive))? {
        let mut entry = entry.map_err(io(archive))?;
        let path = entry.path().map_err(io(archive))?.to_string_lossy().into_owned();
        let name = path.strip_prefix(&format!("{DIR}/")).unwrap_or("");
        let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
        if !plain || entry.header().entry_type() != tar::EntryType::Regular {
            return Err(TracesError::Entry { archive: archive.to_path_buf(), entry: path });
        }
        let out = to.join(name);
        let mut f = std::fs::File::create(&out).map_err(io(&out))?;
        std::io::copy(&mut entry, &mut f).map_err(io(archive))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wb-traces-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        std::fs::create_dir_all(d.join(DIR)).unwrap();
        d
    }

    fn gzip(path: &Path, text: &str) {
        let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), Default::default());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
    }

    #[test]
    fn a_run_packed_reads_back_as_the_cells_wrote_it_and_packs_to_the_same_bytes() {
        let run = scratch("pack");
        let dhat = "{\"pps\": []}\n".repeat(1000);
        std::fs::write(run.join("traces/a-dhat-r0.dhat.json"), &dhat).unwrap();
        gzip(&run.join("traces/b-jemalloc-prof-r0-lg12.sampled.json.gz"), "sampled");
        let archive = pack(&run).unwrap().expect("traces packed");
        assert!(!run.join(DIR).exists(), "the directory leaves with its files");
        let first = std::fs::read(&archive).unwrap();
        assert!(first.len() < dhat.len() / 10, "{} bytes", first.len());

        let dir = unpacked(&run).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a-dhat-r0.dhat.json")).unwrap(), dhat);
        assert_eq!(
            std::fs::read_to_string(dir.join("b-jemalloc-prof-r0-lg12.sampled.json")).unwrap(),
            "sampled",
            "a gzipped trace comes back plain"
        );
        assert_eq!(unpacked(&run).unwrap(), dir, "unpacked once");

        // Packed again from what was unpacked (modification times differ): the same bytes.
        std::fs::remove_file(&archive).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.join("a-dhat-r0.dhat.json"), &dhat).unwrap();
        assert_eq!(std::fs::read(pack(&run).unwrap().unwrap()).unwrap(), first);
        std::fs::remove_dir_all(&run).ok();
    }

    #[test]
    fn a_run_without_traces_has_no_archive_and_readers_find_no_directory() {
        let run = scratch("none");
        assert_eq!(pack(&run).unwrap(), None);
        assert!(!run.join(DIR).exists() && !run.join(ARCHIVE).exists());
        assert!(!unpacked(&run).unwrap().exists());
        std::fs::remove_dir_all(&run).ok();
    }

    #[test]
    fn an_entry_outside_the_traces_directory_is_refused_naming_the_archive() {
        let run = scratch("hostile");
        std::fs::remove_dir_all(run.join(DIR)).unwrap();
        let archive = run.join(ARCHIVE);
        let z = zstd::stream::Encoder::new(std::fs::File::create(&archive).unwrap(), 3).unwrap();
        let mut tar = tar::Builder::new(z);
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_mode(0o644);
        tar.append_data(&mut header, "manifest.json", &b"x"[..]).unwrap();
        tar.into_inner().unwrap().finish().unwrap();
        let e = unpacked(&run).unwrap_err().to_string();
        assert!(e.contains(ARCHIVE) && e.contains("manifest.json"), "{e}");
        assert!(!run.join(DIR).exists(), "nothing left half-unpacked");
        let leftovers = std::fs::read_dir(&run).unwrap().count();
        assert_eq!(leftovers, 1, "only the archive remains");
        std::fs::remove_dir_all(&run).ok();
    }
}
