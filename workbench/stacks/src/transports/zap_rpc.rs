//! ZAP over TCP with its own stack: framing with pooled buffers and the RPC
//! layer (request/response envelopes, promise table). The server's handler
//! does what every server here does: regenerates the vote it expects next,
//! decodes and compares every field, and encodes its reply.

use super::Transport;
use crate::codecs::zap::ZapCodec;
use crate::codecs::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::{ensure, Result};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Mutex;
use std::thread::JoinHandle;
use zap::rpc::{status, Client, Dispatcher, Limits, ServerConn};

/// The one method of the benchmark service.
const VOTE: u32 = 1;

pub struct ZapRpc {
    client: Client<TcpStream, TcpStream>,
    codec: ZapCodec,
    sock: TcpStream,
    server: Option<JoinHandle<()>>,
}

/// The server's state: its codec and the next vote it expects.
struct Expect {
    codec: ZapCodec,
    vote: VoteData,
    seed: u64,
    next: u64,
}

fn dispatcher(seed: u64, payload: usize) -> Dispatcher {
    // NOTE: handlers are `Fn`; the state sits behind an uncontended lock
    // (one connection, one server thread), which allocates nothing.
    let state = Mutex::new(Expect { codec: ZapCodec::new(), vote: VoteData::with_payload(payload), seed, next: 0 });
    let mut d = Dispatcher::new();
    d.register(VOTE, move |call, out| {
        let mut s = state.lock().map_err(|_| status::INTERNAL)?;
        let Expect { codec, vote, seed, next } = &mut *s;
        vote.set(*seed, *next);
        if let Err(e) = codec.decode(call.payload, vote, Envelope::Request) {
            use std::io::Write;
            let _ = write!(out, "vote {next}: {e}");
            return Err(status::BAD_REQUEST);
        }
        *next += 1;
        let reply = codec.encode(vote, Envelope::Response).map_err(|_| status::INTERNAL)?;
        out.extend_from_slice(reply);
        Ok(())
    });
    d
}

impl Transport for ZapRpc {
    const ID: registry::Transport = registry::Transport::ZapRpc;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || {
            if let Ok((sock, _)) = listener.accept() {
                let _ = sock.set_nodelay(true);
                if let Ok(r) = sock.try_clone() {
                    let _ = ServerConn::new(Limits::default()).serve(&dispatcher(seed, payload), r, sock);
                }
            }
        });
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        let client = Client::new(sock.try_clone()?, sock.try_clone()?);
        Ok(ZapRpc { client, codec: ZapCodec::new(), sock, server: Some(server) })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let req = self.codec.encode(v, Envelope::Request)?;
        let p = self.client.call(VOTE, req)?;
        let reply = self.client.wait(p)?;
        ensure!(
            reply.status == status::OK,
            "server answered {}: {}",
            reply.status,
            String::from_utf8_lossy(reply.body)
        );
        let body = reply.body;
        // The reply must be the vote we sent, as the server encoded it.
        let checked = ZapCodec::new().decode(body, v, Envelope::Response);
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
