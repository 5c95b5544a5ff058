//! Runs a spec: plans its cells, builds the target binary in each variant
//! it needs, spawns one process per cell, and turns the records into a
//! dataset.
//!
//! A cell is target binary × build variant × the experiment's own axes:
//! for subject experiments (codec × payload); for server experiments, the
//! axes are the spec's `params`, which the cell walks itself (connections
//! grow within one server's life, so they cannot be separate processes).
//! Cells run interleaved (repetition → payload → codec → variant) so that
//! codecs alternate A, B, A, B rather than running in blocks; a server
//! experiment's builds (repetition → variant) alternate A, B, B, A. Each finished
//! cell's records are written to the run's staging directory at once; a run
//! that is interrupted and started again reuses them and runs only the rest.

use crate::data::dataset::{self, Record};
use crate::data::manifest::{self, Manifest};
use crate::run::build;
use crate::run::fingerprint::{self, Inputs, Sources};
use crate::run::identity;
use crate::spec::variants;
use crate::spec::{Scale, Spec, Target};
use anyhow::{bail, Context, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use probe::Cell;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Where and how a run happens.
#[derive(Debug, Clone)]
pub struct Options {
    pub root: PathBuf,
    pub data: PathBuf,
    pub scale: Scale,
    /// Ignore an interrupted run's finished cells and start over.
    pub fresh: bool,
    /// Measure a dirty tree anyway, storing its diff in the dataset.
    pub allow_dirty: bool,
    pub command_line: Vec<String>,
    /// Run the cells of exact-count builds ([`pairs_with_another`]) two at
    /// a time; every other cell runs alone.
    pub pair_counting: bool,
    /// What the records are published through (the analysis side's
    /// Parquet writer: the runner links no dataframe library).
    pub records: dataset::NewSink,
}

/// Whether a cell of `variant` may run beside another such cell: its
/// records are exact allocation counts (dhat, events), which another
/// process on the other core does not change. The allocation gate's bless
/// measures its suite this way too and its determinism map shows every
/// count that repeats alone repeating so. Timed builds, and jemalloc's
/// (its resident-memory figures), run alone.
pub fn pairs_with_another(variant: &str) -> bool {
    variants::counts_exactly(variant)
}

/// Whether `spec`'s records at `scale` depend on the machine: any build
/// that is timed or samples memory (all but dhat, whose counts are exact
/// wherever they run). Such a dataset's cells all run on one machine.
pub fn machine_bound(spec: &Spec, scale: Scale) -> bool {
    spec.variants_at(scale).iter().any(|v| v != "dhat")
}

/// One planned cell (serialised as a Slurm task's work, [`crate::run::slurm`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Planned {
    /// The cell's name ([`registry::CellId`], as text: file names and maps key by it).
    pub id: String,
    /// What the target binary runs; every line it prints is decoded into
    /// this experiment's record type ([`registry::Experiment::check_record`]).
    pub experiment: registry::Experiment,
    pub target: Target,
    pub variant: String,
    pub rep: u32,
    /// What the cell process is given (`--cell`, as JSON).
    pub cell: Cell,
    /// The fields added to each of its records: its build, repetition and axes.
    pub fields: records::CellFields,
    /// Messages it sends, for the progress bar (0: the process says).
    pub total: u64,
}

/// The cells of `spec` at `scale`, in run order.
pub fn plan(spec: &Spec, scale: Scale) -> Result<Vec<Planned>> {
    plan_with(spec, spec.scale(scale), spec.variants_at(scale))
}

/// The cells of `spec` with settings `s` (one of its tables) in builds
/// `variants`, in run order.
pub fn plan_with(spec: &Spec, s: &crate::spec::Settings, variants: &[String]) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    if spec.target == Target::DatastoreServer {
        for rep in 0..s.repetitions {
            // Builds interleaved round by round, their order reversed every
            // other round, so that no build always runs first (on a machine
            // still settling) or last (after the others warmed its caches).
            let order: Vec<&String> = match rep % 2 {
                0 => variants.iter().collect(),
                _ => variants.iter().rev().collect(),
            };
            for variant in order {
                // `work_dir` and `trace` are filled in when the cell runs.
                let cell = Cell {
                    experiment: spec.experiment,
                    codec: String::new(),
                    payload: 0,
                    messages: 0,
                    warmup: 0,
                    sample_every: 0,
                    seed: spec.seed,
                    trace: None,
                    work_dir: None,
                    params: s.params.clone(),
                };
                let id = registry::CellId::Server { experiment: spec.experiment, variant: variant.clone(), rep };
                out.push(Planned {
                    id: id.to_string(),
                    experiment: spec.experiment,
                    target: spec.target,
                    variant: variant.clone(),
                    rep,
                    cell,
                    fields: records::CellFields {
                        variant: variant.clone(),
                        rep: u64::from(rep),
                        codec: None,
                        payload: None,
                    },
                    total: 0,
                });
            }
        }
        return Ok(out);
    }
    for rep in 0..s.repetitions {
        for &payload in spec.payloads_of(s) {
            for codec in &spec.codecs {
                for variant in variants {
                    let id = registry::CellId::Subject {
                        codec: codec.clone(),
                        payload: payload as u64,
                        variant: variant.clone(),
                        rep,
                    }
                    .to_string();
                    let messages = s.messages_for(payload);
                    let cell = Cell {
                        experiment: spec.experiment,
                        codec: codec.clone(),
                        payload,
                        messages,
                        warmup: s.warmup,
                        sample_every: s.sample_every.unwrap_or((messages / 100).max(1)),
                        seed: spec.seed,
                        trace: None,
                        work_dir: None,
                        params: s.params.clone(),
                    };
                    let fields = records::CellFields {
                        variant: variant.clone(),
                        rep: u64::from(rep),
                        codec: Some(codec.clone()),
                        payload: Some(payload as u64),
                    };
                    out.push(Planned {
                        id,
                        experiment: spec.experiment,
                        target: spec.target,
                        variant: variant.clone(),
                        rep,
                        cell,
                        fields,
                        total: messages,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// FNV-1a: a stable key for "the same run" across processes and toolchains.
fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Where an unfinished run of `spec` keeps its finished cells: the same
/// spec, scale and measured code map to the same directory, so starting the
/// run again resumes it.
pub fn staging_dir(opts: &Options, spec: &Spec, inputs: &Inputs) -> Result<PathBuf> {
    // What the measured processes are built from: the git objects of the
    // measured crates and the build files. A commit that leaves them alone
    // (docs, tables, the CLI) keeps an interrupted run resumable.
    let mut measured = inputs.crates.clone();
    measured.extend(fingerprint::BUILD_FILES.map(String::from));
    let objects: Vec<String> = measured.iter().map(|p| manifest::git_object(&opts.root, p)).collect();
    let key = fnv64(format!("{}|{}|{}", serde_json::to_string(spec)?, opts.scale, objects.join(",")).as_bytes());
    Ok(opts.data.join(spec.dataset()).join(format!(".tmp-{}-{key:016x}", opts.scale)))
}

/// Target binaries built so far in this process, by target and variant.
#[derive(Default)]
pub struct Binaries {
    built: BTreeMap<(Target, String), PathBuf>,
    /// What each was compiled from (cargo's dep-info beside it).
    sources: BTreeMap<(Target, String), Sources>,
    /// Each of its binaries' identity ([`crate::run::identity`]).
    identities: BTreeMap<(Target, String), BTreeMap<String, String>>,
    /// This run's private copies of the built binaries, removed on drop.
    private: Option<PathBuf>,
}

impl Binaries {
    /// The `target` binary for `variant`: built once, then copied to a file
    /// only this run uses. NOTE: a dhat build resolves its stack frames when
    /// the process exits, by reading its own executable from disk; if a
    /// build replaces that file meanwhile, `/proc/self/exe` reads
    /// `… (deleted)`, no frame of the subject resolves, and the trace holds
    /// sites without stacks (seen on a 1M-message capnp-rpc run).
    pub fn get(&mut self, root: &Path, target: Target, variant: &str, multi: &MultiProgress) -> Result<PathBuf> {
        let key = (target, variant.to_string());
        if let Some(p) = self.built.get(&key) {
            return Ok(p.clone());
        }
        let (_, name) = target.package_and_bin();
        let sp = multi.add(ProgressBar::new_spinner());
        sp.set_message(format!("building {name} ({variant})"));
        sp.enable_steady_tick(std::time::Duration::from_millis(200));
        // NOTE: the tests build here too, so the main job reuses their builds;
        // a test run cannot swap a binary under a running measurement because
        // the run executes its private copies (below).
        let dir = root.join("target/variants");
        let log = dir.join(format!("{name}-{variant}.build.log"));
        let bin = build::build(root, &dir, target, variant, &log);
        sp.finish_and_clear();
        let bin = bin?;
        let private = self.private.get_or_insert_with(|| dir.join(format!(".run-{}", std::process::id())));
        let copy = build::copy_binaries(&bin, &private.join(format!("{name}-{variant}")), target)?;
        check_variant(&copy, variant)?;
        let all: Vec<PathBuf> = target.binaries().iter().map(|b| copy.with_file_name(b)).collect();
        self.sources.insert(key.clone(), fingerprint::sources(root, &all));
        // The stamp the binary answers is masked out of every binary of the build.
        let stamp = identity::stamp_of(&copy)?;
        let stamps: Vec<&[u8]> = stamp.iter().map(|s| s.as_bytes()).collect();
        let mut ids = BTreeMap::new();
        for b in &all {
            let id = identity::identity(b, &stamps)?;
            ids.insert(b.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), id);
        }
        self.identities.insert(key.clone(), ids);
        self.built.insert(key, copy.clone());
        Ok(copy)
    }

    /// The identities of `target`'s binaries built for `variant` (`None`
    /// until [`Binaries::get`] built them).
    pub fn identities(&self, target: Target, variant: &str) -> Option<&BTreeMap<String, String>> {
        self.identities.get(&(target, variant.to_string()))
    }

    /// What the binaries of `cells` were compiled from and their
    /// identities, as far as this process built them (`None` if it built
    /// none of them: cells run elsewhere).
    pub fn built_for(&self, cells: &[Planned]) -> Option<Built> {
        let mut out: Option<Built> = None;
        for p in cells {
            let key = (p.target, p.variant.clone());
            if let Some(s) = self.sources.get(&key) {
                let b = out.get_or_insert_with(Built::default);
                b.sources.extend(s.clone());
                if let Some(ids) = self.identities.get(&key) {
                    b.identities.insert(p.variant.clone(), ids.clone());
                }
            }
        }
        out
    }
}

impl Drop for Binaries {
    fn drop(&mut self) {
        if let Some(p) = &self.private {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// What a run's binaries were built from, and what they are.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub sources: Sources,
    /// Variant → binary → identity ([`crate::run::identity`]).
    pub identities: BTreeMap<String, BTreeMap<String, String>>,
}

/// Result of running one spec.
pub struct Outcome {
    pub dir: PathBuf,
    pub cells: usize,
    pub resumed: usize,
    pub records: usize,
    pub seconds: f64,
}

/// Runs every cell of `spec` and publishes the dataset; the run directory.
pub fn run_spec(
    opts: &Options,
    spec_path: &Path,
    spec: &Spec,
    bins: &mut Binaries,
    multi: &MultiProgress,
) -> Result<Outcome> {
    run_spec_where(opts, spec_path, spec, bins, multi, &|_| true)
}

/// [`run_spec`] with only the planned cells `keep` accepts (a bisection
/// measures one cell per commit).
pub fn run_spec_where(
    opts: &Options,
    spec_path: &Path,
    spec: &Spec,
    bins: &mut Binaries,
    multi: &MultiProgress,
    keep: &dyn Fn(&Planned) -> bool,
) -> Result<Outcome> {
    let (mut cells, staging, before) = prepare(opts, spec_path, spec)?;
    cells.retain(|p| keep(p));
    if cells.is_empty() {
        bail!("{}: no planned cell is selected", spec_path.display());
    }
    let resumed = run_cells(opts, spec, &cells, &staging, &before.rev, bins, multi)?;
    let built = bins.built_for(&cells);
    assemble(opts, spec_path, spec, &cells, &staging, resumed, before, built, true)
}

/// A run's start, whatever runs its cells: the cells planned, the staging
/// directory (created; emptied first with `--fresh`) and the moment.
pub(crate) fn prepare(opts: &Options, spec_path: &Path, spec: &Spec) -> Result<(Vec<Planned>, PathBuf, Before)> {
    let start = Instant::now();
    let cells = plan(spec, opts.scale)?;
    let (rev, _) = manifest::git_state(&opts.root);
    // What the run depends on, once: the dirty refusal, the staging key,
    // the stored diff and the fingerprint all read it.
    let inputs = Inputs::of(&opts.root, spec_path, spec, opts.scale)?;
    // Dirty means a file this run measures differs from HEAD; nothing else.
    let dirty = !crate::run::provenance::check_clean(&opts.root, opts.allow_dirty, spec_path, &inputs)?.is_empty();
    let staging = staging_dir(opts, spec, &inputs)?;
    let before = Before {
        start,
        load: crate::run::provenance::load_average(),
        ticks: crate::run::provenance::cpu_ticks(),
        rev,
        dirty,
        inputs,
    };
    if opts.fresh && staging.exists() {
        std::fs::remove_dir_all(&staging).with_context(|| format!("removing {}", staging.display()))?;
    }
    for sub in ["cells", "traces", "logs"] {
        let d = staging.join(sub);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    Ok((cells, staging, before))
}

/// The cells a run carries over from an earlier run instead of measuring
/// them (`run --stale` on a count-only dataset whose other builds are
/// unchanged), kept in the staging directory until the manifest names them:
/// cell → the revision it was measured at.
const CARRIED: &str = "carried.json";

/// Puts the cells `carry` of the finished run in `old` into `spec`'s
/// staging directory as finished cells, so that the run measures only the
/// others: their records (`rows`, the old run's records read back by the
/// caller as objects of their non-null fields, in order), traces and logs,
/// and each cell's time. Exact counts do not depend on when or where a cell
/// ran, so only a dataset that is not [`machine_bound`] (its every cell an
/// exact count) may carry cells; any other is refused. The number of cells
/// carried.
pub fn carry(
    opts: &Options,
    spec: &Spec,
    old: &Path,
    carry: &[String],
    rows: &[serde_json::Map<String, serde_json::Value>],
) -> Result<usize> {
    if machine_bound(spec, opts.scale) {
        bail!(
            "{}: its builds ({}) are timed or sample memory; such a dataset is measured whole, never carried",
            spec.dataset(),
            spec.variants_at(opts.scale).join(", ")
        );
    }
    let m = dataset::load_run_manifest(old)?;
    let cells = plan(spec, opts.scale)?;
    let spec_path = opts.root.join(&m.spec_path);
    let staging = staging_dir(opts, spec, &Inputs::of(&opts.root, &spec_path, spec, opts.scale)?)?;
    for sub in ["cells", "traces", "logs"] {
        let d = staging.join(sub);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    let carried_path = staging.join(CARRIED);
    let mut carried: BTreeMap<String, String> = match std::fs::read_to_string(&carried_path) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("reading {}", carried_path.display()))?,
        Err(_) => BTreeMap::new(),
    };
    let mut decoded = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let line = serde_json::to_string(row)?;
        decoded.push(
            Record::decode(spec.experiment, &line)
                .with_context(|| format!("{}: row {} does not read back as a record", old.display(), i + 1))?,
        );
    }
    let mut n = 0;
    for p in cells.iter().filter(|p| carry.contains(&p.id)) {
        if !m.cells.contains(&p.id) {
            bail!("{}: cell {} is not in the run it would be carried from", old.display(), p.id);
        }
        let records: Vec<Record> = decoded.iter().filter(|r| r.cell == p.fields).cloned().collect();
        if records.is_empty() {
            bail!("{}: no records of cell {} to carry", old.display(), p.id);
        }
        for sub in ["traces", "logs"] {
            let from = if sub == "traces" { crate::data::traces::unpacked(old)? } else { old.join(sub) };
            let Ok(entries) = std::fs::read_dir(from) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("{}.", p.id)) {
                    let to = staging.join(sub).join(&name);
                    std::fs::copy(e.path(), &to).with_context(|| format!("copying {}", e.path().display()))?;
                }
            }
        }
        let meta = CellMeta { seconds: m.cell_seconds.get(&p.id).copied().unwrap_or(0.0), node: None, records: None };
        write_cell(&staging, &p.id, &records, &meta)?;
        let at = m.carried.get(&p.id).cloned().unwrap_or_else(|| m.git_revision.clone());
        carried.insert(p.id.clone(), at);
        n += 1;
    }
    dataset::write_atomic(&carried_path, serde_json::to_string_pretty(&carried)?.as_bytes())?;
    Ok(n)
}

/// What a run records of the moment it started.
pub(crate) struct Before {
    pub start: Instant,
    pub load: Option<[f64; 3]>,
    /// Every process's CPU ticks (empty: busy processes are not looked for).
    pub ticks: BTreeMap<u32, (u64, String)>,
    pub rev: String,
    pub dirty: bool,
    /// What the run depends on ([`Inputs`]), computed once.
    pub inputs: Inputs,
}

/// What the runner keeps beside a finished cell's records: its wall time
/// and, for a cell run elsewhere (a Slurm task), the node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellMeta {
    pub seconds: f64,
    #[serde(default)]
    pub node: Option<manifest::Node>,
    /// Records written: a resumed run checks the file still holds them all.
    #[serde(default)]
    pub records: Option<usize>,
}

fn cell_file(staging: &Path, id: &str, ext: &str) -> PathBuf {
    staging.join("cells").join(format!("{id}.{ext}"))
}

/// Whether a cell's records are on disk (the cell is done).
pub(crate) fn cell_done(staging: &Path, id: &str) -> bool {
    cell_file(staging, id, "jsonl").exists()
}

/// Writes a finished cell: its meta first, then its records, whose file
/// marks the cell done (each written whole, through a rename).
pub(crate) fn write_cell(staging: &Path, id: &str, records: &[Record], meta: &CellMeta) -> Result<()> {
    let meta = CellMeta { records: Some(records.len()), ..meta.clone() };
    dataset::write_atomic(&cell_file(staging, id, "meta.json"), serde_json::to_string(&meta)?.as_bytes())?;
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    dataset::write_atomic(&cell_file(staging, id, "jsonl"), text.as_bytes())
}

/// Why a finished cell's files cannot be used as they are, if they cannot:
/// a line that does not decode into the experiment's record type (a file
/// cut mid-line by a kill, say), or fewer or more records than its meta
/// says were written.
pub(crate) fn cell_damage(staging: &Path, p: &Planned) -> Option<String> {
    let path = cell_file(staging, &p.id, "jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return Some(format!("{}: {e}", path.display())),
    };
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        // The runner's own record for a stage it could not build, or the cell's.
        if let Err(e) = Record::decode(p.experiment, line) {
            return Some(format!("{}:{}: {e}", path.display(), i + 1));
        }
        n += 1;
    }
    let meta = std::fs::read_to_string(cell_file(staging, &p.id, "meta.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<CellMeta>(&t).ok());
    match meta.and_then(|m| m.records) {
        Some(want) if want != n => Some(format!("{}: {n} records, its meta says {want}", path.display())),
        _ if n == 0 => Some(format!("{}: no records", path.display())),
        _ => None,
    }
}

/// The cells of `done` whose meta names a machine other than `here`, or
/// none (a cell finished before cells recorded their machine), with that
/// machine as a phrase.
fn measured_elsewhere(staging: &Path, done: &[&str], here: &manifest::Node) -> Vec<(String, String)> {
    done.iter()
        .filter_map(|id| {
            let meta = std::fs::read_to_string(cell_file(staging, id, "meta.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<CellMeta>(&t).ok());
            match meta.and_then(|m| m.node) {
                Some(n) if n.same_machine(here) => None,
                Some(n) => Some((id.to_string(), format!("{} ({})", n.hostname, n.cpu_model))),
                None => Some((id.to_string(), "a machine it did not record".to_string())),
            }
        })
        .collect()
}

/// Runs each cell not already on disk in `staging/cells/` (a resumed run
/// skips those), with a progress bar; the number skipped.
fn run_cells(
    opts: &Options,
    spec: &Spec,
    cells: &[Planned],
    staging: &Path,
    rev: &str,
    bins: &mut Binaries,
    multi: &MultiProgress,
) -> Result<usize> {
    let overall = multi.add(ProgressBar::new(cells.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} cells {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    overall.set_prefix(spec.dataset().to_string());
    // A machine-bound run resumed on another machine starts over: its
    // figures would otherwise mix two machines in one table.
    let here = manifest::Node::this();
    if machine_bound(spec, opts.scale) {
        let done: Vec<&str> = cells.iter().map(|p| p.id.as_str()).filter(|id| cell_done(staging, id)).collect();
        let elsewhere = measured_elsewhere(staging, &done, &here);
        if let Some((id, machine)) = elsewhere.first() {
            say(
                multi,
                format!(
                    "{}: {} of {} finished cells (e.g. {id}) were measured on {machine}, this is {} ({}): \
                     a timed dataset is measured on one machine, starting it over",
                    spec.dataset(),
                    elsewhere.len(),
                    done.len(),
                    here.hostname,
                    here.cpu_model
                ),
            );
            for sub in ["cells", "traces", "logs"] {
                let d = staging.join(sub);
                std::fs::remove_dir_all(&d).with_context(|| format!("removing {}", d.display()))?;
                std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            }
        }
    }
    // A finished cell whose records do not decode (cut by a kill) is run
    // again, never a dead end.
    for p in cells.iter().filter(|p| cell_done(staging, &p.id)) {
        if let Some(why) = cell_damage(staging, p) {
            say(multi, format!("{}: cell {} is damaged ({why}); running it again", spec.dataset(), p.id));
            for ext in ["jsonl", "meta.json"] {
                let f = cell_file(staging, &p.id, ext);
                std::fs::remove_file(&f).with_context(|| format!("removing {}", f.display()))?;
            }
        }
    }
    // Cells an interrupted run finished are skipped (a resumed run).
    let already: std::collections::BTreeSet<&str> =
        cells.iter().filter(|p| cell_file(staging, &p.id, "jsonl").exists()).map(|p| p.id.as_str()).collect();
    let resumed = already.len();
    overall.inc(resumed as u64);
    if resumed > 0 {
        say(multi, format!("{}: resuming, {resumed} of {} cells already done", spec.dataset(), cells.len()));
    }
    // Exact-count cells first, two at a time (their order does not matter:
    // their records do not depend on time); then the rest, alone, in order.
    if opts.pair_counting {
        let pending: Vec<&Planned> =
            cells.iter().filter(|p| pairs_with_another(&p.variant) && !already.contains(p.id.as_str())).collect();
        for pair in pending.chunks(2) {
            let mut bin = Vec::with_capacity(2);
            for p in pair {
                let b = bins.get(&opts.root, p.target, &p.variant, multi)?;
                check_revision(&b, rev)?;
                bin.push(b);
            }
            overall.set_message(pair.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(" + "));
            let done: Vec<Result<(Vec<Record>, f64)>> = std::thread::scope(|sc| {
                let hs: Vec<_> = pair
                    .iter()
                    .zip(&bin)
                    .map(|(p, b)| {
                        sc.spawn(move || {
                            let t = Instant::now();
                            run_cell(b, p, staging, multi).map(|r| (r, t.elapsed().as_secs_f64()))
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a cell's thread panicked"))))
                    .collect()
            });
            for (p, d) in pair.iter().zip(done) {
                let (records, seconds) = d?;
                write_cell(staging, &p.id, &records, &CellMeta { seconds, node: Some(here.clone()), records: None })?;
                overall.inc(1);
                if multi.is_hidden() {
                    eprintln!(
                        "{}: cell {} done (beside another): {} records in {seconds:.1} s",
                        spec.dataset(),
                        p.id,
                        records.len()
                    );
                }
            }
        }
    }
    for p in cells {
        let out = cell_file(staging, &p.id, "jsonl");
        // Resumed, or run above beside another.
        if out.exists() {
            continue;
        }
        let bin = match bins.get(&opts.root, p.target, &p.variant, multi) {
            Ok(b) => b,
            // A profile-guided or post-linked stage may fail in a tool this
            // machine lacks: the dataset says so with the tool's error.
            Err(e) if variants::get(&p.variant).is_some_and(|v| v.pgo || v.bolt) => {
                say(multi, format!("{}: {} not built: {e:#}", spec.dataset(), p.variant));
                let failed = records::runner::BuildFailed { error: format!("{e:#}") };
                let r = Record { record: registry::AnyRecord::BuildFailed(failed), cell: p.fields.clone() };
                dataset::write_atomic(&out, format!("{}\n", serde_json::to_string(&r)?).as_bytes())?;
                overall.inc(1);
                continue;
            }
            Err(e) => return Err(e),
        };
        check_revision(&bin, rev)?;
        overall.set_message(p.id.clone());
        let t = Instant::now();
        let records = run_cell(&bin, p, staging, multi)?;
        write_cell(
            staging,
            &p.id,
            &records,
            &CellMeta { seconds: t.elapsed().as_secs_f64(), node: Some(here.clone()), records: None },
        )?;
        overall.inc(1);
        if multi.is_hidden() {
            eprintln!(
                "{}: cell {} done: {} records in {:.1} s",
                spec.dataset(),
                p.id,
                records.len(),
                t.elapsed().as_secs_f64()
            );
        }
    }
    overall.finish_and_clear();
    Ok(resumed)
}

/// Every cell is on disk: assembles the records and the manifest in the
/// staging directory, packs its traces into one archive
/// ([`crate::data::traces::pack`]), then publishes it as the run's directory. `sources`:
/// what the binaries were compiled from, when this process built them
/// (a resumed run whose cells were all done builds none: the fingerprint
/// then says its sources are not known). `local`: the cells ran in this
/// process (not as Slurm tasks).
#[allow(clippy::too_many_arguments)]
pub(crate) fn assemble(
    opts: &Options,
    spec_path: &Path,
    spec: &Spec,
    cells: &[Planned],
    staging: &Path,
    resumed: usize,
    before: Before,
    built: Option<Built>,
    local: bool,
) -> Result<Outcome> {
    let Before { start, load: load_before, ticks: ticks_before, rev, dirty, inputs } = before;
    let exp_dir = opts.data.join(spec.dataset());
    let mut sink = (opts.records)();
    let mut n_records = 0;
    let (mut cell_seconds, mut nodes) = (BTreeMap::new(), BTreeMap::new());
    for p in cells {
        // A cell finished before meta files were kept has none.
        if let Ok(text) = std::fs::read_to_string(cell_file(staging, &p.id, "meta.json")) {
            let meta: CellMeta = serde_json::from_str(&text)
                .with_context(|| format!("{}", cell_file(staging, &p.id, "meta.json").display()))?;
            cell_seconds.insert(p.id.clone(), meta.seconds);
            if let Some(n) = meta.node {
                nodes.insert(p.id.clone(), n);
            }
        }
        let path = cell_file(staging, &p.id, "jsonl");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let r = Record::decode(p.experiment, line).with_context(|| format!("{}:{}", path.display(), i + 1))?;
            sink.push(&r).with_context(|| format!("{}:{}", path.display(), i + 1))?;
            n_records += 1;
        }
    }
    // A local run whose every cell ran here: the manifest's own machine says
    // it all. (Slurm tasks name their node even when it is this machine.)
    let here = manifest::Node::this();
    if local && nodes.values().all(|n| n.same_machine(&here)) {
        nodes.clear();
    }
    let secs_run = start.elapsed().as_secs_f64();
    // Cells that ran elsewhere (Slurm tasks) leave nothing to compare here.
    let busy = if ticks_before.is_empty() {
        Vec::new()
    } else {
        crate::run::provenance::busy_between(
            &ticks_before,
            &crate::run::provenance::cpu_ticks(),
            secs_run,
            &[std::process::id()],
        )
    };
    let load_after = crate::run::provenance::load_average();
    let dirty_diff = if dirty {
        let changed = crate::run::provenance::changed_among(&opts.root, &inputs.paths());
        let diff = crate::run::provenance::diff_of(&opts.root, &changed)?;
        dataset::write_atomic(&staging.join("dirty.diff"), diff.as_bytes())?;
        Some("dirty.diff".to_string())
    } else {
        None
    };
    sink.finish(&staging.join(dataset::RECORDS))?;
    let secs = manifest::now_secs();
    let run_id = format!("{}-{}", opts.scale, manifest::compact_date(secs));
    let Built { sources, identities } = built.unwrap_or_else(|| Built {
        sources: Sources {
            files: Default::default(),
            without_dep_info: cells.iter().map(|p| format!("{}-{}", p.target.measured(), p.variant)).collect(),
        },
        identities: BTreeMap::new(),
    });
    let carried: BTreeMap<String, String> = match std::fs::read_to_string(staging.join(CARRIED)) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("reading {}", staging.join(CARRIED).display()))?,
        Err(_) => BTreeMap::new(),
    };
    let rustc = manifest::rustc_version(&opts.root);
    let at = (!dirty).then_some(rev.as_str());
    let fingerprint = fingerprint::compute(&opts.root, &inputs, &sources, spec, opts.scale, &rustc, at)
        .context("fingerprinting the run's inputs")?;
    let m = Manifest {
        // The dataset's name: two studies of one subject experiment stay apart.
        experiment: spec.dataset().to_string(),
        run_id: run_id.clone(),
        scale: opts.scale,
        git_revision: rev,
        git_dirty: dirty,
        rustc,
        profile: variants::PROFILE.into(),
        features: spec
            .variants_at(opts.scale)
            .iter()
            .map(|v| (v.clone(), variants::features(v).iter().map(|f| f.to_string()).collect()))
            .collect(),
        allocators: spec
            .variants_at(opts.scale)
            .iter()
            .map(|v| (v.clone(), variants::allocator(v).to_string()))
            .collect(),
        builds: spec.variants_at(opts.scale).iter().map(|v| (v.clone(), variants::describe(v))).collect(),
        target_cpus: spec.variants_at(opts.scale).iter().map(|v| (v.clone(), variants::target_cpu(v).into())).collect(),
        reference_fallback: variants::reference_fallback(),
        cpu_model: manifest::cpu_model(),
        cores: manifest::cores(),
        kernel: manifest::kernel(),
        date: manifest::iso_date(secs),
        command_line: opts.command_line.clone(),
        spec_path: spec_path.strip_prefix(&opts.root).unwrap_or(spec_path).display().to_string(),
        spec: spec.clone(),
        cells: cells.iter().map(|p| p.id.clone()).collect(),
        cells_resumed: resumed,
        records: n_records,
        load_before,
        load_after,
        busy_processes: busy,
        dirty_diff,
        cell_seconds,
        nodes,
        fingerprint: Some(fingerprint),
        binaries: identities,
        certified: Vec::new(),
        carried,
    };
    dataset::write_atomic(&staging.join("manifest.json"), serde_json::to_string_pretty(&m)?.as_bytes())?;
    std::fs::remove_dir_all(staging.join("cells")).ok();
    std::fs::remove_file(staging.join(CARRIED)).ok();
    crate::data::traces::pack(staging)?;
    let dir = exp_dir.join(&run_id);
    dataset::publish(staging, &dir)?;
    Ok(Outcome { dir, cells: cells.len(), resumed, records: n_records, seconds: start.elapsed().as_secs_f64() })
}

/// The subject about to run must have been built from the revision the
/// manifest will name (a build racing the run, or a stale binary, is refused).
pub(crate) fn check_revision(bin: &Path, rev: &str) -> Result<()> {
    let (_, built) = ask(bin, "--revision")?;
    if built != rev {
        bail!("{} was built from revision {built}, but the tree is at {rev}; it must be rebuilt", bin.display());
    }
    Ok(())
}

/// A binary built for `variant` must say it is that build (its allocator,
/// which every manifest names): a feature that selected another allocator,
/// or none, is refused before any cell runs.
fn check_variant(bin: &Path, variant: &str) -> Result<()> {
    let (status, built) = ask(bin, "--variant")?;
    let want = variants::probe_variant(variant);
    if !status.success() || built != want {
        bail!(
            "{} was built as the `{variant}` variant but says it is `{built}` (exit {status}), not `{want}`",
            bin.display()
        );
    }
    Ok(())
}

/// What a measured binary answers to one of its flags
/// (`probe::cell::Invocation`): its exit status and its trimmed output.
fn ask(bin: &Path, flag: &str) -> Result<(std::process::ExitStatus, String)> {
    let out = Command::new(bin).arg(flag).output().with_context(|| format!("running {} {flag}", bin.display()))?;
    Ok((out.status, String::from_utf8_lossy(&out.stdout).trim().to_string()))
}

pub fn say(multi: &MultiProgress, line: String) {
    if multi.is_hidden() {
        eprintln!("{line}");
    } else {
        let _ = multi.println(line);
    }
}

/// Spawns one cell's process and returns its records with the cell's fields added.
pub fn run_cell(bin: &Path, p: &Planned, staging: &Path, multi: &MultiProgress) -> Result<Vec<Record>> {
    let mut cell = p.cell.clone();
    // The counting builds write their file where the cell says.
    let trace = match p.variant.as_str() {
        "dhat" => Some("dhat.json"),
        "events" => Some("events.json"),
        // sampling-accuracy's children write `<id>-lg<N>.sampled.json` beside it.
        "jemalloc-prof" => Some("sampled.json"),
        _ => None,
    };
    if let Some(ext) = trace {
        cell.trace = Some(staging.join("traces").join(format!("{}.{ext}", p.id)));
    }
    // A server cell's scratch data (a loaded table) lives only as long as the cell.
    // NOTE: the pid zero-padded, so that the path's length (which the
    // server allocates when it opens a part) is the same in every run: the
    // allocation gate compares bytes exactly.
    let work = std::env::temp_dir().join(format!("workbench-{:010}-{}", std::process::id(), p.id));
    if p.target == Target::DatastoreServer {
        cell.work_dir = Some(work.clone());
    }
    let mut cmd = Command::new(bin);
    cmd.arg("--cell");
    let bar = multi.add(ProgressBar::new(p.total));
    bar.set_style(ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} {msg}").expect("static template"));
    bar.set_prefix(p.id.clone());
    let mut child = cmd
        .arg(serde_json::to_string(&cell)?)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", bin.display()))?;
    let stderr = child.stderr.take().context("subject stderr")?;
    let log_path = staging.join("logs").join(format!("{}.log", p.id));
    let progress = bar.clone();
    let log_thread = std::thread::spawn(move || -> Vec<String> {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut it = line.split_whitespace();
            if let (Some("progress"), Some(done), Some(total)) = (it.next(), it.next(), it.next()) {
                if let (Ok(d), Ok(t)) = (done.parse(), total.parse()) {
                    progress.set_length(t);
                    progress.set_position(d);
                    continue;
                }
            }
            lines.push(line);
        }
        lines
    });
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().context("subject stdout")?, &mut stdout)?;
    let status = child.wait()?;
    let log = log_thread.join().unwrap_or_default();
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    bar.finish_and_clear();
    std::fs::write(&log_path, log.join("\n") + "\n").with_context(|| format!("writing {}", log_path.display()))?;
    if !status.success() {
        let tail: Vec<&String> = log.iter().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        bail!(
            "cell {} failed ({status}); log {}:\n{}",
            p.id,
            log_path.display(),
            tail.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
        );
    }
    // The files a cell writes many of, gzipped (a tenth of their size):
    // `<id>.events.json`, a server cell's `<id>-<workload>.events.json`, a
    // sampling-accuracy cell's `<id>-lg<N>.sampled.json`. Their readers
    // take either.
    let gzipped = match p.variant.as_str() {
        "events" => Some(".events.json"),
        "jemalloc-prof" => Some(".sampled.json"),
        _ => None,
    };
    if let Some(ext) = gzipped {
        let dir = staging.join("traces");
        for f in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let f = f?.path();
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.ends_with(ext) && (name == format!("{}{ext}", p.id) || name.starts_with(&format!("{}-", p.id))) {
                dataset::gzip_in_place(&f)?;
            }
        }
    }
    let mut records = Vec::new();
    for (i, line) in stdout.lines().enumerate() {
        let record = p.experiment.decode_record(line).with_context(|| {
            format!(
                "cell {}: stdout line {} is not a {} record (log {})",
                p.id,
                i + 1,
                p.experiment,
                log_path.display()
            )
        })?;
        records.push(Record { record, cell: p.fields.clone() });
    }
    if records.is_empty() {
        bail!("cell {} printed no records; log {}", p.id, log_path.display());
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, cpu: &str) -> manifest::Node {
        manifest::Node { hostname: host.into(), cpu_model: cpu.into(), cores: 2, kernel: "k".into(), load: None }
    }

    #[test]
    fn cells_measured_on_another_machine_are_found() {
        let staging = std::env::temp_dir().join(format!("wb-runner-elsewhere-{}", std::process::id()));
        std::fs::create_dir_all(staging.join("cells")).unwrap();
        let here = node("a", "AMD EPYC");
        let meta = |id: &str, n: Option<manifest::Node>| {
            let m = CellMeta { seconds: 1.0, node: n, records: None };
            write_cell(&staging, id, &[], &m).unwrap();
        };
        // Same host and CPU, other load and kernel: the same machine.
        meta("same", Some(manifest::Node { load: Some([1.0; 3]), kernel: "other".into(), ..here.clone() }));
        meta("other-host", Some(node("b", "AMD EPYC")));
        meta("other-cpu", Some(node("a", "Intel Xeon")));
        meta("unrecorded", None);
        let ids = ["same", "other-host", "other-cpu", "unrecorded"];
        let found: Vec<String> = measured_elsewhere(&staging, &ids, &here).into_iter().map(|(id, _)| id).collect();
        std::fs::remove_dir_all(&staging).unwrap();
        assert_eq!(found, ["other-host", "other-cpu", "unrecorded"]);
    }

    #[test]
    fn a_server_experiments_builds_alternate_round_by_round() {
        let text = "experiment = \"build-stages\"\ntarget = \"datastore-server\"\nvariants = [\"o3\", \"thinlto\", \"fatlto\"]\n[quick]\nrepetitions = 3\n[full]\n";
        let spec = Spec::parse(text, Path::new("b.toml")).unwrap();
        let order: Vec<(u32, String)> =
            plan(&spec, Scale::Quick).unwrap().into_iter().map(|c| (c.rep, c.variant)).collect();
        let want = [(0, "o3"), (0, "thinlto"), (0, "fatlto"), (1, "fatlto"), (1, "thinlto"), (1, "o3")];
        let want: Vec<(u32, String)> =
            want.iter().chain(&[(2, "o3"), (2, "thinlto"), (2, "fatlto")]).map(|(r, v)| (*r, v.to_string())).collect();
        assert_eq!(order, want);
    }

    #[test]
    fn only_count_only_specs_may_span_machines() {
        let spec = |variants: &str| {
            let text = format!(
                "experiment = \"alloc-profile\"\ncodecs = [\"zap\"]\npayloads = [64]\nvariants = {variants}\n[quick]\nmessages = 5\n[full]\nmessages = 5\n"
            );
            Spec::parse(&text, Path::new("a.toml")).unwrap()
        };
        assert!(!machine_bound(&spec("[\"dhat\"]"), Scale::Quick));
        assert!(machine_bound(&spec("[\"dhat\", \"jemalloc\"]"), Scale::Quick));
        assert!(machine_bound(&spec("[\"system\"]"), Scale::Full));
    }
}
