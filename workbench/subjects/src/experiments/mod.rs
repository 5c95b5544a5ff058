//! One module per experiment; [`runs`] maps each `registry::Experiment`
//! the subject runs to what runs it (one exhaustive match), and [`run`]
//! dispatches on it: a [`OverCodecs`] or [`OverTransports`] arm for each,
//! so an experiment without a run function is a compile error. Each experiment
//! is generic over the codec (or transport) and writes JSON-lines records
//! (types of the `records` crate) to `out`. Cell metadata (codec, payload,
//! variant, repetition) is added by the CLI, so records carry only what was
//! measured.

use crate::codecs::{self, Codec, WithCodec};
use crate::transports::{self, Transport, WithTransport};
use anyhow::{anyhow, Result};
use probe::Cell;
use std::io::Write;

pub mod alloc_profile;
pub mod codec_speed;
pub mod heap_growth;
pub mod roundtrip;
pub mod sampling_accuracy;

/// The context an experiment runs in.
pub struct Ctx<'a> {
    pub cell: &'a Cell,
    pub probe: &'a probe::Probe,
    pub out: &'a mut dyn Write,
}

/// What a codec experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverCodecs {
    AllocProfile,
    HeapGrowth,
    CodecSpeed,
    SamplingAccuracy,
}

/// What a transport experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverTransports {
    HeapGrowth,
    RoundTrip(roundtrip::Loop, roundtrip::Rows),
    SamplingAccuracy,
}

/// What one experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    Codecs(OverCodecs),
    Transports(OverTransports),
}

/// What the subject runs for `experiment` (its [`registry::Experiment::runs`]),
/// `None` for the server's: one exhaustive match, so an experiment without
/// a run function does not compile.
pub fn runs(experiment: registry::Experiment) -> Option<Runs> {
    use registry::Experiment as E;
    use roundtrip::{Loop, Rows};
    use OverCodecs as C;
    use OverTransports as T;
    use Runs::{Codecs, Transports};
    Some(match experiment.runs() {
        E::AllocProfile => Codecs(C::AllocProfile),
        E::HeapGrowth => Codecs(C::HeapGrowth),
        E::SamplingAccuracy => Codecs(C::SamplingAccuracy),
        E::SamplingAccuracyTransports => Transports(T::SamplingAccuracy),
        E::CodecSpeed | E::InstrumentationCost => Codecs(C::CodecSpeed),
        E::TransportAlloc => Transports(T::RoundTrip(Loop::Closed, Rows::Runs)),
        E::TransportHeapGrowth => Transports(T::HeapGrowth),
        E::RoundtripLatency => Transports(T::RoundTrip(Loop::Closed, Rows::Latencies)),
        E::RoundtripLatencyAwake => Transports(T::RoundTrip(Loop::Awake, Rows::Latencies)),
        E::RoundtripLatencyOpen => Transports(T::RoundTrip(Loop::Open, Rows::Latencies)),
        E::DatastoreQueries
        | E::BuildStages
        | E::ConnectionScaling
        | E::PipelineDepth
        | E::IoWakeup
        | E::ServerHeapGrowth
        | E::FaultSoak
        | E::RequestCost
        | E::SamplingAccuracyServer
        | E::Throughput
        | E::ProfilerCost => return None,
    })
}

struct Dispatch<'a>(Ctx<'a>, OverCodecs);

impl WithCodec for Dispatch<'_> {
    type Out = Result<()>;
    fn run<C: Codec>(self) -> Result<()> {
        match self.1 {
            OverCodecs::AllocProfile => alloc_profile::run::<C>(self.0),
            OverCodecs::HeapGrowth => heap_growth::run::<C>(self.0),
            OverCodecs::CodecSpeed => codec_speed::run::<C>(self.0),
            OverCodecs::SamplingAccuracy => {
                let (cell, probe) = (self.0.cell, self.0.probe);
                sampling_accuracy::run(self.0, || alloc_profile::measure::<C>(cell, probe).map(drop))
            }
        }
    }
}

struct DispatchTransport<'a>(Ctx<'a>, OverTransports);

impl WithTransport for DispatchTransport<'_> {
    type Out = Result<()>;
    fn run<T: Transport>(self) -> Result<()> {
        match self.1 {
            OverTransports::HeapGrowth => heap_growth::run_transport::<T>(self.0),
            OverTransports::RoundTrip(mode, rows) => roundtrip::run::<T>(self.0, mode, rows),
            OverTransports::SamplingAccuracy => {
                let cell = self.0.cell;
                sampling_accuracy::run(self.0, || roundtrip::trips::<T>(cell))
            }
        }
    }
}

/// The file this process's probe writes: the cell's `trace`, except where
/// the cell's profiles come from child processes that each write their own
/// (sampling-accuracy's sampled build: a profile per interval).
pub fn own_trace(cell: &Cell) -> Option<&std::path::Path> {
    match cell.experiment.runs() {
        registry::Experiment::SamplingAccuracy | registry::Experiment::SamplingAccuracyTransports
            if !sampling_accuracy::is_profiled_process() =>
        {
            None
        }
        _ => cell.trace.as_deref(),
    }
}

/// Runs the cell's experiment against the cell's codec or transport.
pub fn run(ctx: Ctx<'_>) -> Result<()> {
    transports::on_server_thread(|| probe::set_side(probe::Side::Server));
    let Some(runs) = runs(ctx.cell.experiment) else {
        return Err(anyhow!("{}: runs in the server's driver (datastore-load), not the subject", ctx.cell.experiment));
    };
    let name = ctx.cell.codec.as_str();
    match runs {
        Runs::Codecs(what) => {
            let Some(id) = registry::Codec::find(name) else {
                return Err(anyhow!("unknown codec {name:?}; known: {:?}", registry::Codec::names()));
            };
            codecs::run_with(id, Dispatch(ctx, what))
        }
        Runs::Transports(what) => {
            let Some(id) = registry::Transport::find(name) else {
                return Err(anyhow!("unknown transport {name:?}; known: {:?}", registry::Transport::names()));
            };
            transports::run_with(id, DispatchTransport(ctx, what))
        }
    }
}

/// Reports progress to the CLI on stderr. NOTE: formatting to stderr does not
/// allocate (unbuffered, locked), so progress does not disturb the counts.
pub fn progress(done: u64, total: u64) {
    eprintln!("progress {done} {total}");
}
