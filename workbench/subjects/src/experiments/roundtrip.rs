//! Round trips over a transport: per round trip, allocations and bytes
//! (client and server together, and split by side, in the dhat build) and
//! wall-clock latency.
//! Registered four times: `transport-alloc` (dhat spec), `roundtrip-latency`
//! (jemalloc spec), `roundtrip-latency-awake`, the same with a spinning,
//! lowest-priority thread per core for the whole cell, so that no core sits
//! idle (an idle vCPU takes tens of µs to wake, which hides every stack's own
//! cost in the plain mode), and `roundtrip-latency-open`, the open loop: a
//! request is due every 1/`params.rate` s whether or not the previous reply
//! has arrived, and its latency counts from when it was due, so a stall
//! counts against every request scheduled behind it (no coordinated
//! omission). Each has its own dataset and table.

use super::Ctx;
use crate::transports::Transport;
use crate::vote::VoteData;
use anyhow::Result;
use probe::{Side, SideCounts};
use records::subject::RoundTrip;
use records::subject::RoundtripParams;
use std::time::Instant;

/// How requests are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// The next request when the reply has arrived.
    Closed,
    /// Closed, with a spinning lowest-priority thread on every core.
    Awake,
    /// One request due every 1/`params.rate` s, latency from when it was due.
    Open,
}

/// SPIN_NS = 200 µs: the open loop sleeps until this long before a request
/// is due and spins the rest, so the client's own timer slack (≈ 60 µs per
/// sleep here) is not counted as the stack's latency.
const SPIN_NS: u64 = 200_000;

/// The open loop's schedule: request i is due at `start + i / rate`.
struct Schedule {
    start: Instant,
    interval_ns: f64,
}

impl Schedule {
    fn from_params(cell: &crate::Cell, p: &RoundtripParams) -> Result<Schedule> {
        let rate = p.rate.unwrap_or(0.0);
        anyhow::ensure!(
            rate.is_finite() && rate > 0.0,
            "{}: params.rate (requests per second) must be a positive number, got {:?}",
            cell.experiment,
            p.rate
        );
        Ok(Schedule { start: Instant::now(), interval_ns: 1e9 / rate })
    }

    /// Waits until request `i` is due (at once if it is late); when it was due.
    fn wait(&self, i: u64) -> Instant {
        let due = self.start + std::time::Duration::from_nanos((i as f64 * self.interval_ns) as u64);
        let now = Instant::now();
        if due > now + std::time::Duration::from_nanos(SPIN_NS) {
            std::thread::sleep(due - now - std::time::Duration::from_nanos(SPIN_NS));
        }
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        due
    }
}

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
            .map(|core| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let _ = crate::transports::pin_current_thread(core);
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

/// Which records a loop writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// One a distinct latency, with how many round trips had it
    /// ([`RoundTrip::latencies`]): the latency experiments, which read
    /// distributions, every round trip counted.
    Latencies,
    /// One a run of consecutive round trips with equal counts
    /// ([`RoundTrip::runs`]): transport-alloc, whose table, gate and
    /// comparison read counts, and whose dataset would otherwise hold a
    /// row for each of millions of round trips that repeat exactly.
    Runs,
}

/// transport-alloc's round trips with nothing recorded per trip: the
/// workload of sampling-accuracy-transports, whose profiles are the record.
pub fn trips<T: Transport>(cell: &crate::Cell) -> Result<()> {
    probe::set_side(Side::Client);
    let mut t = T::start(cell.seed, cell.payload)?;
    let mut v = VoteData::with_payload(cell.payload);
    let total = cell.warmup + cell.messages;
    let step = (total / 20).max(1);
    for i in 0..total {
        v.set(cell.seed, i);
        t.round_trip(&v)?;
        if (i + 1) % step == 0 {
            super::progress(i + 1, total);
        }
    }
    Ok(())
}

pub fn run<T: Transport>(ctx: Ctx<'_>, mode: Loop, written: Rows) -> Result<()> {
    let cell = ctx.cell;
    let probe = ctx.probe;
    // Before the loop and the side tags: read once, never per round trip.
    let params: RoundtripParams = cell.params()?;
    probe::set_side(Side::Client);
    let _awake = (mode == Loop::Awake).then(Awake::start);
    if let Some(core) = params.pin_core {
        // One core for client and server: each hands the core straight to the
        // other, so no wake-up crosses cores (a cross-core wake-up past a
        // nice-19 spinner took ~38 µs instead of ~4, at random per process).
        crate::transports::pin_current_thread(core)
            .map_err(|e| anyhow::anyhow!("{}: params.pin_core = {core}: {e}", cell.experiment))?;
        crate::transports::pin_servers(Some(core));
    }
    let mut t = T::start(cell.seed, cell.payload)?;
    let mut v = VoteData::with_payload(cell.payload);
    let mut rows: Vec<RoundTrip> = Vec::with_capacity(cell.messages as usize);
    let total = cell.warmup + cell.messages;
    let step = (total / 20).max(1);
    let schedule = (mode == Loop::Open).then(|| Schedule::from_params(cell, &params)).transpose()?;
    for i in 0..total {
        v.set(cell.seed, i);
        let due = schedule.as_ref().map(|s| s.wait(i));
        let (c0, s0) = (probe.counters(), probe.sides());
        let t0 = Instant::now();
        t.round_trip(&v)?;
        let t1 = Instant::now();
        let (c1, s1) = (probe.counters(), probe.sides());
        let service = (t1 - t0).as_nanos() as u64;
        let (ns, service_ns) = match due {
            Some(due) => ((t1 - due).as_nanos() as u64, Some(service)),
            None => (service, None),
        };
        if i >= cell.warmup {
            // NOTE: plain data into reserved capacity: recording allocates nothing.
            let (c, sides) = (c1.since(&c0), s1.zip(s0).map(|(a, b)| a.since(&b)));
            let side = |f: fn(&SideCounts) -> u64| sides.as_ref().map(f);
            rows.push(RoundTrip {
                msg: i - cell.warmup,
                allocs: c.allocs,
                bytes: c.bytes_allocated,
                ns,
                service_ns,
                client_allocs: side(|s| s.calls(Side::Client)),
                client_bytes: side(|s| s.bytes(Side::Client)),
                server_allocs: side(|s| s.calls(Side::Server)),
                server_bytes: side(|s| s.bytes(Side::Server)),
                other_allocs: side(|s| s.calls(Side::Other)),
                repeat: 1,
            });
        }
        if (i + 1) % step == 0 {
            super::progress(i + 1, total);
        }
    }
    drop(t);
    // After the loop: the coalescing allocates nothing inside the measurement.
    let rows = match written {
        Rows::Latencies => RoundTrip::latencies(rows),
        Rows::Runs => RoundTrip::runs(rows),
    };
    for rec in rows {
        records::line(ctx.out, &rec)?;
    }
    Ok(())
}
