//! Round trips over a transport: per round trip, allocations and bytes
//! (client and server together, and split by side, in the dhat build) and
//! wall-clock latency.
//! Registered three times: `transport-alloc` (dhat spec), `roundtrip-latency`
//! (jemalloc spec), and `roundtrip-latency-awake`, the same with a spinning,
//! lowest-priority thread per core for the whole cell, so that no core sits
//! idle: an idle vCPU takes tens of µs to wake, which hides every stack's own
//! cost in the plain mode. Each has its own dataset and table.

use super::Ctx;
use crate::transports::Transport;
use crate::vote::VoteData;
use anyhow::Result;
use probe::{Side, SideCounts};
use serde::Serialize;
use std::time::Instant;

pub const ALLOC: &str = "transport-alloc";
pub const LATENCY: &str = "roundtrip-latency";
pub const AWAKE: &str = "roundtrip-latency-awake";

/// Spinners that keep every core out of its idle state while they live.
/// NOTE: each runs at nice 19, so a woken client or server thread preempts it
/// at once and it takes almost no time from them (CFS weight 15 vs 1024).
struct Awake {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Awake {
    fn start() -> Awake {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    // SAFETY: gettid and setpriority touch no memory; PRIO_PROCESS
                    // with a thread id sets that thread's nice value on Linux.
                    unsafe {
                        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
                    }
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Awake { stop, threads }
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[derive(Serialize)]
struct Record {
    msg: u64,
    allocs: Option<u64>,
    bytes: Option<u64>,
    ns: u64,
    /// Per side (dhat build): the harness thread, the server thread, and
    /// threads a library started on its own.
    client_allocs: Option<u64>,
    client_bytes: Option<u64>,
    server_allocs: Option<u64>,
    server_bytes: Option<u64>,
    other_allocs: Option<u64>,
}

pub fn run<T: Transport>(ctx: Ctx<'_>) -> Result<()> {
    let cell = ctx.cell;
    let probe = ctx.probe;
    probe::set_side(Side::Client);
    let _awake = (cell.experiment == AWAKE).then(Awake::start);
    let mut t = T::start(cell.seed, cell.payload)?;
    let mut v = VoteData::with_payload(cell.payload);
    let mut rows: Vec<(u64, probe::Counters, Option<SideCounts>, u64)> = Vec::with_capacity(cell.messages as usize);
    let total = cell.warmup + cell.messages;
    let step = (total / 20).max(1);
    for i in 0..total {
        v.set(cell.seed, i);
        let (c0, s0) = (probe.counters(), probe.sides());
        let t0 = Instant::now();
        t.round_trip(&v)?;
        let ns = t0.elapsed().as_nanos() as u64;
        let (c1, s1) = (probe.counters(), probe.sides());
        if i >= cell.warmup {
            let sides = s1.zip(s0).map(|(a, b)| a.since(&b));
            rows.push((i - cell.warmup, c1.since(&c0), sides, ns));
        }
        if (i + 1) % step == 0 {
            super::progress(i + 1, total);
        }
    }
    drop(t);
    for (msg, c, sides, ns) in rows {
        let side = |f: fn(&SideCounts) -> u64| sides.as_ref().map(f);
        let rec = Record {
            msg,
            allocs: c.allocs,
            bytes: c.bytes_allocated,
            ns,
            client_allocs: side(|s| s.calls(Side::Client)),
            client_bytes: side(|s| s.bytes(Side::Client)),
            server_allocs: side(|s| s.calls(Side::Server)),
            server_bytes: side(|s| s.bytes(Side::Server)),
            other_allocs: side(|s| s.calls(Side::Other)),
        };
        serde_json::to_writer(&mut *ctx.out, &rec)?;
        ctx.out.write_all(b"\n")?;
    }
    Ok(())
}
