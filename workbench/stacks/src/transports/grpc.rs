//! gRPC: a tonic unary call over HTTP/2 on loopback, prost messages, as
//! tonic's users write it. The server runs on its own thread and tokio
//! runtime; the client drives its calls from a current-thread runtime.

use super::Transport;
use crate::codecs::generated::pb::voting_client::VotingClient;
use crate::codecs::generated::pb::voting_server::{Voting, VotingServer};
use crate::codecs::generated::pb::Vote;
use crate::codecs::protobuf::{same, to_pb};
use crate::vote::VoteData;
use anyhow::{ensure, Context, Result};
use std::sync::Mutex;
use std::thread::JoinHandle;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};

struct Svc {
    seed: u64,
    /// The next vote expected, regenerated in place (no allocation per call).
    expect: Mutex<(u64, VoteData)>,
}

#[tonic::async_trait]
impl Voting for Svc {
    async fn cast(&self, req: Request<Vote>) -> Result<Response<Vote>, Status> {
        let vote = req.into_inner();
        {
            let mut g = self.expect.lock().map_err(|_| Status::internal("poisoned"))?;
            let (n, e) = &mut *g;
            e.set(self.seed, *n);
            *n += 1;
            if !same(&vote, e) {
                return Err(Status::invalid_argument("vote differs from the expected one"));
            }
        }
        Ok(Response::new(vote))
    }
}

pub struct Grpc {
    // NOTE: options so that Drop can close the client (and its runtime's
    // connection task) before asking the server to shut down gracefully.
    rt: Option<Runtime>,
    client: Option<VotingClient<Channel>>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl Transport for Grpc {
    const ID: registry::Transport = registry::Transport::Grpc;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let svc = Svc { seed, expect: Mutex::new((0, VoteData::with_payload(payload))) };
        let server = super::spawn_server(move || {
            let Ok(rt) = Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(listener) else { return };
                // NOTE: a custom incoming stream skips tonic's own socket options:
                // set TCP_NODELAY here, as every other TCP stack does on both ends.
                let incoming = tokio_stream::StreamExt::map(tokio_stream::wrappers::TcpListenerStream::new(l), |s| {
                    s.and_then(|s| s.set_nodelay(true).map(|()| s))
                });
                let _ = Server::builder()
                    .add_service(VotingServer::new(svc))
                    .serve_with_incoming_shutdown(incoming, async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let rt = Builder::new_current_thread().enable_all().build()?;
        let client =
            rt.block_on(VotingClient::connect(format!("http://{addr}"))).context("connecting to the gRPC server")?;
        Ok(Grpc { rt: Some(rt), client: Some(client), stop: Some(stop), server: Some(server) })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let (Some(rt), Some(client)) = (&self.rt, &mut self.client) else { anyhow::bail!("transport closed") };
        let reply = rt.block_on(client.cast(Request::new(to_pb(v))))?.into_inner();
        ensure!(same(&reply, v), "reply differs from the vote sent");
        Ok(())
    }
}

impl Drop for Grpc {
    fn drop(&mut self) {
        self.client.take();
        self.rt.take();
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}
