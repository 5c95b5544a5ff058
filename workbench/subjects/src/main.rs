//! `subject --cell '<json>'`: runs one cell, prints JSON-lines records on
//! stdout (the flags of [`probe::cell::Invocation`], shared with every
//! measured binary).

use anyhow::{bail, Context, Result};
use probe::cell::Invocation;
use std::io::Write;
use subjects::experiments;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cell = match Invocation::parse(&args) {
        Some(Ok(Invocation::Cell(cell))) => cell,
        Some(Ok(asked)) => {
            println!("{}", asked.build_fact().unwrap_or_default());
            return Ok(());
        }
        Some(Err(e)) => return Err(e).context("parsing --cell JSON"),
        None => bail!("usage: subject {}", Invocation::USAGE),
    };
    // NOTE: locals drop in reverse order, so `out` is flushed and closed before
    // `probe` drops and (in the dhat build) writes its trace.
    let probe = probe::Probe::start(experiments::own_trace(&cell));
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    experiments::run(experiments::Ctx { cell: &cell, probe: &probe, out: &mut out })
        .with_context(|| format!("cell {} / {} / payload {}", cell.experiment, cell.codec, cell.payload))?;
    out.flush()?;
    Ok(())
}
