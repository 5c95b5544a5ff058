//! Every transport stack round-trips votes over loopback, its server refuses
//! a vote out of sequence, and it shuts down in bounded time; a pinned
//! thread runs on its core alone.
//!
//! These were the crate's unit tests; see tests/codecs.rs for why they live
//! here.

use anyhow::Result;
use subjects::transports::{pin_current_thread, run_with, Transport, WithTransport};
use subjects::vote::VoteData;

struct Trips(usize, registry::Transport);
impl WithTransport for Trips {
    type Out = Result<()>;
    fn run<T: Transport>(self) -> Result<()> {
        anyhow::ensure!(T::ID == self.1, "{:?} dispatches to {}", self.1, T::NAME);
        let mut t = T::start(9, self.0)?;
        let mut v = VoteData::with_payload(self.0);
        for i in 0..50 {
            v.set(9, i);
            t.round_trip(&v)?;
        }
        // A wrong vote goes straight to the server (no client checks the
        // sequence) and must be refused there: a server that skips its
        // check and echoes would pass the client's reply comparison.
        v.set(9, 1000);
        anyhow::ensure!(!T::CHECKS || t.round_trip(&v).is_err(), "{} server accepted a vote out of sequence", T::NAME);
        // After a clean run the transport shuts down (server thread joined) in bounded time.
        let (done, finished) = std::sync::mpsc::channel();
        let size = self.0;
        std::thread::spawn(move || {
            let r = (|| -> Result<()> {
                let mut t = T::start(9, size)?;
                let mut v = VoteData::with_payload(size);
                for i in 0..20 {
                    v.set(9, i);
                    t.round_trip(&v)?;
                }
                drop(t);
                Ok(())
            })();
            let _ = done.send(r);
        });
        finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .map_err(|_| anyhow::anyhow!("{} did not shut down within 20 s", T::NAME))?
    }
}

#[test]
fn a_pinned_thread_runs_on_its_core_alone() {
    std::thread::spawn(|| {
        pin_current_thread(0).unwrap();
        // SAFETY: the set is owned by this frame; pid 0 is this thread.
        let set = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
            set
        };
        assert_eq!(unsafe { libc::CPU_COUNT(&set) }, 1);
        assert!(unsafe { libc::CPU_ISSET(0, &set) });
    })
    .join()
    .unwrap();
}

#[test]
fn every_transport_round_trips_over_loopback() {
    for &id in registry::Transport::ALL {
        for size in [0, 1024] {
            run_with(id, Trips(size, id)).unwrap_or_else(|e| panic!("{id:?} size {size}: {e:#}"));
        }
    }
}
