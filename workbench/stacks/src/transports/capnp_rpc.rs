//! Cap'n Proto through capnp-rpc, its native RPC: a `Voting` capability
//! bootstrapped over a two-party vat network on TCP, one `cast` call per
//! round trip, the vote in the params and back in the results. Both sides
//! run capnp-rpc's `RpcSystem` on a current-thread runtime inside a
//! `LocalSet` (capnp-rpc is single-threaded by design).

use super::Transport;
use crate::codecs::capnp::{same, set};
use crate::codecs::generated::vote_capnp::voting;
use crate::vote::VoteData;
use anyhow::{anyhow, Result};
use capnp_rpc::rpc_twoparty_capnp::Side;
use capnp_rpc::{twoparty, RpcSystem};
use std::cell::RefCell;
use std::rc::Rc;
use std::thread::JoinHandle;
use tokio::runtime::{Builder, Runtime};
use tokio::task::LocalSet;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

struct Svc {
    seed: u64,
    /// The next vote expected, regenerated in place.
    expect: RefCell<(u64, VoteData)>,
}

impl voting::Server for Svc {
    async fn cast(self: Rc<Self>, params: voting::CastParams, mut results: voting::CastResults) -> capnp::Result<()> {
        let vote = params.get()?.get_vote()?;
        let mut g = self.expect.borrow_mut();
        let (n, e) = &mut *g;
        e.set(self.seed, *n);
        *n += 1;
        same(vote, e).map_err(|err| capnp::Error::failed(format!("vote {}: {err}", *n - 1)))?;
        set(results.get().init_vote(), e);
        Ok(())
    }
}

fn network(sock: tokio::net::TcpStream, side: Side) -> Box<dyn capnp_rpc::VatNetwork<twoparty::VatId>> {
    let (r, w) = sock.into_split();
    Box::new(twoparty::VatNetwork::new(
        futures::io::BufReader::new(r.compat()),
        futures::io::BufWriter::new(w.compat_write()),
        side,
        Default::default(),
    ))
}

pub struct CapnpRpc {
    rt: Option<Runtime>,
    local: LocalSet,
    client: Option<voting::Client>,
    server: Option<JoinHandle<()>>,
}

impl Transport for CapnpRpc {
    const ID: registry::Transport = registry::Transport::CapnpRpc;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || {
            let Some((rt, sock)) = super::accept_one(listener) else { return };
            let local = LocalSet::new();
            let _ = local.block_on(&rt, async move {
                let sock = tokio::net::TcpStream::from_std(sock)?;
                let svc = Svc { seed, expect: RefCell::new((0, VoteData::with_payload(payload))) };
                let cap: voting::Client = capnp_rpc::new_client(svc);
                // Runs until the client disconnects.
                RpcSystem::new(network(sock, Side::Server), Some(cap.client)).await?;
                anyhow::Ok(())
            });
        });
        let rt = Builder::new_current_thread().enable_all().build()?;
        let local = LocalSet::new();
        let client = local.block_on(&rt, async {
            let sock = tokio::net::TcpStream::connect(addr).await?;
            sock.set_nodelay(true)?;
            let mut rpc = RpcSystem::new(network(sock, Side::Client), None);
            let client: voting::Client = rpc.bootstrap(Side::Server);
            tokio::task::spawn_local(rpc);
            anyhow::Ok(client)
        })?;
        Ok(CapnpRpc { rt: Some(rt), local, client: Some(client), server: Some(server) })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let (Some(rt), Some(client)) = (&self.rt, &self.client) else { return Err(anyhow!("transport closed")) };
        self.local.block_on(rt, async {
            let mut req = client.cast_request();
            set(req.get().init_vote(), v);
            let reply = req.send().promise.await?;
            same(reply.get()?.get_vote()?, v)
        })
    }
}

impl Drop for CapnpRpc {
    fn drop(&mut self) {
        // NOTE: the RpcSystem task lives in the LocalSet, not the runtime.
        self.client.take();
        super::close_local(&mut self.local, &mut self.rt, &mut self.server);
    }
}
