//! What one link of a pipelined dependent chain costs the server, layer by
//! layer: the engine's `Db::select`, the worker's `Handler::run` over a
//! whole chain, and the chain over loopback TCP (no proxy). The
//! pipeline-depth experiment's speedup at depth d is bounded by
//! d·R ÷ (R + (d − 1)·s), so `s`, printed here, is the figure to move.
//!
//! A developer's tool, not a dataset: the experiment is
//! `workbench run pipeline-depth`. Run the built binary under `perf record`
//! to see where a step goes:
//!
//! ```sh
//! target/release/examples/chain_step [iterations] [engine|handler|tcp|all|flights]
//! valgrind --tool=callgrind target/release/examples/chain_step 100 engine
//! ```
//!
//! Timings on a shared 2-core VM move by ±30 % from run to run; callgrind's
//! instruction count of the engine layer repeats exactly.

use datastore::{Limits, Value};
use server::chain;
use server::client::Client;
use server::handler::{Handler, Scratch};
use server::limits::Config;
use server::work::{Prev, Queries, Work};
use std::time::Instant;

const DEPTH: usize = 64;

use server::experiments::median;

/// Median over `runs` of `f`'s time in µs.
fn time_us(runs: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    let m = median(&mut t);
    (m, t[runs / 10], t[runs - 1 - runs / 10])
}

fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args().nth(1).map_or(Ok(2000), |a| a.parse())?;
    let layer = std::env::args().nth(2).unwrap_or_else(|| "all".into());
    let want = |l: &str| layer == "all" || layer == l;
    let dir = std::env::temp_dir().join(format!("chain-step-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    {
        let s = server::start(&dir, "127.0.0.1:0", Config::default())?;
        chain::ensure_table(&mut Client::connect(s.addr)?)?;
        s.stop().expect("the server stops cleanly");
    }
    let db = datastore::Db::open(&dir)?;
    let limits = Limits::default();
    let mut v = 0u64;
    if want("engine") {
        let (engine, lo, hi) = time_us(runs * DEPTH, || {
            let (r, _) = db.select(chain::STEP, &[("$prev", Value::U(v))], &limits).expect("step");
            v = match r.rows[0][0] {
                Value::U(x) if x < 900 => x,
                _ => 0,
            };
        });
        println!("engine  Db::select, one step:            {engine:7.3} µs (p10 {lo:.3}, p90 {hi:.3})");
    }

    let h = Handler::new(datastore::Db::open(&dir)?, Config::default());
    let mut s = Scratch::default();
    let chain_work = |depth: usize| {
        let mut calls = Queries::one(1, 1, chain::FIRST, Prev::None);
        for i in 1..depth {
            let prev = Prev::Earlier { index: i - 1, promise: i as u32 };
            calls.push(i as u32 + 1, i as u64 + 1, chain::STEP, prev);
        }
        Work::Queries(calls)
    };
    if want("handler") {
        let (h1, _, _) = time_us(runs, || assert_eq!(h.run(chain_work(1), &mut s).len(), 1));
        let (h64, _, _) = time_us(runs, || assert_eq!(h.run(chain_work(DEPTH), &mut s).len(), DEPTH));
        println!("handler Handler::run, per step (64 − 1): {:7.3} µs", (h64 - h1) / (DEPTH - 1) as f64);
    }
    if want("tcp") {
        let srv = server::start(&dir, "127.0.0.1:0", Config::default())?;
        let mut c = Client::connect(srv.addr)?;
        let (t1, _, _) = time_us(runs / 4, || assert_eq!(chain::pipelined(&mut c, 1).unwrap(), 1));
        let (t64, _, _) = time_us(runs / 4, || assert_eq!(chain::pipelined(&mut c, DEPTH).unwrap(), DEPTH as u64));
        println!(
            "tcp     pipelined chain, per step:        {:7.3} µs (depth 1: {t1:.1} µs, depth {DEPTH}: {t64:.1} µs)",
            (t64 - t1) / (DEPTH - 1) as f64
        );
        drop(c);
        srv.stop().expect("the server stops cleanly");
    }
    if layer == "flights" {
        // Only depth-64 chains, for `perf record`: where a flight's time goes.
        let srv = server::start(&dir, "127.0.0.1:0", Config::default())?;
        let mut c = Client::connect(srv.addr)?;
        let (t64, _, _) = time_us(runs, || assert_eq!(chain::pipelined(&mut c, DEPTH).unwrap(), DEPTH as u64));
        println!("flights pipelined chain of {DEPTH}:            {t64:7.1} µs");
        drop(c);
        srv.stop().expect("the server stops cleanly");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
