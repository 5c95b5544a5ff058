//! ZAP over TCP with its own stack: framing with pooled buffers and the RPC
//! layer (request/response envelopes, promise table). The server's handler
//! reads every field of the vote in place and echoes the message as the body.

use super::Transport;
use crate::codecs::zap::ZapCodec;
use crate::codecs::{Codec, Side};
use crate::vote::VoteData;
use anyhow::{ensure, Result};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread::JoinHandle;
use zap::rpc::{status, Client, Dispatcher, Limits, ServerConn};
use zap::Vote;

/// The one method of the benchmark service.
const VOTE: u32 = 1;

pub struct ZapRpc {
    client: Client<TcpStream, TcpStream>,
    codec: ZapCodec,
    sock: TcpStream,
    server: Option<JoinHandle<()>>,
    next: u64,
}

fn dispatcher() -> Dispatcher {
    let mut d = Dispatcher::new();
    d.register(VOTE, |call, out| {
        let v = zap::read::<Vote>(call.payload).map_err(|_| status::BAD_REQUEST)?;
        // Obtain every field, as the other servers do, then echo the message.
        let ok = v.payload().is_ok() && v.block_hash().len() + v.voter_id().len() + v.signature().len() == 128;
        if !ok {
            return Err(status::BAD_REQUEST);
        }
        std::hint::black_box((v.round(), v.timestamp(), v.vote_type()));
        out.extend_from_slice(call.payload);
        Ok(())
    });
    d
}

impl Transport for ZapRpc {
    const NAME: &'static str = "zap-tcp";

    fn start(_seed: u64, _payload: usize) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || {
            if let Ok((sock, _)) = listener.accept() {
                let _ = sock.set_nodelay(true);
                if let Ok(r) = sock.try_clone() {
                    let _ = ServerConn::new(Limits::default()).serve(&dispatcher(), r, sock);
                }
            }
        });
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        let client = Client::new(sock.try_clone()?, sock.try_clone()?);
        Ok(ZapRpc { client, codec: ZapCodec::new(), sock, server: Some(server), next: 0 })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        ensure!(v.round == self.next, "vote {} out of sequence (expected {})", v.round, self.next);
        self.next += 1;
        let req = self.codec.encode(v, Side::Request)?;
        let p = self.client.call(VOTE, req)?;
        let reply = self.client.wait(p)?;
        ensure!(reply.status == status::OK, "server answered {}", reply.status);
        let body = reply.body;
        // The echo must be the vote we sent.
        let checked = ZapCodec::new().decode(body, v, Side::Response);
        self.client.finish(p)?;
        checked
    }
}

impl Drop for ZapRpc {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}
