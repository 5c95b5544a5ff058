//! One module per experiment; [`run`] dispatches on the names of
//! [`probe::registry`] (a cell names the experiment it runs and, through the
//! registry's [`Over`], whether its `codec` is a codec or a transport). Each experiment is
//! generic over the codec and writes JSON-lines records to `out`. Cell
//! metadata (codec, payload, variant, repetition) is added by the CLI, so
//! records carry only what was measured.

use crate::codecs::{self, Codec, WithCodec};
use crate::transports::{self, Transport, WithTransport};
use anyhow::{anyhow, Result};
use probe::registry::{self, Over, Target};
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

struct Dispatch<'a>(Ctx<'a>);

impl WithCodec for Dispatch<'_> {
    type Out = Result<()>;
    fn run<C: Codec>(self) -> Result<()> {
        let ctx = self.0;
        match ctx.cell.experiment.as_str() {
            alloc_profile::NAME => alloc_profile::run::<C>(ctx),
            heap_growth::NAME => heap_growth::run::<C>(ctx),
            codec_speed::NAME => codec_speed::run::<C>(ctx),
            other => Err(anyhow!("{other:?} is not a codec experiment")),
        }
    }
}

struct DispatchTransport<'a>(Ctx<'a>);

impl WithTransport for DispatchTransport<'_> {
    type Out = Result<()>;
    fn run<T: Transport>(self) -> Result<()> {
        let ctx = self.0;
        match ctx.cell.experiment.as_str() {
            heap_growth::OVER_TRANSPORTS => heap_growth::run_transport::<T>(ctx),
            _ => roundtrip::run::<T>(ctx),
        }
    }
}

/// Runs the cell's experiment against the cell's codec or transport.
pub fn run(ctx: Ctx<'_>) -> Result<()> {
    let codec = ctx.cell.codec.clone();
    let known = Target::Subject.experiments();
    let Some(entry) = registry::find(&ctx.cell.experiment).filter(|e| known.contains(&e.name)) else {
        return Err(anyhow!("unknown experiment {:?}; known: {known:?}", ctx.cell.experiment));
    };
    if entry.over == Over::Transports {
        return transports::run_with(&codec, DispatchTransport(ctx))
            .ok_or_else(|| anyhow!("unknown transport {codec:?}; known: {:?}", transports::NAMES))?;
    }
    codecs::run_with(&codec, Dispatch(ctx))
        .ok_or_else(|| anyhow!("unknown codec {codec:?}; known: {:?}", codecs::NAMES))?
}

/// Reports progress to the CLI on stderr. NOTE: formatting to stderr does not
/// allocate (unbuffered, locked), so progress does not disturb the counts.
pub fn progress(done: u64, total: u64) {
    eprintln!("progress {done} {total}");
}
