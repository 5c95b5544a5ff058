//! One unit of work for a measured binary: what the workbench passes as
//! `--cell '<json>'` to `subject` and to `datastore-server` alike.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What one process runs: one experiment at one point of its axes.
///
/// Codec experiments use `codec` … `sample_every`; server experiments read
/// their axes from `params` and keep their scratch data in `work_dir`. The
/// fields one kind does not use stay at their defaults and are not written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// What the target binary runs ([`registry::Experiment::runs`]).
    pub experiment: registry::Experiment,
    /// Codec or transport stack name, as registered in `subjects`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub codec: String,
    /// Bytes of optional payload carried by each vote (0 = none). Written
    /// even when 0: subjects built from older commits require it, and
    /// `workbench history` drives them with these cells.
    #[serde(default)]
    pub payload: usize,
    /// Measured messages (or round trips).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub messages: u64,
    /// Unmeasured messages first, so buffers reach their steady size.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub warmup: u64,
    /// Take a heap sample every this many messages (heap-growth).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub sample_every: u64,
    /// Seed of the generated values.
    pub seed: u64,
    /// Where the dhat build writes its trace (ignored by other builds).
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Scratch directory for the cell's data (server experiments: a loaded
    /// table); it lives only as long as the cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
    /// The spec's `[quick.params]` / `[full.params]` table, passed as is.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, serde_json::Value>,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

impl Cell {
    /// The spec's `[params]` read into the experiment's own type `P`
    /// (`records::…::Params`): the same reading the spec loader checked
    /// ([`registry::Experiment::check_params`]), so an unknown key or a
    /// value of the wrong type is an error naming it.
    pub fn params<P: DeserializeOwned>(&self) -> Result<P, registry::ParamsError> {
        registry::read_params(self.experiment, &self.params)
    }

    /// Parses the `--cell` argument, naming the flag when it is not a cell.
    pub fn from_arg(json: &str) -> Result<Cell, serde_json::Error> {
        serde_json::from_str(json)
    }
}

/// How the workbench talks to a measured binary, the same for every target:
/// `--cell '<json>'` runs one cell (JSON-lines records on stdout, `progress
/// DONE TOTAL` on stderr); `--variant` and `--revision` print the build's
/// allocator variant and git revision, which the runner checks before it
/// trusts the binary.
#[derive(Debug)]
pub enum Invocation {
    Cell(Box<Cell>),
    Variant,
    Revision,
}

impl Invocation {
    pub const USAGE: &'static str = "--cell '<json>' | --variant | --revision";

    /// The invocation `args` (without the program name) spell, `None` when
    /// they are not one of these (the binary's own commands), or the JSON
    /// error of a `--cell` that is not a cell.
    pub fn parse(args: &[String]) -> Option<Result<Invocation, serde_json::Error>> {
        match args {
            [flag, json] if flag == "--cell" => Some(Cell::from_arg(json).map(|c| Invocation::Cell(Box::new(c)))),
            [flag] if flag == "--variant" => Some(Ok(Invocation::Variant)),
            [flag] if flag == "--revision" => Some(Ok(Invocation::Revision)),
            _ => None,
        }
    }

    /// What `--variant` and `--revision` print; `None` for a cell.
    pub fn build_fact(&self) -> Option<&'static str> {
        match self {
            Invocation::Cell(_) => None,
            Invocation::Variant => Some(crate::VARIANT.name()),
            Invocation::Revision => Some(crate::GIT_REVISION),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_read_by_the_experiments_type_naming_the_key_at_fault() {
        use records::server::throughput::Params;
        let cell = |params: &str| {
            Cell::from_arg(&format!(r#"{{"experiment":"throughput","params":{params},"seed":1,"work_dir":"/tmp/x"}}"#))
                .unwrap()
        };
        let e = cell(r#"{"rows":"many"}"#).params::<Params>().unwrap_err().to_string();
        assert!(e.contains("throughput") && e.contains("invalid type"), "{e}");
        let e = cell(r#"{"rowz":5}"#).params::<Params>().unwrap_err().to_string();
        assert!(e.contains("rowz") && e.contains("concurrency"), "{e}");
        let p = cell(r#"{"rows":5}"#).params::<Params>().unwrap();
        assert_eq!((p.rows, p.rounds), (5, Params::default().rounds));
    }

    #[test]
    fn a_codec_cell_round_trips_without_server_fields() {
        let c = Cell::from_arg(r#"{"experiment":"alloc-profile","codec":"zap","messages":10,"seed":1,"trace":null}"#)
            .unwrap();
        let text = serde_json::to_string(&c).unwrap();
        assert!(!text.contains("work_dir") && !text.contains("params"), "{text}");
        assert_eq!(Cell::from_arg(&text).unwrap(), c);
        assert!(Cell::from_arg(r#"{"experiment":"heap-growth","seed":1,"rows":3}"#).is_err());
    }

    #[test]
    fn invocations() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches!(Invocation::parse(&a(&["--variant"])), Some(Ok(Invocation::Variant))));
        assert!(matches!(Invocation::parse(&a(&["--cell", "{}"])), Some(Err(_))));
        assert!(Invocation::parse(&a(&["serve", "--data", "x"])).is_none());
        let Some(Ok(Invocation::Cell(c))) =
            Invocation::parse(&a(&["--cell", r#"{"experiment":"heap-growth","seed":2}"#]))
        else {
            panic!("a cell")
        };
        assert_eq!((c.experiment, c.seed), (registry::Experiment::HeapGrowth, 2));
        assert!(matches!(Invocation::parse(&a(&["--cell", r#"{"experiment":"x","seed":2}"#])), Some(Err(_))));
    }
}
