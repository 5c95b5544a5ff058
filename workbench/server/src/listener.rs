//! The accept loop: connection limit, refusal frames, graceful shutdown.

use crate::connection::{self, Shared};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// What a server did, printed when it exits.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub accepted: u64,
    pub refused: u64,
    pub calls: u64,
    pub errors: u64,
    pub closed_bad_frame: u64,
    pub closed_stalled: u64,
    /// Connections still answering calls when the drain timeout ran out.
    pub abandoned: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} connection(s) accepted, {} refused at the limit; {} call(s), {} answered with an error; \
             closed {} for a bad frame, {} for stalling; {} still busy at exit",
            self.accepted,
            self.refused,
            self.calls,
            self.errors,
            self.closed_bad_frame,
            self.closed_stalled,
            self.abandoned
        )
    }
}

const GRACE: Duration = Duration::from_millis(50);

/// DRAIN = 30 s: how long shutdown waits for in-flight calls to finish.
const DRAIN: Duration = Duration::from_secs(30);

/// Accepts until `stop` resolves, then stops accepting, lets every
/// connection finish the call it is in, and returns.
pub async fn run(listener: TcpListener, sh: Arc<Shared>, stop: impl std::future::Future<Output = ()>) -> Summary {
    tokio::pin!(stop);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            loop {
                tokio::select! {
                    r = listener.accept() => match r {
                        Ok((stream, _)) => admit(stream, &sh),
                        Err(e) => {
                            // Out of descriptors (EMFILE) or a reset before accept:
                            // keep serving; back off so the loop does not spin.
                            eprintln!("accept: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    },
                    _ = &mut stop => break,
                }
            }
            drop(listener);
            sh.shutdown.trigger();
            // GRACE = 50 ms: calls already in a socket's buffer when the signal
            // came are read and answered too, not cut off.
            let t0 = std::time::Instant::now();
            while (sh.shutdown.busy() > 0 || t0.elapsed() < GRACE) && t0.elapsed() < DRAIN {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    let abandoned = sh.shutdown.busy();
    // Every call has been answered: dropping the set closes the idle connections.
    drop(local);
    let c = &sh.counters;
    Summary {
        accepted: c.accepted.load(Ordering::Relaxed),
        refused: c.refused.load(Ordering::Relaxed),
        calls: c.calls.load(Ordering::Relaxed),
        errors: c.errors.load(Ordering::Relaxed),
        closed_bad_frame: c.closed_bad_frame.load(Ordering::Relaxed),
        closed_stalled: c.closed_stalled.load(Ordering::Relaxed),
        abandoned,
    }
}

fn admit(stream: tokio::net::TcpStream, sh: &Arc<Shared>) {
    if sh.connections.load(Ordering::SeqCst) >= sh.cfg.max_connections {
        sh.counters.refused.fetch_add(1, Ordering::Relaxed);
        let _ = stream.try_write(&connection::refusal_frame(sh.cfg.max_connections));
        return;
    }
    let _ = stream.set_nodelay(true);
    sh.connections.fetch_add(1, Ordering::SeqCst);
    sh.counters.accepted.fetch_add(1, Ordering::Relaxed);
    // NOTE: spawn_local: the connection futures never leave the I/O thread,
    // so they need not be Send (and carry no cross-thread scheduling state).
    tokio::task::spawn_local(connection::serve(stream, sh.clone()));
}
