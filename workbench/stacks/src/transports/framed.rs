//! A codec over length-prefixed TCP (`[u32 LE len][message]`, ZAP's
//! framing), blocking std sockets, one server thread. Generic over the
//! codec, so the ZAP, FlatBuffers, Cap'n Proto and prost rows share this one
//! module; the rows differ only in the codec, which is the point of the
//! comparison. (`zap-tcp` is ZAP with its RPC layer on top: envelopes, a
//! stored answer per call for pipelining, a `finish` per call, so more work
//! than these rows do; `zap-framed` is ZAP doing exactly theirs.)

use super::Transport;
use crate::codecs::capnp::Capnp;
use crate::codecs::flatbuffers::FlatBuffers;
use crate::codecs::protobuf::Protobuf;
use crate::codecs::zap::ZapCodec;
use crate::codecs::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::{Context, Result};
use std::marker::PhantomData;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread::JoinHandle;
use zap::frame::{FrameReader, FrameWriter};

/// Names the transport of each codec.
pub trait Named {
    const ID: registry::Transport;
}

pub struct Framed<C: Codec, N> {
    client: C,
    reader: FrameReader<TcpStream>,
    writer: FrameWriter<TcpStream>,
    server: Option<JoinHandle<Result<u64>>>,
    _name: PhantomData<N>,
}

fn serve<C: Codec>(sock: TcpStream, seed: u64, payload: usize) -> Result<u64> {
    let mut reader = FrameReader::new(sock.try_clone()?);
    let mut writer = FrameWriter::new(sock);
    let mut codec = C::new();
    let mut expect = VoteData::with_payload(payload);
    let mut n = 0;
    while let Some(frame) = reader.read_frame()? {
        expect.set(seed, n);
        codec.decode(frame, &expect, Envelope::Request).with_context(|| format!("server: request {n}"))?;
        let reply = codec.encode(&expect, Envelope::Response)?;
        writer.write_frame(reply)?;
        n += 1;
    }
    Ok(n)
}

impl<C: Codec, N: Named> Transport for Framed<C, N> {
    const ID: registry::Transport = N::ID;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || -> Result<u64> {
            let (sock, _) = listener.accept()?;
            sock.set_nodelay(true)?;
            serve::<C>(sock, seed, payload)
        });
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        Ok(Framed {
            client: C::new(),
            reader: FrameReader::new(sock.try_clone()?),
            writer: FrameWriter::new(sock),
            server: Some(server),
            _name: PhantomData,
        })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let req = self.client.encode(v, Envelope::Request)?;
        self.writer.write_frame(req)?;
        let reply = self.reader.read_frame()?.context("server closed the connection")?;
        self.client.decode(reply, v, Envelope::Response)
    }
}

impl<C: Codec, N> Drop for Framed<C, N> {
    fn drop(&mut self) {
        let _ = self.writer.get_ref().shutdown(Shutdown::Both);
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}

pub struct ZapName;
impl Named for ZapName {
    const ID: registry::Transport = registry::Transport::ZapFramed;
}
pub struct FlatBuffersName;
impl Named for FlatBuffersName {
    const ID: registry::Transport = registry::Transport::FlatBuffersTcp;
}
pub struct CapnpName;
impl Named for CapnpName {
    const ID: registry::Transport = registry::Transport::CapnpTcp;
}
pub struct ProtobufName;
impl Named for ProtobufName {
    const ID: registry::Transport = registry::Transport::ProtobufTcp;
}

pub type ZapFramed = Framed<ZapCodec, ZapName>;
pub type FlatBuffersTcp = Framed<FlatBuffers, FlatBuffersName>;
pub type CapnpTcp = Framed<Capnp, CapnpName>;
pub type ProtobufTcp = Framed<Protobuf, ProtobufName>;
