//! Promise pipelining semantics, over an in-memory pipe and over TCP.

use std::net::{TcpListener, TcpStream};
use zap::duplex::MemPipe;
use zap::frame::{FrameReader, FrameWriter};
use zap::rpc::{status, Client, Dispatcher, Limits, ServerConn};

const ECHO: u32 = 1;
const INC: u32 = 2;
const FAIL: u32 = 3;

fn dispatcher() -> Dispatcher {
    let mut d = Dispatcher::new();
    d.register(ECHO, |c, out| {
        out.extend_from_slice(c.payload);
        Ok(())
    });
    // Adds one to the u64 result of its target (or to its own payload when it has no target).
    d.register(INC, |c, out| {
        let src = c.target.unwrap_or(c.payload);
        let n = u64::from_le_bytes(src.try_into().map_err(|_| status::BAD_REQUEST)?);
        out.extend_from_slice(&(n + 1).to_le_bytes());
        Ok(())
    });
    d.register(FAIL, |_, out| {
        out.extend_from_slice(b"boom");
        Err(status::INTERNAL)
    });
    d
}

struct Mem {
    client: Client<MemPipe, MemPipe>,
    server: ServerConn,
    sr: FrameReader<MemPipe>,
    sw: FrameWriter<MemPipe>,
    d: Dispatcher,
}

impl Mem {
    fn new(limits: Limits) -> Self {
        let (up, down) = (MemPipe::new(), MemPipe::new());
        Mem {
            client: Client::with_limits(down.clone(), up.clone(), limits),
            server: ServerConn::new(limits),
            sr: FrameReader::new(up),
            sw: FrameWriter::new(down),
            d: dispatcher(),
        }
    }
    /// One round trip: the client's queued frames go up, the server answers all.
    fn round_trip(&mut self) -> u64 {
        self.client.flush().unwrap();
        self.server.serve_available(&self.d, &mut self.sr, &mut self.sw).unwrap()
    }
}

#[test]
fn dependent_chain_resolves_in_one_round_trip() {
    let mut m = Mem::new(Limits::default());
    let first = m.client.call(INC, &0u64.to_le_bytes()).unwrap();
    let mut last = first;
    for _ in 0..9 {
        last = m.client.call_on(last, INC, &[]).unwrap();
    }
    // Every call leaves in one batch, before any answer exists.
    assert_eq!(m.round_trip(), 10);
    let r = m.client.wait(last).unwrap();
    assert_eq!((r.status, r.body), (status::OK, &10u64.to_le_bytes()[..]));
    assert_eq!(m.client.wait(first).unwrap().body, &1u64.to_le_bytes());
}

#[test]
fn failed_target_fails_its_dependents() {
    let mut m = Mem::new(Limits::default());
    let bad = m.client.call(FAIL, &[]).unwrap();
    let dep = m.client.call_on(bad, INC, &[]).unwrap();
    let dep2 = m.client.call_on(dep, INC, &[]).unwrap();
    m.round_trip();
    let r = m.client.wait(bad).unwrap();
    assert_eq!((r.status, r.body), (status::INTERNAL, &b"boom"[..]));
    let r = m.client.wait(dep).unwrap();
    assert_eq!(r.status, status::FAILED_DEPENDENCY);
    assert_eq!(std::str::from_utf8(r.body).unwrap(), "target promise 1 failed with status 500");
    assert_eq!(m.client.wait(dep2).unwrap().status, status::FAILED_DEPENDENCY);
}

#[test]
fn unknown_method_and_finished_target() {
    let mut m = Mem::new(Limits::default());
    let p = m.client.call(99, &[]).unwrap();
    let q = m.client.call(ECHO, b"x").unwrap();
    m.round_trip();
    assert_eq!(m.client.wait(p).unwrap().status, status::NOT_FOUND);
    m.client.finish(q).unwrap();
    let r = m.client.call_on(q, INC, &[]).unwrap();
    m.round_trip();
    assert_eq!(m.client.wait(r).unwrap().status, status::GONE);
    assert_eq!(m.server.live_answers(), 2, "q was released by finish");
}

#[test]
fn promise_table_is_bounded_and_finish_frees_it() {
    let limits = Limits { max_promises: 4, ..Limits::default() };
    let mut m = Mem::new(Limits { max_promises: 8, ..limits });
    m.server = ServerConn::new(limits);
    let ps: Vec<_> = (0..5).map(|_| m.client.call(ECHO, b"a").unwrap()).collect();
    m.round_trip();
    for p in &ps[..4] {
        assert_eq!(m.client.wait(*p).unwrap().status, status::OK);
    }
    assert_eq!(m.client.wait(ps[4]).unwrap().status, status::TOO_MANY);
    assert_eq!(m.server.live_answers(), 4);
    for p in ps {
        m.client.finish(p).unwrap();
    }
    let p = m.client.call(ECHO, b"b").unwrap();
    m.round_trip();
    assert_eq!(m.client.wait(p).unwrap().body, b"b");
    assert_eq!(m.server.live_answers(), 1);
}

#[test]
fn client_refuses_unbounded_pending() {
    let mut m = Mem::new(Limits { max_promises: 2, ..Limits::default() });
    m.client.call(ECHO, &[]).unwrap();
    m.client.call(ECHO, &[]).unwrap();
    assert!(matches!(m.client.call(ECHO, &[]), Err(zap::rpc::RpcError::TooManyPending { limit: 2 })));
}

#[test]
fn malformed_request_gets_400() {
    let d = dispatcher();
    let mut s = ServerConn::new(Limits::default());
    let resp = s.handle(&d, b"not a zap message").unwrap().to_vec();
    let r = zap::read::<zap::Response>(&resp).unwrap();
    assert_eq!(r.status(), status::BAD_REQUEST);
    assert!(std::str::from_utf8(r.body().unwrap()).unwrap().starts_with("malformed request"));
}

#[test]
fn chain_over_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (sock, _) = listener.accept().unwrap();
        sock.set_nodelay(true).unwrap();
        let d = dispatcher();
        ServerConn::new(Limits::default()).serve(&d, sock.try_clone().unwrap(), sock).unwrap()
    });
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_nodelay(true).unwrap();
    let mut c = Client::new(sock.try_clone().unwrap(), sock);
    let v = c.call(INC, &41u64.to_le_bytes()).unwrap();
    let w = c.call_on(v, INC, &[]).unwrap();
    assert_eq!(c.wait(w).unwrap().body, &43u64.to_le_bytes());
    c.finish(v).unwrap();
    c.finish(w).unwrap();
    c.flush().unwrap();
    drop(c);
    // Two calls and one finish for both (consecutive finishes travel as one run).
    assert_eq!(server.join().unwrap(), 3);
}
