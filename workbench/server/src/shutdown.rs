//! Graceful shutdown without a per-connection waiter.
//!
//! NOTE: an idle connection waits on its socket alone; a shutdown waiter in
//! each of 10,000 idle tasks would cost more than the rest of their state.
//! Instead the listener stops accepting, counts the connections answering
//! calls, and once none is left (after a short grace for calls already
//! buffered) drops the remaining, idle, connections.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[derive(Default)]
pub struct Shutdown {
    set: AtomicBool,
    busy: AtomicUsize,
}

impl Shutdown {
    pub fn trigger(&self) {
        self.set.store(true, Ordering::SeqCst);
    }

    /// Connections in the middle of answering a batch of calls.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// Marks this connection busy until the guard drops.
    pub fn working(&self) -> Busy<'_> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self)
    }
}

pub struct Busy<'a>(&'a Shutdown);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Resolves on Ctrl-C or SIGTERM: how both binaries (the server, and the
/// load binary's delay proxy) are asked to stop.
pub async fn signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
