//! Experiment specs: one TOML file per experiment in `experiments/`, the
//! scales they run at, and the build variants they may name. This is the
//! lowest floor of the CLI: a manifest records the spec it ran.
//!
//! # Layout
//! - [`Spec`], [`Settings`]: a spec file and one scale's settings; validated
//!   against [`registry`] and [`variants`].
//! - [`Scale`]: quick or full.
//! - [`variants`]: the build variants, defined once.

pub mod scale;
pub mod variants;

pub use scale::Scale;

pub use registry::Target;
use registry::{Experiment, Over};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A spec file, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// What the target binary runs for the dataset
    /// ([`registry::Experiment::runs`]), by its name.
    pub experiment: Experiment,
    /// Which binary runs the cells: the codec/transport `subject` (default)
    /// or the `datastore-server`.
    #[serde(default)]
    pub target: Target,
    /// The dataset's name (`data/<name>/`, its table), when one subject
    /// experiment serves two studies; the experiment's name otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Experiment>,
    #[serde(default)]
    pub description: String,
    /// Codecs to run, by registered name (transport stacks, for transport
    /// experiments); none for server experiments, whose axes are `params`.
    #[serde(default)]
    pub codecs: Vec<String>,
    /// Payload sizes in bytes added to each vote (0 = the bare 145-byte vote).
    #[serde(default = "default_payloads")]
    pub payloads: Vec<usize>,
    /// Allocator variants: `dhat`, `jemalloc`, `system`.
    pub variants: Vec<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub quick: Settings,
    pub full: Settings,
    /// The allocation gate's cells of this experiment (`workbench gate`):
    /// small, dhat only, their exact counts committed in
    /// `experiments/gate/baseline.txt`. Only experiments that count
    /// allocations have one (the `analysis` crate's `gate::GATED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Settings>,
}

fn default_payloads() -> Vec<usize> {
    vec![0]
}

fn default_seed() -> u64 {
    42
}

/// How much work one scale does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Messages per cell (subject experiments).
    #[serde(default)]
    pub messages: u64,
    #[serde(default)]
    pub warmup: u64,
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Build variants at this scale, instead of the spec's (e.g. fewer
    /// builds for the quick suite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<String>>,
    /// Payload sizes instead of the spec's (the gate's table only: the
    /// scales' tables read the spec's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payloads: Option<Vec<usize>>,
    /// Sample interval in messages (heap-growth); defaults to messages / 100.
    #[serde(default)]
    pub sample_every: Option<u64>,
    /// Payload bytes that `messages` may carry in all (subject experiments):
    /// a cell whose payload is p bytes gets `min(messages, max(1, budget /
    /// p))` messages (see [`Settings::messages_for`]). It bounds the cells
    /// whose time grows with the payload (JSON-RPC's 64 KiB cells took most
    /// of codec-speed's quick run) without thinning the small payloads' cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_budget: Option<u64>,
    /// The experiment's own settings and axes (server experiments: rows,
    /// concurrency levels, connection steps, depths), passed to the cell as
    /// is; checked when the spec loads by the type the measured binary reads
    /// them into ([`Experiment::check_params`]), so a misspelt key is refused.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, serde_json::Value>,
}

fn one() -> u32 {
    1
}

impl Settings {
    /// Messages a cell with a `payload`-byte payload runs: `messages`, fewer
    /// when their payloads would exceed `payload_budget` (never fewer than one).
    pub fn messages_for(&self, payload: usize) -> u64 {
        match self.payload_budget {
            Some(budget) if payload > 0 => self.messages.min((budget / payload as u64).max(1)),
            _ => self.messages,
        }
    }
}

/// A spec that failed to load, naming the file and what is wrong in it.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("reading spec {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("spec {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("spec {path}: key `{key}`: {message}")]
    Invalid { path: PathBuf, key: String, message: String },
}

impl Spec {
    /// The dataset's name: `name`, or the experiment's.
    pub fn dataset(&self) -> &'static str {
        self.entry().name()
    }

    /// The dataset's experiment: `name`, or the one run.
    pub fn entry(&self) -> Experiment {
        self.name.unwrap_or(self.experiment)
    }

    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read { path: path.into(), source })?;
        Self::parse(&text, path)
    }

    /// Parses spec text; `path` is used in errors only.
    pub fn parse(text: &str, path: &Path) -> Result<Spec, SpecError> {
        // toml's message names the key and the line; keep it whole.
        let spec: Spec = toml::from_str(text)
            .map_err(|e| SpecError::Parse { path: path.into(), message: e.to_string().trim_end().to_string() })?;
        spec.validate(path)?;
        Ok(spec)
    }

    fn validate(&self, path: &Path) -> Result<(), SpecError> {
        let bad = |key: &str, message: String| Err(SpecError::Invalid { path: path.into(), key: key.into(), message });
        let known = self.target.experiments();
        if !known.contains(&self.experiment) {
            let known: Vec<&str> = known.iter().map(|e| e.name()).collect();
            return bad(
                "experiment",
                format!(
                    "experiment {:?} does not run on target {:?}; its experiments: {known:?}",
                    self.experiment.name(),
                    self.target
                ),
            );
        }
        let entry = self.entry();
        if (entry.runs(), entry.target()) != (self.experiment, self.target) {
            return bad(
                "experiment",
                format!(
                    "dataset {:?} is registered as {:?} on {:?}",
                    entry.name(),
                    entry.runs().name(),
                    entry.target()
                ),
            );
        }
        for (name, s) in self.tables() {
            if let Err(e) = self.experiment.check_params(&s.params) {
                return bad(&format!("{name}.params"), e.message);
            }
        }
        if entry.over() == Over::Params {
            if !self.codecs.is_empty() {
                return bad("codecs", "server experiments take no codecs; their axes are [quick.params]".into());
            }
            return self.validate_variants(path);
        }
        if self.codecs.is_empty() {
            return bad("codecs", "list at least one codec".into());
        }
        // Transport experiments name transport stacks in `codecs`; the others name codecs.
        let (kind, known) = if entry.over() == Over::Transports {
            ("transport", registry::Transport::names())
        } else {
            ("codec", registry::Codec::names())
        };
        for c in &self.codecs {
            if !known.contains(&c.as_str()) {
                return bad("codecs", format!("unknown {kind} {c:?} for {}; known: {known:?}", self.experiment));
            }
        }
        self.validate_variants(path)?;
        for (name, s) in self.tables() {
            if s.payloads.is_some() && name != "gate" {
                return bad(
                    &format!("{name}.payloads"),
                    "only [gate] may choose payloads; the scales run the spec's, which their tables read".into(),
                );
            }
            if s.messages == 0 {
                return bad(&format!("{name}.messages"), "must be at least 1".into());
            }
            if s.repetitions == 0 {
                return bad(&format!("{name}.repetitions"), "must be at least 1".into());
            }
            if s.sample_every == Some(0) {
                return bad(&format!("{name}.sample_every"), "must be at least 1".into());
            }
            if s.payload_budget == Some(0) {
                return bad(&format!("{name}.payload_budget"), "must be at least 1 byte".into());
            }
        }
        Ok(())
    }

    fn validate_variants(&self, path: &Path) -> Result<(), SpecError> {
        let bad = |key: &str, message: String| Err(SpecError::Invalid { path: path.into(), key: key.into(), message });
        let lists = [("variants".to_string(), Some(&self.variants))]
            .into_iter()
            .chain(self.tables().map(|(x, s)| (format!("{x}.variants"), s.variants.as_ref())));
        for (key, list) in lists {
            let Some(list) = list else { continue };
            if list.is_empty() {
                return bad(&key, "list at least one build variant".into());
            }
            for v in list {
                let known = crate::spec::variants::names();
                if !known.contains(&v.as_str()) {
                    return bad(&key, format!("unknown variant {v:?}; known: {known:?}"));
                }
                if self.entry().timed() && crate::spec::variants::counts_allocations(v) {
                    return bad(
                        &key,
                        format!(
                            "{v:?} counts allocations, which costs time (see instrumentation-cost), and {} \
                             prints times: name a build that counts nothing (system, jemalloc-plain)",
                            self.dataset()
                        ),
                    );
                }
            }
        }
        for (name, s) in self.tables() {
            if s.repetitions == 0 {
                return bad(&format!("{name}.repetitions"), "must be at least 1".into());
            }
        }
        Ok(())
    }

    /// The build variants run at `scale`: its own list, or the spec's.
    pub fn variants_at(&self, scale: Scale) -> &[String] {
        self.scale(scale).variants.as_deref().unwrap_or(&self.variants)
    }

    /// Every settings table of the spec, by its name: each scale's, and the gate's.
    pub fn tables(&self) -> impl Iterator<Item = (&'static str, &Settings)> {
        Scale::ALL.map(|x| (x.name(), self.scale(x))).into_iter().chain(self.gate.as_ref().map(|g| ("gate", g)))
    }

    /// The payload sizes of `settings` (one of this spec's scales).
    pub fn payloads_of<'a>(&'a self, settings: &'a Settings) -> &'a [usize] {
        settings.payloads.as_deref().unwrap_or(&self.payloads)
    }

    /// The settings of `scale`.
    pub fn scale(&self, scale: Scale) -> &Settings {
        match scale {
            Scale::Quick => &self.quick,
            Scale::Full => &self.full,
        }
    }
}

/// Every spec in `dir`, sorted by file name.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Spec)>, SpecError> {
    let entries = std::fs::read_dir(dir).map_err(|source| SpecError::Read { path: dir.into(), source })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths.into_iter().map(|p| Spec::load(&p).map(|s| (p, s))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        experiment = "alloc-profile"
        codecs = ["zap", "json-rpc"]
        payloads = [0, 64]
        variants = ["dhat"]
        [quick]
        messages = 10
        [full]
        messages = 1000
        repetitions = 3
    "#;

    #[test]
    fn parses_a_good_spec_with_defaults() {
        let s = Spec::parse(GOOD, Path::new("x.toml")).unwrap();
        assert_eq!(s.codecs, ["zap", "json-rpc"]);
        assert_eq!((s.quick.repetitions, s.quick.warmup, s.seed), (1, 0, 42));
        assert_eq!(s.scale(Scale::Full).repetitions, 3);
    }

    #[test]
    fn bad_value_names_file_and_key() {
        let text = GOOD.replace("messages = 10", "messages = \"ten\"");
        let e = Spec::parse(&text, Path::new("experiments/bad.toml")).unwrap_err().to_string();
        assert!(e.contains("experiments/bad.toml") && e.contains("messages"), "{e}");
    }

    #[test]
    fn unknown_key_names_it() {
        let text = GOOD.replace("[quick]", "[quick]\nmesages = 3");
        let e = Spec::parse(&text, Path::new("s.toml")).unwrap_err().to_string();
        assert!(e.contains("s.toml") && e.contains("mesages"), "{e}");
    }

    #[test]
    fn unknown_codec_and_variant_are_rejected_by_key() {
        let e = Spec::parse(&GOOD.replace("\"json-rpc\"", "\"xml\""), Path::new("s.toml")).unwrap_err().to_string();
        assert!(e.contains("key `codecs`") && e.contains("xml"), "{e}");
        let e =
            Spec::parse(&GOOD.replace("[\"dhat\"]", "[\"tcmalloc\"]"), Path::new("s.toml")).unwrap_err().to_string();
        assert!(e.contains("key `variants`") && e.contains("tcmalloc"), "{e}");
        let e =
            Spec::parse(&GOOD.replace("messages = 1000", "messages = 0"), Path::new("s.toml")).unwrap_err().to_string();
        assert!(e.contains("key `full.messages`"), "{e}");
    }

    #[test]
    fn a_payload_budget_thins_only_the_payloads_that_exceed_it() {
        let s = Spec::parse(&GOOD.replace("[quick]", "[quick]\npayload_budget = 640"), Path::new("s.toml")).unwrap();
        let q = s.scale(Scale::Quick);
        assert_eq!([0, 64, 65, 128, 1 << 16].map(|p| q.messages_for(p)), [10, 10, 9, 5, 1]);
        assert_eq!(s.scale(Scale::Full).messages_for(1 << 16), 1000);
        let e = Spec::parse(&GOOD.replace("[quick]", "[quick]\npayload_budget = 0"), Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `quick.payload_budget`"), "{e}");
    }

    #[test]
    fn timed_specs_refuse_counting_builds() {
        let timed = GOOD.replace("alloc-profile", "codec-speed");
        for counting in ["dhat", "jemalloc"] {
            let e = Spec::parse(&timed.replace("[\"dhat\"]", &format!("[\"{counting}\"]")), Path::new("s.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("key `variants`") && e.contains(counting) && e.contains("prints times"), "{e}");
        }
        for plain in ["system", "jemalloc-plain"] {
            Spec::parse(&timed.replace("[\"dhat\"]", &format!("[\"{plain}\"]")), Path::new("s.toml")).unwrap();
        }
        // The same subject experiment under its own dataset name compares builds.
        let named = format!("name = \"instrumentation-cost\"\n{}", timed.trim_start());
        Spec::parse(&named, Path::new("s.toml")).unwrap();
    }

    #[test]
    fn server_specs_take_params_not_codecs() {
        let text = r#"
            experiment = "connection-scaling"
            target = "datastore-server"
            variants = ["jemalloc"]
            [quick.params]
            steps = [10, 100]
            [full.params]
            steps = [10, 10000]
        "#;
        let s = Spec::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(s.target, Target::DatastoreServer);
        // A scale may build other variants than the spec's.
        let quick = text.replace("[quick.params]", "[quick]\nvariants = [\"o3\"]\n[quick.params]");
        let q = Spec::parse(&quick, Path::new("c.toml")).unwrap();
        assert_eq!(
            (q.variants_at(Scale::Quick), q.variants_at(Scale::Full)),
            (&["o3".to_string()][..], &q.variants[..])
        );
        for (bad, why) in [("[]", "at least one"), ("[\"o4\"]", "o4")] {
            let e = Spec::parse(&quick.replace("[\"o3\"]", bad), Path::new("c.toml")).unwrap_err().to_string();
            assert!(e.contains("key `quick.variants`") && e.contains(why), "{e}");
        }
        assert_eq!(s.full.params["steps"], serde_json::json!([10, 10000]));
        let e = Spec::parse(&text.replace("variants", "codecs = [\"zap\"]\nvariants"), Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `codecs`"), "{e}");
        let e = Spec::parse(&text.replace("connection-scaling", "alloc-profile"), Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `experiment`") && e.contains("DatastoreServer"), "{e}");
    }

    #[test]
    fn a_misspelt_params_key_is_refused_at_either_scale_naming_it_and_the_known_keys() {
        let text = r#"
            experiment = "pipeline-depth"
            target = "datastore-server"
            variants = ["system"]
            [quick.params]
            rtt_us = [250]
            [full.params]
            rtt_us = [250]
        "#;
        Spec::parse(text, Path::new("p.toml")).unwrap();
        for scale in ["quick", "full"] {
            // The first `rtt_us` is quick's, the last full's.
            let at = if scale == "quick" { text.find("rtt_us") } else { text.rfind("rtt_us") }.unwrap();
            let bad = format!("{}rtt_usec{}", &text[..at], &text[at + "rtt_us".len()..]);
            assert_ne!(bad, text);
            let e = Spec::parse(&bad, Path::new("p.toml")).unwrap_err().to_string();
            assert!(
                e.contains("p.toml")
                    && e.contains(&format!("key `{scale}.params`"))
                    && e.contains("rtt_usec")
                    && e.contains("rtt_us"),
                "{e}"
            );
        }
        // A value of the wrong type, and a key for a subject experiment that takes none.
        let e = Spec::parse(&text.replacen("[250]", "\"fast\"", 1), Path::new("p.toml")).unwrap_err().to_string();
        assert!(e.contains("key `quick.params`") && e.contains("invalid type"), "{e}");
        let e = Spec::parse(&GOOD.replace("[full]", "[quick.params]\nrows = 3\n[full]"), Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `quick.params`") && e.contains("rows"), "{e}");
    }

    #[test]
    fn committed_specs_all_load() {
        let dir = crate::default_root().join("experiments");
        let specs = load_dir(&dir).unwrap();
        assert!(specs.len() >= 2, "{}", dir.display());
    }
}
