//! The floor of a loopback round trip: as many bytes as ZAP puts on the wire
//! for this payload, echoed over blocking TCP with `TCP_NODELAY`, behind a
//! 4-byte length and nothing else — no codec, no envelope, no checks. What
//! every other stack costs above this is its software; this row is the
//! kernel, the loopback and the thread wake-ups alone, measured in the same run.

use super::Transport;
use crate::codecs::zap::ZapCodec;
use crate::codecs::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::{ensure, Result};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread::JoinHandle;

pub struct RawTcp {
    sock: TcpStream,
    /// The request: length prefix and bytes, fixed for the run.
    request: Vec<u8>,
    reply: Vec<u8>,
    server: Option<JoinHandle<()>>,
}

fn echo(mut sock: TcpStream) -> std::io::Result<()> {
    // PERF: one `read` takes the whole message once it has arrived, as the
    // framed stacks' buffered readers do, so the floor makes no more system
    // calls than the stacks it is the floor of.
    let mut buf = vec![0u8; 4096];
    let mut have = 0;
    loop {
        let want = match buf[..have].first_chunk::<4>() {
            Some(len) => u32::from_le_bytes(*len) as usize + 4,
            None => 4,
        };
        if have >= want {
            sock.write_all(&buf[..want])?;
            buf.copy_within(want..have, 0);
            have -= want;
            continue;
        }
        if buf.len() < want {
            buf.resize(want, 0);
        }
        match sock.read(&mut buf[have..])? {
            0 => return Ok(()),
            n => have += n,
        }
    }
}

impl Transport for RawTcp {
    const ID: registry::Transport = registry::Transport::RawTcp;
    // NOTE: the floor checks nothing by design; it is not a server to trust.
    const CHECKS: bool = false;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let mut v = VoteData::with_payload(payload);
        v.set(seed, 0);
        let wire = ZapCodec::new().encode(&v, Envelope::Request)?.to_vec();
        let mut request = (wire.len() as u32).to_le_bytes().to_vec();
        request.extend_from_slice(&wire);
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || {
            if let Ok((sock, _)) = listener.accept() {
                let _ = sock.set_nodelay(true).and_then(|_| echo(sock));
            }
        });
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        let reply = vec![0u8; request.len()];
        Ok(RawTcp { sock, request, reply, server: Some(server) })
    }

    fn round_trip(&mut self, _v: &VoteData) -> Result<()> {
        self.sock.write_all(&self.request)?;
        self.sock.read_exact(&mut self.reply)?;
        ensure!(self.reply.len() == self.request.len(), "short echo");
        Ok(())
    }
}

impl Drop for RawTcp {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}
