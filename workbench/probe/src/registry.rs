//! Every experiment the workbench runs, named once.
//!
//! An entry is one dataset (`data/<name>/`), one spec file
//! (`experiments/<name>.toml`) and one report: the binary that runs its
//! cells ([`Target`]), the experiment that binary runs ([`Experiment::runs`],
//! usually the same name; `instrumentation-cost` runs `codec-speed` across
//! builds), what a cell is run against ([`Over`]), and which builds its
//! figures may come from ([`Builds`]). The subjects and the server dispatch
//! on these names, the CLI validates specs and walks its reports by them, and
//! the paper finds its datasets through them; nobody types a name twice.
//!
//! This crate is the one every measured binary and the CLI already link, and
//! the registry is plain data (no function of any of them), so it sits here.
//!
//! Adding an experiment: one `pub const` below and its line in [`ALL`]; then
//! the binary's run function, its spec file and its report, each keyed by
//! this constant.
//!
//! The codecs and transport stacks a subject experiment runs over are named
//! here too ([`Codec`], [`Transport`]: name, label, idiom mark), so that the
//! CLI can validate a spec and label a table without linking the subjects.
//! Adding a codec: its line in [`Codec`] and its file in `subjects::codecs`;
//! the compiler then asks for its arm in `subjects::codecs::run_with`.

use serde::{Deserialize, Serialize};

/// The binary a dataset's cells run in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// `subject` (crate `subjects`): codecs and transport stacks.
    #[default]
    Subject,
    /// `datastore-server` (crate `server`): a cell runs in `datastore-load`,
    /// the driver, which spawns the measured `datastore-server` beside it as
    /// its child.
    DatastoreServer,
}

impl Target {
    /// The cargo package and the binary that runs a cell (`--cell`).
    pub fn package_and_bin(self) -> (&'static str, &'static str) {
        (self.package(), self.binaries()[0])
    }

    /// The cargo package.
    pub fn package(self) -> &'static str {
        match self {
            Target::Subject => "subjects",
            Target::DatastoreServer => "server",
        }
    }

    /// The binary a build variant is about: the one whose profile a cell
    /// measures. The server's driver beside it is the load, not the subject:
    /// a variant with a profile of its own (LTO, PGO, BOLT) builds the server
    /// alone and runs it under the release build's driver, so that every
    /// build stage is driven by the same client.
    pub fn measured(self) -> &'static str {
        match self {
            Target::Subject => "subject",
            Target::DatastoreServer => "datastore-server",
        }
    }

    /// Every binary a build of this target makes, the cell's first; they
    /// are built, copied and run together, each finding the others beside it.
    pub fn binaries(self) -> &'static [&'static str] {
        match self {
            Target::Subject => &["subject"],
            Target::DatastoreServer => &["datastore-load", "datastore-server"],
        }
    }

    /// The experiments (the binary's names, [`Experiment::runs`]) this
    /// target runs, each once, in registry order.
    pub fn experiments(self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for e in ALL.iter().filter(|e| e.target == self) {
            if !out.contains(&e.runs) {
                out.push(e.runs);
            }
        }
        out
    }
}

/// What one cell of an experiment is run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// A codec (`Cell::codec` names one of `subjects::codecs`).
    Codecs,
    /// A transport stack (`Cell::codec` names one of `subjects::transports`).
    Transports,
    /// The server's own axes, in the spec's `params`.
    Params,
}

/// The builds a dataset may come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Builds {
    /// Counts, memory, or a comparison of builds (`instrumentation-cost`).
    Any,
    /// Its table prints times, so no build that counts allocations: their
    /// cost would be in every figure. The spec loader refuses the others.
    Uncounted,
}

/// One experiment's dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Experiment {
    /// The dataset, spec file and table name.
    pub name: &'static str,
    /// The experiment the target binary runs for it.
    pub runs: &'static str,
    pub target: Target,
    pub over: Over,
    pub builds: Builds,
}

impl Experiment {
    const fn new(name: &'static str, target: Target, over: Over, builds: Builds) -> Experiment {
        Experiment { name, runs: name, target, over, builds }
    }

    /// Whether its table prints times ([`Builds::Uncounted`]).
    pub fn timed(&self) -> bool {
        self.builds == Builds::Uncounted
    }
}

use Builds::{Any, Uncounted};
use Over::{Codecs, Params, Transports};
use Target::{DatastoreServer as Server, Subject};

// The codecs and transports (`subject`).
pub const ALLOC_PROFILE: Experiment = Experiment::new("alloc-profile", Subject, Codecs, Any);
pub const HEAP_GROWTH: Experiment = Experiment::new("heap-growth", Subject, Codecs, Any);
pub const CODEC_SPEED: Experiment = Experiment::new("codec-speed", Subject, Codecs, Uncounted);
pub const TRANSPORT_ALLOC: Experiment = Experiment::new("transport-alloc", Subject, Transports, Any);
pub const TRANSPORT_HEAP_GROWTH: Experiment = Experiment::new("transport-heap-growth", Subject, Transports, Any);
pub const ROUNDTRIP_LATENCY: Experiment = Experiment::new("roundtrip-latency", Subject, Transports, Uncounted);
pub const ROUNDTRIP_LATENCY_AWAKE: Experiment =
    Experiment::new("roundtrip-latency-awake", Subject, Transports, Uncounted);
pub const ROUNDTRIP_LATENCY_OPEN: Experiment =
    Experiment::new("roundtrip-latency-open", Subject, Transports, Uncounted);
/// codec-speed in every build, to price the instrumentation.
pub const INSTRUMENTATION_COST: Experiment =
    Experiment { name: "instrumentation-cost", runs: CODEC_SPEED.runs, builds: Any, ..CODEC_SPEED };
// The datastore and its server (`datastore-server`).
pub const DATASTORE_QUERIES: Experiment = Experiment::new("datastore-queries", Server, Params, Uncounted);
pub const BUILD_STAGES: Experiment = Experiment::new("build-stages", Server, Params, Uncounted);
pub const CONNECTION_SCALING: Experiment = Experiment::new("connection-scaling", Server, Params, Any);
pub const PIPELINE_DEPTH: Experiment = Experiment::new("pipeline-depth", Server, Params, Uncounted);
pub const IO_WAKEUP: Experiment = Experiment::new("io-wakeup", Server, Params, Uncounted);
pub const SERVER_HEAP_GROWTH: Experiment = Experiment::new("server-heap-growth", Server, Params, Any);
pub const FAULT_SOAK: Experiment = Experiment::new("fault-soak", Server, Params, Any);
pub const THROUGHPUT: Experiment = Experiment::new("throughput", Server, Params, Uncounted);

/// Declares a list of named things (codecs, transports) once: the enum, its
/// `ALL` in table order, and each one's name in specs and records, its label
/// in tables and legends, and whether it is the peer's documented fastest
/// idiom (marked `*`). A crate that runs them matches on the enum, so a
/// missing arm is a compile error.
macro_rules! named {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $v:ident = $name:literal, $label:literal, $idiom:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $ty {
            $($(#[$vdoc])* $v,)*
        }

        impl $ty {
            /// Every one, in table order.
            pub const ALL: &'static [$ty] = &[$($ty::$v),*];

            /// Its name in specs, cells and records.
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$v => $name,)*
                }
            }

            /// Its label in tables and figure legends (without the idiom mark).
            pub const fn label(self) -> &'static str {
                match self {
                    $($ty::$v => $label,)*
                }
            }

            /// Whether it is the peer's documented fastest idiom (`*` in tables).
            pub const fn idiom(self) -> bool {
                match self {
                    $($ty::$v => $idiom,)*
                }
            }

            /// The one called `name`.
            pub fn find(name: &str) -> Option<$ty> {
                $ty::ALL.iter().copied().find(|c| c.name() == name)
            }

            /// Every name, in table order.
            pub fn names() -> Vec<&'static str> {
                $ty::ALL.iter().map(|c| c.name()).collect()
            }
        }
    };
}

named! {
    /// The codecs of `subjects::codecs` (the vote encoded and decoded in memory).
    Codec {
        Zap = "zap", "ZAP", false;
        FlatBuffers = "flatbuffers", "FlatBuffers", false;
        FlatBuffersStruct = "flatbuffers-struct", "FlatBuffers (fixed arrays)", true;
        Capnp = "capnp", "Cap'n Proto", false;
        CapnpScratch = "capnp-scratch", "Cap'n Proto (scratch, no-alloc read)", true;
        Protobuf = "protobuf", "Protobuf (prost)", false;
        ProtobufReuse = "protobuf-reuse", "Protobuf (prost, reused message)", false;
        ProtobufBytes = "protobuf-bytes", "Protobuf (prost, Bytes fields)", true;
        JsonRpc = "json-rpc", "JSON-RPC", false;
        JsonRpcBorrowed = "json-rpc-borrowed", "JSON-RPC (borrowed)", true;
    }
}

impl Codec {
    /// The codec this one is an idiom of (`protobuf-reuse` → `protobuf`):
    /// the longest other name it extends with `-…`. Pages that set an
    /// idiom against its plain use read it, so a new idiom is paired by
    /// its name alone.
    pub fn base(self) -> Option<Codec> {
        let name = self.name();
        Codec::ALL
            .iter()
            .copied()
            .filter(|c| {
                name.len() > c.name().len() + 1 && name.starts_with(c.name()) && name[c.name().len()..].starts_with('-')
            })
            .max_by_key(|c| c.name().len())
    }
}

named! {
    /// The transport stacks of `subjects::transports` (one round trip over loopback).
    Transport {
        /// The floor: bytes echoed, nothing decoded.
        RawTcp = "raw-tcp", "Raw TCP echo (floor)", false;
        ZapRpc = "zap-tcp", "ZAP (TCP, RPC)", false;
        ZapFramed = "zap-framed", "ZAP (TCP, framed)", false;
        FlatBuffersTcp = "flatbuffers-tcp", "FlatBuffers (TCP)", false;
        CapnpTcp = "capnp-tcp", "Cap'n Proto (TCP)", false;
        CapnpRpc = "capnp-rpc", "Cap'n Proto (capnp-rpc)", false;
        ProtobufTcp = "protobuf-tcp", "Protobuf (TCP, framed)", false;
        Mux = "protobuf-mux", "Protobuf-mux (yamux)", false;
        Grpc = "grpc", "gRPC (tonic)", false;
        Quic = "quic", "QUIC (quinn, raw)", false;
        JsonHttp = "json-rpc-http", "JSON-RPC (hyper HTTP/1.1)", false;
    }
}

/// How a codec or transport stack reads in tables and legends: its label,
/// marked `*` when it is the peer's documented fastest idiom; an unknown
/// name as it is.
pub fn display_name(name: &str) -> String {
    if let Some(c) = Codec::find(name) {
        return format!("{}{}", c.label(), if c.idiom() { "*" } else { "" });
    }
    Transport::find(name).map_or_else(|| name.to_string(), |t| t.label().to_string())
}

/// Every dataset, in the order its tables are listed.
pub const ALL: &[Experiment] = &[
    ALLOC_PROFILE,
    HEAP_GROWTH,
    CODEC_SPEED,
    TRANSPORT_ALLOC,
    TRANSPORT_HEAP_GROWTH,
    ROUNDTRIP_LATENCY,
    ROUNDTRIP_LATENCY_AWAKE,
    ROUNDTRIP_LATENCY_OPEN,
    INSTRUMENTATION_COST,
    DATASTORE_QUERIES,
    BUILD_STAGES,
    CONNECTION_SCALING,
    PIPELINE_DEPTH,
    IO_WAKEUP,
    SERVER_HEAP_GROWTH,
    FAULT_SOAK,
    THROUGHPUT,
];

/// The entry named `name` (a dataset).
pub fn find(name: &str) -> Option<&'static Experiment> {
    ALL.iter().find(|e| e.name == name)
}

/// Every dataset's name, for error messages.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|e| e.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idiom_pairs_with_its_plain_codec_by_name() {
        let pairs: Vec<(&str, &str)> =
            Codec::ALL.iter().filter_map(|c| c.base().map(|b| (c.name(), b.name()))).collect();
        assert_eq!(
            pairs,
            [
                ("flatbuffers-struct", "flatbuffers"),
                ("capnp-scratch", "capnp"),
                ("protobuf-reuse", "protobuf"),
                ("protobuf-bytes", "protobuf"),
                ("json-rpc-borrowed", "json-rpc"),
            ]
        );
    }

    #[test]
    fn names_are_unique_and_runs_exist() {
        let mut n = names();
        n.sort_unstable();
        let len = n.len();
        n.dedup();
        assert_eq!(len, n.len(), "{n:?}");
        for e in ALL {
            let ran = find(e.runs).expect("an experiment a binary runs has its own entry");
            assert_eq!((ran.target, ran.over), (e.target, e.over), "{}", e.name);
        }
    }

    #[test]
    fn targets_split_the_experiments() {
        let (subject, server) = (Target::Subject.experiments(), Target::DatastoreServer.experiments());
        assert!(subject.iter().all(|e| !server.contains(e)), "{subject:?} / {server:?}");
        assert_eq!(subject.len() + server.len(), ALL.iter().filter(|e| e.runs == e.name).count());
        assert!(!subject.contains(&INSTRUMENTATION_COST.name), "it runs codec-speed");
    }
}
