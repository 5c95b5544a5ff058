//! `subject --cell '<json>'`: runs one cell, prints JSON-lines records on stdout.

use anyhow::{bail, Context, Result};
use std::io::Write;
use subjects::{experiments, Cell};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let cell: Cell = match (args.next().as_deref(), args.next()) {
        (Some("--cell"), Some(json)) => serde_json::from_str(&json).context("parsing --cell JSON")?,
        (Some("--variant"), None) => {
            println!("{}", probe::VARIANT.name());
            return Ok(());
        }
        (Some("--revision"), None) => {
            println!("{}", probe::GIT_REVISION);
            return Ok(());
        }
        _ => bail!("usage: subject --cell '<json>' | subject --variant | subject --revision"),
    };
    // NOTE: locals drop in reverse order, so `out` is flushed and closed before
    // `probe` drops and (in the dhat build) writes its trace.
    let probe = probe::Probe::start(cell.trace.as_deref());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    experiments::run(experiments::Ctx { cell: &cell, probe: &probe, out: &mut out })
        .with_context(|| format!("cell {} / {} / payload {}", cell.experiment, cell.codec, cell.payload))?;
    out.flush()?;
    Ok(())
}
