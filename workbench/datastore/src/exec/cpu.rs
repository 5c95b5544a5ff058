//! One CPU budget for the whole process: a query's scan uses helper
//! threads only for cores nobody else is using.
//!
//! Every thread running a query holds a [`Lease`] for itself and its
//! helpers. A server's worker threads and the helpers of the queries they
//! run therefore draw on the same count: one query alone gets every core,
//! and as concurrent queries arrive each gets fewer helpers, so concurrency
//! and parallelism never together ask for more threads than cores (beyond
//! the one each running query always has).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

static BUSY: AtomicUsize = AtomicUsize::new(0);

/// Cores available to this process.
pub fn cores() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Threads granted to one query (the caller's own included), returned on drop.
#[derive(Debug)]
pub struct Lease(usize);

impl Lease {
    pub fn threads(&self) -> usize {
        self.0
    }
}

/// Up to `want` threads: the caller's, plus one per idle core.
pub fn lease(want: usize) -> Lease {
    let mut busy = BUSY.load(Ordering::Relaxed);
    loop {
        let take = want.min(cores().saturating_sub(busy)).max(1);
        match BUSY.compare_exchange_weak(busy, busy + take, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Lease(take),
            Err(b) => busy = b,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        BUSY.fetch_sub(self.0, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_share_the_cores() {
        // Other tests in this binary may hold leases; only compare deltas.
        let a = lease(usize::MAX);
        assert!(a.threads() >= 1 && a.threads() <= cores());
        let b = lease(usize::MAX);
        // While `a` holds every core it was given, `b` gets what remains, at least its own thread.
        assert!(b.threads() >= 1);
        assert!(a.threads() + b.threads() <= cores() + 1);
        drop((a, b));
        assert_eq!(lease(1).threads(), 1);
    }
}
