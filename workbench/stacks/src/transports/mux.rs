//! Protobuf-mux: prost messages, length-prefixed (`[u32 LE len]`), on one
//! stream of a yamux session (the multiplexer libp2p uses) over TCP.
//!
//! NOTE: a yamux `Connection` makes progress only while someone polls it, so
//! each side runs a driver task that keeps calling `poll_next_inbound`; the
//! client's driver runs whenever the client's runtime is in `block_on`.

use super::Transport;
use crate::codecs::generated::pb::Vote;
use crate::codecs::protobuf::{same, to_pb};
use crate::vote::VoteData;
use anyhow::{anyhow, ensure, Context, Result};
use futures::future::poll_fn;
use futures::io::{AsyncReadExt, AsyncWriteExt};
use prost::Message;
use std::thread::JoinHandle;
use tokio::runtime::{Builder, Runtime};
use tokio_util::compat::TokioAsyncReadCompatExt;
use yamux::{Config, Connection, Mode, Stream};

/// Largest message accepted, as in ZAP's framing.
const MAX_FRAME: usize = zap::frame::DEFAULT_MAX_FRAME;

async fn read_frame(s: &mut Stream, buf: &mut Vec<u8>) -> Result<bool> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    let n = u32::from_le_bytes(len) as usize;
    ensure!(n <= MAX_FRAME, "frame length {n} exceeds {MAX_FRAME}");
    buf.resize(n, 0);
    s.read_exact(buf).await?;
    Ok(true)
}

async fn write_frame(s: &mut Stream, msg: &[u8]) -> Result<()> {
    s.write_all(&(msg.len() as u32).to_le_bytes()).await?;
    s.write_all(msg).await?;
    s.flush().await?;
    Ok(())
}

async fn serve(sock: tokio::net::TcpStream, seed: u64, payload: usize) -> Result<u64> {
    let mut conn = Connection::new(sock.compat(), Config::default(), Mode::Server);
    let mut stream = poll_fn(|cx| conn.poll_next_inbound(cx)).await.context("no stream")??;
    // Keep the session moving while this task reads and writes the stream.
    tokio::task::spawn_local(async move { while let Some(Ok(_)) = poll_fn(|cx| conn.poll_next_inbound(cx)).await {} });
    let (mut expect, mut buf, mut out) = (VoteData::with_payload(payload), Vec::new(), Vec::new());
    let mut n = 0;
    while read_frame(&mut stream, &mut buf).await? {
        let vote = Vote::decode(&buf[..])?;
        expect.set(seed, n);
        n += 1;
        ensure!(same(&vote, &expect), "vote {n} differs from the expected one");
        out.clear();
        vote.encode(&mut out)?;
        write_frame(&mut stream, &out).await?;
    }
    Ok(n)
}

pub struct Mux {
    rt: Option<Runtime>,
    local: tokio::task::LocalSet,
    stream: Option<Stream>,
    server: Option<JoinHandle<()>>,
    buf: Vec<u8>,
}

impl Transport for Mux {
    const ID: registry::Transport = registry::Transport::Mux;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || {
            let Some((rt, sock)) = super::accept_one(listener) else { return };
            let local = tokio::task::LocalSet::new();
            let _ = local.block_on(&rt, async move {
                let sock = tokio::net::TcpStream::from_std(sock)?;
                serve(sock, seed, payload).await
            });
        });
        let rt = Builder::new_current_thread().enable_all().build()?;
        let local = tokio::task::LocalSet::new();
        let stream = local.block_on(&rt, async {
            let sock = tokio::net::TcpStream::connect(addr).await?;
            sock.set_nodelay(true)?;
            let mut conn = Connection::new(sock.compat(), Config::default(), Mode::Client);
            let stream = poll_fn(|cx| conn.poll_new_outbound(cx)).await?;
            tokio::task::spawn_local(async move {
                while let Some(Ok(_)) = poll_fn(|cx| conn.poll_next_inbound(cx)).await {}
            });
            anyhow::Ok(stream)
        })?;
        Ok(Mux { rt: Some(rt), local, stream: Some(stream), server: Some(server), buf: Vec::new() })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let (Some(rt), Some(stream)) = (&self.rt, self.stream.as_mut()) else {
            return Err(anyhow!("transport closed"));
        };
        let buf = &mut self.buf;
        let reply = self.local.block_on(rt, async {
            buf.clear();
            to_pb(v).encode(buf)?;
            write_frame(stream, buf).await?;
            ensure!(read_frame(stream, buf).await?, "server closed the stream");
            anyhow::Ok(Vote::decode(&buf[..])?)
        })?;
        ensure!(same(&reply, v), "reply differs from the vote sent");
        Ok(())
    }
}

impl Drop for Mux {
    fn drop(&mut self) {
        // NOTE: the session's driver task lives in the LocalSet, not the runtime.
        self.stream.take();
        super::close_local(&mut self.local, &mut self.rt, &mut self.server);
    }
}
