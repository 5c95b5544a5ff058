//! Dependent chains through the delay proxy, pipelined against
//! request-response: each step asks for the key after the previous answer,
//! so a chain of depth d ends at d (checked on every run).
//!
//! Params: `depths`, `rtt_us` (round-trip delays the proxy adds; 0 = the
//! proxy's own forwarding only), `runs` per (delay, depth, mode),
//! interleaved: pipelined first in even runs, request-response first in
//! odd ones, so neither mode always follows the other.
//! Records ([`records::server::pipeline_depth`]): one per run (its mode,
//! `ms`, `flights`: client→server flights the proxy saw), and per (delay,
//! depth) one ratio record with `speedup` = median request-response ÷
//! median pipelined of this run.

use super::{median, progress, Cell, Records, ServerChild};
use crate::chain;
use crate::client::{Client, ClientError};
use anyhow::{bail, Result};
use records::server::pipeline_depth::{Chain as Timed, Params, Ratio, Record};
use std::time::{Duration, Instant};

type Chain = fn(&mut Client, usize) -> Result<u64, ClientError>;

pub fn run(cell: &Cell, p: &Params, out: &mut Records) -> Result<()> {
    let (depths, rtts, runs) = (p.depths.clone(), p.rtt_us.clone(), p.runs);
    if runs == 0 || depths.contains(&0) {
        bail!("{}: params.runs and every params.depths entry must be at least 1", cell.experiment);
    }
    let server = ServerChild::spawn(&super::work_dir(cell)?.join("db"), cell.trace.as_deref(), &[])?;
    chain::ensure_table(&mut Client::connect(server.addr)?)?;
    let total = rtts.len() * depths.len();
    let mut done = 0;
    for &rtt in &rtts {
        let proxy = crate::proxy::start("127.0.0.1:0", server.addr, Duration::from_nanos(rtt * 500))?;
        let mut c = Client::connect(proxy.addr)?;
        for &depth in &depths {
            let (mut tp, mut tr) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
            // NOTE: no flush between chains: the previous chain's queued
            // finishes leave with this chain's calls, in the same flight.
            for r in 0..runs {
                type Make = fn(Timed) -> Record;
                let mut pair = [
                    ("pipelined", Record::Pipelined as Make, chain::pipelined as Chain, &mut tp),
                    ("request-response", Record::RequestResponse as Make, chain::request_response as Chain, &mut tr),
                ];
                if r % 2 == 1 {
                    pair.reverse();
                }
                for (mode, record, f, times) in pair {
                    let f0 = proxy.stats.flights();
                    let t0 = Instant::now();
                    let v = f(&mut c, depth)?;
                    let ms = t0.elapsed().as_secs_f64() * 1e3;
                    if v != depth as u64 {
                        bail!("{mode} chain of depth {depth} ended at {v}");
                    }
                    times.push(ms);
                    out.emit(&record(Timed {
                        depth: depth as u64,
                        rtt_us: rtt,
                        run: r as u64,
                        ms,
                        flights: proxy.stats.flights() - f0,
                    }))?;
                }
            }
            let (p, q) = (median(&mut tp), median(&mut tr));
            out.emit(&Record::Ratio(Ratio { depth: depth as u64, rtt_us: rtt, runs: runs as u64, speedup: q / p }))?;
            done += 1;
            progress(done, total);
        }
    }
    server.stop()
}
