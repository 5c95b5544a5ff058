//! The I/O thread's wake-up (`Config::idle_spin`) never holds another
//! connection back: while it polls for the answer to a lone slow query, a
//! ping on another connection is answered long before the query ends.
//! With a spin that blocked the I/O thread (the code before issue 28), the
//! ping waited for the query.

mod common;

use common::TempDir;
use server::client::Client;
use server::limits::Config;
use std::time::{Duration, Instant};

#[test]
fn a_ping_is_answered_while_the_io_thread_polls_for_a_lone_query() {
    let dir = TempDir::new("wakeup");
    let data = dir.0.join("data");
    let db = datastore::Db::open(&data).unwrap();
    server::workload::load(&db, 1_000_000, 7, 1_000_000, true, |_, _| {}).unwrap();
    drop(db);
    // A spin far longer than the query, on one scan thread so the query is slow.
    let cfg = Config { idle_spin: Duration::from_secs(20), query_threads: 1, ..Config::default() };
    let s = server::start(&data, "127.0.0.1:0", cfg).unwrap();
    let slow = "SELECT user_id, quantile(0.5)(value) AS q FROM t GROUP BY user_id ORDER BY q DESC LIMIT 1";
    let mut pinger = Client::connect(s.addr).unwrap();
    let mut c = Client::connect(s.addr).unwrap();
    let t0 = Instant::now();
    c.execute(slow).unwrap();
    let alone = t0.elapsed();
    assert!(alone >= Duration::from_millis(30), "the query must outlast a ping by far; took {alone:?}");

    let (query_ms, ping_at) = std::thread::scope(|sc| {
        let q = sc.spawn(|| {
            let t = Instant::now();
            c.execute(slow).unwrap();
            t.elapsed()
        });
        std::thread::sleep(alone / 4);
        let t = Instant::now();
        let p = pinger.ping().unwrap();
        pinger.wait(p).unwrap();
        pinger.finish(p).unwrap();
        let ping = t.elapsed();
        (q.join().unwrap(), ping)
    });
    assert!(
        ping_at < query_ms / 2,
        "a ping took {ping_at:?} while a {query_ms:?} query was polled for: the wake-up held it back"
    );
    s.stop().expect("the server stops cleanly");
}
