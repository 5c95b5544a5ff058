//! One module per experiment; [`EXPERIMENTS`] pairs each registry entry
//! ([`probe::registry`]) the subject runs with what runs it, and [`run`]
//! dispatches on it: a [`OverCodecs`] or [`OverTransports`] arm for each,
//! matched exhaustively, so an entry without a run function is a compile
//! error and an unknown name an error naming the known ones. Each experiment
//! is generic over the codec (or transport) and writes JSON-lines records
//! (types of the `records` crate) to `out`. Cell metadata (codec, payload,
//! variant, repetition) is added by the CLI, so records carry only what was
//! measured.

use crate::codecs::{self, Codec, WithCodec};
use crate::transports::{self, Transport, WithTransport};
use anyhow::{anyhow, Result};
use probe::registry;
use probe::Cell;
use std::io::Write;

pub mod alloc_profile;
pub mod codec_speed;
pub mod heap_growth;
pub mod roundtrip;

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
}

/// What a transport experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverTransports {
    HeapGrowth,
    RoundTrip(roundtrip::Loop),
}

/// What one registry entry runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    Codecs(OverCodecs),
    Transports(OverTransports),
}

/// Every experiment the subject runs, by the registry's name ([`registry::Experiment::runs`]).
pub const EXPERIMENTS: &[(registry::Experiment, Runs)] = {
    use roundtrip::Loop;
    use OverCodecs as C;
    use OverTransports as T;
    use Runs::{Codecs, Transports};
    &[
        (registry::ALLOC_PROFILE, Codecs(C::AllocProfile)),
        (registry::HEAP_GROWTH, Codecs(C::HeapGrowth)),
        (registry::CODEC_SPEED, Codecs(C::CodecSpeed)),
        (registry::TRANSPORT_ALLOC, Transports(T::RoundTrip(Loop::Closed))),
        (registry::TRANSPORT_HEAP_GROWTH, Transports(T::HeapGrowth)),
        (registry::ROUNDTRIP_LATENCY, Transports(T::RoundTrip(Loop::Closed))),
        (registry::ROUNDTRIP_LATENCY_AWAKE, Transports(T::RoundTrip(Loop::Awake))),
        (registry::ROUNDTRIP_LATENCY_OPEN, Transports(T::RoundTrip(Loop::Open))),
    ]
};

struct Dispatch<'a>(Ctx<'a>, OverCodecs);

impl WithCodec for Dispatch<'_> {
    type Out = Result<()>;
    fn run<C: Codec>(self) -> Result<()> {
        match self.1 {
            OverCodecs::AllocProfile => alloc_profile::run::<C>(self.0),
            OverCodecs::HeapGrowth => heap_growth::run::<C>(self.0),
            OverCodecs::CodecSpeed => codec_speed::run::<C>(self.0),
        }
    }
}

struct DispatchTransport<'a>(Ctx<'a>, OverTransports);

impl WithTransport for DispatchTransport<'_> {
    type Out = Result<()>;
    fn run<T: Transport>(self) -> Result<()> {
        match self.1 {
            OverTransports::HeapGrowth => heap_growth::run_transport::<T>(self.0),
            OverTransports::RoundTrip(mode) => roundtrip::run::<T>(self.0, mode),
        }
    }
}

/// Runs the cell's experiment against the cell's codec or transport.
pub fn run(ctx: Ctx<'_>) -> Result<()> {
    let Some(&(_, runs)) = EXPERIMENTS.iter().find(|(e, _)| e.runs == ctx.cell.experiment) else {
        let known: Vec<&str> = EXPERIMENTS.iter().map(|(e, _)| e.runs).collect();
        return Err(anyhow!("unknown experiment {:?}; known: {known:?}", ctx.cell.experiment));
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
