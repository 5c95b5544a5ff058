//! One module per transport stack, each with the same shape: a type
//! implementing [`Transport`] that starts a server on `127.0.0.1:0`, connects
//! one client, and does one round trip per call. Adding a transport is
//! its line in [`registry::Transport`], a copy of a module here, and
//! the arm of [`run_with`] the compiler then asks for.
//!
//! A round trip: the client encodes the vote and sends it; the server
//! decodes and validates every field, encodes its reply and sends it; the
//! client decodes and validates the reply. Servers run on their own thread
//! started by [`spawn_server`], which tags it as the server side: the dhat
//! build counts both sides and splits them by tag (threads a library starts
//! on its own count as "other"); jemalloc's per-thread counters see the
//! client thread only.
//!
//! NOTE: servers validate against the vote they expect next: the harness
//! sends the votes of one seed in order, `VoteData::set(seed, 0)`, `(seed, 1)`…
//! Clients do not check the sequence themselves, so a wrong vote reaches the
//! server, and only the server's own check can refuse it (tested below).

use crate::vote::VoteData;
use anyhow::Result;

pub mod capnp_rpc;
pub mod framed;
pub mod grpc;
pub mod json_http;
pub mod mux;
pub mod quic;
pub mod raw_tcp;
pub mod zap_rpc;

/// The same few operations for every transport.
pub trait Transport: Sized {
    /// Its entry in the registry.
    const ID: registry::Transport;
    /// Name used in specs, records and tables.
    const NAME: &'static str = Self::ID.name();
    /// Whether the server validates what it receives (every stack but the
    /// raw-TCP floor, which only echoes).
    const CHECKS: bool = true;
    /// Starts a server on 127.0.0.1:0 and connects one client to it.
    fn start(seed: u64, payload: usize) -> Result<Self>;
    /// One round trip of `v` (the next vote of the seed).
    fn round_trip(&mut self, v: &VoteData) -> Result<()>;
}

/// The core servers started from now on are pinned to (`usize::MAX`: none).
static SERVER_CORE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(usize::MAX);

/// Pins the servers started after this call to `core` (`None`: let them float).
pub fn pin_servers(core: Option<usize>) {
    SERVER_CORE.store(core.unwrap_or(usize::MAX), std::sync::atomic::Ordering::Relaxed);
}

/// Pins the calling thread to one core. Best effort: an error (a core
/// outside the process's cpuset) leaves the thread where it was.
pub fn pin_current_thread(core: usize) -> std::io::Result<()> {
    // SAFETY: the set is a plain bitmask owned by this frame; pid 0 means the
    // calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What a server thread runs first: the subject tags the thread as the
/// server side (`probe::set_side`). NOTE: a hook, not a call, because this
/// crate must not link the probe (the crate docs say why).
static ON_SERVER_THREAD: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what every server thread started from now on runs first (once per
/// process; a second call is ignored).
pub fn on_server_thread(hook: fn()) {
    let _ = ON_SERVER_THREAD.set(hook);
}

/// Spawns a transport's server thread, tagged as the server side (by the
/// [`on_server_thread`] hook) so that the dhat build splits a round trip's
/// allocations into client and server, and pinned if [`pin_servers`] asked
/// for it.
pub(crate) fn spawn_server<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    let core = SERVER_CORE.load(std::sync::atomic::Ordering::Relaxed);
    std::thread::spawn(move || {
        if let Some(hook) = ON_SERVER_THREAD.get() {
            hook();
        }
        if core != usize::MAX {
            let _ = pin_current_thread(core);
        }
        f()
    })
}

/// The first half of a tokio server thread, shared by the tokio-based stacks:
/// a current-thread runtime and the one accepted connection (no delay,
/// non-blocking, ready for `tokio::net::TcpStream::from_std`). `None` if
/// either fails; the client then sees the connection close.
pub(crate) fn accept_one(listener: std::net::TcpListener) -> Option<(tokio::runtime::Runtime, std::net::TcpStream)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    let (sock, _) = listener.accept().ok()?;
    sock.set_nodelay(true).and_then(|_| sock.set_nonblocking(true)).ok()?;
    Some((rt, sock))
}

/// The shutdown of a client whose connection lives in a `LocalSet` (the
/// yamux driver, capnp-rpc's `RpcSystem`): dropping the set closes the
/// socket, which ends the server's loop, so the runtime can go and the
/// server thread be joined. The caller drops its own handles first.
pub(crate) fn close_local(
    local: &mut tokio::task::LocalSet,
    rt: &mut Option<tokio::runtime::Runtime>,
    server: &mut Option<std::thread::JoinHandle<()>>,
) {
    drop(std::mem::take(local));
    rt.take();
    if let Some(h) = server.take() {
        let _ = h.join();
    }
}

/// Builds (and drops) one runtime with I/O on the caller's thread, once per
/// process. Where tokio's `signal` feature is on (the workspace's build turns
/// it on for the server), the first runtime built with I/O fills a
/// process-global table, a watch channel per signal: 64 blocks on Linux,
/// 22 KB. A client and a server each build their runtime on their own
/// thread, so which side owned those blocks was a race, and the gate saw
/// them move between the sides from run to run. Built here, before either
/// side starts, they belong to neither and are the same every run.
fn warm_runtime_globals() {
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let _ = tokio::runtime::Builder::new_current_thread().enable_io().build();
    });
}

/// Something generic over the transport type, run for a transport named at run time.
pub trait WithTransport {
    type Out;
    fn run<T: Transport>(self) -> Self::Out;
}

/// Runs `f` with the transport `id`.
pub fn run_with<F: WithTransport>(id: registry::Transport, f: F) -> F::Out {
    use registry::Transport as T;
    warm_runtime_globals();
    match id {
        T::RawTcp => f.run::<raw_tcp::RawTcp>(),
        T::ZapRpc => f.run::<zap_rpc::ZapRpc>(),
        T::ZapFramed => f.run::<framed::ZapFramed>(),
        T::FlatBuffersTcp => f.run::<framed::FlatBuffersTcp>(),
        T::CapnpTcp => f.run::<framed::CapnpTcp>(),
        T::CapnpRpc => f.run::<capnp_rpc::CapnpRpc>(),
        T::ProtobufTcp => f.run::<framed::ProtobufTcp>(),
        T::Mux => f.run::<mux::Mux>(),
        T::Grpc => f.run::<grpc::Grpc>(),
        T::Quic => f.run::<quic::Quic>(),
        T::JsonHttp => f.run::<json_http::JsonHttp>(),
    }
}
