//! The shutdown signal every connection listens for while idle.

use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// Set once; connections waiting between frames wake and close, connections
/// in the middle of a call finish it first.
#[derive(Default)]
pub struct Shutdown {
    set: AtomicBool,
    notify: Notify,
}

impl Shutdown {
    pub fn trigger(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Resolves once [`Shutdown::trigger`] has been called (before or after this call).
    pub async fn wait(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        // NOTE: register before checking the flag, so a trigger in between is not lost.
        notified.as_mut().enable();
        if self.is_set() {
            return;
        }
        notified.await;
    }
}
