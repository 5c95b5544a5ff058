//! Allocation gate: a framed request/response loop over an in-memory duplex
//! performs 0 allocations per round trip in steady state, client and server.

mod one_test;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

use zap::duplex::MemPipe;
use zap::frame::{FrameReader, FrameWriter};
use zap::rpc::{Client, Dispatcher, Limits, ServerConn};

fn framed_round_trips_allocate_nothing_in_steady_state() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut d = Dispatcher::new();
    d.register(1, |c, out| {
        out.extend_from_slice(c.payload);
        Ok(())
    });
    d.register(2, |c, out| {
        out.extend_from_slice(c.target.unwrap_or(&[]));
        out.extend_from_slice(c.payload);
        Ok(())
    });
    let (up, down) = (MemPipe::with_capacity(1 << 16), MemPipe::with_capacity(1 << 16));
    let mut client = Client::new(down.clone(), up.clone());
    let mut server = ServerConn::new(Limits::default());
    let (mut sr, mut sw) = (FrameReader::new(up), FrameWriter::new(down));
    let payload = [0x5au8; 256];

    let mut round = |client: &mut Client<MemPipe, MemPipe>| {
        let v = client.call(1, &payload).unwrap();
        let w = client.call_on(v, 2, b"tail").unwrap();
        client.flush().unwrap();
        server.serve_available(&d, &mut sr, &mut sw).unwrap();
        let n = client.wait(w).unwrap().body.len();
        client.finish(v).unwrap();
        client.finish(w).unwrap();
        n
    };
    for _ in 0..10 {
        round(&mut client); // warm-up: buffers, pools and tables reach their size
    }
    let before = dhat::HeapStats::get();
    let mut total = 0;
    for _ in 0..1000 {
        total += round(&mut client);
    }
    let after = dhat::HeapStats::get();
    assert_eq!(total, 1000 * (256 + 4));
    dhat::assert_eq!(after.total_blocks - before.total_blocks, 0);
}

// NOTE: no libtest harness (Cargo.toml: `harness = false`): dhat counts every
// thread of the process, and the harness's main thread, waiting on the test
// thread, sometimes allocates mid-test (4 blocks once, on a loaded machine).
fn main() {
    one_test::run(
        "framed_round_trips_allocate_nothing_in_steady_state",
        framed_round_trips_allocate_nothing_in_steady_state,
    );
}
