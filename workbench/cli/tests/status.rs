//! `workbench status` on a worktree of HEAD: fingerprints made from the
//! dep-info cargo wrote beside the subject and server binaries of this
//! build, then edits in the worktree. Editing a codec makes the codec
//! experiment stale and not the server's; editing the README makes nothing
//! stale; editing a spec makes its experiment stale; a manifest without a
//! fingerprint is unknown; `status --check` fails on a stale cited dataset.

use analysis::run::fingerprint::{self, Freshness};
use analysis::spec::{Scale, Spec};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The directory this build's binaries are in (`target/release`).
fn bin_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().to_path_buf()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").current_dir(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A committed quick manifest of `dataset`, with `fp` (or none), as the
/// newest run of a scratch data directory.
fn plant(wt: &Path, data: &Path, dataset: &str, fp: Option<&fingerprint::Fingerprint>) {
    plant_with(wt, data, dataset, fp, false)
}

/// [`plant`], with its binaries' identities on record when `identities`.
fn plant_with(wt: &Path, data: &Path, dataset: &str, fp: Option<&fingerprint::Fingerprint>, identities: bool) {
    let committed = std::fs::read_dir(wt.join("data").join(dataset))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("quick-") && p.join("manifest.json").exists())
        .unwrap_or_else(|| panic!("a committed quick run of {dataset}"));
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(committed.join("manifest.json")).unwrap()).unwrap();
    m["git_revision"] = git(wt, &["rev-parse", "HEAD"]).into();
    match fp {
        Some(fp) => m["fingerprint"] = serde_json::to_value(fp).unwrap(),
        None => {
            m.as_object_mut().unwrap().remove("fingerprint");
        }
    }
    if identities {
        m["binaries"] = serde_json::json!({"dhat": {"subject": "0123"}});
    } else {
        m.as_object_mut().unwrap().remove("binaries");
    }
    let run = data.join(dataset).join("quick-20990101T000000Z");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("manifest.json"), serde_json::to_string(&m).unwrap()).unwrap();
    std::fs::copy(committed.join("records.parquet"), run.join("records.parquet")).unwrap();
}

/// `workbench status --check` over `data` in the tree `wt`: (passed, stdout, stderr).
fn status_check(wt: &Path, data: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args(["--root", wt.to_str().unwrap(), "--data", data.to_str().unwrap(), "status", "--check"])
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn verdict(wt: &Path, data: &Path, dataset: &str) -> Freshness {
    let all = fingerprint::survey(wt, data, &[Scale::Quick]).unwrap();
    let e = all.into_iter().find(|e| e.dataset == dataset).unwrap();
    assert!(e.cited, "{dataset}: its only run is the one readers are shown");
    e.freshness.unwrap()
}

#[test]
fn status_follows_exactly_the_measured_inputs() {
    let root = repo_root();
    let scratch = std::env::temp_dir().join(format!("wb-status-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let wt = scratch.join("head");
    git(&root, &["worktree", "add", "--detach", "--quiet", wt.to_str().unwrap(), "HEAD"]);
    let data = scratch.join("data");

    let subject = fingerprint::sources(&root, &[bin_dir().join("subject")]);
    let server = fingerprint::sources(&root, &[bin_dir().join("datastore-load"), bin_dir().join("datastore-server")]);
    let json = "workbench/stacks/src/codecs/json.rs";
    assert!(
        subject.without_dep_info.is_empty() && server.without_dep_info.is_empty(),
        "no dep-info beside the binaries in {}: `cargo build --release --workspace` writes it (a test build does \
         not; scripts/test.sh runs the build first)",
        bin_dir().display()
    );
    assert!(subject.files.contains(json), "{:?}", subject.files);
    assert!(!server.files.contains(json) && server.files.contains("workbench/datastore/src/storage/table.rs"));
    assert!(subject.files.iter().all(|f| !f.starts_with("target/") && !f.starts_with(".git/")));

    let rustc = analysis::data::manifest::rustc_version(&wt);
    let fp = |name: &str, sources: &fingerprint::Sources| {
        let path = wt.join(format!("experiments/{name}.toml"));
        let spec = Spec::load(&path).unwrap();
        let inputs = fingerprint::Inputs::of(&wt, &path, &spec, Scale::Quick).unwrap();
        fingerprint::compute(&wt, &inputs, sources, &spec, Scale::Quick, &rustc, None).unwrap()
    };
    let (codec_fp, server_fp) = (fp("heap-growth", &subject), fp("throughput", &server));
    assert!(server_fp.inputs.contains_key("file:scripts/chdb_engine.py"), "a peer script the cells run");
    plant(&wt, &data, "heap-growth", Some(&codec_fp));
    plant(&wt, &data, "throughput", Some(&server_fp));
    plant(&wt, &data, "transport-alloc", None);
    assert_eq!(verdict(&wt, &data, "heap-growth"), Freshness::Fresh);
    assert_eq!(verdict(&wt, &data, "throughput"), Freshness::Fresh);
    assert!(matches!(verdict(&wt, &data, "transport-alloc"), Freshness::Unknown(_)));

    // A codec edited: the codec experiment is stale, the server's is not.
    let codec = wt.join(json);
    let text = std::fs::read_to_string(&codec).unwrap();
    std::fs::write(&codec, format!("{text}\n// an edit\n")).unwrap();
    assert_eq!(
        verdict(&wt, &data, "heap-growth"),
        Freshness::Stale(vec![(format!("src:{json}"), "uncommitted".into())])
    );
    assert_eq!(verdict(&wt, &data, "throughput"), Freshness::Fresh);
    // What a reader is shown: the stale table's caption and its claims say
    // so first; the fresh one's say nothing.
    let a = analysis::report::analyse(&wt, &data, Scale::Quick).unwrap();
    let caption = |name: &str| a.tables.iter().find(|t| t.name == name).unwrap().caption.clone();
    let stale = caption("heap-growth");
    assert!(stale.starts_with("STALE: ") && stale.contains(&format!("src:{json}")), "{stale}");
    assert!(!caption("throughput").contains("STALE"), "{}", caption("throughput"));
    assert!(caption("transport-alloc").starts_with("STALE: "), "a run without a fingerprint is stale to a reader");
    // `status --check` fails, naming it.
    let (ok, stdout, stderr) = status_check(&wt, &data);
    assert!(!ok && stderr.contains("heap-growth (quick: stale"), "{stderr}");
    assert!(stdout.contains("stale"));
    // With its binaries' identities on record, a source edit is only a
    // question for `run --stale` (build and compare), not a verdict.
    plant_with(&wt, &data, "heap-growth", Some(&codec_fp), true);
    assert_eq!(
        verdict(&wt, &data, "heap-growth"),
        Freshness::Sources(vec![(format!("src:{json}"), "uncommitted".into())])
    );
    let (ok, _, stderr) = status_check(&wt, &data);
    assert!(!ok && stderr.contains("heap-growth (quick: sources"), "{stderr}");
    plant(&wt, &data, "heap-growth", Some(&codec_fp));
    // An input that cannot be computed here is unknown, naming it and why,
    // never a change: cargo metadata fails with a cargo home that has no
    // registry cache.
    let empty_home = scratch.join("empty-cargo-home");
    std::fs::create_dir_all(&empty_home).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args(["--root", wt.to_str().unwrap(), "--data", data.to_str().unwrap(), "status", "--scale", "quick"])
        .env("CARGO_HOME", &empty_home)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with("throughput ")).unwrap_or_default();
    assert!(line.contains("unknown") && line.contains("features cannot be computed here"), "{stdout}");
    // Committed: the first commit that changed it is named.
    git(&wt, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "an edit"]);
    let edit = git(&wt, &["rev-parse", "--short", "HEAD"]);
    assert_eq!(verdict(&wt, &data, "heap-growth"), Freshness::Stale(vec![(format!("src:{json}"), edit)]));
    git(&wt, &["reset", "--quiet", "--hard", "HEAD~1"]);
    assert_eq!(verdict(&wt, &data, "heap-growth"), Freshness::Fresh);

    // The README: nothing is stale.
    std::fs::write(wt.join("README.md"), "changed\n").unwrap();
    assert_eq!(verdict(&wt, &data, "heap-growth"), Freshness::Fresh);
    assert_eq!(verdict(&wt, &data, "throughput"), Freshness::Fresh);

    // The spec: its experiment is stale (a comment alone is not a change).
    let spec = wt.join("experiments/heap-growth.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("# a comment\n{text}")).unwrap();
    assert_eq!(verdict(&wt, &data, "heap-growth"), Freshness::Fresh);
    std::fs::write(&spec, text.replace("seed = ", "seed = 1")).unwrap();
    match verdict(&wt, &data, "heap-growth") {
        Freshness::Stale(changed) => assert_eq!(changed[0].0, "spec"),
        other => panic!("{other:?}"),
    }
    assert_eq!(verdict(&wt, &data, "throughput"), Freshness::Fresh);
    // The other scale's settings are not what a quick run ran.
    std::fs::write(&spec, text.replace("messages = 1000000", "messages = 2000000")).unwrap();
    assert_ne!(std::fs::read_to_string(&spec).unwrap(), text, "the full scale's messages edited");
    assert_eq!(verdict(&wt, &data, "heap-growth"), Freshness::Fresh);

    git(&root, &["worktree", "remove", "--force", wt.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The main job, twice, as the dirty rule sees it, on a worktree of HEAD:
/// what a run renders (a figure, a generated table, the paper's macros, a
/// dataset) never makes a run dirty; an edit to a measured source, a new
/// file in a measured crate, or the build flags does, named; and the diff a
/// dataset stores holds only those.
#[test]
fn a_rendered_output_never_blocks_a_run_and_a_measured_edit_always_does() {
    use analysis::run::provenance::{check_clean, diff_of};
    let root = repo_root();
    let scratch = std::env::temp_dir().join(format!("wb-dirty-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let wt = scratch.join("head");
    git(&root, &["worktree", "add", "--detach", "--quiet", wt.to_str().unwrap(), "HEAD"]);
    let spec_path = wt.join("experiments/alloc-profile.toml");
    let spec = Spec::load(&spec_path).unwrap();
    let clean = |allow: bool| {
        let inputs = analysis::run::fingerprint::Inputs::of(&wt, &spec_path, &spec, Scale::Quick).unwrap();
        check_clean(&wt, allow, &spec_path, &inputs)
    };
    assert!(clean(false).unwrap().is_empty(), "a fresh worktree of HEAD is clean");

    // What the first run of the main job rewrote.
    let figure = std::fs::read_dir(wt.join("figures")).unwrap().flatten().map(|e| e.path()).find(|p| p.is_file());
    std::fs::write(figure.expect("a committed figure"), "regenerated\n").unwrap();
    std::fs::write(wt.join("paper/generated/macros.tex"), "% regenerated\n").unwrap();
    std::fs::create_dir_all(wt.join("data/alloc-profile/quick-20990101T000000Z")).unwrap();
    std::fs::write(wt.join("data/alloc-profile/quick-20990101T000000Z/manifest.json"), "{}\n").unwrap();
    std::fs::write(wt.join("README.md"), "edited\n").unwrap();
    assert!(clean(false).unwrap().is_empty(), "outputs and docs never make a run dirty");

    // A measured source, a new file in a measured crate, the build flags: refused, each named.
    let zap = "workbench/zap/src/lib.rs";
    let text = std::fs::read_to_string(wt.join(zap)).unwrap();
    std::fs::write(wt.join(zap), format!("{text}\n// an edit\n")).unwrap();
    std::fs::write(wt.join("workbench/records/src/new.rs"), "\n").unwrap();
    let e = clean(false).unwrap_err().to_string();
    assert!(e.contains(zap) && e.contains("workbench/records/src/new.rs") && e.contains("--allow-dirty"), "{e}");
    assert!(!e.contains("README") && !e.contains("figures/") && !e.contains("macros.tex"), "{e}");
    std::fs::write(wt.join(".cargo/config.toml"), "[build]\n").unwrap();
    assert!(clean(false).unwrap_err().to_string().contains(".cargo/config.toml"));
    // Allowed: the run goes on, and its diff holds the measured files alone.
    let changed = clean(true).unwrap();
    let diff = diff_of(&wt, &changed).unwrap();
    assert!(diff.contains("// an edit") && !diff.contains("regenerated") && !diff.contains("edited"), "{diff}");

    git(&root, &["worktree", "remove", "--force", wt.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&scratch);
}
