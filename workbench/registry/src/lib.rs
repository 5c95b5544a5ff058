//! Every experiment the workbench runs, every codec and transport stack it
//! runs them over, named once; and each experiment's params, checked by the
//! type its measured binary reads.
//!
//! An [`Experiment`] is one dataset (`data/<name>/`), one spec file
//! (`experiments/<name>.toml`) and its reports: the binary that runs its
//! cells ([`Target`]), the experiment that binary runs ([`Experiment::runs`],
//! usually itself; `instrumentation-cost` runs `codec-speed` across builds),
//! what a cell is run against ([`Over`]), and which builds its figures may
//! come from ([`Builds`]). Every property is one `match` on the enum, so a
//! new experiment without one of them does not compile; the subjects and the
//! server dispatch on it with exhaustive matches too, the CLI validates
//! specs and walks its reports by it.
//!
//! This crate is plain data and serde: the measured binaries and the CLI
//! both link it, and it must pull neither an allocator nor the analysis
//! stack into either.
//!
//! # Layout
//! - [`Experiment`], [`Target`], [`Over`], [`Builds`]: the experiments and
//!   their properties; [`Experiment::check_params`]: a spec's `[params]`
//!   read by the experiment's own `Params` type (`records::…::Params`).
//! - `with_record!`: the one match from an experiment to its record type,
//!   behind [`Experiment::decode_record`], [`Experiment::columns`] and
//!   (feature `schema`) `Experiment::record_schema`.
//! - [`AnyRecord`]: a record of any experiment, typed, as the runner
//!   carries it to the dataset; [`RecordType`] takes one type back out.
//! - [`Codec`], [`Transport`], [`display_name`]: what a subject experiment
//!   runs over (name, label, idiom mark), so that the CLI can validate a
//!   spec and label a table without linking the subjects.
//! - [`CellId`]: the one spelling of a cell's name.
//!
//! Adding an experiment: its variant in [`Experiment`] (the compiler then
//! asks for each property, the binary's dispatch arm and the CLI's report),
//! its records and `Params` in the `records` crate, its spec file.
//! Adding a codec: its line in [`Codec`] and its file in `stacks::codecs`;
//! the compiler then asks for its arm in `stacks::codecs::run_with`.

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
    pub fn experiments(self) -> Vec<Experiment> {
        let mut out: Vec<Experiment> = Vec::new();
        for e in Experiment::ALL.iter().filter(|e| e.target() == self) {
            if !out.contains(&e.runs()) {
                out.push(e.runs());
            }
        }
        out
    }
}

/// What one cell of an experiment is run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// A codec (the cell's `codec` names one of `stacks::codecs`).
    Codecs,
    /// A transport stack (the cell's `codec` names one of `stacks::transports`).
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

/// Declares the experiments once: the enum, [`Experiment::ALL`] in table
/// order, and each one's name and properties, as one `match` each.
macro_rules! experiments {
    ($($(#[$doc:meta])* $v:ident = $name:literal, runs $runs:ident, $target:ident, $over:ident, $builds:ident;)*) => {
        /// One experiment's dataset. Serialised as its name (`"throughput"`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Experiment {
            $($(#[$doc])* #[serde(rename = $name)] $v,)*
        }

        impl Experiment {
            /// Every dataset, in the order its tables are listed.
            pub const ALL: &'static [Experiment] = &[$(Experiment::$v),*];

            /// The dataset, spec file and table name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Experiment::$v => $name,)*
                }
            }

            /// The experiment the target binary runs for it.
            pub const fn runs(self) -> Experiment {
                match self {
                    $(Experiment::$v => Experiment::$runs,)*
                }
            }

            /// The binary its cells run in.
            pub const fn target(self) -> Target {
                match self {
                    $(Experiment::$v => Target::$target,)*
                }
            }

            /// What one cell is run against.
            pub const fn over(self) -> Over {
                match self {
                    $(Experiment::$v => Over::$over,)*
                }
            }

            /// Which builds its figures may come from.
            pub const fn builds(self) -> Builds {
                match self {
                    $(Experiment::$v => Builds::$builds,)*
                }
            }
        }
    };
}

experiments! {
    // The codecs and transports (`subject`).
    AllocProfile = "alloc-profile", runs AllocProfile, Subject, Codecs, Any;
    HeapGrowth = "heap-growth", runs HeapGrowth, Subject, Codecs, Any;
    /// alloc-profile's workload profiled exactly (dhat) and sampled by
    /// jemalloc at several intervals: how wrong a sampled heap profile is.
    SamplingAccuracy = "sampling-accuracy", runs SamplingAccuracy, Subject, Codecs, Any;
    /// The same over transport-alloc's round trips: client and server
    /// threads, runtimes, buffers that live across calls.
    SamplingAccuracyTransports = "sampling-accuracy-transports", runs SamplingAccuracyTransports, Subject, Transports, Any;
    CodecSpeed = "codec-speed", runs CodecSpeed, Subject, Codecs, Uncounted;
    TransportAlloc = "transport-alloc", runs TransportAlloc, Subject, Transports, Any;
    TransportHeapGrowth = "transport-heap-growth", runs TransportHeapGrowth, Subject, Transports, Any;
    RoundtripLatency = "roundtrip-latency", runs RoundtripLatency, Subject, Transports, Uncounted;
    RoundtripLatencyAwake = "roundtrip-latency-awake", runs RoundtripLatencyAwake, Subject, Transports, Uncounted;
    RoundtripLatencyOpen = "roundtrip-latency-open", runs RoundtripLatencyOpen, Subject, Transports, Uncounted;
    /// codec-speed in every build, to price the instrumentation.
    InstrumentationCost = "instrumentation-cost", runs CodecSpeed, Subject, Codecs, Any;
    // The datastore and its server (`datastore-server`).
    DatastoreQueries = "datastore-queries", runs DatastoreQueries, DatastoreServer, Params, Uncounted;
    BuildStages = "build-stages", runs BuildStages, DatastoreServer, Params, Uncounted;
    ConnectionScaling = "connection-scaling", runs ConnectionScaling, DatastoreServer, Params, Any;
    PipelineDepth = "pipeline-depth", runs PipelineDepth, DatastoreServer, Params, Uncounted;
    IoWakeup = "io-wakeup", runs IoWakeup, DatastoreServer, Params, Uncounted;
    ServerHeapGrowth = "server-heap-growth", runs ServerHeapGrowth, DatastoreServer, Params, Any;
    /// Every call's exact allocation cost under concurrency, and the query
    /// memory tracker's charge against it (the dhat build).
    RequestCost = "request-cost", runs RequestCost, DatastoreServer, Params, Any;
    /// The server's query mix profiled exactly (dhat) and sampled by
    /// jemalloc at several intervals, a server process per profile.
    SamplingAccuracyServer = "sampling-accuracy-server", runs SamplingAccuracyServer, DatastoreServer, Params, Any;
    FaultSoak = "fault-soak", runs FaultSoak, DatastoreServer, Params, Any;
    Throughput = "throughput", runs Throughput, DatastoreServer, Params, Uncounted;
    /// throughput's closed loop with jemalloc's sampling profiler on and
    /// off, to price it in production.
    ProfilerCost = "profiler-cost", runs Throughput, DatastoreServer, Params, Any;
}

impl Experiment {
    /// Whether its table prints times ([`Builds::Uncounted`]).
    pub const fn timed(self) -> bool {
        matches!(self.builds(), Builds::Uncounted)
    }

    /// The experiment called `name` (a dataset).
    pub fn find(name: &str) -> Option<Experiment> {
        Experiment::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// Every dataset's name, for error messages.
    pub fn names() -> Vec<&'static str> {
        Experiment::ALL.iter().map(|e| e.name()).collect()
    }

    /// Checks a spec's `[params]` table against the type the measured
    /// binary reads it into: an unknown key or a value of the wrong type is
    /// an error naming it (and, for a key, the known ones). The subject's
    /// experiments take none but the round trips' `pin_core` and `rate`:
    /// their axes are the spec's own keys.
    pub fn check_params(self, params: &Params) -> Result<(), ParamsError> {
        use records::server as s;
        match self.runs() {
            Experiment::AllocProfile
            | Experiment::HeapGrowth
            | Experiment::CodecSpeed
            | Experiment::TransportHeapGrowth
            | Experiment::InstrumentationCost => read_params::<records::NoParams>(self, params).map(drop),
            Experiment::TransportAlloc
            | Experiment::RoundtripLatency
            | Experiment::RoundtripLatencyAwake
            | Experiment::RoundtripLatencyOpen => {
                read_params::<records::subject::RoundtripParams>(self, params).map(drop)
            }
            Experiment::SamplingAccuracy | Experiment::SamplingAccuracyTransports => {
                read_params::<records::subject::SamplingParams>(self, params).map(drop)
            }
            Experiment::DatastoreQueries => read_params::<s::datastore_queries::Params>(self, params).map(drop),
            Experiment::BuildStages => read_params::<s::build_stages::Params>(self, params).map(drop),
            Experiment::ConnectionScaling => read_params::<s::connection_scaling::Params>(self, params).map(drop),
            Experiment::PipelineDepth => read_params::<s::pipeline_depth::Params>(self, params).map(drop),
            Experiment::IoWakeup => read_params::<s::io_wakeup::Params>(self, params).map(drop),
            Experiment::ServerHeapGrowth => read_params::<s::server_heap_growth::Params>(self, params).map(drop),
            Experiment::RequestCost => read_params::<s::request_cost::Params>(self, params).map(drop),
            Experiment::SamplingAccuracyServer => read_params::<s::sampling_accuracy::Params>(self, params).map(drop),
            Experiment::FaultSoak => read_params::<s::fault_soak::Params>(self, params).map(drop),
            Experiment::Throughput | Experiment::ProfilerCost => {
                read_params::<s::throughput::Params>(self, params).map(drop)
            }
        }
    }
}

/// Runs `$body` with `$R` naming the record type of `$e`'s measured
/// binary (`records::…`): the one place an experiment meets its record type.
macro_rules! with_record {
    ($e:expr, $R:ident => $body:expr) => {{
        use records::server as s;
        use records::subject as c;
        match $e.runs() {
            Experiment::AllocProfile => {
                type $R = c::AllocProfile;
                $body
            }
            Experiment::HeapGrowth | Experiment::TransportHeapGrowth => {
                type $R = c::HeapGrowth;
                $body
            }
            Experiment::SamplingAccuracy
            | Experiment::SamplingAccuracyTransports
            | Experiment::SamplingAccuracyServer => {
                type $R = c::SamplingAccuracy;
                $body
            }
            Experiment::CodecSpeed | Experiment::InstrumentationCost => {
                type $R = c::CodecSpeed;
                $body
            }
            Experiment::TransportAlloc
            | Experiment::RoundtripLatency
            | Experiment::RoundtripLatencyAwake
            | Experiment::RoundtripLatencyOpen => {
                type $R = c::RoundTrip;
                $body
            }
            Experiment::DatastoreQueries => {
                type $R = s::datastore_queries::Record;
                $body
            }
            Experiment::BuildStages => {
                type $R = s::build_stages::Record;
                $body
            }
            Experiment::ConnectionScaling => {
                type $R = s::connection_scaling::Record;
                $body
            }
            Experiment::PipelineDepth => {
                type $R = s::pipeline_depth::Record;
                $body
            }
            Experiment::IoWakeup => {
                type $R = s::io_wakeup::Record;
                $body
            }
            Experiment::ServerHeapGrowth => {
                type $R = s::server_heap_growth::Record;
                $body
            }
            Experiment::RequestCost => {
                type $R = s::request_cost::Record;
                $body
            }
            Experiment::FaultSoak => {
                type $R = s::fault_soak::Record;
                $body
            }
            Experiment::Throughput | Experiment::ProfilerCost => {
                type $R = s::throughput::Record;
                $body
            }
        }
    }};
}

impl Experiment {
    /// Decodes one line its measured binary printed into the experiment's
    /// record type (`records::…`): the runner decodes every line as it
    /// arrives, and every finished cell on resume, so a line no report could
    /// read fails its cell there, naming the field, not at render time. A
    /// line the runner wrote for a build that failed
    /// ([`records::runner::BuildFailed`], `kind = "build-failed"`) decodes
    /// as one where the experiment's own type has no such record.
    pub fn decode_record(self, line: &str) -> Result<AnyRecord, serde_json::Error> {
        let own = with_record!(self, R => serde_json::from_str::<R>(line).map(AnyRecord::from));
        own.or_else(|e| {
            serde_json::from_str::<Failed<String>>(line)
                .map(|f| AnyRecord::BuildFailed(records::runner::BuildFailed { error: f.error }))
                .map_err(|_| e)
        })
    }

    /// [`Experiment::decode_record`], the record dropped.
    pub fn check_record(self, line: &str) -> Result<(), serde_json::Error> {
        self.decode_record(line).map(drop)
    }

    /// Which columns of its records tell cells apart, count exactly, or
    /// time (`workbench compare`), from its record type. transport-alloc's
    /// records stand for runs of equal round trips (`RUNS_COLUMNS`).
    pub fn columns(self) -> records::Columns {
        use records::Compared;
        if self.runs() == Experiment::TransportAlloc {
            return records::subject::RoundTrip::RUNS_COLUMNS;
        }
        with_record!(self, R => R::COLUMNS)
    }

    /// Its record type as JSON Schema (schemars), beside the fields the
    /// runner adds to every record ([`records::CellFields`]): what the
    /// CLI generates the notebooks' typed columns from.
    #[cfg(feature = "schema")]
    pub fn record_schema(self) -> RecordSchema {
        let (rust_type, record) = with_record!(self, R => (std::any::type_name::<R>(), schemars::schema_for!(R)));
        RecordSchema { rust_type, record, cell: schemars::schema_for!(records::CellFields) }
    }
}

/// Declares [`AnyRecord`] once over every record type: its variants, the
/// conversions in and out ([`RecordType`]), and its serialised form, which
/// is each type's own (so a line reads back as it was printed).
macro_rules! any_record {
    ($($(#[$doc:meta])* $v:ident($t:ty);)*) => {
        /// One record of any experiment, typed: what the runner carries from
        /// the line a cell printed to the dataset's writer, never a map of
        /// JSON values in between ([`Experiment::decode_record`]).
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyRecord {
            $($(#[$doc])* $v($t),)*
            /// A build stage that could not be built, written by the runner.
            BuildFailed(records::runner::BuildFailed),
        }

        $(
            impl From<$t> for AnyRecord {
                fn from(r: $t) -> AnyRecord {
                    AnyRecord::$v(r)
                }
            }

            impl RecordType for $t {
                fn of(any: &AnyRecord) -> Option<&$t> {
                    match any {
                        AnyRecord::$v(r) => Some(r),
                        _ => None,
                    }
                }
            }
        )*

        impl Serialize for AnyRecord {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(AnyRecord::$v(r) => r.serialize(s),)*
                    AnyRecord::BuildFailed(f) => Failed { error: f.error.as_str() }.serialize(s),
                }
            }
        }
    };
}

any_record! {
    AllocProfile(records::subject::AllocProfile);
    HeapGrowth(records::subject::HeapGrowth);
    SamplingAccuracy(records::subject::SamplingAccuracy);
    CodecSpeed(records::subject::CodecSpeed);
    RoundTrip(records::subject::RoundTrip);
    DatastoreQueries(records::server::datastore_queries::Record);
    BuildStages(records::server::build_stages::Record);
    ConnectionScaling(records::server::connection_scaling::Record);
    PipelineDepth(records::server::pipeline_depth::Record);
    IoWakeup(records::server::io_wakeup::Record);
    ServerHeapGrowth(records::server::server_heap_growth::Record);
    RequestCost(records::server::request_cost::Record);
    FaultSoak(records::server::fault_soak::Record);
    Throughput(records::server::throughput::Record);
}

/// A record type of [`AnyRecord`]: the one it holds, if it holds this one.
pub trait RecordType: Sized {
    fn of(any: &AnyRecord) -> Option<&Self>;
}

/// A [`records::runner::BuildFailed`] as the runner writes it: tagged by
/// `kind` ([`records::runner::BUILD_FAILED`]) like the records beside it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename = "build-failed")]
struct Failed<S> {
    error: S,
}

/// An experiment's record type as JSON Schema ([`Experiment::record_schema`]).
#[cfg(feature = "schema")]
#[derive(Debug, Clone)]
pub struct RecordSchema {
    /// The Rust path of the record type (`records::subject::AllocProfile`).
    pub rust_type: &'static str,
    /// What the measured binary prints per line.
    pub record: schemars::Schema,
    /// What the runner adds to every record ([`records::CellFields`]).
    pub cell: schemars::Schema,
}

impl std::fmt::Display for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Experiment {
    type Err = UnknownExperiment;

    fn from_str(s: &str) -> Result<Experiment, UnknownExperiment> {
        Experiment::find(s).ok_or_else(|| UnknownExperiment(s.to_string()))
    }
}

/// A name no experiment has.
#[derive(Debug, thiserror::Error)]
#[error("unknown experiment {0:?}; known: {known:?}", known = Experiment::names())]
pub struct UnknownExperiment(pub String);

/// A spec's `[params]` table, as the cell carries it to the measured binary.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// Params that the experiment's type does not read.
#[derive(Debug, thiserror::Error)]
#[error("{experiment}: params: {message}")]
pub struct ParamsError {
    pub experiment: Experiment,
    /// serde's message, which names the key at fault and, for an unknown
    /// key, every key the type reads.
    pub message: String,
}

/// Reads `params` into the experiment's type `P` (defaults for what is left
/// out; `P` refuses unknown keys): the one way both the spec loader and the
/// measured binary read them.
pub fn read_params<P: serde::de::DeserializeOwned>(experiment: Experiment, params: &Params) -> Result<P, ParamsError> {
    serde_json::from_value(serde_json::Value::Object(params.clone()))
        .map_err(|e| ParamsError { experiment, message: e.to_string() })
}

/// The one spelling of a cell's name, as the staging directory's files, the
/// manifest's `cells` and its per-cell maps, and the traces name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CellId {
    /// A subject cell: `{codec}-p{payload}-{variant}-r{rep}`.
    Subject { codec: String, payload: u64, variant: String, rep: u32 },
    /// A server cell: `{experiment}-{variant}-r{rep}`.
    Server { experiment: Experiment, variant: String, rep: u32 },
}

impl CellId {
    /// A subject cell.
    pub fn subject(codec: &str, payload: u64, variant: &str, rep: u32) -> CellId {
        CellId::Subject { codec: codec.to_string(), payload, variant: variant.to_string(), rep }
    }

    /// The file its trace of kind `ext` (`dhat.json`, `events.json`) has.
    pub fn trace_file(&self, ext: &str) -> String {
        format!("{self}.{ext}")
    }
}

impl std::fmt::Display for CellId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellId::Subject { codec, payload, variant, rep } => write!(f, "{codec}-p{payload}-{variant}-r{rep}"),
            CellId::Server { experiment, variant, rep } => write!(f, "{experiment}-{variant}-r{rep}"),
        }
    }
}

/// A name that is no cell's.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a cell's name (`<codec>-p<payload>-<variant>-r<rep>` or `<experiment>-<variant>-r<rep>`)")]
pub struct BadCellId(pub String);

impl std::str::FromStr for CellId {
    type Err = BadCellId;

    /// Codec, transport, experiment and variant names hold `-` themselves,
    /// so a name is read from the known codecs and experiments: the longest
    /// that prefixes it.
    fn from_str(s: &str) -> Result<CellId, BadCellId> {
        let bad = || BadCellId(s.to_string());
        let (rest, rep) = s.rsplit_once("-r").ok_or_else(bad)?;
        let rep: u32 = rep.parse().map_err(|_| bad())?;
        let server = Experiment::ALL
            .iter()
            .filter(|e| e.target() == Target::DatastoreServer)
            .filter_map(|e| Some((*e, rest.strip_prefix(e.name())?.strip_prefix('-')?)))
            .max_by_key(|(e, _)| e.name().len());
        if let Some((experiment, variant)) = server {
            if !variant.is_empty() {
                return Ok(CellId::Server { experiment, variant: variant.to_string(), rep });
            }
        }
        let names = Codec::ALL.iter().map(|c| c.name()).chain(Transport::ALL.iter().map(|t| t.name()));
        let (codec, tail) = names
            .filter_map(|n| Some((n, rest.strip_prefix(n)?.strip_prefix("-p")?)))
            .max_by_key(|(n, _)| n.len())
            .ok_or_else(bad)?;
        let (payload, variant) = tail.split_once('-').ok_or_else(bad)?;
        let payload: u64 = payload.parse().map_err(|_| bad())?;
        if variant.is_empty() {
            return Err(bad());
        }
        Ok(CellId::Subject { codec: codec.to_string(), payload, variant: variant.to_string(), rep })
    }
}

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
    /// The codecs of `stacks::codecs` (the vote encoded and decoded in memory).
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
    /// The transport stacks of `stacks::transports` (one round trip over loopback).
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
        let mut n = Experiment::names();
        n.sort_unstable();
        let len = n.len();
        n.dedup();
        assert_eq!(len, n.len(), "{n:?}");
        for &e in Experiment::ALL {
            let ran = e.runs();
            assert_eq!(ran.runs(), ran, "{e}: what a binary runs is an experiment of its own");
            assert_eq!((ran.target(), ran.over()), (e.target(), e.over()), "{e}");
            assert_eq!(e.name().parse::<Experiment>().unwrap(), e);
            assert_eq!(serde_json::to_string(&e).unwrap(), format!("{:?}", e.name()));
        }
    }

    #[test]
    fn targets_split_the_experiments() {
        let (subject, server) = (Target::Subject.experiments(), Target::DatastoreServer.experiments());
        assert!(subject.iter().all(|e| !server.contains(e)), "{subject:?} / {server:?}");
        assert_eq!(subject.len() + server.len(), Experiment::ALL.iter().filter(|e| e.runs() == **e).count());
        assert!(!subject.contains(&Experiment::InstrumentationCost), "it runs codec-speed");
        assert!(!server.contains(&Experiment::ProfilerCost), "it runs throughput");
    }

    #[test]
    fn a_misspelt_param_is_refused_naming_it_and_the_known_keys() {
        let params = |text: &str| match serde_json::from_str::<serde_json::Value>(text).unwrap() {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let e = Experiment::PipelineDepth.check_params(&params(r#"{"rtt_usec": [250]}"#)).unwrap_err().to_string();
        assert!(e.contains("rtt_usec") && e.contains("rtt_us") && e.contains("pipeline-depth"), "{e}");
        let e = Experiment::Throughput.check_params(&params(r#"{"rows": "many"}"#)).unwrap_err().to_string();
        assert!(e.contains("invalid type"), "{e}");
        Experiment::PipelineDepth.check_params(&params(r#"{"rtt_us": [250], "runs": 3}"#)).unwrap();
        // The subject's experiments take none.
        assert!(Experiment::AllocProfile.check_params(&params(r#"{"rows": 1}"#)).is_err());
        Experiment::AllocProfile.check_params(&params("{}")).unwrap();
    }

    #[test]
    fn a_record_reads_back_as_its_type_and_writes_as_it_was_printed() {
        let line = r#"{"msg":3,"phase":"decode","wire_bytes":240,"allocs":2,"bytes":96,"bytes_freed":null}"#;
        let r = Experiment::AllocProfile.decode_record(line).unwrap();
        let typed = records::subject::AllocProfile::of(&r).unwrap();
        assert_eq!((typed.msg, typed.allocs), (3, Some(2)));
        assert!(records::subject::CodecSpeed::of(&r).is_none());
        let back: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(back, serde_json::from_str::<serde_json::Value>(line).unwrap());
        // A field the type lacks is named; so is a missing one.
        let e = Experiment::AllocProfile.decode_record(r#"{"msg":3}"#).unwrap_err().to_string();
        assert!(e.contains("phase"), "{e}");
    }

    #[test]
    fn a_failed_build_is_a_record_of_any_experiment() {
        let failed = AnyRecord::BuildFailed(records::runner::BuildFailed { error: "lld: not found".into() });
        let line = serde_json::to_string(&failed).unwrap();
        assert!(line.contains(records::runner::BUILD_FAILED), "{line}");
        assert_eq!(Experiment::Throughput.decode_record(&line).unwrap(), failed);
        // build-stages' own type holds it: read back as that.
        let staged = Experiment::BuildStages.decode_record(&line).unwrap();
        assert!(matches!(staged, AnyRecord::BuildStages(_)), "{staged:?}");
        assert_eq!(serde_json::to_string(&staged).unwrap(), line);
    }

    #[test]
    fn cell_ids_read_back_as_written() {
        let ids = [
            CellId::Subject { codec: "json-rpc-borrowed".into(), payload: 64, variant: "dhat".into(), rep: 1 },
            CellId::Subject { codec: "json-rpc".into(), payload: 0, variant: "x86-64".into(), rep: 0 },
            CellId::Subject { codec: "zap-tcp".into(), payload: 65536, variant: "jemalloc-plain".into(), rep: 12 },
            CellId::Server { experiment: Experiment::ServerHeapGrowth, variant: "events".into(), rep: 0 },
            CellId::Server { experiment: Experiment::BuildStages, variant: "pgo-bolt".into(), rep: 4 },
        ];
        for id in ids {
            let text = id.to_string();
            assert_eq!(text.parse::<CellId>().unwrap(), id, "{text}");
        }
        assert_eq!(
            CellId::Subject { codec: "json-rpc".into(), payload: 64, variant: "dhat".into(), rep: 0 }.to_string(),
            "json-rpc-p64-dhat-r0"
        );
        for bad in ["zap-p0-dhat", "nope-p0-dhat-r0", "zap-px-dhat-r0", "throughput--r0"] {
            assert!(bad.parse::<CellId>().is_err(), "{bad}");
        }
    }
}
